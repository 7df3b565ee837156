package sqlstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/auditchain"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

func chainEvent(n int) store.AuditEvent {
	return store.AuditEvent{
		ID: ids.New(ids.Audit), OccurredAt: time.Date(2026, 12, 1, 10, 0, n, 1234, time.UTC),
		Kind: store.AuditMutation, ActorID: "usr_1", Credential: "session", RequestID: fmt.Sprintf("req_%d", n),
		Action: "openclaw.agents.create", Resource: store.AuditResource{Kind: store.KindAgent, ID: "agt_1", NamespaceID: "ns_1"},
		Outcome: store.OutcomeSuccess, Details: map[string]string{"name": fmt.Sprintf("a%d", n)},
	}
}

// tamper runs statements as someone with direct write access to the
// database would: past the append-only triggers.
func tamper(t *testing.T, s *sqlstore.Store, stmts ...string) {
	t.Helper()
	ctx := testCtx(t)
	pre := []string{`DROP TRIGGER audit_events_no_update`, `DROP TRIGGER audit_events_no_delete`}
	if s.Engine() == sqlstore.EnginePostgres {
		pre = []string{`ALTER TABLE audit_events DISABLE TRIGGER USER`}
	}
	for _, q := range append(pre, stmts...) {
		if _, err := s.DB().ExecContext(ctx, q); err != nil {
			t.Fatalf("%s: %v", q, err)
		}
	}
}

func TestAuditChainVerifyFindsTheFirstBrokenLink(t *testing.T) {
	sql := func(f string, ev int) func(*testing.T, *sqlstore.Store, []store.AuditEvent) {
		return func(t *testing.T, s *sqlstore.Store, evs []store.AuditEvent) {
			tamper(t, s, fmt.Sprintf(f, evs[ev].ID))
		}
	}
	altered := "its contents do not match its hash (the event was altered)"
	cases := []struct {
		name    string
		tamper  func(*testing.T, *sqlstore.Store, []store.AuditEvent)
		seq     int64 // 0: the chain must verify
		eventN  int   // the event the break names; -1 for none
		reason  func(evs []store.AuditEvent) string
		chained int64
	}{
		{name: "intact", tamper: func(*testing.T, *sqlstore.Store, []store.AuditEvent) {}, chained: 5},
		{name: "a field altered", tamper: sql(`UPDATE audit_events SET actor_id = 'usr_evil' WHERE id = '%s'`, 2),
			seq: 3, eventN: 2, reason: func([]store.AuditEvent) string { return altered }, chained: 2},
		{name: "a detail altered", tamper: sql(`UPDATE audit_events SET details = '{"name":"x"}' WHERE id = '%s'`, 1),
			seq: 2, eventN: 1, reason: func([]store.AuditEvent) string { return altered }, chained: 1},
		{name: "the time altered", tamper: sql(`UPDATE audit_events SET occurred_at = (SELECT occurred_at FROM audit_events WHERE chain_seq = 1) WHERE id = '%s'`, 4),
			seq: 5, eventN: 4, reason: func([]store.AuditEvent) string { return altered }, chained: 4},
		{name: "an event removed", tamper: sql(`DELETE FROM audit_events WHERE id = '%s'`, 2), seq: 3, eventN: -1,
			reason: func(evs []store.AuditEvent) string {
				return fmt.Sprintf("the event is missing (the next one found is seq 4, event %s)", evs[3].ID)
			}, chained: 2},
		{name: "the last event removed", tamper: sql(`DELETE FROM audit_events WHERE id = '%s'`, 4), seq: 5, eventN: -1,
			reason: func([]store.AuditEvent) string {
				return "the chain ends at seq 4 but its head says 5 events were appended"
			}, chained: 4},
		{name: "an event altered and re-hashed", tamper: func(t *testing.T, s *sqlstore.Store, evs []store.AuditEvent) {
			// A forger who knows the canonical form recomputes the altered
			// event's own hash; the next event's link still gives it away.
			var prev string
			q := `SELECT prev_hash FROM audit_events WHERE id = '` + evs[1].ID + `'`
			if err := s.DB().QueryRowContext(testCtx(t), q).Scan(&prev); err != nil {
				t.Fatal(err)
			}
			e := evs[1]
			e.OccurredAt = e.OccurredAt.Truncate(time.Microsecond)
			e.ActorID = "usr_evil"
			tamper(t, s, fmt.Sprintf(`UPDATE audit_events SET actor_id = 'usr_evil', hash = '%s' WHERE id = '%s'`,
				auditchain.Hash(e, 2, prev), e.ID))
		}, seq: 3, eventN: 2, reason: func([]store.AuditEvent) string {
			return "its previous-hash does not match the hash of the event before it"
		}, chained: 2},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			testdb.Engines(t, func(t *testing.T, s *sqlstore.Store) {
				ctx := testCtx(t)
				var evs []store.AuditEvent
				for i := range 5 {
					e := chainEvent(i)
					if err := s.AppendAuditEvent(ctx, e); err != nil {
						t.Fatal(err)
					}
					evs = append(evs, e)
				}
				tc.tamper(t, s, evs)
				res, brk, err := s.VerifyAuditChain(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if res.Chained != tc.chained {
					t.Errorf("chained before the break = %d, want %d", res.Chained, tc.chained)
				}
				if tc.seq == 0 {
					if brk != nil {
						t.Fatalf("intact chain reported broken: %v", brk)
					}
					return
				}
				if brk == nil {
					t.Fatalf("tampering went unnoticed (result %+v)", res)
				}
				want := auditchain.Break{Seq: tc.seq, Reason: tc.reason(evs)}
				if tc.eventN >= 0 {
					want.EventID = evs[tc.eventN].ID
				}
				if diff := cmp.Diff(want, *brk); diff != "" {
					t.Errorf("break (-want +got):\n%s", diff)
				}
			})
		})
	}
}

