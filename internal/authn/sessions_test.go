package authn

import (
	"context"
	"crypto/sha256"
	"encoding/base64"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// A non-UTC zone catches code that compares wall clocks instead of instants.
var testZone = time.FixedZone("UTC+05:30", 5*3600+1800)

var t0 = time.Date(2026, 3, 1, 10, 0, 0, 123456000, testZone)

const (
	aliceID       = "usr_11111111-1111-4111-8111-111111111111"
	bobID         = "usr_22222222-2222-4222-8222-222222222222"
	alicePassword = "alice's long password"
)

// clock is a settable test clock.
type clock struct{ t time.Time }

func (c *clock) now() time.Time { return c.t }

func newSessionsFixture(t *testing.T, https bool, ttl time.Duration) (*Sessions, *fakeStore, *clock) {
	t.Helper()
	st := newFakeStore()
	st.users[aliceID] = store.User{ID: aliceID, Email: "alice@example.com", PasswordHash: cheapHash(alicePassword)}
	st.users[bobID] = store.User{ID: bobID, Email: "bob@example.com"} // no password (external login)
	c := &clock{t: t0}
	return NewSessions(st, c.now, ttl, https), st, c
}

func TestSessionCookieAttributes(t *testing.T) {
	tests := []struct {
		name  string
		https bool
		ttl   time.Duration
		want  http.Cookie // Value and Raw are checked separately
	}{
		{"http origin", false, 0, http.Cookie{
			Name: "occ_session", Path: "/", Expires: t0.UTC().Add(12 * time.Hour),
			MaxAge: 12 * 3600, Secure: false, HttpOnly: true, SameSite: http.SameSiteLaxMode,
		}},
		{"https origin", true, 0, http.Cookie{
			Name: "__Host-occ_session", Path: "/", Expires: t0.UTC().Add(12 * time.Hour),
			MaxAge: 12 * 3600, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode,
		}},
		{"configured ttl", true, 30 * time.Minute, http.Cookie{
			Name: "__Host-occ_session", Path: "/", Expires: t0.UTC().Add(30 * time.Minute),
			MaxAge: 1800, Secure: true, HttpOnly: true, SameSite: http.SameSiteLaxMode,
		}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, st, _ := newSessionsFixture(t, tc.https, tc.ttl)
			if got := s.CookieName(); got != tc.want.Name {
				t.Errorf("CookieName() = %q, want %q", got, tc.want.Name)
			}
			c, user, err := s.SignIn(context.Background(), "Alice@Example.com", alicePassword)
			if err != nil {
				t.Fatalf("SignIn: %v", err)
			}
			if diff := cmp.Diff(store.User{ID: aliceID, Email: "alice@example.com"}, user); diff != "" {
				t.Errorf("SignIn user mismatch (-want +got):\n%s", diff)
			}
			got := *c
			got.Value = ""
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SignIn cookie mismatch (-want +got):\n%s", diff)
			}

			// The cookie carries the token; the store holds only its SHA-256.
			token, err := b64url.DecodeString(c.Value)
			if err != nil || len(token) != 32 {
				t.Fatalf("cookie value %q is not 32 bytes of base64url", c.Value)
			}
			h := sha256.Sum256(token)
			gotID := st.sessions[string(h[:])].ID
			if !ids.Valid(ids.Session, gotID) {
				t.Errorf("stored session id %q is not a ses_ id", gotID)
			}
			wantSession := store.Session{
				ID: gotID, TokenHash: h[:], UserID: aliceID,
				ExpiresAt: tc.want.Expires, CreatedAt: t0.UTC(), LastUsedAt: t0.UTC(),
			}
			if diff := cmp.Diff(map[string]store.Session{string(h[:]): wantSession}, st.sessions); diff != "" {
				t.Errorf("stored sessions mismatch (-want +got):\n%s", diff)
			}

			// Sign-out deletes the row and expires the cookie with the same
			// attributes, so the browser replaces it.
			r := httptest.NewRequest(http.MethodPost, "/api/auth/sign-out", nil)
			r.AddCookie(c)
			out, err := s.SignOut(context.Background(), r)
			if err != nil {
				t.Fatalf("SignOut: %v", err)
			}
			wantOut := tc.want
			wantOut.MaxAge, wantOut.Expires = -1, time.Unix(0, 0).UTC()
			if diff := cmp.Diff(&wantOut, out); diff != "" {
				t.Errorf("SignOut cookie mismatch (-want +got):\n%s", diff)
			}
			if len(st.sessions) != 0 {
				t.Errorf("SignOut left %d sessions", len(st.sessions))
			}
			if diff := cmp.Diff([]string{SystemSubjectID}, st.subjects()); diff != "" {
				t.Errorf("store call subjects mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// The Set-Cookie header a browser sees, for both origins.
func TestSessionCookieHeader(t *testing.T) {
	for _, tc := range []struct {
		https bool
		want  string
	}{
		{false, "occ_session=v; Path=/; Expires=Sun, 01 Mar 2026 16:30:00 GMT; Max-Age=43200; HttpOnly; SameSite=Lax"},
		{true, "__Host-occ_session=v; Path=/; Expires=Sun, 01 Mar 2026 16:30:00 GMT; Max-Age=43200; HttpOnly; Secure; SameSite=Lax"},
	} {
		s, _, c := newSessionsFixture(t, tc.https, 0)
		c.t = time.Date(2026, 3, 1, 10, 0, 0, 0, testZone)
		cookie, _, err := s.SignIn(context.Background(), "alice@example.com", alicePassword)
		if err != nil {
			t.Fatalf("SignIn: %v", err)
		}
		cookie.Value = "v" // the token is random; the attributes are what matter
		if diff := cmp.Diff(tc.want, cookie.String()); diff != "" {
			t.Errorf("Set-Cookie (https=%v) mismatch (-want +got):\n%s", tc.https, diff)
		}
	}
}

// countingVerify wraps verifyPassword and counts calls, so tests can check
// that every sign-in attempt pays for exactly one hash whether or not the
// email exists. (Timing itself is not asserted: timed tests are flaky.)
func countingVerify(n *int) func(context.Context, string, string) (bool, error) {
	return func(ctx context.Context, encoded, pw string) (bool, error) {
		*n++
		return verifyPassword(ctx, encoded, pw)
	}
}

func TestSignInFailures(t *testing.T) {
	type result struct {
		Kind        errkind.Kind
		Message     string
		VerifyCalls int
		Sessions    int
	}
	refused := result{Kind: errkind.Unauthenticated, Message: "invalid email or password", VerifyCalls: 1}
	tests := []struct {
		name     string
		email    string
		password string
		setup    func(*fakeStore)
		want     result
	}{
		{"success", "alice@example.com", alicePassword, nil, result{VerifyCalls: 1, Sessions: 1}},
		{"unknown email", "mallory@example.com", alicePassword, nil, refused},
		{"empty email", "", "", nil, refused},
		{"wrong password", "alice@example.com", alicePassword + "x", nil, refused},
		{"empty password", "alice@example.com", "", nil, refused},
		{"user without password", "bob@example.com", alicePassword, nil, refused},
		{"corrupt stored hash", "alice@example.com", alicePassword, func(f *fakeStore) {
			u := f.users[aliceID]
			u.PasswordHash = "$argon2id$v=19$m=4194304,t=1,p=1$AAAAAAAAAAAAAAAAAAAAAA$AAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAAA"
			f.users[aliceID] = u
		}, refused},
		{"store failure is not 401", "alice@example.com", alicePassword, func(f *fakeStore) {
			f.err = errors.New("connection reset")
		}, result{Kind: errkind.Internal, Message: "internal error"}},
		{"store unavailable stays 503", "alice@example.com", alicePassword, func(f *fakeStore) {
			f.err = errkind.New(errkind.Unavailable, "database unavailable")
		}, result{Kind: errkind.Unavailable, Message: "database unavailable"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, st, _ := newSessionsFixture(t, true, 0)
			if tc.setup != nil {
				tc.setup(st)
			}
			var got result
			s.verify = countingVerify(&got.VerifyCalls)
			cookie, user, err := s.SignIn(context.Background(), tc.email, tc.password)
			if e := errkind.As(err); e != nil {
				got.Kind, got.Message = e.Kind, e.Message
			} else if err != nil {
				got.Message = err.Error()
			}
			got.Sessions = len(st.sessions)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("SignIn(%q) mismatch (-want +got):\n%s", tc.email, diff)
			}
			if err != nil && (cookie != nil || user != (store.User{})) {
				t.Errorf("SignIn failed but returned cookie %v, user %+v", cookie, user)
			}
			if err != nil && tc.password != "" && strings.Contains(err.Error(), tc.password) {
				t.Errorf("SignIn error %q contains the password", err)
			}
		})
	}
}

// Unknown emails are checked against a hash with the current parameters
// (so verifying runs the same argon2 work as for a wrong password) that no
// password matches.
func TestDummyHashUsesCurrentParameters(t *testing.T) {
	d := dummyHash()
	if !phcPattern.MatchString(d) {
		t.Errorf("dummyHash() = %q, want a hash with the default parameters", d)
	}
	p, salt, key, err := parseHash(d)
	if err != nil {
		t.Fatalf("parseHash(dummyHash()): %v", err)
	}
	want := argonParams{memory: argonMemoryKiB, time: argonTime, threads: argonThreads}
	if p != want || len(salt) != argonSaltLen || len(key) != argonKeyLen {
		t.Errorf("dummy hash: params %+v, salt %d bytes, key %d bytes; want %+v, %d, %d",
			p, len(salt), len(key), want, argonSaltLen, argonKeyLen)
	}
	for _, pw := range []string{"", alicePassword, "correct horse battery staple"} {
		ok, err := verifyPassword(context.Background(), d, pw)
		if err != nil || ok {
			t.Errorf("verifyPassword(dummy, %q) = %v, %v; want false, nil", pw, ok, err)
		}
	}
}

func TestSignOut(t *testing.T) {
	s, st, _ := newSessionsFixture(t, false, 0)
	c, _, err := s.SignIn(context.Background(), "alice@example.com", alicePassword)
	if err != nil {
		t.Fatalf("SignIn: %v", err)
	}
	other := &http.Cookie{Name: "occ_session", Value: c.Value}
	tests := []struct {
		name      string
		cookie    *http.Cookie
		storeErr  error
		wantKind  errkind.Kind
		wantErr   bool
		wantCalls int
	}{
		{"no cookie", nil, nil, 0, false, 0},
		{"malformed cookie", &http.Cookie{Name: "occ_session", Value: "nope"}, nil, 0, false, 0},
		{"cookie of other name", &http.Cookie{Name: "__Host-occ_session", Value: c.Value}, nil, 0, false, 0},
		{"live session", other, nil, 0, false, 1},
		{"already deleted", other, nil, 0, false, 1},
		{"store failure", other, errors.New("boom"), errkind.Internal, true, 1},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st.calls, st.err = nil, tc.storeErr
			r := httptest.NewRequest(http.MethodPost, "/api/auth/sign-out", nil)
			if tc.cookie != nil {
				r.AddCookie(tc.cookie)
			}
			out, err := s.SignOut(context.Background(), r)
			if (err != nil) != tc.wantErr || (err != nil && errkind.KindOf(err) != tc.wantKind) {
				t.Errorf("SignOut error = %v, want error %v of kind %v", err, tc.wantErr, tc.wantKind)
			}
			if out == nil || out.MaxAge != -1 || out.Name != "occ_session" {
				t.Errorf("SignOut cookie = %v, want an expiring occ_session cookie", out)
			}
			if len(st.calls) != tc.wantCalls {
				t.Errorf("SignOut made store calls %q, want %d", st.calls, tc.wantCalls)
			}
		})
	}
}

// A session created by SignIn authenticates until, and not at, its expiry.
func TestSessionRoundTripAndExpiry(t *testing.T) {
	s, st, c := newSessionsFixture(t, true, time.Hour)
	cookie, _, err := s.SignIn(context.Background(), "alice@example.com", alicePassword)
	if err != nil {
		t.Fatalf("SignIn: %v", err)
	}
	a := NewAuthenticator(st, c.now, true)
	var sessionID string
	for _, se := range st.sessions {
		sessionID = se.ID
	}
	alice := &authz.Subject{ID: aliceID, Kind: authz.KindUser, Credential: "session", SessionID: sessionID}
	expiry := t0.Add(time.Hour)
	tests := []struct {
		name string
		at   time.Time
		want *authz.Subject
	}{
		{"just created", t0, alice},
		{"1µs before expiry", expiry.Add(-time.Microsecond), alice},
		{"at expiry", expiry, nil},
		{"1µs past expiry", expiry.Add(time.Microsecond), nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c.t = tc.at
			r := httptest.NewRequest(http.MethodGet, "/api/auth/session", nil)
			r.AddCookie(cookie)
			got, _, err := a.Authenticate(r)
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Authenticate mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

// TestSessionIdleTimeout: a session ends when unused for the idle timeout
// (exclusive), a use extends it, uses are written at most once per
// TouchInterval, and use never extends the absolute lifetime.
func TestSessionIdleTimeout(t *testing.T) {
	s, st, c := newSessionsFixture(t, true, 2*time.Hour)
	cookie, _, err := s.SignIn(context.Background(), "alice@example.com", alicePassword)
	if err != nil {
		t.Fatalf("SignIn: %v", err)
	}
	idle := 30 * time.Minute
	a := NewAuthenticatorWith(st, c.now, true, idle)
	steps := []struct {
		name      string
		at        time.Duration // after sign-in
		wantOK    bool
		wantTouch bool // a write of the last use
	}{
		{"1µs before the idle end", idle - time.Microsecond, true, true},
		{"again within a minute: no write", idle + 30*time.Second, true, false},
		{"exactly a minute after the last write: no write", idle - time.Microsecond + TouchInterval, true, false},
		{"1µs past a minute: written", idle + TouchInterval, true, true},
		{"at the idle end after that use", idle + TouchInterval + idle, false, false},
	}
	for _, step := range steps {
		c.t = t0.Add(step.at)
		st.calls = nil
		r := httptest.NewRequest(http.MethodGet, "/api/auth/session", nil)
		r.AddCookie(cookie)
		got, _, err := a.Authenticate(r)
		if err != nil {
			t.Fatalf("%s: Authenticate: %v", step.name, err)
		}
		if (got != nil) != step.wantOK {
			t.Errorf("%s: authenticated = %v, want %v", step.name, got != nil, step.wantOK)
		}
		touched := false
		for _, call := range st.calls {
			touched = touched || strings.HasPrefix(call, "TouchSession")
		}
		if touched != step.wantTouch {
			t.Errorf("%s: touched = %v, want %v (calls %q)", step.name, touched, step.wantTouch, st.calls)
		}
	}

	// Used every 20 minutes, the session still ends at its absolute expiry.
	s2, st2, c2 := newSessionsFixture(t, true, time.Hour)
	cookie2, _, err := s2.SignIn(context.Background(), "alice@example.com", alicePassword)
	if err != nil {
		t.Fatal(err)
	}
	a2 := NewAuthenticatorWith(st2, c2.now, true, idle)
	for _, after := range []time.Duration{20 * time.Minute, 40 * time.Minute, 60*time.Minute - time.Microsecond, 60 * time.Minute} {
		c2.t = t0.Add(after)
		r := httptest.NewRequest(http.MethodGet, "/api/auth/session", nil)
		r.AddCookie(cookie2)
		got, _, err := a2.Authenticate(r)
		if err != nil {
			t.Fatal(err)
		}
		if want := after < time.Hour; (got != nil) != want {
			t.Errorf("at %s: authenticated = %v, want %v", after, got != nil, want)
		}
	}
}

// TestSessionTokenHash: a cookie value is hashed only when it is exactly a
// 32-byte token in unpadded base64url; anything else is refused before any
// lookup could be spent on it.
func TestSessionTokenHash(t *testing.T) {
	token := make([]byte, sessionTokenLen)
	for i := range token {
		token[i] = byte(i * 7)
	}
	valid := b64url.EncodeToString(token)
	want := sha256.Sum256(token)
	long := b64url.EncodeToString(append(token, 1))
	tests := []struct {
		name  string
		value string
		ok    bool
	}{
		{"a 32-byte token", valid, true},
		{"empty", "", false},
		{"one character short", valid[:len(valid)-1], false},
		{"one character long", valid + "A", false},
		{"a 33-byte token", long, false},
		{"padded base64url", base64.URLEncoding.EncodeToString(token), false},
		{"standard base64 alphabet", strings.Repeat("+", len(valid)), false},
		{"non-canonical last character", valid[:len(valid)-1] + "B", false},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, ok := SessionTokenHash(tc.value)
			if ok != tc.ok {
				t.Fatalf("SessionTokenHash(%q) ok = %v, want %v", tc.value, ok, tc.ok)
			}
			if !ok {
				if got != nil {
					t.Fatalf("SessionTokenHash(%q) = %x with ok false", tc.value, got)
				}
				return
			}
			if diff := cmp.Diff(want[:], got); diff != "" {
				t.Fatalf("hash (-want +got):\n%s", diff)
			}
		})
	}
}

// FuzzSessionTokenHash: a value is accepted exactly when it is the
// canonical unpadded base64url of 32 bytes, and then its hash is theirs.
func FuzzSessionTokenHash(f *testing.F) {
	token := make([]byte, sessionTokenLen)
	f.Add(b64url.EncodeToString(token))
	f.Add(base64.URLEncoding.EncodeToString(token))
	f.Add("")
	f.Add(strings.Repeat("A", 43))
	f.Add(strings.Repeat("A", 42) + "B")
	f.Fuzz(func(t *testing.T, value string) {
		got, ok := SessionTokenHash(value)
		decoded, err := base64.RawURLEncoding.DecodeString(value)
		canonical := err == nil && len(decoded) == sessionTokenLen && base64.RawURLEncoding.EncodeToString(decoded) == value
		if ok != canonical {
			t.Fatalf("SessionTokenHash(%q) ok = %v; canonical 32-byte token: %v", value, ok, canonical)
		}
		if ok {
			want := sha256.Sum256(decoded)
			if diff := cmp.Diff(want[:], got); diff != "" {
				t.Fatalf("hash (-want +got):\n%s", diff)
			}
		}
	})
}
