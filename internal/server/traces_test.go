package server_test

import (
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"

	"go.opentelemetry.io/otel"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// testTraces is the package's one in-memory trace pipeline, installed as
// the global provider on first use (the domain packages' tracers follow
// the first global provider set, so there is exactly one per process).
// It records every span while tracesOff is false.
var testTraces = sync.OnceValues(func() (*tracetest.InMemoryExporter, *sdktrace.TracerProvider) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp), sdktrace.WithSampler(switchedSampler{}))
	otel.SetTracerProvider(tp)
	sqlstore.SetTracerProvider(tp)
	return exp, tp
})

// tracesOff makes testTraces' provider record nothing: a benchmark that
// traces sets it when done, so that the benchmarks after it in the same
// process measure OCC, not its tracing (the provider cannot be undone).
var tracesOff atomic.Bool

type switchedSampler struct{}

func (switchedSampler) ShouldSample(p sdktrace.SamplingParameters) sdktrace.SamplingResult {
	if tracesOff.Load() {
		return sdktrace.SamplingResult{Decision: sdktrace.Drop}
	}
	return sdktrace.AlwaysSample().ShouldSample(p)
}

func (switchedSampler) Description() string { return "AlwaysOnUntilTracesOff" }

// liveTraceCases writes and reads a file through the server and the real
// gateway with tracing on, then checks the span tree (request → domain →
// store and gateway client, one trace) and scans every exported span's
// name, attributes, events, links and status for the file's bytes, its
// hash, the gateway token and the session cookie.
func liveTraceCases(t *testing.T, le *localEnv, agent string) {
	exp, _ := testTraces()
	token, err := os.ReadFile(filepath.Join(le.agentDir(agent), "token"))
	if err != nil || len(token) < 32 {
		t.Fatalf("token file: %v", err)
	}
	fe := &filesEnv{deployEnv: le.deployEnv, agent: agent, base: "/namespaces/" + le.ns + "/agents/" + agent + "/workspace/files/"}
	content := "TRACE-CONTENT-9b41e0 never on a span"
	exp.Reset()
	if rec, env := fe.put("SOUL.md", `{"content":"`+content+`"}`, nil); rec.Code != 200 {
		t.Fatalf("PUT: %d %+v", rec.Code, env.Error)
	}
	var got struct {
		Content string `json:"content"`
	}
	fe.must("GET", fe.base+"SOUL.md", nil, fe.admin, 200, &got)
	if got.Content != content {
		t.Fatalf("GET = %q", got.Content)
	}
	spans := exp.GetSpans()

	byID := map[trace.SpanID]tracetest.SpanStub{}
	for _, s := range spans {
		byID[s.SpanContext.SpanID()] = s
	}
	// ancestors lists the names from s up to its root.
	ancestors := func(s tracetest.SpanStub) []string {
		var names []string
		for i := 0; i < 20; i++ {
			names = append(names, s.Name)
			p, ok := byID[s.Parent.SpanID()]
			if !ok {
				break
			}
			s = p
		}
		return names
	}
	const route = "/namespaces/{ns}/agents/{agentId}/workspace/files/{name}"
	for _, want := range []struct{ leaf, domain, root string }{
		{"agentgw.set", "occ.PutWorkspaceFile", "PUT " + route},
		{"agentgw.get", "occ.GetWorkspaceFile", "GET " + route},
	} {
		found := false
		for _, s := range spans {
			if s.Name != want.leaf {
				continue
			}
			found = true
			chain := ancestors(s)
			if len(chain) < 3 || chain[1] != want.domain || chain[len(chain)-1] != want.root {
				t.Errorf("%s ancestry %v; want %s under %s under %s", want.leaf, chain, want.leaf, want.domain, want.root)
			}
		}
		if !found {
			t.Errorf("no %s span", want.leaf)
		}
	}
	db := 0
	for _, s := range spans {
		if strings.HasPrefix(s.Name, "db.") {
			if chain := ancestors(s); strings.HasPrefix(chain[len(chain)-1], "PUT "+route) || strings.HasPrefix(chain[len(chain)-1], "GET "+route) {
				db++
			}
		}
	}
	if db == 0 {
		t.Error("no store span under the file requests")
	}

	secrets := map[string]string{
		"content":        content,
		"content prefix": "TRACE-CONTENT",
		"content hash":   digest.Of(content),
		"gateway token":  strings.TrimSpace(string(token)),
		"session cookie": fe.admin.cookie.Value,
	}
	for _, s := range spans {
		var texts []string
		texts = append(texts, s.Name, s.Status.Description)
		for _, a := range s.Attributes {
			texts = append(texts, string(a.Key), a.Value.String())
		}
		for _, ev := range s.Events {
			texts = append(texts, ev.Name)
			for _, a := range ev.Attributes {
				texts = append(texts, string(a.Key), a.Value.String())
			}
		}
		for _, l := range s.Links {
			for _, a := range l.Attributes {
				texts = append(texts, string(a.Key), a.Value.String())
			}
		}
		for _, a := range s.Resource.Attributes() {
			texts = append(texts, a.Value.String())
		}
		all := strings.Join(texts, "\x00")
		for what, secret := range secrets {
			if strings.Contains(all, secret) {
				t.Errorf("span %q holds the %s", s.Name, what)
			}
		}
	}
	t.Logf("%d spans exported for one PUT and one GET", len(spans))
}

