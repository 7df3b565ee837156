package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/agentdir"
	"github.com/openclaw/occ/internal/testutil"
)

// These tests run the real OpenClaw gateway (see testRuntime). They run in
// parallel with each other and each takes its gateway slots first, so at
// most maxGateways run at once and both slots stay busy: the package's
// time is about the sum of its gateway work divided by maxGateways.

const startTimeout = 4 * time.Minute // one or two starts on a loaded 2-CPU box

// procScanner reads every process's command line and environment while
// it runs, looking for secrets.
type procScanner struct {
	secrets map[string][]byte // what → bytes that must never appear
	stop    chan struct{}
	wg      sync.WaitGroup

	mu    sync.Mutex
	hits  []string
	scans int
	procs map[int]bool
}

func startProcScanner(secrets map[string][]byte) *procScanner {
	s := &procScanner{secrets: secrets, stop: make(chan struct{}), procs: map[int]bool{}}
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			s.scan()
			select {
			case <-s.stop:
				return
			case <-time.After(20 * time.Millisecond):
			}
		}
	}()
	return s
}

func (s *procScanner) scan() {
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(fmt.Sprintf("/proc/%d/%s", pid, f))
			if err != nil {
				continue
			}
			s.mu.Lock()
			s.procs[pid] = true
			for what, secret := range s.secrets {
				if bytes.Contains(b, secret) {
					s.hits = append(s.hits, fmt.Sprintf("%s in /proc/%d/%s (%q)", what, pid, f, procCmdline(pid)))
				}
			}
			s.mu.Unlock()
		}
	}
	s.mu.Lock()
	s.scans++
	s.mu.Unlock()
}

func (s *procScanner) finish() (hits []string, scans, procs int) {
	close(s.stop)
	s.wg.Wait()
	s.scan() // one last look
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.hits, s.scans, len(s.procs)
}

func randomHex(n int) string {
	b := make([]byte, n)
	rand.Read(b)
	return hex.EncodeToString(b)
}

// TestSecretsStayPrivate runs two Agents, one with a workspace setup, and
// reads every /proc/*/cmdline and /proc/*/environ while they install and
// start: no process, the gateways included, may show a token or file
// content. Then no log (gateway.log, the native file log, the driver's
// own) may hold them either. Finally the token works: a real client reads
// the setup's file through Endpoint and the token file.
// hostOpenClawTmp is OpenClaw's default log and temp directory, shared by
// every OpenClaw process on the host.
const hostOpenClawTmp = "/tmp/openclaw"

