package docker

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/moby/moby/api/types/container"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/agentdir"
)

// prepareUntilPermanent polls PrepareRevision until it fails for good and
// returns that failure.
func (f *agentFixture) prepareUntilPermanent(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) *compute.PermanentError {
	f.t.Helper()
	for {
		res, err := f.d.PrepareRevision(ctx, rev, rc)
		if p, ok := compute.AsPermanent(err); ok {
			return p
		}
		if err == nil && res.Ready {
			f.t.Fatalf("PrepareRevision(#%d) is ready; want a permanent failure", rev.Number)
		}
		select {
		case <-ctx.Done():
			f.t.Fatalf("PrepareRevision(#%d) never failed for good: %+v, %v", rev.Number, res, err)
		case <-time.After(500 * time.Millisecond):
		}
	}
}

// TestFailedRevisionRestoresServing: revision 1 serves; a later revision
// whose gateway crash-loops, or runs and never answers /readyz (stand-ins
// for the gateway process), fails with RUNTIME_FAILED, its container is
// stopped for good (no endless restarts, never serving unactivated) and
// revision 1's gateway runs and serves again without any call for it.
func TestFailedRevisionRestoresServing(t *testing.T) {
	acquireGateway(t)
	d := newTestDriver(t, "")
	ctx, cancel := context.WithTimeout(t.Context(), 6*time.Minute)
	defer cancel()
	f := newAgent(t, d)
	t.Cleanup(f.delete)
	rev1 := f.revision(1)
	f.prepareReady(ctx, rev1, compute.RevisionContext{})
	if err := d.ActivateRevision(ctx, rev1, compute.RevisionContext{}); err != nil {
		t.Fatal(err)
	}
	port := d.host(f.agent).port()
	// Short for the stand-ins only: a real gateway takes longer.
	d.o.ReadyTimeout = 5 * time.Second

	check := func(t *testing.T, rev compute.Revision) {
		t.Helper()
		failed := gatewayOf(t, d, rev)
		if failed.State.Running || failed.State.Restarting {
			t.Errorf("the failed revision's gateway still runs: %+v", failed.State)
		}
		time.Sleep(3 * time.Second)
		if later := gatewayOf(t, d, rev); later.State.Running || later.State.Restarting || later.RestartCount != failed.RestartCount {
			t.Errorf("the failed revision's gateway was restarted: %d -> %d restarts, %+v", failed.RestartCount, later.RestartCount, later.State)
		}
		if s := gatewayOf(t, d, rev1); !s.State.Running {
			t.Fatalf("the serving revision's gateway is not running: %+v", s.State)
		}
		deadline := time.Now().Add(2 * time.Minute)
		for !d.ready(ctx, port) {
			if time.Now().After(deadline) {
				t.Fatal("the serving revision's gateway did not become ready again")
			}
			time.Sleep(500 * time.Millisecond)
		}
		if !isServing(t, d, rev1) {
			t.Error("revision 1 is not serving")
		}
	}

	t.Run("CrashLoop", func(t *testing.T) {
		d.gatewayCmd = func(int) []string { return []string{nodePath, "-e", "process.exit(1)"} }
		t.Cleanup(func() { d.gatewayCmd = nil })
		rev := f.revision(2)
		ff := &agentFixture{t: t, d: d, ns: f.ns, agent: f.agent}
		if p := ff.prepareUntilPermanent(ctx, rev, compute.RevisionContext{}); p.Code != compute.CodeRuntimeFailed {
			t.Errorf("crash loop: %s, want %s", p.Code, compute.CodeRuntimeFailed)
		}
		check(t, rev)
	})

	t.Run("NeverReady", func(t *testing.T) {
		d.gatewayCmd = func(int) []string { return []string{nodePath, "-e", "setInterval(() => {}, 1000)"} }
		t.Cleanup(func() { d.gatewayCmd = nil })
		rev := f.revision(3)
		ff := &agentFixture{t: t, d: d, ns: f.ns, agent: f.agent}
		tctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		p := ff.prepareUntilPermanent(tctx, rev, compute.RevisionContext{})
		if p.Code != compute.CodeRuntimeFailed || !strings.Contains(p.Error(), "did not become ready within") {
			t.Errorf("never ready: %s %v, want %s", p.Code, p, compute.CodeRuntimeFailed)
		}
		check(t, rev)
	})
}

// TestSetupContainerExit: a setup container killed by the OOM killer, or
// ending with a signal's status (137, as after a force removal), is a
// retryable failure, while the runner's own failure (status 1) stays a
// permanent WORKSPACE_SETUP_FAILED. The setup process is a stand-in (it
// runs as the container's PID 1, which cannot signal itself).
func TestSetupContainerExit(t *testing.T) {
	d := newTestDriver(t, "")
	d.o.Config.MemoryMiB = 64
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	for _, c := range []struct {
		name, script string
		permanent    bool
	}{
		{"OOMKilled", "const a = []; for (;;) a.push(Buffer.alloc(8 << 20, 1))", false},
		{"Status137", "process.exit(137)", false},
		{"RunnerFailure", "process.exit(1)", true},
	} {
		t.Run(c.name, func(t *testing.T) {
			f := newAgent(t, d)
			t.Cleanup(f.delete)
			d.setupCmd = []string{nodePath, "-e", c.script, "--"}
			t.Cleanup(func() { d.setupCmd = nil })
			_, err := d.PrepareRevision(ctx, f.revision(1), compute.RevisionContext{WorkspaceSetup: f.setup(true)})
			t.Logf("PrepareRevision = %v", err)
			p, permanent := compute.AsPermanent(err)
			switch {
			case err == nil:
				t.Fatal("PrepareRevision succeeded; want a failure")
			case permanent != c.permanent:
				t.Errorf("PrepareRevision = %v; permanent %t, want %t", err, permanent, c.permanent)
			case permanent && p.Code != compute.CodeWorkspaceSetupFailed:
				t.Errorf("PrepareRevision = %s, want %s", p.Code, compute.CodeWorkspaceSetupFailed)
			}
			if cs, _ := d.containers(ctx, agentFilter(f.agent, "", "")); len(cs) != 0 {
				t.Errorf("%d containers after a failed setup, want none", len(cs))
			}
		})
	}
}

// TestMalformedIdentityAtPrepare: a revision prepared over a malformed
// setup identity fails with WORKSPACE_SETUP_FAILED at once (every retry
// would read the same file), and no gateway starts.
func TestMalformedIdentityAtPrepare(t *testing.T) {
	d := newTestDriver(t, "")
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	f := newAgent(t, d)
	t.Cleanup(f.delete)
	h := d.host(f.agent)
	if err := h.ensure(f.agent, f.ns); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(h.Path(agentdir.FileIdentity), []byte("not json"), 0o600); err != nil {
		t.Fatal(err)
	}
	_, err := d.PrepareRevision(ctx, f.revision(2), compute.RevisionContext{})
	if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeWorkspaceSetupFailed {
		t.Errorf("PrepareRevision over a malformed identity: %v; want a permanent %s", err, compute.CodeWorkspaceSetupFailed)
	}
	cs, _ := d.containers(ctx, agentFilter(f.agent, roleGateway, ""))
	for _, c := range cs {
		if c.State == container.StateRunning {
			t.Error("a gateway runs with a malformed setup identity")
		}
	}
}
