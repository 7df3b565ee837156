package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/agentdir"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/setuprunner"
	"github.com/openclaw/occ/internal/testutil"
	"github.com/openclaw/occ/internal/workspace"
)

// standInGatewayRuntime is a runtime whose gateway is this test binary
// (standInGateway): it listens on --port and answers every request 200.
func standInGatewayRuntime(t *testing.T) Runtime {
	t.Helper()
	self, err := os.Executable()
	mustDo(t, "find the test binary", err)
	return standIn(t, envStandInGateway+"=1 exec '"+strings.ReplaceAll(self, "'", `'\''`)+`' "$@"`)
}

// endpointPort is the port the driver's Endpoint names.
func endpointPort(t *testing.T, d *testDriver, rev compute.Revision) int {
	t.Helper()
	ep, err := d.Endpoint(ctxT(t, 10*time.Second), rev)
	mustDo(t, "Endpoint", err)
	p, err := strconv.Atoi(strings.TrimSuffix(strings.TrimPrefix(ep.URL, "ws://127.0.0.1:"), "/"))
	mustDo(t, "parse the Endpoint's port", err)
	return p
}

// TestRestartMovesOffATakenPort: a serving gateway crashes and, during
// the restart backoff, another process binds its port and answers
// /readyz 200 there. The restart must check the port again and move the
// Agent to a new one (port file, so the Endpoint; rendered configuration;
// pid file) instead of restarting on the taken port until the revision
// fails RUNTIME_FAILED; and the foreign listener must never pass for the
// gateway. Without the check in spawn every restart exits "address in
// use" and the revision fails after five starts.
func TestRestartMovesOffATakenPort(t *testing.T) {
	td := newTestDriver(t, standInGatewayRuntime(t), "", func(o *Options) { o.StopGrace = time.Second })
	ta := newTestAgent()
	rev := ta.revision(1, "")
	none := compute.RevisionContext{}
	waitReady(t, td, rev, none, 30*time.Second)
	mustDo(t, "ActivateRevision", td.ActivateRevision(ctxT(t, 10*time.Second), rev, none))
	old := endpointPort(t, td, rev)
	pid, _, ok := runningPID(td.dir, ta.agent.ID)
	if !ok {
		t.Fatal("no gateway running")
	}

	mustDo(t, "kill -9", syscall.Kill(pid, syscall.SIGKILL))
	// Bind the port as soon as the dead gateway lets go of it: well
	// within the first restart's 1 s backoff.
	var foreign net.Listener
	testutil.Eventually(t, 5*time.Second, func() bool {
		var err error
		foreign, err = net.Listen("tcp4", net.JoinHostPort("127.0.0.1", strconv.Itoa(old)))
		return err == nil
	}, "the crashed gateway's port to be free")
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(foreign) }()
	defer srv.Close()

	// Poll like the worker. The gateway is dead (its port was free), so
	// any Ready from now on must be the restarted gateway, and the
	// Endpoint must then name its port, not the foreign listener's.
	ctx := ctxT(t, 30*time.Second)
	for {
		res, err := td.PrepareRevision(ctx, rev, none)
		if p, ok := compute.AsPermanent(err); ok {
			t.Fatalf("PrepareRevision after the port was taken: permanent %s: %v", p.Code, err)
		}
		if ctx.Err() != nil {
			b, _ := os.ReadFile(filepath.Join(agentDirOf(td.dir, ta.agent.ID), "gateway.log"))
			t.Fatalf("not ready again within 30 s: %+v, %v; gateway.log:\n%s", res, err, b)
		}
		if err == nil && res.Ready {
			if p := endpointPort(t, td, rev); p == old {
				t.Fatalf("Ready while the Endpoint names port %d, which the foreign listener holds", old)
			}
			break
		}
		time.Sleep(100 * time.Millisecond)
	}

	port := endpointPort(t, td, rev)
	dir := agentDirOf(td.dir, ta.agent.ID)
	pid2, cfgPath, ok := runningPID(td.dir, ta.agent.ID)
	if !ok || pid2 == pid {
		t.Fatalf("after the restart: pid %d (ok %t), want a new gateway (old %d)", pid2, ok, pid)
	}
	if owned, checked := listenerOwned(pid2, port); !owned || !checked {
		t.Errorf("the Endpoint's port %d is not the restarted gateway's listener (owned %t, checked %t)", port, owned, checked)
	}
	if pf, _ := (&agent{dir: dir}).readPIDFile(); pf.Port != port {
		t.Errorf("pid file port %d, want %d", pf.Port, port)
	}
	if want := filepath.Join(dir, "revisions", agentdir.Hash(rev.ID), "openclaw.json"); cfgPath != want {
		t.Errorf("the gateway runs %s, want %s", cfgPath, want)
	}
	b, err := os.ReadFile(cfgPath)
	mustDo(t, "read the rendered configuration", err)
	var doc struct {
		Gateway struct {
			Port int `json:"port"`
		} `json:"gateway"`
	}
	mustDo(t, "decode the rendered configuration", json.Unmarshal(b, &doc))
	if doc.Gateway.Port != port {
		t.Errorf("rendered gateway.port %d, want %d", doc.Gateway.Port, port)
	}
	if !isServing(td.dir, rev) {
		t.Error("the revision is not serving after the restart")
	}
}

