package authz

import (
	"context"
	"time"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// System subjects. Each background component runs as one of these, and
// each may call only the Store methods listed for it in systemMethods.
const (
	SystemAuthn     = "system:authn"
	SystemBootstrap = "system:bootstrap"
	SystemWorker    = "system:worker"
	SystemAudit     = "system:audit"
)

// SystemSubject returns the subject for a named system component.
func SystemSubject(name string) *Subject {
	return &Subject{ID: name, Kind: KindSystem, Credential: "system"}
}

// systemMethods is the smallest set of Store methods each system subject
// needs. A system subject calling anything else is refused.
// Audit records are appended as SystemAudit whoever writes them (package
// audit), so no other system subject needs AppendAuditEvent.
var systemMethods = map[string]map[string]bool{
	SystemAuthn: set("GetAPIKeyAccess", "GetSessionAccess", "GetUserByEmail",
		"CreateSession", "DeleteSession", "TouchSession", "TouchAPIKey"),
	SystemBootstrap: set("GetInstallation", "CreateInstallation", "CreateUser",
		"CreateRole", "CreateAccessBinding"),
	SystemAudit: set("AppendAuditEvent"),
	SystemWorker: set("GetNamespace", "UpdateNamespaceStatus", "DeleteNamespace",
		"GetAgent", "DeleteAgent", "GetRevision", "ListRevisions", "ClaimWork", "RenewWork", "RetryWork",
		"FinishWork", "ExpediteAgentWork", "ActivateRevision", "GetWorkspaceSetup"),
}

func set(names ...string) map[string]bool {
	m := make(map[string]bool, len(names))
	for _, n := range names {
		m[n] = true
	}
	return m
}

// DenialHook is told about every denied check so it can be audited. It
// must not fail the request; errors are its own to log.
type DenialHook func(ctx context.Context, s *Subject, action store.Action, res Resource, d Decision)

// Store wraps a store.Store and authorizes every call against the subject
// in the context. It is the only store handed to request handlers, domain
// code and workers; nothing above it holds the inner store.
type Store struct {
	inner  store.Store
	onDeny DenialHook
}

var _ store.Store = (*Store)(nil)

// Wrap returns the authorizing store over inner. onDeny may be nil.
func Wrap(inner store.Store, onDeny DenialHook) *Store {
	return &Store{inner: inner, onDeny: onDeny}
}

// Decide evaluates (action, res) for the subject in ctx without side
// effects and without auditing; domain code uses it for checks that have
// no single Store call (for example "the issuer holds every grant of the
// principal").
func (w *Store) Decide(ctx context.Context, action store.Action, res Resource) (Decision, error) {
	s := SubjectFrom(ctx)
	if s == nil {
		return Decision{}, errUnauthenticated
	}
	acc, err := load(ctx, w.inner, s)
	if err != nil {
		return Decision{}, err
	}
	return acc.decide(action, res), nil
}

// HoldsGrant reports whether the subject in ctx holds everything grant g
// gives (coversGrant): allowed each of its permissions on the binding's
// whole scope, and denied none of them anywhere inside that scope by a
// restriction. Key issuance uses it: a key must never carry more than its
// issuer could do. System subjects hold everything.
func (w *Store) HoldsGrant(ctx context.Context, g store.Grant) (bool, error) {
	s := SubjectFrom(ctx)
	if s == nil {
		return false, errUnauthenticated
	}
	acc, err := load(ctx, w.inner, s)
	if err != nil {
		return false, err
	}
	return acc.coversGrant(g), nil
}

// gate authorizes one call: anonymous callers are unauthenticated, system
// subjects are held to their method list, everyone else must be allowed
// (action, res). A denial answers 404 when the caller cannot read the
// target and 403 when it can; a Namespace-scoped key outside its Namespace
// gets 403, for res's Namespace is one the request named (its path or
// body).
func (w *Store) gate(ctx context.Context, method string, action store.Action, res Resource) error {
	return w.check(ctx, method, action, res, true)
}

// gateFound is gate for an object the caller named by its id alone and
// that was read before the check to learn where it lives (a service
// principal, a work item). A Namespace-scoped key denied because the
// object lies outside its Namespace gets 404, not gate's 403: the request
// named no other Namespace, the key can never see the object, and a 403
// would tell it that the id exists (a missing id answers 404).
func (w *Store) gateFound(ctx context.Context, method string, action store.Action, res Resource) error {
	return w.check(ctx, method, action, res, false)
}

// check is gate; namedNamespace says whether the request itself named
// res's Namespace, which decides the status of an out-of-Namespace denial.
func (w *Store) check(ctx context.Context, method string, action store.Action, res Resource, namedNamespace bool) error {
	s := SubjectFrom(ctx)
	if s == nil {
		return errUnauthenticated
	}
	if s.Kind == KindSystem {
		return w.systemGate(s, method)
	}
	acc, err := load(ctx, w.inner, s)
	if err != nil {
		return err
	}
	d := acc.decide(action, res)
	if d.Allowed {
		return nil
	}
	visible := true
	switch {
	case d.OutOfScope:
		// The reference answers 403 for a Namespace key used elsewhere:
		// the key's holder named the other Namespace, so knows it exists.
		// Not so for an object found by id alone (gateFound).
		visible = namedNamespace
	default:
		if vr, ok := visibility(action, res); ok {
			if action == store.ActionRead && vr == res {
				visible = false
			} else {
				visible = acc.allows(store.ActionRead, vr)
			}
		}
	}
	if w.onDeny != nil {
		w.onDeny(ctx, s, action, res, d)
	}
	return errDenied(visible)
}

func (w *Store) systemGate(s *Subject, method string) error {
	if systemMethods[s.ID][method] {
		return nil
	}
	return errkind.Newf(errkind.PermissionDenied, "system subject %s may not call %s", s.ID, method)
}

// self reports whether the context's subject is the given identity.
func self(ctx context.Context, id string) bool {
	s := SubjectFrom(ctx)
	return s != nil && s.Kind != KindSystem && s.ID == id
}

// keepAllowed returns the items acc may read, in order. When it may read
// them all (an administrator, a Namespace reader's page) that is items
// itself: copying a page it keeps whole was a page-sized allocation on
// every list request. Otherwise a new slice: items is never changed.
func keepAllowed[T any](acc *access, items []T, res func(T) Resource) []T {
	for i, it := range items {
		if acc.allows(store.ActionRead, res(it)) {
			continue
		}
		out := make([]T, i, len(items)-1)
		copy(out, items[:i])
		for _, it := range items[i+1:] {
			if acc.allows(store.ActionRead, res(it)) {
				out = append(out, it)
			}
		}
		return out
	}
	return items
}

// Paged lists. The store pages a list by position (PageCursor) and knows
// nothing of the caller; this layer leaves out what the caller may not
// read. A page's Next becomes the client's cursor, which the client can
// decode, so Next must never name an item the caller may not read. The
// store's Next names the last row of its page, visible or not: passing it
// on told a caller without any grant every Namespace id, one page of one
// at a time. visiblePage therefore fills a page from as many store pages
// as it takes and makes Next from the last item it returns, so a page
// never ends on a hidden item. A page is short only at the end of the
// list or when scanBudget stopped the reading.

// scanBudget bounds the rows one list request reads once it has an item to
// return: past it, the page is returned short, its Next naming its last
// item, and the next request reads on from there. Until a request has an
// item it reads on, up to the end of the list if need be: it has no
// position it may name to resume from.
const scanBudget = 4 * store.MaxPageSize

// visiblePage returns up to p.Limit items of list, in its order, that acc
// may read, after p.After. Hidden items are left out silently (not
// audited): a list is not an attempt on each item. Rows are read in store
// pages that start at p.Limit (a caller who may read everything reads
// exactly one store page, as before) and double up to store.MaxPageSize,
// so that a caller who sees few of many rows makes few round trips. Rows
// read past the page returned are read again by the next request. Next is
// the position of the last item returned, nil only when the list has no
// item after it that acc may read; key gives an item's position, as the
// store orders the list.
func visiblePage[T any](acc *access, p store.PageRequest, list func(store.PageRequest) (store.Page[T], error),
	res func(T) Resource, key func(T) store.PageCursor) (store.Page[T], error) {
	var out []T
	req := p
	read := 0
	for first := true; ; first = false {
		page, err := list(req)
		if err != nil {
			return store.Page[T]{}, err
		}
		kept := keepAllowed(acc, page.Items, res)
		if first && len(kept) == len(page.Items) && len(kept) <= p.Limit {
			// The first store page, kept whole: the store's Next names its
			// last item, which is returned (no copy, no more reading).
			return page, nil
		}
		out = append(out, kept...)
		read += len(page.Items)
		switch {
		case len(out) > p.Limit:
			// More visible items follow the ones returned.
			out = out[:p.Limit]
			return pageEndingAt(out, key), nil
		case len(out) == p.Limit && page.Next != nil, len(out) > 0 && page.Next != nil && read >= scanBudget:
			return pageEndingAt(out, key), nil
		case page.Next == nil:
			// The end of the list: nothing after the last item returned
			// (hidden rows after it are not "more").
			return store.Page[T]{Items: nonNil(out)}, nil
		}
		req.After = page.Next
		req.Limit = min(2*req.Limit, store.MaxPageSize)
	}
}

func pageEndingAt[T any](items []T, key func(T) store.PageCursor) store.Page[T] {
	next := key(items[len(items)-1])
	return store.Page[T]{Items: items, Next: &next}
}

func nonNil[T any](items []T) []T {
	if items == nil {
		return []T{}
	}
	return items
}

// listVisible is one page of a paged list for the subject in ctx: system
// subjects (held to method) get the store's page as it is; anyone else
// gets visiblePage's. A subject with no read grant on kind at all gets an
// empty last page without a row being read.
func listVisible[T any](ctx context.Context, w *Store, method string, kind store.ResourceKind, p store.PageRequest,
	list func(store.PageRequest) (store.Page[T], error), res func(T) Resource, key func(T) store.PageCursor) (store.Page[T], error) {
	s := SubjectFrom(ctx)
	if s == nil {
		return store.Page[T]{}, errUnauthenticated
	}
	if s.Kind == KindSystem {
		if err := w.systemGate(s, method); err != nil {
			return store.Page[T]{}, err
		}
		return list(p)
	}
	acc, err := load(ctx, w.inner, s)
	if err != nil {
		return store.Page[T]{}, err
	}
	if !acc.readsAnyOf(kind) {
		return store.Page[T]{Items: []T{}}, nil
	}
	return visiblePage(acc, p, list, res, key)
}

// byCreation is the position of an item in a list ordered by (CreatedAt,
// ID); revisions, ordered by number, are positioned by ID alone (the store
// seeks past the named revision's number) and carry their CreatedAt too.
func byCreation(createdAt time.Time, id string) store.PageCursor {
	return store.PageCursor{CreatedAt: createdAt, ID: id}
}

// authenticated requires any subject; system subjects need the method.
func (w *Store) authenticated(ctx context.Context, method string) error {
	s := SubjectFrom(ctx)
	if s == nil {
		return errUnauthenticated
	}
	if s.Kind == KindSystem {
		return w.systemGate(s, method)
	}
	return nil
}

func (w *Store) admin(ctx context.Context, method string) error {
	return w.gate(ctx, method, store.ActionAdminister, Installation)
}

// InTx runs fn in a transaction of the inner store, with fn's store wrapped
// in the same checks.
//
// Access memoized inside a transaction that changed grants may hold rows
// that were rolled back (or committed differently), so when fn forgot the
// memo it is forgotten again once the transaction is over.
func (w *Store) InTx(ctx context.Context, fn func(tx store.Store) error) error {
	gen := generation(ctx)
	err := w.inner.InTx(ctx, func(tx store.Store) error {
		return fn(&Store{inner: tx, onDeny: w.onDeny})
	})
	if generation(ctx) != gen {
		forget(ctx)
	}
	return err
}

func (w *Store) Close() error { return w.inner.Close() }

// --- installation, users, sessions ---

// GetInstallation needs installation read (bootstrap, its one caller
// today, is a system subject holding the method).
func (w *Store) GetInstallation(ctx context.Context) (store.Installation, error) {
	if err := w.gate(ctx, "GetInstallation", store.ActionRead, Installation); err != nil {
		return store.Installation{}, err
	}
	return w.inner.GetInstallation(ctx)
}

func (w *Store) CreateInstallation(ctx context.Context, in store.Installation) error {
	if err := w.gateSystemOnly(ctx, "CreateInstallation"); err != nil {
		return err
	}
	return w.inner.CreateInstallation(ctx, in)
}

// gateSystemOnly refuses every non-system subject: these methods are
// internal plumbing that no request may reach directly.
func (w *Store) gateSystemOnly(ctx context.Context, method string) error {
	s := SubjectFrom(ctx)
	if s == nil {
		return errUnauthenticated
	}
	if s.Kind != KindSystem {
		return errkind.New(errkind.PermissionDenied, "You do not have permission to perform this action.")
	}
	return w.systemGate(s, method)
}

func (w *Store) CreateUser(ctx context.Context, u store.User) error {
	if err := w.MayCreateUser(ctx); err != nil {
		return err
	}
	return w.inner.CreateUser(ctx, u)
}

// MayCreateUser is CreateUser's check alone, for a caller with costly
// work to do before the write (hashing the password). A service key is
// refused with 401 whatever its grants, as the reference refuses keys for
// account creation: a leaked key must not be able to make itself a
// password that outlives the key's revocation.
func (w *Store) MayCreateUser(ctx context.Context) error {
	s := SubjectFrom(ctx)
	switch {
	case s != nil && s.Kind == KindSystem:
		return w.systemGate(s, "CreateUser")
	case s != nil && s.Kind == KindServicePrincipal:
		if w.onDeny != nil {
			w.onDeny(ctx, s, store.ActionAdminister, Installation, Decision{WrongCredential: true})
		}
		return errkind.New(errkind.Unauthenticated, "A service key cannot create user accounts; sign in as an administrator.")
	}
	return w.admin(ctx, "CreateUser")
}

func (w *Store) GetUser(ctx context.Context, id string) (store.User, error) {
	if !self(ctx, id) {
		if err := w.admin(ctx, "GetUser"); err != nil {
			return store.User{}, err
		}
	}
	return w.inner.GetUser(ctx, id)
}

func (w *Store) GetUserByEmail(ctx context.Context, email string) (store.User, error) {
	if err := w.gateSystemOnly(ctx, "GetUserByEmail"); err != nil {
		return store.User{}, err
	}
	return w.inner.GetUserByEmail(ctx, email)
}

func (w *Store) CreateSession(ctx context.Context, s store.Session) error {
	if err := w.gateSystemOnly(ctx, "CreateSession"); err != nil {
		return err
	}
	return w.inner.CreateSession(ctx, s)
}

func (w *Store) GetSession(ctx context.Context, tokenHash []byte) (store.Session, error) {
	if err := w.gateSystemOnly(ctx, "GetSession"); err != nil {
		return store.Session{}, err
	}
	return w.inner.GetSession(ctx, tokenHash)
}

// GetSessionAccess is for the authenticator (system:authn) alone: it reads
// the session's user's grants and restrictions with the session, so that
// WithSubjectAccess can start the request's memo with them.
func (w *Store) GetSessionAccess(ctx context.Context, tokenHash []byte) (store.Session, store.Access, error) {
	if err := w.gateSystemOnly(ctx, "GetSessionAccess"); err != nil {
		return store.Session{}, store.Access{}, err
	}
	return w.inner.GetSessionAccess(ctx, tokenHash)
}

func (w *Store) DeleteSession(ctx context.Context, tokenHash []byte) error {
	if err := w.gateSystemOnly(ctx, "DeleteSession"); err != nil {
		return err
	}
	return w.inner.DeleteSession(ctx, tokenHash)
}

// ListUserSessions and DeleteUserSession: users see and end their own
// sessions; an administrator may for anyone.
func (w *Store) ListUserSessions(ctx context.Context, userID string) ([]store.Session, error) {
	if !self(ctx, userID) {
		if err := w.admin(ctx, "ListUserSessions"); err != nil {
			return nil, err
		}
	}
	return w.inner.ListUserSessions(ctx, userID)
}

func (w *Store) DeleteUserSession(ctx context.Context, userID, id string) error {
	if !self(ctx, userID) {
		if err := w.admin(ctx, "DeleteUserSession"); err != nil {
			return err
		}
	}
	return w.inner.DeleteUserSession(ctx, userID, id)
}

// TouchSession and TouchAPIKey are the authenticator's bookkeeping.
func (w *Store) TouchSession(ctx context.Context, tokenHash []byte, at, notAfter time.Time) (bool, error) {
	if err := w.gateSystemOnly(ctx, "TouchSession"); err != nil {
		return false, err
	}
	return w.inner.TouchSession(ctx, tokenHash, at, notAfter)
}

func (w *Store) TouchAPIKey(ctx context.Context, id string, at, notAfter time.Time) (bool, error) {
	if err := w.gateSystemOnly(ctx, "TouchAPIKey"); err != nil {
		return false, err
	}
	return w.inner.TouchAPIKey(ctx, id, at, notAfter)
}

// RevokeUserCredentials is an administrator's: it ends another user's
// access at once.
func (w *Store) RevokeUserCredentials(ctx context.Context, userID string, at time.Time) (int64, int64, error) {
	if err := w.admin(ctx, "RevokeUserCredentials"); err != nil {
		return 0, 0, err
	}
	return w.inner.RevokeUserCredentials(ctx, userID, at)
}

func (w *Store) DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error) {
	if err := w.gateSystemOnly(ctx, "DeleteExpiredSessions"); err != nil {
		return 0, err
	}
	return w.inner.DeleteExpiredSessions(ctx, now)
}

