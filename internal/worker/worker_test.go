package worker_test

// Table-driven tests of one deployment's outcomes over the fake driver: a
// settable clock drives the queue (the worker claims an item again only
// once the clock reaches its retry time), so every retry delay is checked
// exactly, without sleeping.

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"regexp"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/telemetry"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/testutil"
	"github.com/openclaw/occ/internal/worker"
)

// errBackend is a retryable driver failure.
var errBackend = errors.New("backend unavailable")

// pass is what one worker pass over the deployment left in the queue.
type pass struct {
	State store.WorkState
	Code  string        // the reason code (finished) or the last attempt's code (requeued)
	Retry time.Duration // requeued: how long until the item is available again
}

func requeued(code string, retry time.Duration) pass {
	return pass{State: store.WorkQueued, Code: code, Retry: retry}
}

func TestDeploymentOutcomes(t *testing.T) {
	permanent := compute.Permanent(compute.CodeConfigurationInvalid, errors.New("the backend refuses this configuration"))
	tests := []struct {
		name string
		// maxAttempts is worker.Options.MaxAttempts (0: the default).
		maxAttempts int
		// age advances the clock between the deployment's creation and the
		// first pass, for the pending curve, which grows with the age.
		age    time.Duration
		script func(d *fake.Driver)
		want   []pass
		// active: the revision serves on the fake at the end.
		active bool
		// running: the revision runs on the fake at the end without
		// serving.
		running bool
		// files: the Agent has initial workspace files (initialFiles).
		files bool
	}{
		{
			name:   "ready at once",
			script: func(*fake.Driver) {},
			want:   []pass{{State: store.WorkSucceeded}},
			active: true,
		},
		{
			// The setup is applied by the first prepare, which then
			// answers pending; the retry delivers it again and the fake
			// verifies it instead of re-applying.
			name:   "initial workspace files are applied once across retries",
			files:  true,
			script: func(d *fake.Driver) { d.PendingNext(1, "GATEWAY_STARTING") },
			want: []pass{
				requeued("GATEWAY_STARTING", 500*time.Millisecond),
				{State: store.WorkSucceeded},
			},
			active: true,
		},
		{
			name:   "permanent failure ends the work at once",
			script: func(d *fake.Driver) { d.FailNext(fake.PrepareRevision, 1, permanent) },
			want:   []pass{{State: store.WorkFailedPermanent, Code: compute.CodeConfigurationInvalid}},
		},
		{
			// The prepared revision is left running, not serving: the
			// next deployment or the Agent's deletion retires it.
			name:    "permanent activation failure",
			script:  func(d *fake.Driver) { d.FailNext(fake.ActivateRevision, 1, permanent) },
			want:    []pass{{State: store.WorkFailedPermanent, Code: compute.CodeConfigurationInvalid}},
			running: true,
		},
		{
			name:   "retryable failures are retried with backoff, then succeed",
			script: func(d *fake.Driver) { d.FailNext(fake.PrepareRevision, 2, errBackend) },
			want: []pass{
				requeued("PREPARE_FAILED", time.Second),
				requeued("PREPARE_FAILED", 2*time.Second),
				{State: store.WorkSucceeded},
			},
			active: true,
		},
		{
			// The backend activated, but the answer was lost: the retry
			// activates again (idempotent) and succeeds.
			name:   "activation applied but its reply lost",
			script: func(d *fake.Driver) { d.FailNextApplied(fake.ActivateRevision, 1, errBackend) },
			want: []pass{
				requeued("ACTIVATION_FAILED", time.Second),
				{State: store.WorkSucceeded},
			},
			active: true,
		},
		{
			name:        "the give-up limit",
			maxAttempts: 3,
			script:      func(d *fake.Driver) { d.FailNext(fake.PrepareRevision, 10, errBackend) },
			want: []pass{
				requeued("PREPARE_FAILED", time.Second),
				requeued("PREPARE_FAILED", 2*time.Second),
				{State: store.WorkFailedPermanent, Code: "RETRIES_EXHAUSTED"},
			},
		},
		{
			name:   "the error backoff doubles from 1 s to a cap of 1 min",
			script: func(d *fake.Driver) { d.FailNext(fake.PrepareRevision, 8, errBackend) },
			want: []pass{
				requeued("PREPARE_FAILED", 1*time.Second),
				requeued("PREPARE_FAILED", 2*time.Second),
				requeued("PREPARE_FAILED", 4*time.Second),
				requeued("PREPARE_FAILED", 8*time.Second),
				requeued("PREPARE_FAILED", 16*time.Second),
				requeued("PREPARE_FAILED", 32*time.Second),
				requeued("PREPARE_FAILED", time.Minute),
				requeued("PREPARE_FAILED", time.Minute),
				{State: store.WorkSucceeded},
			},
			active: true,
		},
		{
			// Pending is rechecked after age/40, at least 500 ms: the
			// first two passes are young, then each wait adds to the age.
			name:        "pending readiness is rechecked and does not count towards the limit",
			maxAttempts: 2,
			script:      func(d *fake.Driver) { d.PendingNext(3, "GATEWAY_STARTING") },
			want: []pass{
				requeued("GATEWAY_STARTING", 500*time.Millisecond),
				requeued("GATEWAY_STARTING", 500*time.Millisecond),
				requeued("GATEWAY_STARTING", 500*time.Millisecond),
				{State: store.WorkSucceeded},
			},
			active: true,
		},
		{
			// The rechecks do not count as attempts at all: an error after
			// them is the first, backs off 1 s and is retried, whatever
			// the limit.
			name:        "an error after pending readiness is the first attempt's",
			maxAttempts: 2,
			script: func(d *fake.Driver) {
				d.PendingNext(3, "GATEWAY_STARTING")
				d.FailNext(fake.ActivateRevision, 1, errBackend)
			},
			want: []pass{
				requeued("GATEWAY_STARTING", 500*time.Millisecond),
				requeued("GATEWAY_STARTING", 500*time.Millisecond),
				requeued("GATEWAY_STARTING", 500*time.Millisecond),
				requeued("ACTIVATION_FAILED", time.Second),
				{State: store.WorkSucceeded},
			},
			active: true,
		},
		{
			name:   "the pending recheck grows with the work's age, to a cap of 5 s",
			age:    2 * time.Minute,
			script: func(d *fake.Driver) { d.PendingNext(3, "GATEWAY_STARTING") },
			want: []pass{
				requeued("GATEWAY_STARTING", 3*time.Second),            // 120 s / 40
				requeued("GATEWAY_STARTING", 3075*time.Millisecond),    // 123 s / 40
				requeued("GATEWAY_STARTING", 3151875*time.Microsecond), // 126.075 s / 40
				{State: store.WorkSucceeded},
			},
			active: true,
		},
		{
			name:   "the pending recheck is capped at 5 s",
			age:    time.Hour,
			script: func(d *fake.Driver) { d.PendingNext(1, "GATEWAY_STARTING") },
			want: []pass{
				requeued("GATEWAY_STARTING", 5*time.Second),
				{State: store.WorkSucceeded},
			},
			active: true,
		},
		{
			name:   "a pending answer without a reason",
			script: func(d *fake.Driver) { d.PendingNext(1, "") },
			want: []pass{
				requeued("REVISION_INCOMPLETE", 500*time.Millisecond),
				{State: store.WorkSucceeded},
			},
			active: true,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testutil.Context(t)
			clock := testutil.NewClock(time.Time{})
			drv := fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true}})
			f := newFixture(t, ctx, testdb.SQLite(t), nil, drv, worker.Options{
				Now: clock.Now, MaxAttempts: tc.maxAttempts, Logger: quietLogger(),
			})
			a := f.agent(t, "agent", tc.files)
			rev := f.deploy(t, a)
			clock.Advance(tc.age)
			tc.script(drv)

			var got []pass
			for range len(tc.want) + 2 { // a bound, in case the worker never finishes
				did, err := f.srv.Worker.RunOnce(ctx)
				if err != nil || !did {
					t.Fatalf("pass %d: RunOnce = %v, %v; want an item processed", len(got)+1, did, err)
				}
				w := work(t, ctx, f, rev)
				p := pass{State: w.State, Code: w.ReasonCode}
				if w.State == store.WorkQueued {
					p.Retry = w.AvailableAt.Sub(clock.Now())
					if w.LastAttempt != nil {
						p.Code = w.LastAttempt.Code
					}
					clock.Set(w.AvailableAt)
				}
				got = append(got, p)
				if w.State != store.WorkQueued {
					break
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("passes (-want +got):\n%s", diff)
			}
			if active := drv.Active(a.ID) == rev.ID; active != tc.active {
				t.Errorf("revision serving on the driver: %v, want %v", active, tc.active)
			}
			wantRunning := []string(nil)
			if tc.active || tc.running {
				wantRunning = []string{rev.ID}
			}
			if diff := cmp.Diff(wantRunning, drv.Running(a.ID)); diff != "" {
				t.Errorf("running revisions (-want +got):\n%s", diff)
			}
			var wantFiles map[string]string
			if tc.files {
				wantFiles = map[string]string{"AGENTS.md": "# Agent\n", "SOUL.md": "calm"} // initialFiles
			}
			if diff := cmp.Diff(wantFiles, drv.WorkspaceFiles(a.ID)); diff != "" {
				t.Errorf("workspace files on the driver (-want +got):\n%s", diff)
			}
			if m, ok := drv.Marker(a.ID); ok != tc.files || (ok && m.AgentID != a.ID) {
				t.Errorf("setup marker = %+v, %v; want one for the Agent: %v", m, ok, tc.files)
			}
			if v := drv.Violations(); len(v) > 0 {
				t.Errorf("driver contract violations: %q", v)
			}
		})
	}
}

