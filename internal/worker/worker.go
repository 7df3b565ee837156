// Package worker owns the deployment worker: it claims work items from the
// durable queue with a lease, reconciles each one level-based through the
// Compute driver (Namespaces ready, revisions prepared and activated,
// Agents stopped and torn down), and records the outcome.
//
// Failure semantics: a driver error wrapped with compute.Permanent ends the
// work as failed_permanent with its code; any other error, or a revision
// that is not ready yet, requeues the work with a backoff and records the
// attempt as deployment progress. A worker that dies or loses its lease
// simply stops; another worker claims the item once the lease expires and
// starts again from the current state (every driver verb is idempotent).
// The activation transaction re-checks the claim, so a worker whose lease
// was taken over can never activate.
package worker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// Options configure a Worker. Zero values take the defaults.
type Options struct {
	// Lease is how long a claim lives without renewal (default 30s). The
	// worker renews it every Lease/3 while it works.
	Lease time.Duration
	// Poll is the idle wait between empty claims (default 500ms).
	Poll time.Duration
	// Recheck is the first wait before a pending readiness check is
	// repeated (default 500ms); it grows with the work's age (age/40) up
	// to ten times Recheck. A driver's readiness notice
	// (compute.ReadyNotifier) cuts it short.
	Recheck time.Duration
	// Concurrency is how many items Run works on at once (default 1),
	// each in its own loop. Items of one Agent still run one at a time:
	// the queue does not hand out an item while an older unfinished item
	// of its Agent exists, whichever loop or process holds that one. The
	// loops share the driver, which is safe for concurrent use on
	// different Agents (compute.Driver; the conformance suite checks).
	Concurrency int
	// CallTimeout bounds each driver call (default 10 minutes: a real
	// gateway start with native setup takes tens of seconds).
	CallTimeout time.Duration
	// MaxAttempts ends work that keeps failing with a retryable error
	// (default 200). Pending readiness does not count towards it.
	MaxAttempts int
	// StoreTimeout bounds each store call: the queue's own (a claim, a
	// lease renewal, an outcome) and each of a reconcile's reads and
	// writes (default 30 s). One that runs out fails like any other store
	// error: the loop backs off, or the pass is retried.
	StoreTimeout time.Duration
	// StuckAfter is how long a loop may go without a step (a claim, a
	// driver call starting or returning) while it claims or holds an
	// item before Health reports it stuck (default CallTimeout plus two
	// minutes: a driver call ends within CallTimeout and every store call
	// within StoreTimeout, so only code that ignores its context gets
	// there).
	StuckAfter time.Duration
	Now        func() time.Time
	Logger     *slog.Logger
	// Observer, when set, is told of claims, lease losses, retries, ends
	// and driver calls (metrics); nil observes nothing.
	Observer Observer
}

// Observer receives the worker's events. Every string is from a fixed
// set (work kinds, work states, driver ids, driver call names, "pending"
// or "error"), so they are safe as metric labels.
type Observer interface {
	// WorkerLoops: Run started n loops, or (n = 0) they all returned.
	WorkerLoops(n int)
	// LoopBusy: a loop claimed an item (true) or is done with it (false).
	LoopBusy(busy bool)
	WorkClaimed(kind string)
	LeaseLost()
	WorkRetried(kind, reason string)
	WorkFinished(kind, state string)
	// DeploymentFinished: a revision deployment ended (outcome is its
	// final state), d after it was enqueued.
	DeploymentFinished(driver, outcome string, d time.Duration)
	DriverCall(driver, call, outcome string, d time.Duration)
	// ReadyNotice: the worker acted on a driver's readiness notice
	// (compute.ReadyNotifier): "expedited" (the Agent's waiting items were
	// made due), "none" (nothing was waiting: the item was in its step,
	// or due already), "dropped" (too many notices waiting) or "error".
	ReadyNotice(outcome string)
}

// tracer starts this package's spans. It is the global provider's: a
// no-op until telemetry.SetupTracing installs the SDK (the global
// delegates to the first provider set, so it may be taken at init).
var tracer = otel.Tracer("github.com/openclaw/occ/internal/worker")

// Worker processes the work queue.
type Worker struct {
	store store.Store // the authorizing store
	// rs is store with each call bounded by StoreTimeout, for the
	// reconcile passes.
	rs     boundedStore
	driver compute.Driver
	o      Options
	wake   chan struct{} // Wake's signal to Run; one pending at most
	poller chan struct{} // holds the polling role of Run's idle loops while no loop has it

	// The driver's readiness notices (compute.ReadyNotifier): ready
	// carries them to Run's expediter; noticed keeps each Agent's last
	// one, so that an item whose step ends pending after a notice that
	// came while it was claimed (when there was nothing queued to
	// expedite) is rechecked at once too.
	ready   chan readyNotice
	mu      sync.Mutex
	noticed map[string]time.Time // agent id → last notice

	// Run's loops, for Health: nil while Run is not running.
	loopsMu sync.Mutex
	loops   []*beat
}

