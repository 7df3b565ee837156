package occ

import (
	"context"
	"fmt"
	"unicode/utf8"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// Audit actions for IAM.
const (
	ActionRoleCreate        = "openclaw.iam.roles.create"
	ActionRoleDelete        = "openclaw.iam.roles.delete"
	ActionBindingCreate     = "openclaw.iam.access_bindings.create"
	ActionBindingDelete     = "openclaw.iam.access_bindings.delete"
	ActionRestrictionCreate = "openclaw.iam.restrictions.create"
	ActionRestrictionDelete = "openclaw.iam.restrictions.delete"
)

// MaxRolePermissions bounds one role's permission list.
const MaxRolePermissions = 64

// RoleInput describes a new role.
type RoleInput struct {
	Name        string
	NamespaceID string
	Permissions []store.Permission
}

// CreateRole creates a custom role; each permission must be in the
// permission table.
func (s *Service) CreateRole(ctx context.Context, in RoleInput) (store.Role, error) {
	if err := validateName("/name", in.Name); err != nil {
		return store.Role{}, err
	}
	if len(in.Permissions) == 0 {
		return store.Role{}, errkind.InvalidDetails("A role needs at least one permission.", errkind.Detail{Path: "/permissions", Code: errkind.DetailRequired})
	}
	if len(in.Permissions) > MaxRolePermissions {
		return store.Role{}, errkind.InvalidDetails("A role has at most 64 permissions.", errkind.Detail{Path: "/permissions", Code: errkind.DetailTooLong})
	}
	var details []errkind.Detail
	for i, p := range in.Permissions {
		if !authz.Supported(p.ResourceKind, p.Action) {
			details = append(details, errkind.Detail{Path: fmt.Sprintf("/permissions/%d", i), Code: errkind.DetailInvalidValue})
		}
	}
	if len(details) > 0 {
		return store.Role{}, errkind.InvalidDetails("A permission is not in the permission table.", details...)
	}
	r := store.Role{ID: ids.New(ids.Role), NamespaceID: in.NamespaceID, Name: in.Name, Permissions: in.Permissions, CreatedAt: s.clock()}
	err := s.store.InTx(ctx, func(tx store.Store) error {
		if err := requireAdmin(ctx, tx); err != nil {
			return err
		}
		if r.NamespaceID != "" {
			if _, err := tx.GetNamespace(ctx, r.NamespaceID); err != nil {
				return invalidRef("/namespaceId", err)
			}
		}
		if err := tx.CreateRole(ctx, r); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionRoleCreate, store.AuditResource{Kind: store.KindRole, ID: r.ID, NamespaceID: r.NamespaceID},
			map[string]string{"name": r.Name})
	})
	return r, err
}

// invalidRef turns "the referenced thing does not exist" into a 400 at the
// field that named it; other errors pass through.
func invalidRef(path string, err error) error {
	if errkind.Is(err, errkind.NotFound) {
		return errkind.InvalidDetails("The referenced resource does not exist.", errkind.Detail{Path: path, Code: errkind.DetailInvalidValue})
	}
	return err
}

// ListRoles, GetRole and DeleteRole manage roles.
func (s *Service) ListRoles(ctx context.Context, q PageQuery) (Page[store.Role], error) {
	return paged(q, func(p store.PageRequest) (store.Page[store.Role], error) { return s.store.ListRoles(ctx, p) })
}

func (s *Service) GetRole(ctx context.Context, id string) (store.Role, error) {
	return s.store.GetRole(ctx, id)
}

func (s *Service) DeleteRole(ctx context.Context, id string) error {
	return s.store.InTx(ctx, func(tx store.Store) error {
		r, err := tx.GetRole(ctx, id)
		if err != nil {
			return err
		}
		if err := tx.DeleteRole(ctx, id); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionRoleDelete, store.AuditResource{Kind: store.KindRole, ID: id, NamespaceID: r.NamespaceID},
			map[string]string{"name": r.Name})
	})
}

// ScopeInput is the scope of a binding or restriction: nothing
// (installation-wide), a Namespace, or one exact resource in a Namespace.
type ScopeInput struct {
	NamespaceID  string
	ResourceKind store.ResourceKind
	ResourceID   string
}

// maxScopeIDLen bounds a scope's resource id, in characters (code points).
const maxScopeIDLen = 200