// TestLeaseLost: another worker takes the item over while this one is in a
// driver call (its lease expired as far as the other can tell). The first
// worker notices at its next renewal, abandons the call, never activates
// and never overwrites the new owner's claim; the new owner completes the
// deployment.
func TestLeaseLost(t *testing.T) {
	const lease = 300 * time.Millisecond // renewed every 100 ms of real time
	for _, method := range []string{fake.PrepareRevision, fake.ActivateRevision} {
		t.Run("during "+method, func(t *testing.T) {
			ctx := testutil.Context(t)
			clock := testutil.NewClock(time.Time{})
			drv := fake.New(fake.Options{})
			st := testdb.SQLite(t)
			f := newFixture(t, ctx, st, nil, drv, worker.Options{Now: clock.Now, Lease: lease, Logger: quietLogger()})
			a := f.agent(t, "agent", false)
			rev := f.deploy(t, a)

			// The call waits until its context ends: only the lease loss
			// can end it.
			drv.SetDelay(method, 10*time.Minute)
			entered := make(chan struct{}, 1)
			drv.OnCall(func(c fake.Call) {
				if c.Method == method {
					select {
					case entered <- struct{}{}:
					default:
					}
				}
			})
			first := make(chan error, 1)
			start := time.Now()
			go func() {
				_, err := f.srv.Worker.RunOnce(ctx)
				first <- err
			}()
			select {
			case <-entered:
			case <-ctx.Done():
				t.Fatalf("the first worker never called %s", method)
			}

			// The takeover: a claim by a worker whose clock is past the
			// lease.
			w, ok, err := st.ClaimWork(ctx, store.Claim{Token: "takeover", Now: clock.Now().Add(time.Minute), Lease: time.Minute})
			if err != nil || !ok || w.RevisionID != rev.ID {
				t.Fatalf("takeover ClaimWork = %+v, %v, %v; want the deployment", w, ok, err)
			}
			select {
			case err := <-first:
				if err != nil {
					t.Fatalf("first worker's RunOnce: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the first worker did not give up its call after losing the lease")
			}
			t.Logf("the first worker stopped %v after the takeover", time.Since(start).Round(time.Millisecond))
			drv.SetDelay(method, 0)

			if got := work(t, ctx, f, rev); got.State != store.WorkRunning || got.ClaimToken != "takeover" {
				t.Errorf("after the first worker stopped: state %q token %q; want running with the takeover's claim", got.State, got.ClaimToken)
			}
			if drv.Active(a.ID) != "" {
				t.Errorf("the worker that lost its lease activated %s", drv.Active(a.ID))
			}

			// The takeover worker dies too; once its lease expires a fresh
			// pass completes the deployment.
			clock.Advance(2 * time.Minute)
			if did, err := f.srv.Worker.RunOnce(ctx); err != nil || !did {
				t.Fatalf("RunOnce after the takeover lease expired = %v, %v", did, err)
			}
			if got := work(t, ctx, f, rev); got.State != store.WorkSucceeded {
				t.Errorf("final state %q (%s), want succeeded", got.State, got.ReasonCode)
			}
			if drv.Active(a.ID) != rev.ID {
				t.Errorf("serving %q, want %s", drv.Active(a.ID), rev.ID)
			}
			if v := drv.Violations(); len(v) > 0 {
				t.Errorf("driver contract violations: %q", v)
			}
		})
	}
}

// TestNamespaceOutcomes: the Namespace reconcile over the same rules.
func TestNamespaceOutcomes(t *testing.T) {
	tests := []struct {
		name       string
		script     func(d *fake.Driver)
		wantStatus store.NamespaceStatus
		wantPasses int
	}{
		{name: "ready", script: func(*fake.Driver) {}, wantStatus: store.NamespaceReady, wantPasses: 1},
		{name: "retried", script: func(d *fake.Driver) { d.FailNext(fake.EnsureNamespace, 2, errBackend) },
			wantStatus: store.NamespaceReady, wantPasses: 3},
		{name: "permanent", script: func(d *fake.Driver) {
			d.FailNext(fake.EnsureNamespace, 1, compute.Permanent(compute.CodeRuntimeFailed, errors.New("no")))
		}, wantStatus: store.NamespaceFailed, wantPasses: 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testutil.Context(t)
			clock := testutil.NewClock(time.Time{})
			drv := fake.New(fake.Options{})
			tc.script(drv)
			st := testdb.SQLite(t)
			srv := server.New(server.Options{Store: st, PublicOrigin: testOrigin, Driver: drv, Now: clock.Now,
				Worker: worker.Options{Now: clock.Now, Logger: quietLogger()}})
			admin := bootstrapAdmin(t, ctx, srv, st)
			ns, err := srv.Service.CreateNamespace(admin, "ns")
			if err != nil {
				t.Fatal(err)
			}
			passes := 0
			for ; passes < tc.wantPasses+2; passes++ {
				if ns, err = st.GetNamespace(ctx, ns.ID); err != nil {
					t.Fatal(err)
				}
				if ns.Status != store.NamespaceProvisioning {
					break
				}
				clock.Advance(time.Minute) // past any backoff
				if did, err := srv.Worker.RunOnce(ctx); err != nil || !did {
					t.Fatalf("RunOnce = %v, %v", did, err)
				}
			}
			if ns.Status != tc.wantStatus || passes != tc.wantPasses {
				t.Errorf("status %q after %d passes, want %q after %d", ns.Status, passes, tc.wantStatus, tc.wantPasses)
			}
			if diff := cmp.Diff(map[bool][]string{true: {ns.ID}, false: nil}[tc.wantStatus == store.NamespaceReady], drv.Namespaces()); diff != "" {
				t.Errorf("namespaces on the driver (-want +got):\n%s", diff)
			}
		})
	}
}