// beat is one Run loop's progress for Health: the time (Options.Now, in
// Unix nanoseconds) of its last step while it claims or holds an item,
// and 0 while it waits for work, which is never stuck.
type beat struct{ at atomic.Int64 }

// beatKey carries a loop's *beat in the contexts of its claim and item,
// so that the driver calls deep in a reconcile mark it.
type beatKey struct{}

// step marks the loop of ctx as having taken a step now; outside Run's
// loops (RunOnce called directly) there is nothing to mark.
func (w *Worker) step(ctx context.Context) {
	if b, ok := ctx.Value(beatKey{}).(*beat); ok {
		b.at.Store(w.o.Now().UnixNano())
	}
}

// Health reports whether Run is running and each of its loops is making
// progress: nil when every loop waits for work or took its last step
// within Options.StuckAfter. A stuck loop is one whose driver call
// ignores its deadline or whose store call hangs; it keeps renewing its
// item's lease, so no other worker takes the item over until the process
// ends, which is what a liveness probe that fails on this error brings
// about. A database outage is not stuck: claims fail within their
// deadline and the loops back off.
func (w *Worker) Health() error {
	w.loopsMu.Lock()
	loops := w.loops
	w.loopsMu.Unlock()
	if loops == nil {
		return errors.New("the worker's loops are not running")
	}
	now := w.o.Now()
	for i, b := range loops {
		at := b.at.Load()
		if at == 0 {
			continue
		}
		if idle := now.Sub(time.Unix(0, at)); idle > w.o.StuckAfter {
			return fmt.Errorf("worker loop %d of %d has taken no step for %s (more than %s)",
				i+1, len(loops), idle.Round(time.Second), w.o.StuckAfter)
		}
	}
	return nil
}

type readyNotice struct{ namespaceID, agentID string }

// New returns a worker over the authorizing store st and driver d.
func New(st store.Store, d compute.Driver, o Options) *Worker {
	if o.Lease == 0 {
		o.Lease = 30 * time.Second
	}
	if o.Poll == 0 {
		o.Poll = 500 * time.Millisecond
	}
	if o.Recheck == 0 {
		o.Recheck = 500 * time.Millisecond
	}
	if o.Concurrency < 1 {
		o.Concurrency = 1
	}
	if o.CallTimeout == 0 {
		o.CallTimeout = 10 * time.Minute
	}
	if o.MaxAttempts == 0 {
		o.MaxAttempts = 200
	}
	if o.StoreTimeout == 0 {
		o.StoreTimeout = 30 * time.Second
	}
	if o.StuckAfter == 0 {
		o.StuckAfter = o.CallTimeout + 2*time.Minute
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.Logger == nil {
		o.Logger = slog.Default()
	}
	w := &Worker{store: st, rs: boundedStore{inner: st, timeout: o.StoreTimeout}, driver: d, o: o, wake: make(chan struct{}, 1), poller: make(chan struct{}, 1),
		ready: make(chan readyNotice, readyBuffer), noticed: map[string]time.Time{}}
	w.poller <- struct{}{}
	if n, ok := d.(compute.ReadyNotifier); ok {
		n.NotifyReady(w.notice)
	}
	return w
}

// readyBuffer bounds the readiness notices waiting for Run's expediter; a
// notice beyond it is dropped (a hint: the backoff's recheck still comes).
const readyBuffer = 256

// notice is the driver's readiness callback: it records the notice and
// hands it to Run's expediter, never blocking the driver.
func (w *Worker) notice(namespaceID, agentID string) {
	now := w.now()
	w.mu.Lock()
	for id, at := range w.noticed {
		// A notice matters to an item claimed before it and still in its
		// step; no step outlives CallTimeout.
		if now.Sub(at) > w.o.CallTimeout {
			delete(w.noticed, id)
		}
	}
	w.noticed[agentID] = now
	w.mu.Unlock()
	select {
	case w.ready <- readyNotice{namespaceID: namespaceID, agentID: agentID}:
	default:
		w.observeNotice("dropped")
	}
}

func (w *Worker) observeNotice(outcome string) {
	if w.o.Observer != nil {
		w.o.Observer.ReadyNotice(outcome)
	}
}

// noticedSince reports whether the driver said agentID may be ready at or
// after t.
func (w *Worker) noticedSince(agentID string, t time.Time) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	at, ok := w.noticed[agentID]
	return ok && !at.Before(t)
}

// expediter makes the Agent of each readiness notice due now
// (store.ExpediteAgentWork) and wakes a loop when that changed an item,
// until ctx ends. A failure is logged and costs the backoff's wait.
func (w *Worker) expediter(ctx context.Context) {
	for {
		select {
		case <-ctx.Done():
			return
		case n := <-w.ready:
			w.expedite(ctx, n.namespaceID, n.agentID)
		}
	}
}

