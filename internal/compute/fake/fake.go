package fake

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"maps"
	"net/url"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/openclaw/occ/internal/compute"
)

// Method names, as recorded in Call.Method and accepted by FailNext and
// SetDelay. ID and Capabilities are plain accessors: they are neither
// recorded nor scriptable.
const (
	EnsureNamespace  = "EnsureNamespace"
	DeleteNamespace  = "DeleteNamespace"
	PrepareRevision  = "PrepareRevision"
	ActivateRevision = "ActivateRevision"
	StopRevision     = "StopRevision"
	RetireRevision   = "RetireRevision"
	DeleteAgent      = "DeleteAgent"
	Endpoint         = "Endpoint"
)

var methods = []string{
	EnsureNamespace, DeleteNamespace, PrepareRevision, ActivateRevision,
	StopRevision, RetireRevision, DeleteAgent, Endpoint,
}

// agentVerbs are the calls that change an Agent's runtime; they are the
// ones whose overlap the fake checks.
var agentVerbs = map[string]bool{
	PrepareRevision: true, ActivateRevision: true, StopRevision: true, RetireRevision: true, DeleteAgent: true,
}

// ErrNotPrepared is returned (wrapped) by ActivateRevision for a revision
// that has not been prepared to readiness, or was stopped or retired since.
// It is retryable: a worker that prepares again can then activate.
var ErrNotPrepared = errors.New("fake: revision is not prepared and ready")

// State is where one revision is in its lifecycle.
type State string

const (
	// StatePending: PrepareRevision answered Ready=false (see PendingNext).
	StatePending State = "pending"
	// StateRunning: prepared and ready, not the serving revision.
	StateRunning State = "running"
	// StateActive: running and the Agent's serving revision.
	StateActive State = "active"
	// StateStopped: execution and routing stopped, durable state kept.
	StateStopped State = "stopped"
	// StateRetired: cleaned up; kept as a tombstone so that a later
	// PrepareRevision of it is reported.
	StateRetired State = "retired"
)

// Options configure a Driver.
type Options struct {
	// ID is returned by Driver.ID; empty means "fake".
	ID string
	// Capabilities is returned by Driver.Capabilities and decides whether
	// workspace setups are accepted and whether Endpoint answers.
	Capabilities compute.Capabilities
}

// Call is one recorded verb call.
type Call struct {
	Method      string
	NamespaceID string
	AgentID     string // empty for Namespace verbs
	RevisionID  string // empty for Namespace verbs and DeleteAgent
	// Setup is a deep copy of the workspace setup delivered with
	// PrepareRevision or ActivateRevision, nil otherwise.
	Setup *compute.WorkspaceSetup
}

// Revision is the fake's record of one revision.
type Revision struct {
	ID     string
	Number int64
	State  State
}

// Driver is the fake compute.Driver. Create it with New.
type Driver struct {
	id   string
	caps compute.Capabilities

	mu         sync.Mutex
	calls      []Call
	violations []string
	namespaces map[string]bool
	agents     map[string]*agent
	deleted    map[string]bool // Agents passed to DeleteAgent and not recreated since
	faults     map[string][]fault
	pending    []string
	delays     map[string]time.Duration
	hook       func(Call)
	inflight   map[string][]inflight // by Agent id
	nextCall   uint64
	notify     func(namespaceID, agentID string)
}

var (
	_ compute.Driver        = (*Driver)(nil)
	_ compute.ReadyNotifier = (*Driver)(nil)
)

// NotifyReady registers the readiness callback (compute.ReadyNotifier).
// The fake calls it only from Ready.
func (d *Driver) NotifyReady(notify func(namespaceID, agentID string)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.notify = notify
}

// Ready tells the registered readiness callback that the Agent's runtime
// may be ready, as a real driver does when its gateway first answers; a
// test calls it where that would happen. It reports whether a callback was
// registered. It may be called from an OnCall hook.
func (d *Driver) Ready(namespaceID, agentID string) bool {
	d.mu.Lock()
	f := d.notify
	d.mu.Unlock()
	if f == nil {
		return false
	}
	f(namespaceID, agentID)
	return true
}

