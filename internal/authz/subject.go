package authz

import "context"

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

// WithSubject returns ctx carrying s.
func WithSubject(ctx context.Context, s *Subject) context.Context {
	return context.WithValue(ctx, subjectKey{}, s)
}

// SubjectFrom returns the subject in ctx, or nil for an anonymous caller.
func SubjectFrom(ctx context.Context) *Subject {
	s, _ := ctx.Value(subjectKey{}).(*Subject)
	return s
}
