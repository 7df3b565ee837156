package sqlstore_test

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// benchEvent is the audit record the append benchmarks and the write-gate
// tests write: a write-ahead attempt, as a file PUT makes, with a new id.
func benchEvent(now time.Time) store.AuditEvent {
	return store.AuditEvent{ID: ids.New(ids.Audit), OccurredAt: now, Kind: store.AuditMutation,
		ActorID: "usr_bench", Action: "workspace_file.write", Outcome: store.OutcomeAttempted,
		Resource: store.AuditResource{Kind: store.KindAgent, ID: "agt_bench", NamespaceID: "ns_bench"}}
}

// BenchmarkAppendAuditEvent measures one audit record's write (the chain
// head read, the insert and the head update in one transaction; on
// PostgreSQL one statement once the process knows the head), which a
// workspace file PUT makes twice (the write-ahead attempt and the
// outcome): on SQLite, and on PostgreSQL when OCC_TEST_POSTGRES_URL is set.
// Besides ns/op it reports the median, p99 and worst append. On SQLite it
// also runs the baseline "sqlite-commit-checkpoints": SQLite's default, a
// commit that takes the WAL past 1,000 pages checkpoints before it returns,
// instead of the store's background checkpoints; on PostgreSQL the
// baseline "postgres-transaction": every append in a transaction of five
// round trips, as before the one statement. Use at least a few
// thousand appends, so that the baseline passes its threshold several
// times, and -count for the spread (the sub-benchmarks alternate):
//
//	go test ./internal/store/sqlstore -run '^$' -bench 'AppendAuditEvent$' -benchtime 5000x -count 2
func BenchmarkAppendAuditEvent(b *testing.B) {
	engines := map[string]func(testing.TB) *sqlstore.Store{
		"sqlite": testdb.SQLite,
		"sqlite-commit-checkpoints": func(tb testing.TB) *sqlstore.Store {
			s := testdb.SQLite(tb)
			if err := sqlstore.CommitCheckpointsForTest(context.Background(), s); err != nil {
				tb.Fatal(err)
			}
			return s
		},
	}
	if os.Getenv("OCC_TEST_POSTGRES_URL") != "" {
		engines["postgres"] = testdb.Postgres
		engines["postgres-transaction"] = func(tb testing.TB) *sqlstore.Store {
			return sqlstore.WithoutKnownHeadForTest(testdb.Postgres(tb))
		}
	}
	for _, name := range []string{"sqlite", "sqlite-commit-checkpoints", "postgres", "postgres-transaction"} {
		open, ok := engines[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			lat := make([]time.Duration, 0, b.N)
			for b.Loop() {
				start := time.Now()
				if err := s.AppendAuditEvent(ctx, benchEvent(start)); err != nil {
					b.Fatal(err)
				}
				lat = append(lat, time.Since(start))
			}
			slices.Sort(lat)
			b.ReportMetric(float64(lat[len(lat)/2].Microseconds()), "p50-µs")
			b.ReportMetric(float64(lat[len(lat)*99/100].Microseconds()), "p99-µs")
			b.ReportMetric(float64(lat[len(lat)-1].Microseconds()), "max-µs")
		})
	}
}

// BenchmarkAppendAuditEventParallel is BenchmarkAppendAuditEvent with 16
// writers at once (SetParallelism 8 on 2 cores), as under concurrent file
// PUTs: ns/op is the inverse of the throughput, and p50-ms / p99-ms the
// latency of one append. Each engine runs through the store's gate and
// without it (writers queueing on SQLite's lock and busy handler, or on
// PostgreSQL's row lock on the chain head, alone: the baseline), and
// PostgreSQL also through the gate with every append a transaction
// ("postgres-transaction", the baseline of the one statement):
//
//	go test ./internal/store/sqlstore -run '^$' -bench AppendAuditEventParallel -count 3
func BenchmarkAppendAuditEventParallel(b *testing.B) {
	engines := map[string]func(testing.TB) *sqlstore.Store{
		"sqlite":         testdb.SQLite,
		"sqlite-no-gate": func(tb testing.TB) *sqlstore.Store { return sqlstore.WithoutWriteGateForTest(testdb.SQLite(tb)) },
	}
	if os.Getenv("OCC_TEST_POSTGRES_URL") != "" {
		engines["postgres"] = testdb.Postgres
		engines["postgres-transaction"] = func(tb testing.TB) *sqlstore.Store { return sqlstore.WithoutKnownHeadForTest(testdb.Postgres(tb)) }
		engines["postgres-no-gate"] = func(tb testing.TB) *sqlstore.Store { return sqlstore.WithoutWriteGateForTest(testdb.Postgres(tb)) }
	}
	for _, name := range []string{"sqlite", "sqlite-no-gate", "postgres", "postgres-transaction", "postgres-no-gate"} {
		open, ok := engines[name]
		if !ok {
			continue
		}
		b.Run(name, func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			var mu sync.Mutex
			var all []time.Duration
			b.SetParallelism(8)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				var mine []time.Duration
				for pb.Next() {
					start := time.Now()
					if err := s.AppendAuditEvent(ctx, benchEvent(start)); err != nil {
						b.Error(err)
						return
					}
					mine = append(mine, time.Since(start))
				}
				mu.Lock()
				all = append(all, mine...)
				mu.Unlock()
			})
			b.StopTimer()
			if len(all) == 0 {
				return
			}
			slices.Sort(all)
			b.ReportMetric(float64(all[len(all)/2].Microseconds())/1000, "p50-ms")
			b.ReportMetric(float64(all[len(all)*99/100].Microseconds())/1000, "p99-ms")
		})
	}
}
