package server_test

import (
	"fmt"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// TestCreateUserRefusedBeforeTheHash checks that POST /iam/users decides
// who may call it before it looks at the password: a caller without
// installation administer gets 403 whatever the password (a weak one
// would otherwise answer 400 and name the policy, a good one would spend
// a hashing slot first), and a service key, even an administrator's,
// gets 401, as the reference refuses keys for account creation. None of
// them creates a user.
func TestCreateUserRefusedBeforeTheHash(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		e := newEnv(t, st)
		viewerID, viewer := e.user("viewer@example.com", authz.RoleViewerID)
		keyID, _, adminKey := e.principal("admin-key", authz.RoleAdministratorID, "")
		cases := []struct {
			name     string
			c        cred
			password string
			want     int
			code     string
		}{
			{"viewer, weak password", viewer, "short", 403, "FORBIDDEN"},
			{"viewer, good password", viewer, testPassword, 403, "FORBIDDEN"},
			{"administrator's key, weak password", adminKey, "short", 401, "UNAUTHENTICATED"},
			{"administrator's key, good password", adminKey, testPassword, 401, "UNAUTHENTICATED"},
			{"anonymous", cred{}, testPassword, 401, "UNAUTHENTICATED"},
		}
		for i, tc := range cases {
			email := fmt.Sprintf("new-%d@example.com", i)
			code, env, _ := e.do("POST", "/iam/users", map[string]string{"email": email, "password": tc.password}, tc.c)
			if diff := cmp.Diff([]any{tc.want, tc.code}, []any{code, env.Error.Code}); diff != "" {
				t.Errorf("%s: POST /iam/users (-want +got):\n%s", tc.name, diff)
			}
			if tc.password == testPassword {
				if code, _, _ := e.do("POST", "/api/auth/sign-in/email", map[string]string{"email": email, "password": tc.password}, cred{}); code != 401 {
					t.Errorf("%s: signing in as the refused user answered %d, want 401", tc.name, code)
				}
			}
		}
		// Each refusal by a signed-in caller is audited with its reason.
		for _, who := range []struct{ id, reason string }{{viewerID, "NO_GRANT"}, {keyID, "CREDENTIAL_NOT_ALLOWED"}} {
			var page struct {
				Items []struct {
					Action     string `json:"action"`
					Outcome    string `json:"outcome"`
					ReasonCode string `json:"reasonCode"`
				} `json:"items"`
			}
			e.must("GET", "/audit-events?kind=authorization_denial&actorId="+who.id, nil, e.admin, 200, &page)
			type row struct{ Action, Outcome, Reason string }
			var got []row
			for _, it := range page.Items {
				got = append(got, row{it.Action, it.Outcome, it.ReasonCode})
			}
			want := []row{{"openclaw.installation.administer", "denied", who.reason}, {"openclaw.installation.administer", "denied", who.reason}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("denials of %s (-want +got):\n%s", who.id, diff)
			}
		}
		// The administrator's session still creates users.
		e.must("POST", "/iam/users", map[string]string{"email": "made@example.com", "password": testPassword}, e.admin, 201, nil)
	})
}
