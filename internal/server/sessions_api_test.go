package server_test

import (
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

type sessionInfo struct {
	ID            string    `json:"id"`
	CreatedAt     time.Time `json:"createdAt"`
	LastUsedAt    time.Time `json:"lastUsedAt"`
	ExpiresAt     time.Time `json:"expiresAt"`
	IdleExpiresAt time.Time `json:"idleExpiresAt"`
	Current       bool      `json:"current"`
}

// TestSessionsAPI: a user lists and revokes their own sessions (not
// another's), sign-in rotates the token the browser held, sessions end
// when idle and at their absolute end, keys cannot list sessions, and an
// administrator revokes a user's sessions and keys at once; each
// revocation is audited. On both engines.
func TestSessionsAPI(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		e := newEnvWith(t, st, server.Options{SessionTTL: 3 * time.Hour, SessionIdleTimeout: time.Hour})
		userID, first := e.user("dev@example.com", authz.RoleAdministratorID)
		e.clock.Advance(time.Minute)
		second := e.signIn("dev@example.com", testPassword)
		status := func(c cred) int {
			code, _, _ := e.do("GET", "/api/auth/session", nil, c)
			return code
		}

		var got struct{ Items []sessionInfo }
		e.must("GET", "/api/auth/sessions", nil, second, 200, &got)
		if len(got.Items) != 2 || !got.Items[0].Current || got.Items[1].Current {
			t.Fatalf("sessions = %+v; want 2, the newest current", got.Items)
		}
		s0 := got.Items[0]
		if want := s0.CreatedAt.Add(3 * time.Hour); !s0.ExpiresAt.Equal(want) {
			t.Errorf("expiresAt = %s; want createdAt + 3h = %s", s0.ExpiresAt, want)
		}
		if want := s0.LastUsedAt.Add(time.Hour); !s0.IdleExpiresAt.Equal(want) {
			t.Errorf("idleExpiresAt = %s; want lastUsedAt + 1h = %s", s0.IdleExpiresAt, want)
		}
		firstID := got.Items[1].ID

		// Another user cannot see or revoke them.
		_, other := e.user("other@example.com", "")
		if code, _, _ := e.do("DELETE", "/api/auth/sessions/"+firstID, nil, other); code != 404 {
			t.Errorf("another user revoking the session: %d; want 404", code)
		}
		// A key has no sessions.
		_, _, key := e.principal("ci", authz.RoleAdministratorID, "")
		if code, _, _ := e.do("GET", "/api/auth/sessions", nil, key); code != 401 {
			t.Errorf("a key listing sessions: %d; want 401", code)
		}

		// Revoking the first session ends it; the second goes on.
		var rev struct {
			ID      string `json:"id"`
			Revoked bool   `json:"revoked"`
		}
		e.must("DELETE", "/api/auth/sessions/"+firstID, nil, second, 200, &rev)
		if rev.ID != firstID || !rev.Revoked {
			t.Errorf("revoke reply = %+v", rev)
		}
		if code := status(first); code != 401 {
			t.Errorf("revoked session: %d; want 401", code)
		}
		if code, _, _ := e.do("DELETE", "/api/auth/sessions/"+firstID, nil, second); code != 404 {
			t.Errorf("revoking it again: %d; want 404", code)
		}

		// Sign-in with the old cookie still in the browser rotates it.
		_, _, rec := e.do("POST", "/api/auth/sign-in/email", map[string]string{"email": "dev@example.com", "password": testPassword}, second)
		if rec.Code != 200 {
			t.Fatalf("sign-in: %d", rec.Code)
		}
		third := cred{name: "third"}
		for _, c := range rec.Result().Cookies() {
			if c.Name == "occ_session" {
				third.cookie = c
			}
		}
		if third.cookie == nil || third.cookie.Value == second.cookie.Value {
			t.Fatal("sign-in did not issue a new token")
		}
		if code := status(second); code != 401 {
			t.Errorf("the token held before sign-in: %d; want 401 (rotated)", code)
		}

		// Idle timeout: used within the hour, alive; unused an hour, gone.
		e.clock.Advance(59 * time.Minute)
		if code := status(third); code != 200 {
			t.Errorf("used 59 min after sign-in: %d; want 200", code)
		}
		e.clock.Advance(time.Hour)
		if code := status(third); code != 401 {
			t.Errorf("unused for the idle timeout: %d; want 401", code)
		}

		// An administrator revokes a user's sessions and keys at once.
		fourth := e.signIn("dev@example.com", testPassword)
		var k struct {
			ID  string `json:"id"`
			Key string `json:"key"`
		}
		var sp idOnly
		e.must("POST", "/iam/service-principals", map[string]string{"name": "devs-bot"}, fourth, 201, &sp)
		e.must("POST", "/api/auth/service-keys", map[string]any{"servicePrincipalId": sp.ID, "name": "devs-key"}, fourth, 201, &k)
		devKey := cred{key: k.Key, name: "dev's key"}
		if code := status(devKey); code != 200 {
			t.Fatalf("dev's key before revocation: %d", code)
		}
		e.admin = e.signIn("admin@example.com", testPassword) // its session idled out meanwhile
		var out struct {
			UserID          string `json:"userId"`
			SessionsRevoked int64  `json:"sessionsRevoked"`
			KeysRevoked     int64  `json:"keysRevoked"`
		}
		e.must("POST", "/iam/users/"+userID+"/revoke-credentials", nil, e.admin, 200, &out)
		if diff := cmp.Diff(struct {
			UserID          string `json:"userId"`
			SessionsRevoked int64  `json:"sessionsRevoked"`
			KeysRevoked     int64  `json:"keysRevoked"`
		}{userID, 2, 1}, out); diff != "" { // the idled-out session row and the fourth
			t.Errorf("revoke-credentials (-want +got):\n%s", diff)
		}
		if code := status(fourth); code != 401 {
			t.Errorf("session after revoke-credentials: %d; want 401", code)
		}
		if code := status(devKey); code != 401 {
			t.Errorf("key after revoke-credentials: %d; want 401", code)
		}
		if code := status(e.admin); code != 200 {
			t.Errorf("the administrator's own session: %d; want 200", code)
		}
		// Callers without the grant get 403: TestAuthorizationMatrix.

		// Audited.
		sys := authz.WithSubject(t.Context(), authz.SystemSubject(authz.SystemAudit))
		for action, want := range map[string]int{"openclaw.auth.sessions.revoke": 1, "openclaw.iam.users.revoke_credentials": 1} {
			evs, err := st.ListAuditEvents(sys, store.AuditFilter{Action: action}, nil, 10)
			if err != nil {
				t.Fatal(err)
			}
			if len(evs) != want {
				t.Errorf("%s events = %d; want %d", action, len(evs), want)
			}
		}
	})
}

