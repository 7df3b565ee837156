package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/local"
	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/testutil"
	"github.com/openclaw/occ/internal/worker"
	"github.com/openclaw/occ/internal/workspace"
)

// localEnv is the embedded default for real: SQLite, the local Compute
// driver running real OpenClaw gateways, the real gateway client, and the
// worker running in the background on the real clock.
type localEnv struct {
	*deployEnv
	st      *sqlstore.Store
	driver  *local.Driver
	dataDir string
}

func newLocalEnv(t testing.TB) *localEnv {
	t.Helper()
	return newLocalEnvWith(t, nil)
}

// newLocalEnvWith is newLocalEnv with the driver's own log lines sent to
// logger (nil: discarded).
func newLocalEnvWith(t testing.TB, logger *slog.Logger) *localEnv {
	t.Helper()
	return newLocalEnvTraced(t, logger, !isBenchmark(t))
}

// newLocalEnvTraced is newLocalEnvWith with the server traced by the
// package's in-memory pipeline, or not, whether a test or a benchmark.
func newLocalEnvTraced(t testing.TB, logger *slog.Logger, traced bool) *localEnv {
	t.Helper()
	return newLocalEnvOn(t, nil, logger, traced)
}

// newLocalEnvOn is newLocalEnvTraced over st (nil: a new SQLite store).
func newLocalEnvOn(t testing.TB, st *sqlstore.Store, logger *slog.Logger, traced bool) *localEnv {
	t.Helper()
	rt, err := gwtest.FindRuntime()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the OpenClaw runtime is required under CI: %v", err)
		}
		t.Skipf("no OpenClaw runtime: %v", err)
	}
	if st == nil {
		st = testdb.SQLite(t)
	}
	// The driver's gateways outlive the driver by design; a guarded
	// directory makes sure they die with this binary even when it is
	// killed or times out before the cleanups run.
	dataDir := guardedDataDir(t)
	d, err := local.New(local.Options{DataDir: dataDir, Runtime: local.Runtime{Node: rt.Node, OpenClaw: rt.OpenClaw}, Logger: logger})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = d.Shutdown(ctx)
	})
	de := newRealEnvTraced(t, st, d, traced)
	return &localEnv{deployEnv: de, st: st, driver: d, dataDir: dataDir}
}

// newRealEnv runs the server and its worker (in the background, on the
// real clock, with the real gateway client) over driver d, with a ready
// Namespace and a Configuration: what every real-driver end-to-end test
// starts from. Tests run it with the package's in-memory trace pipeline;
// benchmarks without one, as occ server runs by default (no OTEL_*
// variables): recording and storing every span of every operation
// measured OCC's tracing, not OCC. (A benchmark run together with tests,
// without -run '^$', inherits the global provider the tests installed.)
func newRealEnv(t testing.TB, st *sqlstore.Store, d compute.Driver) *deployEnv {
	t.Helper()
	return newRealEnvTraced(t, st, d, !isBenchmark(t))
}

// isBenchmark reports whether t is a benchmark's (which runs untraced).
func isBenchmark(t testing.TB) bool {
	_, bench := t.(*testing.B)
	return bench
}

// newRealEnvTraced is newRealEnv with tracing chosen by the caller.
func newRealEnvTraced(t testing.TB, st *sqlstore.Store, d compute.Driver, traced bool) *deployEnv {
	t.Helper()
	var tp trace.TracerProvider
	if traced {
		_, tp = testTraces()
	}
	files := newSwitchFiles(t)
	e := newEnvWith(t, st, server.Options{Driver: d, Files: files, Now: time.Now,
		Worker: worker.Options{Poll: 100 * time.Millisecond}, TracerProvider: tp})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = e.srv.Worker.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	de := &deployEnv{env: e, files: files}
	de.readyNamespace("real", map[string]any{"agents": map[string]any{"defaults": map[string]any{}}})
	return de
}

