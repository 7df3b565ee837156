package sqlstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// BenchmarkListPages measures the store's side of the list pages the API
// serves most: 100 Agents, 100 Namespaces and 50 audit events, each
// operation one page read from the start, on SQLite and (with
// OCC_TEST_POSTGRES_URL) PostgreSQL, one goroutine. Allocations are the
// figure to compare between two versions of the code; ns/op moves with
// the machine's load.
//
//	go test ./internal/store/sqlstore -run '^$' -bench 'ListPages' -benchmem -count 5
func BenchmarkListPages(b *testing.B) {
	engines := []struct {
		name string
		open func(testing.TB) *sqlstore.Store
	}{{"sqlite", testdb.SQLite}}
	if os.Getenv("OCC_TEST_POSTGRES_URL") != "" {
		engines = append(engines, struct {
			name string
			open func(testing.TB) *sqlstore.Store
		}{"postgres", testdb.Postgres})
	}
	for _, e := range engines {
		b.Run(e.name, func(b *testing.B) {
			s := e.open(b)
			ctx := context.Background()
			ns := seedLists(b, s, 300)
			b.Run("agents", func(b *testing.B) {
				for b.Loop() {
					if p, err := s.ListAgents(ctx, ns, store.PageRequest{Limit: 100}); err != nil || len(p.Items) != 100 {
						b.Fatalf("ListAgents: %d, %v", len(p.Items), err)
					}
				}
			})
			b.Run("namespaces", func(b *testing.B) {
				for b.Loop() {
					if p, err := s.ListNamespaces(ctx, store.PageRequest{Limit: 100}); err != nil || len(p.Items) != 100 {
						b.Fatalf("ListNamespaces: %d, %v", len(p.Items), err)
					}
				}
			})
			b.Run("audit", func(b *testing.B) {
				for b.Loop() {
					if evs, err := s.ListAuditEvents(ctx, store.AuditFilter{}, nil, 50); err != nil || len(evs) != 50 {
						b.Fatalf("ListAuditEvents: %d, %v", len(evs), err)
					}
				}
			})
		})
	}
}

// seedLists makes n Namespaces, n Agents in the first and n audit events,
// and returns the first Namespace's id.
func seedLists(tb testing.TB, s *sqlstore.Store, n int) string {
	tb.Helper()
	ctx := context.Background()
	base := time.Now().UTC().Add(-time.Hour)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Millisecond) }
	var first string
	err := s.InTx(ctx, func(tx store.Store) error {
		for i := range n {
			ns := store.Namespace{ID: ids.New(ids.Namespace), Name: fmt.Sprintf("ns-%d", i), Status: store.NamespaceReady, CreatedAt: at(i), UpdatedAt: at(i)}
			if err := tx.CreateNamespace(ctx, ns); err != nil {
				return err
			}
			if i == 0 {
				first = ns.ID
			}
		}
		cfg := store.Configuration{ID: ids.New(ids.Configuration), NamespaceID: first, Name: "base", Kind: store.ConfigurationKindAgent,
			Document: json.RawMessage(`{}`), Generation: 1, CreatedAt: at(0), UpdatedAt: at(0)}
		if err := tx.CreateConfiguration(ctx, cfg); err != nil {
			return err
		}
		for i := range n {
			a := ids.New(ids.Agent)
			if err := tx.CreateAgent(ctx, store.Agent{ID: a, NamespaceID: first, Name: fmt.Sprintf("agent-%d", i), ConfigurationID: cfg.ID,
				Status: store.AgentActive, DesiredRuntimeState: store.RuntimeStopped, CreatedAt: at(i), UpdatedAt: at(i)}, nil); err != nil {
				return err
			}
			if err := tx.AppendAuditEvent(ctx, store.AuditEvent{ID: ids.New(ids.Audit), OccurredAt: at(i), Kind: store.AuditMutation,
				ActorID: "usr_bench", Action: "openclaw.agents.create", Outcome: store.OutcomeSuccess,
				Resource: store.AuditResource{Kind: store.KindAgent, ID: a, NamespaceID: first}}); err != nil {
				return err
			}
		}
		return nil
	})
	if err != nil {
		tb.Fatal(err)
	}
	return first
}