// --- service principals and API keys ---

func spResource(sp store.ServicePrincipal) Resource {
	return Resource{Kind: store.KindServiceAccount, ID: sp.ID, NamespaceID: sp.NamespaceID}
}

func (w *Store) CreateServicePrincipal(ctx context.Context, sp store.ServicePrincipal) error {
	res := Resource{Kind: store.KindServiceAccount, NamespaceID: sp.NamespaceID}
	if err := w.gate(ctx, "CreateServicePrincipal", store.ActionCreate, res); err != nil {
		return err
	}
	return w.inner.CreateServicePrincipal(ctx, sp)
}

func (w *Store) GetServicePrincipal(ctx context.Context, id string) (store.ServicePrincipal, error) {
	if s := SubjectFrom(ctx); s != nil && s.Kind == KindSystem {
		if err := w.systemGate(s, "GetServicePrincipal"); err != nil {
			return store.ServicePrincipal{}, err
		}
		return w.inner.GetServicePrincipal(ctx, id)
	}
	if err := w.authenticated(ctx, "GetServicePrincipal"); err != nil {
		return store.ServicePrincipal{}, err
	}
	sp, err := w.inner.GetServicePrincipal(ctx, id)
	if err != nil {
		return store.ServicePrincipal{}, err
	}
	if err := w.gateFound(ctx, "GetServicePrincipal", store.ActionRead, spResource(sp)); err != nil {
		return store.ServicePrincipal{}, err
	}
	return sp, nil
}

