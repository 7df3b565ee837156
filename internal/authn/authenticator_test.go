package authn

import (
	"crypto/sha256"
	"errors"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

const (
	spID      = "sa_33333333-3333-4333-8333-333333333333"
	spNSID    = "sa_44444444-4444-4444-8444-444444444444"
	spAgentID = "sa_55555555-5555-4555-8555-555555555555"
	nsA       = "ns_66666666-6666-4666-8666-666666666666"
	nsB       = "ns_77777777-7777-4777-8777-777777777777"
)

// keyFixture is one issued key: its row and the value the client holds.
type keyFixture struct {
	row       store.APIKey
	presented string
}

// addKey issues a key for principal sp valid until expires, edits its row
// with edit, and stores it.
func addKey(st *fakeStore, sp string, expires time.Time, edit func(*store.APIKey)) keyFixture {
	id, presented, hash := NewAPIKey()
	row := store.APIKey{
		ID: id, ServicePrincipalID: sp, Name: "ci", SecretHash: hash,
		CreatedBy: aliceID, ExpiresAt: expires, CreatedAt: t0,
	}
	if edit != nil {
		edit(&row)
	}
	st.keys[id] = row
	return keyFixture{row: row, presented: presented}
}

// sessionCookie stores a session for user and returns its cookie.
func sessionCookie(st *fakeStore, name, user string, expires time.Time) *http.Cookie {
	token := make([]byte, 32)
	copy(token, user) // distinct per user; randomness is irrelevant here
	h := sha256.Sum256(token)
	st.sessions[string(h[:])] = store.Session{TokenHash: h[:], UserID: user, ExpiresAt: expires, CreatedAt: t0}
	return &http.Cookie{Name: name, Value: b64url.EncodeToString(token)}
}

func TestAuthenticateAPIKey(t *testing.T) {
	st := newFakeStore()
	st.users[aliceID] = store.User{ID: aliceID, Email: "alice@example.com"}
	st.sps[spID] = store.ServicePrincipal{ID: spID, Name: "ci"}
	st.sps[spNSID] = store.ServicePrincipal{ID: spNSID, Name: "ns-ci", NamespaceID: nsA}
	st.sps[spAgentID] = store.ServicePrincipal{ID: spAgentID, Name: "agent", AgentID: "agt_88888888-8888-4888-8888-888888888888"}
	later := t0.Add(24 * time.Hour)
	revokedAt := t0.Add(-time.Hour)

	valid := addKey(st, spID, later, nil)
	scoped := addKey(st, spID, later, func(k *store.APIKey) { k.NamespaceID = nsA })
	nsPrincipal := addKey(st, spNSID, later, nil)
	nsMismatch := addKey(st, spNSID, later, func(k *store.APIKey) { k.NamespaceID = nsB })
	revoked := addKey(st, spID, later, func(k *store.APIKey) { k.RevokedAt = &revokedAt })
	revokedLater := addKey(st, spID, later, func(k *store.APIKey) { r := later.Add(time.Hour); k.RevokedAt = &r })
	expiresNow := addKey(st, spID, t0, nil)
	expiredJust := addKey(st, spID, t0.Add(-time.Microsecond), nil)
	expiresSoon := addKey(st, spID, t0.Add(time.Microsecond), nil)
	agentOwned := addKey(st, spAgentID, later, nil)
	orphan := addKey(st, "sa_99999999-9999-4999-8999-999999999999", later, nil)
	_, unknown, _ := NewAPIKey()
	wrongSecretID, _, _ := NewAPIKey()
	wrongSecret := keyFixture{presented: formatAPIKey(wrongSecretID, make([]byte, 32))}
	st.keys[wrongSecretID] = store.APIKey{ID: wrongSecretID, ServicePrincipalID: spID, SecretHash: valid.row.SecretHash, ExpiresAt: later}
	userCookie := sessionCookie(st, "__Host-occ_session", aliceID, later)
	// Each principal's grants come with its key; alice's with her session.
	accessOf := func(subject string) store.Access {
		return store.Access{Grants: []store.Grant{{Binding: store.AccessBinding{ID: "rb_" + subject, SubjectID: subject}}}, Restrictions: []store.Restriction{}}
	}
	for _, id := range []string{spID, spNSID, spAgentID, aliceID} {
		st.access[id] = accessOf(id)
	}

	subject := func(k keyFixture, ns string) *authz.Subject {
		return &authz.Subject{ID: k.row.ServicePrincipalID, Kind: authz.KindServicePrincipal, NamespaceID: ns, Credential: "api_key:" + k.row.ID}
	}
	type result struct {
		Subject *authz.Subject
		Kind    errkind.Kind
		Message string
	}
	bad := result{Kind: errkind.Unauthenticated, Message: badKeyMessage}
	tests := []struct {
		name    string
		headers []string // x-api-key values, in order
		cookie  *http.Cookie
		want    result
	}{
		{"valid", []string{valid.presented}, nil, result{Subject: subject(valid, "")}},
		{"1µs before expiry", []string{expiresSoon.presented}, nil, result{Subject: subject(expiresSoon, "")}},
		{"namespace-scoped key", []string{scoped.presented}, nil, result{Subject: subject(scoped, nsA)}},
		{"namespace principal limits unscoped key", []string{nsPrincipal.presented}, nil, result{Subject: subject(nsPrincipal, nsA)}},
		{"key namespace differs from principal's", []string{nsMismatch.presented}, nil, bad},
		{"empty header", []string{""}, nil, bad},
		{"two headers", []string{valid.presented, valid.presented}, nil, bad},
		{"wrong prefix", []string{"occx_" + valid.presented[5:]}, nil, bad},
		{"too short", []string{valid.presented[:80]}, nil, bad},
		{"too long", []string{valid.presented + "A"}, nil, bad},
		{"bad char", []string{valid.presented[:40] + "*" + valid.presented[41:]}, nil, bad},
		{"bearer syntax", []string{"Bearer " + valid.presented}, nil, bad},
		{"unknown id", []string{unknown}, nil, bad},
		{"wrong secret", []string{wrongSecret.presented}, nil, bad},
		{"revoked", []string{revoked.presented}, nil, bad},
		{"revoked with a future time", []string{revokedLater.presented}, nil, bad},
		{"expired at the instant", []string{expiresNow.presented}, nil, bad},
		{"expired 1µs ago", []string{expiredJust.presented}, nil, bad},
		{"agent-owned principal", []string{agentOwned.presented}, nil, bad},
		{"principal gone", []string{orphan.presented}, nil, bad},
		{"bad key never falls back to a valid cookie", []string{revoked.presented}, userCookie, bad},
		{"empty key never falls back to a valid cookie", []string{""}, userCookie, bad},
		{"valid key wins over a cookie", []string{valid.presented}, userCookie, result{Subject: subject(valid, "")}},
	}
	a := NewAuthenticator(st, func() time.Time { return t0 }, true)
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st.calls = nil
			r := httptest.NewRequest(http.MethodGet, "/api/v1/namespaces", nil)
			for _, h := range tc.headers {
				r.Header.Add("x-api-key", h)
			}
			if tc.cookie != nil {
				r.AddCookie(tc.cookie)
			}
			subj, acc, err := a.Authenticate(r)
			got := result{Subject: subj}
			// The principal's access comes with an authenticating key, and
			// with nothing else (never the cookie's user's).
			var wantAcc *store.Access
			if tc.want.Subject != nil {
				a := accessOf(tc.want.Subject.ID)
				wantAcc = &a
			}
			if diff := cmp.Diff(wantAcc, acc); diff != "" {
				t.Errorf("access read with the key (-want +got):\n%s", diff)
			}
			if e := errkind.As(err); e != nil {
				got.Kind, got.Message = e.Kind, e.Message
			} else if err != nil {
				t.Fatalf("Authenticate error %v is not an *errkind.Error", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("Authenticate(x-api-key %q) mismatch (-want +got):\n%s", tc.name, diff)
			}
			for _, h := range tc.headers {
				if err != nil && len(h) > 40 && strings.Contains(err.Error(), h[38:]) {
					t.Errorf("Authenticate error %q contains the secret", err)
				}
			}
			for _, c := range st.calls {
				if strings.HasPrefix(c, "GetSession") || strings.HasPrefix(c, "GetUser") {
					t.Errorf("Authenticate with x-api-key consulted the session: %q", st.calls)
				}
			}
			if s := st.subjects(); len(s) > 0 && !cmp.Equal(s, []string{SystemSubjectID}) {
				t.Errorf("store calls ran as %q, want only %q", s, SystemSubjectID)
			}
		})
	}
}