func TestSecretsStayPrivate(t *testing.T) {
	t.Parallel()
	rt := testRuntime(t)
	acquireGateways(t, 2)
	td := newTestDriver(t, rt, "", nil)
	withSetup, plain := newTestAgent(), newTestAgent()
	canary := "leak-canary-" + randomHex(12)
	setup := withSetup.pendingSetup(map[string]string{
		"AGENTS.md": "# Agents\n" + canary + "\n",
		"USER.md":   canary,
	})
	revA, revB := withSetup.revision(1, ""), plain.revision(1, "")

	// The tokens are created by the first Prepare; the scanner needs them
	// before the gateways start, so create the layouts first through the
	// same code path.
	for _, ta := range []testAgent{withSetup, plain} {
		a := td.agent(ta.agent.ID)
		mustDo(t, "ensureLayout", a.ensureLayout(ta.ns.ID))
	}
	secrets := map[string][]byte{"file content": []byte(canary)}
	var tokens []string
	for _, ta := range []testAgent{withSetup, plain} {
		tok, err := os.ReadFile(filepath.Join(agentDirOf(td.dir, ta.agent.ID), "token"))
		mustDo(t, "read token", err)
		tokens = append(tokens, string(tok))
		secrets["token of "+ta.agent.ID] = tok
	}
	// A control: a process that does carry a secret must be seen.
	control := "control-" + randomHex(8)
	secrets["control"] = []byte(control)
	scanner := startProcScanner(secrets)
	ctl := exec.Command("sleep", "1")
	ctl.Env = []string{"CONTROL=" + control}
	mustDo(t, "control process", ctl.Run())

	var wg sync.WaitGroup
	for _, c := range []struct {
		rev compute.Revision
		rc  compute.RevisionContext
	}{{revA, compute.RevisionContext{WorkspaceSetup: setup}}, {revB, compute.RevisionContext{}}} {
		wg.Add(1)
		go func() {
			defer wg.Done()
			waitReady(t, td, c.rev, c.rc, startTimeout)
			mustDo(t, "ActivateRevision", td.ActivateRevision(ctxT(t, time.Minute), c.rev, c.rc))
		}()
	}
	wg.Wait()
	if t.Failed() {
		return
	}
	time.Sleep(3 * time.Second) // let the gateways' background jobs start too
	hits, scans, procs := scanner.finish()
	t.Logf("scanned /proc %d times, %d processes", scans, procs)
	sawControl := false
	for _, h := range hits {
		if strings.HasPrefix(h, "control ") {
			sawControl = true
			continue
		}
		t.Errorf("secret visible: %s", h)
	}
	if !sawControl {
		t.Error("the scanner missed the control process: the scan proves nothing")
	}
	delete(secrets, "control")

	// Logs.
	for _, ta := range []testAgent{withSetup, plain} {
		dir := agentDirOf(td.dir, ta.agent.ID)
		files, _ := filepath.Glob(filepath.Join(dir, "gateway.log*"))
		native, _ := filepath.Glob(filepath.Join(dir, "logs", "*"))
		files = append(files, native...)
		if len(files) < 2 {
			t.Errorf("expected gateway.log and the native log in %s, found %v", dir, files)
		}
		for _, f := range files {
			b, err := os.ReadFile(f)
			mustDo(t, "read log", err)
			for what, secret := range secrets {
				if bytes.Contains(b, secret) {
					t.Errorf("%s appears in %s", what, f)
				}
			}
		}
	}
	driverLogs := td.logs.String()
	for what, secret := range secrets {
		if strings.Contains(driverLogs, string(secret)) {
			t.Errorf("%s appears in the driver's log", what)
		}
	}

	// Isolation on the host: native setup and the gateways wrote nothing
	// about these Agents into OpenClaw's host-wide default log directory
	// (/tmp/openclaw/, shared with every other OpenClaw on the host; other
	// tests' gateways may write there, so what is checked is that no file
	// mentions this data directory), and the setup's scratch directory,
	// kept in the Agent's own tmp, is gone.
	if entries, err := os.ReadDir(hostOpenClawTmp); err == nil {
		for _, e := range entries {
			b, err := os.ReadFile(filepath.Join(hostOpenClawTmp, e.Name()))
			if err == nil && bytes.Contains(b, []byte(td.dir)) {
				t.Errorf("%s mentions this test's Agents: setup or gateway output left their directory", filepath.Join(hostOpenClawTmp, e.Name()))
			}
		}
	}
	for _, ta := range []testAgent{withSetup, plain} {
		left, _ := filepath.Glob(filepath.Join(agentDirOf(td.dir, ta.agent.ID), "tmp", "oce-workspace-setup-*"))
		if len(left) != 0 {
			t.Errorf("the setup runner's scratch directory was left behind: %v", left)
		}
	}

	// The endpoint and token file work with the real client, and the
	// setup's file arrived byte for byte.
	ep, err := td.Endpoint(ctxT(t, 10*time.Second), revA)
	mustDo(t, "Endpoint", err)
	if ep.TokenFile != filepath.Join(agentDirOf(td.dir, withSetup.agent.ID), "token") || ep.Transport != compute.Direct ||
		!strings.HasPrefix(ep.URL, "ws://127.0.0.1:") {
		t.Errorf("Endpoint = %+v", ep)
	}
	client := agentgw.New(agentgw.Options{})
	target := agentgw.Target{Transport: agentgw.Direct, URL: ep.URL, TokenFile: ep.TokenFile}
	f, err := client.Get(ctxT(t, 30*time.Second), target, "AGENTS.md")
	mustDo(t, "agentgw Get through the endpoint", err)
	if f.Content != setup.Files["AGENTS.md"] {
		t.Errorf("AGENTS.md through the gateway = %q, want the setup's content", f.Content)
	}
	// The other Agent's token does not open this gateway.
	other, err := td.Endpoint(ctxT(t, 10*time.Second), revB)
	mustDo(t, "Endpoint", err)
	if _, err := client.Get(ctxT(t, 30*time.Second), agentgw.Target{Transport: agentgw.Direct, URL: ep.URL, TokenFile: other.TokenFile}, "AGENTS.md"); err == nil {
		t.Error("agent B's token opened agent A's gateway")
	}
	if tokens[0] == tokens[1] {
		t.Error("two Agents got the same token")
	}
	for _, ta := range []testAgent{withSetup, plain} {
		checkNoDuplicate(t, agentDirOf(td.dir, ta.agent.ID))
	}
}