func (w *Store) ListServicePrincipals(ctx context.Context, p store.PageRequest) (store.Page[store.ServicePrincipal], error) {
	if err := w.authenticated(ctx, "ListServicePrincipals"); err != nil {
		return store.Page[store.ServicePrincipal]{}, err
	}
	return listVisible(ctx, w, "ListServicePrincipals", store.KindServiceAccount, p,
		func(p store.PageRequest) (store.Page[store.ServicePrincipal], error) {
			return w.inner.ListServicePrincipals(ctx, p)
		},
		spResource, func(sp store.ServicePrincipal) store.PageCursor { return byCreation(sp.CreatedAt, sp.ID) })
}

func (w *Store) DeleteServicePrincipal(ctx context.Context, id string) error {
	if err := w.authenticated(ctx, "DeleteServicePrincipal"); err != nil {
		return err
	}
	sp, err := w.inner.GetServicePrincipal(ctx, id)
	if err != nil {
		return err
	}
	if err := w.gateFound(ctx, "DeleteServicePrincipal", store.ActionDelete, spResource(sp)); err != nil {
		return err
	}
	defer forget(ctx)
	return w.inner.DeleteServicePrincipal(ctx, id)
}

// API keys are installation administration (reference: the issuer needs
// Installation administer); authn reads them as its system subject.
func (w *Store) CreateAPIKey(ctx context.Context, k store.APIKey) error {
	if err := w.admin(ctx, "CreateAPIKey"); err != nil {
		return err
	}
	return w.inner.CreateAPIKey(ctx, k)
}

