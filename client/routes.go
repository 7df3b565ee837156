package client

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"time"

	"github.com/openclaw/occ/apitypes"
)

// One method per route of OCC's route table, in its order (a test checks
// that every route has one). Collection routes return their items.

// Health calls GET /healthz.
func (c *Client) Health(ctx context.Context) (apitypes.Health, error) {
	return call[apitypes.Health](ctx, c, request{method: http.MethodGet, path: "/healthz"})
}

// Ready calls GET /readyz.
func (c *Client) Ready(ctx context.Context) (apitypes.Health, error) {
	return call[apitypes.Health](ctx, c, request{method: http.MethodGet, path: "/readyz"})
}

// OpenAPI returns the server's OpenAPI 3.1 document (GET /openapi.json),
// which is the document itself rather than an envelope.
func (c *Client) OpenAPI(ctx context.Context) ([]byte, error) {
	var raw json.RawMessage
	_, err := c.do(ctx, request{method: http.MethodGet, path: "/openapi.json", raw: true}, &raw)
	return raw, err
}

// SignIn signs in with email and password (POST /api/auth/sign-in/email)
// and keeps the session cookie for the Client's later requests. A Client
// with a service key cannot sign in (the server refuses it).
func (c *Client) SignIn(ctx context.Context, email, password string) (apitypes.Session, error) {
	return call[apitypes.Session](ctx, c, request{method: http.MethodPost, path: "/api/auth/sign-in/email",
		body: apitypes.SignInRequest{Email: email, Password: password}})
}

// SignOut ends the session (POST /api/auth/sign-out).
func (c *Client) SignOut(ctx context.Context) (apitypes.SignedOut, error) {
	return call[apitypes.SignedOut](ctx, c, request{method: http.MethodPost, path: "/api/auth/sign-out"})
}

// Session says who the caller is (GET /api/auth/session).
func (c *Client) Session(ctx context.Context) (apitypes.Session, error) {
	return call[apitypes.Session](ctx, c, request{method: http.MethodGet, path: "/api/auth/session"})
}

// ListSessions lists the signed-in user's live sessions (GET
// /api/auth/sessions).
func (c *Client) ListSessions(ctx context.Context) ([]apitypes.SessionInfo, error) {
	return items[apitypes.SessionInfo](ctx, c, "/api/auth/sessions")
}

// RevokeSession ends one of the user's sessions (DELETE
// /api/auth/sessions/{sessionId}).
func (c *Client) RevokeSession(ctx context.Context, sessionID string) (apitypes.RevokedSession, error) {
	return call[apitypes.RevokedSession](ctx, c, request{method: http.MethodDelete, path: p("/api/auth/sessions/%s", sessionID)})
}

// RevokeUserCredentials ends every session of a user and revokes the
// keys the user issued (POST /iam/users/{userId}/revoke-credentials).
func (c *Client) RevokeUserCredentials(ctx context.Context, userID string) (apitypes.RevokedCredentials, error) {
	return call[apitypes.RevokedCredentials](ctx, c, request{method: http.MethodPost, path: p("/iam/users/%s/revoke-credentials", userID)})
}

// CreateServiceKey creates a key for a service principal (POST
// /api/auth/service-keys). The reply holds the secret key, once.
func (c *Client) CreateServiceKey(ctx context.Context, in apitypes.CreateServiceKeyRequest) (apitypes.ServiceKey, error) {
	return call[apitypes.ServiceKey](ctx, c, request{method: http.MethodPost, path: "/api/auth/service-keys", body: in})
}

// RevokeServiceKey revokes a key (DELETE /api/auth/service-keys/{keyId}).
func (c *Client) RevokeServiceKey(ctx context.Context, keyID string) (apitypes.RevokedServiceKey, error) {
	return call[apitypes.RevokedServiceKey](ctx, c, request{method: http.MethodDelete, path: p("/api/auth/service-keys/%s", keyID)})
}

// ListNamespaces calls GET /namespaces and follows nextCursor to the last
// page, returning every Namespace the caller may read.
func (c *Client) ListNamespaces(ctx context.Context) ([]apitypes.Namespace, error) {
	return allPages[apitypes.Namespace](ctx, c, "/namespaces")
}