func (w *Worker) expedite(ctx context.Context, namespaceID, agentID string) {
	ctx, cancel := context.WithTimeout(systemCtx(ctx), expediteTimeout)
	defer cancel()
	n, err := w.store.ExpediteAgentWork(ctx, namespaceID, agentID, w.now())
	switch {
	case err != nil:
		w.o.Logger.Warn("worker: could not expedite work after a readiness notice", "agent", agentID, "error", err)
		w.observeNotice("error")
	case n > 0:
		w.o.Logger.Debug("worker: readiness notice; rechecking now", "agent", agentID, "items", n)
		w.observeNotice("expedited")
		w.Wake()
	default:
		w.observeNotice("none")
	}
}

// expediteTimeout bounds the store call of one readiness notice.
const expediteTimeout = 5 * time.Second

// Wake makes Run look for work now instead of at the end of its poll
// wait: call it when work was queued (sqlstore's OnWorkQueued), so that a
// deployment starts without waiting up to Poll. It never blocks; a wake
// while the worker is busy is kept (one at most) and costs one claim that
// may find nothing.
func (w *Worker) Wake() {
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

func (w *Worker) now() time.Time { return w.o.Now().UTC().Truncate(time.Microsecond) }

// systemCtx runs as the worker's system subject, limited to the store
// methods the worker needs.
func systemCtx(ctx context.Context) context.Context {
	return authz.WithSubject(ctx, authz.SystemSubject(authz.SystemWorker))
}

// Run processes work until ctx ends, in Options.Concurrency loops, and
// returns once every loop has handed back its item. When the queue has
// nothing to claim, one idle loop waits for the poll interval or a Wake,
// whichever comes first, and the other idle loops for a Wake; a Wake
// reaches one waiting loop, and a loop that claimed an item wakes the
// next, so queued work spreads over idle loops at once. Store errors are
// logged and retried after the poll interval (a Wake does not shorten
// that wait); they never stop a loop. Beside the loops, Run acts on the
// driver's readiness notices (compute.ReadyNotifier): the Agent's waiting
// items are made due and a loop is woken.
func (w *Worker) Run(ctx context.Context) error {
	if w.o.Observer != nil {
		w.o.Observer.WorkerLoops(w.o.Concurrency)
		defer w.o.Observer.WorkerLoops(0)
	}
	loops := make([]*beat, w.o.Concurrency)
	for i := range loops {
		loops[i] = new(beat)
	}
	w.loopsMu.Lock()
	w.loops = loops
	w.loopsMu.Unlock()
	defer func() {
		w.loopsMu.Lock()
		w.loops = nil
		w.loopsMu.Unlock()
	}()
	var wg sync.WaitGroup
	for _, b := range loops {
		lctx := context.WithValue(ctx, beatKey{}, b)
		wg.Go(func() { w.loop(lctx, b) })
	}
	wg.Go(func() { w.expediter(ctx) })
	wg.Wait()
	return nil
}

// loop is one of Run's loops. Of the idle loops, one at a time (the one
// holding w.poller) looks at the queue on the poll timer; the others wait
// for a Wake, which a loop sends when its look finds an item. So idle
// loops cost one look per poll interval however many there are, and a
// loop held up in a slow driver call does not stop the others from
// finding work that became due (a retry's backoff ending, an item another
// process queued). After a store error every loop backs off on the timer.
func (w *Worker) loop(ctx context.Context, b *beat) {
	for {
		w.step(ctx)
		did, err := w.RunOnce(ctx)
		b.at.Store(0)
		if err != nil && ctx.Err() == nil {
			w.o.Logger.Error("worker: claim failed", "error", err)
		}
		if did && err == nil {
			continue
		}
		wake := w.wake
		if err != nil {
			wake = nil // back off on store errors whatever is queued
		}
		polls := false
		select {
		case <-w.poller:
			polls = true
		default:
		}
		var tick <-chan time.Time // nil: wait for a Wake only
		var t *time.Timer
		if polls || err != nil {
			t = time.NewTimer(w.o.Poll)
			tick = t.C
		}
		select {
		case <-ctx.Done():
		case <-tick:
		case <-wake:
		}
		if t != nil {
			t.Stop()
		}
		if polls {
			w.poller <- struct{}{} // before the look: a loop idle by then polls next
		}
		if ctx.Err() != nil {
			return
		}
	}
}

// RunOnce claims and processes at most one item. It reports whether it
// found one.
func (w *Worker) RunOnce(ctx context.Context) (bool, error) {
	ctx = systemCtx(ctx)
	token := newToken()
	cctx, cancel := context.WithTimeout(ctx, w.o.StoreTimeout)
	item, ok, err := w.store.ClaimWork(cctx, store.Claim{Token: token, Now: w.now(), Lease: w.o.Lease})
	cancel()
	if err != nil || !ok {
		return false, err
	}
	w.step(ctx)
	if w.o.Concurrency > 1 {
		// There may be more: let an idle loop look now. With one loop
		// this one looks again as soon as it is done.
		w.Wake()
	}
	if w.o.Observer != nil {
		w.o.Observer.WorkClaimed(item.Kind)
		w.o.Observer.LoopBusy(true)
		defer w.o.Observer.LoopBusy(false)
	}
	ctx, span := tracer.Start(ctx, "worker."+item.Kind, trace.WithAttributes(
		attribute.String("occ.work.id", item.ID), attribute.String("occ.work.kind", item.Kind),
		attribute.Int("occ.work.attempt", item.Attempts)))
	defer span.End()
	w.process(ctx, item)
	return true, nil
}

func newToken() string {
	var b [16]byte
	_, _ = rand.Read(b[:]) // crypto/rand never fails since Go 1.24
	return hex.EncodeToString(b[:])
}

// process works on a claimed item, renewing the lease meanwhile. If the
// lease cannot be renewed the work context is cancelled: someone else may
// own the item now.
func (w *Worker) process(ctx context.Context, item store.WorkItem) {
	wctx, cancel := context.WithCancel(ctx)
	defer cancel()
	done := make(chan struct{})
	defer close(done)
	go func() {
		t := time.NewTicker(w.o.Lease / 3)
		defer t.Stop()
		for {
			select {
			case <-done:
				return
			case <-t.C:
				rctx, rcancel := context.WithTimeout(ctx, w.o.StoreTimeout)
				err := w.store.RenewWork(rctx, item.ID, item.ClaimToken, w.now().Add(w.o.Lease))
				rcancel()
				if err != nil && ctx.Err() != nil {
					// The worker is stopping: the item is being handed
					// back (record), not lost to another worker.
					return
				}
				if err != nil {
					w.o.Logger.WarnContext(ctx, "worker: lease lost", "work", item.ID, "error", err)
					if w.o.Observer != nil {
						w.o.Observer.LeaseLost()
					}
					cancel()
					return
				}
			}
		}
	}()
	log := w.o.Logger.With("work", item.ID, "kind", item.Kind, "attempt", item.Attempts)
	var out outcome
	if item.Attempts > w.o.MaxAttempts {
		// Every claim counts, and the claim that reached the limit ended
		// without an outcome (its worker died, or lost the lease): an item
		// that takes its worker down with it would otherwise be taken up
		// again for ever.
		out = retriesExhausted(item.Kind)
	} else {
		out = w.reconcile(wctx, item)
	}
	w.record(ctx, item, out, log)
}

// outcome is what one reconcile pass concluded.
type outcome struct {
	state   store.WorkState // succeeded, failed_permanent, cancelled; empty: retry
	code    string
	message string
	pending bool // retry because not ready yet (not an error)
	// finished: the reconcile already ended the item itself (activation,
	// deletion); nothing to record.
	finished bool
	err      error
}

func succeeded() outcome { return outcome{state: store.WorkSucceeded} }

func cancelled(code, msg string) outcome {
	return outcome{state: store.WorkCancelled, code: code, message: msg}
}

func failed(code, msg string) outcome {
	return outcome{state: store.WorkFailedPermanent, code: code, message: msg}
}

// fromDriver classifies a driver error.
func fromDriver(err error, code string) outcome {
	if p, ok := compute.AsPermanent(err); ok {
		if p.Public != "" {
			return failed(p.Code, p.Public)
		}
		return failed(p.Code, publicMessage(p.Code))
	}
	return outcome{code: code, message: "The runtime backend did not complete the step; it will be retried.", err: err}
}

// publicMessage is a fixed, content-free message per failure code: driver
// error text can carry paths or output and never reaches the API.
func publicMessage(code string) string {
	switch code {
	case compute.CodeWorkspaceSetupUnsupported:
		return "The Compute driver cannot initialize workspace files; the pending setup is kept."
	case compute.CodeWorkspaceSetupFailed:
		return "Workspace initialization failed."
	case compute.CodeConfigurationInvalid:
		return "The configuration cannot run on this Compute driver."
	default:
		return "The deployment failed permanently."
	}
}

// record writes the outcome: finish, or requeue with backoff.
func (w *Worker) record(ctx context.Context, item store.WorkItem, out outcome, log *slog.Logger) {
	if out.finished {
		// The reconcile ended the item itself: state says how, empty when
		// it stopped without ending it (the claim was taken over).
		if out.state != "" {
			w.observeEnd(item, out.state, w.now())
		}
		return
	}
	if ctx.Err() != nil {
		// The worker is stopping (shutdown). Record anyway, with a short
		// deadline of its own, so that the lease is handed back now
		// instead of at its expiry: an interrupted step is requeued as
		// pending (it does not count towards MaxAttempts), a step that
		// completed is finished.
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(context.WithoutCancel(ctx), releaseTimeout)
		defer cancel()
		if out.state == "" {
			out = outcome{code: "WORKER_STOPPED", message: "The worker stopped during this step; the next worker resumes it.", pending: true}
		}
		log.Info("worker: stopping; handing the work back", "state", out.state)
	}
	ctx, cancel := context.WithTimeout(ctx, w.o.StoreTimeout)
	defer cancel()
	w.step(ctx)
	now := w.now()
	if out.state == "" && !out.pending && item.Attempts >= w.o.MaxAttempts {
		out = retriesExhausted(item.Kind)
	}
	var err error
	if out.state != "" {
		err = w.store.FinishWork(ctx, item.ID, item.ClaimToken, out.state, out.code, out.message, now)
		log.InfoContext(ctx, "worker: work finished", "state", out.state, "code", out.code)
		if err == nil {
			w.observeEnd(item, out.state, now)
		}
	} else {
		delay := w.backoff(item, out.pending, now)
		if out.err != nil {
			log.WarnContext(ctx, "worker: attempt failed; retrying", "code", out.code, "error", out.err, "retryIn", delay)
		}
		if w.o.Observer != nil {
			reason := "error"
			if out.pending {
				reason = "pending"
			}
			w.o.Observer.WorkRetried(item.Kind, reason)
		}
		// A pending outcome (not ready yet, or handed back at a stop) is
		// not counted: only failed attempts move the backoff and the
		// give-up limit. A worker that dies holding the item records
		// nothing, so its claim does count.
		err = w.store.RetryWork(ctx, item.ID, item.ClaimToken, now.Add(delay),
			store.WorkAttempt{Code: out.code, Message: out.message, At: now}, !out.pending)
		// A readiness notice that came while the item was claimed found
		// nothing queued to expedite. Looking only after the retry is
		// stored leaves no gap: a notice after this look finds the item
		// queued.
		if err == nil && out.pending && w.noticedSince(item.AgentID, item.UpdatedAt) {
			w.expedite(ctx, item.NamespaceID, item.AgentID)
		}
	}
	if err != nil {
		// Claim lost or store down: the lease expiry hands the item to the
		// next worker, which starts over from the current state.
		log.Warn("worker: could not record outcome", "error", err)
	}
}

// observeEnd reports an item's end to the observer; a revision deployment
// also reports its duration since it was enqueued.
func (w *Worker) observeEnd(item store.WorkItem, state store.WorkState, now time.Time) {
	if w.o.Observer == nil {
		return
	}
	w.o.Observer.WorkFinished(item.Kind, string(state))
	if item.Kind == store.WorkRevisionDeploy && !item.CreatedAt.IsZero() {
		w.o.Observer.DeploymentFinished(w.driver.ID(), string(state), now.Sub(item.CreatedAt))
	}
}

// releaseTimeout bounds the store call that hands a claimed item back
// when the worker stops.
const releaseTimeout = 5 * time.Second

// backoff: readiness is rechecked after Recheck (500 ms) growing to ten
// times that with the age of the work (age/40); errors back off
// exponentially from 1 s to 1 min.
func (w *Worker) backoff(item store.WorkItem, pending bool, now time.Time) time.Duration {
	if pending {
		d := now.Sub(item.CreatedAt) / 40
		return min(max(d, w.o.Recheck), 10*w.o.Recheck)
	}
	d := time.Second
	for i := 1; i < item.Attempts && d < time.Minute; i++ {
		d *= 2
	}
	return min(d, time.Minute)
}

// call bounds one driver call and observes it: a span named after the
// call and the driver-call metric. done must be called with the call's
// error once it returned; it also releases the deadline. Neither the span
// nor the metric carries the error's text: driver errors can hold paths
// or command output.
func (w *Worker) call(ctx context.Context, name string) (context.Context, func(error)) {
	start := time.Now()
	driver := w.driver.ID()
	ctx, span := tracer.Start(ctx, "compute."+name,
		trace.WithAttributes(attribute.String("occ.compute.driver", driver), attribute.String("occ.compute.call", name)))
	ctx, cancel := context.WithTimeout(ctx, w.o.CallTimeout)
	w.step(ctx)
	return ctx, func(err error) {
		cancel()
		w.step(ctx)
		result := "ok"
		if err != nil {
			result = "error"
			if _, ok := compute.AsPermanent(err); ok {
				result = "permanent"
			}
			span.SetStatus(codes.Error, result)
		}
		span.SetAttributes(attribute.String("occ.compute.outcome", result))
		span.End()
		if w.o.Observer != nil {
			w.o.Observer.DriverCall(driver, name, result, time.Since(start))
		}
	}
}

func (w *Worker) reconcile(ctx context.Context, item store.WorkItem) outcome {
	switch item.Kind {
	case store.WorkNamespaceReconcile:
		return w.reconcileNamespace(ctx, item)
	case store.WorkNamespaceDelete:
		return w.deleteNamespace(ctx, item)
	case store.WorkNamespaceRepair:
		return w.repairNamespace(ctx, item)
	case store.WorkRevisionDeploy:
		return w.deploy(ctx, item)
	case store.WorkAgentStop:
		return w.stop(ctx, item)
	case store.WorkAgentDelete:
		return w.deleteAgent(ctx, item)
	}
	return failed("UNKNOWN_WORK_KIND", fmt.Sprintf("Unknown work kind %q.", item.Kind))
}

func (w *Worker) reconcileNamespace(ctx context.Context, item store.WorkItem) outcome {
	ns, err := w.rs.GetNamespace(ctx, item.NamespaceID)
	if errkind.Is(err, errkind.NotFound) {
		return cancelled("NAMESPACE_NOT_FOUND", "The Namespace no longer exists.")
	}
	if err != nil {
		return outcome{code: "STORE_UNAVAILABLE", message: "The database was unavailable.", err: err}
	}
	if ns.Status != store.NamespaceProvisioning {
		return succeeded() // ready already, or being deleted: nothing to do
	}
	cctx, done := w.call(ctx, "EnsureNamespace")
	err = w.driver.EnsureNamespace(cctx, compute.Namespace{ID: ns.ID, Name: ns.Name})
	done(err)
	if err != nil {
		out := fromDriver(err, "COMPUTE_UNAVAILABLE")
		if out.state == store.WorkFailedPermanent {
			if err := w.rs.UpdateNamespaceStatus(ctx, ns.ID, store.NamespaceFailed, w.now()); errkind.Is(err, errkind.Conflict) {
				return succeeded() // deleted meanwhile: its deletion decides now
			} else if errkind.Is(err, errkind.NotFound) {
				return cancelled("NAMESPACE_NOT_FOUND", "The Namespace no longer exists.")
			} else if err != nil {
				return outcome{code: "STORE_UNAVAILABLE", message: "The database was unavailable.", err: err}
			}
		}
		return out
	}
	// The store keeps a Namespace whose deletion began during the call
	// deleting (Conflict): the deletion's work decides from here.
	if err := w.rs.UpdateNamespaceStatus(ctx, ns.ID, store.NamespaceReady, w.now()); errkind.Is(err, errkind.Conflict) {
		return succeeded()
	} else if errkind.Is(err, errkind.NotFound) {
		return cancelled("NAMESPACE_NOT_FOUND", "The Namespace no longer exists.")
	} else if err != nil {
		return outcome{code: "STORE_UNAVAILABLE", message: "The database was unavailable.", err: err}
	}
	return succeeded()
}

// repairNamespace reconciles a ready Namespace's backend objects through
// the driver's NamespaceReconciler, or EnsureNamespace for a driver without
// one. A refusal leaves the Namespace ready (its Agents keep running) and
// fails the work with the driver's public message; a concurrent change is
// retried, the driver reading and judging again.
func (w *Worker) repairNamespace(ctx context.Context, item store.WorkItem) outcome {
	ns, err := w.rs.GetNamespace(ctx, item.NamespaceID)
	if errkind.Is(err, errkind.NotFound) {
		return cancelled("NAMESPACE_NOT_FOUND", "The Namespace no longer exists.")
	}
	if err != nil {
		return outcome{code: "STORE_UNAVAILABLE", message: "The database was unavailable.", err: err}
	}
	if ns.Status != store.NamespaceReady {
		return cancelled(errkind.CodeNamespaceNotReady, "The Namespace is not ready; it was not reconciled.")
	}
	cns := compute.Namespace{ID: ns.ID, Name: ns.Name}
	if r, ok := w.driver.(compute.NamespaceReconciler); ok {
		cctx, done := w.call(ctx, "ReconcileNamespace")
		_, err = r.ReconcileNamespace(cctx, cns)
		done(err)
	} else {
		cctx, done := w.call(ctx, "EnsureNamespace")
		err = w.driver.EnsureNamespace(cctx, cns)
		done(err)
	}
	if err != nil {
		out := fromDriver(err, "RECONCILE_FAILED")
		if out.state == "" {
			out.message = "The Namespace could not be reconciled now (a concurrent change or an unavailable backend); it will be read and judged again."
		}
		return out
	}
	return succeeded()
}

func (w *Worker) deleteNamespace(ctx context.Context, item store.WorkItem) outcome {
	ns, err := w.rs.GetNamespace(ctx, item.NamespaceID)
	if errkind.Is(err, errkind.NotFound) {
		return succeeded()
	}
	if err != nil {
		return outcome{code: "STORE_UNAVAILABLE", message: "The database was unavailable.", err: err}
	}
	cctx, done := w.call(ctx, "DeleteNamespace")
	err = w.driver.DeleteNamespace(cctx, compute.Namespace{ID: ns.ID, Name: ns.Name})
	done(err)
	if err != nil {
		return fromDriver(err, "COMPUTE_UNAVAILABLE")
	}
	err = w.rs.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if err := tx.FinishWork(ctx, item.ID, item.ClaimToken, store.WorkSucceeded, "", "", w.now()); err != nil {
			return err
		}
		return tx.DeleteNamespace(ctx, ns.ID)
	})
	if err != nil {
		return outcome{code: "STORE_UNAVAILABLE", message: "The Namespace could not be removed.", err: err}
	}
	return outcome{finished: true, state: store.WorkSucceeded}
}