// GetAPIKeyAccess is for the authenticator alone, like GetSessionAccess:
// the key, its principal and the principal's grants and restrictions, in
// one read, for WithSubjectAccess.
func (w *Store) GetAPIKeyAccess(ctx context.Context, id string) (store.APIKey, store.ServicePrincipal, store.Access, error) {
	if err := w.gateSystemOnly(ctx, "GetAPIKeyAccess"); err != nil {
		return store.APIKey{}, store.ServicePrincipal{}, store.Access{}, err
	}
	return w.inner.GetAPIKeyAccess(ctx, id)
}

func (w *Store) GetAPIKey(ctx context.Context, id string) (store.APIKey, error) {
	if s := SubjectFrom(ctx); s == nil || s.Kind != KindSystem {
		if err := w.admin(ctx, "GetAPIKey"); err != nil {
			return store.APIKey{}, err
		}
	} else if err := w.systemGate(s, "GetAPIKey"); err != nil {
		return store.APIKey{}, err
	}
	return w.inner.GetAPIKey(ctx, id)
}

func (w *Store) RevokeAPIKey(ctx context.Context, id string, at time.Time) error {
	if err := w.admin(ctx, "RevokeAPIKey"); err != nil {
		return err
	}
	return w.inner.RevokeAPIKey(ctx, id, at)
}