// writeStandInPackage makes rt's openclaw.mjs look like an OpenClaw
// package to the setup runner (package.json and the four templates), so a
// setup run gets as far as native setup, which rt's "node" runs.
func writeStandInPackage(t *testing.T, rt Runtime) {
	t.Helper()
	root := filepath.Dir(rt.OpenClaw)
	mustDo(t, "package.json", os.WriteFile(filepath.Join(root, "package.json"), []byte(`{"name":"openclaw"}`), 0o644))
	tmpl := filepath.Join(root, "docs", "reference", "templates")
	mustDo(t, "templates", os.MkdirAll(tmpl, 0o755))
	for _, n := range workspace.Names {
		mustDo(t, "template", os.WriteFile(filepath.Join(tmpl, n), []byte("# "+n+"\n"), 0o644))
	}
}

// TestSetupTimeoutIsRetryable: a native setup that outlives SetupTimeout
// (1 ms here; the stand-in's setup sleeps) says nothing about the payload
// or the workspace, so PrepareRevision fails retryably, not with a
// permanent WORKSPACE_SETUP_FAILED. A payload the runner refuses stays
// permanent.
func TestSetupTimeoutIsRetryable(t *testing.T) {
	rt := standIn(t, `if [ "$2" = setup ]; then exec sleep 30; fi; exit 1`)
	writeStandInPackage(t, rt)
	td := newTestDriver(t, rt, "", func(o *Options) { o.SetupTimeout = time.Millisecond; o.StopGrace = time.Second })
	ta := newTestAgent()

	rc := compute.RevisionContext{WorkspaceSetup: ta.pendingSetup(map[string]string{"SOUL.md": "calm"})}
	_, err := td.PrepareRevision(ctxT(t, 30*time.Second), ta.revision(1, ""), rc)
	if err == nil {
		t.Fatal("PrepareRevision with a native setup that times out succeeded")
	}
	if p, ok := compute.AsPermanent(err); ok {
		t.Fatalf("a native setup timeout is permanent %s (%v); want a retryable error", p.Code, err)
	}
	if !errors.Is(err, setuprunner.ErrFailed) || !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), "native-setup-1: timeout") {
		t.Errorf("PrepareRevision = %v; want the runner's native setup timeout", err)
	}

	// Control: a file the payload may not carry is refused for good.
	rc = compute.RevisionContext{WorkspaceSetup: ta.pendingSetup(map[string]string{"NOTES.md": "x"})}
	_, err = td.PrepareRevision(ctxT(t, 30*time.Second), ta.revision(2, ""), rc)
	if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeWorkspaceSetupFailed {
		t.Errorf("PrepareRevision with an unknown file = %v; want permanent %s", err, compute.CodeWorkspaceSetupFailed)
	}
}

// TestSetupFailureClasses: which runner failures are retryable. The
// runner wraps ErrFailed and, for failures of the host, the cause.
func TestSetupFailureClasses(t *testing.T) {
	runner := func(cause error) error { return fmt.Errorf("%w: %w", setuprunner.ErrFailed, cause) }
	pathErr := func(errno syscall.Errno) error { return &fs.PathError{Op: "open", Path: "/w/SOUL.md", Err: errno} }
	signaled := exec.Command("sh", "-c", "kill -9 $$").Run()
	exited := exec.Command("sh", "-c", "exit 3").Run()
	for _, c := range []struct {
		name      string
		err       error
		transient bool
	}{
		{"native setup timeout", runner(context.DeadlineExceeded), true},
		{"EMFILE", runner(pathErr(syscall.EMFILE)), true},
		{"ENOSPC", runner(pathErr(syscall.ENOSPC)), true},
		{"EIO", runner(pathErr(syscall.EIO)), true},
		{"native setup killed by a signal", runner(signaled), true},
		{"rule broken (no cause)", setuprunner.ErrFailed, false},
		{"symbolic link met with O_NOFOLLOW", runner(pathErr(syscall.ELOOP)), false},
		{"runtime missing", runner(pathErr(syscall.ENOENT)), false},
		{"native setup exit status", runner(exited), false},
	} {
		if got := setupTransient(c.err); got != c.transient {
			t.Errorf("%s: setupTransient = %t, want %t", c.name, got, c.transient)
		}
		_, permanent := compute.AsPermanent((&Driver{}).setupError(context.Background(), "apply", c.err))
		if permanent == c.transient {
			t.Errorf("%s: setupError permanent = %t, want %t", c.name, permanent, !c.transient)
		}
	}
}

