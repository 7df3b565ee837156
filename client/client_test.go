package client_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strconv"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/api"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/testutil"
	"github.com/openclaw/occ/internal/worker"
)

const (
	adminEmail    = "admin@example.com"
	adminPassword = "correct horse battery staple"
)

// world is a real OCC server (SQLite, the fake Compute driver with live
// files in memory, its worker running) behind a real HTTP listener.
type world struct {
	url   string
	srv   *server.Server
	files *gwtest.MemFiles
}

func newWorld(t *testing.T) *world {
	t.Helper()
	ts := httptest.NewUnstartedServer(nil)
	origin := "http://" + ts.Listener.Addr().String()
	files := gwtest.NewMemFiles()
	srv := server.New(server.Options{
		Store: testdb.SQLite(t), PublicOrigin: origin, Files: files,
		Driver: fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}}),
		Worker: worker.Options{Poll: 20 * time.Millisecond},
	})
	pw := filepath.Join(t.TempDir(), "pw")
	if err := os.WriteFile(pw, []byte(adminPassword), 0o600); err != nil {
		t.Fatal(err)
	}
	if _, err := srv.Service.Bootstrap(t.Context(), occ.BootstrapInput{AdminEmail: adminEmail, PasswordFile: pw, Out: &strings.Builder{}}); err != nil {
		t.Fatal(err)
	}
	ts.Config.Handler = srv.Handler()
	ts.Start()
	t.Cleanup(ts.Close)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = srv.Worker.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return &world{url: ts.URL, srv: srv, files: files}
}

func (w *world) admin(t *testing.T) *client.Client {
	t.Helper()
	c, err := client.New(w.url)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SignIn(testutil.Context(t), adminEmail, adminPassword); err != nil {
		t.Fatalf("SignIn: %v", err)
	}
	return c
}

// wantCode fails unless err is a *client.Error with the status and code.
func wantCode(t *testing.T, what string, err error, status int, code string) *client.Error {
	t.Helper()
	var e *client.Error
	if !errors.As(err, &e) {
		t.Fatalf("%s: error %v (%T), want *client.Error %d %s", what, err, err, status, code)
	}
	if e.Status != status || e.Code != code || !strings.HasPrefix(e.RequestID, "req_") {
		t.Fatalf("%s: error %+v, want status %d, code %s and a request id", what, e, status, code)
	}
	return e
}

func TestNewRefusesBadURLs(t *testing.T) {
	for _, u := range []string{"", "127.0.0.1:8080", "ftp://h", "http://", "http://u:p@h", "http://h/?q=1", "http://h/#f", "http://%zz"} {
		if _, err := client.New(u); err == nil {
			t.Errorf("New(%q) succeeded; want an error", u)
		}
	}
	// No error quotes a password given in the URL.
	for _, u := range []string{"http://u:s3cret@h", "ftp://u:s3cret@h", "https://u:s3cret@h:bad", "http://u:s3cret@%zz", "u:s3cret@h"} {
		_, err := client.New(u)
		if err == nil || strings.Contains(err.Error(), "s3cret") {
			t.Errorf("New(%q) = %v; want an error without the password", u, err)
		}
	}
	for _, u := range []string{"http://127.0.0.1:8080", "https://occ.example.com/", "https://occ.example.com/prefix"} {
		if _, err := client.New(u); err != nil {
			t.Errorf("New(%q): %v", u, err)
		}
	}
}

