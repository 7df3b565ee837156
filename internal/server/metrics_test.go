package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/telemetry"
	"github.com/openclaw/occ/internal/testdb"
)

func httpGet(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

var labelRE = regexp.MustCompile(`(\w+)="([^"]*)"`)

// labelValues returns the distinct values of label in the samples of name.
func labelValues(body, name, label string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if !strings.HasPrefix(l, name+"{") {
			continue
		}
		for _, m := range labelRE.FindAllStringSubmatch(l[:strings.LastIndexByte(l, '}')], -1) {
			if m[1] == label && !slices.Contains(out, m[2]) {
				out = append(out, m[2])
			}
		}
	}
	slices.Sort(out)
	return out
}

// TestMetricsAfterRealRequests drives the real server (on each engine, the
// fake Compute driver, the worker) and scrapes the metrics listener: route
// labels are patterns, never the ids in the paths; the queue depth counts
// queued work; the worker, audit, database pool and runtime series exist.
// The API handler itself serves neither /metrics nor /debug/pprof.
func TestMetricsAfterRealRequests(t *testing.T) {
	testdb.Engines(t, metricsAfterRealRequests)
}

func metricsAfterRealRequests(t *testing.T, st *sqlstore.Store) {
	m := telemetry.NewMetrics()
	m.RegisterDB(st.DB())
	m.RegisterQueueDepth(st.QueueDepth, string(store.WorkQueued), string(store.WorkRunning))
	audited := &failingAudit{Store: st}
	d := fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}})
	e := newEnvWith(t, audited, server.Options{Driver: d, Metrics: m, Files: gwtest.NewMemFiles()})
	de := &deployEnv{env: e, driver: d}
	ln, err := telemetry.Listen("127.0.0.1:0", m, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		_ = ln.Close(ctx)
	})
	var ns idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "metrics"}, e.admin, 201, &ns)
	de.ns = ns.ID
	if _, body := httpGet(t, "http://"+ln.Addr()+"/metrics"); !strings.Contains(body, `occ_worker_queue_depth{state="queued"} 1`) {
		t.Errorf("queue depth after one enqueued Namespace:\n%s", grepLines(body, "occ_worker_queue_depth"))
	}
	de.runUntil(func() bool {
		var got struct{ Status string }
		e.must("GET", "/namespaces/"+ns.ID, nil, e.admin, 200, &got)
		return got.Status == "ready"
	})
	var c idOnly
	e.must("POST", "/namespaces/"+ns.ID+"/configurations",
		map[string]any{"name": "base", "kind": "agent", "document": map[string]any{"agents": map[string]any{}}}, e.admin, 201, &c)
	de.cfg = c.ID
	agent := de.createAgent("metered", nil)
	rev := de.deploy(agent)
	de.runUntil(de.finished(agent, rev))
	missing := ids.New(ids.Namespace)
	if code, _, _ := e.do("GET", "/namespaces/"+missing, nil, e.admin); code != 404 {
		t.Fatalf("unknown namespace: %d", code)
	}
	// A workspace write whose audit record cannot be written.
	fe := &filesEnv{deployEnv: de, agent: agent, base: "/namespaces/" + ns.ID + "/agents/" + agent + "/workspace/files/"}
	audited.fail.Store(true)
	if rec, _ := fe.put("SOUL.md", `{"content":"unaudited"}`, nil); rec.Code < 500 {
		t.Fatalf("PUT with failing audit: %d, want a 5xx", rec.Code)
	}
	audited.fail.Store(false)

	code, body := httpGet(t, "http://"+ln.Addr()+"/metrics")
	if code != 200 {
		t.Fatalf("scrape: %d", code)
	}
	for _, id := range []string{ns.ID, agent, rev, c.ID, missing} {
		if strings.Contains(body, id) {
			t.Errorf("id %s appears in the metrics", id)
		}
	}
	// Every route label is a registered pattern (or "unmatched").
	known := map[string]bool{"unmatched": true}
	for _, rt := range e.srv.Routes {
		known[rt.Path] = true
	}
	routes := labelValues(body, "occ_http_requests_total", "route")
	for _, r := range routes {
		if !known[r] {
			t.Errorf("route label %q is not a registered route pattern", r)
		}
	}
	for _, r := range []string{"/namespaces/{ns}", "/namespaces", "/api/auth/sign-in/email"} {
		if !slices.Contains(routes, r) {
			t.Errorf("no series for route %s; have %v", r, routes)
		}
	}
	for _, want := range []string{
		`occ_http_requests_total{code="200",method="GET",route="/namespaces/{ns}"}`,
		`occ_http_requests_total{code="404",method="GET",route="/namespaces/{ns}"}`,
		`occ_worker_claims_total{kind="namespace.reconcile"} 1`,
		`occ_worker_work_finished_total{kind="namespace.reconcile",state="succeeded"} 1`,
		`occ_worker_work_finished_total{kind="revision.deploy",state="succeeded"} 1`,
		`occ_worker_deployment_duration_seconds_count{driver="` + d.ID() + `",outcome="succeeded"} 1`,
		`occ_worker_driver_call_duration_seconds_count{call="EnsureNamespace",driver="` + d.ID() + `",outcome="ok"} 1`,
		`occ_worker_driver_call_duration_seconds_count{call="ActivateRevision",driver="` + d.ID() + `",outcome="ok"} 1`,
		`occ_audit_write_failures_total{kind="mutation"} 1`,
		`occ_http_requests_total{code="503",method="PUT",route="/namespaces/{ns}/agents/{agentId}/workspace/files/{name}"} 1`,
		`occ_worker_queue_depth{state="queued"}`,
		`occ_worker_queue_depth{state="running"} 0`,
		`go_sql_open_connections{db_name="occ"}`,
		`go_goroutines`,
		`process_resident_memory_bytes`,
	} {
		if !strings.Contains(body, want) {
			t.Errorf("scrape lacks %s", want)
		}
	}

	// The API handler, on a real listener, has no metrics or profiles.
	api := httpTestServer(t, e.srv.Handler())
	for _, p := range []string{"/metrics", "/debug/pprof/", "/debug/pprof/heap", "/debug/pprof/cmdline"} {
		if code, body := httpGet(t, api.URL+p); code != 404 || strings.Contains(body, "go_goroutines") {
			t.Errorf("API listener GET %s = %d; want 404", p, code)
		}
	}
	if code, _ := httpGet(t, "http://"+ln.Addr()+"/debug/pprof/"); code != 200 {
		t.Errorf("metrics listener pprof index = %d, want 200", code)
	}
}

func grepLines(body, prefix string) string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, prefix) {
			out = append(out, l)
		}
	}
	return strings.Join(out, "\n")
}
