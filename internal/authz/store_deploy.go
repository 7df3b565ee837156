package authz

import (
	"context"
	"time"

	"github.com/openclaw/occ/internal/store"
)

// --- agents: one permission per intent ---

func (w *Store) UpdateAgent(ctx context.Context, a store.Agent) (store.Agent, error) {
	if err := w.gate(ctx, "UpdateAgent", store.ActionUpdate, agentResource(a.NamespaceID, a.ID)); err != nil {
		return store.Agent{}, err
	}
	if a.ConfigurationID != "" {
		if err := w.gate(ctx, "UpdateAgent", store.ActionRead, cfgResource(a.NamespaceID, a.ConfigurationID)); err != nil {
			return store.Agent{}, err
		}
	}
	return w.inner.UpdateAgent(ctx, a)
}

// SetAgentRuntimeState needs deploy to ask for running and operate to ask
// for stopped. The worker (system) may set either.
func (w *Store) SetAgentRuntimeState(ctx context.Context, namespaceID, id string, state store.RuntimeState, at time.Time) (store.Agent, error) {
	action := store.ActionOperate
	if state == store.RuntimeRunning {
		action = store.ActionDeploy
	}
	if err := w.gate(ctx, "SetAgentRuntimeState", action, agentResource(namespaceID, id)); err != nil {
		return store.Agent{}, err
	}
	return w.inner.SetAgentRuntimeState(ctx, namespaceID, id, state, at)
}

func (w *Store) MarkAgentDeleting(ctx context.Context, namespaceID, id, actorID string, at time.Time) (store.Agent, error) {
	if err := w.gate(ctx, "MarkAgentDeleting", store.ActionDelete, agentResource(namespaceID, id)); err != nil {
		return store.Agent{}, err
	}
	return w.inner.MarkAgentDeleting(ctx, namespaceID, id, actorID, at)
}

// DeleteAgent is the end of teardown, which only the worker performs.
func (w *Store) DeleteAgent(ctx context.Context, namespaceID, id string) error {
	if err := w.gateSystemOnly(ctx, "DeleteAgent"); err != nil {
		return err
	}
	return w.inner.DeleteAgent(ctx, namespaceID, id)
}

// --- revisions ---

func revResource(ns, agentID, id string) Resource {
	return Resource{Kind: store.KindAgentRevision, ID: id, NamespaceID: ns, AgentID: agentID}
}

// CreateRevision is part of deploying: it needs deploy on the Agent.
func (w *Store) CreateRevision(ctx context.Context, r store.Revision) (store.Revision, error) {
	if err := w.gate(ctx, "CreateRevision", store.ActionDeploy, agentResource(r.NamespaceID, r.AgentID)); err != nil {
		return store.Revision{}, err
	}
	return w.inner.CreateRevision(ctx, r)
}

func (w *Store) GetRevision(ctx context.Context, namespaceID, agentID, id string) (store.Revision, error) {
	if err := w.gate(ctx, "GetRevision", store.ActionRead, revResource(namespaceID, agentID, id)); err != nil {
		return store.Revision{}, err
	}
	r, err := w.inner.GetRevision(ctx, namespaceID, agentID, id)
	if err != nil {
		return store.Revision{}, err
	}
	revs, err := w.withoutUnreadableConfigurations(ctx, []store.Revision{r})
	if err != nil {
		return store.Revision{}, err
	}
	return revs[0], nil
}

func (w *Store) ListRevisions(ctx context.Context, namespaceID, agentID string, p store.PageRequest) (store.Page[store.Revision], error) {
	if err := w.authenticated(ctx, "ListRevisions"); err != nil {
		return store.Page[store.Revision]{}, err
	}
	page, err := listVisible(ctx, w, "ListRevisions", store.KindAgentRevision, p,
		func(p store.PageRequest) (store.Page[store.Revision], error) {
			return w.inner.ListRevisions(ctx, namespaceID, agentID, p)
		},
		func(r store.Revision) Resource { return revResource(r.NamespaceID, r.AgentID, r.ID) },
		func(r store.Revision) store.PageCursor { return byCreation(r.CreatedAt, r.ID) })
	if err != nil {
		return store.Page[store.Revision]{}, err
	}
	page.Items, err = w.withoutUnreadableConfigurations(ctx, page.Items)
	return page, err
}

// withoutUnreadableConfigurations clears the configuration snapshot of
// each revision whose Configuration the subject may not read. Reading a
// revision needs read on the Agent's revisions, which a binding on the
// exact Agent grants; the snapshot is a copy of the Configuration, a
// resource of its own that such a binding does not cover (PATCH and deploy
// answer 404 for it), so the copy is not shown either. System subjects
// (the worker) keep it. revs is modified in place.
func (w *Store) withoutUnreadableConfigurations(ctx context.Context, revs []store.Revision) ([]store.Revision, error) {
	s := SubjectFrom(ctx)
	if s == nil || s.Kind == KindSystem || len(revs) == 0 {
		return revs, nil
	}
	acc, err := load(ctx, w.inner, s)
	if err != nil {
		return nil, err
	}
	for i, r := range revs {
		if !acc.allows(store.ActionRead, cfgResource(r.NamespaceID, r.ConfigurationID)) {
			revs[i].Configuration = nil
		}
	}
	return revs, nil
}

// --- work queue ---

