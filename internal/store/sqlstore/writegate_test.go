package sqlstore_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// TestWriteGateConcurrentWriters: 16 writers appending at once, through
// SQLite's write gate and PostgreSQL's append gate, all succeed, and the
// chain holds every event once, in sequence.
func TestWriteGateConcurrentWriters(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, s *sqlstore.Store) {
		const writers, each = 16, 25
		concurrentAppends(t, []*sqlstore.Store{s}, writers, each, func(int) appendKind { return ownTransaction })
		verifyChained(t, s, writers*each)
	})
}

// TestWriteGateReleased: the gate is released whichever way a
// transaction ends (commit, an error, a panic, a cancelled begin), so the
// next writer, with a short deadline, gets through; a leaked gate would
// make it wait out its deadline.
func TestWriteGateReleased(t *testing.T) {
	s := testdb.SQLite(t)
	cancelled, cancel := context.WithCancel(t.Context())
	cancel()
	ends := map[string]func() error{
		"commit": func() error {
			return s.InTx(t.Context(), func(tx store.Store) error { return tx.AppendAuditEvent(t.Context(), benchEvent(time.Now())) })
		},
		"error": func() error {
			return s.InTx(t.Context(), func(store.Store) error { return errors.New("rolled back") })
		},
		"panic": func() (err error) {
			defer func() {
				if r := recover(); r != nil {
					err = fmt.Errorf("recovered: %v", r)
				}
			}()
			return s.InTx(t.Context(), func(store.Store) error { panic("in a transaction") })
		},
		"cancelled before begin": func() error {
			return s.InTx(cancelled, func(store.Store) error { return nil })
		},
	}
	for name, end := range ends {
		t.Run(name, func(t *testing.T) {
			_ = end()
			ctx, cancel := context.WithTimeout(t.Context(), 5*time.Second)
			defer cancel()
			if err := s.AppendAuditEvent(ctx, benchEvent(time.Now())); err != nil {
				t.Fatalf("the next writer: %v (the gate was not released)", err)
			}
		})
	}
}

// TestWriteGateHonoursDeadline: a writer waiting behind a transaction that
// holds the gate gives up at its own deadline, and the holder commits.
func TestWriteGateHonoursDeadline(t *testing.T) {
	s := testdb.SQLite(t)
	holding, release := make(chan struct{}), make(chan struct{})
	done := make(chan error, 1)
	go func() {
		done <- s.InTx(t.Context(), func(tx store.Store) error {
			close(holding)
			<-release
			return tx.AppendAuditEvent(t.Context(), benchEvent(time.Now()))
		})
	}()
	<-holding
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := s.AppendAuditEvent(ctx, benchEvent(time.Now()))
	if err == nil {
		t.Fatal("a writer got through while another transaction held the gate")
	}
	if ctx.Err() == nil {
		t.Errorf("the waiting writer failed before its deadline: %v", err)
	}
	close(release)
	if err := <-done; err != nil {
		t.Fatalf("the holder: %v", err)
	}
}

// TestWriteGateCoversEveryWrite: the writes that read their row back
// (UPDATE ... RETURNING, which run as queries) wait for the write gate like
// every other write. With the gate held, and only the gate (SQLite's own
// lock is free, so a write that bypassed the gate would go through), each
// write with a short deadline must give up at that deadline; once the gate
// is free, the same write succeeds.
func TestWriteGateCoversEveryWrite(t *testing.T) {
	s := testdb.SQLite(t)
	a, _ := stagedAgentWith(t, s, "gate-writes-0f3a9c", map[string]string{"SOUL.md": "soul"})
	c, err := s.GetConfiguration(t.Context(), a.NamespaceID, a.ConfigurationID)
	if err != nil {
		t.Fatal(err)
	}
	at := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
	writes := []struct {
		name  string
		write func(context.Context) error
	}{
		{"UpdateAgent", func(ctx context.Context) error {
			u := a
			u.Name, u.UpdatedAt = "renamed", at
			_, err := s.UpdateAgent(ctx, u)
			return err
		}},
		{"SetAgentRuntimeState", func(ctx context.Context) error {
			_, err := s.SetAgentRuntimeState(ctx, a.NamespaceID, a.ID, store.RuntimeStopped, at)
			return err
		}},
		{"UpdateConfiguration", func(ctx context.Context) error {
			u := c
			u.Name, u.UpdatedAt = "renamed", at
			_, err := s.UpdateConfiguration(ctx, u)
			return err
		}},
		// Last: the Agent is then being deleted.
		{"MarkAgentDeleting", func(ctx context.Context) error {
			_, err := s.MarkAgentDeleting(ctx, a.NamespaceID, a.ID, "u_gate", at)
			return err
		}},
	}
	for _, w := range writes {
		t.Run(w.name, func(t *testing.T) {
			release := sqlstore.HoldWriteGateForTest(t, s)
			ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
			err := w.write(ctx)
			cancel()
			release()
			// cancel keeps DeadlineExceeded if the deadline came first.
			waited := errors.Is(ctx.Err(), context.DeadlineExceeded)
			if err == nil || !waited {
				t.Fatalf("with the gate held: err = %v, waited out the deadline = %v; want an error at the deadline", err, waited)
			}
			if err := w.write(t.Context()); err != nil {
				t.Fatalf("with the gate free: %v", err)
			}
		})
	}
}
