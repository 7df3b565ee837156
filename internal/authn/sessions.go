package authn

import (
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/base64"
	"fmt"
	"net/http"
	"net/netip"
	"sync"
	"time"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// SystemSubjectID names the subject under which this package's own store
// calls run. The authz store wrapper allows it exactly GetAPIKeyAccess,
// GetSessionAccess, GetUserByEmail, CreateSession, DeleteSession,
// DeleteExpiredSessions, TouchSession and TouchAPIKey.
const SystemSubjectID = "system:authn"

// systemContext returns ctx carrying the authn system subject. Credentials
// are checked before anyone is known, so these reads cannot run as the
// caller.
func systemContext(ctx context.Context) context.Context {
	return authz.WithSubject(ctx, &authz.Subject{
		ID:         SystemSubjectID,
		Kind:       authz.KindSystem,
		Credential: "system",
	})
}

// Session cookie names. The __Host- prefix makes browsers insist on
// Secure, Path=/ and no Domain, so a sibling subdomain cannot plant or
// overwrite the cookie; browsers only accept it over https, hence the plain
// name for http development origins.
const (
	cookieNameHTTP  = "occ_session"
	cookieNameHTTPS = "__Host-occ_session"
)

// DefaultSessionTTL is how long a browser session lives when no TTL is
// configured. Sessions are not extended on use.
const DefaultSessionTTL = 12 * time.Hour

// sessionTokenLen is the random part of a session token, in bytes; the
// cookie carries it as 43 unpadded base64url characters.
const sessionTokenLen = 32

var b64url = base64.RawURLEncoding.Strict()

// SessionCookieName is the session cookie's name for a public origin that
// is (or is not) https.
func SessionCookieName(publicOriginHTTPS bool) string {
	if publicOriginHTTPS {
		return cookieNameHTTPS
	}
	return cookieNameHTTP
}

// SessionStore is what Sessions needs from the store; store.Store and its
// authz wrapper satisfy it.
type SessionStore interface {
	GetUserByEmail(ctx context.Context, email string) (store.User, error)
	CreateSession(ctx context.Context, s store.Session) error
	DeleteSession(ctx context.Context, tokenHash []byte) error
}

// Sessions signs users in and out with email and password.
type Sessions struct {
	store      SessionStore
	now        func() time.Time
	ttl        time.Duration
	secure     bool
	cookieName string
	idle       time.Duration
	throttle   *Throttle
	onThrottle func(context.Context, ThrottleEvent)
	// verify is verifyPassword; tests replace it to observe that every
	// sign-in attempt pays for one hash.
	verify func(ctx context.Context, encoded, pw string) (bool, error)
}

// SessionOptions configure NewSessionsWith.
type SessionOptions struct {
	// Now is the clock (nil: time.Now).
	Now func() time.Time
	// TTL is the absolute session lifetime (<= 0: DefaultSessionTTL).
	TTL time.Duration
	// IdleTimeout is the idle timeout the Authenticator applies (<= 0:
	// DefaultIdleTimeout); Sessions reports idle ends with it.
	IdleTimeout time.Duration
	// PublicOriginHTTPS selects the __Host- cookie with Secure.
	PublicOriginHTTPS bool
	// Throttle holds the sign-in counters (nil: a fresh one with the
	// default policies).
	Throttle *Throttle
	// OnThrottle is told about every delay and lockout a failed sign-in
	// imposes, to audit it; nil means nobody is told. It must not block
	// for long: the sign-in answers after it returns.
	OnThrottle func(context.Context, ThrottleEvent)
}

// ThrottleEvent is a delay or lockout imposed by a failed sign-in. It
// carries no password and, when no user has the email, no email either
// (what was typed may be a password typed into the wrong field).
type ThrottleEvent struct {
	Imposition
	// UserID is the account's user, or "" when no user has the email.
	UserID string
	// ClientAddr is the client address the attempt came from (invalid
	// when unknown).
	ClientAddr netip.Addr
}

// NewSessions returns Sessions over st. now is the clock (nil: time.Now);
// ttl is the session lifetime (zero or negative: DefaultSessionTTL);
// publicOriginHTTPS selects the __Host- cookie with Secure.
func NewSessions(st SessionStore, now func() time.Time, ttl time.Duration, publicOriginHTTPS bool) *Sessions {
	return NewSessionsWith(st, SessionOptions{Now: now, TTL: ttl, PublicOriginHTTPS: publicOriginHTTPS})
}

// NewSessionsWith returns Sessions over st with o.
//
// It makes the dummy hash used for unknown emails on first use in the
// process (random bytes, no argon2 run).
func NewSessionsWith(st SessionStore, o SessionOptions) *Sessions {
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.TTL <= 0 {
		o.TTL = DefaultSessionTTL
	}
	if o.Throttle == nil {
		o.Throttle = NewThrottle(DefaultAccountPolicy, DefaultAddressPolicy, 0)
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	dummyHash()
	return &Sessions{
		store:      st,
		now:        o.Now,
		ttl:        o.TTL,
		secure:     o.PublicOriginHTTPS,
		cookieName: SessionCookieName(o.PublicOriginHTTPS),
		idle:       o.IdleTimeout,
		throttle:   o.Throttle,
		onThrottle: o.OnThrottle,
		verify:     verifyPassword,
	}
}

type clientAddrKey struct{}

// WithClientAddr returns ctx carrying the request's client address, as the
// admission layer determined it from the peer and the trusted proxies.
func WithClientAddr(ctx context.Context, a netip.Addr) context.Context {
	return context.WithValue(ctx, clientAddrKey{}, a)
}

// ClientAddrFrom returns the client address in ctx, or the invalid Addr.
func ClientAddrFrom(ctx context.Context) netip.Addr {
	a, _ := ctx.Value(clientAddrKey{}).(netip.Addr)
	return a
}

// IdleEnd is when se ends unless it is used before: its last use plus the
// idle timeout (the Authenticator's rule).
func (s *Sessions) IdleEnd(se store.Session) time.Time {
	last := se.LastUsedAt
	if last.IsZero() {
		last = se.CreatedAt
	}
	return last.Add(s.idle)
}

// Rotate ends the session named by r's cookie, if any: called after a
// successful sign-in, so that a token the browser held before (or one an
// attacker planted in it) does not outlive the new session. Best effort:
// a failure to delete leaves a session that ends by its own lifetimes.
func (s *Sessions) Rotate(ctx context.Context, r *http.Request) {
	if hash, ok := sessionTokenHash(r, s.cookieName); ok {
		_ = s.store.DeleteSession(systemContext(ctx), hash)
	}
}

// CookieName is the name of the session cookie.
func (s *Sessions) CookieName() string { return s.cookieName }

// dummyHash is a password hash in the current parameters that no password
// matches. Sign-in verifies against it when the email is unknown, so that
// an unknown email costs the same argon2 work as a wrong password and
// response time does not reveal which emails have accounts.
//
// Its salt and key are random bytes, not the hash of a random password:
// verifying runs argon2 over the given password with the hash's salt and
// parameters whatever the stored key is, so the work is the same, and a
// random 256-bit key is matched by no password. Hashing a random password
// here instead cost one more 64 MiB argon2 run at every start of the
// process (docs/performance.md).
var dummyHash = sync.OnceValue(func() string {
	b := make([]byte, argonSaltLen+argonKeyLen)
	if _, err := rand.Read(b); err != nil {
		// Only a failing random source gets here; Go treats that as fatal.
		panic(fmt.Sprintf("authn: dummy hash: %v", err))
	}
	return encodeHash(argonParams{memory: argonMemoryKiB, time: argonTime, threads: argonThreads}, b[:argonSaltLen], b[argonSaltLen:])
})

// signInMessage is the one answer to a failed sign-in, whatever the reason.
const signInMessage = "invalid email or password"

// throttledMessage is the one answer to a throttled sign-in, whichever
// counter refused it and whether or not the email has an account.
const throttledMessage = "Too many sign-in attempts; try again later."

func errSignIn() error { return errkind.New(errkind.Unauthenticated, signInMessage) }

// SignIn checks email and password and, when they match, creates a session
// and returns its cookie and the user (with PasswordHash cleared). Every
// sign-in creates a new session with a new token: a token a browser held
// before (or an attacker planted) never becomes signed in.
//
// The attempt first passes the throttle (see Throttle): a delayed or locked
// account or client address answers errkind.TooManyRequests (429) with a
// Retry-After and no hashing. An unknown email, a user without a password
// and a wrong password all answer errkind.Unauthenticated with the same
// message after the same amount of hashing, and count the same in the
// throttle. When no hashing slot frees in time the answer is 503 with a
// Retry-After (see SetHashing), and the attempt does not count. A failing
// store is returned as an error of its own kind (not 401): the caller did
// nothing wrong.
func (s *Sessions) SignIn(ctx context.Context, email, password string) (*http.Cookie, store.User, error) {
	addr := ClientAddrFrom(ctx)
	tk, wait, ok := s.throttle.Begin(email, addr, s.now())
	if !ok {
		return nil, store.User{}, errkind.WithRetryAfter(errkind.TooManyRequests, throttledMessage, wait)
	}
	user, judged, err := s.check(ctx, email, password)
	switch {
	case !judged:
		s.throttle.Abandon(tk)
		return nil, store.User{}, err
	case err != nil:
		for _, imp := range s.throttle.Fail(tk) {
			if s.onThrottle != nil {
				s.onThrottle(ctx, ThrottleEvent{Imposition: imp, UserID: user.ID, ClientAddr: addr})
			}
		}
		return nil, store.User{}, err
	}
	s.throttle.Succeed(tk)

	var token [sessionTokenLen]byte
	if _, err := rand.Read(token[:]); err != nil {
		return nil, store.User{}, fmt.Errorf("authn: read session token: %w", err)
	}
	now := s.now().UTC().Truncate(time.Microsecond)
	hash := sha256.Sum256(token[:])
	sess := store.Session{
		ID:         ids.New(ids.Session),
		TokenHash:  hash[:],
		UserID:     user.ID,
		ExpiresAt:  now.Add(s.ttl),
		CreatedAt:  now,
		LastUsedAt: now,
	}
	sctx := systemContext(ctx)
	if err := s.store.CreateSession(sctx, sess); err != nil {
		return nil, store.User{}, storeError("create session", err)
	}
	user.PasswordHash = ""
	return s.cookie(b64url.EncodeToString(token[:]), sess.ExpiresAt, int(s.ttl/time.Second)), user, nil
}

// check verifies email and password. judged is false when no verdict was
// reached (store failure, no hashing slot, context ended): the attempt
// must not count. A wrong credential is judged with the generic 401 and,
// when a user has the email, that user (for the audit).
func (s *Sessions) check(ctx context.Context, email, password string) (user store.User, judged bool, err error) {
	user, err = s.store.GetUserByEmail(systemContext(ctx), email)
	switch {
	case errkind.Is(err, errkind.NotFound), errkind.Is(err, errkind.Invalid):
		// Invalid: an email the database cannot even hold (PostgreSQL
		// refuses a NUL) belongs to no user; it is a wrong credential
		// like any other, not an internal error.
		user = store.User{} // verify against the dummy hash below
	case err != nil:
		return store.User{}, false, storeError("load user", err)
	}
	encoded := user.PasswordHash
	if user.ID == "" || encoded == "" {
		encoded = dummyHash()
	}
	ok, err := s.verify(ctx, encoded, password)
	if err != nil {
		if ctx.Err() != nil || errkind.Is(err, errkind.Unavailable) {
			// Gave up waiting for a hashing slot.
			return store.User{}, false, fmt.Errorf("authn: verify password: %w", err)
		}
		// The stored hash is corrupt or tampered with. Answer exactly like
		// a wrong password, so the response does not reveal that this email
		// has an account; the cause travels in the error chain for logs.
		return user, true, errkind.Wrap(errkind.Unauthenticated, signInMessage, err)
	}
	if !ok || user.ID == "" || user.PasswordHash == "" {
		return user, true, errSignIn()
	}
	return user, true, nil
}

// SignOut deletes the session named by r's cookie, if any, and returns a
// cookie that makes the browser forget it. Signing out without a session,
// with a malformed cookie or with an already deleted session succeeds. The
// expiring cookie is returned even with a store error, so that the handler
// can still clear the browser's copy.
func (s *Sessions) SignOut(ctx context.Context, r *http.Request) (*http.Cookie, error) {
	expired := s.cookie("", time.Unix(0, 0).UTC(), -1)
	hash, ok := sessionTokenHash(r, s.cookieName)
	if !ok {
		return expired, nil
	}
	err := s.store.DeleteSession(systemContext(ctx), hash)
	if err != nil && !errkind.Is(err, errkind.NotFound) {
		return expired, storeError("delete session", err)
	}
	return expired, nil
}

// cookie builds the session cookie. HttpOnly keeps it from scripts;
// SameSite=Lax keeps it off cross-site subrequests and form posts (the
// server also checks Origin on cookie-authenticated mutations); no Domain
// so it is host-only.
func (s *Sessions) cookie(value string, expires time.Time, maxAge int) *http.Cookie {
	return &http.Cookie{
		Name:     s.cookieName,
		Value:    value,
		Path:     "/",
		Expires:  expires,
		MaxAge:   maxAge,
		Secure:   s.secure,
		HttpOnly: true,
		SameSite: http.SameSiteLaxMode,
	}
}

// sessionTokenHash returns the SHA-256 of the session token in r's cookie
// named name, or false when there is no cookie or its value is not a
// well-formed token (so no store lookup is spent on garbage).
func sessionTokenHash(r *http.Request, name string) ([]byte, bool) {
	c, err := r.Cookie(name)
	if err != nil {
		return nil, false
	}
	return SessionTokenHash(c.Value)
}

// SessionTokenHash returns what the store keys a session by, the SHA-256
// of the token in a session cookie's value, or false when the value is not
// a well-formed token.
func SessionTokenHash(cookieValue string) ([]byte, bool) {
	if len(cookieValue) != b64url.EncodedLen(sessionTokenLen) {
		return nil, false
	}
	token, err := b64url.DecodeString(cookieValue)
	if err != nil || len(token) != sessionTokenLen {
		return nil, false
	}
	h := sha256.Sum256(token)
	return h[:], true
}

// storeError classifies an unexpected store failure: Unavailable stays
// Unavailable (503), anything else is internal. A store refusal (for example
// the authz wrapper denying the system subject) is a server fault, not the
// caller's, so it must not turn into 401 or 403.
func storeError(op string, err error) error {
	if errkind.Is(err, errkind.Unavailable) {
		return fmt.Errorf("authn: %s: %w", op, err)
	}
	return errkind.Wrap(errkind.Internal, "internal error", fmt.Errorf("authn: %s: %w", op, err))
}