// agent is what the fake keeps per Agent.
type agent struct {
	namespaceID string
	revisions   map[string]*revision
	active      string // the serving revision, "" when none
	delivered   []compute.WorkspaceSetup
	files       map[string]string       // the durable workspace
	marker      *compute.WorkspaceSetup // the setup marker (identity, Completed false)
}

type revision struct {
	snapshot compute.Revision
	state    State
}

// fault is one scripted failure.
type fault struct {
	err error
	// applied: the call takes effect, then returns err (a lost reply).
	applied bool
}

type inflight struct {
	seq      uint64
	method   string
	revision string
}

// New returns an empty fake driver.
func New(opts Options) *Driver {
	id := opts.ID
	if id == "" {
		id = "fake"
	}
	return &Driver{
		id:         id,
		caps:       opts.Capabilities,
		namespaces: map[string]bool{},
		agents:     map[string]*agent{},
		deleted:    map[string]bool{},
		faults:     map[string][]fault{},
		delays:     map[string]time.Duration{},
		inflight:   map[string][]inflight{},
	}
}

// ---- scripting ----

// FailNext makes the next n calls of method return err without any effect,
// after the calls queued by earlier FailNext/FailNextApplied for the same
// method. Wrap err with compute.Permanent to make the worker stop retrying.
// A call whose context is already done returns the context error and does
// not consume a scripted failure. FailNext panics on an unknown method or a
// nil err: both are mistakes in the test.
func (d *Driver) FailNext(method string, n int, err error) { d.script(method, n, fault{err: err}) }

// FailNextApplied makes the next n calls of method take effect and then
// return err, as when the backend acted but its answer was lost. It lets a
// test check that the caller retries an idempotent verb safely.
func (d *Driver) FailNextApplied(method string, n int, err error) {
	d.script(method, n, fault{err: err, applied: true})
}

func (d *Driver) script(method string, n int, f fault) {
	mustMethod(method)
	if f.err == nil {
		panic("fake: scripted failure with a nil error")
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	for range n {
		d.faults[method] = append(d.faults[method], f)
	}
}

// PendingNext makes the next n PrepareRevision calls that reach the backend
// (not failed by a script or a done context) answer Ready=false with
// PendingReason reason. They still take effect: the workspace setup is
// applied and a new revision is recorded as StatePending. A revision that
// is already running keeps its state.
func (d *Driver) PendingNext(n int, reason string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for range n {
		d.pending = append(d.pending, reason)
	}
}

// SetDelay makes every later call of method wait for dl before acting; the
// wait ends early, with the context's error, when the context is done. Zero
// removes the delay. Delays widen the window in which overlapping calls are
// detected.
func (d *Driver) SetDelay(method string, dl time.Duration) {
	mustMethod(method)
	d.mu.Lock()
	defer d.mu.Unlock()
	if dl <= 0 {
		delete(d.delays, method)
		return
	}
	d.delays[method] = dl
}

// OnCall installs fn (nil removes it). It runs synchronously at the start
// of every verb call, after the call is recorded and marked in progress and
// before any delay or effect, without the driver's lock: it may call the
// Driver's query methods, and it may block to hold the call in progress.
func (d *Driver) OnCall(fn func(Call)) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.hook = fn
}

func mustMethod(method string) {
	if !slices.Contains(methods, method) {
		panic(fmt.Sprintf("fake: unknown method %q", method))
	}
}

// ---- queries ----

// Calls returns every verb call so far, in the order they were entered.
func (d *Driver) Calls() []Call {
	d.mu.Lock()
	defer d.mu.Unlock()
	out := make([]Call, len(d.calls))
	for i, c := range d.calls {
		c.Setup = copySetup(c.Setup)
		out[i] = c
	}
	return out
}