// ListNamespacesPage calls GET /namespaces for one page.
func (c *Client) ListNamespacesPage(ctx context.Context, q apitypes.ListQuery) (apitypes.List[apitypes.Namespace], error) {
	return onePage[apitypes.Namespace](ctx, c, "/namespaces", q)
}

// CreateNamespace calls POST /namespaces.
func (c *Client) CreateNamespace(ctx context.Context, in apitypes.CreateNamespaceRequest) (apitypes.Namespace, error) {
	return call[apitypes.Namespace](ctx, c, request{method: http.MethodPost, path: "/namespaces", body: in})
}

// GetNamespace calls GET /namespaces/{ns}.
func (c *Client) GetNamespace(ctx context.Context, ns string) (apitypes.Namespace, error) {
	return call[apitypes.Namespace](ctx, c, request{method: http.MethodGet, path: p("/namespaces/%s", ns)})
}

// DeleteNamespace requests the deletion of an empty Namespace (DELETE
// /namespaces/{ns}); the worker finishes it.
func (c *Client) DeleteNamespace(ctx context.Context, ns string) (apitypes.Namespace, error) {
	return call[apitypes.Namespace](ctx, c, request{method: http.MethodDelete, path: p("/namespaces/%s", ns)})
}

// ReconcileNamespace queues a reconciliation of a ready Namespace against
// the current installation configuration (POST /namespaces/{ns}/reconcile;
// installation administrators). Follow it with WaitForReconciliation.
func (c *Client) ReconcileNamespace(ctx context.Context, ns string) (apitypes.Reconciliation, error) {
	return call[apitypes.Reconciliation](ctx, c, request{method: http.MethodPost, path: p("/namespaces/%s/reconcile", ns)})
}

// GetReconciliation calls GET
// /namespaces/{ns}/reconciliations/{reconciliationId}.
func (c *Client) GetReconciliation(ctx context.Context, ns, id string) (apitypes.Reconciliation, error) {
	return call[apitypes.Reconciliation](ctx, c, request{method: http.MethodGet, path: p("/namespaces/%s/reconciliations/%s", ns, id)})
}

