package fake_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/computetest"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/ids"
)

func TestConformance(t *testing.T) {
	harnesses := []struct {
		name        string
		caps        compute.Capabilities
		skipRunning bool
	}{
		{name: "NoCapabilities"},
		{name: "WorkspaceSetup", caps: compute.Capabilities{WorkspaceSetup: true}},
		{name: "LiveFiles", caps: compute.Capabilities{LiveFiles: true}},
		{name: "AllCapabilities", caps: compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}},
		{name: "AllCapabilities/SkipRunning", caps: compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}, skipRunning: true},
	}
	for _, h := range harnesses {
		t.Run(h.name, func(t *testing.T) {
			computetest.Run(t, computetest.Harness{
				New: func(t *testing.T) compute.Driver {
					d := fake.New(fake.Options{Capabilities: h.caps})
					// Registered before the suite's cleanup, so it runs
					// after it: the suite's own calls must keep the
					// contract too.
					t.Cleanup(func() {
						if v := d.Violations(); len(v) > 0 {
							t.Errorf("contract violations:\n%s", strings.Join(v, "\n"))
						}
					})
					return d
				},
				Timeout:     10 * time.Second,
				SkipRunning: h.skipRunning,
				Inspect: computetest.Inspect{
					WorkspaceFile: func(t *testing.T, d compute.Driver, rev compute.Revision, name string) (string, bool) {
						content, ok := d.(*fake.Driver).WorkspaceFiles(rev.AgentID)[name]
						return content, ok
					},
					Serving: func(t *testing.T, d compute.Driver, rev compute.Revision) bool {
						return d.(*fake.Driver).Active(rev.AgentID) == rev.ID
					},
				},
			})
		})
	}
}

// world is one Namespace and one Agent with three revisions.
type world struct {
	ns    compute.Namespace
	agent compute.Agent
	revs  []compute.Revision // revs[i].Number == i+1
}

func newWorld() world {
	w := world{ns: compute.Namespace{ID: ids.New(ids.Namespace), Name: "ns"}}
	w.agent = compute.Agent{ID: ids.New(ids.Agent), NamespaceID: w.ns.ID, Name: "agent"}
	for n := int64(1); n <= 3; n++ {
		w.revs = append(w.revs, compute.Revision{
			ID: ids.New(ids.Revision), NamespaceID: w.ns.ID, AgentID: w.agent.ID, AgentName: "agent",
			Number: n, ConfigurationID: "cfg_1", ConfigurationGeneration: 1, Configuration: []byte(`{}`),
		})
	}
	return w
}

func (w world) setup() *compute.WorkspaceSetup {
	return &compute.WorkspaceSetup{
		ID: ids.New(ids.WorkspaceSetup), NamespaceID: w.ns.ID, AgentID: w.agent.ID,
		Files: map[string]string{"SOUL.md": "calm\r\n", "USER.md": ""},
	}
}

func testContext(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}

// describe turns a verb's answer into a comparable string.
func describe(res compute.PrepareResult, err error) string {
	if p, ok := compute.AsPermanent(err); ok {
		return "permanent " + p.Code
	}
	if err != nil {
		return "error " + err.Error()
	}
	if !res.Ready {
		return "pending " + res.PendingReason
	}
	return "ready"
}

// stateOf is the fake's state of rev, or "none".
func stateOf(d *fake.Driver, rev compute.Revision) string {
	for _, r := range d.Revisions(rev.AgentID) {
		if r.ID == rev.ID {
			return string(r.State)
		}
	}
	return "none"
}

var errBoom = errors.New("boom")

