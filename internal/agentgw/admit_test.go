package agentgw_test

// Tests of a write's admission (SetAdmitted): OCC's write-ahead audit
// record, committed while the connection is opened, gating the set frame.

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/testutil"
	"github.com/openclaw/occ/internal/workspace"
)

// admission is an agentgw.Admit that counts its calls and records that it
// returned, after an optional wait and with a given result.
type admission struct {
	calls    atomic.Int32
	returned atomic.Bool
	wait     func(ctx context.Context) error // nil: no wait
	result   error
}

func (a *admission) admit(ctx context.Context) error {
	a.calls.Add(1)
	defer a.returned.Store(true)
	if a.wait != nil {
		if err := a.wait(ctx); err != nil {
			return err
		}
	}
	return a.result
}

// check asserts the FileClient contract: admit called exactly once and
// returned before SetAdmitted did.
func (a *admission) check(t *testing.T) {
	t.Helper()
	if n := a.calls.Load(); n != 1 {
		t.Errorf("admit called %d times, want exactly 1", n)
	}
	if !a.returned.Load() {
		t.Error("SetAdmitted returned before admit did")
	}
}

// TestSetAdmissionRealGateway: on the real gateway, with a connection of
// its own and pooled, a refused admission sends nothing (the file on disk
// is unchanged) and a slow one delays the write until it is granted.
func TestSetAdmissionRealGateway(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TokenMode)
	clients := map[string]*agentgw.Client{
		"fresh connection": agentgw.New(agentgw.Options{}),
		"pooled":           pooled(agentgw.PoolOptions{}),
	}
	for mode, c := range clients {
		t.Cleanup(c.Close)
		t.Run(mode+"/refused", func(t *testing.T) {
			preserve(t, g.Workspace, workspace.UserMD)
			before, _ := onDisk(t, g.Workspace, workspace.UserMD)
			refused := errors.New("audit store down")
			a := &admission{result: refused}
			_, err := c.SetAdmitted(testCtx(t), g.DirectTarget(), workspace.UserMD, "# not to be written\n", "", a.admit)
			a.check(t)
			if diff := cmp.Diff(unavailable("not_admitted"), outcomeOf(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if !errors.Is(err, refused) {
				t.Errorf("error %v does not wrap the admission's error", err)
			}
			if after, _ := onDisk(t, g.Workspace, workspace.UserMD); after != before {
				t.Errorf("USER.md changed to %q after a refused admission", after)
			}
		})
		t.Run(mode+"/slow", func(t *testing.T) {
			preserve(t, g.Workspace, workspace.UserMD)
			content := "# written after a slow admission (" + mode + ")\n"
			a := &admission{wait: func(ctx context.Context) error {
				select {
				case <-time.After(300 * time.Millisecond):
					return nil
				case <-ctx.Done():
					return ctx.Err()
				}
			}}
			got, err := c.SetAdmitted(testCtx(t), g.DirectTarget(), workspace.UserMD, content, "", a.admit)
			a.check(t)
			if err != nil {
				t.Fatalf("SetAdmitted: %v", err)
			}
			if diff := cmp.Diff(fileOf(workspace.UserMD, content), got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if disk, _ := onDisk(t, g.Workspace, workspace.UserMD); disk != content {
				t.Errorf("USER.md on disk = %q, want %q", disk, content)
			}
		})
	}
}

// TestSetAdmissionConcurrent: admit runs while the connection is opened,
// not before it, and the set frame waits for it. The admission below
// returns only once the gateway has a connection (so a client that ran
// admit first would never dial and fail the test at the bound), and it
// checks that no set frame had arrived by then.
func TestSetAdmissionConcurrent(t *testing.T) {
	g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
	for mode, c := range map[string]*agentgw.Client{
		"fresh connection": agentgw.New(agentgw.Options{}),
		"pooled":           pooled(agentgw.PoolOptions{}),
	} {
		t.Run(mode, func(t *testing.T) {
			t.Cleanup(c.Close)
			conns, sets := g.Connections(), g.Frames("agents.files.set")
			var setsAtAdmission atomic.Int32
			a := &admission{wait: func(ctx context.Context) error {
				ctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				for g.Connections() == conns {
					select {
					case <-time.After(5 * time.Millisecond):
					case <-ctx.Done():
						return errors.New("the client did not dial while the admission ran")
					}
				}
				// A little longer, so a client that did not wait would
				// have sent its frame by now.
				time.Sleep(50 * time.Millisecond)
				setsAtAdmission.Store(int32(g.Frames("agents.files.set") - sets))
				return nil
			}}
			if _, err := c.SetAdmitted(testCtx(t), g.DirectTarget(t), workspace.SoulMD, "x", "", a.admit); err != nil {
				t.Fatalf("SetAdmitted: %v", err)
			}
			a.check(t)
			if n := setsAtAdmission.Load(); n != 0 {
				t.Errorf("%d set frames reached the gateway before the admission returned", n)
			}
			if n := g.Frames("agents.files.set") - sets; n != 1 {
				t.Errorf("%d set frames after the admission, want 1", n)
			}
		})
	}
}

// TestSetAdmissionEarlyFailure: whatever ends a write before its frame (a
// local check, a refused dial, a refused handshake, an ended context),
// admit has been called once and has returned when SetAdmitted returns,
// so the caller can always record the attempt's outcome.
func TestSetAdmissionEarlyFailure(t *testing.T) {
	g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
	closed := closedPortTarget(t)
	ended, cancel := context.WithCancel(context.Background())
	cancel()
	slow := func(ctx context.Context) error { time.Sleep(100 * time.Millisecond); return nil }
	tests := []struct {
		name   string
		ctx    context.Context
		target agentgw.Target
		file   string
		want   outcome
	}{
		{"invalid name", nil, g.DirectTarget(t), "TOOLS.md", unavailable("invalid_name")},
		{"refused dial", nil, closed, workspace.SoulMD, unavailable("dial")},
		{"ended context", ended, g.DirectTarget(t), workspace.SoulMD, unavailable("canceled")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx := tt.ctx
			if ctx == nil {
				ctx = testCtx(t)
			}
			sets := g.Frames("agents.files.set")
			a := &admission{wait: slow}
			_, err := agentgw.New(agentgw.Options{}).SetAdmitted(ctx, tt.target, tt.file, "x", "", a.admit)
			a.check(t)
			if diff := cmp.Diff(tt.want, outcomeOf(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if n := g.Frames("agents.files.set") - sets; n != 0 {
				t.Errorf("%d set frames sent", n)
			}
		})
	}
}

// closedPortTarget is a direct target on a loopback port nothing listens
// on.
func closedPortTarget(t *testing.T) agentgw.Target {
	return agentgw.Target{Transport: agentgw.Direct, URL: "ws://" + testutil.RefusingAddr(t), TokenFile: gwtest.WriteFile(t, "gateway-token", []byte("token"))}
}