// TestTransientVerifyFailureBeforeRestart: the verifier failing for a
// reason outside the workspace (here the runner's own timeout: Verify
// called with a context that has already ended) when a serving gateway is
// restarted must not end the revision; the supervisor waits and verifies
// again, and the gateway serves once the verifier passes. A marker that
// is gone still ends it for good.
func TestTransientVerifyFailureBeforeRestart(t *testing.T) {
	td := newTestDriver(t, standInGatewayRuntime(t), "", func(o *Options) { o.StopGrace = time.Second })
	ta := newTestAgent()
	rev := ta.revision(1, "")
	none := compute.RevisionContext{}
	a := td.agent(ta.agent.ID)
	mustDo(t, "ensureLayout", a.ensureLayout(ta.ns.ID))
	id := workspace.Setup{ID: ids.New(ids.WorkspaceSetup), NamespaceID: ta.ns.ID, AgentID: ta.agent.ID, Completed: true}
	mustDo(t, "write the setup identity", a.files().WriteIdentity(id))
	marker := filepath.Join(a.path(dirWorkspace), workspace.MarkerName)
	mustDo(t, "write the marker", os.WriteFile(marker, id.Identity().MarshalMarker(), 0o600))

	var failing atomic.Int32
	td.verifySetup = func(ctx context.Context, s workspace.Setup, o setuprunner.Options) error {
		if failing.Load() > 0 {
			failing.Add(-1)
			ended, cancel := context.WithDeadline(ctx, time.Now())
			defer cancel()
			return setuprunner.Verify(ended, s, o)
		}
		return setuprunner.Verify(ctx, s, o)
	}
	waitReady(t, td, rev, none, 30*time.Second)
	mustDo(t, "ActivateRevision", td.ActivateRevision(ctxT(t, 10*time.Second), rev, none))

	crash := func() int {
		pid, _, ok := runningPID(td.dir, ta.agent.ID)
		if !ok {
			t.Fatal("no gateway running")
		}
		mustDo(t, "kill -9", syscall.Kill(pid, syscall.SIGKILL))
		testutil.Eventually(t, 10*time.Second, func() bool { return !procAlive(pid, 0) }, "the gateway to die")
		return pid
	}
	failing.Store(2)
	pid := crash()
	waitReady(t, td, rev, none, time.Minute)
	if n := failing.Load(); n != 0 {
		t.Errorf("%d injected verifier failures left: the restart did not verify", n)
	}
	if p, _, ok := runningPID(td.dir, ta.agent.ID); !ok || p == pid {
		t.Errorf("after the restart: pid %d (ok %t), want a new gateway (old %d)", p, ok, pid)
	}

	mustDo(t, "remove the marker", os.Remove(marker))
	crash()
	if code := waitPermanent(t, td, rev, none, 30*time.Second); code != compute.CodeWorkspaceSetupFailed {
		t.Errorf("restart without the marker: %s, want %s", code, compute.CodeWorkspaceSetupFailed)
	}
}