// deploy prepares and activates one revision. Order: the setup capability
// check (before anything touches the backend), prepare until ready,
// driver activation, the activation transaction, retirement of older
// revisions, and only then the end of the work item.
func (w *Worker) deploy(ctx context.Context, item store.WorkItem) outcome {
	agent, err := w.rs.GetAgent(ctx, item.NamespaceID, item.AgentID)
	if errkind.Is(err, errkind.NotFound) {
		return cancelled("AGENT_NOT_FOUND", "The Agent no longer exists.")
	}
	if err != nil {
		return outcome{code: "STORE_UNAVAILABLE", message: "The database was unavailable.", err: err}
	}
	if agent.Status != store.AgentActive {
		return cancelled(errkind.CodeAgentDeleting, "The Agent is being deleted.")
	}
	if agent.DesiredRuntimeState != store.RuntimeRunning {
		// Stopped after this deploy was queued: starting the runtime now
		// would only have the stop item, queued behind, stop it again.
		return cancelled("AGENT_STOPPED", "The Agent was stopped before this deployment ran.")
	}
	rev, err := w.rs.GetRevision(ctx, item.NamespaceID, item.AgentID, item.RevisionID)
	if err != nil {
		return outcome{code: "STORE_UNAVAILABLE", message: "The database was unavailable.", err: err}
	}
	var rc compute.RevisionContext
	setup, err := w.rs.GetWorkspaceSetup(ctx, item.NamespaceID, item.AgentID)
	switch {
	case errkind.Is(err, errkind.NotFound):
	case err != nil:
		return outcome{code: "STORE_UNAVAILABLE", message: "The database was unavailable.", err: err}
	default:
		if !w.driver.Capabilities().WorkspaceSetup {
			return failed(compute.CodeWorkspaceSetupUnsupported, publicMessage(compute.CodeWorkspaceSetupUnsupported))
		}
		rc.WorkspaceSetup = &compute.WorkspaceSetup{ID: setup.ID, NamespaceID: setup.NamespaceID, AgentID: setup.AgentID,
			DefaultsID: setup.DefaultsID, Files: setup.Files, Completed: setup.Completed}
	}
	crev := rev.ForDriver(agent.Name)

	cctx, done := w.call(ctx, "PrepareRevision")
	res, err := w.driver.PrepareRevision(cctx, crev, rc)
	done(err)
	if err != nil {
		return fromDriver(err, "PREPARE_FAILED")
	}
	if !res.Ready {
		reason := res.PendingReason
		if reason == "" {
			reason = "REVISION_INCOMPLETE"
		}
		return outcome{pending: true, code: reason, message: res.Message}
	}
	cctx, done = w.call(ctx, "ActivateRevision")
	err = w.driver.ActivateRevision(cctx, crev, rc)
	done(err)
	if err != nil {
		return fromDriver(err, "ACTIVATION_FAILED")
	}
	act := store.Activation{NamespaceID: rev.NamespaceID, AgentID: rev.AgentID, RevisionID: rev.ID,
		WorkID: item.ID, ClaimToken: item.ClaimToken, Now: w.now()}
	if rc.WorkspaceSetup != nil && !rc.WorkspaceSetup.Completed {
		act.SetupID = rc.WorkspaceSetup.ID
	}
	if err := w.rs.ActivateRevision(ctx, act); err != nil {
		if e := errkind.As(err); e != nil && e.Kind == errkind.Conflict {
			w.o.Logger.Warn("worker: activation refused", "work", item.ID, "error", err)
			return activationRefused(e.Code)
		}
		return outcome{code: "ACTIVATION_FAILED", message: "The activation could not be recorded.", err: err}
	}
	// Retire older revisions while still holding the claim, then finish:
	// the Agent's next work item cannot start before this one is done with
	// the backend.
	w.retireOlder(ctx, rev, agent.Name)
	return succeeded()
}