// TestOperatorFlow walks what an operator does: sign in, create a
// Namespace, a Configuration and an Agent from the defaults, deploy and
// wait, read and write a file with compare-and-swap, read the audit log.
func TestOperatorFlow(t *testing.T) {
	w := newWorld(t)
	ctx := testutil.Context(t)
	c := w.admin(t)

	s, err := c.Session(ctx)
	if err != nil || s.User == nil || s.User.Email != adminEmail || s.Subject.Credential != "session" {
		t.Fatalf("Session = %+v, %v", s, err)
	}
	ns, err := c.CreateNamespace(ctx, apitypes.CreateNamespaceRequest{Name: "team"})
	if err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		got, err := c.GetNamespace(ctx, ns.ID)
		return err == nil && got.Status == apitypes.NamespaceReady
	}, "namespace ready")
	cfg, err := c.CreateConfiguration(ctx, ns.ID, apitypes.CreateConfigurationRequest{Name: "cfg", Kind: "agent", Document: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	defs, err := c.WorkspaceDefaults(ctx)
	if err != nil || !digest.Valid(defs.ID) || len(defs.Files) != 4 {
		t.Fatalf("WorkspaceDefaults = %+v, %v", defs, err)
	}
	ag, err := c.CreateAgent(ctx, ns.ID, apitypes.CreateAgentRequest{Name: "a1", ConfigurationID: cfg.ID,
		InitialWorkspaceFiles: []byte(`{"SOUL.md":"calm"}`), WorkspaceDefaultsID: &defs.ID})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := c.DeployAgent(ctx, ns.ID, ag.ID)
	if err != nil {
		t.Fatal(err)
	}
	var seen []apitypes.DeploymentStatus
	d, err := c.WaitForDeployment(ctx, ns.ID, ag.ID, rev.ID, 0, func(d apitypes.Deployment) { seen = append(seen, d.Status) })
	if err != nil || d.Status != apitypes.DeploymentSucceeded || len(seen) == 0 || seen[len(seen)-1] != apitypes.DeploymentSucceeded {
		t.Fatalf("WaitForDeployment = %+v, %v (seen %v)", d, err, seen)
	}
	revs, err := c.ListRevisions(ctx, ns.ID, ag.ID)
	if err != nil || len(revs) != 1 || revs[0].ID != rev.ID {
		t.Fatalf("ListRevisions = %+v, %v", revs, err)
	}
	agents, err := c.ListAgents(ctx, ns.ID)
	if err != nil || len(agents) != 1 || agents[0].ID != ag.ID {
		t.Fatalf("ListAgents = %+v, %v", agents, err)
	}

	// Files: write, read back with its hash, a stale compare-and-swap,
	// then an unknown outcome, which is returned as such and not retried.
	written, hash, err := c.PutFile(ctx, ns.ID, ag.ID, "SOUL.md", "first", "")
	if err != nil || written.Size != 5 || hash != digest.Of("first") {
		t.Fatalf("PutFile = %+v %q, %v", written, hash, err)
	}
	f, err := c.GetFile(ctx, ns.ID, ag.ID, "SOUL.md")
	if diff := cmp.Diff(client.File{Name: "SOUL.md", Content: "first", Hash: digest.Of("first")}, f); err != nil || diff != "" {
		t.Fatalf("GetFile: %v (-want +got):\n%s", err, diff)
	}
	if _, hash, err = c.PutFile(ctx, ns.ID, ag.ID, "SOUL.md", "second", f.Hash); err != nil || hash != digest.Of("second") {
		t.Fatalf("PutFile with the current hash = %q, %v", hash, err)
	}
	_, _, err = c.PutFile(ctx, ns.ID, ag.ID, "SOUL.md", "third", f.Hash)
	e := wantCode(t, "PutFile with a stale hash", err, 412, "PRECONDITION_FAILED")
	if e.Data["currentHash"] != digest.Of("second") {
		t.Errorf("412 data = %v, want currentHash %s", e.Data, digest.Of("second"))
	}
	sets := w.files.Sets()
	w.files.FailNext(func() (agentgw.File, error) {
		return agentgw.File{}, &agentgw.Error{Kind: agentgw.OutcomeUnknown, Reason: "connection_lost_after_send"}
	})
	_, _, err = c.PutFile(ctx, ns.ID, ag.ID, "SOUL.md", "fourth", "")
	wantCode(t, "PutFile with a lost reply", err, 503, "UNKNOWN_OUTCOME")
	if got := w.files.Sets() - sets; got != 1 {
		t.Errorf("the gateway saw %d writes for one PutFile; the client must not retry", got)
	}

	page, err := c.ListAuditEvents(ctx, apitypes.AuditQuery{ResourceID: ag.ID, Action: "openclaw.agents.create", Limit: 10})
	if err != nil || len(page.Items) != 1 || page.Items[0].Resource.ID != ag.ID {
		t.Fatalf("ListAuditEvents = %+v, %v", page, err)
	}
	since := time.Now().Add(time.Hour)
	if page, err = c.ListAuditEvents(ctx, apitypes.AuditQuery{Since: &since}); err != nil || len(page.Items) != 0 {
		t.Fatalf("ListAuditEvents(since the future) = %+v, %v", page, err)
	}
	// Paging: one event per page until NextCursor is absent.
	n, cursor := 0, ""
	for i := 0; i < 1000; i++ {
		page, err := c.ListAuditEvents(ctx, apitypes.AuditQuery{ResourceID: ag.ID, Limit: 1, Cursor: cursor})
		if err != nil {
			t.Fatal(err)
		}
		n += len(page.Items)
		if cursor = page.NextCursor; cursor == "" {
			break
		}
	}
	all, err := c.ListAuditEvents(ctx, apitypes.AuditQuery{ResourceID: ag.ID, Limit: 100})
	if err != nil || n != len(all.Items) || n < 2 {
		t.Errorf("paging one by one saw %d events, one page of 100 has %d (%v)", n, len(all.Items), err)
	}

	if _, err := c.SignOut(ctx); err != nil {
		t.Fatal(err)
	}
	_, err = c.Session(ctx)
	wantCode(t, "Session after SignOut", err, 401, "UNAUTHENTICATED")
}

func TestServiceKeyAndErrors(t *testing.T) {
	w := newWorld(t)
	ctx := testutil.Context(t)
	admin := w.admin(t)

	anon, _ := client.New(w.url)
	doc, err := anon.OpenAPI(ctx)
	if err != nil || !strings.Contains(string(doc), `"openapi": "3.1.0"`) {
		t.Fatalf("OpenAPI = %.80q, %v; want the OpenAPI 3.1 document without credentials", doc, err)
	}

	_, err = admin.CreateNamespace(ctx, apitypes.CreateNamespaceRequest{Name: ""})
	e := wantCode(t, "CreateNamespace with no name", err, 400, "INVALID_REQUEST")
	if len(e.Details) == 0 || e.Details[0].Path != "/name" {
		t.Errorf("details = %+v, want one on /name", e.Details)
	}
	if !strings.Contains(e.Error(), "/name") || !strings.Contains(e.Error(), e.RequestID) {
		t.Errorf("Error() = %q, want the detail path and the request id", e.Error())
	}
	_, err = admin.GetNamespace(ctx, "ns_00000000-0000-4000-8000-000000000000")
	wantCode(t, "GetNamespace of an unknown id", err, 404, "NOT_FOUND")
	if !client.IsCode(err, "NOT_FOUND") || client.IsCode(err, "CONFLICT") {
		t.Errorf("IsCode disagrees with the error %v", err)
	}

	sp, err := admin.CreateServicePrincipal(ctx, apitypes.CreateServicePrincipalRequest{Name: "robot"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := admin.CreateAccessBinding(ctx, apitypes.CreateAccessBindingRequest{SubjectID: sp.ID, RoleID: "role_00000000-0000-4000-8000-000000000001"}); err != nil {
		roles, _ := admin.ListRoles(ctx)
		t.Fatalf("CreateAccessBinding: %v (roles %+v)", err, roles)
	}
	key, err := admin.CreateServiceKey(ctx, apitypes.CreateServiceKeyRequest{ServicePrincipalID: sp.ID, Name: "ci"})
	if err != nil || !strings.HasPrefix(key.Key, "occk_") {
		t.Fatalf("CreateServiceKey = %+v, %v", key, err)
	}
	robot, err := client.New(w.url, client.WithServiceKey(key.Key))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := robot.CreateNamespace(ctx, apitypes.CreateNamespaceRequest{Name: "by-key"}); err != nil {
		t.Fatalf("CreateNamespace with a key: %v", err)
	}
	s, err := robot.Session(ctx)
	if err != nil || s.Subject.ID != sp.ID || s.User != nil {
		t.Fatalf("Session with a key = %+v, %v", s, err)
	}
	_, err = robot.SignIn(ctx, adminEmail, adminPassword)
	wantCode(t, "SignIn with a key", err, 401, "UNAUTHENTICATED")
	if _, err := admin.RevokeServiceKey(ctx, key.ID); err != nil {
		t.Fatal(err)
	}
	_, err = robot.ListNamespaces(ctx)
	wantCode(t, "a revoked key", err, 401, "UNAUTHENTICATED")

	wrong, _ := client.New(w.url)
	_, err = wrong.SignIn(ctx, adminEmail, "wrong password")
	wantCode(t, "a wrong password", err, 401, "UNAUTHENTICATED")
}

func TestTransportFailures(t *testing.T) {
	ctx := testutil.Context(t)
	// Nothing listens: the transport error is returned, wrapped.
	ln := httptest.NewServer(http.NotFoundHandler())
	addr := ln.URL
	ln.Close()
	c, _ := client.New(addr)
	if _, err := c.Health(ctx); err == nil || errors.As(err, new(*client.Error)) {
		t.Errorf("Health against a closed port = %v, want a transport error", err)
	}

	// A server that never answers: the context's deadline ends the call.
	stop := make(chan struct{})
	hang := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		select {
		case <-stop:
		case <-r.Context().Done():
		}
	}))
	defer hang.Close()
	defer close(stop)
	c, _ = client.New(hang.URL)
	short, cancel := context.WithTimeout(ctx, 100*time.Millisecond)
	defer cancel()
	if _, err := c.Health(short); !errors.Is(err, context.DeadlineExceeded) {
		t.Errorf("Health against a hanging server = %v, want context.DeadlineExceeded", err)
	}

	// A proxy's HTML error page is not an OCC error body.
	proxy := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		w.WriteHeader(http.StatusBadGateway)
		_, _ = w.Write([]byte("<html>bad gateway</html>"))
	}))
	defer proxy.Close()
	c, _ = client.New(proxy.URL)
	_, err := c.Health(ctx)
	wantStatus := &client.Error{}
	if !errors.As(err, &wantStatus) || wantStatus.Status != 502 || wantStatus.Code != "HTTP_502" {
		t.Errorf("Health through a failing proxy = %v, want *client.Error HTTP_502", err)
	}
}

