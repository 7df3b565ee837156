package sqlstore_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// BenchmarkAppendAuditEvent measures one audit record's write (the chain
// head read, the insert and the head update in one transaction), which a
// workspace file PUT makes twice (the write-ahead attempt and the
// outcome): on SQLite, and on PostgreSQL when OCC_TEST_POSTGRES_URL is set.
//
//	go test ./internal/store/sqlstore -run '^$' -bench AppendAuditEvent
func BenchmarkAppendAuditEvent(b *testing.B) {
	engines := map[string]func(testing.TB) *sqlstore.Store{"sqlite": testdb.SQLite}
	if os.Getenv("OCC_TEST_POSTGRES_URL") != "" {
		engines["postgres"] = testdb.Postgres
	}
	for name, open := range engines {
		b.Run(name, func(b *testing.B) {
			s := open(b)
			ctx := context.Background()
			now := time.Now()
			for b.Loop() {
				err := s.AppendAuditEvent(ctx, store.AuditEvent{ID: ids.New(ids.Audit), OccurredAt: now, Kind: store.AuditMutation,
					ActorID: "usr_bench", Action: "workspace_file.write", Outcome: store.OutcomeAttempted,
					Resource: store.AuditResource{Kind: store.KindAgent, ID: "agt_bench", NamespaceID: "ns_bench"}})
				if err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