func TestAuthenticateSession(t *testing.T) {
	const name = "__Host-occ_session"
	later := t0.Add(time.Hour)
	tests := []struct {
		name    string
		cookie  func(st *fakeStore) *http.Cookie
		wantSub *authz.Subject
	}{
		{"no credentials", func(*fakeStore) *http.Cookie { return nil }, nil},
		{"valid session", func(st *fakeStore) *http.Cookie {
			return sessionCookie(st, name, aliceID, later)
		}, &authz.Subject{ID: aliceID, Kind: authz.KindUser, Credential: "session"}},
		{"malformed cookie is anonymous", func(*fakeStore) *http.Cookie {
			return &http.Cookie{Name: name, Value: "not-a-token"}
		}, nil},
		{"padded token is anonymous", func(st *fakeStore) *http.Cookie {
			c := sessionCookie(st, name, aliceID, later)
			c.Value = c.Value[:42] + "="
			return c
		}, nil},
		{"unknown session is anonymous", func(*fakeStore) *http.Cookie {
			return &http.Cookie{Name: name, Value: strings.Repeat("A", 43)}
		}, nil},
		{"expired at the instant is anonymous", func(st *fakeStore) *http.Cookie {
			return sessionCookie(st, name, aliceID, t0)
		}, nil},
		{"expired 1µs ago is anonymous", func(st *fakeStore) *http.Cookie {
			return sessionCookie(st, name, aliceID, t0.Add(-time.Microsecond))
		}, nil},
		{"deleted user is anonymous", func(st *fakeStore) *http.Cookie {
			return sessionCookie(st, name, bobID, later)
		}, nil},
		{"http cookie name on an https origin is ignored", func(st *fakeStore) *http.Cookie {
			return sessionCookie(st, "occ_session", aliceID, later)
		}, nil},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newFakeStore()
			st.users[aliceID] = store.User{ID: aliceID, Email: "alice@example.com"}
			aliceAccess := store.Access{
				Grants:       []store.Grant{{Binding: store.AccessBinding{ID: "rb_1", SubjectID: aliceID, RoleID: "role_1"}}},
				Restrictions: []store.Restriction{},
			}
			st.access[aliceID] = aliceAccess
			a := NewAuthenticator(st, func() time.Time { return t0 }, true)
			r := httptest.NewRequest(http.MethodGet, "/api/auth/session", nil)
			if c := tc.cookie(st); c != nil {
				r.AddCookie(c)
			}
			got, acc, err := a.Authenticate(r)
			if err != nil {
				t.Fatalf("Authenticate: %v", err)
			}
			if diff := cmp.Diff(tc.wantSub, got); diff != "" {
				t.Errorf("Authenticate mismatch (-want +got):\n%s", diff)
			}
			// The user's access comes with an authenticating session, and
			// with nothing else.
			var wantAcc *store.Access
			if tc.wantSub != nil {
				wantAcc = &aliceAccess
			}
			if diff := cmp.Diff(wantAcc, acc); diff != "" {
				t.Errorf("access read with the session (-want +got):\n%s", diff)
			}
			if s := st.subjects(); len(s) > 0 && !cmp.Equal(s, []string{SystemSubjectID}) {
				t.Errorf("store calls ran as %q, want only %q", s, SystemSubjectID)
			}
		})
	}
}