// --- IAM: installation administration ---

func (w *Store) CreateRole(ctx context.Context, r store.Role) error {
	if err := w.adminOrSystem(ctx, "CreateRole"); err != nil {
		return err
	}
	defer forget(ctx)
	return w.inner.CreateRole(ctx, r)
}

// adminOrSystem admits installation administrators and system subjects
// whose method list includes method (bootstrap creates the first roles).
func (w *Store) adminOrSystem(ctx context.Context, method string) error {
	if s := SubjectFrom(ctx); s != nil && s.Kind == KindSystem {
		return w.systemGate(s, method)
	}
	return w.admin(ctx, method)
}

func (w *Store) GetRole(ctx context.Context, id string) (store.Role, error) {
	if err := w.adminOrSystem(ctx, "GetRole"); err != nil {
		return store.Role{}, err
	}
	return w.inner.GetRole(ctx, id)
}

func (w *Store) ListRoles(ctx context.Context, p store.PageRequest) (store.Page[store.Role], error) {
	if err := w.admin(ctx, "ListRoles"); err != nil {
		return store.Page[store.Role]{}, err
	}
	return w.inner.ListRoles(ctx, p)
}

func (w *Store) DeleteRole(ctx context.Context, id string) error {
	if err := w.admin(ctx, "DeleteRole"); err != nil {
		return err
	}
	defer forget(ctx)
	return w.inner.DeleteRole(ctx, id)
}

func (w *Store) CreateAccessBinding(ctx context.Context, b store.AccessBinding) error {
	if err := w.adminOrSystem(ctx, "CreateAccessBinding"); err != nil {
		return err
	}
	defer forget(ctx)
	return w.inner.CreateAccessBinding(ctx, b)
}