// Violations returns the contract violations seen so far, in order (see
// the package documentation for the rules).
func (d *Driver) Violations() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Clone(d.violations)
}

// Namespaces returns the ids of the ensured (and not deleted) Namespaces,
// sorted.
func (d *Driver) Namespaces() []string {
	d.mu.Lock()
	defer d.mu.Unlock()
	return slices.Sorted(maps.Keys(d.namespaces))
}

// Revisions returns the Agent's revisions, retired tombstones included,
// ordered by Number then ID.
func (d *Driver) Revisions(agentID string) []Revision {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.agents[agentID]
	if a == nil {
		return nil
	}
	out := make([]Revision, 0, len(a.revisions))
	for _, r := range a.revisions {
		out = append(out, Revision{ID: r.snapshot.ID, Number: r.snapshot.Number, State: r.state})
	}
	sort.Slice(out, func(i, j int) bool {
		if out[i].Number != out[j].Number {
			return out[i].Number < out[j].Number
		}
		return out[i].ID < out[j].ID
	})
	return out
}

// Running returns the ids of the Agent's revisions that are running
// (StateRunning or StateActive), ordered by Number.
func (d *Driver) Running(agentID string) []string {
	var out []string
	for _, r := range d.Revisions(agentID) {
		if r.State == StateRunning || r.State == StateActive {
			out = append(out, r.ID)
		}
	}
	return out
}

// Active returns the id of the Agent's serving revision, or "".
func (d *Driver) Active(agentID string) string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a := d.agents[agentID]; a != nil {
		return a.active
	}
	return ""
}

// Delivered returns every workspace setup passed to PrepareRevision or
// ActivateRevision for the Agent, in order, whatever the call's outcome:
// it answers "what did the worker send", while Revisions, WorkspaceFiles
// and Marker answer "what took effect". DeleteAgent clears it.
func (d *Driver) Delivered(agentID string) []compute.WorkspaceSetup {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.agents[agentID]
	if a == nil {
		return nil
	}
	out := make([]compute.WorkspaceSetup, len(a.delivered))
	for i, s := range a.delivered {
		out[i] = *copySetup(&s)
	}
	return out
}

// WorkspaceFiles returns a copy of the Agent's durable workspace files, nil
// when none were written.
func (d *Driver) WorkspaceFiles(agentID string) map[string]string {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a := d.agents[agentID]; a != nil {
		return maps.Clone(a.files)
	}
	return nil
}

// Marker returns the identity recorded in the Agent's workspace setup
// marker, if a setup was applied.
func (d *Driver) Marker(agentID string) (compute.WorkspaceSetup, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	if a := d.agents[agentID]; a != nil && a.marker != nil {
		return *a.marker, true
	}
	return compute.WorkspaceSetup{}, false
}

// Deleted reports whether DeleteAgent was called for the Agent and nothing
// was prepared for it since.
func (d *Driver) Deleted(agentID string) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.deleted[agentID]
}

// ---- compute.Driver ----

// ID returns Options.ID, "fake" by default.
func (d *Driver) ID() string { return d.id }

// Capabilities returns Options.Capabilities.
func (d *Driver) Capabilities() compute.Capabilities { return d.caps }

// EnsureNamespace records the Namespace as ready to host Agents.
func (d *Driver) EnsureNamespace(ctx context.Context, ns compute.Namespace) error {
	return d.run(ctx, Call{Method: EnsureNamespace, NamespaceID: ns.ID}, func() error {
		d.namespaces[ns.ID] = true
		return nil
	})
}

// DeleteNamespace forgets the Namespace; an unknown one is success. Agents
// of the Namespace that still have unretired revisions are a violation (the
// worker only deletes empty Namespaces), but the call still succeeds.
func (d *Driver) DeleteNamespace(ctx context.Context, ns compute.Namespace) error {
	return d.run(ctx, Call{Method: DeleteNamespace, NamespaceID: ns.ID}, func() error {
		for _, id := range slices.Sorted(maps.Keys(d.agents)) {
			if a := d.agents[id]; a.namespaceID == ns.ID && a.live() {
				d.violatef("DeleteNamespace(%s) while agent %s has unretired revisions", ns.ID, id)
			}
		}
		delete(d.namespaces, ns.ID)
		return nil
	})
}