func TestPrepareScripting(t *testing.T) {
	tests := []struct {
		name   string
		script func(d *fake.Driver)
		want   []string // answer and state after each PrepareRevision
	}{
		{
			name:   "no script",
			script: func(d *fake.Driver) {},
			want:   []string{"ready/running", "ready/running"},
		},
		{
			name:   "FailNext fails n calls without effect",
			script: func(d *fake.Driver) { d.FailNext(fake.PrepareRevision, 2, errBoom) },
			want:   []string{"error boom/none", "error boom/none", "ready/running"},
		},
		{
			name: "FailNext with a permanent error",
			script: func(d *fake.Driver) {
				d.FailNext(fake.PrepareRevision, 1, compute.Permanent(compute.CodeRuntimeFailed, errBoom))
			},
			want: []string{"permanent RUNTIME_FAILED/none", "ready/running"},
		},
		{
			name: "FailNext queues in order",
			script: func(d *fake.Driver) {
				d.FailNext(fake.PrepareRevision, 1, errBoom)
				d.FailNext(fake.PrepareRevision, 1, compute.Permanent(compute.CodeConfigurationInvalid, errBoom))
			},
			want: []string{"error boom/none", "permanent CONFIGURATION_INVALID/none", "ready/running"},
		},
		{
			name:   "FailNext of another method leaves PrepareRevision alone",
			script: func(d *fake.Driver) { d.FailNext(fake.ActivateRevision, 3, errBoom) },
			want:   []string{"ready/running"},
		},
		{
			name:   "FailNextApplied takes effect and then fails",
			script: func(d *fake.Driver) { d.FailNextApplied(fake.PrepareRevision, 1, errBoom) },
			want:   []string{"error boom/running", "ready/running"},
		},
		{
			name:   "PendingNext answers not ready n times",
			script: func(d *fake.Driver) { d.PendingNext(2, "AGENT_GATEWAY_UNAVAILABLE") },
			want: []string{
				"pending AGENT_GATEWAY_UNAVAILABLE/pending", "pending AGENT_GATEWAY_UNAVAILABLE/pending",
				"ready/running",
			},
		},
		{
			name: "a scripted failure does not consume a pending answer",
			script: func(d *fake.Driver) {
				d.PendingNext(1, "AGENT_GATEWAY_UNAVAILABLE")
				d.FailNext(fake.PrepareRevision, 1, errBoom)
			},
			want: []string{"error boom/none", "pending AGENT_GATEWAY_UNAVAILABLE/pending", "ready/running"},
		},
		{
			name: "zero and negative counts script nothing",
			script: func(d *fake.Driver) {
				d.FailNext(fake.PrepareRevision, 0, errBoom)
				d.PendingNext(-1, "X")
			},
			want: []string{"ready/running"},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld()
			d := fake.New(fake.Options{})
			if err := d.EnsureNamespace(testContext(t), w.ns); err != nil {
				t.Fatalf("EnsureNamespace: %v", err)
			}
			tt.script(d)
			var got []string
			for range tt.want {
				res, err := d.PrepareRevision(testContext(t), w.revs[0], compute.RevisionContext{})
				got = append(got, describe(res, err)+"/"+stateOf(d, w.revs[0]))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PrepareRevision answers (-want +got):\n%s", diff)
			}
			if v := d.Violations(); len(v) > 0 {
				t.Errorf("Violations() = %q, want none", v)
			}
		})
	}
}

func TestFailNextEveryMethod(t *testing.T) {
	w := newWorld()
	rev := w.revs[0]
	verbs := map[string]func(ctx context.Context, d *fake.Driver) error{
		fake.EnsureNamespace: func(ctx context.Context, d *fake.Driver) error { return d.EnsureNamespace(ctx, w.ns) },
		fake.DeleteNamespace: func(ctx context.Context, d *fake.Driver) error { return d.DeleteNamespace(ctx, w.ns) },
		fake.PrepareRevision: func(ctx context.Context, d *fake.Driver) error {
			_, err := d.PrepareRevision(ctx, rev, compute.RevisionContext{})
			return err
		},
		fake.ActivateRevision: func(ctx context.Context, d *fake.Driver) error {
			return d.ActivateRevision(ctx, rev, compute.RevisionContext{})
		},
		fake.StopRevision:   func(ctx context.Context, d *fake.Driver) error { return d.StopRevision(ctx, rev) },
		fake.RetireRevision: func(ctx context.Context, d *fake.Driver) error { return d.RetireRevision(ctx, rev) },
		fake.DeleteAgent:    func(ctx context.Context, d *fake.Driver) error { return d.DeleteAgent(ctx, w.agent) },
		fake.Endpoint: func(ctx context.Context, d *fake.Driver) error {
			_, err := d.Endpoint(ctx, rev)
			return err
		},
	}
	for method, call := range verbs {
		t.Run(method, func(t *testing.T) {
			d := fake.New(fake.Options{Capabilities: compute.Capabilities{LiveFiles: true}})
			// A ready revision, so that every verb succeeds unscripted.
			if err := d.EnsureNamespace(testContext(t), w.ns); err != nil {
				t.Fatalf("EnsureNamespace: %v", err)
			}
			if _, err := d.PrepareRevision(testContext(t), rev, compute.RevisionContext{}); err != nil {
				t.Fatalf("PrepareRevision: %v", err)
			}
			d.FailNext(method, 1, errBoom)
			if err := call(testContext(t), d); !errors.Is(err, errBoom) {
				t.Errorf("first %s after FailNext = %v, want %v", method, err, errBoom)
			}
			if err := call(testContext(t), d); err != nil {
				t.Errorf("second %s after FailNext(1) = %v, want nil", method, err)
			}
			calls := d.Calls()
			var got []string
			for _, c := range calls[2:] {
				got = append(got, c.Method)
			}
			if diff := cmp.Diff([]string{method, method}, got); diff != "" {
				t.Errorf("recorded calls (-want +got):\n%s", diff)
			}
		})
	}
}