// TestRedirectsAreNotFollowed: a redirect, to another host or to the same
// one, is an error naming where it points, and the target never receives
// the service key or the sign-in body (net/http would forward x-api-key,
// and on a 307 the body, to any host).
func TestRedirectsAreNotFollowed(t *testing.T) {
	ctx := testutil.Context(t)
	var reached atomic.Int32
	target := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		reached.Add(1)
		w.WriteHeader(http.StatusTeapot)
	}))
	defer target.Close()
	for _, code := range []int{http.StatusMovedPermanently, http.StatusFound, http.StatusTemporaryRedirect, http.StatusPermanentRedirect} {
		t.Run(strconv.Itoa(code), func(t *testing.T) {
			redirect := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				http.Redirect(w, r, target.URL+r.URL.Path, code)
			}))
			defer redirect.Close()
			keyed, _ := client.New(redirect.URL, client.WithServiceKey("occk_secret"))
			if _, err := keyed.ListNamespaces(ctx); err == nil || !strings.Contains(err.Error(), target.URL) {
				t.Errorf("ListNamespaces through a %d = %v, want an error naming %s", code, err, target.URL)
			}
			session, _ := client.New(redirect.URL)
			if _, err := session.SignIn(ctx, "a@example.com", "pw-secret"); err == nil || strings.Contains(err.Error(), "pw-secret") {
				t.Errorf("SignIn through a %d = %v, want an error without the password", code, err)
			}
		})
	}
	if n := reached.Load(); n != 0 {
		t.Errorf("the redirect's target was reached %d times", n)
	}
}

