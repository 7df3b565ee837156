package server

import (
	"net/http"

	"github.com/openclaw/occ/internal/api"
)

// Auth is what a route requires of its caller before the handler runs.
// Authorization of the specific resource happens below, in the store.
type Auth int

const (
	// Probe routes (health) bypass admission entirely: they answer the
	// same whatever credentials or headers a probe sends.
	Probe Auth = iota
	// Public routes need no credentials (health, sign-in).
	Public
	// Authenticated routes need a session or an API key (401 otherwise).
	Authenticated
)

// Route is one entry of the API surface.
type Route struct {
	Method  string
	Path    string // net/http ServeMux pattern path
	Auth    Auth
	Handler http.HandlerFunc
}

// Routes is the one table of every API route and its auth level. The
// authorization matrix test walks it, so a new route is tested the day it
// is added.
func Routes(a *api.API, h *Health) []Route {
	return []Route{
		{"GET", "/healthz", Probe, h.Live},
		{"GET", "/readyz", Probe, h.Ready},

		{"POST", "/api/auth/sign-in/email", Public, a.SignIn},
		{"POST", "/api/auth/sign-out", Authenticated, a.SignOut},
		{"GET", "/api/auth/session", Authenticated, a.Session},
		{"POST", "/api/auth/service-keys", Authenticated, a.CreateServiceKey},
		{"DELETE", "/api/auth/service-keys/{keyId}", Authenticated, a.RevokeServiceKey},

		{"GET", "/namespaces", Authenticated, a.ListNamespaces},
		{"POST", "/namespaces", Authenticated, a.CreateNamespace},
		{"GET", "/namespaces/{ns}", Authenticated, a.GetNamespace},
		{"DELETE", "/namespaces/{ns}", Authenticated, a.DeleteNamespace},

		{"GET", "/namespaces/{ns}/agents", Authenticated, a.ListAgents},
		{"POST", "/namespaces/{ns}/agents", Authenticated, a.CreateAgent},
		{"GET", "/namespaces/{ns}/agents/{agentId}", Authenticated, a.GetAgent},
		{"PATCH", "/namespaces/{ns}/agents/{agentId}", Authenticated, a.PatchAgent},
		{"DELETE", "/namespaces/{ns}/agents/{agentId}", Authenticated, a.DeleteAgent},
		{"POST", "/namespaces/{ns}/agents/{agentId}/deploy", Authenticated, a.DeployAgent},
		{"POST", "/namespaces/{ns}/agents/{agentId}/stop", Authenticated, a.StopAgent},
		{"GET", "/namespaces/{ns}/agents/{agentId}/revisions", Authenticated, a.ListRevisions},
		{"GET", "/namespaces/{ns}/agents/{agentId}/deployments/{deploymentId}", Authenticated, a.GetDeployment},
		{"GET", "/namespaces/{ns}/agents/{agentId}/workspace/files/{name}", Authenticated, a.GetWorkspaceFile},
		{"PUT", "/namespaces/{ns}/agents/{agentId}/workspace/files/{name}", Authenticated, a.PutWorkspaceFile},
		{"GET", "/workspace-defaults", Authenticated, a.WorkspaceDefaults},

		{"GET", "/namespaces/{ns}/configurations", Authenticated, a.ListConfigurations},
		{"POST", "/namespaces/{ns}/configurations", Authenticated, a.CreateConfiguration},
		{"GET", "/namespaces/{ns}/configurations/{cfg}", Authenticated, a.GetConfiguration},
		{"PATCH", "/namespaces/{ns}/configurations/{cfg}", Authenticated, a.PatchConfiguration},
		{"DELETE", "/namespaces/{ns}/configurations/{cfg}", Authenticated, a.DeleteConfiguration},

		{"POST", "/iam/users", Authenticated, a.CreateUser},
		{"GET", "/iam/service-principals", Authenticated, a.ListServicePrincipals},
		{"POST", "/iam/service-principals", Authenticated, a.CreateServicePrincipal},
		{"GET", "/iam/service-principals/{sa}", Authenticated, a.GetServicePrincipal},
		{"DELETE", "/iam/service-principals/{sa}", Authenticated, a.DeleteServicePrincipal},
		{"GET", "/iam/roles", Authenticated, a.ListRoles},
		{"POST", "/iam/roles", Authenticated, a.CreateRole},
		{"GET", "/iam/roles/{roleId}", Authenticated, a.GetRole},
		{"DELETE", "/iam/roles/{roleId}", Authenticated, a.DeleteRole},
		{"GET", "/iam/access-bindings", Authenticated, a.ListAccessBindings},
		{"POST", "/iam/access-bindings", Authenticated, a.CreateAccessBinding},
		{"DELETE", "/iam/access-bindings/{bindingId}", Authenticated, a.DeleteAccessBinding},
		{"GET", "/iam/restrictions", Authenticated, a.ListRestrictions},
		{"POST", "/iam/restrictions", Authenticated, a.CreateRestriction},
		{"DELETE", "/iam/restrictions/{restrictionId}", Authenticated, a.DeleteRestriction},

		{"GET", "/audit-events", Authenticated, a.ListAuditEvents},
	}
}