// TestAPIKeyLastUseRecorded: a key's last use reaches the database, at
// most once a minute.
func TestAPIKeyLastUseRecorded(t *testing.T) {
	st := testdb.SQLite(t)
	e := newEnv(t, st)
	_, keyID, key := e.principal("ci", authz.RoleAdministratorID, "")
	sys := authz.WithSubject(t.Context(), authz.SystemSubject(authz.SystemAuthn))
	lastUse := func() *time.Time {
		k, err := st.GetAPIKey(sys, keyID)
		if err != nil {
			t.Fatal(err)
		}
		return k.LastUsedAt
	}
	if lu := lastUse(); lu != nil {
		t.Fatalf("unused key has last use %v", lu)
	}
	e.must("GET", "/namespaces", nil, key, http.StatusOK, nil)
	t1 := e.clock.Now()
	e.clock.Advance(30 * time.Second)
	e.must("GET", "/namespaces", nil, key, http.StatusOK, nil)
	if lu := lastUse(); lu == nil || !lu.Equal(t1.UTC().Truncate(time.Microsecond)) {
		t.Errorf("last use after two uses 30 s apart = %v; want the first, %v", lu, t1)
	}
	e.clock.Advance(31 * time.Second)
	e.must("GET", "/namespaces", nil, key, http.StatusOK, nil)
	if lu := lastUse(); lu == nil || !lu.Equal(e.clock.Now().UTC().Truncate(time.Microsecond)) {
		t.Errorf("last use a minute later = %v; want %v", lu, e.clock.Now())
	}
}