// retriesExhausted gives an item up after MaxAttempts. A given-up delete
// leaves its Agent or Namespace deleting; the delete request, repeated,
// queues the teardown again (occ.queueDelete).
func retriesExhausted(kind string) outcome {
	what := map[string]string{
		store.WorkRevisionDeploy:     "The deployment kept failing and was given up.",
		store.WorkAgentStop:          "The stop kept failing and was given up.",
		store.WorkAgentDelete:        "The Agent's teardown kept failing and was given up; delete the Agent again to retry it.",
		store.WorkNamespaceDelete:    "The Namespace's teardown kept failing and was given up; delete the Namespace again to retry it.",
		store.WorkNamespaceReconcile: "The Namespace's setup kept failing and was given up.",
		store.WorkNamespaceRepair:    "The Namespace's reconciliation kept failing and was given up.",
	}[kind]
	if what == "" {
		what = "The work kept failing and was given up."
	}
	return failed("RETRIES_EXHAUSTED", what)
}

// activationRefused ends a deploy whose activation transaction refused.
// Only a lost claim leaves the item alone: another worker owns it and
// decides. Every other refusal ends it here; left running, the item would
// be claimed again at its lease's expiry, start the runtime again and be
// refused again, for ever, while the Agent's stop or delete item waited
// behind it. That item undoes what the driver just activated.
func activationRefused(code string) outcome {
	switch code {
	case store.ActivationClaimLost:
		return outcome{finished: true}
	case store.ActivationAgentStopped:
		return cancelled("AGENT_STOPPED", "The Agent was stopped before this deployment completed.")
	case store.ActivationAgentGone:
		return cancelled("AGENT_NOT_FOUND", "The Agent no longer exists.")
	case errkind.CodeAgentDeleting:
		return cancelled(errkind.CodeAgentDeleting, "The Agent is being deleted.")
	}
	return failed("ACTIVATION_REFUSED", "The revision could not be activated for this Agent.")
}