// TestNamespaceDeletedDuringItsReconcile: a Namespace whose deletion
// begins while its reconcile is in the driver stays deleting (the
// reconcile's "ready" does not reopen it to new resources), and its
// deletion then runs to the end; on both engines.
func TestNamespaceDeletedDuringItsReconcile(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		ctx := testutil.Context(t)
		clock := testutil.NewClock(time.Time{})
		drv := fake.New(fake.Options{})
		srv := server.New(server.Options{Store: st, PublicOrigin: testOrigin, Driver: drv, Now: clock.Now,
			Worker: worker.Options{Now: clock.Now, Logger: quietLogger()}})
		admin := bootstrapAdmin(t, ctx, srv, st)
		ns, err := srv.Service.CreateNamespace(admin, "going")
		if err != nil {
			t.Fatal(err)
		}
		var once sync.Once
		drv.OnCall(func(c fake.Call) {
			if c.Method == fake.EnsureNamespace {
				once.Do(func() {
					if _, err := srv.Service.DeleteNamespace(admin, ns.ID); err != nil {
						t.Errorf("DeleteNamespace during the reconcile: %v", err)
					}
				})
			}
		})
		if did, err := srv.Worker.RunOnce(ctx); err != nil || !did {
			t.Fatalf("RunOnce (reconcile) = %v, %v", did, err)
		}
		got, err := st.GetNamespace(ctx, ns.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Status != store.NamespaceDeleting {
			t.Fatalf("status %q after the reconcile that raced its deletion, want deleting", got.Status)
		}
		for range 5 {
			clock.Advance(time.Minute)
			if _, err := srv.Worker.RunOnce(ctx); err != nil {
				t.Fatal(err)
			}
			if _, err := st.GetNamespace(ctx, ns.ID); errkind.Is(err, errkind.NotFound) {
				return
			}
		}
		t.Fatal("the Namespace was not deleted after five passes")
	})
}

// work reads the deployment's work item, bypassing authorization.
func work(t *testing.T, ctx context.Context, f *fixture, rev store.Revision) store.WorkItem {
	t.Helper()
	w, err := f.st.GetWorkByKey(ctx, occ.DeploymentWorkKey(rev.ID))
	if err != nil {
		t.Fatalf("GetWorkByKey: %v", err)
	}
	return w
}

// quietLogger drops the worker's expected warnings (retries, lease loss).
func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

// TestStopHandsLeaseBack: a worker stopped (its context cancelled, as on
// shutdown) in the middle of a driver call hands its claim back at once:
// the item is queued again, not left running until the lease expires, and
// the stop does not count towards MaxAttempts; the next worker, with the
// clock not advanced past the lease, completes the deployment.
func TestStopHandsLeaseBack(t *testing.T) {
	for _, method := range []string{fake.PrepareRevision, fake.ActivateRevision} {
		t.Run("during "+method, func(t *testing.T) {
			ctx := testutil.Context(t)
			clock := testutil.NewClock(time.Time{})
			drv := fake.New(fake.Options{})
			st := testdb.SQLite(t)
			f := newFixture(t, ctx, st, nil, drv, worker.Options{Now: clock.Now, Lease: time.Hour, MaxAttempts: 1, Logger: quietLogger()})
			a := f.agent(t, "agent", false)
			rev := f.deploy(t, a)
			drv.SetDelay(method, 10*time.Minute) // ends only with its context
			entered := make(chan struct{}, 1)
			drv.OnCall(func(c fake.Call) {
				if c.Method == method {
					select {
					case entered <- struct{}{}:
					default:
					}
				}
			})
			wctx, stop := context.WithCancel(ctx)
			done := make(chan error, 1)
			go func() { done <- f.srv.Worker.Run(wctx) }()
			select {
			case <-entered:
			case <-ctx.Done():
				t.Fatalf("the worker never called %s", method)
			}
			stop()
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("Run: %v", err)
				}
			case <-time.After(30 * time.Second):
				t.Fatal("the worker did not stop")
			}
			got := work(t, ctx, f, rev)
			if got.State != store.WorkQueued || got.ClaimToken != "" {
				t.Fatalf("after the stop: state %q token %q; want queued with no claim (the lease handed back)", got.State, got.ClaimToken)
			}
			drv.SetDelay(method, 0)
			// Not past the lease (an hour), only past the requeue delay.
			clock.Advance(10 * time.Second)
			if did, err := f.srv.Worker.RunOnce(ctx); err != nil || !did {
				t.Fatalf("next worker RunOnce = %v, %v; want it to claim the handed-back item", did, err)
			}
			if got := work(t, ctx, f, rev); got.State != store.WorkSucceeded {
				t.Errorf("final state %q (%s); want succeeded (the stop did not use up the single attempt)", got.State, got.ReasonCode)
			}
			if drv.Active(a.ID) != rev.ID {
				t.Errorf("serving %q, want %s", drv.Active(a.ID), rev.ID)
			}
		})
	}
}

