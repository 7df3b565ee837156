package sqlstore

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// TestTransactionStatementsPrepared: on SQLite's writer, a pool of one
// connection (where preparing inside the transaction would wait for a
// second connection that never comes), a transaction's first run
// prepares nothing inside it, its commit prepares what it ran, and the
// next run of the same transaction runs every exec and queryRow
// prepared. A query (open rows) is never bound to the transaction.
func TestTransactionStatementsPrepared(t *testing.T) {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute) // a deadlock fails, not hangs
	defer cancel()
	s, err := Open(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}

	appendOne := func() []string {
		t.Helper()
		var unprepared []string
		err := s.inTx(ctx, func(tx *Store) error {
			err := tx.AppendAuditEvent(ctx, store.AuditEvent{ID: ids.New(ids.Audit), OccurredAt: time.Now(),
				Kind: store.AuditMutation, ActorID: "u", Action: "test.append", Outcome: "success"})
			unprepared = append(unprepared, *tx.unprepared...)
			return err
		})
		if err != nil {
			t.Fatalf("append: %v", err)
		}
		return unprepared
	}
	first := appendOne()
	_, stmts := s.writeDB()
	if stmts == s.stmts {
		t.Fatal("SQLite's transactions run on the read pool, not on the writer")
	}
	var kinds []string
	for _, q := range first {
		kinds = append(kinds, strings.Fields(q)[0])
		if stmts.lookup(q) == nil {
			t.Errorf("after the commit, %.40q is not prepared", q)
		}
	}
	if diff := cmp.Diff([]string{"SELECT", "INSERT", "UPDATE"}, kinds); diff != "" {
		t.Errorf("the first append's unprepared statements (-want +got):\n%s", diff)
	}
	if again := appendOne(); len(again) != 0 {
		t.Errorf("the second append ran %d statements unprepared, want 0: %q", len(again), again)
	}

	err = s.inTx(ctx, func(tx *Store) error {
		if tx.cached(ctx, first[0], false) != nil {
			t.Error("a query (open rows) was bound to the transaction")
		}
		if tx.cached(ctx, first[0], true) == nil {
			t.Error("a cached queryRow statement was not bound to the transaction")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}

	// A write outside a transaction runs on the writer too.
	touch := `UPDATE sessions SET last_used_at = ? WHERE token_hash = ? AND last_used_at < ?`
	if _, err := s.TouchSession(ctx, []byte("no such session"), time.Now(), time.Now()); err != nil {
		t.Fatal(err)
	}
	if stmts.lookup(touch) == nil || s.stmts.lookup(touch) != nil {
		t.Error("TouchSession (an exec outside a transaction) did not run on the writer")
	}

	events, err := s.ListAuditEvents(ctx, store.AuditFilter{Action: "test.append"}, nil, 10)
	if err != nil || len(events) != 2 {
		t.Fatalf("ListAuditEvents = %d events, %v; want the 2 appended", len(events), err)
	}
	if res, brk, err := s.VerifyAuditChain(ctx); err != nil || brk != nil || res.Chained != 2 {
		t.Errorf("VerifyAuditChain = %+v, %+v, %v; want 2 chained events, no break", res, brk, err)
	}
}