// TestMalformedIdentityBeforeRestart: a setup identity file that cannot
// be parsed when a serving gateway is restarted ends the revision with a
// permanent WORKSPACE_SETUP_FAILED, as a marker that is gone does: the
// file reads the same on every retry. Before, every Identity() error was
// taken for a transient one, and the supervisor verified again in backoff
// for ever while PrepareRevision answered pending.
func TestMalformedIdentityBeforeRestart(t *testing.T) {
	td := newTestDriver(t, standInGatewayRuntime(t), "", func(o *Options) { o.StopGrace = time.Second })
	ta := newTestAgent()
	rev := ta.revision(1, "")
	none := compute.RevisionContext{}
	a := td.agent(ta.agent.ID)
	mustDo(t, "ensureLayout", a.ensureLayout(ta.ns.ID))
	id := workspace.Setup{ID: ids.New(ids.WorkspaceSetup), NamespaceID: ta.ns.ID, AgentID: ta.agent.ID, Completed: true}
	mustDo(t, "write the setup identity", a.files().WriteIdentity(id))
	marker := filepath.Join(a.path(dirWorkspace), workspace.MarkerName)
	mustDo(t, "write the marker", os.WriteFile(marker, id.Identity().MarshalMarker(), 0o600))
	waitReady(t, td, rev, none, 30*time.Second)
	mustDo(t, "ActivateRevision", td.ActivateRevision(ctxT(t, 10*time.Second), rev, none))

	mustDo(t, "break the setup identity", os.WriteFile(a.files().Path(agentdir.FileIdentity), []byte("not json"), 0o600))
	pid, _, ok := runningPID(td.dir, ta.agent.ID)
	if !ok {
		t.Fatal("no gateway running")
	}
	mustDo(t, "kill -9", syscall.Kill(pid, syscall.SIGKILL))
	// Until the supervisor has seen the exit, PrepareRevision may still
	// answer ready: wait for the killed gateway to be gone first.
	testutil.Eventually(t, 10*time.Second, func() bool {
		p, _, ok := runningPID(td.dir, ta.agent.ID)
		return !ok || p != pid
	}, "the killed gateway %d is still recorded as running", pid)
	// The first restart comes after 1 s of backoff; transient failures
	// would keep it pending (1 s, 2 s, 4 s, ...) past this bound.
	if code := waitPermanent(t, td, rev, none, 20*time.Second); code != compute.CodeWorkspaceSetupFailed {
		t.Errorf("restart with a malformed identity: %s, want %s", code, compute.CodeWorkspaceSetupFailed)
	}
	if _, _, ok := runningPID(td.dir, ta.agent.ID); ok {
		t.Error("a gateway runs with a malformed setup identity")
	}
}

// TestMalformedIdentityAtPrepare: a revision prepared over a malformed
// setup identity (a later revision, with no setup record) fails with
// WORKSPACE_SETUP_FAILED at once; every retry would read the same file.
func TestMalformedIdentityAtPrepare(t *testing.T) {
	td := newTestDriver(t, standInGatewayRuntime(t), "", nil)
	ta := newTestAgent()
	a := td.agent(ta.agent.ID)
	mustDo(t, "ensureLayout", a.ensureLayout(ta.ns.ID))
	mustDo(t, "write a malformed setup identity", os.WriteFile(a.files().Path(agentdir.FileIdentity), []byte("not json"), 0o600))
	_, err := td.PrepareRevision(ctxT(t, 10*time.Second), ta.revision(2, ""), compute.RevisionContext{})
	if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeWorkspaceSetupFailed {
		t.Errorf("PrepareRevision over a malformed identity: %v; want a permanent %s", err, compute.CodeWorkspaceSetupFailed)
	}
	if _, _, ok := runningPID(td.dir, ta.agent.ID); ok {
		t.Error("a gateway runs with a malformed setup identity")
	}
}

// TestForeignListenerOfADeadGatewayIsNotReady: a gateway that exits at
// once (its port was taken between the port check and its bind) leaves
// /proc/<pid>/fd unreadable, so the listener owner cannot be checked; the
// listener that answers /readyz is then someone else's and must not pass
// for the gateway. Before, an unreadable fd directory skipped the check.
func TestForeignListenerOfADeadGatewayIsNotReady(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	mustDo(t, "listen", err)
	srv := &http.Server{Handler: http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	defer srv.Close()
	cmd := exec.Command("true")
	mustDo(t, "run a process that exits", cmd.Run()) // reaped: /proc/<pid> is gone
	p := &procHandle{pid: cmd.Process.Pid, child: true, exited: make(chan struct{}), status: 0}
	close(p.exited)
	s := &supervisor{d: &Driver{http: newProber()}, ctx: context.Background(), port: l.Addr().(*net.TCPAddr).Port}
	if s.probe(p, true) {
		t.Error("a foreign listener passed the readiness probe of a gateway that had exited")
	}
	// Control: with the owner check off (a gateway that keeps answering)
	// /readyz alone decides.
	if !s.probe(p, false) {
		t.Error("the probe without the owner check failed against a listener answering 200")
	}
}
