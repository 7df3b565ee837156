package computetest

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/ids"
)

// Harness tells the suite how to build and observe one driver.
type Harness struct {
	// New returns a driver for one case. It is called once per case, from
	// parallel subtests, and may register its own t.Cleanup (which runs
	// after the case's cleanup). Required.
	New func(t *testing.T) compute.Driver
	// NewPair returns the driver for Concurrency/TwoAgents, which runs
	// two Agents' runtimes on it at once: a harness that limits how many
	// runtimes run at a time reserves two here. Nil means New.
	NewPair func(t *testing.T) compute.Driver
	// Configuration is a minimal valid native OpenClaw configuration for
	// this driver, used for every revision. Empty means `{}`.
	Configuration json.RawMessage
	// Timeout is each case's deadline, shared by all of its steps
	// including polling for readiness; cleanup gets another one. Zero
	// means DefaultTimeout.
	Timeout time.Duration
	// SkipRunning skips the cases that need PrepareRevision to become
	// ready (see the package documentation), for backends where no runtime
	// can really run.
	SkipRunning bool
	// Inspect looks behind the interface; every hook is optional.
	Inspect Inspect
}

// Inspect reads what a driver left on its backend, for checks the
// interface cannot express.
type Inspect struct {
	// WorkspaceFile returns the content of the named file in the durable
	// workspace of rev's Agent, as driver d wrote it, and whether it
	// exists. Used only when the driver declares WorkspaceSetup.
	WorkspaceFile func(t *testing.T, d compute.Driver, rev compute.Revision, name string) (content string, ok bool)
	// Serving reports whether rev is running and is its Agent's serving
	// revision (the one inbound routing reaches), as driver d sees it on
	// the backend. Without it the suite can only probe through the
	// interface, and PrepareRevision would restart a runtime that a
	// faulty RetireRevision stopped.
	Serving func(t *testing.T, d compute.Driver, rev compute.Revision) bool
	// SetupCopies returns everything driver d keeps for rev's Agent
	// outside the durable workspace that could hold a copy of a delivered
	// setup (delivery Secrets, payload files, rendered objects), keyed by
	// where it is. After ActivateRevision with a pending setup, and after
	// a retried PrepareRevision with it, none may hold a file's content:
	// the worker clears the database copy once activation returned. Used
	// only when the driver declares WorkspaceSetup.
	SetupCopies func(t *testing.T, d compute.Driver, rev compute.Revision) map[string][]byte
}

// DefaultTimeout is the per-case deadline when Harness.Timeout is zero. It
// is sized for real runtimes (pulling nothing, starting a gateway).
const DefaultTimeout = 2 * time.Minute

// promptBound is how long a call with a cancelled context may take.
const promptBound = 5 * time.Second

// testCase is one independent check.
type testCase struct {
	name string
	// running: the case needs a runtime that becomes ready.
	running bool
	// setup: the case needs Capabilities.WorkspaceSetup.
	setup bool
	// pair: the case runs two Agents on its driver (Harness.NewPair).
	pair bool
	run  func(t *testing.T, f *fixture)
}

// Run runs every case as a parallel subtest of t.
func Run(t *testing.T, h Harness) {
	if h.New == nil {
		t.Fatal("computetest: Harness.New is nil")
	}
	if len(h.Configuration) == 0 {
		h.Configuration = json.RawMessage(`{}`)
	}
	if h.Timeout <= 0 {
		h.Timeout = DefaultTimeout
	}
	seen := map[string]bool{}
	for _, c := range cases {
		if seen[c.name] {
			t.Fatalf("computetest: duplicate case name %q", c.name)
		}
		seen[c.name] = true
		t.Run(c.name, func(t *testing.T) {
			t.Parallel()
			if c.running && h.SkipRunning {
				t.Skip("needs a runtime that becomes ready; Harness.SkipRunning is set")
			}
			newDriver := h.New
			if c.pair && h.NewPair != nil {
				newDriver = h.NewPair
			}
			f := newFixture(t, h, newDriver)
			if c.setup && !f.caps.WorkspaceSetup {
				t.Skipf("driver %s does not declare WorkspaceSetup", f.d.ID())
			}
			c.run(t, f)
		})
	}
}