// PrepareRevision applies the workspace setup (when rc has one) and starts
// the revision without making it serve. It answers Ready=true unless
// PendingNext scripted otherwise. Preparing a running or active revision
// changes nothing; preparing a stopped one starts it again.
//
// Failures: a setup on a driver without WorkspaceSetup is
// compute.CodeWorkspaceSetupUnsupported, a setup the runner would refuse
// (see the package documentation) is compute.CodeWorkspaceSetupFailed, and a
// retired revision is compute.CodeRuntimeFailed; all are permanent and
// leave the revision's state unchanged.
func (d *Driver) PrepareRevision(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) (compute.PrepareResult, error) {
	var res compute.PrepareResult
	err := d.run(ctx, revisionCall(PrepareRevision, rev, rc), func() error {
		var err error
		res, err = d.prepare(rev, rc)
		return err
	})
	if err != nil {
		return compute.PrepareResult{}, err
	}
	return res, nil
}

func (d *Driver) prepare(rev compute.Revision, rc compute.RevisionContext) (compute.PrepareResult, error) {
	if !d.namespaces[rev.NamespaceID] {
		d.violatef("PrepareRevision(%s) in namespace %s, which is not ensured", rev.ID, rev.NamespaceID)
	}
	if d.deleted[rev.AgentID] {
		d.violatef("PrepareRevision(%s) for agent %s after DeleteAgent", rev.ID, rev.AgentID)
		delete(d.deleted, rev.AgentID)
	}
	a := d.agent(rev)
	r := a.revision(d, rev)
	defer a.forgetUnused(r)
	if r.state == StateRetired {
		d.violatef("PrepareRevision(%s) of a retired revision", rev.ID)
		return compute.PrepareResult{}, compute.Permanent(compute.CodeRuntimeFailed,
			fmt.Errorf("fake: revision %s was retired", rev.ID))
	}
	if rc.WorkspaceSetup != nil {
		if err := d.checkSetupSupported(PrepareRevision, rev); err != nil {
			return compute.PrepareResult{}, err
		}
		if err := a.applySetup(rev, rc.WorkspaceSetup); err != nil {
			return compute.PrepareResult{}, err
		}
	}
	running := r.state == StateRunning || r.state == StateActive
	if len(d.pending) > 0 {
		reason := d.pending[0]
		d.pending = d.pending[1:]
		if !running {
			r.state = StatePending
		}
		return compute.PrepareResult{PendingReason: reason, Message: "scripted by fake.PendingNext"}, nil
	}
	if !running {
		r.state = StateRunning
	}
	return compute.PrepareResult{Ready: true}, nil
}

// ActivateRevision makes a prepared, ready revision the Agent's serving
// one; the previously serving revision keeps running until it is stopped
// or retired. Activating a revision older (by Number) than the serving one
// succeeds without moving anything: the interface forbids disturbing a
// newer revision, so a stale worker cannot roll the Agent back.
//
// Failures: a revision that is not prepared and ready wraps ErrNotPrepared
// (retryable, and a violation); with a setup, the marker must match or the
// call fails permanently with compute.CodeWorkspaceSetupFailed.
func (d *Driver) ActivateRevision(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) error {
	return d.run(ctx, revisionCall(ActivateRevision, rev, rc), func() error {
		a := d.agent(rev)
		r := a.revision(d, rev)
		defer a.forgetUnused(r)
		if r.state != StateRunning && r.state != StateActive {
			d.violatef("ActivateRevision(%s) of a revision that is not prepared and ready (state %q)", rev.ID, r.state)
			return fmt.Errorf("fake: activate %s: %w", rev.ID, ErrNotPrepared)
		}
		if rc.WorkspaceSetup != nil {
			if err := d.checkSetupSupported(ActivateRevision, rev); err != nil {
				return err
			}
			if err := a.verifySetup(rev, rc.WorkspaceSetup); err != nil {
				return err
			}
		}
		if a.active != "" && a.active != rev.ID {
			cur := a.revisions[a.active]
			if cur.snapshot.Number > rev.Number {
				return nil
			}
			cur.state = StateRunning
		}
		a.active, r.state = rev.ID, StateActive
		return nil
	})
}

