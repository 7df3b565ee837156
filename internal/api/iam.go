package api

import (
	"net/http"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/store"
)

type createUserRequest struct {
	Email    string `json:"email"`
	Password string `json:"password"`
}

func (a *API) CreateUser(w http.ResponseWriter, r *http.Request) {
	var in createUserRequest
	if !decode(w, r, &in) {
		return
	}
	u, err := a.svc.CreateUser(r.Context(), in.Email, in.Password)
	respond(w, r, http.StatusCreated, u, err)
}

type servicePrincipalRequest struct {
	Name        string `json:"name"`
	NamespaceID string `json:"namespaceId,omitempty"`
}

func (a *API) CreateServicePrincipal(w http.ResponseWriter, r *http.Request) {
	var in servicePrincipalRequest
	if !decode(w, r, &in) {
		return
	}
	if in.NamespaceID != "" && !validRef(w, r, "/namespaceId", in.NamespaceID, ids.Namespace) {
		return
	}
	sp, err := a.svc.CreateServicePrincipal(r.Context(), in.Name, in.NamespaceID)
	respond(w, r, http.StatusCreated, sp, err)
}

func (a *API) ListServicePrincipals(w http.ResponseWriter, r *http.Request) {
	if !bodyless(w, r) {
		return
	}
	v, err := a.svc.ListServicePrincipals(r.Context())
	respond(w, r, http.StatusOK, items(v), err)
}

func (a *API) GetServicePrincipal(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "sa", ids.ServicePrincipal)
	if !ok || !bodyless(w, r) {
		return
	}
	sp, err := a.svc.GetServicePrincipal(r.Context(), p[0])
	respond(w, r, http.StatusOK, sp, err)
}

func (a *API) DeleteServicePrincipal(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "sa", ids.ServicePrincipal)
	if !ok || !bodyless(w, r) {
		return
	}
	err := a.svc.DeleteServicePrincipal(r.Context(), p[0])
	respond(w, r, http.StatusOK, map[string]any{"id": p[0], "deleted": true}, err)
}

type roleRequest struct {
	Name        string             `json:"name"`
	NamespaceID string             `json:"namespaceId,omitempty"`
	Permissions []store.Permission `json:"permissions"`
}

func (a *API) CreateRole(w http.ResponseWriter, r *http.Request) {
	var in roleRequest
	if !decode(w, r, &in) {
		return
	}
	if in.NamespaceID != "" && !validRef(w, r, "/namespaceId", in.NamespaceID, ids.Namespace) {
		return
	}
	role, err := a.svc.CreateRole(r.Context(), occ.RoleInput{Name: in.Name, NamespaceID: in.NamespaceID, Permissions: in.Permissions})
	respond(w, r, http.StatusCreated, role, err)
}

func (a *API) ListRoles(w http.ResponseWriter, r *http.Request) {
	if !bodyless(w, r) {
		return
	}
	v, err := a.svc.ListRoles(r.Context())
	respond(w, r, http.StatusOK, items(v), err)
}

func (a *API) GetRole(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "roleId", ids.Role)
	if !ok || !bodyless(w, r) {
		return
	}
	role, err := a.svc.GetRole(r.Context(), p[0])
	respond(w, r, http.StatusOK, role, err)
}

func (a *API) DeleteRole(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "roleId", ids.Role)
	if !ok || !bodyless(w, r) {
		return
	}
	err := a.svc.DeleteRole(r.Context(), p[0])
	respond(w, r, http.StatusOK, map[string]any{"id": p[0], "deleted": true}, err)
}

type bindingRequest struct {
	SubjectID    string             `json:"subjectId"`
	RoleID       string             `json:"roleId"`
	NamespaceID  string             `json:"namespaceId,omitempty"`
	ResourceKind store.ResourceKind `json:"resourceKind,omitempty"`
	ResourceID   string             `json:"resourceId,omitempty"`
}

func (a *API) CreateAccessBinding(w http.ResponseWriter, r *http.Request) {
	var in bindingRequest
	if !decode(w, r, &in) {
		return
	}
	if !validRef(w, r, "/roleId", in.RoleID, ids.Role) ||
		(in.NamespaceID != "" && !validRef(w, r, "/namespaceId", in.NamespaceID, ids.Namespace)) {
		return
	}
	b, err := a.svc.CreateAccessBinding(r.Context(), occ.BindingInput{SubjectID: in.SubjectID, RoleID: in.RoleID,
		Scope: occ.ScopeInput{NamespaceID: in.NamespaceID, ResourceKind: in.ResourceKind, ResourceID: in.ResourceID}})
	respond(w, r, http.StatusCreated, b, err)
}

func (a *API) ListAccessBindings(w http.ResponseWriter, r *http.Request) {
	if !bodyless(w, r) {
		return
	}
	v, err := a.svc.ListAccessBindings(r.Context())
	respond(w, r, http.StatusOK, items(v), err)
}

func (a *API) DeleteAccessBinding(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "bindingId", ids.Binding)
	if !ok || !bodyless(w, r) {
		return
	}
	err := a.svc.DeleteAccessBinding(r.Context(), p[0])
	respond(w, r, http.StatusOK, map[string]any{"id": p[0], "deleted": true}, err)
}

type restrictionRequest struct {
	SubjectID    string             `json:"subjectId"`
	Action       store.Action       `json:"action"`
	ResourceKind store.ResourceKind `json:"resourceKind"`
	NamespaceID  string             `json:"namespaceId,omitempty"`
	ResourceID   string             `json:"resourceId,omitempty"`
}

func (a *API) CreateRestriction(w http.ResponseWriter, r *http.Request) {
	var in restrictionRequest
	if !decode(w, r, &in) {
		return
	}
	if in.NamespaceID != "" && !validRef(w, r, "/namespaceId", in.NamespaceID, ids.Namespace) {
		return
	}
	res, err := a.svc.CreateRestriction(r.Context(), occ.RestrictionInput{SubjectID: in.SubjectID, Action: in.Action,
		ResourceKind: in.ResourceKind, Scope: occ.ScopeInput{NamespaceID: in.NamespaceID, ResourceID: in.ResourceID}})
	respond(w, r, http.StatusCreated, res, err)
}

func (a *API) ListRestrictions(w http.ResponseWriter, r *http.Request) {
	if !bodyless(w, r) {
		return
	}
	v, err := a.svc.ListRestrictions(r.Context())
	respond(w, r, http.StatusOK, items(v), err)
}

func (a *API) DeleteRestriction(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "restrictionId", ids.Restriction)
	if !ok || !bodyless(w, r) {
		return
	}
	err := a.svc.DeleteRestriction(r.Context(), p[0])
	respond(w, r, http.StatusOK, map[string]any{"id": p[0], "deleted": true}, err)
}