// workPermission is the permission that queueing a kind of work needs: the
// same as the operation that queues it.
func workPermission(item store.WorkItem) (store.Action, Resource) {
	switch item.Kind {
	case store.WorkRevisionDeploy:
		return store.ActionDeploy, agentResource(item.NamespaceID, item.AgentID)
	case store.WorkAgentStop:
		return store.ActionOperate, agentResource(item.NamespaceID, item.AgentID)
	case store.WorkAgentDelete:
		return store.ActionDelete, agentResource(item.NamespaceID, item.AgentID)
	case store.WorkNamespaceReconcile:
		return store.ActionCreate, Resource{Kind: store.KindNamespace}
	case store.WorkNamespaceDelete:
		return store.ActionDelete, NamespaceResource(item.NamespaceID)
	case store.WorkNamespaceRepair:
		return store.ActionAdminister, Installation
	}
	return store.ActionAdminister, Installation
}

func (w *Store) EnqueueWork(ctx context.Context, item store.WorkItem) (store.WorkItem, error) {
	action, res := workPermission(item)
	if err := w.gate(ctx, "EnqueueWork", action, res); err != nil {
		return store.WorkItem{}, err
	}
	return w.inner.EnqueueWork(ctx, item)
}

// readWork authorizes reading a work item: revision work is the
// deployment status of an AgentRevision; other work reads as its Agent or
// Namespace.
func (w *Store) readWork(ctx context.Context, method string, item store.WorkItem) error {
	// Found by id or key alone: a Namespace key outside the item's
	// Namespace is told 404 (gateFound).
	switch {
	case item.RevisionID != "":
		return w.gateFound(ctx, method, store.ActionRead, revResource(item.NamespaceID, item.AgentID, item.RevisionID))
	case item.AgentID != "":
		return w.gateFound(ctx, method, store.ActionRead, agentResource(item.NamespaceID, item.AgentID))
	default:
		return w.gateFound(ctx, method, store.ActionRead, NamespaceResource(item.NamespaceID))
	}
}

func (w *Store) GetWork(ctx context.Context, id string) (store.WorkItem, error) {
	if err := w.authenticated(ctx, "GetWork"); err != nil {
		return store.WorkItem{}, err
	}
	item, err := w.inner.GetWork(ctx, id)
	if err != nil {
		return store.WorkItem{}, err
	}
	if s := SubjectFrom(ctx); s.Kind != KindSystem {
		if err := w.readWork(ctx, "GetWork", item); err != nil {
			return store.WorkItem{}, err
		}
	}
	return item, nil
}

func (w *Store) GetWorkByKey(ctx context.Context, key string) (store.WorkItem, error) {
	if err := w.authenticated(ctx, "GetWorkByKey"); err != nil {
		return store.WorkItem{}, err
	}
	item, err := w.inner.GetWorkByKey(ctx, key)
	if err != nil {
		return store.WorkItem{}, err
	}
	if s := SubjectFrom(ctx); s.Kind != KindSystem {
		if err := w.readWork(ctx, "GetWorkByKey", item); err != nil {
			return store.WorkItem{}, err
		}
	}
	return item, nil
}

func (w *Store) ClaimWork(ctx context.Context, c store.Claim) (store.WorkItem, bool, error) {
	if err := w.gateSystemOnly(ctx, "ClaimWork"); err != nil {
		return store.WorkItem{}, false, err
	}
	return w.inner.ClaimWork(ctx, c)
}

func (w *Store) RenewWork(ctx context.Context, id, token string, until time.Time) error {
	if err := w.gateSystemOnly(ctx, "RenewWork"); err != nil {
		return err
	}
	return w.inner.RenewWork(ctx, id, token, until)
}

func (w *Store) RetryWork(ctx context.Context, id, token string, availableAt time.Time, attempt store.WorkAttempt, counted bool) error {
	if err := w.gateSystemOnly(ctx, "RetryWork"); err != nil {
		return err
	}
	return w.inner.RetryWork(ctx, id, token, availableAt, attempt, counted)
}

func (w *Store) FinishWork(ctx context.Context, id, token string, state store.WorkState, reasonCode, message string, now time.Time) error {
	if err := w.gateSystemOnly(ctx, "FinishWork"); err != nil {
		return err
	}
	return w.inner.FinishWork(ctx, id, token, state, reasonCode, message, now)
}

// CancelAgentWork is part of deleting an Agent.
func (w *Store) CancelAgentWork(ctx context.Context, namespaceID, agentID string, kinds []string, now time.Time) (int64, error) {
	if s := SubjectFrom(ctx); s != nil && s.Kind == KindSystem {
		if err := w.systemGate(s, "CancelAgentWork"); err != nil {
			return 0, err
		}
	} else if err := w.gate(ctx, "CancelAgentWork", store.ActionDelete, agentResource(namespaceID, agentID)); err != nil {
		return 0, err
	}
	return w.inner.CancelAgentWork(ctx, namespaceID, agentID, kinds, now)
}

// ExpediteAgentWork is the worker's alone: a driver's readiness signal.
func (w *Store) ExpediteAgentWork(ctx context.Context, namespaceID, agentID string, now time.Time) (int64, error) {
	if err := w.gateSystemOnly(ctx, "ExpediteAgentWork"); err != nil {
		return 0, err
	}
	return w.inner.ExpediteAgentWork(ctx, namespaceID, agentID, now)
}

func (w *Store) ActivateRevision(ctx context.Context, a store.Activation) error {
	if err := w.gateSystemOnly(ctx, "ActivateRevision"); err != nil {
		return err
	}
	return w.inner.ActivateRevision(ctx, a)
}

func (w *Store) MarkNamespaceDeleting(ctx context.Context, id string, at time.Time) (store.Namespace, error) {
	if err := w.gate(ctx, "MarkNamespaceDeleting", store.ActionDelete, NamespaceResource(id)); err != nil {
		return store.Namespace{}, err
	}
	return w.inner.MarkNamespaceDeleting(ctx, id, at)
}
