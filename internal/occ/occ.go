// Package occ owns OCC's domain operations: what it means to create a
// Namespace, change a Configuration, grant a role or issue a service key.
// Handlers call it after decoding a request; it validates input, calls the
// authorizing store (every access is checked there, never here) and
// records audit events for successful changes.
//
// Failure semantics: validation errors are errkind.Invalid with field
// details; store errors pass through unchanged (NotFound, Conflict,
// PermissionDenied). A change whose audit record cannot be written fails
// the call, except where a function's comment says otherwise.
package occ

import (
	"context"
	"github.com/openclaw/occ/internal/authz"
	"regexp"
	"time"

	"github.com/openclaw/occ/internal/audit"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// Service is the domain API. Its store must be the authorizing wrapper.
type Service struct {
	store    store.Store
	audit    *audit.Recorder
	now      func() time.Time
	driverID string
	files    FileAccess
}

// New returns a Service over the authorizing store s. driverID names the
// Compute driver new revisions are deployed with.
func New(s store.Store, rec *audit.Recorder, now func() time.Time, driverID string) *Service {
	if now == nil {
		now = time.Now
	}
	return &Service{store: s, audit: rec, now: now, driverID: driverID}
}

func (s *Service) clock() time.Time { return s.now().UTC().Truncate(time.Microsecond) }

// nameRE is a DNS label (RFC 1123), the convention of Kubernetes names, so
// a Namespace or Agent name can become part of a runtime object's name.
var nameRE = regexp.MustCompile(`^[a-z0-9]([-a-z0-9]*[a-z0-9])?$`)

// MaxNameLen is the longest resource name.
const MaxNameLen = 63

// validateName checks a resource name at JSON pointer path.
func validateName(path, name string) error {
	switch {
	case name == "":
		return errkind.InvalidDetails("The name is required.", errkind.Detail{Path: path, Code: errkind.DetailRequired})
	case len(name) > MaxNameLen:
		return errkind.InvalidDetails("The name must be at most 63 characters.", errkind.Detail{Path: path, Code: errkind.DetailTooLong})
	case !nameRE.MatchString(name):
		return errkind.InvalidDetails("The name must be lowercase letters, digits and '-', starting and ending with a letter or digit.",
			errkind.Detail{Path: path, Code: errkind.DetailInvalidFormat})
	}
	return nil
}

// authorize checks (action, res) on the transaction's authorizing store
// (the operation's own permission, before it looks anything else up).
func authorize(ctx context.Context, tx store.Store, action store.Action, res authz.Resource) error {
	az, ok := tx.(*authz.Store)
	if !ok {
		return errkind.New(errkind.Internal, "service store is not the authorizing store")
	}
	return az.Authorize(ctx, action, res)
}

// requireAdmin checks installation administer before an administrative
// operation looks anything up.
func requireAdmin(ctx context.Context, tx store.Store) error {
	return authorize(ctx, tx, store.ActionAdminister, authz.Installation)
}

// enqueue queues work in tx on behalf of the caller, available now.
func enqueue(ctx context.Context, tx store.Store, w store.WorkItem, now time.Time) (store.WorkItem, error) {
	w.ID = ids.New(ids.WorkItem)
	w.ActorID = actorID(ctx)
	w.State = store.WorkQueued
	w.AvailableAt, w.CreatedAt, w.UpdatedAt = now, now, now
	return tx.EnqueueWork(ctx, w)
}