// validateScope checks scope consistency and that the scoped objects exist
// in the scope's Namespace. An exact resource must belong to the Namespace
// the scope names (none, for an installation-level service principal):
// ids do not say where they live, and a binding of a Namespace's role "in
// Namespace A" on the id of something in B would otherwise reach into B.
// The authorizer also refuses such a grant (bindingCovers); refusing it
// here keeps it from being stored at all.
func validateScope(ctx context.Context, tx store.Store, sc ScopeInput) error {
	// An exact resource's id: at most 200 characters, as the reference
	// bounds IAM ids (checked before the id is looked up).
	if utf8.RuneCountInString(sc.ResourceID) > maxScopeIDLen {
		return errkind.InvalidDetails("The resource id must be at most 200 characters.", errkind.Detail{Path: "/resourceId", Code: errkind.DetailTooLong})
	}
	if (sc.ResourceKind == "") != (sc.ResourceID == "") {
		return errkind.InvalidDetails("resourceKind and resourceId go together.", errkind.Detail{Path: "/resourceId", Code: errkind.DetailRequired})
	}
	if sc.ResourceKind != "" {
		if _, ok := authz.Table[sc.ResourceKind]; !ok || sc.ResourceKind == store.KindInstallation {
			return errkind.InvalidDetails("The resource kind cannot be scoped to.", errkind.Detail{Path: "/resourceKind", Code: errkind.DetailInvalidValue})
		}
		if sc.NamespaceID == "" && sc.ResourceKind != store.KindServiceAccount {
			return errkind.InvalidDetails("An exact resource scope needs its namespaceId.", errkind.Detail{Path: "/namespaceId", Code: errkind.DetailRequired})
		}
	}
	if sc.NamespaceID != "" {
		if _, err := tx.GetNamespace(ctx, sc.NamespaceID); err != nil {
			return invalidRef("/namespaceId", err)
		}
	}
	var err error
	switch sc.ResourceKind {
	case store.KindNamespace:
		if sc.ResourceID != sc.NamespaceID {
			return errkind.InvalidDetails("A Namespace scope names the same Namespace.", errkind.Detail{Path: "/resourceId", Code: errkind.DetailInvalidValue})
		}
	case store.KindConfiguration:
		_, err = tx.GetConfiguration(ctx, sc.NamespaceID, sc.ResourceID)
	case store.KindAgent:
		_, err = tx.GetAgent(ctx, sc.NamespaceID, sc.ResourceID)
	case store.KindServiceAccount:
		var sp store.ServicePrincipal
		sp, err = tx.GetServicePrincipal(ctx, sc.ResourceID)
		if err == nil && sp.NamespaceID != sc.NamespaceID {
			return errOutsideScope()
		}
	case store.KindAgentRevision:
		err = revisionInNamespace(ctx, tx, sc.NamespaceID, sc.ResourceID)
	}
	return invalidRef("/resourceId", err)
}

func errOutsideScope() error {
	return errkind.InvalidDetails("The resource does not belong to the scope's Namespace.", errkind.Detail{Path: "/resourceId", Code: errkind.DetailInvalidValue})
}

// revisionInNamespace looks up the revision id of the Namespace. A
// revision is addressed by its Agent, which a scope does not name; its
// deployment work, created with it in one transaction (Deploy) and never
// removed without it, names the Agent. NotFound when either is missing or
// the revision is another Namespace's.
func revisionInNamespace(ctx context.Context, tx store.Store, namespaceID, id string) error {
	w, err := tx.GetWorkByKey(ctx, DeploymentWorkKey(id))
	if err != nil {
		return err
	}
	if w.Kind != store.WorkRevisionDeploy || w.RevisionID != id || w.NamespaceID != namespaceID {
		return errkind.New(errkind.NotFound, "The requested resource was not found.")
	}
	_, err = tx.GetRevision(ctx, namespaceID, w.AgentID, id)
	return err
}

// subjectExists checks that id names a user or service principal.
func subjectExists(ctx context.Context, tx store.Store, id string) error {
	var err error
	switch {
	case ids.Valid(ids.User, id):
		_, err = tx.GetUser(ctx, id)
	case ids.Valid(ids.ServicePrincipal, id):
		_, err = tx.GetServicePrincipal(ctx, id)
	default:
		return errkind.InvalidDetails("The subject must be a user or service principal id.", errkind.Detail{Path: "/subjectId", Code: errkind.DetailInvalidFormat})
	}
	return invalidRef("/subjectId", err)
}

// BindingInput describes a new access binding.
type BindingInput struct {
	SubjectID string
	RoleID    string
	Scope     ScopeInput
}