func TestScriptingPanicsOnMistakes(t *testing.T) {
	tests := []struct {
		name string
		call func(d *fake.Driver)
	}{
		{"FailNext of an unknown method", func(d *fake.Driver) { d.FailNext("Prepare", 1, errBoom) }},
		{"FailNext with a nil error", func(d *fake.Driver) { d.FailNext(fake.PrepareRevision, 1, nil) }},
		{"FailNextApplied of ID", func(d *fake.Driver) { d.FailNextApplied("ID", 1, errBoom) }},
		{"SetDelay of an unknown method", func(d *fake.Driver) { d.SetDelay("prepareRevision", time.Second) }},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			defer func() {
				if recover() == nil {
					t.Errorf("%s did not panic", tt.name)
				}
			}()
			tt.call(fake.New(fake.Options{}))
		})
	}
}

// hold makes the next call of method for revision revID block until
// release is called; entered is closed once it is in progress.
func hold(d *fake.Driver, method, revID string) (entered <-chan struct{}, release func()) {
	in, out := make(chan struct{}), make(chan struct{})
	d.OnCall(func(c fake.Call) {
		if c.Method == method && c.RevisionID == revID {
			close(in)
			<-out
		}
	})
	return in, func() { close(out) }
}

// overlap runs first (blocked in progress) while second runs, then lets
// first finish.
func overlap(t *testing.T, d *fake.Driver, method, revID string, first, second func()) {
	t.Helper()
	entered, release := hold(d, method, revID)
	done := make(chan struct{})
	go func() {
		defer close(done)
		first()
	}()
	<-entered
	second()
	release()
	<-done
	d.OnCall(nil)
}

