package server

import (
	"net/http"
	"sync"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/api"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/httpx"
	"github.com/openclaw/occ/internal/openapi"
)

// Auth is what a route requires of its caller before the handler runs.
// Authorization of the specific resource happens below, in the store.
type Auth int

const (
	// Probe routes (health, the API description) bypass admission entirely: they answer the
	// same whatever credentials or headers a probe sends.
	Probe Auth = iota
	// Public routes need no credentials (health, sign-in).
	Public
	// Authenticated routes need a session or an API key (401 otherwise).
	Authenticated
)

// Route is one entry of the API surface: where it is, who may call it, and
// its wire contract, from which the OpenAPI document is built
// (internal/openapi).
type Route struct {
	Method  string
	Path    string // net/http ServeMux pattern path
	Auth    Auth
	Handler http.HandlerFunc
	// OK is the success status.
	OK int
	// In is the zero value of the request body's apitypes type, or nil
	// for a route without a body.
	In any
	// Out is the zero value of the success reply's data type.
	Out apitypes.Data
	// Query is the zero value of the query parameters' apitypes type
	// (its JSON names are the parameter names), or nil for none.
	Query any
	// ETag marks the file routes: the reply carries an ETag, and a PUT
	// takes If-Match.
	ETag bool
}

// Zero values of the wire types, for the route table.
var (
	noBody  any
	noQuery any
)

