package apitypes

import "time"

// Subject kinds.
const (
	SubjectUser             = "user"              // a signed-in user
	SubjectServicePrincipal = "service_principal" // a service principal using an API key
)

// SignInRequest is the body of POST /api/auth/sign-in/email.
type SignInRequest struct {
	// Email is the user's sign-in address.
	Email string `json:"email"`
	// Password is the user's password.
	Password string `json:"password"`
}

// Session is the data of POST /api/auth/sign-in/email and GET
// /api/auth/session: who the caller is.
type Session struct {
	// Subject is the authenticated caller.
	Subject Subject `json:"subject"`
	// User is the signed-in user; absent for a service principal.
	User *User `json:"user,omitempty"`
}

func (Session) isData() {}

// Subject is an authenticated caller.
type Subject struct {
	// ID is the user's or service principal's identifier.
	ID string `json:"id"`
	// Kind is SubjectUser or SubjectServicePrincipal.
	Kind string `json:"kind"`
	// NamespaceID, when present, limits the caller to one Namespace (a
	// Namespace-scoped API key).
	NamespaceID string `json:"namespaceId,omitempty"`
	// Credential says how the caller authenticated: "session" or
	// "api_key:<keyId>". Never the secret itself.
	Credential string `json:"credential"`
}

// SignedOut is the data of POST /api/auth/sign-out.
type SignedOut struct {
	// SignedOut is always true.
	SignedOut bool `json:"signedOut"`
}

func (SignedOut) isData() {}

// CreateServiceKeyRequest is the body of POST /api/auth/service-keys.
type CreateServiceKeyRequest struct {
	// ServicePrincipalID is the principal the key authenticates.
	ServicePrincipalID string `json:"servicePrincipalId"`
	// NamespaceID, when set, limits the key to one Namespace.
	NamespaceID string `json:"namespaceId,omitempty"`
	// Name labels the key (1 to 32 characters).
	Name string `json:"name"`
	// ExpiresIn is the key's lifetime in seconds; absent means the
	// default.
	ExpiresIn *int64 `json:"expiresIn,omitempty"`
}

// ServiceKey is the data of POST /api/auth/service-keys: a new API key.
// Key is in this reply once and never again; OCC keeps only its hash.
type ServiceKey struct {
	// ID is the key's identifier ("key_…").
	ID string `json:"id"`
	// ServicePrincipalID is the principal the key authenticates.
	ServicePrincipalID string `json:"servicePrincipalId"`
	// NamespaceID, when present, limits the key to one Namespace.
	NamespaceID string `json:"namespaceId,omitempty"`
	// Name labels the key.
	Name string `json:"name"`
	// CreatedBy is the subject that issued the key.
	CreatedBy string `json:"createdBy"`
	// ExpiresAt is when the key stops working.
	ExpiresAt time.Time `json:"expiresAt"`
	// RevokedAt is when the key was revoked; absent while it is not.
	RevokedAt *time.Time `json:"revokedAt,omitempty"`
	// CreatedAt is when the key was issued.
	CreatedAt time.Time `json:"createdAt"`
	// Key is the secret to present in the x-api-key header.
	Key string `json:"key"`
}

func (ServiceKey) isData() {}

// RevokedServiceKey is the data of DELETE /api/auth/service-keys/{keyId}.
type RevokedServiceKey struct {
	// ID is the revoked key's identifier.
	ID string `json:"id"`
	// Revoked is always true.
	Revoked bool `json:"revoked"`
}

func (RevokedServiceKey) isData() {}

// SessionInfo is one of the caller's live browser sessions, in GET
// /api/auth/sessions. It never carries the token.
type SessionInfo struct {
	// ID is the session's identifier ("ses_…").
	ID string `json:"id"`
	// CreatedAt is when the user signed in.
	CreatedAt time.Time `json:"createdAt"`
	// LastUsedAt is when the session last authenticated a request, to the
	// minute (OCC writes it at most once a minute).
	LastUsedAt time.Time `json:"lastUsedAt"`
	// ExpiresAt is the session's absolute end, whatever its use.
	ExpiresAt time.Time `json:"expiresAt"`
	// IdleExpiresAt is when the session ends unless it is used before.
	IdleExpiresAt time.Time `json:"idleExpiresAt"`
	// Current marks the session this request was made with.
	Current bool `json:"current"`
}

func (SessionInfo) isData() {}

// RevokedSession is the data of DELETE /api/auth/sessions/{sessionId}.
type RevokedSession struct {
	// ID is the ended session's identifier.
	ID string `json:"id"`
	// Revoked is always true.
	Revoked bool `json:"revoked"`
}

func (RevokedSession) isData() {}

// RevokedCredentials is the data of POST
// /iam/users/{userId}/revoke-credentials.
type RevokedCredentials struct {
	// UserID is the user whose credentials were revoked.
	UserID string `json:"userId"`
	// SessionsRevoked counts the user's sessions that were ended.
	SessionsRevoked int64 `json:"sessionsRevoked"`
	// KeysRevoked counts the unrevoked service keys the user had issued
	// that are now revoked.
	KeysRevoked int64 `json:"keysRevoked"`
}

func (RevokedCredentials) isData() {}
