package api

import (
	"net/http"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/httpx"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/workspace"
)

// CreateAgentLimit is the create body limit: four 16 KiB documents can
// grow about six times with JSON escaping.
const CreateAgentLimit = 448 << 10

func (a *API) CreateAgent(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace)
	if !ok {
		return
	}
	if err := httpx.NoQuery(r); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	var in apitypes.CreateAgentRequest
	if err := httpx.ReadJSON(w, r, &in, CreateAgentLimit); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	ag, err := a.svc.CreateAgent(r.Context(), p[0], occ.AgentInput{Name: in.Name, ConfigurationID: in.ConfigurationID,
		InitialWorkspaceFiles: in.InitialWorkspaceFiles, WorkspaceDefaultsID: in.WorkspaceDefaultsID})
	respond(w, r, http.StatusCreated, toAgent(ag), err)
}

func (a *API) ListAgents(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace)
	if !ok {
		return
	}
	q, ok := pageQuery(w, r)
	if !ok {
		return
	}
	v, err := a.svc.ListAgents(r.Context(), p[0], q)
	respond(w, r, http.StatusOK, pageOf(v, toAgent), err)
}

func (a *API) GetAgent(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "agentId", ids.Agent)
	if !ok || !bodyless(w, r) {
		return
	}
	ag, err := a.svc.GetAgent(r.Context(), p[0], p[1])
	respond(w, r, http.StatusOK, toAgent(ag), err)
}

func (a *API) PatchAgent(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "agentId", ids.Agent)
	if !ok {
		return
	}
	var in apitypes.PatchAgentRequest
	if !decode(w, r, &in) {
		return
	}
	ag, err := a.svc.UpdateAgent(r.Context(), p[0], p[1], occ.AgentPatch{ConfigurationID: in.ConfigurationID, Name: in.Name})
	respond(w, r, http.StatusOK, toAgent(ag), err)
}

func (a *API) DeleteAgent(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "agentId", ids.Agent)
	if !ok || !bodyless(w, r) {
		return
	}
	ag, err := a.svc.DeleteAgent(r.Context(), p[0], p[1])
	respond(w, r, http.StatusAccepted, toAgent(ag), err)
}

func (a *API) DeployAgent(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "agentId", ids.Agent)
	if !ok || !bodyless(w, r) {
		return
	}
	rev, err := a.svc.Deploy(r.Context(), p[0], p[1])
	respond(w, r, http.StatusAccepted, toRevision(rev), err)
}

func (a *API) StopAgent(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "agentId", ids.Agent)
	if !ok || !bodyless(w, r) {
		return
	}
	ag, err := a.svc.Stop(r.Context(), p[0], p[1])
	respond(w, r, http.StatusAccepted, toAgent(ag), err)
}

func (a *API) GetDeployment(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "agentId", ids.Agent, "deploymentId", ids.Revision)
	if !ok || !bodyless(w, r) {
		return
	}
	d, err := a.svc.GetDeployment(r.Context(), p[0], p[1], p[2])
	respond(w, r, http.StatusOK, toDeployment(d), err)
}

func (a *API) ListRevisions(w http.ResponseWriter, r *http.Request) {
	p, ok := pathIDs(w, r, "ns", ids.Namespace, "agentId", ids.Agent)
	if !ok {
		return
	}
	q, ok := pageQuery(w, r)
	if !ok {
		return
	}
	v, err := a.svc.ListRevisions(r.Context(), p[0], p[1], q)
	respond(w, r, http.StatusOK, pageOf(v, toRevision), err)
}

// WorkspaceDefaults serves the four default persona files of the pinned
// OpenClaw release and their identity, for create forms.
func (a *API) WorkspaceDefaults(w http.ResponseWriter, r *http.Request) {
	if !bodyless(w, r) {
		return
	}
	respond(w, r, http.StatusOK, apitypes.WorkspaceDefaults{ID: workspace.DefaultsID, Version: workspace.Version, Files: workspace.Defaults()}, nil)
}