func TestViolations(t *testing.T) {
	ignore := func(error) {}
	tests := []struct {
		name string
		caps compute.Capabilities
		run  func(ctx context.Context, t *testing.T, d *fake.Driver, w world)
		want func(w world) []string
	}{
		{
			name: "a serialized deployment keeps the contract",
			caps: compute.Capabilities{WorkspaceSetup: true},
			run: func(ctx context.Context, t *testing.T, d *fake.Driver, w world) {
				s := w.setup()
				ignore(d.EnsureNamespace(ctx, w.ns))
				_, _ = d.PrepareRevision(ctx, w.revs[0], compute.RevisionContext{WorkspaceSetup: s})
				ignore(d.ActivateRevision(ctx, w.revs[0], compute.RevisionContext{WorkspaceSetup: s}))
				completed := s.WithoutFiles()
				completed.Completed = true
				_, _ = d.PrepareRevision(ctx, w.revs[1], compute.RevisionContext{WorkspaceSetup: &completed})
				ignore(d.ActivateRevision(ctx, w.revs[1], compute.RevisionContext{WorkspaceSetup: &completed}))
				ignore(d.StopRevision(ctx, w.revs[0]))
				ignore(d.RetireRevision(ctx, w.revs[0]))
				ignore(d.RetireRevision(ctx, w.revs[1]))
				ignore(d.DeleteAgent(ctx, w.agent))
				ignore(d.DeleteNamespace(ctx, w.ns))
			},
			want: func(w world) []string { return nil },
		},
		{
			name: "PrepareRevision entered while another PrepareRevision is in progress",
			run: func(ctx context.Context, t *testing.T, d *fake.Driver, w world) {
				ignore(d.EnsureNamespace(ctx, w.ns))
				overlap(t, d, fake.PrepareRevision, w.revs[0].ID,
					func() { _, _ = d.PrepareRevision(ctx, w.revs[0], compute.RevisionContext{}) },
					func() { _, _ = d.PrepareRevision(ctx, w.revs[1], compute.RevisionContext{}) })
			},
			want: func(w world) []string {
				return []string{fmt.Sprintf("PrepareRevision(%s) for agent %s entered while PrepareRevision(%s) was in progress",
					w.revs[1].ID, w.agent.ID, w.revs[0].ID)}
			},
		},
		{
			name: "StopRevision entered while ActivateRevision is in progress",
			run: func(ctx context.Context, t *testing.T, d *fake.Driver, w world) {
				ignore(d.EnsureNamespace(ctx, w.ns))
				_, _ = d.PrepareRevision(ctx, w.revs[1], compute.RevisionContext{})
				overlap(t, d, fake.ActivateRevision, w.revs[1].ID,
					func() { ignore(d.ActivateRevision(ctx, w.revs[1], compute.RevisionContext{})) },
					func() { ignore(d.StopRevision(ctx, w.revs[0])) })
			},
			want: func(w world) []string {
				return []string{fmt.Sprintf("StopRevision(%s) for agent %s entered while ActivateRevision(%s) was in progress",
					w.revs[0].ID, w.agent.ID, w.revs[1].ID)}
			},
		},
		{
			name: "overlapping StopRevision and RetireRevision are not a deployment overlap",
			run: func(ctx context.Context, t *testing.T, d *fake.Driver, w world) {
				overlap(t, d, fake.StopRevision, w.revs[0].ID,
					func() { ignore(d.StopRevision(ctx, w.revs[0])) },
					func() { ignore(d.RetireRevision(ctx, w.revs[1])) })
			},
			want: func(w world) []string { return nil },
		},
		{
			name: "different Agents may deploy at the same time",
			run: func(ctx context.Context, t *testing.T, d *fake.Driver, w world) {
				other := newWorld()
				other.ns = w.ns
				for i := range other.revs {
					other.revs[i].NamespaceID = w.ns.ID
				}
				ignore(d.EnsureNamespace(ctx, w.ns))
				overlap(t, d, fake.PrepareRevision, w.revs[0].ID,
					func() { _, _ = d.PrepareRevision(ctx, w.revs[0], compute.RevisionContext{}) },
					func() { _, _ = d.PrepareRevision(ctx, other.revs[0], compute.RevisionContext{}) })
			},
			want: func(w world) []string { return nil },
		},
		{
			name: "a setup delivered to a driver without WorkspaceSetup",
			run: func(ctx context.Context, t *testing.T, d *fake.Driver, w world) {
				ignore(d.EnsureNamespace(ctx, w.ns))
				_, err := d.PrepareRevision(ctx, w.revs[0], compute.RevisionContext{WorkspaceSetup: w.setup()})
				if got := describe(compute.PrepareResult{}, err); got != "permanent "+compute.CodeWorkspaceSetupUnsupported {
					t.Errorf("PrepareRevision with a setup = %s, want permanent %s", got, compute.CodeWorkspaceSetupUnsupported)
				}
			},
			want: func(w world) []string {
				return []string{fmt.Sprintf("PrepareRevision(%s) delivered a workspace setup to a driver without WorkspaceSetup", w.revs[0].ID)}
			},
		},
		{
			name: "PrepareRevision in a Namespace that is not ensured",
			run: func(ctx context.Context, t *testing.T, d *fake.Driver, w world) {
				_, _ = d.PrepareRevision(ctx, w.revs[0], compute.RevisionContext{})
			},
			want: func(w world) []string {
				return []string{fmt.Sprintf("PrepareRevision(%s) in namespace %s, which is not ensured", w.revs[0].ID, w.ns.ID)}
			},
		},
		{
			name: "ActivateRevision before PrepareRevision is ready",
			run: func(ctx context.Context, t *testing.T, d *fake.Driver, w world) {
				ignore(d.EnsureNamespace(ctx, w.ns))
				if err := d.ActivateRevision(ctx, w.revs[0], compute.RevisionContext{}); !errors.Is(err, fake.ErrNotPrepared) {
					t.Errorf("ActivateRevision of an unknown revision = %v, want ErrNotPrepared", err)
				}
				d.PendingNext(1, "AGENT_GATEWAY_UNAVAILABLE")
				_, _ = d.PrepareRevision(ctx, w.revs[1], compute.RevisionContext{})
				if err := d.ActivateRevision(ctx, w.revs[1], compute.RevisionContext{}); !errors.Is(err, fake.ErrNotPrepared) {
					t.Errorf("ActivateRevision of a pending revision = %v, want ErrNotPrepared", err)
				}
			},
			want: func(w world) []string {
				return []string{
					fmt.Sprintf(`ActivateRevision(%s) of a revision that is not prepared and ready (state "")`, w.revs[0].ID),
					fmt.Sprintf(`ActivateRevision(%s) of a revision that is not prepared and ready (state "pending")`, w.revs[1].ID),
				}
			},
		},
		{
			name: "PrepareRevision of a retired revision",
			run: func(ctx context.Context, t *testing.T, d *fake.Driver, w world) {
				ignore(d.EnsureNamespace(ctx, w.ns))
				ignore(d.RetireRevision(ctx, w.revs[0]))
				_, err := d.PrepareRevision(ctx, w.revs[0], compute.RevisionContext{})
				if got := describe(compute.PrepareResult{}, err); got != "permanent "+compute.CodeRuntimeFailed {
					t.Errorf("PrepareRevision of a retired revision = %s, want permanent %s", got, compute.CodeRuntimeFailed)
				}
			},
			want: func(w world) []string {
				return []string{fmt.Sprintf("PrepareRevision(%s) of a retired revision", w.revs[0].ID)}
			},
		},
		{
			name: "PrepareRevision after DeleteAgent",
			run: func(ctx context.Context, t *testing.T, d *fake.Driver, w world) {
				ignore(d.EnsureNamespace(ctx, w.ns))
				ignore(d.DeleteAgent(ctx, w.agent))
				_, _ = d.PrepareRevision(ctx, w.revs[0], compute.RevisionContext{})
			},
			want: func(w world) []string {
				return []string{fmt.Sprintf("PrepareRevision(%s) for agent %s after DeleteAgent", w.revs[0].ID, w.agent.ID)}
			},
		},
		{
			name: "a revision sent again with another snapshot",
			run: func(ctx context.Context, t *testing.T, d *fake.Driver, w world) {
				ignore(d.EnsureNamespace(ctx, w.ns))
				_, _ = d.PrepareRevision(ctx, w.revs[0], compute.RevisionContext{})
				changed := w.revs[0]
				changed.Configuration = []byte(`{"agents":{}}`)
				_, _ = d.PrepareRevision(ctx, changed, compute.RevisionContext{})
			},
			want: func(w world) []string {
				return []string{fmt.Sprintf("revision %s sent with a different snapshot (revisions are immutable)", w.revs[0].ID)}
			},
		},
		{
			name: "DeleteAgent and DeleteNamespace with a running revision",
			run: func(ctx context.Context, t *testing.T, d *fake.Driver, w world) {
				ignore(d.EnsureNamespace(ctx, w.ns))
				_, _ = d.PrepareRevision(ctx, w.revs[0], compute.RevisionContext{})
				ignore(d.DeleteNamespace(ctx, w.ns))
				ignore(d.DeleteAgent(ctx, w.agent))
			},
			want: func(w world) []string {
				return []string{
					fmt.Sprintf("DeleteNamespace(%s) while agent %s has unretired revisions", w.ns.ID, w.agent.ID),
					fmt.Sprintf("DeleteAgent(%s) while it has unretired revisions", w.agent.ID),
				}
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld()
			d := fake.New(fake.Options{Capabilities: tt.caps})
			tt.run(testContext(t), t, d, w)
			if diff := cmp.Diff(tt.want(w), d.Violations()); diff != "" {
				t.Errorf("Violations() (-want +got):\n%s", diff)
			}
		})
	}
}