// A failing store is a server problem: neither 401 nor anonymous.
func TestAuthenticateStoreFailure(t *testing.T) {
	_, presented, _ := NewAPIKey()
	cookie := &http.Cookie{Name: "occ_session", Value: strings.Repeat("A", 43)}
	tests := []struct {
		name   string
		err    error
		apiKey bool
		want   errkind.Kind
	}{
		{"api key, database error", errors.New("connection reset"), true, errkind.Internal},
		{"api key, unavailable", errkind.New(errkind.Unavailable, "db down"), true, errkind.Unavailable},
		{"api key, authz refuses system subject", errkind.New(errkind.PermissionDenied, "denied"), true, errkind.Internal},
		{"session, database error", errors.New("connection reset"), false, errkind.Internal},
		{"session, unavailable", errkind.New(errkind.Unavailable, "db down"), false, errkind.Unavailable},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := newFakeStore()
			st.err = tc.err
			a := NewAuthenticator(st, nil, false)
			r := httptest.NewRequest(http.MethodGet, "/", nil)
			if tc.apiKey {
				r.Header.Set("X-API-Key", presented)
			} else {
				r.AddCookie(cookie)
			}
			got, _, err := a.Authenticate(r)
			if got != nil || errkind.KindOf(err) != tc.want {
				t.Errorf("Authenticate = %v, %v; want nil and kind %v", got, err, tc.want)
			}
		})
	}
}