// fixture is one case's driver, Namespace and Agent. Revisions made with
// revision are retired in cleanup.
type fixture struct {
	t     *testing.T // the case's: Inspect hooks, cleanups
	r     reporter   // what the helpers report to: t, or a concurrent step's
	h     Harness
	d     compute.Driver
	caps  compute.Capabilities
	ns    compute.Namespace
	agent compute.Agent
	cfgID string
	revs  []compute.Revision
	// caseCtx bounds every step; cleanup has its own.
	caseCtx context.Context
}

func newFixture(t *testing.T, h Harness, newDriver func(*testing.T) compute.Driver) *fixture {
	d := newDriver(t)
	if d == nil {
		t.Fatal("computetest: Harness.New returned nil")
	}
	ns := compute.Namespace{ID: ids.New(ids.Namespace)}
	ns.Name = shortName(ns.ID)
	a := compute.Agent{ID: ids.New(ids.Agent), NamespaceID: ns.ID}
	a.Name = shortName(a.ID)
	caseCtx, cancel := context.WithTimeout(t.Context(), h.Timeout)
	f := &fixture{
		t: t, r: t, h: h, d: d, caps: d.Capabilities(), ns: ns, agent: a, cfgID: ids.New(ids.Configuration),
		caseCtx: caseCtx,
	}
	t.Cleanup(f.cleanup)
	t.Cleanup(cancel)
	return f
}

// sibling returns a second Agent's fixture on f's driver, Namespace and
// deadline. Its cleanup (its revisions, then its Agent) runs before f's,
// which deletes the Namespace.
func (f *fixture) sibling() *fixture {
	a := compute.Agent{ID: ids.New(ids.Agent), NamespaceID: f.ns.ID}
	a.Name = shortName(a.ID)
	g := &fixture{t: f.t, r: f.t, h: f.h, d: f.d, caps: f.caps, ns: f.ns, agent: a, cfgID: ids.New(ids.Configuration), caseCtx: f.caseCtx}
	f.t.Cleanup(g.cleanupAgent)
	return g
}

// on returns a copy of f whose helpers report to r, sharing f's
// revisions as they are now; revisions made on the copy are not retired
// in cleanup.
func (f *fixture) on(r reporter) *fixture {
	c := *f
	c.r = r
	return &c
}

// reporter is what the fixture's helpers report failures to: the case's
// *testing.T, or a concurrent step's stepReporter.
type reporter interface {
	Helper()
	Errorf(format string, args ...any)
	Fatalf(format string, args ...any)
}

// stepReporter collects the failures of one step that runs in a
// goroutine of its own. Fatalf ends that goroutine (runtime.Goexit), as
// t.Fatalf ends a test's; testing's own FailNow must not be called off
// the test's goroutine.
type stepReporter struct {
	prefix string
	mu     *sync.Mutex
	errs   *[]string
}

func (s stepReporter) Helper() {}

func (s stepReporter) Errorf(format string, args ...any) {
	s.mu.Lock()
	defer s.mu.Unlock()
	*s.errs = append(*s.errs, s.prefix+": "+fmt.Sprintf(format, args...))
}

func (s stepReporter) Fatalf(format string, args ...any) {
	s.Errorf(format, args...)
	runtime.Goexit()
}

// parallel runs the steps at once, each in a goroutine with its own
// reporter (named name and the first, second, ... Agent), and returns
// when all have ended; any failure fails the case there. (Parallel
// subtests would wait for a slot of -test.parallel while the case holds
// its gateways, which other cases, holding those slots, wait for.)
func parallel(t *testing.T, name string, steps ...func(r reporter)) {
	t.Helper()
	ordinals := []string{"first", "second", "third", "fourth"}
	var mu sync.Mutex
	var errs []string
	var wg sync.WaitGroup
	for i, step := range steps {
		r := stepReporter{prefix: name + ", " + ordinals[i] + " Agent", mu: &mu, errs: &errs}
		wg.Go(func() { step(r) })
	}
	wg.Wait()
	for _, e := range errs {
		t.Error(e)
	}
	if len(errs) > 0 {
		t.FailNow()
	}
}