// TestRestartAfterCrash kills the gateway with SIGKILL; the supervisor
// starts it again and it serves the same revision. Both starts are told to
// the readiness callback (compute.ReadyNotifier), with the Agent's ids.
func TestRestartAfterCrash(t *testing.T) {
	t.Parallel()
	rt := testRuntime(t)
	acquireGateways(t, 1)
	td := newTestDriver(t, rt, "", nil)
	var mu sync.Mutex
	var notices []string
	td.NotifyReady(func(namespaceID, agentID string) {
		mu.Lock()
		defer mu.Unlock()
		notices = append(notices, namespaceID+"/"+agentID)
	})
	noticesAre := func(n int, want string) func() bool {
		return func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(notices) == n && notices[n-1] == want
		}
	}
	ta := newTestAgent()
	rev := ta.revision(1, "")
	waitReady(t, td, rev, compute.RevisionContext{}, startTimeout)
	// The supervisor marks the gateway ready, then notifies.
	testutil.Eventually(t, 5*time.Second, noticesAre(1, rev.NamespaceID+"/"+rev.AgentID), "one readiness notice for the Agent")
	mustDo(t, "ActivateRevision", td.ActivateRevision(ctxT(t, time.Minute), rev, compute.RevisionContext{}))
	pid1, _, ok := runningPID(td.dir, ta.agent.ID)
	if !ok {
		t.Fatal("no gateway after activation")
	}
	crashed := time.Now()
	mustDo(t, "kill -9", syscall.Kill(pid1, syscall.SIGKILL))
	// The worker would see "not ready" and poll; so do we.
	testutil.Eventually(t, 30*time.Second, func() bool {
		res, err := td.PrepareRevision(ctxT(t, 10*time.Second), rev, compute.RevisionContext{})
		return err == nil && !res.Ready
	}, "the crash to be noticed")
	took := waitReady(t, td, rev, compute.RevisionContext{}, startTimeout)
	pid2, _, ok := runningPID(td.dir, ta.agent.ID)
	if !ok || pid2 == pid1 {
		t.Fatalf("after the crash: pid %d (ok %t), want a new gateway (old %d)", pid2, ok, pid1)
	}
	t.Logf("restarted as pid %d: ready %s after the kill (%s of polling)", pid2, time.Since(crashed).Round(time.Millisecond), took.Round(time.Millisecond))
	testutil.Eventually(t, 5*time.Second, noticesAre(2, rev.NamespaceID+"/"+rev.AgentID), "a second readiness notice after the restart")
	if !isServing(td.dir, rev) {
		t.Error("the revision is not serving after the restart")
	}
	checkNoDuplicate(t, agentDirOf(td.dir, ta.agent.ID))
}