// emptyClaims is the store with a signal on every claim that found
// nothing, and sqlstore's OnWorkQueued passed through (server.New wires
// the worker's Wake to it).
type emptyClaims struct {
	store.Store
	inner *sqlstore.Store
	empty chan struct{}
}

func (e emptyClaims) ClaimWork(ctx context.Context, c store.Claim) (store.WorkItem, bool, error) {
	it, ok, err := e.Store.ClaimWork(ctx, c)
	if err == nil && !ok {
		select {
		case e.empty <- struct{}{}:
		default:
		}
	}
	return it, ok, err
}

func (e emptyClaims) OnWorkQueued(fn func()) { e.inner.OnWorkQueued(fn) }

// TestQueuedWorkWakesTheWorker: a worker waiting on an empty queue, with a
// poll interval of an hour, claims a deployment queued through the same
// process at once (the store tells it after the commit), on both engines.
// Without the wake the deployment would wait out the hour.
func TestQueuedWorkWakesTheWorker(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		ctx := testutil.Context(t)
		empty := make(chan struct{}, 1)
		wrap := func(s store.Store) store.Store { return emptyClaims{Store: s, inner: st, empty: empty} }
		f := newFixture(t, ctx, st, wrap, fake.New(fake.Options{}), worker.Options{Poll: time.Hour, Logger: quietLogger()})
		a := f.agent(t, "woken", false)
		select { // the fixture's own passes
		case <-empty:
		default:
		}
		runWorker(t, ctx, f)
		select { // the worker found the queue empty: it now waits for an hour or a wake
		case <-empty:
		case <-time.After(30 * time.Second):
			t.Fatal("the worker never looked at the queue")
		}
		rev := f.deploy(t, a)
		wait, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		err := testutil.Poll(wait, func() (bool, error) { return work(t, ctx, f, rev).State == store.WorkSucceeded, nil })
		if err != nil {
			t.Fatalf("deployment still %q after 30 s of a 1 h poll: the queued work did not wake the worker", work(t, ctx, f, rev).State)
		}
	})
}

// runHung runs f's worker until the test ends, with the driver's
// PrepareRevision for agentID hanging until release is called (at most
// once; the test's cleanup releases it before stopping Run, since a loop
// held in the call returns only then). hung is closed when the call starts.
func runHung(t *testing.T, ctx context.Context, f *fixture, d *fake.Driver, agentID string) (hung <-chan struct{}, release func()) {
	t.Helper()
	started, held := make(chan struct{}), make(chan struct{})
	var once sync.Once
	d.OnCall(func(c fake.Call) {
		if c.AgentID == agentID && c.Method == fake.PrepareRevision {
			once.Do(func() { close(started) })
			<-held
		}
	})
	runWorker(t, ctx, f)
	release = sync.OnceFunc(func() { close(held) })
	t.Cleanup(release) // runs first
	return started, release
}

// awaitHung waits up to 30 s for runHung's call to start.
func awaitHung(t *testing.T, hung <-chan struct{}) {
	t.Helper()
	select {
	case <-hung:
	case <-time.After(30 * time.Second):
		t.Fatal("the slow Agent's PrepareRevision was never called")
	}
}

// awaitState polls rev's deployment for 30 s until it is in state, and
// fails with why otherwise.
func awaitState(t *testing.T, ctx context.Context, f *fixture, rev store.Revision, state store.WorkState, why string) {
	t.Helper()
	wait, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	if err := testutil.Poll(wait, func() (bool, error) { return work(t, ctx, f, rev).State == state, nil }); err != nil {
		t.Fatalf("deployment %q after 30 s, want %q: %s", work(t, ctx, f, rev).State, state, why)
	}
}

// TestConcurrentLoops: with two loops, an Agent whose driver call hangs
// does not hold up another Agent's deployment, and once the call is
// released both deployments succeed without the driver ever seeing two
// calls for one Agent at once; on both engines. With one loop the second
// deployment would wait behind the hung call.
func TestConcurrentLoops(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		ctx := testutil.Context(t)
		d := fake.New(fake.Options{})
		f := newFixture(t, ctx, st, nil, d, worker.Options{Poll: time.Hour, Concurrency: 2, Logger: quietLogger()})
		slow, quick := f.agent(t, "slow", false), f.agent(t, "quick", false)
		hung, release := runHung(t, ctx, f, d, slow.ID)
		slowRev := f.deploy(t, slow)
		awaitHung(t, hung)
		quickRev := f.deploy(t, quick)
		awaitState(t, ctx, f, quickRev, store.WorkSucceeded, "the quick Agent's deployment waited behind the slow Agent's hung call: the loops did not run side by side")
		if got := work(t, ctx, f, slowRev).State; got != store.WorkRunning {
			t.Errorf("slow deployment while its call hangs: %q, want %q", got, store.WorkRunning)
		}
		release()
		awaitState(t, ctx, f, slowRev, store.WorkSucceeded, "the slow deployment did not finish once its call was released")
		if v := d.Violations(); len(v) > 0 {
			t.Errorf("driver contract violations: %q", v)
		}
	})
}