func BenchmarkAuthenticateAPIKey(b *testing.B) {
	st := newFakeStore()
	st.sps[spID] = store.ServicePrincipal{ID: spID}
	k := addKey(st, spID, t0.Add(time.Hour), nil)
	a := NewAuthenticator(st, func() time.Time { return t0 }, true)
	r := httptest.NewRequest(http.MethodGet, "/", nil)
	r.Header.Set("x-api-key", k.presented)
	if !ids.Valid(ids.APIKey, k.row.ID) {
		b.Fatal("bad fixture")
	}
	for b.Loop() {
		st.calls = st.calls[:0]
		if s, _, err := a.Authenticate(r); s == nil || err != nil {
			b.Fatal(s, err)
		}
	}
}

// TestAPIKeyLastUse: a key's use is written on first use, not again within
// TouchInterval (at the limit), and again one past it; a refused key is
// never touched.
func TestAPIKeyLastUse(t *testing.T) {
	st := newFakeStore()
	st.sps[spID] = store.ServicePrincipal{ID: spID, Name: "ci"}
	k := addKey(st, spID, t0.Add(24*time.Hour), nil)
	c := &clock{t: t0}
	a := NewAuthenticator(st, c.now, true)
	wrong := k.presented[:len(k.presented)-1] + "A" // still canonical base64url
	if wrong == k.presented {
		wrong = k.presented[:len(k.presented)-1] + "E"
	}
	for _, step := range []struct {
		at        time.Duration
		key       string
		wantTouch bool
	}{
		{0, k.presented, true},
		{30 * time.Second, k.presented, false},
		{TouchInterval, k.presented, false},
		{TouchInterval + time.Microsecond, k.presented, true},
		{3 * TouchInterval, wrong, false},
	} {
		c.t = t0.Add(step.at)
		st.calls = nil
		r := httptest.NewRequest(http.MethodGet, "/namespaces", nil)
		r.Header.Set(APIKeyHeader, step.key)
		_, _, _ = a.Authenticate(r)
		touched := slices.ContainsFunc(st.calls, func(s string) bool { return strings.HasPrefix(s, "TouchAPIKey") })
		if touched != step.wantTouch {
			t.Errorf("at +%s: touched = %v, want %v (calls %q)", step.at, touched, step.wantTouch, st.calls)
		}
	}
	if got := st.keys[k.row.ID].LastUsedAt; got == nil || !got.Equal(t0.Add(TouchInterval+time.Microsecond)) {
		t.Errorf("LastUsedAt = %v, want %v", got, t0.Add(TouchInterval+time.Microsecond))
	}
}