// TestRecoverReattach replaces the Driver over the same DataDir, as an
// occ restart does: Recover adopts the running gateway (same pid, no second
// process), supervises it by polling (a crash restarts it), and a gateway
// that died while occ was down is started again.
func TestRecoverReattach(t *testing.T) {
	t.Parallel()
	rt := testRuntime(t)
	acquireGateways(t, 1)
	dataDir := newDataDir(t)
	d1 := newTestDriver(t, rt, dataDir, nil)
	ta := newTestAgent()
	rev := ta.revision(1, "")
	waitReady(t, d1, rev, compute.RevisionContext{}, startTimeout)
	mustDo(t, "ActivateRevision", d1.ActivateRevision(ctxT(t, time.Minute), rev, compute.RevisionContext{}))
	pid1, _, _ := runningPID(dataDir, ta.agent.ID)
	d1.Close()
	if p, _, ok := runningPID(dataDir, ta.agent.ID); !ok || p != pid1 {
		t.Fatalf("Close stopped the gateway (pid %d → %d, %t)", pid1, p, ok)
	}

	d2 := newTestDriver(t, rt, dataDir, nil)
	mustDo(t, "Recover", d2.Recover(ctxT(t, time.Minute)))
	mustDo(t, "Recover again", d2.Recover(ctxT(t, time.Minute)))
	took := waitReady(t, d2, rev, compute.RevisionContext{}, 30*time.Second)
	if p, _, ok := runningPID(dataDir, ta.agent.ID); !ok || p != pid1 {
		t.Fatalf("after Recover: pid %d (%t), want the adopted %d", p, ok, pid1)
	}
	if took > 10*time.Second {
		t.Errorf("the adopted gateway took %s to be reported ready", took)
	}
	if !isServing(dataDir, rev) {
		t.Error("not serving after Recover")
	}
	mustDo(t, "ActivateRevision after Recover", d2.ActivateRevision(ctxT(t, time.Minute), rev, compute.RevisionContext{}))

	// A lost pid file (occ died between spawn and writing it): Recover
	// finds the gateway by its working directory and adopts it.
	d2.Close()
	mustDo(t, "remove the pid file", os.Remove(filepath.Join(agentDirOf(dataDir, ta.agent.ID), "pid")))
	d2 = newTestDriver(t, rt, dataDir, nil)
	mustDo(t, "Recover without a pid file", d2.Recover(ctxT(t, time.Minute)))
	waitReady(t, d2, rev, compute.RevisionContext{}, 30*time.Second)
	if p, _, ok := runningPID(dataDir, ta.agent.ID); !ok || p != pid1 {
		t.Fatalf("after Recover without a pid file: pid %d (%t), want the adopted %d", p, ok, pid1)
	}

	// The adopted gateway is not our child: a crash is noticed by polling.
	mustDo(t, "kill -9", syscall.Kill(pid1, syscall.SIGKILL))
	testutil.Eventually(t, startTimeout, func() bool {
		p, _, ok := runningPID(dataDir, ta.agent.ID)
		return ok && p != pid1
	}, "a new gateway")
	waitReady(t, d2, rev, compute.RevisionContext{}, startTimeout)
	pid2, _, _ := runningPID(dataDir, ta.agent.ID)

	// Down while occ is down: the serving revision is started again.
	d2.Close()
	mustDo(t, "kill -9", syscall.Kill(pid2, syscall.SIGKILL))
	testutil.Eventually(t, 10*time.Second, func() bool { return !procAlive(pid2, 0) }, "the gateway to die")
	d3 := newTestDriver(t, rt, dataDir, nil)
	mustDo(t, "Recover", d3.Recover(ctxT(t, time.Minute)))
	mustDo(t, "Recover again", d3.Recover(ctxT(t, time.Minute)))
	testutil.Eventually(t, startTimeout, func() bool { return isServing(dataDir, rev) }, "the serving revision to start again")
	waitReady(t, d3, rev, compute.RevisionContext{}, startTimeout)
	pid3, _, _ := runningPID(dataDir, ta.agent.ID)
	if pid3 == pid2 || pid3 == pid1 {
		t.Errorf("pid %d after the restart, want a new process", pid3)
	}
	checkNoDuplicate(t, agentDirOf(dataDir, ta.agent.ID))
}

