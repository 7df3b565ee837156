// Package occ owns OCC's domain operations: what it means to create a
// Namespace, change a Configuration, grant a role or issue a service key.
// Handlers call it after decoding a request; it validates input, calls the
// authorizing store (every access is checked there, never here) and
// records audit events for successful changes. An operation on one
// existing Agent reads it with Store.GetAgentFor and the operation's own
// action, so it is decided on that Agent alone.
//
// Failure semantics: validation errors are errkind.Invalid with field
// details; store errors pass through unchanged (NotFound, Conflict,
// PermissionDenied). A change whose audit record cannot be written fails
// the call, except where a function's comment says otherwise.
package occ

import (
	"context"
	"regexp"
	"time"

	"github.com/openclaw/occ/internal/audit"
	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// authorizer is what the domain needs of the authorizing store besides its
// data methods: an operation's own permission checked exactly as a store
// call would check it (the 403/404 choice, the denial audit), and a
// side-effect-free decision for a check that is no single call (whether
// the caller holds a grant whole, for key issuance).
type authorizer interface {
	Authorize(ctx context.Context, action store.Action, res authz.Resource) error
	HoldsGrant(ctx context.Context, g store.Grant) (bool, error)
	MayCreateUser(ctx context.Context) error
}

// AuthorizingStore is the store the Service works on: the authorization
// layer's wrapper (authz.Store), whose transactions are wrapped the same
// way.
type AuthorizingStore interface {
	store.Store
	authorizer
}

// Service is the domain API.
type Service struct {
	store    AuthorizingStore
	audit    *audit.Recorder
	now      func() time.Time
	driverID string
	files    FileAccess
}

// Options are what a Service is built from.
type Options struct {
	// Store is the authorizing store; Audit records on it.
	Store AuthorizingStore
	Audit *audit.Recorder
	// Now is the clock (default time.Now).
	Now func() time.Time
	// DriverID names the Compute driver new revisions are deployed with.
	DriverID string
	// Files reaches running Agents' gateways; its zero value (no Client or
	// Driver) makes the workspace file operations answer unavailable.
	Files FileAccess
}

// New returns a Service built from o.
func New(o Options) *Service {
	if o.Now == nil {
		o.Now = time.Now
	}
	return &Service{store: o.Store, audit: o.Audit, now: o.Now, driverID: o.DriverID, files: o.Files}
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
	az, err := authorizerOf(tx)
	if err != nil {
		return err
	}
	return az.Authorize(ctx, action, res)
}

// authorizerOf returns the authorizer of a store the Service was handed:
// its own AuthorizingStore, or a transaction of it (which InTx hands on as
// a plain store.Store). Anything else is a wiring bug, refused as Internal
// rather than run unchecked.
func authorizerOf(tx store.Store) (authorizer, error) {
	az, ok := tx.(authorizer)
	if !ok {
		return nil, errkind.New(errkind.Internal, "service store is not the authorizing store")
	}
	return az, nil
}

// requireAdmin checks installation administer before an administrative
// operation looks anything up.
func requireAdmin(ctx context.Context, tx store.Store) error {
	return authorize(ctx, tx, store.ActionAdminister, authz.Installation)
}

// enqueue queues work in tx on behalf of the caller, available now.
// maxDeleteRequeues bounds the chain requeueDelete walks: each link is a
// delete that ended without deleting and was asked for again.
const maxDeleteRequeues = 1000

// queueDelete queues the teardown w (an Agent's or a Namespace's delete,
// whose IdempotencyKey is the base key) unless one is queued, running or
// has succeeded. A delete that ended without deleting (given up after its
// retries, or cancelled) is queued again under a key chained to it, so an
// Agent or Namespace left deleting with nothing queued is not stuck for
// good: repeating the delete request starts the teardown again. It
// reports whether it queued one.
func queueDelete(ctx context.Context, tx store.Store, w store.WorkItem, now time.Time) (bool, error) {
	base, key := w.IdempotencyKey, w.IdempotencyKey
	for range maxDeleteRequeues {
		prev, err := tx.GetWorkByKey(ctx, key)
		if errkind.Is(err, errkind.NotFound) {
			w.IdempotencyKey = key
			_, err := enqueue(ctx, tx, w, now)
			return err == nil, err
		}
		if err != nil {
			return false, err
		}
		if prev.State != store.WorkFailedPermanent && prev.State != store.WorkCancelled {
			return false, nil // queued, running, or done
		}
		key = base + ":" + prev.ID
	}
	return false, errkind.New(errkind.Conflict, "This resource's deletion was requested and given up too many times.")
}

func enqueue(ctx context.Context, tx store.Store, w store.WorkItem, now time.Time) (store.WorkItem, error) {
	w.ID = ids.New(ids.WorkItem)
	w.ActorID = actorID(ctx)
	w.State = store.WorkQueued
	w.AvailableAt, w.CreatedAt, w.UpdatedAt = now, now, now
	return tx.EnqueueWork(ctx, w)
}