// Concurrent appends, some in transactions that roll back, still form one
// gapless chain in commit order.
func TestAuditChainConcurrentAppends(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, s *sqlstore.Store) {
		const workers, each = 6, 15
		concurrentAppends(t, []*sqlstore.Store{s}, workers, each, func(i int) appendKind {
			if i%5 == 4 {
				return rolledBack
			}
			return ownTransaction
		})
		verifyChained(t, s, workers*each*4/5)
	})
}

// appendKind is how concurrentAppends appends one event.
type appendKind int

const (
	ownTransaction    appendKind = iota // AppendAuditEvent
	callerTransaction                   // in InTx, committed
	rolledBack                          // in InTx, rolled back
)

// concurrentAppends appends each events from each of goroutines goroutines
// on every store at once, the i-th of a goroutine as kind(i) says, and
// fails t on any error.
func concurrentAppends(t *testing.T, stores []*sqlstore.Store, goroutines, each int, kind func(i int) appendKind) {
	t.Helper()
	ctx := testCtx(t)
	rollback := errors.New("roll back")
	var wg sync.WaitGroup
	errs := make(chan error, len(stores)*goroutines*each)
	for r, s := range stores {
		for g := range goroutines {
			wg.Go(func() {
				for i := range each {
					e := chainEvent((r*goroutines+g)*each + i)
					switch kind(i) {
					case callerTransaction:
						if err := s.InTx(ctx, func(tx store.Store) error { return tx.AppendAuditEvent(ctx, e) }); err != nil {
							errs <- fmt.Errorf("append in a transaction: %v", err)
						}
					case rolledBack:
						err := s.InTx(ctx, func(tx store.Store) error {
							if err := tx.AppendAuditEvent(ctx, e); err != nil {
								return err
							}
							return rollback
						})
						if !errors.Is(err, rollback) {
							errs <- fmt.Errorf("rolled-back append: %v", err)
						}
					default:
						if err := s.AppendAuditEvent(ctx, e); err != nil {
							errs <- err
						}
					}
				}
			})
		}
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// verifyChained fails t unless s's audit chain verifies whole and holds
// want chained events.
func verifyChained(t *testing.T, s *sqlstore.Store, want int) {
	t.Helper()
	res, brk, err := s.VerifyAuditChain(testCtx(t))
	if err != nil {
		t.Fatal(err)
	}
	if brk != nil {
		t.Fatalf("chain broken: %v", brk)
	}
	if res.Chained != int64(want) {
		t.Errorf("chained = %d, want %d", res.Chained, want)
	}
}
