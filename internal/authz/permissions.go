package authz

import (
	"slices"

	"github.com/openclaw/occ/internal/store"
)

// Table is the permission table: for each resource kind, the actions that
// may be granted on it. No action implies another; in particular
// "administer" on the installation is its own action, not a superset.
// docs/authorization.md is generated from the same data by hand and a test
// keeps the two in step.
var Table = map[store.ResourceKind][]store.Action{
	store.KindInstallation:   {store.ActionRead, store.ActionAdminister},
	store.KindNamespace:      {store.ActionCreate, store.ActionRead, store.ActionDelete},
	store.KindConfiguration:  {store.ActionCreate, store.ActionRead, store.ActionUpdate, store.ActionDelete},
	store.KindServiceAccount: {store.ActionCreate, store.ActionRead, store.ActionUpdate, store.ActionDelete},
	store.KindAgent: {store.ActionCreate, store.ActionRead, store.ActionUpdate, store.ActionDelete,
		store.ActionDeploy, store.ActionOperate, store.ActionAdminister, store.ActionReadLogs},
	store.KindAgentRevision: {store.ActionRead},
}

// Supported reports whether action may be granted on kind.
func Supported(kind store.ResourceKind, action store.Action) bool {
	return slices.Contains(Table[kind], action)
}

// AllPermissions lists every supported (action, kind) pair in a stable
// order; the built-in administrator role holds all of them.
func AllPermissions() []store.Permission {
	kinds := []store.ResourceKind{store.KindInstallation, store.KindNamespace, store.KindConfiguration,
		store.KindServiceAccount, store.KindAgent, store.KindAgentRevision}
	var out []store.Permission
	for _, k := range kinds {
		for _, a := range Table[k] {
			out = append(out, store.Permission{Action: a, ResourceKind: k})
		}
	}
	return out
}

// Built-in roles created at bootstrap. Their ids are fixed so that bindings
// can name them in documentation and tests.
const (
	RoleAdministratorID = "role_00000000-0000-4000-8000-000000000001"
	RoleEditorID        = "role_00000000-0000-4000-8000-000000000002"
	RoleViewerID        = "role_00000000-0000-4000-8000-000000000003"
)

// BuiltinRoles returns the roles every installation starts with.
//   - administrator: every permission, including installation administer.
//   - editor: everything on Namespace contents (configurations, agents,
//     service accounts), but no installation administration.
//   - viewer: read on every kind.
func BuiltinRoles() []store.Role {
	var editor, viewer []store.Permission
	for _, p := range AllPermissions() {
		if p.Action == store.ActionRead {
			viewer = append(viewer, p)
		}
		if p.ResourceKind != store.KindInstallation && p.ResourceKind != store.KindNamespace {
			editor = append(editor, p)
		} else if p.Action == store.ActionRead {
			editor = append(editor, p)
		}
	}
	return []store.Role{
		{ID: RoleAdministratorID, Name: "administrator", Permissions: AllPermissions(), Builtin: true},
		{ID: RoleEditorID, Name: "editor", Permissions: editor, Builtin: true},
		{ID: RoleViewerID, Name: "viewer", Permissions: viewer, Builtin: true},
	}
}
