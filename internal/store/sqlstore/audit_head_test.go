package sqlstore_test

import (
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
	a, b := twoReplicas(t)

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
		var err error
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
	verifyChained(t, a, len(steps))
}

// twoReplicas opens two stores on one new PostgreSQL database, as two OCC
// replicas would.
func twoReplicas(t *testing.T) (a, b *sqlstore.Store) {
	t.Helper()
	a, url := testdb.PostgresURL(t)
	b, err := sqlstore.Open(testCtx(t), url, "")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return a, b
}

// TestAuditChainTwoReplicas: two stores on one PostgreSQL database (two
// replicas), each appending from three goroutines at once, in transactions
// of their own (one statement on a known head) and of a caller's (some
// rolled back), form one gapless chain holding every committed event.
func TestAuditChainTwoReplicas(t *testing.T) {
	a, b := twoReplicas(t)
	const perReplica, each = 3, 30
	concurrentAppends(t, []*sqlstore.Store{a, b}, perReplica, each, func(i int) appendKind {
		switch i % 6 {
		case 4:
			return callerTransaction
		case 5:
			return rolledBack
		}
		return ownTransaction
	})
	verifyChained(t, b, 2*perReplica*each*5/6)
}
