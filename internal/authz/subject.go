package authz

import (
	"context"
	"sync"

	"github.com/openclaw/occ/internal/store"
)

// Subject kinds.
const (
	KindUser             = "user"
	KindServicePrincipal = "service_principal"
	KindSystem           = "system"
)

// Subject is the authenticated caller of one request or background job.
// It is immutable once placed in a context.
type Subject struct {
	// ID is the usr_/sa_ identifier, or a system subject's name.
	ID string
	// Kind is KindUser, KindServicePrincipal or KindSystem.
	Kind string
	// NamespaceID, when set, limits the subject to one Namespace (a
	// Namespace-scoped API key): anything outside it is refused with 403.
	NamespaceID string
	// Credential says how the subject authenticated, for audit records:
	// "session", "api_key:<keyId>" or "system". Never the secret itself.
	Credential string
	// SessionID is the public id (ses_...) of the session a user signed
	// in with, when Credential is "session"; it lets the user's session
	// list mark the current one. Never the token.
	SessionID string
}

type subjectKey struct{}

// subjectValue is what WithSubject puts in a context: the subject and the
// memo of its grants and restrictions for this context's lifetime (one
// request, or one background job).
type subjectValue struct {
	s    *Subject
	memo *accessMemo
}

// accessMemo holds the subject's grants and restrictions once a check has
// read them, so the several checks of one request read the store once.
// It lives exactly as long as the context WithSubject made: the next
// request gets a new one, so a revoked grant applies to it. Writes through
// this layer that can change grants (roles, bindings, restrictions, and
// deletions that cascade to them) forget it, and so does the end of a
// transaction that forgot it (a rolled-back grant must not linger).
type accessMemo struct {
	mu  sync.Mutex
	acc *access
	gen uint64 // counts forgets, so InTx can tell whether fn forgot
}

// WithSubject returns ctx carrying s, with an empty memo of its access.
func WithSubject(ctx context.Context, s *Subject) context.Context {
	return context.WithValue(ctx, subjectKey{}, subjectValue{s: s, memo: &accessMemo{}})
}

// WithSubjectAccess is WithSubject with the memo already holding acc, s's
// grants and restrictions as the authenticator read them with s's session
// (store.GetSessionAccess), so the request's first check reads nothing
// more. acc must be s's, read for this request: the memo holds it exactly
// as it holds a read of the first check (for ctx's lifetime, forgotten by
// a write that can change grants).
func WithSubjectAccess(ctx context.Context, s *Subject, acc store.Access) context.Context {
	m := &accessMemo{acc: &access{subject: s, grants: acc.Grants, restrictions: acc.Restrictions}}
	return context.WithValue(ctx, subjectKey{}, subjectValue{s: s, memo: m})
}

// SubjectFrom returns the subject in ctx, or nil for an anonymous caller.
func SubjectFrom(ctx context.Context) *Subject {
	v, _ := ctx.Value(subjectKey{}).(subjectValue)
	return v.s
}

// memoFrom returns ctx's access memo, or nil when ctx has no subject.
func memoFrom(ctx context.Context) *accessMemo {
	v, _ := ctx.Value(subjectKey{}).(subjectValue)
	return v.memo
}

// forget drops ctx's memoized access; the next check reads the store.
func forget(ctx context.Context) {
	if m := memoFrom(ctx); m != nil {
		m.mu.Lock()
		m.acc = nil
		m.gen++
		m.mu.Unlock()
	}
}

// generation returns how many times ctx's memo was forgotten.
func generation(ctx context.Context) uint64 {
	m := memoFrom(ctx)
	if m == nil {
		return 0
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.gen
}
