package api

import (
	"net/http"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/occ"
)

func (a *API) CreateNamespace(w http.ResponseWriter, r *http.Request) {
	var in apitypes.CreateNamespaceRequest
	if !decode(w, r, &in) {
		return
	}
	ns, err := a.svc.CreateNamespace(r.Context(), in.Name)
	respond(w, r, http.StatusCreated, toNamespace(ns), err)
}

func (a *API) ListNamespaces(w http.ResponseWriter, r *http.Request) {
	q, ok := pageQuery(w, r)
	if !ok {
		return
	}
	v, err := a.svc.ListNamespaces(r.Context(), q)
	respond(w, r, http.StatusOK, pageOf(v, toNamespace), err)
}

func (a *API) GetNamespace(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace)
	if !ok || !bodyless(w, r) {
		return
	}
	ns, err := a.svc.GetNamespace(r.Context(), p[0])
	respond(w, r, http.StatusOK, toNamespace(ns), err)
}

func (a *API) DeleteNamespace(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace)
	if !ok || !bodyless(w, r) {
		return
	}
	ns, err := a.svc.DeleteNamespace(r.Context(), p[0])
	respond(w, r, http.StatusAccepted, toNamespace(ns), err)
}

func (a *API) CreateConfiguration(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace)
	if !ok {
		return
	}
	var in apitypes.CreateConfigurationRequest
	if !decode(w, r, &in) {
		return
	}
	c, err := a.svc.CreateConfiguration(r.Context(), p[0], occ.ConfigurationInput{Name: in.Name, Kind: in.Kind, Document: in.Document})
	respond(w, r, http.StatusCreated, toConfiguration(c), err)
}

func (a *API) ListConfigurations(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace)
	if !ok {
		return
	}
	q, ok := pageQuery(w, r)
	if !ok {
		return
	}
	v, err := a.svc.ListConfigurations(r.Context(), p[0], q)
	respond(w, r, http.StatusOK, pageOf(v, toConfiguration), err)
}

func (a *API) GetConfiguration(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "cfg", ids.Configuration)
	if !ok || !bodyless(w, r) {
		return
	}
	c, err := a.svc.GetConfiguration(r.Context(), p[0], p[1])
	respond(w, r, http.StatusOK, toConfiguration(c), err)
}

func (a *API) PatchConfiguration(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "cfg", ids.Configuration)
	if !ok {
		return
	}
	var in apitypes.PatchConfigurationRequest
	if !decode(w, r, &in) {
		return
	}
	c, err := a.svc.UpdateConfiguration(r.Context(), p[0], p[1], occ.ConfigurationPatch{Name: in.Name, Document: in.Document})
	respond(w, r, http.StatusOK, toConfiguration(c), err)
}

func (a *API) DeleteConfiguration(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "cfg", ids.Configuration)
	if !ok || !bodyless(w, r) {
		return
	}
	err := a.svc.DeleteConfiguration(r.Context(), p[0], p[1])
	respond(w, r, http.StatusOK, apitypes.Deleted{Deleted: true, ID: p[1]}, err)
}

func (a *API) ReconcileNamespace(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace)
	if !ok || !bodyless(w, r) {
		return
	}
	rc, err := a.svc.ReconcileNamespace(r.Context(), p[0])
	respond(w, r, http.StatusAccepted, toReconciliation(rc), err)
}

func (a *API) ReconcileAllNamespaces(w http.ResponseWriter, r *http.Request) {
	if !bodyless(w, r) {
		return
	}
	v, err := a.svc.ReconcileAllNamespaces(r.Context())
	respond(w, r, http.StatusAccepted, list(v, toReconciliation), err)
}

func (a *API) GetReconciliation(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "reconciliationId", ids.WorkItem)
	if !ok || !bodyless(w, r) {
		return
	}
	rc, err := a.svc.GetReconciliation(r.Context(), p[0], p[1])
	respond(w, r, http.StatusOK, toReconciliation(rc), err)
}
