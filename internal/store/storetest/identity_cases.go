package storetest

import (
	"testing"
	"time"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

var installationCases = []testCase{
	{"Installation/GetMissing", func(t *testing.T, h Harness) {
		_, err := h.Store.GetInstallation(ctx(t))
		wantErr(t, "GetInstallation on an empty database", err, errkind.NotFound, "")
	}},
	{"Installation/CreateGet", func(t *testing.T, h Harness) {
		in := store.Installation{ID: ids.New(ids.Installation), Name: "acme", CreatedAt: at(1)}
		must(t, "CreateInstallation", h.Store.CreateInstallation(ctx(t), in))
		got, err := h.Store.GetInstallation(ctx(t))
		must(t, "GetInstallation", err)
		want := in
		want.CreatedAt = stored(in.CreatedAt)
		check(t, "GetInstallation", want, got)
	}},
	{"Installation/SecondCreateConflicts", func(t *testing.T, h Harness) {
		first := store.Installation{ID: ids.New(ids.Installation), Name: "one", CreatedAt: at(1)}
		must(t, "CreateInstallation", h.Store.CreateInstallation(ctx(t), first))
		for _, in := range []store.Installation{
			{ID: ids.New(ids.Installation), Name: "two", CreatedAt: at(2)}, // another id
			first, // the same id again
		} {
			err := h.Store.CreateInstallation(ctx(t), in)
			wantErr(t, "CreateInstallation "+in.Name, err, errkind.Conflict, errkind.CodeInstallationExists)
		}
		got, err := h.Store.GetInstallation(ctx(t))
		must(t, "GetInstallation", err)
		if got.ID != first.ID {
			t.Errorf("GetInstallation().ID = %s, want the first installation %s", got.ID, first.ID)
		}
	}},
}

var identityCases = []testCase{
	{"User/CreateGetByIDAndEmail", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		u := f.user()
		got, err := h.Store.GetUser(ctx(t), u.ID)
		must(t, "GetUser", err)
		check(t, "GetUser", u, got)
		// Email lookups ignore case; the stored spelling is kept.
		for _, email := range []string{u.Email, "user1@example.com", "USER1@EXAMPLE.COM"} {
			got, err := h.Store.GetUserByEmail(ctx(t), email)
			must(t, "GetUserByEmail "+email, err)
			check(t, "GetUserByEmail "+email, u, got)
		}
	}},
	{"User/DuplicateEmailIgnoringCase", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		u := f.user()
		dup := store.User{ID: ids.New(ids.User), Email: "uSeR1@EXAMPLE.com", PasswordHash: "x", CreatedAt: at(9)}
		wantErr(t, "CreateUser with the same email in another case", h.Store.CreateUser(ctx(t), dup), errkind.Conflict, "")
		again := u
		again.Email = "other@example.com"
		wantErr(t, "CreateUser with an existing id", h.Store.CreateUser(ctx(t), again), errkind.Conflict, "")
	}},
	{"User/NotFound", func(t *testing.T, h Harness) {
		newFixture(t, h).user()
		_, err := h.Store.GetUser(ctx(t), ids.New(ids.User))
		wantErr(t, "GetUser unknown id", err, errkind.NotFound, "")
		_, err = h.Store.GetUserByEmail(ctx(t), "nobody@example.com")
		wantErr(t, "GetUserByEmail unknown email", err, errkind.NotFound, "")
	}},
	{"Session/CreateGetDelete", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		u := f.user()
		se := store.Session{ID: ids.New(ids.Session), TokenHash: hash32("token"), UserID: u.ID, ExpiresAt: at(100), CreatedAt: at(2)}
		must(t, "CreateSession", h.Store.CreateSession(ctx(t), se))
		got, err := h.Store.GetSession(ctx(t), se.TokenHash)
		must(t, "GetSession", err)
		want := se
		want.ExpiresAt, want.CreatedAt = stored(se.ExpiresAt), stored(se.CreatedAt)
		want.LastUsedAt = want.CreatedAt // a new session was last used when it was created
		check(t, "GetSession", want, got)

		wantErr(t, "CreateSession with an existing token hash", h.Store.CreateSession(ctx(t), se), errkind.Conflict, "")
		must(t, "DeleteSession", h.Store.DeleteSession(ctx(t), se.TokenHash))
		_, err = h.Store.GetSession(ctx(t), se.TokenHash)
		wantErr(t, "GetSession after DeleteSession", err, errkind.NotFound, "")
		wantErr(t, "DeleteSession again", h.Store.DeleteSession(ctx(t), se.TokenHash), errkind.NotFound, "")
	}},
	{"Session/UnknownUserConflicts", func(t *testing.T, h Harness) {
		se := store.Session{ID: ids.New(ids.Session), TokenHash: hash32("t"), UserID: ids.New(ids.User), ExpiresAt: at(10), CreatedAt: at(1)}
		wantErr(t, "CreateSession for a missing user", h.Store.CreateSession(ctx(t), se), errkind.Conflict, "")
	}},
	{"Session/DeleteExpired", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		u := f.user()
		now := at(50)
		sessions := map[string]time.Time{
			"past":    now.Add(-time.Hour),
			"exactly": now.Add(100 * time.Nanosecond), // equal to now once truncated: expired
			"future":  now.Add(time.Microsecond),
		}
		for name, exp := range sessions {
			se := store.Session{ID: ids.New(ids.Session), TokenHash: hash32(name), UserID: u.ID, ExpiresAt: exp, CreatedAt: at(1)}
			must(t, "CreateSession "+name, h.Store.CreateSession(ctx(t), se))
		}
		n, err := h.Store.DeleteExpiredSessions(ctx(t), now)
		must(t, "DeleteExpiredSessions", err)
		if n != 2 {
			t.Errorf("DeleteExpiredSessions() = %d, want 2", n)
		}
		for name, wantKept := range map[string]bool{"past": false, "exactly": false, "future": true} {
			_, err := h.Store.GetSession(ctx(t), hash32(name))
			if wantKept {
				must(t, "GetSession "+name, err)
			} else {
				wantErr(t, "GetSession "+name, err, errkind.NotFound, "")
			}
		}
		n, err = h.Store.DeleteExpiredSessions(ctx(t), now)
		must(t, "DeleteExpiredSessions again", err)
		if n != 0 {
			t.Errorf("second DeleteExpiredSessions() = %d, want 0", n)
		}
	}},
	{"Session/DeletedWithUser", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		u := f.user()
		se := store.Session{ID: ids.New(ids.Session), TokenHash: hash32("t"), UserID: u.ID, ExpiresAt: at(10), CreatedAt: at(1)}
		must(t, "CreateSession", h.Store.CreateSession(ctx(t), se))
		must(t, "delete user (raw)", rawExec(t, h, `DELETE FROM users WHERE id = ?`, u.ID))
		_, err := h.Store.GetSession(ctx(t), se.TokenHash)
		wantErr(t, "GetSession after its user was deleted", err, errkind.NotFound, "")
	}},
	{"Session/WithAccess", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		u, other, bare := f.user(), f.user(), f.user()
		reader := f.role(store.Permission{Action: store.ActionRead, ResourceKind: store.KindAgent})
		b1 := f.binding(u.ID, reader)
		f.binding(other.ID, reader)
		r1 := f.restriction(u.ID)
		f.restriction(other.ID)
		// The session's own row sorts between the user's grants: the
		// split must not depend on where it comes.
		se := store.Session{ID: ids.New(ids.Session), TokenHash: hash32("with access"), UserID: u.ID,
			ExpiresAt: at(1000), CreatedAt: at(f.now())}
		must(t, "CreateSession", h.Store.CreateSession(ctx(t), se))
		b2 := f.binding(u.ID, reader)
		// Stored last but created first: the grants come in creation
		// order, not in the order they were stored.
		b0 := store.AccessBinding{ID: ids.New(ids.Binding), SubjectID: u.ID, RoleID: reader.ID, CreatedAt: at(-1)}
		must(t, "CreateAccessBinding b0", h.Store.CreateAccessBinding(ctx(t), b0))
		b0.CreatedAt = stored(b0.CreatedAt)

		gotSession, gotAccess, err := h.Store.GetSessionAccess(ctx(t), se.TokenHash)
		must(t, "GetSessionAccess", err)
		wantSession, err := h.Store.GetSession(ctx(t), se.TokenHash)
		must(t, "GetSession", err)
		check(t, "GetSessionAccess's session against GetSession", wantSession, gotSession)
		check(t, "GetSessionAccess's access", store.Access{
			Grants: []store.Grant{{Binding: b0, Permissions: reader.Permissions}, {Binding: b1, Permissions: reader.Permissions},
				{Binding: b2, Permissions: reader.Permissions}},
			Restrictions: []store.Restriction{r1},
		}, gotAccess)
		wantAccess, err := h.Store.ListAccess(ctx(t), u.ID)
		must(t, "ListAccess", err)
		check(t, "GetSessionAccess's access against ListAccess", wantAccess, gotAccess)

		// A user with neither grants nor restrictions still has a session.
		bs := store.Session{ID: ids.New(ids.Session), TokenHash: hash32("bare"), UserID: bare.ID, ExpiresAt: at(1000), CreatedAt: at(f.now())}
		must(t, "CreateSession bare", h.Store.CreateSession(ctx(t), bs))
		gotSession, gotAccess, err = h.Store.GetSessionAccess(ctx(t), bs.TokenHash)
		must(t, "GetSessionAccess for a user without grants", err)
		if gotSession.ID != bs.ID || gotSession.UserID != bare.ID {
			t.Errorf("GetSessionAccess for a user without grants = session %s of %s, want %s of %s", gotSession.ID, gotSession.UserID, bs.ID, bare.ID)
		}
		check(t, "GetSessionAccess for a user without grants", store.Access{Grants: []store.Grant{}, Restrictions: []store.Restriction{}}, gotAccess)

		_, _, err = h.Store.GetSessionAccess(ctx(t), hash32("unknown"))
		wantErr(t, "GetSessionAccess unknown token", err, errkind.NotFound, "")
		must(t, "delete user (raw)", rawExec(t, h, `DELETE FROM users WHERE id = ?`, u.ID))
		_, _, err = h.Store.GetSessionAccess(ctx(t), se.TokenHash)
		wantErr(t, "GetSessionAccess after its user was deleted", err, errkind.NotFound, "")
	}},
	{"Session/ListAndDeleteOwn", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		u, other := f.user(), f.user()
		older := store.Session{ID: ids.New(ids.Session), TokenHash: hash32("a"), UserID: u.ID, ExpiresAt: at(100), CreatedAt: at(1)}
		newer := store.Session{ID: ids.New(ids.Session), TokenHash: hash32("b"), UserID: u.ID, ExpiresAt: at(100), CreatedAt: at(2), LastUsedAt: at(3)}
		theirs := store.Session{ID: ids.New(ids.Session), TokenHash: hash32("c"), UserID: other.ID, ExpiresAt: at(100), CreatedAt: at(1)}
		for _, se := range []store.Session{older, newer, theirs} {
			must(t, "CreateSession", h.Store.CreateSession(ctx(t), se))
		}
		norm := func(se store.Session) store.Session {
			if se.LastUsedAt.IsZero() {
				se.LastUsedAt = se.CreatedAt
			}
			se.ExpiresAt, se.CreatedAt, se.LastUsedAt = stored(se.ExpiresAt), stored(se.CreatedAt), stored(se.LastUsedAt)
			return se
		}
		got, err := h.Store.ListUserSessions(ctx(t), u.ID)
		must(t, "ListUserSessions", err)
		check(t, "ListUserSessions (newest first, only the user's)", []store.Session{norm(newer), norm(older)}, got)
		wantErr(t, "DeleteUserSession of another user's session", h.Store.DeleteUserSession(ctx(t), u.ID, theirs.ID), errkind.NotFound, "")
		must(t, "DeleteUserSession", h.Store.DeleteUserSession(ctx(t), u.ID, older.ID))
		wantErr(t, "DeleteUserSession again", h.Store.DeleteUserSession(ctx(t), u.ID, older.ID), errkind.NotFound, "")
		got, err = h.Store.ListUserSessions(ctx(t), u.ID)
		must(t, "ListUserSessions after delete", err)
		check(t, "ListUserSessions after delete", []store.Session{norm(newer)}, got)
		_, err = h.Store.GetSession(ctx(t), theirs.TokenHash)
		must(t, "the other user's session survives", err)
	}},
	{"Session/TouchAtMostOncePerInterval", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		u := f.user()
		se := store.Session{ID: ids.New(ids.Session), TokenHash: hash32("t"), UserID: u.ID, ExpiresAt: at(100), CreatedAt: at(10)}
		must(t, "CreateSession", h.Store.CreateSession(ctx(t), se))
		steps := []struct {
			at, notAfter time.Time
			want         bool
		}{
			{at(10), at(10), false},                       // last use at(10) is not older than at(10): at the limit, no write
			{at(11), at(10).Add(time.Microsecond), true},  // one past it: written
			{at(11), at(10).Add(time.Microsecond), false}, // a concurrent twin: already written
			{at(12), at(11).Add(time.Microsecond), true},
		}
		for i, s := range steps {
			wrote, err := h.Store.TouchSession(ctx(t), se.TokenHash, s.at, s.notAfter)
			must(t, "TouchSession", err)
			if wrote != s.want {
				t.Errorf("TouchSession step %d wrote = %v, want %v", i, wrote, s.want)
			}
		}
		got, err := h.Store.GetSession(ctx(t), se.TokenHash)
		must(t, "GetSession", err)
		check(t, "LastUsedAt after touches", stored(at(12)), got.LastUsedAt)
		wrote, err := h.Store.TouchSession(ctx(t), hash32("unknown"), at(13), at(13))
		must(t, "TouchSession unknown", err)
		if wrote {
			t.Error("TouchSession of an unknown session wrote")
		}
	}},
	{"APIKey/TouchAtMostOncePerInterval", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		sp := f.principal()
		key := store.APIKey{ID: ids.New(ids.APIKey), ServicePrincipalID: sp.ID, Name: "k", SecretHash: hash32("s"),
			CreatedBy: ids.New(ids.User), ExpiresAt: at(1000), CreatedAt: at(1)}
		must(t, "CreateAPIKey", h.Store.CreateAPIKey(ctx(t), key))
		got, err := h.Store.GetAPIKey(ctx(t), key.ID)
		must(t, "GetAPIKey", err)
		if got.LastUsedAt != nil {
			t.Errorf("new key LastUsedAt = %v, want nil", got.LastUsedAt)
		}
		for i, s := range []struct {
			at, notAfter time.Time
			want         bool
		}{
			{at(5), at(4), true},  // never used: written
			{at(5), at(4), false}, // at(5) is not older than at(4)
			{at(6), at(5), false}, // at(5) is not older than at(5): at the limit
			{at(6), at(5).Add(time.Microsecond), true},
		} {
			wrote, err := h.Store.TouchAPIKey(ctx(t), key.ID, s.at, s.notAfter)
			must(t, "TouchAPIKey", err)
			if wrote != s.want {
				t.Errorf("TouchAPIKey step %d wrote = %v, want %v", i, wrote, s.want)
			}
		}
		got, err = h.Store.GetAPIKey(ctx(t), key.ID)
		must(t, "GetAPIKey", err)
		check(t, "LastUsedAt", storedPtr(ptrTime(at(6))), got.LastUsedAt)
	}},
	{"APIKey/WithAccess", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		ns := f.namespace()
		sp, bare := f.principal(), f.principal()
		reader := f.role(store.Permission{Action: store.ActionRead, ResourceKind: store.KindAgent})
		b1 := f.binding(sp.ID, reader)
		f.binding(bare.ID+"-not", reader)
		r1 := f.restriction(sp.ID)
		revoked, used := at(f.now()), at(f.now())
		key := store.APIKey{ID: ids.New(ids.APIKey), ServicePrincipalID: sp.ID, NamespaceID: ns.ID, Name: "k", SecretHash: hash32("s"),
			CreatedBy: ids.New(ids.User), ExpiresAt: at(1000), CreatedAt: at(f.now()), RevokedAt: &revoked, LastUsedAt: &used}
		must(t, "CreateAPIKey", h.Store.CreateAPIKey(ctx(t), key))
		b2 := f.binding(sp.ID, reader)

		gotKey, gotSP, gotAccess, err := h.Store.GetAPIKeyAccess(ctx(t), key.ID)
		must(t, "GetAPIKeyAccess", err)
		wantKey, err := h.Store.GetAPIKey(ctx(t), key.ID)
		must(t, "GetAPIKey", err)
		check(t, "GetAPIKeyAccess's key against GetAPIKey", wantKey, gotKey)
		check(t, "GetAPIKeyAccess's principal", sp, gotSP)
		check(t, "GetAPIKeyAccess's access", store.Access{
			Grants:       []store.Grant{{Binding: b1, Permissions: reader.Permissions}, {Binding: b2, Permissions: reader.Permissions}},
			Restrictions: []store.Restriction{r1},
		}, gotAccess)
		wantAccess, err := h.Store.ListAccess(ctx(t), sp.ID)
		must(t, "ListAccess", err)
		check(t, "GetAPIKeyAccess's access against ListAccess", wantAccess, gotAccess)

		// A principal with neither grants nor restrictions, its key
		// unscoped and never used.
		bareKey := store.APIKey{ID: ids.New(ids.APIKey), ServicePrincipalID: bare.ID, Name: "b", SecretHash: hash32("b"),
			CreatedBy: ids.New(ids.User), ExpiresAt: at(1000), CreatedAt: at(f.now())}
		must(t, "CreateAPIKey bare", h.Store.CreateAPIKey(ctx(t), bareKey))
		gotKey, gotSP, gotAccess, err = h.Store.GetAPIKeyAccess(ctx(t), bareKey.ID)
		must(t, "GetAPIKeyAccess for a principal without grants", err)
		wantKey, err = h.Store.GetAPIKey(ctx(t), bareKey.ID)
		must(t, "GetAPIKey bare", err)
		check(t, "GetAPIKeyAccess's unscoped, unused key", wantKey, gotKey)
		check(t, "GetAPIKeyAccess's principal without grants", bare, gotSP)
		check(t, "GetAPIKeyAccess for a principal without grants", store.Access{Grants: []store.Grant{}, Restrictions: []store.Restriction{}}, gotAccess)

		_, _, _, err = h.Store.GetAPIKeyAccess(ctx(t), ids.New(ids.APIKey))
		wantErr(t, "GetAPIKeyAccess unknown key", err, errkind.NotFound, "")
		must(t, "DeleteServicePrincipal", h.Store.DeleteServicePrincipal(ctx(t), sp.ID))
		_, _, _, err = h.Store.GetAPIKeyAccess(ctx(t), key.ID)
		wantErr(t, "GetAPIKeyAccess after its principal was deleted", err, errkind.NotFound, "")
	}},
	{"User/RevokeCredentials", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		u, other := f.user(), f.user()
		sp := f.principal()
		for _, name := range []string{"a", "b"} {
			must(t, "CreateSession", h.Store.CreateSession(ctx(t), store.Session{ID: ids.New(ids.Session), TokenHash: hash32(name), UserID: u.ID, ExpiresAt: at(100), CreatedAt: at(1)}))
		}
		must(t, "CreateSession other", h.Store.CreateSession(ctx(t), store.Session{ID: ids.New(ids.Session), TokenHash: hash32("o"), UserID: other.ID, ExpiresAt: at(100), CreatedAt: at(1)}))
		revokedEarlier := at(2)
		keys := map[string]store.APIKey{}
		for name, k := range map[string]struct {
			by      string
			revoked *time.Time
		}{"mine": {u.ID, nil}, "mine-revoked": {u.ID, &revokedEarlier}, "theirs": {other.ID, nil}} {
			key := store.APIKey{ID: ids.New(ids.APIKey), ServicePrincipalID: sp.ID, Name: name, SecretHash: hash32(name),
				CreatedBy: k.by, ExpiresAt: at(1000), CreatedAt: at(1), RevokedAt: k.revoked}
			must(t, "CreateAPIKey", h.Store.CreateAPIKey(ctx(t), key))
			keys[name] = key
		}
		ns, nk, err := h.Store.RevokeUserCredentials(ctx(t), u.ID, at(20))
		must(t, "RevokeUserCredentials", err)
		if ns != 2 || nk != 1 {
			t.Errorf("RevokeUserCredentials = %d sessions, %d keys; want 2, 1", ns, nk)
		}
		left, err := h.Store.ListUserSessions(ctx(t), u.ID)
		must(t, "ListUserSessions", err)
		check(t, "the user's sessions after revocation", []store.Session{}, left)
		for name, want := range map[string]*time.Time{"mine": storedPtr(ptrTime(at(20))), "mine-revoked": storedPtr(&revokedEarlier), "theirs": nil} {
			got, err := h.Store.GetAPIKey(ctx(t), keys[name].ID)
			must(t, "GetAPIKey "+name, err)
			check(t, "RevokedAt of "+name, want, got.RevokedAt)
		}
		_, err = h.Store.GetSession(ctx(t), hash32("o"))
		must(t, "the other user's session survives", err)
		_, _, err = h.Store.RevokeUserCredentials(ctx(t), ids.New(ids.User), at(21))
		wantErr(t, "RevokeUserCredentials of an unknown user", err, errkind.NotFound, "")
	}},
	{"ServicePrincipal/CreateGetList", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		got, err := store.All(ctx(t), h.Store.ListServicePrincipals)
		must(t, "ListServicePrincipals", err)
		check(t, "ListServicePrincipals on an empty database", []store.ServicePrincipal{}, got)

		plain := f.principal()
		scoped := store.ServicePrincipal{
			ID: ids.New(ids.ServicePrincipal), Name: "agent-owned", NamespaceID: ids.New(ids.Namespace),
			AgentID: ids.New(ids.Agent), CreatedAt: at(f.now()),
		}
		must(t, "CreateServicePrincipal", h.Store.CreateServicePrincipal(ctx(t), scoped))
		scoped.CreatedAt = stored(scoped.CreatedAt)

		for _, want := range []store.ServicePrincipal{plain, scoped} {
			got, err := h.Store.GetServicePrincipal(ctx(t), want.ID)
			must(t, "GetServicePrincipal", err)
			check(t, "GetServicePrincipal "+want.Name, want, got)
		}
		got, err = store.All(ctx(t), h.Store.ListServicePrincipals)
		must(t, "ListServicePrincipals", err)
		check(t, "ListServicePrincipals", []store.ServicePrincipal{plain, scoped}, got)

		wantErr(t, "CreateServicePrincipal with an existing id", h.Store.CreateServicePrincipal(ctx(t), plain), errkind.Conflict, "")
		_, err = h.Store.GetServicePrincipal(ctx(t), ids.New(ids.ServicePrincipal))
		wantErr(t, "GetServicePrincipal unknown id", err, errkind.NotFound, "")
	}},
	{"ServicePrincipal/DeleteCascades", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		sp, other := f.principal(), f.principal()
		r := f.role(store.Permission{Action: store.ActionRead, ResourceKind: store.KindAgent})
		key := store.APIKey{
			ID: ids.New(ids.APIKey), ServicePrincipalID: sp.ID, Name: "k", SecretHash: hash32("s"),
			CreatedBy: ids.New(ids.User), ExpiresAt: at(1000), CreatedAt: at(f.now()),
		}
		must(t, "CreateAPIKey", h.Store.CreateAPIKey(ctx(t), key))
		spBinding, otherBinding := f.binding(sp.ID, r), f.binding(other.ID, r)
		spRestriction, otherRestriction := f.restriction(sp.ID), f.restriction(other.ID)

		must(t, "DeleteServicePrincipal", h.Store.DeleteServicePrincipal(ctx(t), sp.ID))

		_, err := h.Store.GetServicePrincipal(ctx(t), sp.ID)
		wantErr(t, "GetServicePrincipal after delete", err, errkind.NotFound, "")
		_, err = h.Store.GetAPIKey(ctx(t), key.ID)
		wantErr(t, "GetAPIKey of the deleted principal", err, errkind.NotFound, "")
		_, err = h.Store.GetAccessBinding(ctx(t), spBinding.ID)
		wantErr(t, "GetAccessBinding of the deleted principal", err, errkind.NotFound, "")
		_, err = h.Store.GetRestriction(ctx(t), spRestriction.ID)
		wantErr(t, "GetRestriction of the deleted principal", err, errkind.NotFound, "")

		// Other subjects keep theirs, and the role survives.
		bindings, err := store.All(ctx(t), h.Store.ListAccessBindings)
		must(t, "ListAccessBindings", err)
		check(t, "ListAccessBindings after delete", []store.AccessBinding{otherBinding}, bindings)
		restrictions, err := store.All(ctx(t), h.Store.ListRestrictions)
		must(t, "ListRestrictions", err)
		check(t, "ListRestrictions after delete", []store.Restriction{otherRestriction}, restrictions)
		_, err = h.Store.GetRole(ctx(t), r.ID)
		must(t, "GetRole after principal delete", err)

		wantErr(t, "DeleteServicePrincipal again", h.Store.DeleteServicePrincipal(ctx(t), sp.ID), errkind.NotFound, "")
	}},
	{"APIKey/CreateGetRevoke", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		sp := f.principal()
		key := store.APIKey{
			ID: ids.New(ids.APIKey), ServicePrincipalID: sp.ID, NamespaceID: ids.New(ids.Namespace), Name: "ci",
			SecretHash: hash32("secret"), CreatedBy: ids.New(ids.User), ExpiresAt: at(5000), CreatedAt: at(f.now()),
		}
		must(t, "CreateAPIKey", h.Store.CreateAPIKey(ctx(t), key))
		want := key
		want.ExpiresAt, want.CreatedAt = stored(key.ExpiresAt), stored(key.CreatedAt)
		got, err := h.Store.GetAPIKey(ctx(t), key.ID)
		must(t, "GetAPIKey", err)
		check(t, "GetAPIKey", want, got)

		first, second := at(20), at(30)
		must(t, "RevokeAPIKey", h.Store.RevokeAPIKey(ctx(t), key.ID, first))
		must(t, "RevokeAPIKey again", h.Store.RevokeAPIKey(ctx(t), key.ID, second))
		want.RevokedAt = storedPtr(&first) // the first revocation time is kept
		got, err = h.Store.GetAPIKey(ctx(t), key.ID)
		must(t, "GetAPIKey after revoke", err)
		check(t, "GetAPIKey after two revocations", want, got)

		wantErr(t, "RevokeAPIKey unknown id", h.Store.RevokeAPIKey(ctx(t), ids.New(ids.APIKey), first), errkind.NotFound, "")
		_, err = h.Store.GetAPIKey(ctx(t), ids.New(ids.APIKey))
		wantErr(t, "GetAPIKey unknown id", err, errkind.NotFound, "")
		wantErr(t, "CreateAPIKey with an existing id", h.Store.CreateAPIKey(ctx(t), key), errkind.Conflict, "")
	}},
	{"APIKey/CreatedRevoked", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		sp := f.principal()
		revoked := at(7)
		key := store.APIKey{
			ID: ids.New(ids.APIKey), ServicePrincipalID: sp.ID, Name: "old", SecretHash: hash32("s"),
			CreatedBy: ids.New(ids.User), ExpiresAt: at(100), RevokedAt: &revoked, CreatedAt: at(5),
		}
		must(t, "CreateAPIKey", h.Store.CreateAPIKey(ctx(t), key))
		got, err := h.Store.GetAPIKey(ctx(t), key.ID)
		must(t, "GetAPIKey", err)
		want := key
		want.ExpiresAt, want.RevokedAt, want.CreatedAt = stored(key.ExpiresAt), storedPtr(key.RevokedAt), stored(key.CreatedAt)
		check(t, "GetAPIKey", want, got)
	}},
	{"APIKey/UnknownPrincipalConflicts", func(t *testing.T, h Harness) {
		key := store.APIKey{
			ID: ids.New(ids.APIKey), ServicePrincipalID: ids.New(ids.ServicePrincipal), Name: "k",
			SecretHash: hash32("s"), CreatedBy: ids.New(ids.User), ExpiresAt: at(100), CreatedAt: at(1),
		}
		wantErr(t, "CreateAPIKey for a missing principal", h.Store.CreateAPIKey(ctx(t), key), errkind.Conflict, "")
	}},
}

func ptrTime(t time.Time) *time.Time { return &t }
