package authz

import (
	"context"
	"fmt"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// Resource identifies what an action is performed on. For a Namespace,
// ID and NamespaceID are both the Namespace id. For something about to be
// created, ID is empty and NamespaceID names where it will live. AgentID is
// set for agent revisions so that a binding on the exact Agent covers them.
type Resource struct {
	Kind        store.ResourceKind
	ID          string
	NamespaceID string
	AgentID     string
}

// Installation is the resource for installation-wide checks.
var Installation = Resource{Kind: store.KindInstallation}

// NamespaceResource returns the resource for Namespace id.
func NamespaceResource(id string) Resource {
	return Resource{Kind: store.KindNamespace, ID: id, NamespaceID: id}
}

// Decision is the outcome of one check. Evidence lists what decided it,
// for audit records.
type Decision struct {
	Allowed bool
	// Restricted is true when a deny restriction decided the outcome.
	Restricted bool
	// OutOfScope is true when a Namespace-scoped subject addressed
	// something outside its Namespace.
	OutOfScope bool
	// WrongCredential is true when the action is refused to the kind of
	// credential used, whatever its grants (a service key creating a user
	// account).
	WrongCredential bool
	BindingIDs      []string
	Restriction     string
}

// access is one subject's grants and restrictions, loaded once and then
// evaluated in memory for any number of resources (list filtering).
type access struct {
	subject      *Subject
	grants       []store.Grant
	restrictions []store.Restriction
}

// load returns the subject's grants and restrictions: memoized in ctx
// (see accessMemo) when a check of this request already read them,
// otherwise read straight from the unwrapped store (the authorizer is the
// layer below the check) and memoized. A failed read is not memoized.
func load(ctx context.Context, inner store.Store, s *Subject) (*access, error) {
	if s.Kind == KindSystem {
		return &access{subject: s}, nil
	}
	m := memoFrom(ctx)
	if m == nil {
		return read(ctx, inner, s)
	}
	// Held across the read: concurrent checks of one request wait for the
	// first read instead of repeating it.
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.acc != nil && m.acc.subject == s {
		return m.acc, nil
	}
	a, err := read(ctx, inner, s)
	if err != nil {
		return nil, err
	}
	m.acc = a
	return a, nil
}

// read loads s's grants and restrictions from inner, in one read.
func read(ctx context.Context, inner store.Store, s *Subject) (*access, error) {
	acc, err := inner.ListAccess(ctx, s.ID)
	if err != nil {
		return nil, fmt.Errorf("authz: load grants and restrictions: %w", err)
	}
	return &access{subject: s, grants: acc.Grants, restrictions: acc.Restrictions}, nil
}

// decide evaluates (action, res). Restrictions win over grants; a
// Namespace-scoped subject never reaches outside its Namespace.
func (a *access) decide(action store.Action, res Resource) Decision {
	return a.check(action, res, true)
}

// allows is decide(action, res).Allowed, for the checks that need no
// reasons (every item of a list): it stops at the first grant that covers
// res and collects no binding ids, so it allocates nothing.
func (a *access) allows(action store.Action, res Resource) bool {
	return a.check(action, res, false).Allowed
}

// check is decide; without reasons it returns at the first covering
// grant, with no BindingIDs.
func (a *access) check(action store.Action, res Resource, reasons bool) Decision {
	s := a.subject
	if s.Kind == KindSystem {
		return Decision{Allowed: true}
	}
	if s.NamespaceID != "" && res.NamespaceID != s.NamespaceID {
		return Decision{OutOfScope: true}
	}
	for _, r := range a.restrictions {
		if r.Action == action && r.ResourceKind == res.Kind && covers(r.NamespaceID, r.ResourceKind, r.ResourceID, res) {
			return Decision{Restricted: true, Restriction: r.ID}
		}
	}
	var d Decision
	for _, g := range a.grants {
		if !hasPermission(g.Permissions, action, res.Kind) {
			continue
		}
		b := g.Binding
		if covers(b.NamespaceID, b.ResourceKind, b.ResourceID, res) {
			d.Allowed = true
			if !reasons {
				return d
			}
			d.BindingIDs = append(d.BindingIDs, b.ID)
		}
	}
	return d
}

func hasPermission(ps []store.Permission, action store.Action, kind store.ResourceKind) bool {
	for _, p := range ps {
		if p.Action == action && p.ResourceKind == kind {
			return true
		}
	}
	return false
}

// covers reports whether a binding or restriction scope includes res:
// an exact resource scope matches that resource (an exact Agent also covers
// its revisions, and an exact Namespace everything in it); a Namespace scope
// matches everything in that Namespace; no scope matches everything.
func covers(nsScope string, kind store.ResourceKind, id string, res Resource) bool {
	switch {
	case id != "":
		switch {
		case kind == res.Kind && id == res.ID:
			return true
		case kind == store.KindAgent && res.Kind == store.KindAgentRevision && id == res.AgentID:
			return true
		case kind == store.KindNamespace && id == res.NamespaceID:
			return true
		}
		return false
	case nsScope != "":
		return res.NamespaceID == nsScope
	default:
		return true
	}
}

// visibility returns the resource whose read permission decides whether a
// denied caller is told 403 (it can see the target) or 404 (it cannot).
// For a create, that is the Namespace it would be created in; installation
// resources are always visible.
func visibility(action store.Action, res Resource) (Resource, bool) {
	switch {
	case res.Kind == store.KindInstallation:
		return Resource{}, false
	case action == store.ActionCreate && res.ID == "":
		if res.NamespaceID == "" {
			return Resource{}, false
		}
		return NamespaceResource(res.NamespaceID), true
	case res.Kind == store.KindAgentRevision:
		return Resource{Kind: store.KindAgent, ID: res.AgentID, NamespaceID: res.NamespaceID}, true
	default:
		return res, true
	}
}

// errDenied builds the error for a denied check: NotFound when the caller
// may not even read the target, PermissionDenied otherwise.
func errDenied(visible bool) error {
	if !visible {
		return errkind.New(errkind.NotFound, "The requested resource was not found.")
	}
	return errkind.New(errkind.PermissionDenied, "You do not have permission to perform this action.")
}

// errUnauthenticated is returned when no subject is in the context.
var errUnauthenticated = errkind.New(errkind.Unauthenticated, "Authentication is required.")

// readsSomeAgentIn reports whether a grant on an exact Agent of the
// Namespace lets the subject read that Agent (restrictions applied). Only
// such grants let a subject without Namespace read list Agents there;
// Agent-scoped bindings always name their Namespace.
func (a *access) readsSomeAgentIn(namespaceID string) bool {
	for _, g := range a.grants {
		b := g.Binding
		if b.ResourceKind != store.KindAgent || b.ResourceID == "" || b.NamespaceID != namespaceID {
			continue
		}
		if a.allows(store.ActionRead, Resource{Kind: store.KindAgent, ID: b.ResourceID, NamespaceID: namespaceID}) {
			return true
		}
	}
	return false
}
