package storetest

import (
	"testing"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

var iamCases = []testCase{
	{"Role/CreateGetList", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		got, err := store.All(ctx(t), h.Store.ListRoles)
		must(t, "ListRoles", err)
		check(t, "ListRoles on an empty database", []store.Role{}, got)

		admin := store.Role{
			ID: ids.New(ids.Role), Name: "admin", Builtin: true, CreatedAt: at(f.now()),
			Permissions: []store.Permission{
				{Action: store.ActionAdminister, ResourceKind: store.KindInstallation},
				{Action: store.ActionReadLogs, ResourceKind: store.KindAgent},
			},
		}
		must(t, "CreateRole builtin", h.Store.CreateRole(ctx(t), admin))
		admin.CreatedAt = stored(admin.CreatedAt)
		nsRole := store.Role{
			ID: ids.New(ids.Role), NamespaceID: ids.New(ids.Namespace), Name: "viewer", CreatedAt: at(f.now()),
			Permissions: nil, // stored and returned as an empty list
		}
		must(t, "CreateRole without permissions", h.Store.CreateRole(ctx(t), nsRole))
		nsRole.CreatedAt, nsRole.Permissions = stored(nsRole.CreatedAt), []store.Permission{}

		for _, want := range []store.Role{admin, nsRole} {
			got, err := h.Store.GetRole(ctx(t), want.ID)
			must(t, "GetRole", err)
			check(t, "GetRole "+want.Name, want, got)
		}
		got, err = store.All(ctx(t), h.Store.ListRoles)
		must(t, "ListRoles", err)
		check(t, "ListRoles", []store.Role{admin, nsRole}, got)

		wantErr(t, "CreateRole with an existing id", h.Store.CreateRole(ctx(t), admin), errkind.Conflict, "")
		_, err = h.Store.GetRole(ctx(t), ids.New(ids.Role))
		wantErr(t, "GetRole unknown id", err, errkind.NotFound, "")
	}},
	{"Role/Delete", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		r := f.role()
		must(t, "DeleteRole", h.Store.DeleteRole(ctx(t), r.ID))
		_, err := h.Store.GetRole(ctx(t), r.ID)
		wantErr(t, "GetRole after DeleteRole", err, errkind.NotFound, "")
		wantErr(t, "DeleteRole again", h.Store.DeleteRole(ctx(t), r.ID), errkind.NotFound, "")
	}},
	{"Role/DeleteBuiltinConflicts", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		r := store.Role{ID: ids.New(ids.Role), Name: "owner", Builtin: true, CreatedAt: at(f.now())}
		must(t, "CreateRole", h.Store.CreateRole(ctx(t), r))
		wantErr(t, "DeleteRole of a built-in role", h.Store.DeleteRole(ctx(t), r.ID), errkind.Conflict, "")
		_, err := h.Store.GetRole(ctx(t), r.ID)
		must(t, "GetRole after refused delete", err)
	}},
	{"Role/DeleteBoundConflicts", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		r := f.role(store.Permission{Action: store.ActionRead, ResourceKind: store.KindNamespace})
		b := f.binding(ids.New(ids.User), r)
		wantErr(t, "DeleteRole while bound", h.Store.DeleteRole(ctx(t), r.ID), errkind.Conflict, "")
		must(t, "DeleteAccessBinding", h.Store.DeleteAccessBinding(ctx(t), b.ID))
		must(t, "DeleteRole once unbound", h.Store.DeleteRole(ctx(t), r.ID))
	}},
	{"AccessBinding/CreateGetListDelete", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		r := f.role(store.Permission{Action: store.ActionRead, ResourceKind: store.KindAgent})
		got, err := store.All(ctx(t), h.Store.ListAccessBindings)
		must(t, "ListAccessBindings", err)
		check(t, "ListAccessBindings on an empty database", []store.AccessBinding{}, got)

		nsID := ids.New(ids.Namespace)
		bindings := []store.AccessBinding{
			{ID: ids.New(ids.Binding), SubjectID: ids.New(ids.User), RoleID: r.ID, CreatedAt: at(f.now())},
			{ID: ids.New(ids.Binding), NamespaceID: nsID, SubjectID: ids.New(ids.User), RoleID: r.ID, CreatedAt: at(f.now())},
			{
				ID: ids.New(ids.Binding), NamespaceID: nsID, SubjectID: ids.New(ids.ServicePrincipal), RoleID: r.ID,
				ResourceKind: store.KindAgent, ResourceID: ids.New(ids.Agent), CreatedAt: at(f.now()),
			},
		}
		for i, b := range bindings {
			must(t, "CreateAccessBinding", h.Store.CreateAccessBinding(ctx(t), b))
			bindings[i].CreatedAt = stored(b.CreatedAt)
		}
		for _, want := range bindings {
			got, err := h.Store.GetAccessBinding(ctx(t), want.ID)
			must(t, "GetAccessBinding", err)
			check(t, "GetAccessBinding", want, got)
		}
		got, err = store.All(ctx(t), h.Store.ListAccessBindings)
		must(t, "ListAccessBindings", err)
		check(t, "ListAccessBindings", bindings, got)

		wantErr(t, "CreateAccessBinding with an existing id", h.Store.CreateAccessBinding(ctx(t), bindings[0]), errkind.Conflict, "")
		must(t, "DeleteAccessBinding", h.Store.DeleteAccessBinding(ctx(t), bindings[0].ID))
		_, err = h.Store.GetAccessBinding(ctx(t), bindings[0].ID)
		wantErr(t, "GetAccessBinding after delete", err, errkind.NotFound, "")
		wantErr(t, "DeleteAccessBinding again", h.Store.DeleteAccessBinding(ctx(t), bindings[0].ID), errkind.NotFound, "")
	}},
	{"AccessBinding/Invalid", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		r := f.role()
		tests := []struct {
			name string
			b    store.AccessBinding
			kind errkind.Kind
		}{
			{"unknown role", store.AccessBinding{ID: ids.New(ids.Binding), SubjectID: "usr_x", RoleID: ids.New(ids.Role), CreatedAt: at(1)}, errkind.Conflict},
			{"resource kind without id", store.AccessBinding{ID: ids.New(ids.Binding), SubjectID: "usr_x", RoleID: r.ID, ResourceKind: store.KindAgent, CreatedAt: at(1)}, errkind.Invalid},
			{"resource id without kind", store.AccessBinding{ID: ids.New(ids.Binding), SubjectID: "usr_x", RoleID: r.ID, ResourceID: ids.New(ids.Agent), CreatedAt: at(1)}, errkind.Invalid},
		}
		for _, tt := range tests {
			wantErr(t, "CreateAccessBinding "+tt.name, h.Store.CreateAccessBinding(ctx(t), tt.b), tt.kind, "")
		}
	}},
	{"Restriction/CreateGetListDelete", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		got, err := store.All(ctx(t), h.Store.ListRestrictions)
		must(t, "ListRestrictions", err)
		check(t, "ListRestrictions on an empty database", []store.Restriction{}, got)

		installationWide := f.restriction(ids.New(ids.User))
		exact := store.Restriction{
			ID: ids.New(ids.Restriction), NamespaceID: ids.New(ids.Namespace), SubjectID: ids.New(ids.ServicePrincipal),
			Action: store.ActionDeploy, ResourceKind: store.KindAgent, ResourceID: ids.New(ids.Agent),
			Effect:    "", // defaults to deny
			CreatedAt: at(f.now()),
		}
		must(t, "CreateRestriction", h.Store.CreateRestriction(ctx(t), exact))
		exact.Effect, exact.CreatedAt = "deny", stored(exact.CreatedAt)

		for _, want := range []store.Restriction{installationWide, exact} {
			got, err := h.Store.GetRestriction(ctx(t), want.ID)
			must(t, "GetRestriction", err)
			check(t, "GetRestriction", want, got)
		}
		got, err = store.All(ctx(t), h.Store.ListRestrictions)
		must(t, "ListRestrictions", err)
		check(t, "ListRestrictions", []store.Restriction{installationWide, exact}, got)

		allow := exact
		allow.ID, allow.Effect = ids.New(ids.Restriction), "allow"
		wantErr(t, "CreateRestriction with effect allow", h.Store.CreateRestriction(ctx(t), allow), errkind.Invalid, "")
		wantErr(t, "CreateRestriction with an existing id", h.Store.CreateRestriction(ctx(t), exact), errkind.Conflict, "")

		must(t, "DeleteRestriction", h.Store.DeleteRestriction(ctx(t), exact.ID))
		_, err = h.Store.GetRestriction(ctx(t), exact.ID)
		wantErr(t, "GetRestriction after delete", err, errkind.NotFound, "")
		wantErr(t, "DeleteRestriction again", h.Store.DeleteRestriction(ctx(t), exact.ID), errkind.NotFound, "")
	}},
	{"Grants/PerSubject", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		reader := f.role(store.Permission{Action: store.ActionRead, ResourceKind: store.KindAgent})
		deployer := f.role(
			store.Permission{Action: store.ActionDeploy, ResourceKind: store.KindAgent},
			store.Permission{Action: store.ActionOperate, ResourceKind: store.KindAgent},
		)
		subject, other := ids.New(ids.User), ids.New(ids.User)
		b1 := f.binding(subject, reader)
		f.binding(other, deployer)
		b2 := f.binding(subject, deployer)
		r1 := f.restriction(subject)
		f.restriction(other)

		grants, err := h.Store.ListGrants(ctx(t), subject)
		must(t, "ListGrants", err)
		check(t, "ListGrants", []store.Grant{
			{Binding: b1, Permissions: reader.Permissions},
			{Binding: b2, Permissions: deployer.Permissions},
		}, grants)
		restrictions, err := h.Store.ListSubjectRestrictions(ctx(t), subject)
		must(t, "ListSubjectRestrictions", err)
		check(t, "ListSubjectRestrictions", []store.Restriction{r1}, restrictions)

		nobody := ids.New(ids.User)
		grants, err = h.Store.ListGrants(ctx(t), nobody)
		must(t, "ListGrants for a subject without bindings", err)
		check(t, "ListGrants for a subject without bindings", []store.Grant{}, grants)
		restrictions, err = h.Store.ListSubjectRestrictions(ctx(t), nobody)
		must(t, "ListSubjectRestrictions for a subject without restrictions", err)
		check(t, "ListSubjectRestrictions for a subject without restrictions", []store.Restriction{}, restrictions)

		// ListAccess is both in one read, each in its own list's order (a
		// third binding and a second restriction, made later, check it).
		b3 := f.binding(subject, reader)
		r2 := f.restriction(subject)
		acc, err := h.Store.ListAccess(ctx(t), subject)
		must(t, "ListAccess", err)
		check(t, "ListAccess", store.Access{
			Grants: []store.Grant{
				{Binding: b1, Permissions: reader.Permissions},
				{Binding: b2, Permissions: deployer.Permissions},
				{Binding: b3, Permissions: reader.Permissions},
			},
			Restrictions: []store.Restriction{r1, r2},
		}, acc)
		grants, err = h.Store.ListGrants(ctx(t), subject)
		must(t, "ListGrants", err)
		restrictions, err = h.Store.ListSubjectRestrictions(ctx(t), subject)
		must(t, "ListSubjectRestrictions", err)
		check(t, "ListAccess against ListGrants and ListSubjectRestrictions", store.Access{Grants: grants, Restrictions: restrictions}, acc)
		acc, err = h.Store.ListAccess(ctx(t), nobody)
		must(t, "ListAccess for a subject with neither", err)
		check(t, "ListAccess for a subject with neither", store.Access{Grants: []store.Grant{}, Restrictions: []store.Restriction{}}, acc)
	}},
}