// retireOlder retires every revision older than rev. It is best effort:
// drivers never remove a newer revision's resources, and a failure here
// leaves a stopped old runtime that the next deployment or the Agent's
// deletion retires again.
func (w *Worker) retireOlder(ctx context.Context, rev store.Revision, agentName string) {
	revs, err := w.rs.AllRevisions(ctx, rev.NamespaceID, rev.AgentID)
	if err != nil {
		w.o.Logger.Warn("worker: list revisions for retirement", "error", err)
		return
	}
	for _, old := range revs {
		if old.Number >= rev.Number {
			continue
		}
		cctx, done := w.call(ctx, "RetireRevision")
		err := w.driver.RetireRevision(cctx, old.ForDriver(agentName))
		done(err)
		if err != nil {
			w.o.Logger.Warn("worker: retire old revision", "revision", old.ID, "error", err)
		}
	}
}

func (w *Worker) stop(ctx context.Context, item store.WorkItem) outcome {
	agent, err := w.rs.GetAgent(ctx, item.NamespaceID, item.AgentID)
	if errkind.Is(err, errkind.NotFound) {
		return cancelled("AGENT_NOT_FOUND", "The Agent no longer exists.")
	}
	if err != nil {
		return outcome{code: "STORE_UNAVAILABLE", message: "The database was unavailable.", err: err}
	}
	revs, err := w.rs.AllRevisions(ctx, item.NamespaceID, item.AgentID)
	if err != nil {
		return outcome{code: "STORE_UNAVAILABLE", message: "The database was unavailable.", err: err}
	}
	for _, r := range revs {
		cctx, done := w.call(ctx, "StopRevision")
		err := w.driver.StopRevision(cctx, r.ForDriver(agent.Name))
		done(err)
		if err != nil {
			return fromDriver(err, "STOP_FAILED")
		}
	}
	return succeeded()
}

