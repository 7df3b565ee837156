package occ

import (
	"context"
	"time"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// ActionNamespaceReconcile is the audit action of a reconciliation request.
const ActionNamespaceReconcile = "openclaw.namespaces.reconcile"

// Reconciliation is the status of one Namespace reconciliation, read from
// its work item. Its wire form is apitypes.Reconciliation.
type Reconciliation struct {
	ID          string
	NamespaceID string
	Status      string
	Error       *DeploymentError
	Progress    *DeploymentProgress
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// ReconcileNamespace queues a reconciliation of a ready Namespace against
// the current installation configuration (installation administer; 409
// NAMESPACE_NOT_READY for a Namespace that is not ready). Each call queues
// its own; the worker runs them through the driver.
func (s *Service) ReconcileNamespace(ctx context.Context, id string) (Reconciliation, error) {
	var out Reconciliation
	err := s.store.InTx(ctx, func(tx store.Store) error {
		if err := requireAdmin(ctx, tx); err != nil {
			return err
		}
		ns, err := tx.GetNamespace(ctx, id)
		if err != nil {
			return err
		}
		out, err = s.queueReconcile(ctx, tx, ns)
		return err
	})
	return out, err
}

// ReconcileAllNamespaces queues a reconciliation of every ready Namespace
// (installation administer); the others are left out.
func (s *Service) ReconcileAllNamespaces(ctx context.Context) ([]Reconciliation, error) {
	out := []Reconciliation{}
	err := s.store.InTx(ctx, func(tx store.Store) error {
		if err := requireAdmin(ctx, tx); err != nil {
			return err
		}
		return eachNamespace(ctx, tx, func(ns store.Namespace) error {
			if ns.Status != store.NamespaceReady {
				return nil
			}
			r, err := s.queueReconcile(ctx, tx, ns)
			if err != nil {
				return err
			}
			out = append(out, r)
			return nil
		})
	})
	return out, err
}

func (s *Service) queueReconcile(ctx context.Context, tx store.Store, ns store.Namespace) (Reconciliation, error) {
	if ns.Status != store.NamespaceReady {
		return Reconciliation{}, errkind.WithCode(errkind.Conflict, errkind.CodeNamespaceNotReady, "The Namespace is not ready; only a ready Namespace is reconciled.")
	}
	now := s.clock()
	w, err := enqueue(ctx, tx, store.WorkItem{Kind: store.WorkNamespaceRepair,
		IdempotencyKey: ns.ID + ":repair:" + ids.New(ids.WorkItem), NamespaceID: ns.ID}, now)
	if err != nil {
		return Reconciliation{}, err
	}
	if err := s.audit.Mutation(ctx, tx, ActionNamespaceReconcile, resNamespace(ns.ID), map[string]string{"name": ns.Name}); err != nil {
		return Reconciliation{}, err
	}
	return reconciliationFrom(w, now), nil
}

// GetReconciliation reports a reconciliation of the Namespace (read on the
// Namespace).
func (s *Service) GetReconciliation(ctx context.Context, namespaceID, id string) (Reconciliation, error) {
	if _, err := s.store.GetNamespace(ctx, namespaceID); err != nil {
		return Reconciliation{}, err
	}
	w, err := s.store.GetWork(ctx, id)
	if err == nil && (w.Kind != store.WorkNamespaceRepair || w.NamespaceID != namespaceID) {
		err = errkind.New(errkind.NotFound, "The requested resource was not found.")
	}
	if err != nil {
		return Reconciliation{}, err
	}
	return reconciliationFrom(w, s.clock()), nil
}

func reconciliationFrom(w store.WorkItem, now time.Time) Reconciliation {
	d := deploymentFrom(store.Revision{NamespaceID: w.NamespaceID, CreatedAt: w.CreatedAt}, w, now)
	return Reconciliation{ID: w.ID, NamespaceID: w.NamespaceID, Status: d.Status, Error: d.Error, Progress: d.Progress,
		CreatedAt: w.CreatedAt, UpdatedAt: w.UpdatedAt}
}