func TestRevisionStates(t *testing.T) {
	type step struct {
		method string
		rev    int // index into world.revs
	}
	tests := []struct {
		name       string
		steps      []step
		wantStates []fake.State // per revision; "" when unknown
		wantActive int          // index, -1 for none
	}{
		{
			name:       "activating a newer revision keeps the older running",
			steps:      []step{{fake.PrepareRevision, 0}, {fake.ActivateRevision, 0}, {fake.PrepareRevision, 1}, {fake.ActivateRevision, 1}},
			wantStates: []fake.State{fake.StateRunning, fake.StateActive, ""},
			wantActive: 1,
		},
		{
			name: "retiring the older revision leaves the newer serving",
			steps: []step{
				{fake.PrepareRevision, 0}, {fake.ActivateRevision, 0}, {fake.PrepareRevision, 1}, {fake.ActivateRevision, 1},
				{fake.RetireRevision, 0},
			},
			wantStates: []fake.State{fake.StateRetired, fake.StateActive, ""},
			wantActive: 1,
		},
		{
			name: "stopping the older revision leaves the newer serving",
			steps: []step{
				{fake.PrepareRevision, 0}, {fake.ActivateRevision, 0}, {fake.PrepareRevision, 1}, {fake.ActivateRevision, 1},
				{fake.StopRevision, 0},
			},
			wantStates: []fake.State{fake.StateStopped, fake.StateActive, ""},
			wantActive: 1,
		},
		{
			name: "activating an older revision does not displace the newer",
			steps: []step{
				{fake.PrepareRevision, 0}, {fake.PrepareRevision, 1}, {fake.ActivateRevision, 1}, {fake.ActivateRevision, 0},
			},
			wantStates: []fake.State{fake.StateRunning, fake.StateActive, ""},
			wantActive: 1,
		},
		{
			name:       "stopping the serving revision removes the routing",
			steps:      []step{{fake.PrepareRevision, 0}, {fake.ActivateRevision, 0}, {fake.StopRevision, 0}},
			wantStates: []fake.State{fake.StateStopped, "", ""},
			wantActive: -1,
		},
		{
			name:       "preparing a stopped revision starts it again",
			steps:      []step{{fake.PrepareRevision, 0}, {fake.StopRevision, 0}, {fake.PrepareRevision, 0}},
			wantStates: []fake.State{fake.StateRunning, "", ""},
			wantActive: -1,
		},
		{
			name:       "stop of an unknown revision keeps no record, retire keeps a tombstone",
			steps:      []step{{fake.StopRevision, 0}, {fake.RetireRevision, 1}, {fake.StopRevision, 1}},
			wantStates: []fake.State{"", fake.StateRetired, ""},
			wantActive: -1,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld()
			d := fake.New(fake.Options{})
			ctx := testContext(t)
			if err := d.EnsureNamespace(ctx, w.ns); err != nil {
				t.Fatalf("EnsureNamespace: %v", err)
			}
			for _, s := range tt.steps {
				rev := w.revs[s.rev]
				var err error
				switch s.method {
				case fake.PrepareRevision:
					_, err = d.PrepareRevision(ctx, rev, compute.RevisionContext{})
				case fake.ActivateRevision:
					err = d.ActivateRevision(ctx, rev, compute.RevisionContext{})
				case fake.StopRevision:
					err = d.StopRevision(ctx, rev)
				case fake.RetireRevision:
					err = d.RetireRevision(ctx, rev)
				}
				if err != nil {
					t.Fatalf("%s(#%d): %v", s.method, rev.Number, err)
				}
			}
			var want []fake.Revision
			var wantRunning []string
			for i, st := range tt.wantStates {
				if st != "" {
					want = append(want, fake.Revision{ID: w.revs[i].ID, Number: w.revs[i].Number, State: st})
				}
				if st == fake.StateRunning || st == fake.StateActive {
					wantRunning = append(wantRunning, w.revs[i].ID)
				}
			}
			if diff := cmp.Diff(want, d.Revisions(w.agent.ID)); diff != "" {
				t.Errorf("Revisions (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(wantRunning, d.Running(w.agent.ID)); diff != "" {
				t.Errorf("Running (-want +got):\n%s", diff)
			}
			wantActive := ""
			if tt.wantActive >= 0 {
				wantActive = w.revs[tt.wantActive].ID
			}
			if got := d.Active(w.agent.ID); got != wantActive {
				t.Errorf("Active = %q, want %q", got, wantActive)
			}
			if v := d.Violations(); len(v) > 0 {
				t.Errorf("Violations() = %q, want none", v)
			}
		})
	}
}