// TestEveryRouteHasAMethod keeps the client in step with the route table:
// each route maps to one exported method of *client.Client.
func TestEveryRouteHasAMethod(t *testing.T) {
	methods := map[string]string{
		"GET /healthz": "Health", "GET /readyz": "Ready", "GET /openapi.json": "OpenAPI",
		"POST /api/auth/sign-in/email": "SignIn", "POST /api/auth/sign-out": "SignOut", "GET /api/auth/session": "Session",
		"POST /api/auth/service-keys": "CreateServiceKey", "DELETE /api/auth/service-keys/{keyId}": "RevokeServiceKey",
		"GET /namespaces": "ListNamespaces", "POST /namespaces": "CreateNamespace",
		"GET /namespaces/{ns}": "GetNamespace", "DELETE /namespaces/{ns}": "DeleteNamespace",
		"POST /namespaces/{ns}/reconcile":                         "ReconcileNamespace",
		"GET /namespaces/{ns}/reconciliations/{reconciliationId}": "GetReconciliation",
		"POST /namespace-reconciliations":                         "ReconcileAllNamespaces",
		"GET /namespaces/{ns}/agents":                             "ListAgents", "POST /namespaces/{ns}/agents": "CreateAgent",
		"GET /namespaces/{ns}/agents/{agentId}": "GetAgent", "PATCH /namespaces/{ns}/agents/{agentId}": "PatchAgent",
		"DELETE /namespaces/{ns}/agents/{agentId}": "DeleteAgent", "POST /namespaces/{ns}/agents/{agentId}/deploy": "DeployAgent",
		"POST /namespaces/{ns}/agents/{agentId}/stop":                      "StopAgent",
		"GET /namespaces/{ns}/agents/{agentId}/revisions":                  "ListRevisions",
		"GET /namespaces/{ns}/agents/{agentId}/deployments/{deploymentId}": "GetDeployment",
		"GET /namespaces/{ns}/agents/{agentId}/workspace/files/{name}":     "GetFile",
		"PUT /namespaces/{ns}/agents/{agentId}/workspace/files/{name}":     "PutFile",
		"GET /workspace-defaults":                                          "WorkspaceDefaults",
		"GET /namespaces/{ns}/configurations":                              "ListConfigurations",
		"POST /namespaces/{ns}/configurations":                             "CreateConfiguration",
		"GET /namespaces/{ns}/configurations/{cfg}":                        "GetConfiguration",
		"PATCH /namespaces/{ns}/configurations/{cfg}":                      "PatchConfiguration",
		"DELETE /namespaces/{ns}/configurations/{cfg}":                     "DeleteConfiguration",
		"POST /iam/users": "CreateUser",
		"POST /iam/users/{userId}/revoke-credentials": "RevokeUserCredentials",
		"GET /api/auth/sessions":                      "ListSessions",
		"DELETE /api/auth/sessions/{sessionId}":       "RevokeSession",
		"GET /iam/service-principals":                 "ListServicePrincipals",
		"POST /iam/service-principals":                "CreateServicePrincipal",
		"GET /iam/service-principals/{sa}":            "GetServicePrincipal",
		"DELETE /iam/service-principals/{sa}":         "DeleteServicePrincipal",
		"GET /iam/roles":                              "ListRoles", "POST /iam/roles": "CreateRole",
		"GET /iam/roles/{roleId}": "GetRole", "DELETE /iam/roles/{roleId}": "DeleteRole",
		"GET /iam/access-bindings": "ListAccessBindings", "POST /iam/access-bindings": "CreateAccessBinding",
		"DELETE /iam/access-bindings/{bindingId}": "DeleteAccessBinding",
		"GET /iam/restrictions":                   "ListRestrictions", "POST /iam/restrictions": "CreateRestriction",
		"DELETE /iam/restrictions/{restrictionId}": "DeleteRestriction",
		"GET /audit-events":                        "ListAuditEvents",
	}
	typ := reflect.TypeFor[*client.Client]()
	seen := map[string]bool{}
	for _, r := range server.Routes(&api.API{}, &server.Health{}) {
		key := r.Method + " " + r.Path
		name, ok := methods[key]
		if !ok {
			t.Errorf("route %s has no client method; add one to client/routes.go and to this table", key)
			continue
		}
		seen[key] = true
		if _, ok := typ.MethodByName(name); !ok {
			t.Errorf("route %s: *client.Client has no method %s", key, name)
		}
	}
	for key := range methods {
		if !seen[key] {
			t.Errorf("the table names %s, which is not a route", key)
		}
	}
}

// TestReplySizeLimit: the client reads a reply of exactly 8 MiB and
// refuses one byte more with an error that says so.
func TestReplySizeLimit(t *testing.T) {
	ctx := testutil.Context(t)
	const limit = 8 << 20
	for _, tc := range []struct {
		name    string
		size    int
		wantErr string // "": read
	}{
		{"at the limit", limit, ""},
		{"one past", limit + 1, "client: GET /openapi.json: reply larger than 8388608 bytes"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				w.Header().Set("Content-Type", "application/json")
				_, _ = w.Write([]byte(`{"a":"` + strings.Repeat("a", tc.size-len(`{"a":""}`)) + `"}`))
			}))
			defer srv.Close()
			c, _ := client.New(srv.URL)
			raw, err := c.OpenAPI(ctx)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tc.wantErr {
				t.Fatalf("OpenAPI: error %q, want %q", got, tc.wantErr)
			}
			if err == nil && len(raw) != tc.size {
				t.Errorf("OpenAPI: %d bytes, want %d", len(raw), tc.size)
			}
		})
	}
}