func (w *Store) GetAccessBinding(ctx context.Context, id string) (store.AccessBinding, error) {
	if err := w.admin(ctx, "GetAccessBinding"); err != nil {
		return store.AccessBinding{}, err
	}
	return w.inner.GetAccessBinding(ctx, id)
}

func (w *Store) ListAccessBindings(ctx context.Context, p store.PageRequest) (store.Page[store.AccessBinding], error) {
	if err := w.admin(ctx, "ListAccessBindings"); err != nil {
		return store.Page[store.AccessBinding]{}, err
	}
	return w.inner.ListAccessBindings(ctx, p)
}

func (w *Store) DeleteAccessBinding(ctx context.Context, id string) error {
	if err := w.admin(ctx, "DeleteAccessBinding"); err != nil {
		return err
	}
	defer forget(ctx)
	return w.inner.DeleteAccessBinding(ctx, id)
}

func (w *Store) CreateRestriction(ctx context.Context, r store.Restriction) error {
	if err := w.admin(ctx, "CreateRestriction"); err != nil {
		return err
	}
	defer forget(ctx)
	return w.inner.CreateRestriction(ctx, r)
}

func (w *Store) GetRestriction(ctx context.Context, id string) (store.Restriction, error) {
	if err := w.admin(ctx, "GetRestriction"); err != nil {
		return store.Restriction{}, err
	}
	return w.inner.GetRestriction(ctx, id)
}

func (w *Store) ListRestrictions(ctx context.Context, p store.PageRequest) (store.Page[store.Restriction], error) {
	if err := w.admin(ctx, "ListRestrictions"); err != nil {
		return store.Page[store.Restriction]{}, err
	}
	return w.inner.ListRestrictions(ctx, p)
}

func (w *Store) DeleteRestriction(ctx context.Context, id string) error {
	if err := w.admin(ctx, "DeleteRestriction"); err != nil {
		return err
	}
	defer forget(ctx)
	return w.inner.DeleteRestriction(ctx, id)
}

// A subject may list its own grants and restrictions (the session endpoint
// shows them); anyone else's need installation administer.
func (w *Store) ListGrants(ctx context.Context, subjectID string) ([]store.Grant, error) {
	if !self(ctx, subjectID) {
		if err := w.admin(ctx, "ListGrants"); err != nil {
			return nil, err
		}
	}
	return w.inner.ListGrants(ctx, subjectID)
}

func (w *Store) ListAccess(ctx context.Context, subjectID string) (store.Access, error) {
	if !self(ctx, subjectID) {
		if err := w.admin(ctx, "ListAccess"); err != nil {
			return store.Access{}, err
		}
	}
	return w.inner.ListAccess(ctx, subjectID)
}

func (w *Store) ListSubjectRestrictions(ctx context.Context, subjectID string) ([]store.Restriction, error) {
	if !self(ctx, subjectID) {
		if err := w.admin(ctx, "ListSubjectRestrictions"); err != nil {
			return nil, err
		}
	}
	return w.inner.ListSubjectRestrictions(ctx, subjectID)
}

// --- namespaces ---

func (w *Store) CreateNamespace(ctx context.Context, ns store.Namespace) error {
	if err := w.gate(ctx, "CreateNamespace", store.ActionCreate, Resource{Kind: store.KindNamespace}); err != nil {
		return err
	}
	return w.inner.CreateNamespace(ctx, ns)
}

func (w *Store) GetNamespace(ctx context.Context, id string) (store.Namespace, error) {
	if err := w.gate(ctx, "GetNamespace", store.ActionRead, NamespaceResource(id)); err != nil {
		return store.Namespace{}, err
	}
	return w.inner.GetNamespace(ctx, id)
}

// ListNamespaces is a page of the Namespaces the caller may read
// (visiblePage).
func (w *Store) ListNamespaces(ctx context.Context, p store.PageRequest) (store.Page[store.Namespace], error) {
	if err := w.authenticated(ctx, "ListNamespaces"); err != nil {
		return store.Page[store.Namespace]{}, err
	}
	return listVisible(ctx, w, "ListNamespaces", store.KindNamespace, p,
		func(p store.PageRequest) (store.Page[store.Namespace], error) { return w.inner.ListNamespaces(ctx, p) },
		func(n store.Namespace) Resource { return NamespaceResource(n.ID) },
		func(n store.Namespace) store.PageCursor { return byCreation(n.CreatedAt, n.ID) })
}

// Namespace status is the worker's to move; no request changes it directly.
func (w *Store) UpdateNamespaceStatus(ctx context.Context, id string, status store.NamespaceStatus, at time.Time) error {
	if err := w.gateSystemOnly(ctx, "UpdateNamespaceStatus"); err != nil {
		return err
	}
	return w.inner.UpdateNamespaceStatus(ctx, id, status, at)
}

