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
		if bindingCovers(g.Binding, res) {
			d.Allowed = true
			if !reasons {
				return d
			}
			d.BindingIDs = append(d.BindingIDs, g.Binding.ID)
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

// bindingCovers is covers for a grant, which never reaches outside the
// Namespace its binding names: a binding on an exact resource with a
// namespaceId covers that resource only while it lives in that Namespace.
// Without this, a Namespace's role bound "in Namespace A" on the id of a
// service principal of Namespace B (ids do not say where they live) would
// reach into B. Restrictions keep matching their exact resource wherever it
// lives (covers alone): a deny that matches more is the safe side.
func bindingCovers(b store.AccessBinding, res Resource) bool {
	if b.ResourceID != "" && b.NamespaceID != "" && res.NamespaceID != b.NamespaceID {
		return false
	}
	return covers(b.NamespaceID, b.ResourceKind, b.ResourceID, res)
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

// readsAgentsIn reports whether some grant lets the subject read Agents
// of the Namespace (restrictions applied), decided from the grants alone:
// a grant of Agent read whose scope covers the Namespace (installation-wide,
// Namespace-wide, or on the exact Namespace) unless a restriction denies
// Agent read across the Namespace, or a grant on an exact Agent there whose
// Agent the subject may read. Only such grants let a subject without
// Namespace read list Agents there. Agent-scoped bindings always name
// their Namespace.
func (a *access) readsAgentsIn(namespaceID string) bool {
	// No id: matched by grants and restrictions whose scope is the whole
	// Namespace or wider, not by those on one exact Agent.
	if a.allows(store.ActionRead, Resource{Kind: store.KindAgent, NamespaceID: namespaceID}) {
		return true
	}
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

// readsAnyOf reports whether any grant of the subject holds read on kind,
// whatever its scope: when none does, a list of kind shows nothing and
// need not read a row.
func (a *access) readsAnyOf(kind store.ResourceKind) bool {
	if a.subject.Kind == KindSystem {
		return true
	}
	for _, g := range a.grants {
		if hasPermission(g.Permissions, store.ActionRead, kind) {
			return true
		}
	}
	return false
}

// coversGrant reports whether the subject holds everything g gives: for
// each permission of g's role, the same action on the binding's whole
// scope. Being allowed on the scope as a whole (grantScope) is not enough:
// a check on "Agents in Namespace A" matches the subject's restrictions on
// all of A or wider, never one on an exact Agent X of A, so an issuer
// denied delete on X could hand a key holding delete on all of A (X
// included). Hence also: none of the subject's restrictions on that action
// and kind lies inside the scope.
func (a *access) coversGrant(g store.Grant) bool {
	b := g.Binding
	for _, p := range g.Permissions {
		if !a.allows(p.Action, grantScope(b, p.ResourceKind)) {
			return false
		}
		for _, r := range a.restrictions {
			if r.Action == p.Action && r.ResourceKind == p.ResourceKind && restrictionWithin(r, b) {
				return false
			}
		}
	}
	return true
}

// grantScope is the resource a binding's permission on kind reaches as a
// whole: kind in the binding's Namespace (or everywhere), the exact
// resource when the binding names one of that kind, and the Namespace
// itself for a Namespace permission bound in a Namespace.
func grantScope(b store.AccessBinding, kind store.ResourceKind) Resource {
	res := Resource{Kind: kind, NamespaceID: b.NamespaceID}
	if b.ResourceID != "" && b.ResourceKind == kind {
		res.ID = b.ResourceID
	}
	if kind == store.KindNamespace && b.NamespaceID != "" {
		res.ID = b.NamespaceID
	}
	return res
}

// restrictionWithin reports whether the region r denies lies inside b's
// scope (r's action and kind are the caller's to compare). Scopes nest
// (installation, Namespace, exact resource), so a restriction as wide as
// the scope or wider is already found by checking the scope itself; this
// finds the narrower ones. A restriction on an exact revision counts as
// inside a binding on an exact Agent of its Namespace: which Agent the
// revision belongs to is not known here, and refusing is the safe side.
func restrictionWithin(r store.Restriction, b store.AccessBinding) bool {
	switch {
	case b.NamespaceID == "" && b.ResourceID == "":
		return true // installation-wide: everything is inside
	case b.ResourceID == "" || b.ResourceKind == store.KindNamespace:
		return r.NamespaceID == b.NamespaceID // the Namespace, all of it
	case r.ResourceID == "" || r.NamespaceID != b.NamespaceID:
		return false // wider than one resource (checked on the scope), or elsewhere
	case r.ResourceKind == b.ResourceKind:
		return r.ResourceID == b.ResourceID
	default:
		return b.ResourceKind == store.KindAgent && r.ResourceKind == store.KindAgentRevision
	}
}