// deleteAgent retires every revision, removes the Agent's runtime storage
// and credentials, then removes the Agent (and with it this work item).
func (w *Worker) deleteAgent(ctx context.Context, item store.WorkItem) outcome {
	agent, err := w.rs.GetAgent(ctx, item.NamespaceID, item.AgentID)
	if errkind.Is(err, errkind.NotFound) {
		return succeeded()
	}
	if err != nil {
		return outcome{code: "STORE_UNAVAILABLE", message: "The database was unavailable.", err: err}
	}
	revs, err := w.rs.AllRevisions(ctx, item.NamespaceID, item.AgentID)
	if err != nil {
		return outcome{code: "STORE_UNAVAILABLE", message: "The database was unavailable.", err: err}
	}
	for _, r := range revs {
		cctx, done := w.call(ctx, "RetireRevision")
		err := w.driver.RetireRevision(cctx, r.ForDriver(agent.Name))
		done(err)
		if err != nil {
			return fromDriver(err, "RETIRE_FAILED")
		}
	}
	cctx, done := w.call(ctx, "DeleteAgent")
	err = w.driver.DeleteAgent(cctx, compute.Agent{ID: agent.ID, NamespaceID: agent.NamespaceID, Name: agent.Name})
	done(err)
	if err != nil {
		return fromDriver(err, "DELETE_FAILED")
	}
	err = w.rs.InTx(ctx, func(ctx context.Context, tx store.Store) error {
		if err := tx.FinishWork(ctx, item.ID, item.ClaimToken, store.WorkSucceeded, "", "", w.now()); err != nil {
			return err
		}
		return tx.DeleteAgent(ctx, agent.NamespaceID, agent.ID)
	})
	if err != nil {
		if errors.Is(ctx.Err(), context.Canceled) {
			return outcome{finished: true}
		}
		return outcome{code: "STORE_UNAVAILABLE", message: "The Agent could not be removed.", err: err}
	}
	return outcome{finished: true, state: store.WorkSucceeded}
}