func (w *Store) DeleteNamespace(ctx context.Context, id string) error {
	if err := w.gate(ctx, "DeleteNamespace", store.ActionDelete, NamespaceResource(id)); err != nil {
		return err
	}
	// Bindings and restrictions scoped to it go with it.
	defer forget(ctx)
	return w.inner.DeleteNamespace(ctx, id)
}

// --- configurations ---

func cfgResource(ns, id string) Resource {
	return Resource{Kind: store.KindConfiguration, ID: id, NamespaceID: ns}
}

func (w *Store) CreateConfiguration(ctx context.Context, c store.Configuration) error {
	if err := w.gate(ctx, "CreateConfiguration", store.ActionCreate, cfgResource(c.NamespaceID, "")); err != nil {
		return err
	}
	return w.inner.CreateConfiguration(ctx, c)
}

func (w *Store) GetConfiguration(ctx context.Context, namespaceID, id string) (store.Configuration, error) {
	if err := w.gate(ctx, "GetConfiguration", store.ActionRead, cfgResource(namespaceID, id)); err != nil {
		return store.Configuration{}, err
	}
	return w.inner.GetConfiguration(ctx, namespaceID, id)
}

// ListConfigurations needs read on the Namespace and is a page of its
// Configurations the caller may read (visiblePage).
func (w *Store) ListConfigurations(ctx context.Context, namespaceID string, p store.PageRequest) (store.Page[store.Configuration], error) {
	if err := w.gate(ctx, "ListConfigurations", store.ActionRead, NamespaceResource(namespaceID)); err != nil {
		return store.Page[store.Configuration]{}, err
	}
	return listVisible(ctx, w, "ListConfigurations", store.KindConfiguration, p,
		func(p store.PageRequest) (store.Page[store.Configuration], error) {
			return w.inner.ListConfigurations(ctx, namespaceID, p)
		},
		func(c store.Configuration) Resource { return cfgResource(c.NamespaceID, c.ID) },
		func(c store.Configuration) store.PageCursor { return byCreation(c.CreatedAt, c.ID) })
}

func (w *Store) UpdateConfiguration(ctx context.Context, c store.Configuration) (store.Configuration, error) {
	if err := w.gate(ctx, "UpdateConfiguration", store.ActionUpdate, cfgResource(c.NamespaceID, c.ID)); err != nil {
		return store.Configuration{}, err
	}
	return w.inner.UpdateConfiguration(ctx, c)
}

func (w *Store) DeleteConfiguration(ctx context.Context, namespaceID, id string) error {
	if err := w.gate(ctx, "DeleteConfiguration", store.ActionDelete, cfgResource(namespaceID, id)); err != nil {
		return err
	}
	return w.inner.DeleteConfiguration(ctx, namespaceID, id)
}

// --- agents and workspace setups ---

func agentResource(ns, id string) Resource {
	return Resource{Kind: store.KindAgent, ID: id, NamespaceID: ns}
}

// CreateAgent needs Agent create in the Namespace and read on the exact
// Configuration the Agent will use.
func (w *Store) CreateAgent(ctx context.Context, a store.Agent, setup *store.WorkspaceSetup) error {
	if err := w.gate(ctx, "CreateAgent", store.ActionCreate, agentResource(a.NamespaceID, "")); err != nil {
		return err
	}
	if err := w.gate(ctx, "CreateAgent", store.ActionRead, cfgResource(a.NamespaceID, a.ConfigurationID)); err != nil {
		return err
	}
	return w.inner.CreateAgent(ctx, a, setup)
}

func (w *Store) GetAgent(ctx context.Context, namespaceID, id string) (store.Agent, error) {
	if err := w.gate(ctx, "GetAgent", store.ActionRead, agentResource(namespaceID, id)); err != nil {
		return store.Agent{}, err
	}
	return w.inner.GetAgent(ctx, namespaceID, id)
}

