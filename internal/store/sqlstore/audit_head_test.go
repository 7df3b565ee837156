package sqlstore_test

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace/noop"

	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// TestAuditAppendOnKnownHead follows the statements of each append on
// PostgreSQL, from the store's spans, through two stores on one database
// (two replicas): an append whose process committed the last link is one
// statement, also after an append in a transaction of the caller's has
// committed; one after another replica's append finds that statement
// changing nothing and reads the head in a transaction; the chain stays
// whole throughout.
func TestAuditAppendOnKnownHead(t *testing.T) {
	ctx := testCtx(t)
	a, url := testdb.PostgresURL(t)
	b, err := sqlstore.Open(ctx, url, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })

	rec := tracetest.NewSpanRecorder()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(rec))
	sqlstore.SetTracerProvider(tp)
	t.Cleanup(func() { sqlstore.SetTracerProvider(noop.NewTracerProvider()) })
	n := 0
	// statements runs one append of s (in a transaction of the caller's
	// when inTx) and returns the names of the store spans it made.
	statements := func(s *sqlstore.Store, inTx bool) []string {
		t.Helper()
		sctx, root := tp.Tracer("test").Start(ctx, "append")
		before := len(rec.Ended())
		e := chainEvent(n)
		n++
		if inTx {
			err = s.InTx(sctx, func(tx store.Store) error { return tx.AppendAuditEvent(sctx, e) })
		} else {
			err = s.AppendAuditEvent(sctx, e)
		}
		root.End()
		if err != nil {
			t.Fatalf("append %d: %v", n, err)
		}
		var names []string
		for _, sp := range rec.Ended()[before:] {
			if sp.Name() != "append" {
				names = append(names, sp.Name())
			}
		}
		return names
	}
	transaction := []string{"db.begin", "db.select", "db.insert", "db.update", "db.commit"}
	one := []string{"db.with"}
	missed := append(append([]string{}, one...), transaction...)
	steps := []struct {
		name string
		s    *sqlstore.Store
		inTx bool
		want []string
	}{
		{"first append of replica a: the head is not known", a, false, transaction},
		{"a again: one statement", a, false, one},
		{"a again", a, false, one},
		{"first append of replica b", b, false, transaction},
		{"a after b moved the head", a, false, missed},
		{"a again", a, false, one},
		{"a in a caller's transaction", a, true, transaction},
		{"a after its transaction committed the head", a, false, one},
		{"b after a moved the head", b, false, missed},
		{"b again", b, false, one},
		{"b in a caller's transaction", b, true, transaction},
		{"a after b's transaction moved the head", a, false, missed},
		{"b after its transaction, then a", b, false, missed},
		{"b again", b, false, one},
	}
	for _, st := range steps {
		if diff := cmp.Diff(st.want, statements(st.s, st.inTx)); diff != "" {
			t.Errorf("%s: statements (-want +got):\n%s", st.name, diff)
		}
	}
	res, brk, err := a.VerifyAuditChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if brk != nil {
		t.Fatalf("chain broken: %v", brk)
	}
	if res.Chained != int64(len(steps)) {
		t.Errorf("chained = %d, want %d", res.Chained, len(steps))
	}
}

// TestAuditChainTwoReplicas: two stores on one PostgreSQL database (two
// replicas), each appending from three goroutines at once, in transactions
// of their own (one statement on a known head) and of a caller's (some
// rolled back), form one gapless chain holding every committed event.
func TestAuditChainTwoReplicas(t *testing.T) {
	ctx := testCtx(t)
	a, url := testdb.PostgresURL(t)
	b, err := sqlstore.Open(ctx, url, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	const perReplica, each = 3, 30
	rollback := errors.New("roll back")
	var wg sync.WaitGroup
	errs := make(chan error, 2*perReplica*each)
	for r, s := range []*sqlstore.Store{a, b} {
		for g := range perReplica {
			wg.Go(func() {
				for i := range each {
					e := chainEvent((r*perReplica+g)*each + i)
					switch i % 6 {
					case 4: // in a caller's transaction
						if err := s.InTx(ctx, func(tx store.Store) error { return tx.AppendAuditEvent(ctx, e) }); err != nil {
							errs <- fmt.Errorf("append in a transaction: %v", err)
						}
					case 5: // rolled back
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
	res, brk, err := b.VerifyAuditChain(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if brk != nil {
		t.Fatalf("chain broken after concurrent appends on two replicas: %v", brk)
	}
	if want := int64(2 * perReplica * each * 5 / 6); res.Chained != want {
		t.Errorf("chained = %d, want %d", res.Chained, want)
	}
}