// unwoken is the store without sqlstore's OnWorkQueued, so server.New
// wires no wake: the worker finds work only by looking at the queue, as
// it finds work another process queued or a retry whose backoff ended.
// It counts the looks, and signals empty ones on empty when set.
type unwoken struct {
	store.Store
	looks *atomic.Int64
	empty chan struct{}
}

func (u unwoken) ClaimWork(ctx context.Context, c store.Claim) (store.WorkItem, bool, error) {
	u.looks.Add(1)
	it, ok, err := u.Store.ClaimWork(ctx, c)
	if err == nil && !ok && u.empty != nil {
		select {
		case u.empty <- struct{}{}:
		default:
		}
	}
	return it, ok, err
}

// TestIdleLoopsFindUnannouncedWork: with two loops and no wakes, while one
// loop is held in a hung driver call, the other still finds work that was
// queued without telling the worker (it takes over the polling), on both
// engines.
func TestIdleLoopsFindUnannouncedWork(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		ctx := testutil.Context(t)
		d := fake.New(fake.Options{})
		var looks atomic.Int64
		empty := make(chan struct{}, 1)
		wrap := func(s store.Store) store.Store { return unwoken{Store: s, looks: &looks, empty: empty} }
		f := newFixture(t, ctx, st, wrap, d, worker.Options{Poll: 50 * time.Millisecond, Concurrency: 2, Logger: quietLogger()})
		slow, quick := f.agent(t, "slow", false), f.agent(t, "quick", false)
		hung, _ := runHung(t, ctx, f, d, slow.ID)
		f.deploy(t, slow)
		awaitHung(t, hung)
		// Only the other loop looks now. Its first look (the claiming
		// loop wakes it) may already be over: wait for one after this
		// point, which only a loop that polls makes.
		select {
		case <-empty:
		default:
		}
		select {
		case <-empty:
		case <-time.After(30 * time.Second):
			t.Fatal("no loop looked at the queue in 30 s while one loop hung: the polling stopped with it")
		}
		quickRev := f.deploy(t, quick)
		awaitState(t, ctx, f, quickRev, store.WorkSucceeded, "work queued without a wake was not found while the other loop hung: no idle loop was looking")
	})
}

// TestIdleLoopsLookOncePerPoll: eight idle loops look at an empty queue
// about once per poll interval between them, not eight times.
func TestIdleLoopsLookOncePerPoll(t *testing.T) {
	ctx := testutil.Context(t)
	var looks atomic.Int64
	wrap := func(s store.Store) store.Store { return unwoken{Store: s, looks: &looks} }
	const poll, loops, idle = 20 * time.Millisecond, 8, 400 * time.Millisecond
	f := newFixture(t, ctx, testdb.SQLite(t), wrap, fake.New(fake.Options{}), worker.Options{Poll: poll, Concurrency: loops, Logger: quietLogger()})
	before := looks.Load()
	wctx, stop := context.WithTimeout(ctx, idle)
	defer stop()
	if err := f.srv.Worker.Run(wctx); err != nil {
		t.Fatalf("Run: %v", err)
	}
	// One look per loop at the start, then one per interval (the timers
	// fire late, never early); every loop polling would be about 8x that.
	got, most := looks.Load()-before, int64(loops+2*int(idle/poll))
	if got > most {
		t.Errorf("%d idle loops looked %d times in %s at a %s poll; want at most %d", loops, got, idle, poll, most)
	}
}

// runWorker runs f's worker until the test ends.
func runWorker(t *testing.T, ctx context.Context, f *fixture) {
	t.Helper()
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.srv.Worker.Run(wctx) }()
	t.Cleanup(func() {
		stop()
		if err := <-done; err != nil {
			t.Errorf("Run: %v", err)
		}
	})
}

// readyNotices reads occ_worker_ready_notices_total by outcome.
func readyNotices(t *testing.T, m *telemetry.Metrics) map[string]float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != telemetry.MetricWorkerReadyNotices {
			continue
		}
		for _, s := range mf.GetMetric() {
			for _, l := range s.GetLabel() {
				if l.GetName() == "outcome" {
					out[l.GetValue()] = s.GetCounter().GetValue()
				}
			}
		}
	}
	return out
}

// expediteCalls passes the store through and reports what each
// ExpediteAgentWork call changed on n (dropped when n is full).
type expediteCalls struct {
	store.Store
	n chan int64
}

// OnWorkQueued keeps the wake that server.New wires from sqlstore.
func (e expediteCalls) OnWorkQueued(fn func()) {
	e.Store.(interface{ OnWorkQueued(func()) }).OnWorkQueued(fn)
}

func (e expediteCalls) ExpediteAgentWork(ctx context.Context, namespaceID, agentID string, now time.Time) (int64, error) {
	n, err := e.Store.ExpediteAgentWork(ctx, namespaceID, agentID, now)
	if err == nil {
		select {
		case e.n <- n:
		default:
		}
	}
	return n, err
}