func TestWorkspaceSetup(t *testing.T) {
	failed := "permanent " + compute.CodeWorkspaceSetupFailed
	tests := []struct {
		name string
		// setups returns the setup of each PrepareRevision call, made
		// with revisions 1, 2, 3 in turn.
		setups    func(w world, s *compute.WorkspaceSetup) []*compute.WorkspaceSetup
		want      []string
		wantFiles bool // the workspace holds s's files and marker
	}{
		{
			name: "a pending setup is applied",
			setups: func(w world, s *compute.WorkspaceSetup) []*compute.WorkspaceSetup {
				return []*compute.WorkspaceSetup{s}
			},
			want:      []string{"ready"},
			wantFiles: true,
		},
		{
			name: "a retried pending setup with a matching marker is accepted",
			setups: func(w world, s *compute.WorkspaceSetup) []*compute.WorkspaceSetup {
				return []*compute.WorkspaceSetup{s, s}
			},
			want:      []string{"ready", "ready"},
			wantFiles: true,
		},
		{
			name: "a completed setup only verifies the marker",
			setups: func(w world, s *compute.WorkspaceSetup) []*compute.WorkspaceSetup {
				return []*compute.WorkspaceSetup{s, completed(s)}
			},
			want:      []string{"ready", "ready"},
			wantFiles: true,
		},
		{
			name: "a completed setup without a marker is never replayed",
			setups: func(w world, s *compute.WorkspaceSetup) []*compute.WorkspaceSetup {
				return []*compute.WorkspaceSetup{completed(s)}
			},
			want: []string{failed},
		},
		{
			name: "a marker of another setup blocks the start",
			setups: func(w world, s *compute.WorkspaceSetup) []*compute.WorkspaceSetup {
				return []*compute.WorkspaceSetup{s, completed(w.setup()), w.setup()}
			},
			want:      []string{"ready", failed, failed},
			wantFiles: true,
		},
		{
			name: "a pending setup without files",
			setups: func(w world, s *compute.WorkspaceSetup) []*compute.WorkspaceSetup {
				s.Files = map[string]string{}
				return []*compute.WorkspaceSetup{s}
			},
			want: []string{failed},
		},
		{
			name: "a completed setup with files",
			setups: func(w world, s *compute.WorkspaceSetup) []*compute.WorkspaceSetup {
				s.Completed = true
				return []*compute.WorkspaceSetup{s}
			},
			want: []string{failed},
		},
		{
			name: "a file name outside the four",
			setups: func(w world, s *compute.WorkspaceSetup) []*compute.WorkspaceSetup {
				s.Files["../SOUL.md"] = "x"
				return []*compute.WorkspaceSetup{s}
			},
			want: []string{failed},
		},
		{
			name: "a setup of another Agent",
			setups: func(w world, s *compute.WorkspaceSetup) []*compute.WorkspaceSetup {
				s.AgentID = ids.New(ids.Agent)
				return []*compute.WorkspaceSetup{s}
			},
			want: []string{failed},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w := newWorld()
			d := fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true}})
			ctx := testContext(t)
			if err := d.EnsureNamespace(ctx, w.ns); err != nil {
				t.Fatalf("EnsureNamespace: %v", err)
			}
			s := w.setup()
			setups := tt.setups(w, s)
			var got []string
			for i, setup := range setups {
				got = append(got, describe(d.PrepareRevision(ctx, w.revs[i], compute.RevisionContext{WorkspaceSetup: setup})))
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("PrepareRevision answers (-want +got):\n%s", diff)
			}
			var wantFiles map[string]string
			var wantMarker *compute.WorkspaceSetup
			if tt.wantFiles {
				wantFiles = w.setup().Files
				m := s.WithoutFiles()
				wantMarker = &m
			}
			if diff := cmp.Diff(wantFiles, d.WorkspaceFiles(w.agent.ID)); diff != "" {
				t.Errorf("WorkspaceFiles (-want +got):\n%s", diff)
			}
			var gotMarker *compute.WorkspaceSetup
			if m, ok := d.Marker(w.agent.ID); ok {
				gotMarker = &m
			}
			if diff := cmp.Diff(wantMarker, gotMarker); diff != "" {
				t.Errorf("Marker (-want +got):\n%s", diff)
			}
			var wantDelivered []compute.WorkspaceSetup
			for _, s := range setups {
				wantDelivered = append(wantDelivered, *s)
			}
			if diff := cmp.Diff(wantDelivered, d.Delivered(w.agent.ID)); diff != "" {
				t.Errorf("Delivered (-want +got):\n%s", diff)
			}
		})
	}
}

