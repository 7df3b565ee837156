package occ

import (
	"context"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// Audit actions for Namespaces.
const (
	ActionNamespaceCreate = "openclaw.namespaces.create"
	ActionNamespaceDelete = "openclaw.namespaces.delete"
)

// CreateNamespace creates a Namespace in status provisioning; the worker
// makes it ready through the Compute driver.
func (s *Service) CreateNamespace(ctx context.Context, name string) (store.Namespace, error) {
	if err := validateName("/name", name); err != nil {
		return store.Namespace{}, err
	}
	now := s.clock()
	ns := store.Namespace{ID: ids.New(ids.Namespace), Name: name, Status: store.NamespaceProvisioning, CreatedAt: now, UpdatedAt: now}
	err := s.store.InTx(ctx, func(tx store.Store) error {
		if err := tx.CreateNamespace(ctx, ns); err != nil {
			return err
		}
		if _, err := enqueue(ctx, tx, store.WorkItem{Kind: store.WorkNamespaceReconcile, IdempotencyKey: ns.ID + ":reconcile", NamespaceID: ns.ID}, now); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionNamespaceCreate, resNamespace(ns.ID), map[string]string{"name": name})
	})
	return ns, err
}

// GetNamespace returns a visible Namespace.
func (s *Service) GetNamespace(ctx context.Context, id string) (store.Namespace, error) {
	return s.store.GetNamespace(ctx, id)
}

// ListNamespaces returns one page of the Namespaces the caller may read.
func (s *Service) ListNamespaces(ctx context.Context, q PageQuery) (Page[store.Namespace], error) {
	p, err := q.request()
	if err != nil {
		return Page[store.Namespace]{}, err
	}
	page, err := s.store.ListNamespaces(ctx, p)
	if err != nil {
		return Page[store.Namespace]{}, err
	}
	return fromStorePage(page), nil
}

// DeleteNamespace starts deleting an empty Namespace (409
// NAMESPACE_NOT_EMPTY while it holds Agents or Configurations): its status
// becomes deleting and the worker tears it down through the driver, then
// removes it. Repeating the call is idempotent.
func (s *Service) DeleteNamespace(ctx context.Context, id string) (store.Namespace, error) {
	var ns store.Namespace
	err := s.store.InTx(ctx, func(tx store.Store) error {
		cur, err := tx.GetNamespace(ctx, id)
		if err != nil {
			return err
		}
		now := s.clock()
		if ns, err = tx.MarkNamespaceDeleting(ctx, id, now); err != nil {
			return err
		}
		queued, err := queueDelete(ctx, tx, store.WorkItem{Kind: store.WorkNamespaceDelete, IdempotencyKey: id + ":delete", NamespaceID: id}, now)
		if err != nil {
			return err
		}
		if !queued {
			return nil // already deleting, its teardown queued or running
		}
		return s.audit.Mutation(ctx, tx, ActionNamespaceDelete, resNamespace(id), map[string]string{"name": cur.Name})
	})
	return ns, err
}

func resNamespace(id string) store.AuditResource {
	return store.AuditResource{Kind: store.KindNamespace, ID: id, NamespaceID: id}
}
