package api

import (
	"encoding/json"
	"net/http"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/occ"
)

type createNamespaceRequest struct {
	Name string `json:"name"`
}

func (a *API) CreateNamespace(w http.ResponseWriter, r *http.Request) {
	var in createNamespaceRequest
	if !decode(w, r, &in) {
		return
	}
	ns, err := a.svc.CreateNamespace(r.Context(), in.Name)
	respond(w, r, http.StatusCreated, ns, err)
}

func (a *API) ListNamespaces(w http.ResponseWriter, r *http.Request) {
	if !bodyless(w, r) {
		return
	}
	v, err := a.svc.ListNamespaces(r.Context())
	respond(w, r, http.StatusOK, items(v), err)
}

func (a *API) GetNamespace(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace)
	if !ok || !bodyless(w, r) {
		return
	}
	ns, err := a.svc.GetNamespace(r.Context(), p[0])
	respond(w, r, http.StatusOK, ns, err)
}

func (a *API) DeleteNamespace(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace)
	if !ok || !bodyless(w, r) {
		return
	}
	ns, err := a.svc.DeleteNamespace(r.Context(), p[0])
	respond(w, r, http.StatusAccepted, ns, err)
}

type configurationRequest struct {
	Name     string          `json:"name"`
	Kind     string          `json:"kind"`
	Document json.RawMessage `json:"document"`
}

func (a *API) CreateConfiguration(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace)
	if !ok {
		return
	}
	var in configurationRequest
	if !decode(w, r, &in) {
		return
	}
	c, err := a.svc.CreateConfiguration(r.Context(), p[0], occ.ConfigurationInput{Name: in.Name, Kind: in.Kind, Document: in.Document})
	respond(w, r, http.StatusCreated, c, err)
}

func (a *API) ListConfigurations(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace)
	if !ok || !bodyless(w, r) {
		return
	}
	v, err := a.svc.ListConfigurations(r.Context(), p[0])
	respond(w, r, http.StatusOK, items(v), err)
}

func (a *API) GetConfiguration(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "cfg", ids.Configuration)
	if !ok || !bodyless(w, r) {
		return
	}
	c, err := a.svc.GetConfiguration(r.Context(), p[0], p[1])
	respond(w, r, http.StatusOK, c, err)
}

type patchConfigurationRequest struct {
	Name     *string         `json:"name,omitempty"`
	Document json.RawMessage `json:"document,omitempty"`
}

func (a *API) PatchConfiguration(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "cfg", ids.Configuration)
	if !ok {
		return
	}
	var in patchConfigurationRequest
	if !decode(w, r, &in) {
		return
	}
	c, err := a.svc.UpdateConfiguration(r.Context(), p[0], p[1], occ.ConfigurationPatch{Name: in.Name, Document: in.Document})
	respond(w, r, http.StatusOK, c, err)
}

func (a *API) DeleteConfiguration(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "cfg", ids.Configuration)
	if !ok || !bodyless(w, r) {
		return
	}
	err := a.svc.DeleteConfiguration(r.Context(), p[0], p[1])
	respond(w, r, http.StatusOK, map[string]any{"id": p[1], "deleted": true}, err)
}