func completed(s *compute.WorkspaceSetup) *compute.WorkspaceSetup {
	c := s.WithoutFiles()
	c.Completed = true
	return &c
}

func TestWorkspaceLifetime(t *testing.T) {
	w := newWorld()
	d := fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true}})
	ctx := testContext(t)
	s := w.setup()
	rc := compute.RevisionContext{WorkspaceSetup: s}
	mustOK := func(what string, err error) {
		t.Helper()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
	}
	mustOK("EnsureNamespace", d.EnsureNamespace(ctx, w.ns))
	_, err := d.PrepareRevision(ctx, w.revs[0], rc)
	mustOK("PrepareRevision", err)
	mustOK("ActivateRevision", d.ActivateRevision(ctx, w.revs[0], rc))
	mustOK("StopRevision", d.StopRevision(ctx, w.revs[0]))
	mustOK("RetireRevision", d.RetireRevision(ctx, w.revs[0]))
	if diff := cmp.Diff(s.Files, d.WorkspaceFiles(w.agent.ID)); diff != "" {
		t.Errorf("WorkspaceFiles after Stop and Retire (-want +got):\n%s", diff)
	}
	mustOK("DeleteAgent", d.DeleteAgent(ctx, w.agent))
	if got := d.WorkspaceFiles(w.agent.ID); got != nil {
		t.Errorf("WorkspaceFiles after DeleteAgent = %q, want nil", got)
	}
	if _, ok := d.Marker(w.agent.ID); ok {
		t.Error("Marker after DeleteAgent is still present")
	}
	if !d.Deleted(w.agent.ID) {
		t.Error("Deleted after DeleteAgent = false")
	}
}