// deployed deploys the Agent and waits (6 min at most: a setup and a
// gateway start on a loaded 2-core machine) until the deployment
// succeeded; it returns the revision. On timeout it shows the deployment.
func (e *deployEnv) deployed(agent string) string {
	e.t.Helper()
	rev := e.deploy(agent)
	ctx, cancel := context.WithTimeout(testutil.Context(e.t), 6*time.Minute)
	defer cancel()
	if err := testutil.Poll(ctx, func() (bool, error) { return e.finished(agent, rev)(), nil }); err != nil {
		e.t.Fatalf("deployment %s did not finish: %v; last view %+v", rev, err, e.deployment(agent, rev))
	}
	if d := e.deployment(agent, rev); d.Status != "succeeded" {
		e.t.Fatalf("deployment %s = %+v; want succeeded", rev, d)
	}
	return rev
}

// waitFor waits until cond holds, at most d.
func (le *localEnv) waitFor(d time.Duration, cond func() bool) {
	le.t.Helper()
	testutil.Eventually(le.t, d, cond, "the local deployment's condition")
}

// guardedDataDir is a DataDir under this process's gwtest.GuardedDir,
// removed when the test ends.
func guardedDataDir(t testing.TB) string {
	t.Helper()
	root, err := guardedRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(root, "local-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

var guardedRoot = sync.OnceValues(func() (string, error) { return gwtest.GuardedDir("occ-server-test-") })

func (le *localEnv) agentDir(agentID string) string {
	sum := sha256.Sum256([]byte(agentID))
	return filepath.Join(le.dataDir, "agents", hex.EncodeToString(sum[:])[:12])
}

// procLeaks reports processes whose command line or environment holds
// any of the needles.
func procLeaks(t *testing.T, needles ...string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var leaks []string
	scanned := 0
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), f))
			if err != nil {
				continue // gone, or not ours to read
			}
			scanned++
			for _, n := range needles {
				if strings.Contains(string(b), n) {
					leaks = append(leaks, fmt.Sprintf("pid %s %s", e.Name(), f))
				}
			}
		}
	}
	if scanned < 10 {
		t.Fatalf("read only %d /proc entries; the scan proves nothing", scanned)
	}
	return leaks
}

// TestEmbeddedDefaultEndToEnd: create an Agent with four files, deploy it
// onto a real gateway, and check the workspace, the marker, the database,
// the processes, live reads and writes through the API, and that a user's
// edit survives a redeploy.
func TestEmbeddedDefaultEndToEnd(t *testing.T) {
	le := newLocalEnv(t)
	marker := "E2E-MARKER-5d1c"
	files := map[string]string{
		"AGENTS.md":   "# Agents " + marker + "\r\nCRLF kept\r\n",
		"SOUL.md":     "",
		"IDENTITY.md": "name: Ünïcode " + marker,
		"USER.md":     "user  " + marker + "  \n",
	}
	agent := le.createAgent("e2e", files)
	rev := le.deployed(agent)

	ws := filepath.Join(le.agentDir(agent), "workspace")
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(ws, name))
		if err != nil || string(got) != want {
			t.Errorf("workspace %s = %q, %v; want the submitted bytes %q", name, got, err, want)
		}
	}
	s, err := le.setup(agent)
	if err != nil || !s.Completed || s.Files != nil {
		t.Fatalf("setup record = %+v, %v; want completed without files", s, err)
	}
	wantMarker := workspace.Identity{ID: s.ID, NamespaceID: le.ns, AgentID: agent, DefaultsID: workspace.DefaultsID}.MarshalMarker()
	if got, err := os.ReadFile(filepath.Join(ws, workspace.MarkerName)); err != nil || string(got) != string(wantMarker) {
		t.Errorf("marker = %q, %v; want %q", got, err, wantMarker)
	}
	if hits := tablesWith(t, le.st, marker); len(hits) != 0 {
		t.Errorf("staged bytes remain in tables %v after activation", hits)
	}

	// No process shows the gateway token or any file content.
	token, err := os.ReadFile(filepath.Join(le.agentDir(agent), "token"))
	if err != nil || len(token) < 32 {
		t.Fatalf("token file: %v", err)
	}
	if leaks := procLeaks(t, strings.TrimSpace(string(token)), marker); len(leaks) > 0 {
		t.Errorf("secrets or content visible in: %v", leaks)
	}

	// Live files through the API, over the direct transport.
	base := "/namespaces/" + le.ns + "/agents/" + agent + "/workspace/files/"
	for name, want := range files {
		var got struct {
			Content string `json:"content"`
		}
		le.must("GET", base+name, nil, le.admin, 200, &got)
		if got.Content != want {
			t.Errorf("GET %s = %q, want %q", name, got.Content, want)
		}
	}

	// A user edits a file on disk; a redeploy keeps the edit.
	edited := "edited on disk after setup\n"
	if err := os.WriteFile(filepath.Join(ws, "USER.md"), []byte(edited), 0o600); err != nil {
		t.Fatal(err)
	}
	le.must("PATCH", "/namespaces/"+le.ns+"/agents/"+agent, map[string]any{"configurationId": le.cfg}, le.admin, 200, nil)
	rev2 := le.deployed(agent)
	if rev2 == rev {
		t.Fatal("redeploy returned the same revision")
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "USER.md")); string(got) != edited {
		t.Errorf("after redeploy USER.md = %q; want the user's edit %q", got, edited)
	}
	var got struct {
		Content string `json:"content"`
	}
	le.must("GET", base+"USER.md", nil, le.admin, 200, &got)
	if got.Content != edited {
		t.Errorf("GET USER.md after redeploy = %q, want %q", got.Content, edited)
	}

	t.Run("files", func(t *testing.T) { liveFileCases(t, le.deployEnv, ws, agent) })
	t.Run("traces", func(t *testing.T) { liveTraceCases(t, le, agent) })
	t.Run("mixed load", func(t *testing.T) {
		// The load's servers reach this Agent's gateway (the one real
		// gateway of the test) directly; their deployments are fake.
		ep, err := le.driver.Endpoint(t.Context(), compute.Revision{ID: rev2, NamespaceID: le.ns, AgentID: agent})
		if err != nil {
			t.Fatal(err)
		}
		mixedLoad(t, agentgw.Target{Transport: agentgw.Direct, URL: ep.URL, TokenFile: ep.TokenFile})
	})
	t.Run("permissions", func(t *testing.T) { liveFilePermissions(t, le.deployEnv, agent) })

	// Delete: the worker retires the gateway and removes the Agent's storage.
	le.must("DELETE", "/namespaces/"+le.ns+"/agents/"+agent, nil, le.admin, 202, nil)
	le.waitFor(2*time.Minute, func() bool {
		code, _, _ := le.do("GET", "/namespaces/"+le.ns+"/agents/"+agent, nil, le.admin)
		return code == 404
	})
	if _, err := os.Stat(le.agentDir(agent)); !os.IsNotExist(err) {
		t.Errorf("Agent directory still exists after delete: %v", err)
	}
}

