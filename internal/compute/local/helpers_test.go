package local

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/agentdir"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/testutil"
)

// One gateway takes about 1 GB and 10 s of CPU to start: the tests of
// this package never run more than maxGateways at once. Every test that
// starts gateways takes slots from gatewaySlots first (the conformance
// suite's parallel cases included), and the monitor below records the
// peak actually observed in /proc.
const maxGateways = 2

var gatewaySlots = make(chan struct{}, maxGateways)

// slotTaker makes a multi-slot acquisition atomic: two parallel tests
// that each need two slots could otherwise hold one each and wait forever.
var slotTaker sync.Mutex

// acquireGateways takes n slots until the test ends.
func acquireGateways(t testing.TB, n int) {
	t.Helper()
	slotTaker.Lock()
	for range n {
		gatewaySlots <- struct{}{}
	}
	slotTaker.Unlock()
	t.Cleanup(func() {
		for range n {
			<-gatewaySlots
		}
	})
}

// testRoot holds every DataDir of this package's tests, so the monitor
// counts only our gateways (other packages' tests may run gateways too).
var testRoot string

func TestMain(m *testing.M) {
	if os.Getenv(envStandInGateway) == "1" {
		os.Exit(standInGateway(os.Args[1:]))
	}
	var err error
	// A guarded directory: if this binary dies without its cleanups (go
	// test -timeout, a crash), the guard kills every gateway the driver
	// started under it. The driver's gateways are deliberately not tied to
	// the driver's process (they survive an occ restart), so nothing else
	// would.
	testRoot, err = gwtest.GuardedDir("occ-local-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	if os.Getenv(envKilledChild) == "1" {
		os.Exit(killedChild())
	}
	stop := startMonitor()
	code := m.Run()
	peak := stop()
	fmt.Printf("local: peak gateways running at once: %d (limit %d)\n", peak, maxGateways)
	if peak > maxGateways {
		fmt.Printf("local: FAIL: more than %d gateways ran at once: %s\n", maxGateways, monitor.peakDesc)
		code = 1
	}
	os.RemoveAll(testRoot)
	os.Exit(code)
}

// ---- the gateway monitor ----

var monitor struct {
	mu       sync.Mutex
	peak     int
	perAgent map[string]int // agent dir → most gateways seen at once
	peakDesc string         // what ran at the peak, for the failure message
}

// startMonitor samples /proc every 100 ms for gateway processes under
// testRoot; the returned function stops it and returns the peak.
func startMonitor() func() int {
	monitor.perAgent = map[string]int{}
	done := make(chan struct{})
	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		t := time.NewTicker(100 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
			}
			byDir := gatewaysUnder(testRoot)
			total := 0
			monitor.mu.Lock()
			for dir, pids := range byDir {
				total += len(pids)
				monitor.perAgent[dir] = max(monitor.perAgent[dir], len(pids))
			}
			if total > monitor.peak {
				monitor.peak = total
				var desc []string
				for dir, pids := range byDir {
					for _, pid := range pids {
						st, _ := readProcStat(pid)
						desc = append(desc, fmt.Sprintf("pid %d (ppid %d) %q in %s", pid, st.ppid, procCmdline(pid), dir))
					}
				}
				monitor.peakDesc = strings.Join(desc, "; ")
			}
			monitor.mu.Unlock()
		}
	}()
	return func() int {
		close(done)
		wg.Wait()
		monitor.mu.Lock()
		defer monitor.mu.Unlock()
		return monitor.peak
	}
}

// gatewaysUnder lists live gateway main processes (by process title or
// command line) whose working directory is under root, by directory. A
// helper forked by a gateway shows the gateway's title until it execs, so
// processes whose parent is a gateway in the same directory are skipped.
func gatewaysUnder(root string) map[string][]int {
	type cand struct {
		dir  string
		ppid int
	}
	cands := map[int]cand{}
	entries, _ := os.ReadDir("/proc")
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		cwd := procCwd(pid)
		if !strings.HasPrefix(cwd, root+"/") {
			continue
		}
		args := procCmdline(pid)
		if len(args) == 0 {
			continue
		}
		if !(args[0] == "openclaw" || args[0] == "openclaw-gateway" || (len(args) >= 3 && strings.HasSuffix(args[1], "openclaw.mjs") && args[2] == "gateway")) {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil || st.state == 'Z' {
			continue
		}
		cands[pid] = cand{dir: cwd, ppid: st.ppid}
	}
	out := map[string][]int{}
	for pid, c := range cands {
		if parent, ok := cands[c.ppid]; ok && parent.dir == c.dir {
			continue
		}
		out[c.dir] = append(out[c.dir], pid)
	}
	return out
}