// Routes is the one table of every API route and its auth level. The
// authorization matrix test walks it, so a new route is tested the day it
// is added.
func Routes(a *api.API, h *Health) []Route {
	return []Route{
		{"GET", "/healthz", Probe, h.Live, 200, noBody, apitypes.Health{}, noQuery, false},
		{"GET", "/readyz", Probe, h.Ready, 200, noBody, apitypes.Health{}, noQuery, false},
		{"GET", "/openapi.json", Probe, serveOpenAPI, 200, noBody, nil, noQuery, false},

		{"POST", "/api/auth/sign-in/email", Public, a.SignIn, 200, apitypes.SignInRequest{}, apitypes.Session{}, noQuery, false},
		{"POST", "/api/auth/sign-out", Authenticated, a.SignOut, 200, noBody, apitypes.SignedOut{}, noQuery, false},
		{"GET", "/api/auth/session", Authenticated, a.Session, 200, noBody, apitypes.Session{}, noQuery, false},
		{"GET", "/api/auth/sessions", Authenticated, a.ListSessions, 200, noBody, apitypes.List[apitypes.SessionInfo]{}, noQuery, false},
		{"DELETE", "/api/auth/sessions/{sessionId}", Authenticated, a.RevokeSession, 200, noBody, apitypes.RevokedSession{}, noQuery, false},
		{"POST", "/api/auth/service-keys", Authenticated, a.CreateServiceKey, 201, apitypes.CreateServiceKeyRequest{}, apitypes.ServiceKey{}, noQuery, false},
		{"DELETE", "/api/auth/service-keys/{keyId}", Authenticated, a.RevokeServiceKey, 200, noBody, apitypes.RevokedServiceKey{}, noQuery, false},

		{"GET", "/namespaces", Authenticated, a.ListNamespaces, 200, noBody, apitypes.List[apitypes.Namespace]{}, apitypes.ListQuery{}, false},
		{"POST", "/namespaces", Authenticated, a.CreateNamespace, 201, apitypes.CreateNamespaceRequest{}, apitypes.Namespace{}, noQuery, false},
		{"GET", "/namespaces/{ns}", Authenticated, a.GetNamespace, 200, noBody, apitypes.Namespace{}, noQuery, false},
		{"DELETE", "/namespaces/{ns}", Authenticated, a.DeleteNamespace, 202, noBody, apitypes.Namespace{}, noQuery, false},
		{"POST", "/namespaces/{ns}/reconcile", Authenticated, a.ReconcileNamespace, 202, noBody, apitypes.Reconciliation{}, noQuery, false},
		{"GET", "/namespaces/{ns}/reconciliations/{reconciliationId}", Authenticated, a.GetReconciliation, 200, noBody, apitypes.Reconciliation{}, noQuery, false},
		{"POST", "/namespace-reconciliations", Authenticated, a.ReconcileAllNamespaces, 202, noBody, apitypes.List[apitypes.Reconciliation]{}, noQuery, false},

		{"GET", "/namespaces/{ns}/agents", Authenticated, a.ListAgents, 200, noBody, apitypes.List[apitypes.Agent]{}, apitypes.ListQuery{}, false},
		{"POST", "/namespaces/{ns}/agents", Authenticated, a.CreateAgent, 201, apitypes.CreateAgentRequest{}, apitypes.Agent{}, noQuery, false},
		{"GET", "/namespaces/{ns}/agents/{agentId}", Authenticated, a.GetAgent, 200, noBody, apitypes.Agent{}, noQuery, false},
		{"PATCH", "/namespaces/{ns}/agents/{agentId}", Authenticated, a.PatchAgent, 200, apitypes.PatchAgentRequest{}, apitypes.Agent{}, noQuery, false},
		{"DELETE", "/namespaces/{ns}/agents/{agentId}", Authenticated, a.DeleteAgent, 202, noBody, apitypes.Agent{}, noQuery, false},
		{"POST", "/namespaces/{ns}/agents/{agentId}/deploy", Authenticated, a.DeployAgent, 202, noBody, apitypes.Revision{}, noQuery, false},
		{"POST", "/namespaces/{ns}/agents/{agentId}/stop", Authenticated, a.StopAgent, 202, noBody, apitypes.Agent{}, noQuery, false},
		{"GET", "/namespaces/{ns}/agents/{agentId}/revisions", Authenticated, a.ListRevisions, 200, noBody, apitypes.List[apitypes.Revision]{}, apitypes.ListQuery{}, false},
		{"GET", "/namespaces/{ns}/agents/{agentId}/deployments/{deploymentId}", Authenticated, a.GetDeployment, 200, noBody, apitypes.Deployment{}, noQuery, false},
		{"GET", "/namespaces/{ns}/agents/{agentId}/workspace/files/{name}", Authenticated, a.GetWorkspaceFile, 200, noBody, apitypes.WorkspaceFile{}, noQuery, true},
		{"PUT", "/namespaces/{ns}/agents/{agentId}/workspace/files/{name}", Authenticated, a.PutWorkspaceFile, 200, apitypes.PutWorkspaceFileRequest{}, apitypes.WrittenFile{}, noQuery, true},
		{"GET", "/workspace-defaults", Authenticated, a.WorkspaceDefaults, 200, noBody, apitypes.WorkspaceDefaults{}, noQuery, false},

		{"GET", "/namespaces/{ns}/configurations", Authenticated, a.ListConfigurations, 200, noBody, apitypes.List[apitypes.Configuration]{}, apitypes.ListQuery{}, false},
		{"POST", "/namespaces/{ns}/configurations", Authenticated, a.CreateConfiguration, 201, apitypes.CreateConfigurationRequest{}, apitypes.Configuration{}, noQuery, false},
		{"GET", "/namespaces/{ns}/configurations/{cfg}", Authenticated, a.GetConfiguration, 200, noBody, apitypes.Configuration{}, noQuery, false},
		{"PATCH", "/namespaces/{ns}/configurations/{cfg}", Authenticated, a.PatchConfiguration, 200, apitypes.PatchConfigurationRequest{}, apitypes.Configuration{}, noQuery, false},
		{"DELETE", "/namespaces/{ns}/configurations/{cfg}", Authenticated, a.DeleteConfiguration, 200, noBody, apitypes.Deleted{}, noQuery, false},

		{"POST", "/iam/users", Authenticated, a.CreateUser, 201, apitypes.CreateUserRequest{}, apitypes.User{}, noQuery, false},
		{"POST", "/iam/users/{userId}/revoke-credentials", Authenticated, a.RevokeUserCredentials, 200, noBody, apitypes.RevokedCredentials{}, noQuery, false},
		{"GET", "/iam/service-principals", Authenticated, a.ListServicePrincipals, 200, noBody, apitypes.List[apitypes.ServicePrincipal]{}, apitypes.ListQuery{}, false},
		{"POST", "/iam/service-principals", Authenticated, a.CreateServicePrincipal, 201, apitypes.CreateServicePrincipalRequest{}, apitypes.ServicePrincipal{}, noQuery, false},
		{"GET", "/iam/service-principals/{sa}", Authenticated, a.GetServicePrincipal, 200, noBody, apitypes.ServicePrincipal{}, noQuery, false},
		{"DELETE", "/iam/service-principals/{sa}", Authenticated, a.DeleteServicePrincipal, 200, noBody, apitypes.Deleted{}, noQuery, false},
		{"GET", "/iam/roles", Authenticated, a.ListRoles, 200, noBody, apitypes.List[apitypes.Role]{}, apitypes.ListQuery{}, false},
		{"POST", "/iam/roles", Authenticated, a.CreateRole, 201, apitypes.CreateRoleRequest{}, apitypes.Role{}, noQuery, false},
		{"GET", "/iam/roles/{roleId}", Authenticated, a.GetRole, 200, noBody, apitypes.Role{}, noQuery, false},
		{"DELETE", "/iam/roles/{roleId}", Authenticated, a.DeleteRole, 200, noBody, apitypes.Deleted{}, noQuery, false},
		{"GET", "/iam/access-bindings", Authenticated, a.ListAccessBindings, 200, noBody, apitypes.List[apitypes.AccessBinding]{}, apitypes.ListQuery{}, false},
		{"POST", "/iam/access-bindings", Authenticated, a.CreateAccessBinding, 201, apitypes.CreateAccessBindingRequest{}, apitypes.AccessBinding{}, noQuery, false},
		{"DELETE", "/iam/access-bindings/{bindingId}", Authenticated, a.DeleteAccessBinding, 200, noBody, apitypes.Deleted{}, noQuery, false},
		{"GET", "/iam/restrictions", Authenticated, a.ListRestrictions, 200, noBody, apitypes.List[apitypes.Restriction]{}, apitypes.ListQuery{}, false},
		{"POST", "/iam/restrictions", Authenticated, a.CreateRestriction, 201, apitypes.CreateRestrictionRequest{}, apitypes.Restriction{}, noQuery, false},
		{"DELETE", "/iam/restrictions/{restrictionId}", Authenticated, a.DeleteRestriction, 200, noBody, apitypes.Deleted{}, noQuery, false},

		{"GET", "/audit-events", Authenticated, a.ListAuditEvents, 200, noBody, apitypes.AuditPage{}, apitypes.AuditQuery{}, false},
	}
}