// liveFileCases runs the workspace file rules against the real gateway
// of any driver; ws is the Agent's workspace directory on this host.
func liveFileCases(t *testing.T, le *deployEnv, ws, agent string) {
	fe := &filesEnv{deployEnv: le, agent: agent, base: "/namespaces/" + le.ns + "/agents/" + agent + "/workspace/files/"}
	for _, name := range workspace.Names {
		content := "written through OCC: " + name
		rec, env := fe.put(name, `{"content":"`+content+`"}`, nil)
		if rec.Code != 200 || rec.Header().Get("ETag") != `"`+digest.Of(content)+`"` {
			t.Fatalf("PUT %s: %d %+v", name, rec.Code, env.Error)
		}
		if got, _ := os.ReadFile(filepath.Join(ws, name)); string(got) != content {
			t.Errorf("disk %s = %q after PUT", name, got)
		}
	}
	if err := os.Remove(filepath.Join(ws, "SOUL.md")); err != nil {
		t.Fatal(err)
	}
	if code, env, _ := fe.do("GET", fe.base+"SOUL.md", nil, fe.admin); code != 404 || env.Error.Code != "NOT_FOUND" {
		t.Errorf("missing file: %d %+v", code, env.Error)
	}
	long := strings.Repeat("é", 8192) // 16,384 UTF-8 bytes
	for _, tc := range []struct {
		name, body string
		headers    map[string]string
		want       int
	}{
		{"16 KiB", `{"content":"` + long + `"}`, nil, 200},
		{"16 KiB + 1", `{"content":"` + long + `x"}`, nil, 400},
		{"NUL", `{"content":"a\u0000b"}`, nil, 400},
		{"lone surrogate", `{"content":"a\udc00b"}`, nil, 400},
		{"CAS current", `{"content":"cas"}`, map[string]string{"If-Match": `"` + digest.Of(long) + `"`}, 200},
		{"CAS stale", `{"content":"cas2"}`, map[string]string{"If-Match": `"` + digest.Of(long) + `"`}, 412},
	} {
		rec, env := fe.put("AGENTS.md", tc.body, tc.headers)
		if rec.Code != tc.want {
			t.Errorf("%s: %d %+v, want %d", tc.name, rec.Code, env.Error, tc.want)
		}
		if tc.want == 412 && !strings.Contains(rec.Body.String(), digest.Of("cas")) {
			t.Errorf("412 lacks the current hash: %s", rec.Body.String())
		}
	}
	var got struct {
		Content string `json:"content"`
	}
	fe.must("GET", fe.base+"AGENTS.md", nil, fe.admin, 200, &got)
	if got.Content != "cas" {
		t.Errorf("AGENTS.md = %q after CAS, want %q", got.Content, "cas")
	}
	// Against the real gateway every write that was sent has its
	// write-ahead attempt and an outcome naming it; none stays unresolved.
	rows := writeRows(t, fe.fileEvents(""), nil)
	var outcomes []string
	for _, r := range rows {
		outcomes = append(outcomes, r.Outcome+"/"+r.Reason)
	}
	wantOutcomes := []string{"success/", "success/", "success/", "success/", "success/", "success/", "failure/PRECONDITION_FAILED"}
	if diff := cmp.Diff(wantOutcomes, outcomes); diff != "" {
		t.Errorf("file write attempts and outcomes, oldest first (-want +got):\n%s", diff)
	}
	if pending := fe.fileEvents("&withoutOutcome=true"); len(pending) != 0 {
		t.Errorf("attempts without outcome after the writes: %+v", pending)
	}
	// An undeployed Agent has no active revision.
	other := le.createAgent("no-revision", nil)
	if code, env, _ := fe.do("GET", "/namespaces/"+le.ns+"/agents/"+other+"/workspace/files/SOUL.md", nil, fe.admin); code != 503 {
		t.Errorf("no active revision: %d %+v, want 503", code, env.Error)
	}
}