// checkNoDuplicate fails t if the monitor ever saw two gateways for dir.
func checkNoDuplicate(t *testing.T, dir string) {
	t.Helper()
	monitor.mu.Lock()
	n := monitor.perAgent[dir]
	monitor.mu.Unlock()
	if n > 1 {
		t.Errorf("the monitor saw %d gateways at once for %s, want at most 1", n, dir)
	}
}

// ---- runtime ----

var (
	runtimeOnce sync.Once
	runtimeVal  Runtime
	runtimeErr  error
)

// testRuntime returns the real runtime (OCC_OPENCLAW_RUNTIME, else
// scripts/install-runtime.sh from the module root), or ends the test: a
// skip on a developer machine, a failure under CI=true.
func testRuntime(t testing.TB) Runtime {
	t.Helper()
	runtimeOnce.Do(func() {
		dir := os.Getenv("OCC_OPENCLAW_RUNTIME")
		if dir == "" {
			dir, runtimeErr = installRuntime()
			if runtimeErr != nil {
				return
			}
		}
		runtimeVal, runtimeErr = RuntimeFromDir(dir)
	})
	if runtimeErr != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the OpenClaw runtime is required under CI=true: %v", runtimeErr)
		}
		t.Skipf("no OpenClaw runtime (set OCC_OPENCLAW_RUNTIME or run scripts/install-runtime.sh): %v", runtimeErr)
	}
	return runtimeVal
}

func installRuntime() (string, error) {
	root, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(root, "go.mod")); err == nil {
			break
		}
		parent := filepath.Dir(root)
		if parent == root {
			return "", errors.New("no go.mod above the working directory")
		}
		root = parent
	}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "install-runtime.sh"))
	cmd.Dir = root
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("scripts/install-runtime.sh: %v: %s", err, strings.TrimSpace(errb.String()))
	}
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	return strings.TrimSpace(lines[len(lines)-1]), nil
}