// CreateAccessBinding grants a role. A Namespace role can only be bound
// inside its own Namespace.
func (s *Service) CreateAccessBinding(ctx context.Context, in BindingInput) (store.AccessBinding, error) {
	b := store.AccessBinding{ID: ids.New(ids.Binding), NamespaceID: in.Scope.NamespaceID, SubjectID: in.SubjectID,
		RoleID: in.RoleID, ResourceKind: in.Scope.ResourceKind, ResourceID: in.Scope.ResourceID, CreatedAt: s.clock()}
	err := s.store.InTx(ctx, func(tx store.Store) error {
		if err := requireAdmin(ctx, tx); err != nil {
			return err
		}
		role, err := tx.GetRole(ctx, in.RoleID)
		if err != nil {
			return invalidRef("/roleId", err)
		}
		if role.NamespaceID != "" && role.NamespaceID != in.Scope.NamespaceID {
			return errkind.InvalidDetails("A Namespace role can only be bound in its Namespace.", errkind.Detail{Path: "/namespaceId", Code: errkind.DetailInvalidValue})
		}
		if err := subjectExists(ctx, tx, in.SubjectID); err != nil {
			return err
		}
		if err := validateScope(ctx, tx, in.Scope); err != nil {
			return err
		}
		if err := tx.CreateAccessBinding(ctx, b); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionBindingCreate, store.AuditResource{Kind: store.KindAccessBinding, ID: b.ID, NamespaceID: b.NamespaceID},
			map[string]string{"subjectId": b.SubjectID, "roleId": b.RoleID, "resourceKind": string(b.ResourceKind), "resourceId": b.ResourceID})
	})
	return b, err
}

func (s *Service) ListAccessBindings(ctx context.Context, q PageQuery) (Page[store.AccessBinding], error) {
	return paged(q, func(p store.PageRequest) (store.Page[store.AccessBinding], error) {
		return s.store.ListAccessBindings(ctx, p)
	})
}

func (s *Service) DeleteAccessBinding(ctx context.Context, id string) error {
	return s.store.InTx(ctx, func(tx store.Store) error {
		b, err := tx.GetAccessBinding(ctx, id)
		if err != nil {
			return err
		}
		if err := tx.DeleteAccessBinding(ctx, id); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionBindingDelete, store.AuditResource{Kind: store.KindAccessBinding, ID: id, NamespaceID: b.NamespaceID},
			map[string]string{"subjectId": b.SubjectID, "roleId": b.RoleID})
	})
}

// RestrictionInput describes a new deny restriction.
type RestrictionInput struct {
	SubjectID    string
	Action       store.Action
	ResourceKind store.ResourceKind
	Scope        ScopeInput // Scope.ResourceKind, when set, must equal ResourceKind
}

// CreateRestriction denies one action to a subject; it wins over grants.
func (s *Service) CreateRestriction(ctx context.Context, in RestrictionInput) (store.Restriction, error) {
	if !authz.Supported(in.ResourceKind, in.Action) {
		return store.Restriction{}, errkind.InvalidDetails("The action is not in the permission table for that kind.", errkind.Detail{Path: "/action", Code: errkind.DetailInvalidValue})
	}
	if in.Scope.ResourceKind != "" && in.Scope.ResourceKind != in.ResourceKind {
		return store.Restriction{}, errkind.InvalidDetails("An exact restriction names a resource of its own kind.", errkind.Detail{Path: "/resourceId", Code: errkind.DetailInvalidValue})
	}
	r := store.Restriction{ID: ids.New(ids.Restriction), NamespaceID: in.Scope.NamespaceID, SubjectID: in.SubjectID, Action: in.Action,
		ResourceKind: in.ResourceKind, ResourceID: in.Scope.ResourceID, Effect: "deny", CreatedAt: s.clock()}
	err := s.store.InTx(ctx, func(tx store.Store) error {
		if err := requireAdmin(ctx, tx); err != nil {
			return err
		}
		if err := subjectExists(ctx, tx, in.SubjectID); err != nil {
			return err
		}
		sc := in.Scope
		if sc.ResourceID != "" {
			sc.ResourceKind = in.ResourceKind
		}
		if err := validateScope(ctx, tx, sc); err != nil {
			return err
		}
		if err := tx.CreateRestriction(ctx, r); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionRestrictionCreate, store.AuditResource{Kind: store.KindRestriction, ID: r.ID, NamespaceID: r.NamespaceID},
			map[string]string{"subjectId": r.SubjectID, "resourceKind": string(r.ResourceKind), "resourceId": r.ResourceID})
	})
	return r, err
}

func (s *Service) ListRestrictions(ctx context.Context, q PageQuery) (Page[store.Restriction], error) {
	return paged(q, func(p store.PageRequest) (store.Page[store.Restriction], error) {
		return s.store.ListRestrictions(ctx, p)
	})
}

func (s *Service) DeleteRestriction(ctx context.Context, id string) error {
	return s.store.InTx(ctx, func(tx store.Store) error {
		r, err := tx.GetRestriction(ctx, id)
		if err != nil {
			return err
		}
		if err := tx.DeleteRestriction(ctx, id); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionRestrictionDelete, store.AuditResource{Kind: store.KindRestriction, ID: id, NamespaceID: r.NamespaceID},
			map[string]string{"subjectId": r.SubjectID})
	})
}