// ReconcileAllNamespaces queues a reconciliation of every ready Namespace
// (POST /namespace-reconciliations).
func (c *Client) ReconcileAllNamespaces(ctx context.Context) ([]apitypes.Reconciliation, error) {
	var l struct {
		Items []apitypes.Reconciliation `json:"items"`
	}
	if _, err := c.do(ctx, request{method: http.MethodPost, path: "/namespace-reconciliations"}, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// WaitForReconciliation polls a reconciliation every interval (minimum
// 100 ms) until it succeeds or fails, or ctx ends. A failed one is
// returned with a nil error: its Error says why. Each poll is bounded as
// in WaitForDeployment.
func (c *Client) WaitForReconciliation(ctx context.Context, ns, id string, interval time.Duration) (apitypes.Reconciliation, error) {
	interval = max(interval, 100*time.Millisecond)
	for {
		r, err := poll(ctx, c, func(ctx context.Context) (apitypes.Reconciliation, error) {
			return c.GetReconciliation(ctx, ns, id)
		})
		if err != nil {
			return r, err
		}
		if r.Status == apitypes.DeploymentSucceeded || r.Status == apitypes.DeploymentFailed {
			return r, nil
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return r, fmt.Errorf("client: waiting for reconciliation %s: %w", id, ctx.Err())
		case <-t.C:
		}
	}
}

// ListAgents calls GET /namespaces/{ns}/agents and follows nextCursor to
// the last page, returning every Agent of the Namespace the caller may read.
func (c *Client) ListAgents(ctx context.Context, ns string) ([]apitypes.Agent, error) {
	return allPages[apitypes.Agent](ctx, c, p("/namespaces/%s/agents", ns))
}

// ListAgentsPage calls GET /namespaces/{ns}/agents for one page.
func (c *Client) ListAgentsPage(ctx context.Context, ns string, q apitypes.ListQuery) (apitypes.List[apitypes.Agent], error) {
	return onePage[apitypes.Agent](ctx, c, p("/namespaces/%s/agents", ns), q)
}

// CreateAgent calls POST /namespaces/{ns}/agents.
func (c *Client) CreateAgent(ctx context.Context, ns string, in apitypes.CreateAgentRequest) (apitypes.Agent, error) {
	return call[apitypes.Agent](ctx, c, request{method: http.MethodPost, path: p("/namespaces/%s/agents", ns), body: in})
}

// GetAgent calls GET /namespaces/{ns}/agents/{agentId}.
func (c *Client) GetAgent(ctx context.Context, ns, agentID string) (apitypes.Agent, error) {
	return call[apitypes.Agent](ctx, c, request{method: http.MethodGet, path: p("/namespaces/%s/agents/%s", ns, agentID)})
}

// PatchAgent calls PATCH /namespaces/{ns}/agents/{agentId}.
func (c *Client) PatchAgent(ctx context.Context, ns, agentID string, in apitypes.PatchAgentRequest) (apitypes.Agent, error) {
	return call[apitypes.Agent](ctx, c, request{method: http.MethodPatch, path: p("/namespaces/%s/agents/%s", ns, agentID), body: in})
}

// DeleteAgent requests an Agent's deletion (DELETE
// /namespaces/{ns}/agents/{agentId}); the worker finishes it.
func (c *Client) DeleteAgent(ctx context.Context, ns, agentID string) (apitypes.Agent, error) {
	return call[apitypes.Agent](ctx, c, request{method: http.MethodDelete, path: p("/namespaces/%s/agents/%s", ns, agentID)})
}

// DeployAgent queues a deployment of a new revision (POST
// /namespaces/{ns}/agents/{agentId}/deploy). The revision's ID is the
// deployment ID for GetDeployment and WaitForDeployment.
func (c *Client) DeployAgent(ctx context.Context, ns, agentID string) (apitypes.Revision, error) {
	return call[apitypes.Revision](ctx, c, request{method: http.MethodPost, path: p("/namespaces/%s/agents/%s/deploy", ns, agentID)})
}

// StopAgent calls POST /namespaces/{ns}/agents/{agentId}/stop.
func (c *Client) StopAgent(ctx context.Context, ns, agentID string) (apitypes.Agent, error) {
	return call[apitypes.Agent](ctx, c, request{method: http.MethodPost, path: p("/namespaces/%s/agents/%s/stop", ns, agentID)})
}

// ListRevisions calls GET /namespaces/{ns}/agents/{agentId}/revisions and
// follows nextCursor to the last page, returning every revision by number.
func (c *Client) ListRevisions(ctx context.Context, ns, agentID string) ([]apitypes.Revision, error) {
	return allPages[apitypes.Revision](ctx, c, p("/namespaces/%s/agents/%s/revisions", ns, agentID))
}

// ListRevisionsPage calls GET /namespaces/{ns}/agents/{agentId}/revisions
// for one page.
func (c *Client) ListRevisionsPage(ctx context.Context, ns, agentID string, q apitypes.ListQuery) (apitypes.List[apitypes.Revision], error) {
	return onePage[apitypes.Revision](ctx, c, p("/namespaces/%s/agents/%s/revisions", ns, agentID), q)
}

// GetDeployment calls GET
// /namespaces/{ns}/agents/{agentId}/deployments/{deploymentId}.
func (c *Client) GetDeployment(ctx context.Context, ns, agentID, deploymentID string) (apitypes.Deployment, error) {
	return call[apitypes.Deployment](ctx, c, request{method: http.MethodGet,
		path: p("/namespaces/%s/agents/%s/deployments/%s", ns, agentID, deploymentID)})
}

// File is a workspace file with its content hash (the ETag's value).
type File struct {
	Name    string
	Content string
	// Hash is the SHA-256 of Content (64 hex digits), for PutFile's
	// ifMatch.
	Hash string
}

// GetFile reads a workspace file of a running Agent (GET
// /namespaces/{ns}/agents/{agentId}/workspace/files/{name}).
func (c *Client) GetFile(ctx context.Context, ns, agentID, name string) (File, error) {
	var f apitypes.WorkspaceFile
	rep, err := c.do(ctx, request{method: http.MethodGet,
		path: p("/namespaces/%s/agents/%s/workspace/files/%s", ns, agentID, name)}, &f)
	if err != nil {
		return File{}, err
	}
	return File{Name: f.Name, Content: f.Content, Hash: etagHash(rep.header.Get("ETag"))}, nil
}

// PutFile writes a workspace file (PUT …/workspace/files/{name}). With
// ifMatch (a hash from GetFile or an earlier PutFile) the write happens
// only if the file still has that content; otherwise the server answers
// PRECONDITION_FAILED (412) with the current hash in the error's Data.
// An error with code UNKNOWN_OUTCOME means the write may or may not have
// happened: read the file before deciding to write again (docs/files.md).
// It returns the written file's size and new hash. An empty ifMatch sends
// no If-Match: the write is unconditional (last write wins), so a caller
// that takes the hash from a person or a script must refuse an empty one
// itself rather than pass it on (occ checks digest.Valid).
func (c *Client) PutFile(ctx context.Context, ns, agentID, name, content, ifMatch string) (apitypes.WrittenFile, string, error) {
	var h http.Header
	if ifMatch != "" {
		h = http.Header{"If-Match": {`"` + ifMatch + `"`}}
	}
	var w apitypes.WrittenFile
	rep, err := c.do(ctx, request{method: http.MethodPut,
		path:   p("/namespaces/%s/agents/%s/workspace/files/%s", ns, agentID, name),
		body:   apitypes.PutWorkspaceFileRequest{Content: content},
		header: h}, &w)
	if err != nil {
		return apitypes.WrittenFile{}, "", err
	}
	return w, etagHash(rep.header.Get("ETag")), nil
}

// etagHash strips the quotes of a strong ETag.
func etagHash(etag string) string {
	return strings.TrimSuffix(strings.TrimPrefix(etag, `"`), `"`)
}

// WorkspaceDefaults calls GET /workspace-defaults.
func (c *Client) WorkspaceDefaults(ctx context.Context) (apitypes.WorkspaceDefaults, error) {
	return call[apitypes.WorkspaceDefaults](ctx, c, request{method: http.MethodGet, path: "/workspace-defaults"})
}

// ListConfigurations calls GET /namespaces/{ns}/configurations and follows
// nextCursor to the last page.
func (c *Client) ListConfigurations(ctx context.Context, ns string) ([]apitypes.Configuration, error) {
	return allPages[apitypes.Configuration](ctx, c, p("/namespaces/%s/configurations", ns))
}

// ListConfigurationsPage calls GET /namespaces/{ns}/configurations for one page.
func (c *Client) ListConfigurationsPage(ctx context.Context, ns string, q apitypes.ListQuery) (apitypes.List[apitypes.Configuration], error) {
	return onePage[apitypes.Configuration](ctx, c, p("/namespaces/%s/configurations", ns), q)
}

// CreateConfiguration calls POST /namespaces/{ns}/configurations.
func (c *Client) CreateConfiguration(ctx context.Context, ns string, in apitypes.CreateConfigurationRequest) (apitypes.Configuration, error) {
	return call[apitypes.Configuration](ctx, c, request{method: http.MethodPost, path: p("/namespaces/%s/configurations", ns), body: in})
}

// GetConfiguration calls GET /namespaces/{ns}/configurations/{cfg}.
func (c *Client) GetConfiguration(ctx context.Context, ns, cfgID string) (apitypes.Configuration, error) {
	return call[apitypes.Configuration](ctx, c, request{method: http.MethodGet, path: p("/namespaces/%s/configurations/%s", ns, cfgID)})
}

// PatchConfiguration calls PATCH /namespaces/{ns}/configurations/{cfg}.
func (c *Client) PatchConfiguration(ctx context.Context, ns, cfgID string, in apitypes.PatchConfigurationRequest) (apitypes.Configuration, error) {
	return call[apitypes.Configuration](ctx, c, request{method: http.MethodPatch, path: p("/namespaces/%s/configurations/%s", ns, cfgID), body: in})
}

// DeleteConfiguration calls DELETE /namespaces/{ns}/configurations/{cfg}.
func (c *Client) DeleteConfiguration(ctx context.Context, ns, cfgID string) (apitypes.Deleted, error) {
	return call[apitypes.Deleted](ctx, c, request{method: http.MethodDelete, path: p("/namespaces/%s/configurations/%s", ns, cfgID)})
}

// CreateUser calls POST /iam/users.
func (c *Client) CreateUser(ctx context.Context, in apitypes.CreateUserRequest) (apitypes.User, error) {
	return call[apitypes.User](ctx, c, request{method: http.MethodPost, path: "/iam/users", body: in})
}

// ListServicePrincipals calls GET /iam/service-principals and follows nextCursor to the last
// page, returning every service principal the caller may read.
func (c *Client) ListServicePrincipals(ctx context.Context) ([]apitypes.ServicePrincipal, error) {
	return allPages[apitypes.ServicePrincipal](ctx, c, "/iam/service-principals")
}

// ListServicePrincipalsPage calls GET /iam/service-principals for one page.
func (c *Client) ListServicePrincipalsPage(ctx context.Context, q apitypes.ListQuery) (apitypes.List[apitypes.ServicePrincipal], error) {
	return onePage[apitypes.ServicePrincipal](ctx, c, "/iam/service-principals", q)
}

// CreateServicePrincipal calls POST /iam/service-principals.
func (c *Client) CreateServicePrincipal(ctx context.Context, in apitypes.CreateServicePrincipalRequest) (apitypes.ServicePrincipal, error) {
	return call[apitypes.ServicePrincipal](ctx, c, request{method: http.MethodPost, path: "/iam/service-principals", body: in})
}

// GetServicePrincipal calls GET /iam/service-principals/{sa}.
func (c *Client) GetServicePrincipal(ctx context.Context, id string) (apitypes.ServicePrincipal, error) {
	return call[apitypes.ServicePrincipal](ctx, c, request{method: http.MethodGet, path: p("/iam/service-principals/%s", id)})
}

// DeleteServicePrincipal calls DELETE /iam/service-principals/{sa}.
func (c *Client) DeleteServicePrincipal(ctx context.Context, id string) (apitypes.Deleted, error) {
	return call[apitypes.Deleted](ctx, c, request{method: http.MethodDelete, path: p("/iam/service-principals/%s", id)})
}

// ListRoles calls GET /iam/roles and follows nextCursor to the last
// page, returning every role the caller may read.
func (c *Client) ListRoles(ctx context.Context) ([]apitypes.Role, error) {
	return allPages[apitypes.Role](ctx, c, "/iam/roles")
}

// ListRolesPage calls GET /iam/roles for one page.
func (c *Client) ListRolesPage(ctx context.Context, q apitypes.ListQuery) (apitypes.List[apitypes.Role], error) {
	return onePage[apitypes.Role](ctx, c, "/iam/roles", q)
}

// CreateRole calls POST /iam/roles.
func (c *Client) CreateRole(ctx context.Context, in apitypes.CreateRoleRequest) (apitypes.Role, error) {
	return call[apitypes.Role](ctx, c, request{method: http.MethodPost, path: "/iam/roles", body: in})
}

// GetRole calls GET /iam/roles/{roleId}.
func (c *Client) GetRole(ctx context.Context, id string) (apitypes.Role, error) {
	return call[apitypes.Role](ctx, c, request{method: http.MethodGet, path: p("/iam/roles/%s", id)})
}

// DeleteRole calls DELETE /iam/roles/{roleId}.
func (c *Client) DeleteRole(ctx context.Context, id string) (apitypes.Deleted, error) {
	return call[apitypes.Deleted](ctx, c, request{method: http.MethodDelete, path: p("/iam/roles/%s", id)})
}

// ListAccessBindings calls GET /iam/access-bindings and follows nextCursor to the last
// page, returning every access binding the caller may read.
func (c *Client) ListAccessBindings(ctx context.Context) ([]apitypes.AccessBinding, error) {
	return allPages[apitypes.AccessBinding](ctx, c, "/iam/access-bindings")
}

// ListAccessBindingsPage calls GET /iam/access-bindings for one page.
func (c *Client) ListAccessBindingsPage(ctx context.Context, q apitypes.ListQuery) (apitypes.List[apitypes.AccessBinding], error) {
	return onePage[apitypes.AccessBinding](ctx, c, "/iam/access-bindings", q)
}

// CreateAccessBinding calls POST /iam/access-bindings.
func (c *Client) CreateAccessBinding(ctx context.Context, in apitypes.CreateAccessBindingRequest) (apitypes.AccessBinding, error) {
	return call[apitypes.AccessBinding](ctx, c, request{method: http.MethodPost, path: "/iam/access-bindings", body: in})
}

// DeleteAccessBinding calls DELETE /iam/access-bindings/{bindingId}.
func (c *Client) DeleteAccessBinding(ctx context.Context, id string) (apitypes.Deleted, error) {
	return call[apitypes.Deleted](ctx, c, request{method: http.MethodDelete, path: p("/iam/access-bindings/%s", id)})
}

// ListRestrictions calls GET /iam/restrictions and follows nextCursor to the last
// page, returning every restriction the caller may read.
func (c *Client) ListRestrictions(ctx context.Context) ([]apitypes.Restriction, error) {
	return allPages[apitypes.Restriction](ctx, c, "/iam/restrictions")
}

// ListRestrictionsPage calls GET /iam/restrictions for one page.
func (c *Client) ListRestrictionsPage(ctx context.Context, q apitypes.ListQuery) (apitypes.List[apitypes.Restriction], error) {
	return onePage[apitypes.Restriction](ctx, c, "/iam/restrictions", q)
}

// CreateRestriction calls POST /iam/restrictions.
func (c *Client) CreateRestriction(ctx context.Context, in apitypes.CreateRestrictionRequest) (apitypes.Restriction, error) {
	return call[apitypes.Restriction](ctx, c, request{method: http.MethodPost, path: "/iam/restrictions", body: in})
}

// DeleteRestriction calls DELETE /iam/restrictions/{restrictionId}.
func (c *Client) DeleteRestriction(ctx context.Context, id string) (apitypes.Deleted, error) {
	return call[apitypes.Deleted](ctx, c, request{method: http.MethodDelete, path: p("/iam/restrictions/%s", id)})
}

// ListAuditEvents reads one page of audit events (GET /audit-events).
func (c *Client) ListAuditEvents(ctx context.Context, q apitypes.AuditQuery) (apitypes.AuditPage, error) {
	return call[apitypes.AuditPage](ctx, c, request{method: http.MethodGet, path: "/audit-events", query: auditValues(q)})
}

// auditValues encodes q's set fields under their JSON names.
func auditValues(q apitypes.AuditQuery) url.Values {
	v := url.Values{}
	set := func(k, s string) {
		if s != "" {
			v.Set(k, s)
		}
	}
	set("namespaceId", q.NamespaceID)
	set("resourceKind", string(q.ResourceKind))
	set("resourceId", q.ResourceID)
	set("actorId", q.ActorID)
	set("action", q.Action)
	set("kind", q.Kind)
	set("outcome", q.Outcome)
	if q.Since != nil {
		set("since", q.Since.UTC().Format(time.RFC3339Nano))
	}
	if q.Until != nil {
		set("until", q.Until.UTC().Format(time.RFC3339Nano))
	}
	if q.WithoutOutcome {
		set("withoutOutcome", "true")
	}
	if q.Limit != 0 {
		set("limit", strconv.Itoa(q.Limit))
	}
	set("cursor", q.Cursor)
	return v
}

// maxListPages bounds allPages: a server that keeps answering a next
// cursor (a bug) cannot keep the client looping.
const maxListPages = 10_000

// onePage reads one page of a paged list route.
func onePage[T apitypes.Data](ctx context.Context, c *Client, path string, q apitypes.ListQuery) (apitypes.List[T], error) {
	v := url.Values{}
	if q.Limit != 0 {
		v.Set("limit", strconv.Itoa(q.Limit))
	}
	if q.Cursor != "" {
		v.Set("cursor", q.Cursor)
	}
	var l apitypes.List[T]
	if _, err := c.do(ctx, request{method: http.MethodGet, path: path, query: v}, &l); err != nil {
		return apitypes.List[T]{}, err
	}
	if l.Items == nil {
		l.Items = []T{}
	}
	return l, nil
}

// allPages reads every page of a paged list route at the largest page
// size. A cursor the server repeats, or more than maxListPages pages, is an
// error rather than a loop.
func allPages[T apitypes.Data](ctx context.Context, c *Client, path string) ([]T, error) {
	out := []T{}
	q := apitypes.ListQuery{Limit: 500}
	for range maxListPages {
		l, err := onePage[T](ctx, c, path, q)
		if err != nil {
			return nil, err
		}
		out = append(out, l.Items...)
		if l.NextCursor == "" {
			return out, nil
		}
		if l.NextCursor == q.Cursor {
			return nil, fmt.Errorf("client: GET %s answered the same next cursor twice", path)
		}
		q.Cursor = l.NextCursor
	}
	return nil, fmt.Errorf("client: GET %s has more than %d pages", path, maxListPages)
}

// items reads a collection route's items.
func items[T any](ctx context.Context, c *Client, path string) ([]T, error) {
	var l struct {
		Items []T `json:"items"`
	}
	if _, err := c.do(ctx, request{method: http.MethodGet, path: path}, &l); err != nil {
		return nil, err
	}
	return l.Items, nil
}

// WaitForDeployment polls a deployment every interval (minimum 100 ms)
// until it succeeds or fails, or ctx ends; progress, when not nil, is
// called with each state that differs from the previous one. A failed
// deployment is returned with a nil error: its Error says why.
//
// ctx bounds the whole wait; each poll is also bounded by the Client's
// request timeout (WithTimeout, default DefaultTimeout), so a server that
// does not answer one GET ends the wait with an ErrPollTimeout error
// after that time, not after all of ctx's.
func (c *Client) WaitForDeployment(ctx context.Context, ns, agentID, deploymentID string, interval time.Duration,
	progress func(apitypes.Deployment)) (apitypes.Deployment, error) {
	interval = max(interval, 100*time.Millisecond)
	var last apitypes.Deployment
	for first := true; ; first = false {
		d, err := poll(ctx, c, func(ctx context.Context) (apitypes.Deployment, error) {
			return c.GetDeployment(ctx, ns, agentID, deploymentID)
		})
		if err != nil {
			return d, err
		}
		if progress != nil && (first || changed(last, d)) {
			progress(d)
		}
		last = d
		if d.Status == apitypes.DeploymentSucceeded || d.Status == apitypes.DeploymentFailed {
			return d, nil
		}
		t := time.NewTimer(interval)
		select {
		case <-ctx.Done():
			t.Stop()
			return d, fmt.Errorf("client: waiting for deployment %s: %w", deploymentID, ctx.Err())
		case <-t.C:
		}
	}
}

func changed(a, b apitypes.Deployment) bool {
	if a.Status != b.Status || (a.Progress == nil) != (b.Progress == nil) {
		return true
	}
	return a.Progress != nil && a.Progress.Attempts != b.Progress.Attempts
}

// ErrPollTimeout matches (with errors.Is) the error of a WaitFor… call
// whose last poll got no answer within the Client's request timeout
// while the caller's context still had time: the server (or the way to
// it) did not answer, which says nothing about the awaited work. The
// error also matches context.DeadlineExceeded.
var ErrPollTimeout = errors.New("the server did not answer a poll within the request timeout")

// poll makes one request of a WaitFor… loop under its own deadline: the
// Client's request timeout or what is left of ctx, whichever ends first.
// Without it a poll would run on ctx alone, and one request that hangs
// would hold the wait until ctx ends and then look like work that never
// finished.
func poll[T any](ctx context.Context, c *Client, get func(context.Context) (T, error)) (T, error) {
	if c.timeout <= 0 {
		return get(ctx)
	}
	// own: the request timeout ends before ctx does, so a poll that runs
	// out of time ran out of its own time, not of the caller's.
	dl, ok := ctx.Deadline()
	own := !ok || time.Until(dl) > c.timeout
	pctx, cancel := context.WithTimeout(ctx, c.timeout)
	defer cancel()
	v, err := get(pctx)
	if err != nil && own && ctx.Err() == nil && errors.Is(pctx.Err(), context.DeadlineExceeded) {
		return v, fmt.Errorf("client: %w (%s): %w", ErrPollTimeout, c.timeout, err)
	}
	return v, err
}