// shortName is a DNS-label-safe name derived from an id: "ct-" and the
// first eight hex digits of its UUID.
func shortName(id string) string {
	_, uuid, _ := strings.Cut(id, "_")
	return "ct-" + uuid[:8]
}

// cleanup retires every revision the case used (oldest first, as the
// worker does), then deletes the Agent and the Namespace. It runs on its
// own context because the test's context is already cancelled.
func (f *fixture) cleanup() {
	f.cleanupAgent()
	ctx, cancel := context.WithTimeout(context.Background(), f.h.Timeout)
	defer cancel()
	if err := f.d.DeleteNamespace(ctx, f.ns); err != nil {
		f.t.Errorf("cleanup: DeleteNamespace(%s): %v", f.ns.ID, err)
	}
}

// cleanupAgent retires every revision of f's Agent (oldest first) and
// deletes the Agent, on a context of its own.
func (f *fixture) cleanupAgent() {
	ctx, cancel := context.WithTimeout(context.Background(), f.h.Timeout)
	defer cancel()
	for _, rev := range f.revs {
		if err := f.d.RetireRevision(ctx, rev); err != nil {
			f.t.Errorf("cleanup: RetireRevision(%s #%d): %v", rev.ID, rev.Number, err)
		}
	}
	if err := f.d.DeleteAgent(ctx, f.agent); err != nil {
		f.t.Errorf("cleanup: DeleteAgent(%s): %v", f.agent.ID, err)
	}
}

// ctx returns the case's context: one deadline, Harness.Timeout, for all
// of its steps.
func (f *fixture) ctx() context.Context { return f.caseCtx }

// revision returns the Agent's revision number n, to be retired in cleanup.
func (f *fixture) revision(n int64) compute.Revision {
	rev := compute.Revision{
		ID: ids.New(ids.Revision), NamespaceID: f.ns.ID, AgentID: f.agent.ID, AgentName: f.agent.Name,
		Number: n, ConfigurationID: f.cfgID, ConfigurationGeneration: n,
		Configuration: bytes.Clone(f.h.Configuration),
	}
	f.revs = append(f.revs, rev)
	return rev
}

func (f *fixture) ensureNamespace() {
	f.r.Helper()
	must(f.r, "EnsureNamespace", f.d.EnsureNamespace(f.ctx(), f.ns))
}

// prepareOnce calls PrepareRevision once; Ready=false is fine but must
// carry a PendingReason.
func (f *fixture) prepareOnce(rev compute.Revision, rc compute.RevisionContext) compute.PrepareResult {
	f.r.Helper()
	res, err := f.d.PrepareRevision(f.ctx(), rev, rc)
	must(f.r, fmt.Sprintf("PrepareRevision(#%d)", rev.Number), err)
	checkPending(f.r, rev, res)
	return res
}

// prepareReady polls PrepareRevision until it answers Ready, as the worker
// does: Ready=false and retryable errors mean "call again later", a
// permanent error or the case's deadline ends the case.
func (f *fixture) prepareReady(rev compute.Revision, rc compute.RevisionContext) {
	f.r.Helper()
	ctx := f.ctx()
	start, wait := time.Now(), 10*time.Millisecond
	var last string
	for {
		res, err := f.d.PrepareRevision(ctx, rev, rc)
		switch p, permanent := compute.AsPermanent(err); {
		case permanent:
			f.r.Fatalf("PrepareRevision(#%d): permanent failure %s: %v", rev.Number, p.Code, err)
		case err != nil:
			last = fmt.Sprintf("error %v", err)
		case res.Ready:
			return
		default:
			checkPending(f.r, rev, res)
			last = fmt.Sprintf("pending %s: %s", res.PendingReason, res.Message)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			f.r.Fatalf("PrepareRevision(#%d) not ready after %s (case deadline %s); last answer: %s",
				rev.Number, time.Since(start).Round(time.Millisecond), f.h.Timeout, last)
		case <-t.C:
		}
		wait = min(2*wait, time.Second)
	}
}

