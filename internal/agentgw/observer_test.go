package agentgw_test

import (
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/workspace"
)

type observed struct{ Op, Transport, Outcome string }

type recordingObserver struct {
	mu    sync.Mutex
	calls []observed
}

func (r *recordingObserver) GatewayOperation(op, transport, outcome string, d time.Duration) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if d <= 0 {
		outcome += " (no duration)"
	}
	r.calls = append(r.calls, observed{op, transport, outcome})
}

func (r *recordingObserver) take() []observed {
	r.mu.Lock()
	defer r.mu.Unlock()
	c := r.calls
	r.calls = nil
	return c
}

// TestObserverOutcomes: every operation reports one outcome from the fixed
// set, against the real gateway (ok, conflict, unavailable) and the fake
// one for the outcome the real gateway cannot be made to produce (a set
// whose connection dropped after the frame: outcome_unknown).
func TestObserverOutcomes(t *testing.T) {
	rec := &recordingObserver{}
	c := agentgw.New(agentgw.Options{Observer: rec})

	g := gwtest.Shared(t, gwtest.TokenMode)
	target := g.DirectTarget()
	name := workspace.UserMD
	preserve(t, g.Workspace, name)
	if _, err := c.Set(testCtx(t), target, name, "observed\n", ""); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Get(testCtx(t), target, name); err != nil {
		t.Fatal(err)
	}
	if _, err := c.Set(testCtx(t), target, name, "stale\n", sha("not the current content")); agentgw.KindOf(err) != agentgw.Conflict {
		t.Fatalf("stale CAS: %v", err)
	}
	if _, err := c.Get(testCtx(t), target, "NOT-A-FILE.md"); agentgw.KindOf(err) != agentgw.Unavailable {
		t.Fatalf("invalid name: %v", err)
	}
	want := []observed{
		{"set", "direct", "ok"},
		{"get", "direct", "ok"},
		{"set", "direct", "conflict"},
		{"get", "direct", "unavailable"},
	}
	if diff := cmp.Diff(want, rec.take()); diff != "" {
		t.Errorf("real gateway observations (-want +got):\n%s", diff)
	}

	fake := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
	fake.SetFault(methodSet, gwtest.FaultClose)
	if _, err := c.Set(testCtx(t), fake.DirectTarget(t), workspace.SoulMD, "applied?\n", ""); agentgw.KindOf(err) != agentgw.OutcomeUnknown {
		t.Fatalf("dropped set: %v", err)
	}
	if diff := cmp.Diff([]observed{{"set", "direct", "outcome_unknown"}}, rec.take()); diff != "" {
		t.Errorf("fake gateway observations (-want +got):\n%s", diff)
	}
}
