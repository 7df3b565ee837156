package worker

import (
	"context"
	"time"

	"github.com/openclaw/occ/internal/store"
)

// boundedStore is the store a reconcile pass reads and writes through:
// each call gets StoreTimeout unless the caller's deadline is sooner. The
// pass's own context ends only with the lease, which the renewal keeps
// alive, so without this a database that stops answering (a PostgreSQL
// server gone silent, say) would hold the item until the liveness probe
// ended the process. A call that runs out fails like any store error: the
// pass is retried. A transaction is bounded as a whole.
//
// It has exactly the methods the passes call. The passes reach the store
// only through it (Worker.rs); the unbounded store (Worker.store) is for
// the queue's own calls (claim, renew, record), which set their own
// deadlines.
type boundedStore struct {
	inner   store.Store
	timeout time.Duration
}

func (b boundedStore) bound(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, b.timeout)
}

// InTx bounds the transaction as a whole: fn gets the bounded context and
// must pass it to every statement, since a statement that ran on a longer
// one would hold the rollback (database/sql waits for the statement to
// return before it rolls back) past the bound.
func (b boundedStore) InTx(ctx context.Context, fn func(ctx context.Context, tx store.Store) error) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.inner.InTx(ctx, func(tx store.Store) error { return fn(ctx, tx) })
}

// AllRevisions lists every revision of the Agent, the pages together
// within one bound.
func (b boundedStore) AllRevisions(ctx context.Context, namespaceID, agentID string) ([]store.Revision, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return store.AllRevisions(ctx, b.inner, namespaceID, agentID)
}

func (b boundedStore) GetNamespace(ctx context.Context, id string) (store.Namespace, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.inner.GetNamespace(ctx, id)
}

func (b boundedStore) UpdateNamespaceStatus(ctx context.Context, id string, status store.NamespaceStatus, at time.Time) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.inner.UpdateNamespaceStatus(ctx, id, status, at)
}

func (b boundedStore) GetAgent(ctx context.Context, namespaceID, id string) (store.Agent, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.inner.GetAgent(ctx, namespaceID, id)
}

func (b boundedStore) GetRevision(ctx context.Context, namespaceID, agentID, id string) (store.Revision, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.inner.GetRevision(ctx, namespaceID, agentID, id)
}

func (b boundedStore) GetWorkspaceSetup(ctx context.Context, namespaceID, agentID string) (store.WorkspaceSetup, error) {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.inner.GetWorkspaceSetup(ctx, namespaceID, agentID)
}

func (b boundedStore) ActivateRevision(ctx context.Context, a store.Activation) error {
	ctx, cancel := b.bound(ctx)
	defer cancel()
	return b.inner.ActivateRevision(ctx, a)
}