// Operations is the route table's wire contract, for the OpenAPI document.
func Operations(routes []Route) []openapi.Operation {
	ops := make([]openapi.Operation, len(routes))
	for i, r := range routes {
		ops[i] = openapi.Operation{Method: r.Method, Path: r.Path, Public: r.Auth != Authenticated,
			OK: r.OK, In: r.In, Query: r.Query, ETag: r.ETag}
		if r.Out != nil {
			ops[i].Out = r.Out
		}
	}
	return ops
}

var openAPIOnce struct {
	sync.Once
	doc []byte
	err error
}

// OpenAPIDocument returns the OpenAPI 3.1 document of the route table,
// built once; docs/openapi.json holds the same bytes.
func OpenAPIDocument() ([]byte, error) {
	openAPIOnce.Do(func() {
		openAPIOnce.doc, openAPIOnce.err = openapi.Build(Operations(Routes(&api.API{}, &Health{})))
	})
	return openAPIOnce.doc, openAPIOnce.err
}

// serveOpenAPI answers GET /openapi.json: the document itself, not an
// envelope.
func serveOpenAPI(w http.ResponseWriter, r *http.Request) {
	b, err := OpenAPIDocument()
	if err != nil {
		httpx.WriteError(w, r, errkind.Wrap(errkind.Internal, "The API description is unavailable.", err))
		return
	}
	w.Header().Set("Content-Type", "application/json; charset=utf-8")
	_, _ = w.Write(b)
}
