package authn_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/authn"
	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// TestRealStore runs sign-in, sessions and API keys against the SQL store
// (SQLite always, PostgreSQL when OCC_TEST_POSTGRES_URL is set), to catch
// what the in-package fake cannot: hash column sizes, case-insensitive email
// lookup, time round trips and NotFound mapping.
func TestRealStore(t *testing.T) {
	for _, tc := range []struct {
		name string
		open func(testing.TB) *sqlstore.Store
	}{
		{"sqlite", testdb.SQLite},
		{"postgres", testdb.Postgres},
	} {
		t.Run(tc.name, func(t *testing.T) { testRealStore(t, tc.open(t)) })
	}
}

func testRealStore(t *testing.T, db *sqlstore.Store) {
	ctx := t.Context()
	zone := time.FixedZone("UTC-03:00", -3*3600)
	now := time.Date(2026, 5, 4, 9, 30, 0, 0, zone)
	clock := func() time.Time { return now }

	const pw = "integration password"
	hash, err := authn.HashPassword(context.Background(), pw)
	if err != nil {
		t.Fatalf("HashPassword: %v", err)
	}
	userID := ids.New(ids.User)
	if err := db.CreateUser(ctx, store.User{ID: userID, Email: "Ops@Example.com", PasswordHash: hash, CreatedAt: now}); err != nil {
		t.Fatalf("CreateUser: %v", err)
	}
	sessions := authn.NewSessions(db, clock, time.Hour, true)
	a := authn.NewAuthenticator(db, clock, true)
	authenticate := func(cookie *http.Cookie, key *string) (*authz.Subject, error) {
		r := httptest.NewRequest(http.MethodGet, "/api/auth/session", nil)
		if cookie != nil {
			r.AddCookie(cookie)
		}
		if key != nil {
			r.Header.Set("x-api-key", *key)
		}
		s, _, err := a.Authenticate(r)
		return s, err
	}

	// Sessions.
	if _, _, err := sessions.SignIn(ctx, "ops@example.com", pw+"x"); !errkind.Is(err, errkind.Unauthenticated) {
		t.Errorf("SignIn with a wrong password = %v, want Unauthenticated", err)
	}
	if _, _, err := sessions.SignIn(ctx, "nobody@example.com", pw); !errkind.Is(err, errkind.Unauthenticated) {
		t.Errorf("SignIn with an unknown email = %v, want Unauthenticated", err)
	}
	cookie, _, err := sessions.SignIn(ctx, "OPS@example.com", pw)
	if err != nil {
		t.Fatalf("SignIn: %v", err)
	}
	wantUser := &authz.Subject{ID: userID, Kind: authz.KindUser, Credential: "session"}
	got, err := authenticate(cookie, nil)
	if got != nil && got.SessionID != "" {
		wantUser.SessionID = got.SessionID // random; its form is checked in sessions_test.go
	}
	if diff := cmp.Diff(wantUser, got); diff != "" || err != nil {
		t.Errorf("Authenticate(session cookie) err %v, mismatch (-want +got):\n%s", err, diff)
	}
	now = now.Add(time.Hour) // the session's expiry instant
	if got, err := authenticate(cookie, nil); got != nil || err != nil {
		t.Errorf("Authenticate(session at expiry) = %v, %v; want anonymous", got, err)
	}
	now = now.Add(-time.Minute)
	r := httptest.NewRequest(http.MethodPost, "/api/auth/sign-out", nil)
	r.AddCookie(cookie)
	if _, err := sessions.SignOut(ctx, r); err != nil {
		t.Fatalf("SignOut: %v", err)
	}
	if got, err := authenticate(cookie, nil); got != nil || err != nil {
		t.Errorf("Authenticate(signed-out cookie) = %v, %v; want anonymous", got, err)
	}
	if _, err := sessions.SignOut(ctx, r); err != nil {
		t.Errorf("second SignOut = %v, want nil", err)
	}

	// API keys.
	spID := ids.New(ids.ServicePrincipal)
	if err := db.CreateServicePrincipal(ctx, store.ServicePrincipal{ID: spID, Name: "ci", CreatedAt: now}); err != nil {
		t.Fatalf("CreateServicePrincipal: %v", err)
	}
	ttl, err := authn.ValidateExpiresIn(nil)
	if err != nil {
		t.Fatalf("ValidateExpiresIn: %v", err)
	}
	keyID, presented, secretHash := authn.NewAPIKey()
	key := store.APIKey{
		ID: keyID, ServicePrincipalID: spID, Name: "ci", SecretHash: secretHash,
		CreatedBy: userID, ExpiresAt: now.Add(ttl), CreatedAt: now,
	}
	if err := db.CreateAPIKey(ctx, key); err != nil {
		t.Fatalf("CreateAPIKey: %v", err)
	}
	wantSP := &authz.Subject{ID: spID, Kind: authz.KindServicePrincipal, Credential: "api_key:" + keyID}
	got, err = authenticate(nil, &presented)
	if diff := cmp.Diff(wantSP, got); diff != "" || err != nil {
		t.Errorf("Authenticate(api key) err %v, mismatch (-want +got):\n%s", err, diff)
	}
	_, unknown, _ := authn.NewAPIKey()
	if _, err := authenticate(nil, &unknown); !errkind.Is(err, errkind.Unauthenticated) {
		t.Errorf("Authenticate(unknown key) = %v, want Unauthenticated", err)
	}
	if err := db.RevokeAPIKey(ctx, keyID, now); err != nil {
		t.Fatalf("RevokeAPIKey: %v", err)
	}
	if _, err := authenticate(nil, &presented); !errkind.Is(err, errkind.Unauthenticated) {
		t.Errorf("Authenticate(revoked key) = %v, want Unauthenticated", err)
	}
}