// StopRevision stops the revision and, if it was serving, removes the
// Agent's routing; the workspace is kept. Unknown and retired revisions are
// success and stay as they were.
func (d *Driver) StopRevision(ctx context.Context, rev compute.Revision) error {
	return d.run(ctx, revisionCall(StopRevision, rev, compute.RevisionContext{}), func() error {
		a := d.agents[rev.AgentID]
		if a == nil || a.revisions[rev.ID] == nil {
			return nil
		}
		r := a.revision(d, rev)
		if r.state == StateRetired {
			return nil
		}
		if a.active == rev.ID {
			a.active = ""
		}
		r.state = StateStopped
		return nil
	})
}

// RetireRevision stops the revision and marks it retired. Only what this
// revision owns goes: the routing only if it is the serving revision, never
// the workspace. Unknown revisions are success (and recorded as retired).
func (d *Driver) RetireRevision(ctx context.Context, rev compute.Revision) error {
	return d.run(ctx, revisionCall(RetireRevision, rev, compute.RevisionContext{}), func() error {
		a := d.agent(rev)
		r := a.revision(d, rev)
		if a.active == rev.ID {
			a.active = ""
		}
		r.state = StateRetired
		return nil
	})
}

// DeleteAgent removes everything kept for the Agent, workspace included.
// An unknown Agent is success. Unretired revisions are a violation (the
// worker retires every revision first) but are removed all the same.
func (d *Driver) DeleteAgent(ctx context.Context, ag compute.Agent) error {
	return d.run(ctx, Call{Method: DeleteAgent, NamespaceID: ag.NamespaceID, AgentID: ag.ID}, func() error {
		if a := d.agents[ag.ID]; a != nil && a.live() {
			d.violatef("DeleteAgent(%s) while it has unretired revisions", ag.ID)
		}
		delete(d.agents, ag.ID)
		d.deleted[ag.ID] = true
		return nil
	})
}

// Endpoint returns a Direct endpoint ws://127.0.0.1:0/fake/<agent> when
// Capabilities.LiveFiles is set (nothing listens there: tests that need a
// gateway serve their own), and an error wrapping compute.ErrNoEndpoint
// otherwise. Like real drivers it proves nothing about readiness.
func (d *Driver) Endpoint(ctx context.Context, rev compute.Revision) (compute.Endpoint, error) {
	var ep compute.Endpoint
	err := d.run(ctx, revisionCall(Endpoint, rev, compute.RevisionContext{}), func() error {
		if !d.caps.LiveFiles {
			return fmt.Errorf("fake %s: %w", d.id, compute.ErrNoEndpoint)
		}
		ep = compute.Endpoint{
			URL:       "ws://127.0.0.1:0/fake/" + url.PathEscape(rev.AgentID),
			Transport: compute.Direct,
		}
		return nil
	})
	if err != nil {
		return compute.Endpoint{}, err
	}
	return ep, nil
}

// ---- machinery ----

func revisionCall(method string, rev compute.Revision, rc compute.RevisionContext) Call {
	return Call{
		Method: method, NamespaceID: rev.NamespaceID, AgentID: rev.AgentID, RevisionID: rev.ID,
		Setup: copySetup(rc.WorkspaceSetup),
	}
}