// ListAgents shows exactly the Agents of the Namespace the caller may
// read, one page at a time (visiblePage). A caller that may read the
// Namespace gets its (possibly empty) list, and 404 if it does not exist.
// A caller that may not read the Namespace but may read Agents there (a
// grant of Agent read covering the Namespace, or a binding on an exact
// Agent) gets those; one that may read neither gets 404, as a denial of
// Namespace read (audited). A Namespace-scoped key outside its Namespace
// gets 403.
func (w *Store) ListAgents(ctx context.Context, namespaceID string, p store.PageRequest) (store.Page[store.Agent], error) {
	var none store.Page[store.Agent]
	if err := w.authenticated(ctx, "ListAgents"); err != nil {
		return none, err
	}
	s := SubjectFrom(ctx)
	if s.Kind == KindSystem {
		return w.inner.ListAgents(ctx, namespaceID, p)
	}
	acc, err := load(ctx, w.inner, s)
	if err != nil {
		return none, err
	}
	nsRes := NamespaceResource(namespaceID)
	nsRead := acc.decide(store.ActionRead, nsRes)
	if nsRead.OutOfScope {
		return none, w.gate(ctx, "ListAgents", store.ActionRead, nsRes)
	}
	if !nsRead.Allowed && !acc.readsAgentsIn(namespaceID) {
		// Decided from the grants alone, not from one page: whether the
		// caller may see anything here must not depend on where it pages.
		return none, w.gate(ctx, "ListAgents", store.ActionRead, nsRes)
	}
	page, err := visiblePage(acc, p,
		func(p store.PageRequest) (store.Page[store.Agent], error) {
			return w.inner.ListAgents(ctx, namespaceID, p)
		},
		func(a store.Agent) Resource { return agentResource(a.NamespaceID, a.ID) },
		func(a store.Agent) store.PageCursor { return byCreation(a.CreatedAt, a.ID) })
	if err != nil {
		return none, err
	}
	if len(page.Items) == 0 {
		// A caller allowed here learns whether the Namespace is missing.
		// Only an empty page needs the extra read: an Agent row references
		// its Namespace's, so a page with Agents proves it exists (one
		// query fewer on every page that has them).
		if _, err := w.inner.GetNamespace(ctx, namespaceID); err != nil {
			return none, err
		}
	}
	return page, nil
}

// GetAgentFor is how every operation on one existing Agent reads it: the
// caller needs exactly action on that Agent, nothing on its Namespace
// (implied by the path) and nothing on its revisions (they belong to the
// Agent). A denial answers 404 when the caller may not read the Agent and
// 403 when it may. Create is not an action on an existing Agent.
func (w *Store) GetAgentFor(ctx context.Context, action store.Action, namespaceID, id string) (store.AgentScope, error) {
	if err := w.authenticated(ctx, "GetAgentFor"); err != nil {
		return store.AgentScope{}, err
	}
	if action == store.ActionCreate || !Supported(store.KindAgent, action) {
		return store.AgentScope{}, errkind.Newf(errkind.Internal, "authz: %q is not an action on an existing Agent", action)
	}
	if err := w.gate(ctx, "GetAgentFor", action, agentResource(namespaceID, id)); err != nil {
		return store.AgentScope{}, err
	}
	return w.inner.GetAgentFor(ctx, action, namespaceID, id)
}

// Workspace setups are private: only the worker reads or completes them.
// Deleting a pending setup also follows Agent delete (an undeployed
// Agent's staged bytes are erased when the Agent is deleted).
func (w *Store) GetWorkspaceSetup(ctx context.Context, namespaceID, agentID string) (store.WorkspaceSetup, error) {
	if err := w.gateSystemOnly(ctx, "GetWorkspaceSetup"); err != nil {
		return store.WorkspaceSetup{}, err
	}
	return w.inner.GetWorkspaceSetup(ctx, namespaceID, agentID)
}

func (w *Store) CompleteWorkspaceSetup(ctx context.Context, namespaceID, agentID, setupID string) (store.WorkspaceSetup, error) {
	if err := w.gateSystemOnly(ctx, "CompleteWorkspaceSetup"); err != nil {
		return store.WorkspaceSetup{}, err
	}
	return w.inner.CompleteWorkspaceSetup(ctx, namespaceID, agentID, setupID)
}

func (w *Store) DeleteWorkspaceSetup(ctx context.Context, namespaceID, agentID string) (bool, error) {
	if s := SubjectFrom(ctx); s != nil && s.Kind == KindSystem {
		if err := w.systemGate(s, "DeleteWorkspaceSetup"); err != nil {
			return false, err
		}
	} else if err := w.gate(ctx, "DeleteWorkspaceSetup", store.ActionDelete, agentResource(namespaceID, agentID)); err != nil {
		return false, err
	}
	return w.inner.DeleteWorkspaceSetup(ctx, namespaceID, agentID)
}

// --- audit ---

// Any authenticated subject's actions are recorded, so appending needs only
// authentication; handlers never build events themselves (package audit
// does).
func (w *Store) AppendAuditEvent(ctx context.Context, e store.AuditEvent) error {
	if err := w.authenticated(ctx, "AppendAuditEvent"); err != nil {
		return err
	}
	return w.inner.AppendAuditEvent(ctx, e)
}

func (w *Store) ListAuditEvents(ctx context.Context, f store.AuditFilter, after *store.AuditCursor, limit int) ([]store.AuditEvent, error) {
	if err := w.admin(ctx, "ListAuditEvents"); err != nil {
		return nil, err
	}
	return w.inner.ListAuditEvents(ctx, f, after, limit)
}

// Authorize checks (action, res) for the subject in ctx exactly as a Store
// method would, including the 403/404 choice and the denial audit. Domain
// operations use it to check the operation's own permission before they
// look anything up, so that a caller without it learns nothing from
// validation errors about the objects it names.
func (w *Store) Authorize(ctx context.Context, action store.Action, res Resource) error {
	return w.gate(ctx, "Authorize", action, res)
}