// TestSignedInReadQueries: a GET of one Namespace sends the store two
// statements, the credential with its subject's grants and restrictions
// (store.GetSessionAccess for a session, store.GetAPIKeyAccess for a key,
// which also brings the key's principal), then the Namespace: the checks
// read no grants of their own, because the request's memo started with
// what came with the credential. Counted from the store's spans, on both
// engines. (A key's first use in a minute also records it: the key here
// is used once before the counted request.) On PostgreSQL the request
// also asks once for the database's snapshot (the read cache's check;
// one per request, its read scope), and both reads miss: each credential
// was last read before a write.
func TestSignedInReadQueries(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		exp, tp := testTraces()
		e := newEnvWith(t, st, server.Options{TracerProvider: tp})
		var ns idOnly
		e.must("POST", "/namespaces", map[string]string{"name": "queries"}, e.admin, 201, &ns)
		_, _, key := e.principal("queries", authz.RoleAdministratorID, "")
		e.must("GET", "/namespaces/"+ns.ID, nil, key, 200, nil)
		for _, c := range []struct {
			name string
			cred cred
			from string // what the first statement reads
		}{{"session", e.admin, "FROM sessions"}, {"api key", key, "FROM api_keys"}} {
			exp.Reset()
			e.must("GET", "/namespaces/"+ns.ID, nil, c.cred, 200, nil)
			var queries []string
			snapshots := 0
			for _, s := range exp.GetSpans() {
				if !strings.HasPrefix(s.Name, "db.") {
					continue
				}
				for _, a := range s.Attributes {
					if a.Key != "db.query.text" {
						continue
					}
					if strings.Contains(a.Value.AsString(), "pg_current_snapshot()") {
						snapshots++
						continue
					}
					queries = append(queries, a.Value.AsString())
				}
			}
			if want := map[string]int{sqlstore.EngineSQLite: 0, sqlstore.EnginePostgres: 1}[st.Engine()]; snapshots != want {
				t.Errorf("%s: a GET of one Namespace asked for the snapshot %d times, want %d", c.name, snapshots, want)
			}
			if len(queries) != 2 ||
				!strings.Contains(queries[0], c.from) || !strings.Contains(queries[0], "iam_access_bindings") ||
				!strings.Contains(queries[1], "FROM namespaces") || strings.Contains(queries[1], "iam_") {
				t.Errorf("%s: a GET of one Namespace sent %d statements, want 2 (the credential with the grants, then the Namespace):\n%s",
					c.name, len(queries), strings.Join(queries, "\n---\n"))
			}
		}
	})
}

// TestReadScopePerRequest: on PostgreSQL an API request asks for the
// database's snapshot once (sqlstore.WithReadScope), though its session
// lookup and the page it reads both go through the read cache. (That a
// request's own write ends its scope is sqlstore's TestReadScope.)
func TestReadScopePerRequest(t *testing.T) {
	exp, tp := testTraces()
	e := newEnvWith(t, testdb.Postgres(t), server.Options{TracerProvider: tp})
	var ns idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "scope"}, e.admin, 201, &ns)
	count := func() (snapshots, statements int) {
		for _, s := range exp.GetSpans() {
			for _, a := range s.Attributes {
				if a.Key == "db.query.text" {
					statements++
					if strings.Contains(a.Value.AsString(), "pg_current_snapshot()") {
						snapshots++
					}
				}
			}
		}
		return snapshots, statements
	}
	for _, path := range []string{"/namespaces", "/namespaces/" + ns.ID + "/agents"} {
		for i := range 2 { // a miss, then (unless another test commits meanwhile) a hit
			exp.Reset()
			e.must("GET", path, nil, e.admin, 200, nil)
			if snapshots, statements := count(); snapshots != 1 {
				t.Errorf("GET %s (%d): %d snapshot statements of %d, want 1", path, i, snapshots, statements)
			}
		}
	}
}