// readyNotices records a compute.ReadyNotifier's notices.
type readyNotices struct {
	mu  sync.Mutex
	got []string // "namespace/agent"
}

// recordReadyNotices registers a recorder of the driver's readiness
// notices when it is a compute.ReadyNotifier, and returns nil when it is
// not.
func (f *fixture) recordReadyNotices() *readyNotices {
	n, ok := f.d.(compute.ReadyNotifier)
	if !ok {
		return nil
	}
	rn := &readyNotices{}
	n.NotifyReady(func(namespaceID, agentID string) {
		rn.mu.Lock()
		defer rn.mu.Unlock()
		rn.got = append(rn.got, namespaceID+"/"+agentID)
	})
	return rn
}

// awaitNotice waits up to 10 s for a notice about rev's Agent: the
// runtime answered PrepareRevision Ready, so a notifier must have said so
// (it may say so just after the state PrepareRevision reads changed).
func (rn *readyNotices) awaitNotice(r reporter, rev compute.Revision) {
	r.Helper()
	want := rev.NamespaceID + "/" + rev.AgentID
	deadline := time.Now().Add(10 * time.Second)
	for {
		rn.mu.Lock()
		found, got := slices.Contains(rn.got, want), slices.Clone(rn.got)
		rn.mu.Unlock()
		if found {
			return
		}
		if time.Now().After(deadline) {
			r.Errorf("the ReadyNotifier sent no notice for %s within 10 s of PrepareRevision(#%d) turning Ready after it was pending (notices: %q)",
				want, rev.Number, got)
			return
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// activate prepares rev until ready and activates it.
func (f *fixture) activate(rev compute.Revision, rc compute.RevisionContext) {
	f.r.Helper()
	f.prepareReady(rev, rc)
	must(f.r, fmt.Sprintf("ActivateRevision(#%d)", rev.Number), f.d.ActivateRevision(f.ctx(), rev, rc))
}

// checkEndpoint checks Endpoint for rev against Capabilities.LiveFiles.
func (f *fixture) checkEndpoint(rev compute.Revision) {
	f.r.Helper()
	ep, err := f.d.Endpoint(f.ctx(), rev)
	if !f.caps.LiveFiles {
		if !errors.Is(err, compute.ErrNoEndpoint) {
			f.r.Errorf("Endpoint(#%d) without LiveFiles = %+v, %v; want an error wrapping ErrNoEndpoint", rev.Number, ep, err)
		}
		return
	}
	if err != nil {
		f.r.Errorf("Endpoint(#%d) with LiveFiles: %v", rev.Number, err)
		return
	}
	if msg := endpointProblem(ep); msg != "" {
		f.r.Errorf("Endpoint(#%d) = %+v: %s", rev.Number, ep, msg)
	}
}

// checkServing compares Inspect.Serving for rev with want, when the
// harness has it.
func (f *fixture) checkServing(what string, rev compute.Revision, want bool) {
	f.t.Helper()
	if f.h.Inspect.Serving == nil {
		return
	}
	if got := f.h.Inspect.Serving(f.t, f.d, rev); got != want {
		f.t.Errorf("%s: revision #%d serving = %t, want %t", what, rev.Number, got, want)
	}
}

func checkPending(t reporter, rev compute.Revision, res compute.PrepareResult) {
	t.Helper()
	if !res.Ready && res.PendingReason == "" {
		t.Errorf("PrepareRevision(#%d) = %+v: not ready without a PendingReason", rev.Number, res)
	}
}

// must fails the case on an error from a step that has to succeed.
func must(t reporter, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// check reports a difference between want and got.
func check(t reporter, what string, want, got any) {
	t.Helper()
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}