// TestReadinessNoticeRechecksAtOnce: a deployment whose first prepare was
// pending, with the readiness recheck and the poll an hour away, succeeds
// at once when the driver says the Agent may be ready, whether the notice
// comes after the pending outcome was recorded (the item is queued and is
// made due) or during the pending step itself (there is nothing queued to
// make due then: the worker rechecks when it records the outcome); on both
// engines. Without the notice each would wait out the hour.
func TestReadinessNoticeRechecksAtOnce(t *testing.T) {
	for _, during := range []bool{false, true} {
		name := "after the pending outcome"
		if during {
			name = "during the pending step"
		}
		t.Run(name, func(t *testing.T) {
			testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
				ctx := testutil.Context(t)
				d := fake.New(fake.Options{})
				expedited := make(chan int64, 10)
				wrap := func(s store.Store) store.Store { return expediteCalls{Store: s, n: expedited} }
				m := telemetry.NewMetrics()
				f := newFixture(t, ctx, st, wrap, d, worker.Options{Poll: time.Hour, Recheck: time.Hour, Logger: quietLogger(), Observer: m})
				a := f.agent(t, "starting-"+strconv.FormatBool(during), false)
				d.PendingNext(1, "GATEWAY_STARTING")
				var notified atomic.Bool
				if during {
					d.OnCall(func(c fake.Call) {
						if c.AgentID == a.ID && c.Method == fake.PrepareRevision && notified.CompareAndSwap(false, true) {
							if !d.Ready(a.NamespaceID, a.ID) {
								t.Error("the worker registered no readiness callback")
								return
							}
							// Hold the step until the notice's own attempt
							// found nothing queued (the item is claimed).
							select {
							case n := <-expedited:
								if n != 0 {
									t.Errorf("ExpediteAgentWork during the step changed %d items, want 0", n)
								}
							case <-time.After(30 * time.Second):
								t.Error("the readiness notice was not acted on in 30 s")
							}
						}
					})
				}
				runWorker(t, ctx, f)
				rev := f.deploy(t, a)
				if !during {
					wait, cancel := context.WithTimeout(ctx, 30*time.Second)
					defer cancel()
					err := testutil.Poll(wait, func() (bool, error) {
						w := work(t, ctx, f, rev)
						return w.State == store.WorkQueued && w.LastAttempt != nil, nil
					})
					if err != nil {
						t.Fatalf("deployment %+v: never recorded as pending", work(t, ctx, f, rev))
					}
					if !d.Ready(a.NamespaceID, a.ID) {
						t.Fatal("the worker registered no readiness callback")
					}
				}
				awaitState(t, ctx, f, rev, store.WorkSucceeded, "the readiness notice did not make the worker recheck before its 1 h backoff")
				// Two passes, pending then ready; the pending one is not
				// counted as an attempt.
				if got := work(t, ctx, f, rev).Attempts; got != 1 {
					t.Errorf("attempts = %d, want 1 (pending, not counted, then ready)", got)
				}
				// The metric: one expedite that made the deployment due, and
				// during the step first one that found nothing waiting.
				want := map[string]float64{"expedited": 1}
				if during {
					want["none"] = 1
				}
				// (The expediter counts its "none" just after the store call
				// the step waited for: poll briefly rather than race it.)
				wait, cancel := context.WithTimeout(ctx, 10*time.Second)
				defer cancel()
				_ = testutil.Poll(wait, func() (bool, error) { return cmp.Equal(want, readyNotices(t, m)), nil })
				if diff := cmp.Diff(want, readyNotices(t, m)); diff != "" {
					t.Errorf("%s (-want +got):\n%s", telemetry.MetricWorkerReadyNotices, diff)
				}
			})
		})
	}
}

// TestHealthReportsAStuckLoop: Health is an error while Run is not
// running, nil while its loops wait for work or take steps, and names the
// loop whose driver call ignores its deadline once that loop has taken no
// step for StuckAfter on the worker's clock; nil again once the call
// returns. The hung call blocks without looking at its context, which is
// what no real driver can be made to do on purpose.
func TestHealthReportsAStuckLoop(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		ctx := testutil.Context(t)
		clock := testutil.NewClock(time.Time{})
		d := fake.New(fake.Options{})
		const stuckAfter = 5 * time.Minute
		// The lease outlives the clock's jumps, so the held item stays
		// this loop's; the poll never fires, the deployment's wake does.
		f := newFixture(t, ctx, st, nil, d, worker.Options{Poll: time.Hour, Lease: time.Hour, Concurrency: 2,
			Now: clock.Now, CallTimeout: time.Minute, StuckAfter: stuckAfter, Logger: quietLogger()})
		if err := f.srv.Worker.Health(); err == nil || err.Error() != "the worker's loops are not running" {
			t.Fatalf("Health before Run = %v, want the not-running error", err)
		}
		slow := f.agent(t, "slow", false)
		hung, release := runHung(t, ctx, f, d, slow.ID)
		testutil.Eventually(t, 30*time.Second, func() bool { return f.srv.Worker.Health() == nil },
			"Health never answered nil for idle loops: %v", f.srv.Worker.Health())
		rev := f.deploy(t, slow)
		awaitHung(t, hung)
		clock.Advance(stuckAfter)
		if err := f.srv.Worker.Health(); err != nil {
			t.Fatalf("Health at exactly StuckAfter since the call started = %v, want nil", err)
		}
		clock.Advance(time.Second)
		err := f.srv.Worker.Health()
		want := regexp.MustCompile(`^worker loop [12] of 2 has taken no step for 5m1s \(more than 5m0s\)$`)
		if err == nil || !want.MatchString(err.Error()) {
			t.Fatalf("Health one second past StuckAfter = %v, want an error matching %s", err, want)
		}
		release()
		awaitState(t, ctx, f, rev, store.WorkSucceeded, "the deployment did not finish once its call returned")
		testutil.Eventually(t, 30*time.Second, func() bool { return f.srv.Worker.Health() == nil },
			"Health after the call returned = %v, want nil", f.srv.Worker.Health())
	})
}

// silentStore is a store whose method named by silent (GetRevision,
// ListRevisions, or DeleteAgent, also inside a transaction) waits for its
// context to end: a database that stopped answering.
type silentStore struct {
	store.Store
	silent *atomic.Value // string
}

func (s silentStore) quiet(ctx context.Context, method string) error {
	if m, _ := s.silent.Load().(string); m != method {
		return nil
	}
	<-ctx.Done()
	return ctx.Err()
}

func (s silentStore) GetRevision(ctx context.Context, namespaceID, agentID, id string) (store.Revision, error) {
	if err := s.quiet(ctx, "GetRevision"); err != nil {
		return store.Revision{}, err
	}
	return s.Store.GetRevision(ctx, namespaceID, agentID, id)
}

func (s silentStore) ListRevisions(ctx context.Context, namespaceID, agentID string, p store.PageRequest) (store.Page[store.Revision], error) {
	if err := s.quiet(ctx, "ListRevisions"); err != nil {
		return store.Page[store.Revision]{}, err
	}
	return s.Store.ListRevisions(ctx, namespaceID, agentID, p)
}

func (s silentStore) DeleteAgent(ctx context.Context, namespaceID, id string) error {
	if err := s.quiet(ctx, "DeleteAgent"); err != nil {
		return err
	}
	return s.Store.DeleteAgent(ctx, namespaceID, id)
}

func (s silentStore) InTx(ctx context.Context, fn func(tx store.Store) error) error {
	return s.Store.InTx(ctx, func(tx store.Store) error { return fn(silentStore{Store: tx, silent: s.silent}) })
}

