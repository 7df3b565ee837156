package worker_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/worker"
)

// BenchmarkDeployments measures how fast one in-process worker turns queued
// deployments into activations with an instant driver, so the number is
// the worker's and the store's own cost per deployment. Each of the b.N
// deployments is of a fresh Agent, created through the domain before the
// timer starts. In the same run it measures a baseline: a bare claim+finish
// loop over b.N trivial work items on a second fresh database (store only,
// no authorization, no driver, no domain reads), so that
//
//	x-bare = (time per deployment) / (time per bare claim+finish)
//
// says how much a full deployment costs over the queue's floor.
// ns/op and deployments/s are the full path; bare-items/s the baseline.
//
// Run: go test ./internal/worker -run '^$' -bench BenchmarkDeployments -benchtime=200x
func BenchmarkDeployments(b *testing.B) {
	b.Run(sqlstore.EngineSQLite, func(b *testing.B) {
		benchDeployments(b, func(tb testing.TB) *sqlstore.Store { return testdb.SQLite(tb) })
	})
	b.Run(sqlstore.EnginePostgres, func(b *testing.B) {
		benchDeployments(b, func(tb testing.TB) *sqlstore.Store { return testdb.Postgres(tb) })
	})
}

func benchDeployments(b *testing.B, open func(testing.TB) *sqlstore.Store) {
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	drv := fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true}})
	f := newFixture(b, ctx, open(b), nil, drv, worker.Options{})
	revs := make([]store.Revision, b.N)
	agents := make([]store.Agent, b.N)
	for i := range b.N {
		agents[i] = f.agent(b, fmt.Sprintf("bench-%d", i), false)
		revs[i] = f.deploy(b, agents[i])
	}
	bare := open(b)
	bareItems(b, ctx, bare)

	b.ResetTimer()
	// One item per Agent, so none waits behind another: every pass must
	// find one.
	for i := range b.N {
		did, err := f.srv.Worker.RunOnce(ctx)
		if err != nil || !did {
			b.Fatalf("RunOnce #%d: did=%v err=%v; want an item processed", i, did, err)
		}
	}
	b.StopTimer()
	full := b.Elapsed()

	start := time.Now()
	for i := range b.N {
		now := time.Now()
		w, ok, err := bare.ClaimWork(ctx, store.Claim{Token: ids.New(""), Now: now, Lease: time.Minute})
		if err != nil || !ok {
			b.Fatalf("bare ClaimWork #%d: ok=%v err=%v; want an item", i, ok, err)
		}
		if err := bare.FinishWork(ctx, w.ID, w.ClaimToken, store.WorkSucceeded, "", "", now); err != nil {
			b.Fatalf("bare FinishWork #%d: %v", i, err)
		}
	}
	bareTime := time.Since(start)

	// Untimed: the work really was deployments that activated.
	for i, r := range revs {
		w, err := f.st.GetWorkByKey(ctx, occ.DeploymentWorkKey(r.ID))
		if err != nil || w.State != store.WorkSucceeded {
			b.Fatalf("deployment %d: state %q, %v; want succeeded", i, w.State, err)
		}
	}
	if v := drv.Violations(); len(v) > 0 {
		b.Fatalf("fake driver violations: %q", v)
	}
	b.ReportMetric(float64(b.N)/full.Seconds(), "deployments/s")
	b.ReportMetric(float64(b.N)/bareTime.Seconds(), "bare-items/s")
	b.ReportMetric(full.Seconds()/bareTime.Seconds(), "x-bare")
}

// bareItems queues b.N trivial items, each for its own Agent as the
// deployments are, so the per-Agent ordering check in the claim query has
// the same shape of work in both loops. The queue has no foreign keys, so
// the Agents need not exist.
func bareItems(b *testing.B, ctx context.Context, st store.Store) {
	b.Helper()
	now := time.Now().UTC().Truncate(time.Microsecond)
	for i := range b.N {
		id := ids.New(ids.WorkItem)
		_, err := st.EnqueueWork(ctx, store.WorkItem{ID: id, Kind: "bench.noop", IdempotencyKey: id,
			NamespaceID: "ns_bench", AgentID: fmt.Sprintf("agt_bench_%d", i), State: store.WorkQueued,
			AvailableAt: now, CreatedAt: now.Add(time.Duration(i) * time.Microsecond), UpdatedAt: now})
		if err != nil {
			b.Fatalf("EnqueueWork #%d: %v", i, err)
		}
	}
}