// run is the common path of every verb: record the call, check overlap,
// run the hook and the delay, honour the context, apply scripted failures,
// and apply effect under the lock.
func (d *Driver) run(ctx context.Context, c Call, effect func() error) error {
	done := d.enter(c)
	defer done()

	d.mu.Lock()
	hook, delay := d.hook, d.delays[c.Method]
	d.mu.Unlock()
	if hook != nil {
		hook(c)
	}
	if delay > 0 {
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-ctx.Done():
			t.Stop()
		}
	}
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("fake %s: %w", c.Method, err)
	}

	d.mu.Lock()
	defer d.mu.Unlock()
	var f fault
	if q := d.faults[c.Method]; len(q) > 0 {
		f, d.faults[c.Method] = q[0], q[1:]
	}
	if f.err != nil && !f.applied {
		return f.err
	}
	if err := effect(); err != nil {
		return err
	}
	return f.err
}

// enter records c, marks it in progress and reports overlaps; the returned
// function marks it finished.
func (d *Driver) enter(c Call) (done func()) {
	d.mu.Lock()
	defer d.mu.Unlock()
	d.calls = append(d.calls, Call{
		Method: c.Method, NamespaceID: c.NamespaceID, AgentID: c.AgentID, RevisionID: c.RevisionID,
		Setup: copySetup(c.Setup),
	})
	if c.Setup != nil && (c.Method == PrepareRevision || c.Method == ActivateRevision) {
		if a := d.agents[c.AgentID]; a != nil {
			a.delivered = append(a.delivered, *copySetup(c.Setup))
		} else {
			// Keep the delivery even if the call fails before creating
			// the Agent's record.
			d.agents[c.AgentID] = &agent{
				namespaceID: c.NamespaceID, revisions: map[string]*revision{},
				delivered: []compute.WorkspaceSetup{*copySetup(c.Setup)},
			}
		}
	}
	if !agentVerbs[c.Method] {
		return func() {}
	}
	serialized := c.Method == PrepareRevision || c.Method == ActivateRevision
	for _, other := range d.inflight[c.AgentID] {
		if serialized || other.method == PrepareRevision || other.method == ActivateRevision {
			d.violatef("%s(%s) for agent %s entered while %s(%s) was in progress",
				c.Method, c.RevisionID, c.AgentID, other.method, other.revision)
		}
	}
	d.nextCall++
	seq := d.nextCall
	d.inflight[c.AgentID] = append(d.inflight[c.AgentID], inflight{seq: seq, method: c.Method, revision: c.RevisionID})
	return func() {
		d.mu.Lock()
		defer d.mu.Unlock()
		d.inflight[c.AgentID] = slices.DeleteFunc(d.inflight[c.AgentID], func(i inflight) bool { return i.seq == seq })
		if len(d.inflight[c.AgentID]) == 0 {
			delete(d.inflight, c.AgentID)
		}
	}
}

// violatef records a violation; the caller holds d.mu.
func (d *Driver) violatef(format string, args ...any) {
	d.violations = append(d.violations, fmt.Sprintf(format, args...))
}

// agent returns the Agent's record, creating it; the caller holds d.mu.
func (d *Driver) agent(rev compute.Revision) *agent {
	a := d.agents[rev.AgentID]
	if a == nil {
		a = &agent{namespaceID: rev.NamespaceID, revisions: map[string]*revision{}}
		d.agents[rev.AgentID] = a
	}
	return a
}

// revision returns the record of rev, creating it with an empty state, and
// reports a snapshot that differs from the first one seen.
func (a *agent) revision(d *Driver, rev compute.Revision) *revision {
	r := a.revisions[rev.ID]
	if r == nil {
		snap := rev
		snap.Configuration = bytes.Clone(rev.Configuration)
		r = &revision{snapshot: snap}
		a.revisions[rev.ID] = r
		return r
	}
	if !sameSnapshot(r.snapshot, rev) {
		d.violatef("revision %s sent with a different snapshot (revisions are immutable)", rev.ID)
	}
	return r
}