// TestReconcileStoreCallsBounded: a reconcile pass whose store call does
// not answer gives up after StoreTimeout and hands the item back for a
// retry, on both engines, wherever the call is: a read of the deploy, the
// revision listing of a stop, a statement inside the delete's final
// transaction. Before, only the lease (kept alive by its renewal) or the
// liveness probe ended such a pass. Once the database answers again the
// item completes.
func TestReconcileStoreCallsBounded(t *testing.T) {
	for _, method := range []string{"GetRevision", "ListRevisions", "DeleteAgent"} {
		t.Run(method, func(t *testing.T) {
			testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
				ctx := testutil.Context(t)
				clock := testutil.NewClock(time.Time{})
				var silent atomic.Value
				silent.Store("")
				wrap := func(s store.Store) store.Store { return silentStore{Store: s, silent: &silent} }
				drv := fake.New(fake.Options{})
				f := newFixture(t, ctx, st, wrap, drv,
					worker.Options{Now: clock.Now, StoreTimeout: 300 * time.Millisecond, Logger: quietLogger()})
				a := f.agent(t, "silent-db", false)
				f.deploy(t, a)
				switch method {
				case "ListRevisions":
					runAll(t, ctx, f, clock)
					if _, err := f.srv.Service.Stop(f.admin, f.ns.ID, a.ID); err != nil {
						t.Fatal(err)
					}
				case "DeleteAgent":
					runAll(t, ctx, f, clock)
					if _, err := f.srv.Service.DeleteAgent(f.admin, f.ns.ID, a.ID); err != nil {
						t.Fatal(err)
					}
				}
				silent.Store(method)
				ran := make(chan error, 1)
				go func() {
					did, err := f.srv.Worker.RunOnce(context.WithoutCancel(ctx))
					if err == nil && !did {
						err = errors.New("no item was processed")
					}
					ran <- err
				}()
				select {
				case err := <-ran:
					if err != nil {
						t.Fatalf("RunOnce: %v", err)
					}
				case <-time.After(5 * time.Second):
					// Not a speed check: the bound is 300 ms, and before
					// the bound reached it the pass waited until the
					// first lease renewal (10 s) failed or for ever.
					t.Fatalf("the pass was still waiting on the silent %s after 5 s (StoreTimeout 300 ms)", method)
				}
				silent.Store("")
				runAll(t, ctx, f, clock)
				switch method {
				case "GetRevision":
					if drv.Active(a.ID) == "" {
						t.Error("the deployment did not complete once the database answered")
					}
				case "ListRevisions":
					if got := drv.Running(a.ID); len(got) > 0 {
						t.Errorf("running after the stop completed: %q", got)
					}
				case "DeleteAgent":
					if _, err := st.GetAgent(ctx, f.ns.ID, a.ID); !errkind.Is(err, errkind.NotFound) {
						t.Errorf("GetAgent after the delete completed: %v, want NotFound", err)
					}
				}
			})
		})
	}
}

// runAll runs the worker until the queue has nothing due, advancing the
// clock past each retry; at most 20 passes.
func runAll(t *testing.T, ctx context.Context, f *fixture, clock *testutil.Clock) {
	t.Helper()
	for range 20 {
		clock.Advance(2 * time.Minute)
		did, err := f.srv.Worker.RunOnce(ctx)
		if err != nil {
			t.Fatalf("RunOnce: %v", err)
		}
		if !did {
			return
		}
	}
	t.Fatal("work still due after 20 passes")
}

// TestStoppedDuringDeploy: a Stop that arrives while a deployment is in the
// driver ends the deployment (cancelled, AGENT_STOPPED) instead of leaving
// it running to be claimed and activated again at every lease expiry, and
// the stop item queued behind it then runs and stops what the driver had
// started. A Stop that arrives before the deployment is claimed cancels it
// before anything reaches the driver. On both engines.
func TestStoppedDuringDeploy(t *testing.T) {
	for _, during := range []string{"", fake.PrepareRevision, fake.ActivateRevision} {
		name := "before the claim"
		if during != "" {
			name = "during " + during
		}
		t.Run(name, func(t *testing.T) {
			testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
				ctx := testutil.Context(t)
				clock := testutil.NewClock(time.Time{})
				drv := fake.New(fake.Options{})
				f := newFixture(t, ctx, st, nil, drv, worker.Options{Now: clock.Now, Logger: quietLogger()})
				a := f.agent(t, "agent", false)
				rev := f.deploy(t, a)
				stop := func() {
					if _, err := f.srv.Service.Stop(f.admin, f.ns.ID, a.ID); err != nil {
						t.Errorf("Stop: %v", err)
					}
				}
				if during == "" {
					stop()
				} else {
					var once sync.Once
					drv.OnCall(func(c fake.Call) {
						if c.Method == during {
							once.Do(stop)
						}
					})
				}
				if did, err := f.srv.Worker.RunOnce(ctx); err != nil || !did {
					t.Fatalf("RunOnce (deploy) = %v, %v", did, err)
				}
				w := work(t, ctx, f, rev)
				if diff := cmp.Diff(pass{State: store.WorkCancelled, Code: "AGENT_STOPPED"}, pass{State: w.State, Code: w.ReasonCode}); diff != "" {
					t.Errorf("the deployment after a Stop (-want +got):\n%s", diff)
				}
				activations := 0
				for _, c := range drv.Calls() {
					if c.Method == fake.ActivateRevision {
						activations++
					}
				}
				if want := map[string]int{"": 0, fake.PrepareRevision: 1, fake.ActivateRevision: 1}[during]; activations != want {
					t.Errorf("the driver activated %d times, want %d", activations, want)
				}
				// The stop item is claimable now (the deploy ended) and
				// leaves nothing running.
				clock.Advance(time.Minute)
				if did, err := f.srv.Worker.RunOnce(ctx); err != nil || !did {
					t.Fatalf("RunOnce (stop) = %v, %v", did, err)
				}
				if got := drv.Running(a.ID); len(got) > 0 {
					t.Errorf("running after the stop item: %q", got)
				}
				clock.Advance(time.Hour)
				if did, err := f.srv.Worker.RunOnce(ctx); err != nil || did {
					t.Errorf("RunOnce after both items = %v, %v; want no work left", did, err)
				}
				if v := drv.Violations(); len(v) > 0 {
					t.Errorf("driver contract violations: %q", v)
				}
			})
		})
	}
}