// slowCall is the fake driver's delay on PrepareRevision and
// ActivateRevision in BenchmarkLoops: about one round trip to a container
// engine or API server.
const slowCall = 20 * time.Millisecond

// BenchmarkLoops measures what Options.Concurrency buys when driver calls
// take time: b.N deployments, one per Agent, queued before the timer
// starts, are run by Worker.Run with one loop and with four, each side on
// a fresh database and driver, alternating for three rounds in one run, with
// PrepareRevision and ActivateRevision each taking slowCall. It reports
// both sides' deployments per second and their ratio (loops4-x). ns/op is
// the total over both sides.
//
// Run: go test ./internal/worker -run '^$' -bench BenchmarkLoops -benchtime=100x
func BenchmarkLoops(b *testing.B) {
	b.Run(sqlstore.EngineSQLite, func(b *testing.B) {
		benchLoops(b, func(tb testing.TB) *sqlstore.Store { return testdb.SQLite(tb) })
	})
	b.Run(sqlstore.EnginePostgres, func(b *testing.B) {
		benchLoops(b, func(tb testing.TB) *sqlstore.Store { return testdb.Postgres(tb) })
	})
}

func benchLoops(b *testing.B, open func(testing.TB) *sqlstore.Store) {
	ctx, cancel := context.WithTimeout(b.Context(), 10*time.Minute)
	defer cancel()
	var spent [2]time.Duration // one loop, four loops
	for range 3 {
		for side, loops := range []int{1, 4} {
			spent[side] += runLoops(b, ctx, open(b), loops)
		}
	}
	one, four := 3*float64(b.N)/spent[0].Seconds(), 3*float64(b.N)/spent[1].Seconds()
	b.ReportMetric(one, "loops1-deployments/s")
	b.ReportMetric(four, "loops4-deployments/s")
	b.ReportMetric(four/one, "loops4-x")
}

// runLoops queues b.N deployments on st (untimed), then times Worker.Run
// with the given loops until every one has succeeded.
func runLoops(b *testing.B, ctx context.Context, st *sqlstore.Store, loops int) time.Duration {
	b.Helper()
	b.StopTimer()
	drv := fake.New(fake.Options{})
	drv.SetDelay(fake.PrepareRevision, slowCall)
	drv.SetDelay(fake.ActivateRevision, slowCall)
	f := newFixture(b, ctx, st, nil, drv, worker.Options{Concurrency: loops, Logger: quietLogger()})
	revs := make([]store.Revision, b.N)
	for i := range b.N {
		revs[i] = f.deploy(b, f.agent(b, fmt.Sprintf("loops-%d", i), false))
	}
	// The fixture's own passes (the Namespace) are done; only the
	// deployments are queued.
	wctx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	b.StartTimer()
	start := time.Now()
	go func() { done <- f.srv.Worker.Run(wctx) }()
	for {
		depth, err := st.QueueDepth(ctx)
		if err != nil {
			b.Fatal(err)
		}
		if depth[string(store.WorkQueued)]+depth[string(store.WorkRunning)] == 0 {
			break
		}
		select {
		case <-ctx.Done():
			b.Fatalf("%d loops: deployments still queued at the benchmark's deadline: %v", loops, depth)
		case <-time.After(time.Millisecond):
		}
	}
	took := time.Since(start)
	b.StopTimer()
	stop()
	if err := <-done; err != nil {
		b.Fatal(err)
	}
	for i, r := range revs {
		w, err := f.st.GetWorkByKey(ctx, occ.DeploymentWorkKey(r.ID))
		if err != nil || w.State != store.WorkSucceeded {
			b.Fatalf("%d loops: deployment %d: state %q, %v; want succeeded", loops, i, w.State, err)
		}
	}
	if v := drv.Violations(); len(v) > 0 {
		b.Fatalf("fake driver violations: %q", v)
	}
	b.StartTimer()
	return took
}