// TestStopRetireAndReplace checks the verbs' effects on the backend: one
// gateway per Agent, Stop and Retire touch only their own revision,
// stale calls cannot roll back, a refused configuration disturbs nothing,
// DeleteAgent removes everything.
func TestStopRetireAndReplace(t *testing.T) {
	t.Parallel()
	rt := testRuntime(t)
	acquireGateways(t, 1)
	td := newTestDriver(t, rt, "", nil)
	ta := newTestAgent()
	dir := agentDirOf(td.dir, ta.agent.ID)
	rev1, rev2 := ta.revision(1, ""), ta.revision(2, `{"plugins":{"enabled":false}}`)
	none := compute.RevisionContext{}
	ctx := ctxT(t, 10*time.Minute)

	// Concurrent Prepare calls while starting: still one process.
	var wg sync.WaitGroup
	for range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 5 {
				if _, err := td.PrepareRevision(ctx, rev1, none); err != nil {
					t.Errorf("PrepareRevision: %v", err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}()
	}
	wg.Wait()
	waitReady(t, td, rev1, none, startTimeout)
	mustDo(t, "Activate #1", td.ActivateRevision(ctx, rev1, none))
	pid1, _, _ := runningPID(td.dir, ta.agent.ID)

	// Stop of a revision that is not running changes nothing.
	mustDo(t, "Stop #2 (never prepared)", td.StopRevision(ctx, rev2))
	if p, _, _ := runningPID(td.dir, ta.agent.ID); p != pid1 || !isServing(td.dir, rev1) {
		t.Fatal("StopRevision of another revision disturbed the running one")
	}

	// Stop keeps durable state and the port; Prepare starts it again.
	port, _ := os.ReadFile(filepath.Join(dir, "port"))
	token, _ := os.ReadFile(filepath.Join(dir, "token"))
	mustDo(t, "Stop #1", td.StopRevision(ctx, rev1))
	if _, _, ok := runningPID(td.dir, ta.agent.ID); ok || procAlive(pid1, 0) {
		t.Fatal("gateway still running after StopRevision")
	}
	if _, err := os.Stat(filepath.Join(dir, "serving")); !os.IsNotExist(err) {
		t.Error("serving mark kept after StopRevision")
	}
	for _, f := range []string{"workspace", "state", "token", "port", filepath.Join("revisions", agentdir.Hash(rev1.ID), "openclaw.json")} {
		if _, err := os.Stat(filepath.Join(dir, f)); err != nil {
			t.Errorf("StopRevision removed %s: %v", f, err)
		}
	}
	waitReady(t, td, rev1, none, startTimeout)
	mustDo(t, "Activate #1 again", td.ActivateRevision(ctx, rev1, none))
	if p, _ := os.ReadFile(filepath.Join(dir, "port")); !bytes.Equal(p, port) {
		t.Errorf("port changed across stop/start: %s → %s", port, p)
	}
	if tok, _ := os.ReadFile(filepath.Join(dir, "token")); !bytes.Equal(tok, token) {
		t.Error("token changed across stop/start")
	}

	// Preparing revision 2 replaces revision 1's gateway.
	pid1, _, _ = runningPID(td.dir, ta.agent.ID)
	waitReady(t, td, rev2, none, startTimeout)
	if procAlive(pid1, 0) {
		t.Error("revision 1's gateway still runs after revision 2 was prepared")
	}
	mustDo(t, "Activate #2", td.ActivateRevision(ctx, rev2, none))
	pid2, _, _ := runningPID(td.dir, ta.agent.ID)
	if !isServing(td.dir, rev2) || isServing(td.dir, rev1) {
		t.Fatal("revision 2 is not the one serving")
	}

	// Retiring revision 1 leaves revision 2 alone.
	mustDo(t, "Retire #1", td.RetireRevision(ctx, rev1))
	mustDo(t, "Stop #1", td.StopRevision(ctx, rev1))
	if _, err := os.Stat(filepath.Join(dir, "revisions", agentdir.Hash(rev1.ID))); !os.IsNotExist(err) {
		t.Error("revision 1's directory survived RetireRevision")
	}
	if p, _, _ := runningPID(td.dir, ta.agent.ID); p != pid2 || !isServing(td.dir, rev2) {
		t.Error("retiring revision 1 disturbed revision 2")
	}

	// Stale calls for the older revision cannot roll the Agent back.
	mustDo(t, "Activate #1 (stale)", td.ActivateRevision(ctx, rev1, none))
	if !isServing(td.dir, rev2) {
		t.Error("a stale ActivateRevision moved the serving revision")
	}
	rev1b := ta.revision(1, "")
	_, err := td.PrepareRevision(ctx, rev1b, none)
	if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeRuntimeFailed {
		t.Errorf("PrepareRevision of an older revision = %v, want permanent RUNTIME_FAILED", err)
	}

	// A configuration conflict is refused without touching the gateway.
	rev3 := ta.revision(3, `{"gateway":{"bind":"lan"}}`)
	_, err = td.PrepareRevision(ctx, rev3, none)
	if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeConfigurationInvalid {
		t.Errorf("PrepareRevision with bind lan = %v, want CONFIGURATION_INVALID", err)
	}
	if p, _, _ := runningPID(td.dir, ta.agent.ID); p != pid2 || !isServing(td.dir, rev2) {
		t.Error("a refused configuration disturbed the running gateway")
	}

	// DeleteAgent stops the gateway and removes everything.
	mustDo(t, "Retire #2", td.RetireRevision(ctx, rev2))
	if procAlive(pid2, 0) {
		t.Error("gateway still running after RetireRevision of the serving revision")
	}
	mustDo(t, "DeleteAgent", td.DeleteAgent(ctx, ta.agent))
	if _, err := os.Stat(dir); !os.IsNotExist(err) {
		t.Errorf("DeleteAgent left %s", dir)
	}
	checkNoDuplicate(t, dir)
}

// TestFailedDeploymentFallsBack: a new revision whose gateway refuses its
// configuration fails permanently, and the serving revision runs again.
func TestFailedDeploymentFallsBack(t *testing.T) {
	t.Parallel()
	rt := testRuntime(t)
	acquireGateways(t, 1)
	td := newTestDriver(t, rt, "", nil)
	ta := newTestAgent()
	good, bad := ta.revision(1, ""), ta.revision(2, `{"notAnOpenClawKey":true}`)
	waitReady(t, td, good, compute.RevisionContext{}, startTimeout)
	mustDo(t, "Activate", td.ActivateRevision(ctxT(t, time.Minute), good, compute.RevisionContext{}))
	if code := waitPermanent(t, td, bad, compute.RevisionContext{}, startTimeout); code != compute.CodeConfigurationInvalid {
		t.Fatalf("code %s, want %s", code, compute.CodeConfigurationInvalid)
	}
	testutil.Eventually(t, startTimeout, func() bool { return isServing(td.dir, good) }, "the serving revision to run again")
	waitReady(t, td, good, compute.RevisionContext{}, startTimeout)
	checkNoDuplicate(t, agentDirOf(td.dir, ta.agent.ID))
}

// TestVerifierBlocksStart deletes the setup marker: neither a restart
// after a crash, nor a new revision with the completed setup, nor one
// without a setup record may start the gateway over that workspace.
func TestVerifierBlocksStart(t *testing.T) {
	t.Parallel()
	rt := testRuntime(t)
	acquireGateways(t, 1)
	td := newTestDriver(t, rt, "", nil)
	ta := newTestAgent()
	dir := agentDirOf(td.dir, ta.agent.ID)
	setup := ta.pendingSetup(map[string]string{"SOUL.md": "calm"})
	rev1 := ta.revision(1, "")
	rc := compute.RevisionContext{WorkspaceSetup: setup}
	waitReady(t, td, rev1, rc, startTimeout)
	mustDo(t, "Activate", td.ActivateRevision(ctxT(t, time.Minute), rev1, rc))
	if _, err := os.Stat(filepath.Join(dir, "setup-identity.json")); err != nil {
		t.Fatalf("no setup identity after Apply: %v", err)
	}
	b, _ := os.ReadFile(filepath.Join(dir, "setup-identity.json"))
	if bytes.Contains(b, []byte("calm")) {
		t.Error("setup-identity.json holds file content")
	}

	mustDo(t, "remove the marker", os.Remove(filepath.Join(dir, "workspace", ".oce-workspace-setup.json")))
	pid, _, _ := runningPID(td.dir, ta.agent.ID)
	mustDo(t, "kill -9", syscall.Kill(pid, syscall.SIGKILL))
	// SIGKILL is asynchronous: until the process is gone it may still be
	// (rightly) reported ready.
	testutil.Eventually(t, 10*time.Second, func() bool { return !procAlive(pid, 0) }, "the gateway to die")
	if code := waitPermanent(t, td, rev1, compute.RevisionContext{WorkspaceSetup: completed(setup)}, time.Minute); code != compute.CodeWorkspaceSetupFailed {
		t.Errorf("restart after the marker vanished: %s, want %s", code, compute.CodeWorkspaceSetupFailed)
	}
	for i, rc := range []compute.RevisionContext{{WorkspaceSetup: completed(setup)}, {}} {
		rev := ta.revision(int64(2+i), "")
		_, err := td.PrepareRevision(ctxT(t, time.Minute), rev, rc)
		if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeWorkspaceSetupFailed {
			t.Errorf("PrepareRevision #%d (setup %v) = %v, want permanent %s", rev.Number, rc.WorkspaceSetup != nil, err, compute.CodeWorkspaceSetupFailed)
		}
	}
	time.Sleep(time.Second)
	if p, _, ok := runningPID(td.dir, ta.agent.ID); ok {
		t.Errorf("a gateway (pid %d) runs over a workspace without its marker", p)
	}
	if n := len(gatewaysUnder(dir)); n != 0 {
		t.Errorf("%d gateway processes in the Agent's directory", n)
	}
}

// BenchmarkDeployVsBareStart compares PrepareRevision→Ready through the
// driver with a bare `openclaw gateway run` (same runtime, fresh state,
// minimal config) measured in the same run. Run with -benchtime=1x.
func BenchmarkDeployVsBareStart(b *testing.B) {
	rt := testRuntime(b)
	acquireGateways(b, 1)
	var driverTotal, bareTotal time.Duration
	for range b.N {
		bareTotal += bareStart(b, rt)
		td := newTestDriver(b, rt, "", nil)
		ta := newTestAgent()
		rev := ta.revision(1, "")
		driverTotal += waitReady(b, td, rev, compute.RevisionContext{}, startTimeout)
		mustDo(b, "Shutdown", td.Shutdown(context.Background()))
	}
	n := float64(b.N)
	b.ReportMetric(driverTotal.Seconds()/n, "driver-s/op")
	b.ReportMetric(bareTotal.Seconds()/n, "bare-s/op")
	b.ReportMetric(driverTotal.Seconds()/bareTotal.Seconds(), "ratio")
	b.Logf("\n| start | spawn → /readyz 200 |\n|---|---|\n| bare `openclaw gateway run` | %s |\n| driver PrepareRevision → Ready | %s |\n| ratio | %.2f |",
		(bareTotal / time.Duration(b.N)).Round(time.Millisecond), (driverTotal / time.Duration(b.N)).Round(time.Millisecond),
		driverTotal.Seconds()/bareTotal.Seconds())
}

// bareStart starts a gateway by hand as the spec's recipe does and times
// spawn → /readyz 200.
func bareStart(b *testing.B, rt Runtime) time.Duration {
	dir, err := os.MkdirTemp(testRoot, "bare-")
	mustDo(b, "mkdir", err)
	defer os.RemoveAll(dir)
	port := 19650
	cfg := fmt.Sprintf(`{"gateway":{"mode":"local","bind":"loopback","port":%d,"auth":{"mode":"token","token":"%s"}},
		"agents":{"defaults":{"workspace":"%s/ws","heartbeat":{"every":"0m"}}},"logging":{"file":"%s/openclaw.log"}}`,
		port, randomHex(32), dir, dir)
	mustDo(b, "config", os.WriteFile(filepath.Join(dir, "openclaw.json"), []byte(cfg), 0o600))
	for _, sub := range []string{"home", "state"} {
		mustDo(b, "mkdir", os.Mkdir(filepath.Join(dir, sub), 0o700))
	}
	logf, err := os.Create(filepath.Join(dir, "gateway.log"))
	mustDo(b, "log", err)
	defer logf.Close()
	start := time.Now()
	p, err := os.StartProcess(rt.Node, []string{rt.Node, rt.OpenClaw, "gateway", "run", "--port", strconv.Itoa(port)}, &os.ProcAttr{
		Dir: dir,
		Env: []string{"HOME=" + dir + "/home", "OPENCLAW_STATE_DIR=" + dir + "/state", "OPENCLAW_CONFIG_PATH=" + dir + "/openclaw.json",
			"OPENCLAW_SKIP_CHANNELS=1", "OPENCLAW_DISABLE_BONJOUR=1", "OPENCLAW_NO_AUTO_UPDATE=1", "OPENCLAW_OFFLINE=1",
			"PATH=" + filepath.Dir(rt.Node) + ":/usr/bin:/bin"},
		Files: []*os.File{nil, logf, logf},
		Sys:   &syscall.SysProcAttr{Setpgid: true},
	})
	mustDo(b, "start", err)
	defer func() {
		p.Signal(syscall.SIGTERM)
		done := make(chan struct{})
		go func() { p.Wait(); close(done) }()
		select {
		case <-done:
		case <-time.After(15 * time.Second):
			syscall.Kill(-p.Pid, syscall.SIGKILL)
			<-done
		}
	}()
	pr := newProber()
	deadline := time.Now().Add(startTimeout)
	for time.Now().Before(deadline) {
		ctx, cancel := context.WithTimeout(context.Background(), probeLimit)
		ok := pr.ready(ctx, port)
		cancel()
		if ok {
			return time.Since(start)
		}
		time.Sleep(startPoll)
	}
	b.Fatalf("bare gateway not ready within %s", startTimeout)
	return 0
}