// TestClaimsPastTheLimit: an item whose workers die holding it (each claim
// counts, none records an outcome) is given up as RETRIES_EXHAUSTED once a
// claim finds it past MaxAttempts, without another driver call.
func TestClaimsPastTheLimit(t *testing.T) {
	ctx := testutil.Context(t)
	clock := testutil.NewClock(time.Time{})
	drv := fake.New(fake.Options{})
	st := testdb.SQLite(t)
	const maxAttempts = 3
	f := newFixture(t, ctx, st, nil, drv, worker.Options{Now: clock.Now, MaxAttempts: maxAttempts, Logger: quietLogger()})
	rev := f.deploy(t, f.agent(t, "crashing", false))
	for i := range maxAttempts {
		// A worker claims the item and dies.
		if _, ok, err := st.ClaimWork(ctx, store.Claim{Token: fmt.Sprintf("dead-%d", i), Now: clock.Now(), Lease: time.Minute}); err != nil || !ok {
			t.Fatalf("claim %d = %v, %v", i+1, ok, err)
		}
		clock.Advance(2 * time.Minute)
	}
	before := len(drv.Calls())
	if did, err := f.srv.Worker.RunOnce(ctx); err != nil || !did {
		t.Fatalf("RunOnce = %v, %v", did, err)
	}
	w := work(t, ctx, f, rev)
	if diff := cmp.Diff(pass{State: store.WorkFailedPermanent, Code: "RETRIES_EXHAUSTED"}, pass{State: w.State, Code: w.ReasonCode}); diff != "" {
		t.Errorf("after %d claims without an outcome (-want +got):\n%s", maxAttempts, diff)
	}
	if calls := drv.Calls()[before:]; len(calls) > 0 {
		t.Errorf("the driver was called for an item past its limit: %+v", calls)
	}
}

// TestGivenUpDeleteQueuedAgain: an Agent's teardown given up after its
// retries leaves the Agent deleting; deleting it again queues the teardown
// again (once, however often it is repeated while that one is queued), and
// the Agent goes. The same for a Namespace. On both engines.
func TestGivenUpDeleteQueuedAgain(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		ctx := testutil.Context(t)
		clock := testutil.NewClock(time.Time{})
		drv := fake.New(fake.Options{})
		f := newFixture(t, ctx, st, nil, drv, worker.Options{Now: clock.Now, MaxAttempts: 2, Logger: quietLogger()})
		a := f.agent(t, "undying", false)
		drv.FailNext(fake.DeleteAgent, 2, errBackend)
		if _, err := f.srv.Service.DeleteAgent(f.admin, f.ns.ID, a.ID); err != nil {
			t.Fatal(err)
		}
		runAll(t, ctx, f, clock)
		first, err := st.GetWorkByKey(ctx, a.ID+":delete")
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(pass{State: store.WorkFailedPermanent, Code: "RETRIES_EXHAUSTED"}, pass{State: first.State, Code: first.ReasonCode}); diff != "" {
			t.Fatalf("the teardown after two failures (-want +got):\n%s", diff)
		}
		if got, err := st.GetAgent(ctx, f.ns.ID, a.ID); err != nil || got.Status != store.AgentDeleting {
			t.Fatalf("the Agent after its teardown was given up: %+v, %v; want deleting", got.Status, err)
		}
		for range 2 {
			if _, err := f.srv.Service.DeleteAgent(f.admin, f.ns.ID, a.ID); err != nil {
				t.Fatal(err)
			}
		}
		second, err := st.GetWorkByKey(ctx, a.ID+":delete:"+first.ID)
		if err != nil || second.State != store.WorkQueued {
			t.Fatalf("the teardown queued again: %+v, %v; want queued", second.State, err)
		}
		if _, err := st.GetWorkByKey(ctx, a.ID+":delete:"+second.ID); !errkind.Is(err, errkind.NotFound) {
			t.Errorf("a third teardown was queued while the second waits: %v", err)
		}
		runAll(t, ctx, f, clock)
		if _, err := st.GetAgent(ctx, f.ns.ID, a.ID); !errkind.Is(err, errkind.NotFound) {
			t.Fatalf("GetAgent after the second teardown: %v, want NotFound", err)
		}

		// The Namespace, now empty but for its Configuration.
		if err := f.srv.Service.DeleteConfiguration(f.admin, f.ns.ID, f.cfg.ID); err != nil {
			t.Fatal(err)
		}
		drv.FailNext(fake.DeleteNamespace, 2, errBackend)
		if _, err := f.srv.Service.DeleteNamespace(f.admin, f.ns.ID); err != nil {
			t.Fatal(err)
		}
		runAll(t, ctx, f, clock)
		if got, err := st.GetNamespace(ctx, f.ns.ID); err != nil || got.Status != store.NamespaceDeleting {
			t.Fatalf("the Namespace after its teardown was given up: %+v, %v; want deleting", got.Status, err)
		}
		if _, err := f.srv.Service.DeleteNamespace(f.admin, f.ns.ID); err != nil {
			t.Fatal(err)
		}
		runAll(t, ctx, f, clock)
		if _, err := st.GetNamespace(ctx, f.ns.ID); !errkind.Is(err, errkind.NotFound) {
			t.Errorf("GetNamespace after the second teardown: %v, want NotFound", err)
		}
	})
}

// TestStopIsNotALeaseLoss: a worker stopped while a driver call ignores
// the stop for a while renews no more, but does not count that as a lost
// lease (occ_worker_lease_losses_total, which an alert watches): the item
// is handed back, not taken over.
func TestStopIsNotALeaseLoss(t *testing.T) {
	ctx := testutil.Context(t)
	clock := testutil.NewClock(time.Time{})
	drv := fake.New(fake.Options{})
	m := telemetry.NewMetrics()
	const lease = 300 * time.Millisecond // renewed every 100 ms
	f := newFixture(t, ctx, testdb.SQLite(t), nil, drv, worker.Options{Now: clock.Now, Lease: lease, Logger: quietLogger(), Observer: m})
	f.deploy(t, f.agent(t, "agent", false))
	entered, release := make(chan struct{}), make(chan struct{})
	var once sync.Once
	drv.OnCall(func(c fake.Call) {
		if c.Method == fake.PrepareRevision {
			once.Do(func() { close(entered) })
			<-release // a driver call deaf to its context for a while
		}
	})
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- f.srv.Worker.Run(wctx) }()
	<-entered
	stop()
	time.Sleep(5 * lease / 3) // several renewal ticks after the stop
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("Run: %v", err)
	}
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range fams {
		if mf.GetName() == telemetry.MetricWorkerLeaseLosses {
			if v := mf.GetMetric()[0].GetCounter().GetValue(); v != 0 {
				t.Errorf("%s = %v after a stop, want 0", telemetry.MetricWorkerLeaseLosses, v)
			}
		}
	}
}
