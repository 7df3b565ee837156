package server_test

import (
	"context"
	"encoding/json"
	"fmt"
	"log/slog"
	"net/http/httptest"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/testutil"
	"github.com/openclaw/occ/internal/worker"
)

// Phases of TestPostgresRestartUnderLoad; a sample belongs to a phase when
// it started and ended in it.
const (
	phaseUp int32 = iota
	phaseStopping
	phaseDown
	phaseStarting
	phaseRecovering
	phaseRecovered
)

// failFast bounds one request while the database is down: far under the
// HTTP server's 60 s read timeout and the 30 s file timeout. A refused
// connection to a stopped PostgreSQL fails in milliseconds; the bound is
// loose for the race detector on a loaded 2-core machine.
const failFast = 2 * time.Second

// TestPostgresRestartUnderLoad stops a private PostgreSQL cluster under a
// steady mixed load on an in-process OCC server (API and embedded worker
// on the real clock, the fake Compute driver), and starts it again. While
// it is down every request answers 503 DEPENDENCY_UNAVAILABLE within
// failFast; after the start OCC serves again without a restart, and every
// deployment requested (202, or written before its reply was lost)
// finishes exactly once: one work item per revision, succeeded.
func TestPostgresRestartUnderLoad(t *testing.T) {
	cluster := testdb.NewCluster(t)
	ctx := testutil.Context(t)
	st, err := sqlstore.Open(ctx, cluster.URL(), "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = st.Close() })
	if err := st.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	var logs lockedBuffer
	d := fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true}})
	e := newEnvWith(t, st, server.Options{Driver: d, Now: time.Now,
		Logger: slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelWarn})),
		// A short lease, so an item whose worker lost the database while
		// holding it is claimed again soon after the start.
		Worker: worker.Options{Poll: 50 * time.Millisecond, Lease: 3 * time.Second}})
	wctx, stopWorker := context.WithCancel(context.Background())
	workerDone := make(chan struct{})
	go func() { defer close(workerDone); _ = e.srv.Worker.Run(wctx) }()
	t.Cleanup(func() { stopWorker(); <-workerDone })
	hs := httptest.NewServer(e.srv.Handler())
	t.Cleanup(hs.Close)

	de := &deployEnv{env: e, driver: d}
	de.readyNamespace("outage", map[string]any{})
	agents := []string{de.createAgent("a0", nil), de.createAgent("a1", nil), de.createAgent("a2", nil)}

	const readers, deployers = 6, 2
	lc := newLoadClient(hs.URL, e.admin.cookie, readers+deployers)
	defer lc.close()
	var phase atomic.Int32
	var ss samples
	var accepted sync.Map // revision id -> agent id, for every 202
	// Stopping the load lets requests in flight finish: cancelling them
	// would be a client disconnect, not part of the outage.
	var stopping atomic.Bool
	var wg sync.WaitGroup
	record := func(op string, f func() reply) reply {
		p0 := phase.Load()
		r := ss.time(op, f)
		if p1 := phase.Load(); p0 == p1 {
			ss.mu.Lock()
			ss.all[len(ss.all)-1].op = fmt.Sprintf("%d/%s", p0, op)
			ss.mu.Unlock()
		}
		return r
	}
	// Bounded in count and time: at most 3,000 requests per client, and the
	// load stops when the phases are done.
	for c := range readers + deployers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < 3000 && !stopping.Load(); i++ {
				ag := agents[(c+i)%len(agents)]
				base := "/namespaces/" + de.ns + "/agents"
				if c >= readers {
					r := record("deploy", func() reply { return lc.do(ctx, "POST", base+"/"+ag+"/deploy", nil, nil) })
					if r.status == 202 {
						var rev idOnly
						if json.Unmarshal(r.data, &rev) == nil {
							accepted.Store(rev.ID, ag)
						}
					}
					sleepCtx(ctx, 150*time.Millisecond)
					continue
				}
				if i%2 == 0 {
					record("list", func() reply { return lc.do(ctx, "GET", base, nil, nil) })
				} else {
					record("get", func() reply { return lc.do(ctx, "GET", base+"/"+ag, nil, nil) })
				}
				sleepCtx(ctx, 10*time.Millisecond)
			}
		}()
	}

	sleepCtx(ctx, 2*time.Second)
	phase.Store(phaseStopping)
	cluster.Stop()
	phase.Store(phaseDown)
	sleepCtx(ctx, 3*time.Second)
	phase.Store(phaseStarting)
	cluster.Start()
	started := time.Now()
	phase.Store(phaseRecovering)
	testutil.Eventually(t, 60*time.Second, func() bool {
		code, _, _ := e.do("GET", "/namespaces/"+de.ns+"/agents", nil, e.admin)
		return code == 200
	}, "OCC serving again after PostgreSQL started")
	recovery := time.Since(started)
	phase.Store(phaseRecovered)
	sleepCtx(ctx, 2*time.Second)
	stopping.Store(true)
	wg.Wait()

	all := ss.list()
	t.Logf("PostgreSQL stopped for 3 s under load; OCC answered again %s after the start.\n"+
		"phase/operation (0 up, 1 stopping, 2 down, 3 starting, 4 recovering, 5 recovered; no phase: spanned two):\n%s",
		recovery.Round(time.Millisecond), summarize(all))

	counts := map[int32]int{}
	for _, s := range all {
		p := int32(-1)
		if before, _, ok := strings.Cut(s.op, "/"); ok {
			if n, err := strconv.Atoi(before); err == nil {
				p = int32(n)
			}
		}
		counts[p]++
		out := s.outcome()
		switch {
		case p == phaseUp || p == phaseRecovered:
			if s.status != 200 && s.status != 202 {
				t.Errorf("%s with the database up: %s (%v)", s.op, out, s.err)
			}
		case p == phaseDown:
			if out != "503 DEPENDENCY_UNAVAILABLE" || s.took() > failFast {
				t.Errorf("%s with the database down: %s after %s (%v); want 503 DEPENDENCY_UNAVAILABLE within %s", s.op, out, s.took(), s.err, failFast)
			}
		default: // across a stop or start: either answer, never a 500
			switch out {
			case "200", "202", "503 DEPENDENCY_UNAVAILABLE", "503 UNKNOWN_OUTCOME":
			default:
				t.Errorf("%s across a stop or start: %s (%v)", s.op, out, s.err)
			}
		}
	}
	if counts[phaseUp] < 20 || counts[phaseDown] < 20 || counts[phaseRecovered] < 20 {
		t.Fatalf("samples per phase %v; want at least 20 before, during and after the outage", counts)
	}
	for _, line := range strings.Split(logs.String(), "\n") {
		if strings.Contains(line, `"level":"ERROR","msg":"request failed"`) {
			t.Errorf("a request failure was logged at error level; the outage's 503s are warnings: %.1000s", line)
		}
	}

	// No deployment lost: every revision (accepted with 202, or committed
	// though its reply was lost) has exactly one work item, succeeded.
	var revs []string
	accepted.Range(func(k, _ any) bool { revs = append(revs, k.(string)); return true })
	if len(revs) < 10 {
		t.Fatalf("only %d deployments accepted; the load proves nothing", len(revs))
	}
	unfinished := func() []string {
		rows, err := st.DB().QueryContext(ctx, `SELECT work_kind, coalesce(revision_id, ''), state, attempt_count, available_at,
			coalesce(reason_code, ''), coalesce(last_error, '') FROM controller_work WHERE state <> 'succeeded' ORDER BY created_at`)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		var out []string
		for rows.Next() {
			var kind, rev, state, reason, last string
			var attempts int
			var at time.Time
			if err := rows.Scan(&kind, &rev, &state, &attempts, &at, &reason, &last); err != nil {
				t.Fatal(err)
			}
			out = append(out, fmt.Sprintf("%s %s %s attempts=%d availableAt=%s reason=%s last=%.200s", kind, rev, state, attempts, at.Format(time.RFC3339Nano), reason, last))
		}
		return out
	}
	deadline := time.Now().Add(2 * time.Minute)
	for left := unfinished(); len(left) > 0; left = unfinished() {
		if time.Now().After(deadline) {
			t.Fatalf("work items not succeeded 2 minutes after the outage (now %s):\n%s", time.Now().Format(time.RFC3339Nano), strings.Join(left, "\n"))
		}
		sleepCtx(ctx, 200*time.Millisecond)
	}
	rows, err := st.DB().QueryContext(ctx, `SELECT r.id, count(w.revision_id), coalesce(min(w.state), ''), coalesce(max(w.state), '')
		FROM agent_revisions r LEFT JOIN controller_work w ON w.revision_id = r.id AND w.work_kind = 'revision.deploy'
		GROUP BY r.id`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	inDB := map[string]bool{}
	for rows.Next() {
		var id, minState, maxState string
		var n int
		if err := rows.Scan(&id, &n, &minState, &maxState); err != nil {
			t.Fatal(err)
		}
		inDB[id] = true
		if n != 1 || minState != "succeeded" || maxState != "succeeded" {
			t.Errorf("revision %s: %d deploy work items, states %s..%s; want exactly one, succeeded", id, n, minState, maxState)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	for _, id := range revs {
		if !inDB[id] {
			t.Errorf("deployment %s was accepted (202) but has no revision", id)
		}
	}
	t.Logf("%d deployments accepted, %d revisions in the database, all succeeded once", len(revs), len(inDB))
	if v := d.Violations(); len(v) > 0 {
		t.Errorf("driver contract violations: %v", v)
	}
}

// sleepCtx sleeps for d or until ctx ends.
func sleepCtx(ctx context.Context, d time.Duration) {
	tm := time.NewTimer(d)
	defer tm.Stop()
	select {
	case <-ctx.Done():
	case <-tm.C:
	}
}