// fakeRuntime is a runtime whose files exist but run nothing useful, for
// tests that never reach a gateway start.
func fakeRuntime(t testing.TB) Runtime {
	t.Helper()
	dir := t.TempDir()
	rt := Runtime{Node: filepath.Join(dir, "node"), OpenClaw: filepath.Join(dir, "openclaw.mjs")}
	for _, p := range []string{rt.Node, rt.OpenClaw} {
		if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return rt
}

// ---- drivers ----

// syncBuffer collects the driver's log lines for the secret checks.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

type testDriver struct {
	*Driver
	logs *syncBuffer
	dir  string
}

// testPorts keeps this package's gateways away from the default range a
// developer's occ server uses.
var testPorts = [2]int{19400, 19599}

// newDataDir makes a DataDir under testRoot, removed when the test ends.
func newDataDir(t testing.TB) string {
	t.Helper()
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir, err := os.MkdirTemp(testRoot, name[:min(len(name), 40)]+"-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { os.RemoveAll(dir) })
	return dir
}

// newTestDriver returns a driver over dataDir (a new one when empty)
// whose gateways are all stopped when the test ends.
func newTestDriver(t testing.TB, rt Runtime, dataDir string, tweak func(*Options)) *testDriver {
	t.Helper()
	if dataDir == "" {
		dataDir = newDataDir(t)
	}
	logs := &syncBuffer{}
	opts := Options{
		DataDir: dataDir, Runtime: rt, PortRange: testPorts,
		StopGrace: 5 * time.Second,
		Logger:    slog.New(slog.NewTextHandler(logs, &slog.HandlerOptions{Level: slog.LevelDebug})),
	}
	if tweak != nil {
		tweak(&opts)
	}
	d, err := New(opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		if err := d.Shutdown(ctx); err != nil {
			t.Errorf("Shutdown: %v", err)
		}
	})
	return &testDriver{Driver: d, logs: logs, dir: dataDir}
}

// ---- revisions ----

type testAgent struct {
	ns    compute.Namespace
	agent compute.Agent
	cfgID string
}

func newTestAgent() testAgent {
	ns := compute.Namespace{ID: ids.New(ids.Namespace), Name: "ns"}
	return testAgent{ns: ns, agent: compute.Agent{ID: ids.New(ids.Agent), NamespaceID: ns.ID, Name: "agent"},
		cfgID: ids.New(ids.Configuration)}
}

func (ta testAgent) revision(n int64, cfg string) compute.Revision {
	if cfg == "" {
		cfg = `{}`
	}
	return compute.Revision{
		ID: ids.New(ids.Revision), NamespaceID: ta.ns.ID, AgentID: ta.agent.ID, AgentName: ta.agent.Name,
		Number: n, ConfigurationID: ta.cfgID, ConfigurationGeneration: n, Configuration: []byte(cfg),
	}
}

func (ta testAgent) pendingSetup(files map[string]string) *compute.WorkspaceSetup {
	return &compute.WorkspaceSetup{ID: ids.New(ids.WorkspaceSetup), NamespaceID: ta.ns.ID, AgentID: ta.agent.ID, Files: files}
}

func completed(s *compute.WorkspaceSetup) *compute.WorkspaceSetup {
	c := s.WithoutFiles()
	c.Completed = true
	return &c
}

// waitReady polls PrepareRevision like the worker until Ready, failing
// the test on a permanent error or after timeout.
func waitReady(t testing.TB, d compute.Driver, rev compute.Revision, rc compute.RevisionContext, timeout time.Duration) time.Duration {
	t.Helper()
	start := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	last := ""
	for {
		res, err := d.PrepareRevision(ctx, rev, rc)
		if p, ok := compute.AsPermanent(err); ok {
			t.Fatalf("PrepareRevision(#%d): permanent %s: %v", rev.Number, p.Code, err)
		}
		if err == nil && res.Ready {
			return time.Since(start)
		}
		if err != nil {
			last = err.Error()
		} else {
			last = res.PendingReason + ": " + res.Message
			if res.PendingReason == "" {
				t.Fatalf("PrepareRevision(#%d) not ready without a PendingReason", rev.Number)
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("PrepareRevision(#%d) not ready after %s; last: %s", rev.Number, timeout, last)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

// waitPermanent polls PrepareRevision until it fails permanently and
// returns the code.
func waitPermanent(t testing.TB, d compute.Driver, rev compute.Revision, rc compute.RevisionContext, timeout time.Duration) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	for {
		res, err := d.PrepareRevision(ctx, rev, rc)
		if p, ok := compute.AsPermanent(err); ok {
			return p.Code
		}
		if err == nil && res.Ready {
			t.Fatalf("PrepareRevision(#%d) became ready, want a permanent failure", rev.Number)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("PrepareRevision(#%d) did not fail permanently within %s (last %+v, %v)", rev.Number, timeout, res, err)
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func mustDo(t testing.TB, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// ctxT is a context of at most d that also ends with the test.
func ctxT(t testing.TB, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(testutil.Context(t), d)
	t.Cleanup(cancel)
	return ctx
}

// ---- looking behind the driver ----

// agentDirOf is the Agent's directory, computed independently of the
// driver's helpers.
func agentDirOf(dataDir, agentID string) string {
	return filepath.Join(dataDir, "agents", agentdir.Hash(agentID))
}

// runningPID returns the pid of the Agent's live gateway and the
// configuration path it runs, from the pid file and /proc.
func runningPID(dataDir, agentID string) (pid int, cfg string, ok bool) {
	dir := agentDirOf(dataDir, agentID)
	pf, found := (&agent{dir: dir}).readPIDFile()
	if !found || !procAlive(pf.PID, pf.Start) || procCwd(pf.PID) != dir {
		return 0, "", false
	}
	cfg, _ = procEnv(pf.PID, "OPENCLAW_CONFIG_PATH")
	return pf.PID, cfg, true
}

// isServing is Inspect.Serving: rev is the serving revision and a live
// gateway runs its configuration.
func isServing(dataDir string, rev compute.Revision) bool {
	dir := agentDirOf(dataDir, rev.AgentID)
	b, err := os.ReadFile(filepath.Join(dir, "serving"))
	if err != nil || strings.TrimSpace(string(b)) != rev.ID {
		return false
	}
	_, cfg, ok := runningPID(dataDir, rev.AgentID)
	return ok && cfg == filepath.Join(dir, "revisions", agentdir.Hash(rev.ID), "openclaw.json")
}

// envStandInGateway makes the test binary a stand-in gateway
// (standInGateway) when a stand-in runtime's script sets it.
const envStandInGateway = "OCC_TEST_LOCAL_STANDIN_GATEWAY"

// standInGateway answers 200 to every request on 127.0.0.1:<--port> until
// the file close-listener appears in its working directory (the Agent's
// directory), then closes its listener and keeps running, as a gateway
// whose HTTP server died while its process lives on would.
func standInGateway(args []string) int {
	var port string
	for i, a := range args {
		if a == "--port" && i+1 < len(args) {
			port = args[i+1]
		}
	}
	l, err := net.Listen("tcp4", "127.0.0.1:"+port)
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), ReadHeaderTimeout: 5 * time.Second}
	go func() { _ = srv.Serve(l) }()
	for {
		time.Sleep(100 * time.Millisecond)
		if _, err := os.Stat("close-listener"); err == nil {
			_ = srv.Close()
			time.Sleep(time.Hour) // until stopped
			return 0
		}
	}
}