// liveFilePermissions: each permission case against the real gateway.
func liveFilePermissions(t *testing.T, le *deployEnv, agent string) {
	base := "/namespaces/" + le.ns + "/agents/" + agent + "/workspace/files/AGENTS.md"
	_, nobody := le.user("nobody@example.com", "")
	_, viewer := le.user("viewer@example.com", authz.RoleViewerID)
	opID, operator := le.user("operator@example.com", authz.RoleEditorID)
	var other idOnly
	le.must("POST", "/namespaces", map[string]string{"name": "elsewhere"}, le.admin, 201, &other)
	_, _, nsKey := le.principal("elsewhere-key", authz.RoleAdministratorID, other.ID)
	body := map[string]string{"content": "perm"}
	cases := []struct {
		name     string
		c        cred
		get, put int
	}{
		{"no grant", nobody, 404, 404},
		{"viewer", viewer, 200, 403},
		{"editor", operator, 200, 200},
		{"key of another namespace", nsKey, 403, 403},
		{"anonymous", cred{}, 401, 401},
	}
	for _, tc := range cases {
		if code, _, _ := le.do("GET", base, nil, tc.c); code != tc.get {
			t.Errorf("%s GET: %d, want %d", tc.name, code, tc.get)
		}
		if code, _, _ := le.do("PUT", base, body, tc.c); code != tc.put {
			t.Errorf("%s PUT: %d, want %d", tc.name, code, tc.put)
		}
	}
	// A deny restriction on operate wins over the editor role.
	le.must("POST", "/iam/restrictions", map[string]string{"subjectId": opID, "action": "operate", "resourceKind": "agent",
		"namespaceId": le.ns, "resourceId": agent}, le.admin, 201, nil)
	if code, _, _ := le.do("PUT", base, body, operator); code != 403 {
		t.Errorf("restricted editor PUT: %d, want 403", code)
	}
	// Stopped: reads still work, writes 409.
	le.must("POST", "/namespaces/"+le.ns+"/agents/"+agent+"/stop", nil, le.admin, 202, nil)
	if code, env, _ := le.do("PUT", base, body, le.admin); code != 409 || env.Error.Code != "RESOURCE_CONFLICT" {
		t.Errorf("PUT while stopped: %d %+v", code, env.Error)
	}
}
