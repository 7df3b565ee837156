package authn

import (
	"context"
	"crypto/subtle"
	"net/http"
	"time"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// APIKeyHeader carries a service API key.
const APIKeyHeader = "X-Api-Key"

// AuthenticatorStore is what Authenticator needs from the store; store.Store
// and its authz wrapper satisfy it.
type AuthenticatorStore interface {
	GetAPIKeyAccess(ctx context.Context, id string) (store.APIKey, store.ServicePrincipal, store.Access, error)
	GetSessionAccess(ctx context.Context, tokenHash []byte) (store.Session, store.Access, error)
	TouchSession(ctx context.Context, tokenHash []byte, at, notAfter time.Time) (bool, error)
	TouchAPIKey(ctx context.Context, id string, at, notAfter time.Time) (bool, error)
}

// TouchInterval is how often a session's or a key's last use is written
// at most: a use less than this after the recorded one writes nothing, so
// a busy credential costs one database write per interval, not one per
// request. The idle timeout is therefore exact to about this much.
const TouchInterval = time.Minute

// DefaultIdleTimeout ends a session unused for this long when no idle
// timeout is configured.
const DefaultIdleTimeout = 2 * time.Hour

// Authenticator turns a request's credentials into a subject.
type Authenticator struct {
	store      AuthenticatorStore
	now        func() time.Time
	cookieName string
	idle       time.Duration
}

// NewAuthenticator returns an Authenticator over st. now is the clock (nil:
// time.Now); publicOriginHTTPS selects the session cookie name and must
// match the Sessions that issue the cookies. Sessions idle for
// DefaultIdleTimeout end.
func NewAuthenticator(st AuthenticatorStore, now func() time.Time, publicOriginHTTPS bool) *Authenticator {
	return NewAuthenticatorWith(st, now, publicOriginHTTPS, 0)
}

// NewAuthenticatorWith is NewAuthenticator with an idle timeout (<= 0:
// DefaultIdleTimeout).
func NewAuthenticatorWith(st AuthenticatorStore, now func() time.Time, publicOriginHTTPS bool, idle time.Duration) *Authenticator {
	if now == nil {
		now = time.Now
	}
	if idle <= 0 {
		idle = DefaultIdleTimeout
	}
	return &Authenticator{store: st, now: now, cookieName: SessionCookieName(publicOriginHTTPS), idle: idle}
}

// Authenticate returns the subject r authenticates as, with its grants and
// restrictions read in the same query as its session or its key and
// principal (the caller hands them to authz.WithSubjectAccess, so the
// request's checks need no read of their own), or (nil, nil, nil) for an
// anonymous request. Rules:
//
//   - An x-api-key header, when present at all (even empty), decides alone.
//     A key that does not authenticate for any reason is
//     errkind.Unauthenticated with one generic message, and the session
//     cookie is NOT consulted: a client that sends a key means to act as
//     that key's principal, and silently acting as the browser's user
//     instead would be a confused deputy.
//   - Otherwise a session cookie yields its user. A missing, malformed,
//     unknown or expired session cookie makes the request anonymous rather
//     than failing it, so that public pages (sign-in) keep working with a
//     stale cookie; routes that need a subject then answer 401.
//   - A store failure other than NotFound is returned as an internal (or
//     unavailable) error, never as 401 and never as anonymous: an outage
//     must not look like a revoked credential.
//
// Store calls run under the SystemSubjectID subject; r's context is
// otherwise passed through (deadline, cancellation).
func (a *Authenticator) Authenticate(r *http.Request) (*authz.Subject, *store.Access, error) {
	ctx := systemContext(r.Context())
	if vals, ok := r.Header[APIKeyHeader]; ok {
		if len(vals) != 1 {
			// Several keys: ambiguous, refuse rather than pick one.
			return nil, nil, errBadKey()
		}
		return a.apiKey(ctx, vals[0])
	}
	return a.session(ctx, r)
}

func (a *Authenticator) apiKey(ctx context.Context, presented string) (*authz.Subject, *store.Access, error) {
	id, secret, err := ParseAPIKey(presented)
	if err != nil {
		return nil, nil, err
	}
	// One read: the key, its principal (NotFound when either is gone) and
	// the principal's grants and restrictions, used only once the key
	// proves valid below.
	key, sp, acc, err := a.store.GetAPIKeyAccess(ctx, id)
	if errkind.Is(err, errkind.NotFound) {
		return nil, nil, errBadKey()
	}
	if err != nil {
		return nil, nil, storeError("load api key", err)
	}
	if subtle.ConstantTimeCompare(hashSecret(secret), key.SecretHash) != 1 {
		return nil, nil, errBadKey()
	}
	// Revocation is immediate whatever time it records; expiry is
	// inclusive: at ExpiresAt the key is already dead.
	if key.RevokedAt != nil || !a.now().Before(key.ExpiresAt) {
		return nil, nil, errBadKey()
	}
	// Agent-owned principals exist for an Agent's own runtime identity and
	// may not use the HTTP API at all.
	if sp.AgentID != "" {
		return nil, nil, errBadKey()
	}
	// A Namespace-limited principal limits its keys too, whatever the key
	// row says: take the principal's Namespace for an unscoped key, and
	// refuse a key scoped to a different Namespace (only a bug or a
	// tampered row produces one).
	ns := key.NamespaceID
	if sp.NamespaceID != "" {
		if ns == "" {
			ns = sp.NamespaceID
		} else if ns != sp.NamespaceID {
			return nil, nil, errBadKey()
		}
	}
	a.touchKey(ctx, key)
	return &authz.Subject{
		ID:          sp.ID,
		Kind:        authz.KindServicePrincipal,
		NamespaceID: ns,
		Credential:  "api_key:" + key.ID,
	}, &acc, nil
}

func (a *Authenticator) session(ctx context.Context, r *http.Request) (*authz.Subject, *store.Access, error) {
	hash, ok := sessionTokenHash(r, a.cookieName)
	if !ok {
		return nil, nil, nil
	}
	// One read: GetSessionAccess is NotFound when the session's user is
	// gone, and brings the user's grants and restrictions along.
	sess, acc, err := a.store.GetSessionAccess(ctx, hash)
	if errkind.Is(err, errkind.NotFound) {
		return nil, nil, nil
	}
	if err != nil {
		return nil, nil, storeError("load session", err)
	}
	now := a.now()
	lastUsed := sess.LastUsedAt
	if lastUsed.IsZero() {
		lastUsed = sess.CreatedAt
	}
	// Absolute lifetime and idle timeout, both exclusive: at the instant
	// either is reached the session is already over.
	if !now.Before(sess.ExpiresAt) || !now.Before(lastUsed.Add(a.idle)) {
		return nil, nil, nil
	}
	if now.Sub(lastUsed) > TouchInterval {
		// Best effort: a failed write leaves the previous last use, so at
		// worst the session idles out up to a minute early; the request
		// itself is authenticated and goes on.
		_, _ = a.store.TouchSession(ctx, hash, now.UTC(), now.Add(-TouchInterval).UTC())
	}
	return &authz.Subject{ID: sess.UserID, Kind: authz.KindUser, Credential: "session", SessionID: sess.ID}, &acc, nil
}

// touchKey records the key's use at most once per TouchInterval (the
// store's conditional write makes that hold across requests and
// replicas). Best effort, like the session's: the request goes on.
func (a *Authenticator) touchKey(ctx context.Context, key store.APIKey) {
	now := a.now()
	if key.LastUsedAt != nil && now.Sub(*key.LastUsedAt) <= TouchInterval {
		return
	}
	_, _ = a.store.TouchAPIKey(ctx, key.ID, now.UTC(), now.Add(-TouchInterval).UTC())
}
