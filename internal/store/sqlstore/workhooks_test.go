package sqlstore_test

import (
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// TestOnWorkQueued: the hook is told after each commit that queued a new
// item (in its own transaction, or once after an enclosing one commits),
// and not for an idempotency key that already existed, a rolled-back
// transaction, or an item queued in another state.
func TestOnWorkQueued(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := t.Context()
		a, _ := stagedAgentWith(t, s, "hooks-77c1e0", map[string]string{"SOUL.md": "soul"})
		var told atomic.Int32
		s.OnWorkQueued(func() { told.Add(1) })
		now := time.Date(2026, 12, 3, 9, 0, 0, 0, time.UTC)
		item := func(key string, state store.WorkState) store.WorkItem {
			return store.WorkItem{ID: ids.New(ids.WorkItem), Kind: store.WorkAgentStop, IdempotencyKey: key,
				NamespaceID: a.NamespaceID, AgentID: a.ID, ActorID: "usr_hooks", State: state,
				AvailableAt: now, CreatedAt: now, UpdatedAt: now}
		}
		errRollback := errors.New("roll back")
		steps := []struct {
			name string
			run  func() error
			want int32 // told so far, after the step
		}{
			{"new item", func() error { _, err := s.EnqueueWork(ctx, item("k1", store.WorkQueued)); return err }, 1},
			{"existing key", func() error { _, err := s.EnqueueWork(ctx, item("k1", store.WorkQueued)); return err }, 1},
			{"rolled back", func() error {
				err := s.InTx(ctx, func(tx store.Store) error {
					if _, err := tx.EnqueueWork(ctx, item("k2", store.WorkQueued)); err != nil {
						return err
					}
					return errRollback
				})
				if !errors.Is(err, errRollback) {
					return err
				}
				return nil
			}, 1},
			{"two in one transaction, told after its commit", func() error {
				return s.InTx(ctx, func(tx store.Store) error {
					for _, k := range []string{"k3", "k4"} {
						if _, err := tx.EnqueueWork(ctx, item(k, store.WorkQueued)); err != nil {
							return err
						}
					}
					if n := told.Load(); n != 1 {
						t.Errorf("told %d times before the commit; want 1 (the first step's)", n)
					}
					return nil
				})
			}, 2},
			{"not queued", func() error { _, err := s.EnqueueWork(ctx, item("k5", store.WorkSucceeded)); return err }, 2},
		}
		for _, st := range steps {
			if err := st.run(); err != nil {
				t.Fatalf("%s: %v", st.name, err)
			}
			if got := told.Load(); got != st.want {
				t.Errorf("after %q: told %d times, want %d", st.name, got, st.want)
			}
		}
	})
}
