package storetest

import (
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

func newNamespace(n int) store.Namespace {
	return store.Namespace{
		ID: ids.New(ids.Namespace), Name: fmt.Sprintf("tx-%d", n), Status: store.NamespaceProvisioning,
		CreatedAt: at(n), UpdatedAt: at(n),
	}
}

var errAbort = errors.New("abort")

var txCases = []testCase{
	{"InTx/Commit", func(t *testing.T, h Harness) {
		ns := newNamespace(1)
		err := h.Store.InTx(ctx(t), func(tx store.Store) error {
			if err := tx.CreateNamespace(ctx(t), ns); err != nil {
				return err
			}
			// The transaction sees its own write.
			_, err := tx.GetNamespace(ctx(t), ns.ID)
			return err
		})
		must(t, "InTx", err)
		_, err = h.Store.GetNamespace(ctx(t), ns.ID)
		must(t, "GetNamespace after commit", err)
	}},
	{"InTx/RollbackOnError", func(t *testing.T, h Harness) {
		ns := newNamespace(1)
		err := h.Store.InTx(ctx(t), func(tx store.Store) error {
			must(t, "CreateNamespace in tx", tx.CreateNamespace(ctx(t), ns))
			return errAbort
		})
		if !errors.Is(err, errAbort) {
			t.Errorf("InTx() = %v, want the error returned by fn", err)
		}
		_, err = h.Store.GetNamespace(ctx(t), ns.ID)
		wantErr(t, "GetNamespace after rollback", err, errkind.NotFound, "")
	}},
	{"InTx/RollbackOnPanic", func(t *testing.T, h Harness) {
		ns := newNamespace(1)
		func() {
			defer func() {
				if r := recover(); r != "boom" {
					t.Errorf("recovered %v, want the panic of fn to propagate", r)
				}
			}()
			_ = h.Store.InTx(ctx(t), func(tx store.Store) error {
				must(t, "CreateNamespace in tx", tx.CreateNamespace(ctx(t), ns))
				panic("boom")
			})
		}()
		_, err := h.Store.GetNamespace(ctx(t), ns.ID)
		wantErr(t, "GetNamespace after a panic in fn", err, errkind.NotFound, "")
		// The store is still usable: the connection went back to the pool.
		must(t, "CreateNamespace after the panic", h.Store.CreateNamespace(ctx(t), ns))
	}},
	{"InTx/NestedJoinsOuter", func(t *testing.T, h Harness) {
		outer, inner := newNamespace(1), newNamespace(2)
		err := h.Store.InTx(ctx(t), func(tx store.Store) error {
			must(t, "CreateNamespace outer", tx.CreateNamespace(ctx(t), outer))
			err := tx.InTx(ctx(t), func(tx2 store.Store) error {
				// The nested transaction sees the outer one's writes.
				if _, err := tx2.GetNamespace(ctx(t), outer.ID); err != nil {
					return err
				}
				return tx2.CreateNamespace(ctx(t), inner)
			})
			must(t, "nested InTx", err)
			// The nested call did not commit on its own: other connections
			// see nothing yet.
			if n := rawCount(t, h, `SELECT count(*) FROM namespaces`); n != 0 {
				t.Errorf("other sessions see %d namespaces before the outer commit, want 0", n)
			}
			return errAbort
		})
		if !errors.Is(err, errAbort) {
			t.Fatalf("InTx() = %v, want errAbort", err)
		}
		for _, ns := range []store.Namespace{outer, inner} {
			_, err := h.Store.GetNamespace(ctx(t), ns.ID)
			wantErr(t, "GetNamespace "+ns.Name+" after the outer rollback", err, errkind.NotFound, "")
		}
	}},
	{"InTx/NestedErrorReachesOuter", func(t *testing.T, h Harness) {
		ns := newNamespace(1)
		err := h.Store.InTx(ctx(t), func(tx store.Store) error {
			must(t, "CreateNamespace", tx.CreateNamespace(ctx(t), ns))
			return tx.InTx(ctx(t), func(tx2 store.Store) error { return errAbort })
		})
		if !errors.Is(err, errAbort) {
			t.Fatalf("InTx() = %v, want the nested error", err)
		}
		_, err = h.Store.GetNamespace(ctx(t), ns.ID)
		wantErr(t, "GetNamespace after a nested failure", err, errkind.NotFound, "")
	}},
	{"InTx/MultiStatementMethodsJoin", func(t *testing.T, h Harness) {
		// CreateAgent runs its own transaction; inside InTx it must join the
		// caller's, so a later failure removes the Agent and its setup too.
		f := newFixture(t, h)
		cfg := f.configuration(f.namespace())
		a := f.newAgent(cfg)
		ws := pendingSetup(a)
		err := h.Store.InTx(ctx(t), func(tx store.Store) error {
			must(t, "CreateAgent in tx", tx.CreateAgent(ctx(t), a, &ws))
			return errAbort
		})
		if !errors.Is(err, errAbort) {
			t.Fatalf("InTx() = %v, want errAbort", err)
		}
		_, err = h.Store.GetAgent(ctx(t), a.NamespaceID, a.ID)
		wantErr(t, "GetAgent after rollback", err, errkind.NotFound, "")
		_, err = h.Store.GetWorkspaceSetup(ctx(t), a.NamespaceID, a.ID)
		wantErr(t, "GetWorkspaceSetup after rollback", err, errkind.NotFound, "")
	}},
	{"InTx/ConcurrentWriters", func(t *testing.T, h Harness) {
		// Concurrent read-then-write transactions must all succeed: SQLite
		// queues writers instead of failing with SQLITE_BUSY.
		f := newFixture(t, h)
		ns := f.namespace()
		const writers = 12
		var wg sync.WaitGroup
		errs := make(chan error, writers)
		for i := 0; i < writers; i++ {
			wg.Add(1)
			go func(i int) {
				defer wg.Done()
				errs <- h.Store.InTx(ctx(t), func(tx store.Store) error {
					if _, err := tx.GetNamespace(ctx(t), ns.ID); err != nil {
						return err
					}
					c := store.Configuration{
						ID: ids.New(ids.Configuration), NamespaceID: ns.ID, Name: fmt.Sprintf("c-%d", i),
						Kind: store.ConfigurationKindAgent, Document: []byte(`{}`), Generation: 1,
						CreatedAt: at(100 + i), UpdatedAt: at(100 + i),
					}
					if err := tx.CreateConfiguration(ctx(t), c); err != nil {
						return err
					}
					return tx.AppendAuditEvent(ctx(t), auditEvent(100+i))
				})
			}(i)
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			must(t, "concurrent InTx", err)
		}
		page, err := h.Store.ListConfigurations(ctx(t), ns.ID, store.PageRequest{Limit: store.MaxPageSize})
		must(t, "ListConfigurations", err)
		if list := page.Items; len(list) != writers {
			t.Errorf("ListConfigurations() has %d entries, want %d", len(list), writers)
		}
	}},
}