func sameSnapshot(a, b compute.Revision) bool {
	return a.ID == b.ID && a.NamespaceID == b.NamespaceID && a.AgentID == b.AgentID &&
		a.AgentName == b.AgentName && a.Number == b.Number && a.ConfigurationID == b.ConfigurationID &&
		a.ConfigurationGeneration == b.ConfigurationGeneration && bytes.Equal(a.Configuration, b.Configuration)
}

// forgetUnused drops r's record if the call that created it failed before
// giving it a state, so that failed calls leave no trace in Revisions.
func (a *agent) forgetUnused(r *revision) {
	if r.state == "" {
		delete(a.revisions, r.snapshot.ID)
	}
}

// live reports whether the Agent has a revision that is not retired.
func (a *agent) live() bool {
	for _, r := range a.revisions {
		if r.state != StateRetired {
			return true
		}
	}
	return false
}

func (d *Driver) checkSetupSupported(method string, rev compute.Revision) error {
	if d.caps.WorkspaceSetup {
		return nil
	}
	d.violatef("%s(%s) delivered a workspace setup to a driver without WorkspaceSetup", method, rev.ID)
	return compute.Permanent(compute.CodeWorkspaceSetupUnsupported,
		fmt.Errorf("fake %s does not support workspace setup", d.id))
}

// setupFiles are the only names the shared runner writes.
var setupFiles = []string{"AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md"}

// applySetup is PrepareRevision's half of the shared runner: apply a
// pending setup once, verify a completed one.
func (a *agent) applySetup(rev compute.Revision, s *compute.WorkspaceSetup) error {
	if err := checkSetup(rev, s); err != nil {
		return err
	}
	if a.marker != nil || s.Completed {
		return a.verifySetup(rev, s)
	}
	// Files and marker are written together, in one step under the lock,
	// so the runner's "existing file with other content" conflict cannot
	// arise here.
	a.files = maps.Clone(s.Files)
	a.marker = marker(s)
	return nil
}

// verifySetup checks the marker against the setup's identity; it never
// writes, so a completed setup is never replayed.
func (a *agent) verifySetup(rev compute.Revision, s *compute.WorkspaceSetup) error {
	if err := checkSetup(rev, s); err != nil {
		return err
	}
	if a.marker == nil {
		return setupFailed(rev, "workspace setup marker missing")
	}
	if m := marker(s); a.marker.ID != m.ID || a.marker.NamespaceID != m.NamespaceID ||
		a.marker.AgentID != m.AgentID || a.marker.DefaultsID != m.DefaultsID {
		return setupFailed(rev, "workspace setup marker belongs to setup %s", a.marker.ID)
	}
	return nil
}

// checkSetup refuses what the shared runner's payload validation refuses.
func checkSetup(rev compute.Revision, s *compute.WorkspaceSetup) error {
	switch {
	case s.ID == "" || s.NamespaceID != rev.NamespaceID || s.AgentID != rev.AgentID:
		return setupFailed(rev, "setup %s does not belong to agent %s", s.ID, rev.AgentID)
	case s.Completed && s.Files != nil:
		return setupFailed(rev, "completed setup carries files")
	case !s.Completed && len(s.Files) == 0:
		return setupFailed(rev, "pending setup has no files")
	}
	for name := range s.Files {
		if !slices.Contains(setupFiles, name) {
			return setupFailed(rev, "file name %q is not allowed", name)
		}
	}
	return nil
}

func marker(s *compute.WorkspaceSetup) *compute.WorkspaceSetup {
	m := s.WithoutFiles()
	m.Completed = false // the marker holds identity only
	return &m
}

func setupFailed(rev compute.Revision, format string, args ...any) error {
	return compute.Permanent(compute.CodeWorkspaceSetupFailed,
		fmt.Errorf("fake: revision %s: %s", rev.ID, fmt.Sprintf(format, args...)))
}

// copySetup deep-copies s so that neither the caller nor the fake can
// change what the other holds.
func copySetup(s *compute.WorkspaceSetup) *compute.WorkspaceSetup {
	if s == nil {
		return nil
	}
	c := *s
	c.Files = maps.Clone(s.Files)
	return &c
}