func TestCallsAreDeepCopies(t *testing.T) {
	w := newWorld()
	d := fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true}})
	ctx := testContext(t)
	if err := d.EnsureNamespace(ctx, w.ns); err != nil {
		t.Fatalf("EnsureNamespace: %v", err)
	}
	s := w.setup()
	want := []fake.Call{
		{Method: fake.EnsureNamespace, NamespaceID: w.ns.ID},
		{Method: fake.PrepareRevision, NamespaceID: w.ns.ID, AgentID: w.agent.ID, RevisionID: w.revs[0].ID, Setup: w.setup()},
	}
	want[1].Setup.ID = s.ID
	if _, err := d.PrepareRevision(ctx, w.revs[0], compute.RevisionContext{WorkspaceSetup: s}); err != nil {
		t.Fatalf("PrepareRevision: %v", err)
	}
	s.Files["SOUL.md"] = "changed by the caller"
	d.Calls()[1].Setup.Files["USER.md"] = "changed through Calls"
	d.Delivered(w.agent.ID)[0].Files["USER.md"] = "changed through Delivered"
	if diff := cmp.Diff(want, d.Calls()); diff != "" {
		t.Errorf("Calls (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]compute.WorkspaceSetup{*want[1].Setup}, d.Delivered(w.agent.ID)); diff != "" {
		t.Errorf("Delivered (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want[1].Setup.Files, d.WorkspaceFiles(w.agent.ID)); diff != "" {
		t.Errorf("WorkspaceFiles (-want +got):\n%s", diff)
	}
}

func TestContextEndsDelay(t *testing.T) {
	w := newWorld()
	d := fake.New(fake.Options{})
	d.SetDelay(fake.PrepareRevision, time.Hour)
	d.FailNext(fake.PrepareRevision, 1, errBoom)
	ctx, cancel := context.WithTimeout(t.Context(), 20*time.Millisecond)
	defer cancel()
	start := time.Now()
	_, err := d.PrepareRevision(ctx, w.revs[0], compute.RevisionContext{})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("PrepareRevision past its deadline = %v, want DeadlineExceeded", err)
	}
	if elapsed := time.Since(start); elapsed > 5*time.Second {
		t.Errorf("PrepareRevision took %s despite its deadline", elapsed)
	}
	// The cancelled call had no effect and did not consume the script.
	d.SetDelay(fake.PrepareRevision, 0)
	if _, err := d.PrepareRevision(testContext(t), w.revs[0], compute.RevisionContext{}); !errors.Is(err, errBoom) {
		t.Errorf("PrepareRevision after the cancelled call = %v, want the scripted %v", err, errBoom)
	}
	if got := d.Revisions(w.agent.ID); got != nil {
		t.Errorf("Revisions = %+v, want none", got)
	}
}

func TestEndpoint(t *testing.T) {
	w := newWorld()
	tests := []struct {
		name    string
		caps    compute.Capabilities
		want    compute.Endpoint
		wantErr error
	}{
		{"without LiveFiles", compute.Capabilities{WorkspaceSetup: true}, compute.Endpoint{}, compute.ErrNoEndpoint},
		{
			"with LiveFiles", compute.Capabilities{LiveFiles: true},
			compute.Endpoint{URL: "ws://127.0.0.1:0/fake/" + w.agent.ID, Transport: compute.Direct}, nil,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := fake.New(fake.Options{ID: "fake-1", Capabilities: tt.caps})
			got, err := d.Endpoint(testContext(t), w.revs[0])
			if !errors.Is(err, tt.wantErr) {
				t.Errorf("Endpoint error = %v, want %v", err, tt.wantErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Endpoint (-want +got):\n%s", diff)
			}
			if d.ID() != "fake-1" || d.Capabilities() != tt.caps {
				t.Errorf("ID, Capabilities = %q, %+v; want fake-1, %+v", d.ID(), d.Capabilities(), tt.caps)
			}
		})
	}
}
