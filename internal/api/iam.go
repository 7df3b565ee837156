package api

import (
	"net/http"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/occ"
)

func (a *API) CreateUser(w http.ResponseWriter, r *http.Request) {
	var in apitypes.CreateUserRequest
	if !decode(w, r, &in) {
		return
	}
	u, err := a.svc.CreateUser(r.Context(), in.Email, in.Password)
	respond(w, r, http.StatusCreated, toUser(u), err)
}

func (a *API) CreateServicePrincipal(w http.ResponseWriter, r *http.Request) {
	var in apitypes.CreateServicePrincipalRequest
	if !decode(w, r, &in) {
		return
	}
	if in.NamespaceID != "" && !validRef(w, r, "/namespaceId", in.NamespaceID, ids.Namespace) {
		return
	}
	sp, err := a.svc.CreateServicePrincipal(r.Context(), in.Name, in.NamespaceID)
	respond(w, r, http.StatusCreated, toServicePrincipal(sp), err)
}

func (a *API) ListServicePrincipals(w http.ResponseWriter, r *http.Request) {
	q, ok := pageQuery(w, r)
	if !ok {
		return
	}
	v, err := a.svc.ListServicePrincipals(r.Context(), q)
	respond(w, r, http.StatusOK, pageOf(v, toServicePrincipal), err)
}

func (a *API) GetServicePrincipal(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "sa", ids.ServicePrincipal)
	if !ok || !bodyless(w, r) {
		return
	}
	sp, err := a.svc.GetServicePrincipal(r.Context(), p[0])
	respond(w, r, http.StatusOK, toServicePrincipal(sp), err)
}

func (a *API) DeleteServicePrincipal(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "sa", ids.ServicePrincipal)
	if !ok || !bodyless(w, r) {
		return
	}
	err := a.svc.DeleteServicePrincipal(r.Context(), p[0])
	respond(w, r, http.StatusOK, apitypes.Deleted{Deleted: true, ID: p[0]}, err)
}

func (a *API) CreateRole(w http.ResponseWriter, r *http.Request) {
	var in apitypes.CreateRoleRequest
	if !decode(w, r, &in) {
		return
	}
	if in.NamespaceID != "" && !validRef(w, r, "/namespaceId", in.NamespaceID, ids.Namespace) {
		return
	}
	role, err := a.svc.CreateRole(r.Context(), occ.RoleInput{Name: in.Name, NamespaceID: in.NamespaceID, Permissions: fromPermissions(in.Permissions)})
	respond(w, r, http.StatusCreated, toRole(role), err)
}

func (a *API) ListRoles(w http.ResponseWriter, r *http.Request) {
	q, ok := pageQuery(w, r)
	if !ok {
		return
	}
	v, err := a.svc.ListRoles(r.Context(), q)
	respond(w, r, http.StatusOK, pageOf(v, toRole), err)
}

func (a *API) GetRole(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "roleId", ids.Role)
	if !ok || !bodyless(w, r) {
		return
	}
	role, err := a.svc.GetRole(r.Context(), p[0])
	respond(w, r, http.StatusOK, toRole(role), err)
}

func (a *API) DeleteRole(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "roleId", ids.Role)
	if !ok || !bodyless(w, r) {
		return
	}
	err := a.svc.DeleteRole(r.Context(), p[0])
	respond(w, r, http.StatusOK, apitypes.Deleted{Deleted: true, ID: p[0]}, err)
}

func (a *API) CreateAccessBinding(w http.ResponseWriter, r *http.Request) {
	var in apitypes.CreateAccessBindingRequest
	if !decode(w, r, &in) {
		return
	}
	if !validRef(w, r, "/roleId", in.RoleID, ids.Role) ||
		(in.NamespaceID != "" && !validRef(w, r, "/namespaceId", in.NamespaceID, ids.Namespace)) {
		return
	}
	b, err := a.svc.CreateAccessBinding(r.Context(), occ.BindingInput{SubjectID: in.SubjectID, RoleID: in.RoleID,
		Scope: occ.ScopeInput{NamespaceID: in.NamespaceID, ResourceKind: fromResourceKind(in.ResourceKind), ResourceID: in.ResourceID}})
	respond(w, r, http.StatusCreated, toAccessBinding(b), err)
}

func (a *API) ListAccessBindings(w http.ResponseWriter, r *http.Request) {
	q, ok := pageQuery(w, r)
	if !ok {
		return
	}
	v, err := a.svc.ListAccessBindings(r.Context(), q)
	respond(w, r, http.StatusOK, pageOf(v, toAccessBinding), err)
}

func (a *API) DeleteAccessBinding(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "bindingId", ids.Binding)
	if !ok || !bodyless(w, r) {
		return
	}
	err := a.svc.DeleteAccessBinding(r.Context(), p[0])
	respond(w, r, http.StatusOK, apitypes.Deleted{Deleted: true, ID: p[0]}, err)
}

func (a *API) CreateRestriction(w http.ResponseWriter, r *http.Request) {
	var in apitypes.CreateRestrictionRequest
	if !decode(w, r, &in) {
		return
	}
	if in.NamespaceID != "" && !validRef(w, r, "/namespaceId", in.NamespaceID, ids.Namespace) {
		return
	}
	res, err := a.svc.CreateRestriction(r.Context(), occ.RestrictionInput{SubjectID: in.SubjectID, Action: fromAction(in.Action),
		ResourceKind: fromResourceKind(in.ResourceKind), Scope: occ.ScopeInput{NamespaceID: in.NamespaceID, ResourceID: in.ResourceID}})
	respond(w, r, http.StatusCreated, toRestriction(res), err)
}

func (a *API) ListRestrictions(w http.ResponseWriter, r *http.Request) {
	q, ok := pageQuery(w, r)
	if !ok {
		return
	}
	v, err := a.svc.ListRestrictions(r.Context(), q)
	respond(w, r, http.StatusOK, pageOf(v, toRestriction), err)
}

func (a *API) DeleteRestriction(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "restrictionId", ids.Restriction)
	if !ok || !bodyless(w, r) {
		return
	}
	err := a.svc.DeleteRestriction(r.Context(), p[0])
	respond(w, r, http.StatusOK, apitypes.Deleted{Deleted: true, ID: p[0]}, err)
}
