package server_test

import (
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// fixture holds the objects the matrix requests address.
type fixture struct {
	e        *env
	ns1, ns2 string
	cfg1     string
	target   string // a service principal with no grants, for key issuance
	agent1   string
	rev1     string
	files    string // an Agent with an active revision, for file routes
	other    string // another Agent of ns1, for callers bound to it
	// revokeTarget is a user whose credentials are revoked, created once
	// (revoking again is harmless and saves a password hash per call).
	revokeTarget string
	n            int
}

func (f *fixture) agent() string {
	var a idOnly
	f.e.must("POST", "/namespaces/"+f.ns1+"/agents", map[string]any{"name": fmt.Sprintf("agent-%d", f.seq()), "configurationId": f.cfg1}, f.e.admin, 201, &a)
	return a.ID
}

func (f *fixture) seq() int { f.n++; return f.n }

// bind grants role to subject on one exact resource of ns1 (kind
// namespace: ns1 itself) and returns how to remove the binding again.
func (f *fixture) bind(subject, role string, kind store.ResourceKind, id string) (undo func()) {
	var b idOnly
	f.e.must("POST", "/iam/access-bindings", map[string]string{"subjectId": subject, "roleId": role,
		"namespaceId": f.ns1, "resourceKind": string(kind), "resourceId": id}, f.e.admin, 201, &b)
	return func() { f.e.must("DELETE", "/iam/access-bindings/"+b.ID, nil, f.e.admin, 200, nil) }
}

// restrictAgent denies subject action on the exact Agent id of ns1 and
// returns how to remove the restriction again.
func (f *fixture) restrictAgent(subject string, action store.Action, id string) (undo func()) {
	var r idOnly
	f.e.must("POST", "/iam/restrictions", map[string]string{"subjectId": subject, "action": string(action),
		"resourceKind": string(store.KindAgent), "namespaceId": f.ns1, "resourceId": id}, f.e.admin, 201, &r)
	return func() { f.e.must("DELETE", "/iam/restrictions/"+r.ID, nil, f.e.admin, 200, nil) }
}

// agentOf is the Agent a request path names (agent1 for the Agent list).
func (f *fixture) agentOf(path string) string {
	_, rest, ok := strings.Cut(path, "/agents/")
	if !ok {
		return f.agent1
	}
	id, _, _ := strings.Cut(rest, "/")
	return id
}

func (f *fixture) namespace() string {
	var ns idOnly
	f.e.must("POST", "/namespaces", map[string]string{"name": fmt.Sprintf("ns-%d", f.seq())}, f.e.admin, 201, &ns)
	return ns.ID
}

func (f *fixture) configuration() string {
	var c idOnly
	f.e.must("POST", "/namespaces/"+f.ns1+"/configurations",
		map[string]any{"name": fmt.Sprintf("cfg-%d", f.seq()), "kind": "agent", "document": map[string]any{}}, f.e.admin, 201, &c)
	return c.ID
}

func (f *fixture) servicePrincipal() string {
	var sp idOnly
	f.e.must("POST", "/iam/service-principals", map[string]string{"name": fmt.Sprintf("sp-%d", f.seq())}, f.e.admin, 201, &sp)
	return sp.ID
}

// matrixRoute says how to call one route and what each caller gets.
type matrixRoute struct {
	// perm is the permission the route needs; the restricted caller gets a
	// deny restriction on exactly it. Nil: any authenticated caller.
	perm *store.Permission
	ok   int // status for a caller holding the grant
	// noGrant is the status for a signed-in caller without any grant (and
	// for a key of a principal without grants, even with an admin cookie).
	noGrant int
	// restricted is the status for a caller holding every grant and a deny
	// restriction on perm.
	restricted int
	// nsKey is the status for a key limited to another Namespace.
	nsKey int
	// keyNoGrant, when not zero, is the status for a key of a principal
	// without grants sent with an admin cookie, where it differs from
	// noGrant (a route no key may call answers 401 to every key).
	keyNoGrant int
	// build returns the request path and body; it may create fixtures.
	build func(f *fixture) (path string, body any)
	// agent, for the routes of one Agent (and the Agent list), says what
	// callers scoped to one Agent or one Namespace get.
	agent *agentCase
}

// agentCase is the expectation of an Agent route for callers whose grants
// or restrictions name the exact Agent of the path (for the list: agent1).
// A caller bound to that exact Agent and a caller bound to the exact
// Namespace both get the route's ok status.
type agentCase struct {
	// action is the Agent action a deny restriction on the exact Agent
	// names (read for the revision and deployment reads: the Agent's
	// read decides whether its revisions are visible).
	action store.Action
	// restricted is the status for a caller holding every grant
	// installation-wide and a deny restriction on action on the exact
	// Agent.
	restricted int
	// other is the status for a caller bound to another Agent of the same
	// Namespace (404; the list answers 200, showing only that Agent).
	other int
	// readDenied, for a route whose action is not read, is the status for
	// a caller holding every grant installation-wide and a deny
	// restriction on read of the exact Agent: 404 where the answer shows
	// the Agent (it is hidden from that caller), the route's ok status
	// where it does not (a file write answers only the written hash).
	readDenied int
	// config is true when the route also reads the Agent's Configuration
	// (PATCH and deploy): the exact-Agent caller then also needs read on
	// that Configuration, and without it gets configNeeded.
	config       bool
	configNeeded int
}

func agentRoute(action store.Action, restricted int) *agentCase {
	return &agentCase{action: action, restricted: restricted, other: 404}
}

func perm(a store.Action, k store.ResourceKind) *store.Permission {
	return &store.Permission{Action: a, ResourceKind: k}
}

var (
	adminPerm = perm(store.ActionAdminister, store.KindInstallation)
	static    = func(p string) func(*fixture) (string, any) { return func(*fixture) (string, any) { return p, nil } }
)

// admin is the expectation of an installation-administration route.
func admin(ok int, build func(f *fixture) (string, any)) matrixRoute {
	return matrixRoute{perm: adminPerm, ok: ok, noGrant: 403, restricted: 403, nsKey: 403, build: build}
}

func matrixRoutes() map[string]matrixRoute {
	return map[string]matrixRoute{
		"GET /healthz":      {ok: 200, noGrant: 200, restricted: 200, nsKey: 200, build: static("/healthz")},
		"GET /readyz":       {ok: 200, noGrant: 200, restricted: 200, nsKey: 200, build: static("/readyz")},
		"GET /openapi.json": {ok: 200, noGrant: 200, restricted: 200, nsKey: 200, build: static("/openapi.json")},
		// Sign-in and sign-out change the caller's own session; they have
		// their own tests (TestSignInOut).
		"POST /api/auth/sign-in/email": {},
		"POST /api/auth/sign-out":      {},
		"GET /api/auth/session":        {ok: 200, noGrant: 200, restricted: 200, nsKey: 200, build: static("/api/auth/session")},
		// A user's own sessions: any signed-in user, never a key (401); the
		// matrix has one status for sessions and keys without grants, so
		// these have their own test (TestSessionsAPI).
		"GET /api/auth/sessions":                {},
		"DELETE /api/auth/sessions/{sessionId}": {},
		"POST /api/auth/service-keys": admin(201, func(f *fixture) (string, any) {
			return "/api/auth/service-keys", map[string]any{"servicePrincipalId": f.target, "name": "k"}
		}),
		"DELETE /api/auth/service-keys/{keyId}": admin(200, func(f *fixture) (string, any) {
			var k idOnly
			f.e.must("POST", "/api/auth/service-keys", map[string]any{"servicePrincipalId": f.target, "name": "k"}, f.e.admin, 201, &k)
			return "/api/auth/service-keys/" + k.ID, nil
		}),

		"GET /namespaces": {perm: perm(store.ActionRead, store.KindNamespace), ok: 200, noGrant: 200, restricted: 200, nsKey: 200, build: static("/namespaces")},
		"POST /namespaces": {perm: perm(store.ActionCreate, store.KindNamespace), ok: 201, noGrant: 403, restricted: 403, nsKey: 403,
			build: func(f *fixture) (string, any) {
				return "/namespaces", map[string]string{"name": fmt.Sprintf("new-%d", f.seq())}
			}},
		"GET /namespaces/{ns}": {perm: perm(store.ActionRead, store.KindNamespace), ok: 200, noGrant: 404, restricted: 404, nsKey: 403,
			build: func(f *fixture) (string, any) { return "/namespaces/" + f.ns1, nil }},
		"DELETE /namespaces/{ns}": {perm: perm(store.ActionDelete, store.KindNamespace), ok: 202, noGrant: 404, restricted: 403, nsKey: 403,
			build: func(f *fixture) (string, any) { return "/namespaces/" + f.namespace(), nil }},

		"POST /namespaces/{ns}/reconcile": admin(202, func(f *fixture) (string, any) { return "/namespaces/" + f.ns1 + "/reconcile", nil }),
		"POST /namespace-reconciliations": admin(202, static("/namespace-reconciliations")),
		"GET /namespaces/{ns}/reconciliations/{reconciliationId}": {perm: perm(store.ActionRead, store.KindNamespace), ok: 200, noGrant: 404, restricted: 404, nsKey: 403,
			build: func(f *fixture) (string, any) {
				var rc idOnly
				f.e.must("POST", "/namespaces/"+f.ns1+"/reconcile", nil, f.e.admin, 202, &rc)
				return "/namespaces/" + f.ns1 + "/reconciliations/" + rc.ID, nil
			}},
		"GET /namespaces/{ns}/agents": {perm: perm(store.ActionRead, store.KindAgent), ok: 200, noGrant: 404, restricted: 200, nsKey: 403,
			build: func(f *fixture) (string, any) { return "/namespaces/" + f.ns1 + "/agents", nil }, agent: &agentCase{action: store.ActionRead, restricted: 200, other: 200}},
		"POST /namespaces/{ns}/agents": {perm: perm(store.ActionCreate, store.KindAgent), ok: 201, noGrant: 404, restricted: 403, nsKey: 403,
			build: func(f *fixture) (string, any) {
				return "/namespaces/" + f.ns1 + "/agents", map[string]any{"name": fmt.Sprintf("a-%d", f.seq()), "configurationId": f.cfg1}
			}},
		"GET /namespaces/{ns}/agents/{agentId}": {perm: perm(store.ActionRead, store.KindAgent), ok: 200, noGrant: 404, restricted: 404, nsKey: 403,
			build: func(f *fixture) (string, any) { return "/namespaces/" + f.ns1 + "/agents/" + f.agent1, nil }, agent: agentRoute(store.ActionRead, 404)},
		"PATCH /namespaces/{ns}/agents/{agentId}": {perm: perm(store.ActionUpdate, store.KindAgent), ok: 200, noGrant: 404, restricted: 403, nsKey: 403,
			build: func(f *fixture) (string, any) {
				return "/namespaces/" + f.ns1 + "/agents/" + f.agent1, map[string]any{"configurationId": f.cfg1}
			}, agent: &agentCase{action: store.ActionUpdate, restricted: 403, other: 404, config: true, configNeeded: 404, readDenied: 404}},
		"DELETE /namespaces/{ns}/agents/{agentId}": {perm: perm(store.ActionDelete, store.KindAgent), ok: 202, noGrant: 404, restricted: 403, nsKey: 403,
			build: func(f *fixture) (string, any) { return "/namespaces/" + f.ns1 + "/agents/" + f.agent(), nil }, agent: &agentCase{action: store.ActionDelete, restricted: 403, other: 404, readDenied: 404}},
		"POST /namespaces/{ns}/agents/{agentId}/deploy": {perm: perm(store.ActionDeploy, store.KindAgent), ok: 202, noGrant: 404, restricted: 403, nsKey: 403,
			build: func(f *fixture) (string, any) { return "/namespaces/" + f.ns1 + "/agents/" + f.agent1 + "/deploy", nil }, agent: &agentCase{action: store.ActionDeploy, restricted: 403, other: 404, config: true, configNeeded: 404, readDenied: 404}},
		"POST /namespaces/{ns}/agents/{agentId}/stop": {perm: perm(store.ActionOperate, store.KindAgent), ok: 202, noGrant: 404, restricted: 403, nsKey: 403,
			build: func(f *fixture) (string, any) { return "/namespaces/" + f.ns1 + "/agents/" + f.agent1 + "/stop", nil }, agent: &agentCase{action: store.ActionOperate, restricted: 403, other: 404, readDenied: 404}},
		"GET /namespaces/{ns}/agents/{agentId}/revisions": {perm: perm(store.ActionRead, store.KindAgentRevision), ok: 200, noGrant: 404, restricted: 200, nsKey: 403,
			build: func(f *fixture) (string, any) {
				return "/namespaces/" + f.ns1 + "/agents/" + f.agent1 + "/revisions", nil
			}, agent: agentRoute(store.ActionRead, 404)},
		"GET /namespaces/{ns}/agents/{agentId}/deployments/{deploymentId}": {perm: perm(store.ActionRead, store.KindAgentRevision), ok: 200, noGrant: 404, restricted: 403, nsKey: 403,
			build: func(f *fixture) (string, any) {
				return "/namespaces/" + f.ns1 + "/agents/" + f.agent1 + "/deployments/" + f.rev1, nil
			}, agent: agentRoute(store.ActionRead, 404)},
		"GET /namespaces/{ns}/agents/{agentId}/workspace/files/{name}": {perm: perm(store.ActionRead, store.KindAgent), ok: 200, noGrant: 404, restricted: 404, nsKey: 403,
			build: func(f *fixture) (string, any) {
				return "/namespaces/" + f.ns1 + "/agents/" + f.files + "/workspace/files/SOUL.md", nil
			}, agent: agentRoute(store.ActionRead, 404)},
		"PUT /namespaces/{ns}/agents/{agentId}/workspace/files/{name}": {perm: perm(store.ActionOperate, store.KindAgent), ok: 200, noGrant: 404, restricted: 403, nsKey: 403,
			build: func(f *fixture) (string, any) {
				return "/namespaces/" + f.ns1 + "/agents/" + f.files + "/workspace/files/SOUL.md", map[string]string{"content": "soul"}
			}, agent: &agentCase{action: store.ActionOperate, restricted: 403, other: 404, readDenied: 200}},
		"GET /workspace-defaults": {ok: 200, noGrant: 200, restricted: 200, nsKey: 200, build: static("/workspace-defaults")},

		"GET /namespaces/{ns}/configurations": {perm: perm(store.ActionRead, store.KindConfiguration), ok: 200, noGrant: 404, restricted: 200, nsKey: 403,
			build: func(f *fixture) (string, any) { return "/namespaces/" + f.ns1 + "/configurations", nil }},
		"POST /namespaces/{ns}/configurations": {perm: perm(store.ActionCreate, store.KindConfiguration), ok: 201, noGrant: 404, restricted: 403, nsKey: 403,
			build: func(f *fixture) (string, any) {
				return "/namespaces/" + f.ns1 + "/configurations",
					map[string]any{"name": fmt.Sprintf("c-%d", f.seq()), "kind": "agent", "document": map[string]any{"agents": map[string]any{}}}
			}},
		"GET /namespaces/{ns}/configurations/{cfg}": {perm: perm(store.ActionRead, store.KindConfiguration), ok: 200, noGrant: 404, restricted: 404, nsKey: 403,
			build: func(f *fixture) (string, any) { return "/namespaces/" + f.ns1 + "/configurations/" + f.cfg1, nil }},
		"PATCH /namespaces/{ns}/configurations/{cfg}": {perm: perm(store.ActionUpdate, store.KindConfiguration), ok: 200, noGrant: 404, restricted: 403, nsKey: 403,
			build: func(f *fixture) (string, any) {
				return "/namespaces/" + f.ns1 + "/configurations/" + f.cfg1, map[string]any{"document": map[string]any{"n": f.seq()}}
			}},
		"DELETE /namespaces/{ns}/configurations/{cfg}": {perm: perm(store.ActionDelete, store.KindConfiguration), ok: 200, noGrant: 404, restricted: 403, nsKey: 403,
			build: func(f *fixture) (string, any) {
				return "/namespaces/" + f.ns1 + "/configurations/" + f.configuration(), nil
			}},

		// No key may create accounts (401), as in the reference.
		"POST /iam/users": func() matrixRoute {
			m := admin(201, func(f *fixture) (string, any) {
				return "/iam/users", map[string]string{"email": fmt.Sprintf("u%d@example.com", f.seq()), "password": testPassword}
			})
			m.nsKey, m.keyNoGrant = 401, 401
			return m
		}(),
		"POST /iam/users/{userId}/revoke-credentials": admin(200, func(f *fixture) (string, any) {
			if f.revokeTarget == "" {
				var u idOnly
				f.e.must("POST", "/iam/users", map[string]string{"email": "revoke-target@example.com", "password": testPassword}, f.e.admin, 201, &u)
				f.revokeTarget = u.ID
			}
			return "/iam/users/" + f.revokeTarget + "/revoke-credentials", nil
		}),
		"GET /iam/service-principals": {perm: perm(store.ActionRead, store.KindServiceAccount), ok: 200, noGrant: 200, restricted: 200, nsKey: 200,
			build: static("/iam/service-principals")},
		"POST /iam/service-principals": {perm: perm(store.ActionCreate, store.KindServiceAccount), ok: 201, noGrant: 403, restricted: 403, nsKey: 403,
			build: func(f *fixture) (string, any) {
				return "/iam/service-principals", map[string]string{"name": fmt.Sprintf("p-%d", f.seq())}
			}},
		// A principal outside the key's Namespace (here installation-level)
		// is named by id alone: hidden from the key, 404 as a missing one.
		"GET /iam/service-principals/{sa}": {perm: perm(store.ActionRead, store.KindServiceAccount), ok: 200, noGrant: 404, restricted: 404, nsKey: 404,
			build: func(f *fixture) (string, any) { return "/iam/service-principals/" + f.target, nil }},
		"DELETE /iam/service-principals/{sa}": {perm: perm(store.ActionDelete, store.KindServiceAccount), ok: 200, noGrant: 404, restricted: 403, nsKey: 404,
			build: func(f *fixture) (string, any) { return "/iam/service-principals/" + f.servicePrincipal(), nil }},

		"GET /iam/roles": admin(200, static("/iam/roles")),
		"POST /iam/roles": admin(201, func(f *fixture) (string, any) {
			return "/iam/roles", map[string]any{"name": fmt.Sprintf("r-%d", f.seq()),
				"permissions": []store.Permission{{Action: store.ActionRead, ResourceKind: store.KindAgent}}}
		}),
		"GET /iam/roles/{roleId}": admin(200, static("/iam/roles/"+authz.RoleViewerID)),
		"DELETE /iam/roles/{roleId}": admin(200, func(f *fixture) (string, any) {
			var r idOnly
			f.e.must("POST", "/iam/roles", map[string]any{"name": fmt.Sprintf("d-%d", f.seq()),
				"permissions": []store.Permission{{Action: store.ActionRead, ResourceKind: store.KindAgent}}}, f.e.admin, 201, &r)
			return "/iam/roles/" + r.ID, nil
		}),
		"GET /iam/access-bindings": admin(200, static("/iam/access-bindings")),
		"POST /iam/access-bindings": admin(201, func(f *fixture) (string, any) {
			return "/iam/access-bindings", map[string]string{"subjectId": f.target, "roleId": authz.RoleViewerID, "namespaceId": f.ns2}
		}),
		"DELETE /iam/access-bindings/{bindingId}": admin(200, func(f *fixture) (string, any) {
			var b idOnly
			f.e.must("POST", "/iam/access-bindings", map[string]string{"subjectId": f.target, "roleId": authz.RoleViewerID, "namespaceId": f.ns2}, f.e.admin, 201, &b)
			return "/iam/access-bindings/" + b.ID, nil
		}),
		"GET /iam/restrictions": admin(200, static("/iam/restrictions")),
		"POST /iam/restrictions": admin(201, func(f *fixture) (string, any) {
			return "/iam/restrictions", map[string]string{"subjectId": f.target, "action": "read", "resourceKind": "agent"}
		}),
		"DELETE /iam/restrictions/{restrictionId}": admin(200, func(f *fixture) (string, any) {
			var r idOnly
			f.e.must("POST", "/iam/restrictions", map[string]string{"subjectId": f.target, "action": "read", "resourceKind": "agent"}, f.e.admin, 201, &r)
			return "/iam/restrictions/" + r.ID, nil
		}),
		"GET /audit-events": admin(200, static("/audit-events")),
	}
}

// TestAuthorizationMatrix sends every route of the route table as each kind
// of caller and checks the status. A route missing from matrixRoutes fails
// the test, so new routes cannot skip it.
func TestAuthorizationMatrix(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		drv := fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}})
		mem := gwtest.NewMemFiles()
		e := newEnvWith(t, st, server.Options{Driver: drv, Files: mem})
		f := &fixture{e: e}
		f.ns1, f.ns2 = f.namespace(), f.namespace()
		f.cfg1 = f.configuration()
		f.target = f.servicePrincipal()
		// The worker makes the Namespaces ready so that deploy is allowed.
		for i := 0; i < 10; i++ {
			if _, err := e.srv.Worker.RunOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		f.agent1 = f.agent()
		var rev idOnly
		e.must("POST", "/namespaces/"+f.ns1+"/agents/"+f.agent1+"/deploy", nil, e.admin, 202, &rev)
		f.rev1 = rev.ID
		f.files = f.agent()
		e.must("POST", "/namespaces/"+f.ns1+"/agents/"+f.files+"/deploy", nil, e.admin, 202, nil)
		for i := 0; i < 50; i++ {
			if _, err := e.srv.Worker.RunOnce(t.Context()); err != nil {
				t.Fatal(err)
			}
		}
		mem.Seed("ws://127.0.0.1:0/fake/"+f.files, "SOUL.md", "soul")
		if drv.Active(f.files) == "" {
			t.Fatal("the file routes' Agent did not activate")
		}
		f.other = f.agent()

		_, noGrant := e.user("nogrant@example.com", "")
		_, granted := e.user("granted@example.com", authz.RoleAdministratorID)
		restrictedID, restricted := e.user("restricted@example.com", authz.RoleAdministratorID)
		_, _, noGrantKey := e.principal("nogrant-key", "", "")
		_, _, nsKey := e.principal("ns2-key", authz.RoleAdministratorID, f.ns2)
		_, revokedKeyID, revokedKey := e.principal("revoked-key", authz.RoleAdministratorID, "")
		e.must("DELETE", "/api/auth/service-keys/"+revokedKeyID, nil, e.admin, 200, nil)
		_, _, expiringKey := e.principal("expiring-key", authz.RoleAdministratorID, "")
		// A second server over the same store, 31 days later: the key
		// (default lifetime 30 days) has expired there.
		later := newClock()
		later.Advance(31 * 24 * time.Hour)
		lateSrv := server.New(server.Options{Store: st, PublicOrigin: testOrigin, Now: later.Now})

		// Callers scoped to one Agent or one Namespace of ns1. The
		// exact-Agent caller is bound per request to the Agent the path
		// names; the other-Agent caller holds the same grants on another
		// Agent of ns1 (and read on the Configuration, so that only the
		// Agent decides).
		agentUserID, agentUser := e.user("exact-agent@example.com", "")
		agentUser.name = "exact-Agent binding"
		otherUserID, otherUser := e.user("other-agent@example.com", "")
		otherUser.name = "binding on another Agent"
		f.bind(otherUserID, authz.RoleAdministratorID, store.KindAgent, f.other)
		f.bind(otherUserID, authz.RoleViewerID, store.KindConfiguration, f.cfg1)
		nsUserID, nsUser := e.user("exact-namespace@example.com", "")
		nsUser.name = "exact-Namespace binding"
		f.bind(nsUserID, authz.RoleAdministratorID, store.KindNamespace, f.ns1)

		keyWithAdminCookie := cred{key: noGrantKey.key, cookie: e.admin.cookie, name: "no-grant key + admin cookie"}
		badKeyWithAdminCookie := cred{key: revokedKey.key, cookie: e.admin.cookie, name: "revoked key + admin cookie"}

		table := matrixRoutes()
		for _, rt := range e.srv.Routes {
			key := rt.Method + " " + rt.Path
			m, ok := table[key]
			if !ok {
				t.Errorf("route %s has no authorization matrix entry", key)
				continue
			}
			if m.build == nil {
				continue // covered by a dedicated test
			}
			t.Run(strings.NewReplacer("/", "_", " ", "_").Replace(key), func(t *testing.T) {
				run := func(c cred) int {
					path, body := m.build(f)
					code, _, _ := e.do(rt.Method, path, body, c)
					return code
				}
				unauth := 401
				if rt.Auth == server.Probe {
					unauth = m.ok
				}
				got := map[string]int{
					"anonymous":                                      run(cred{}),
					"session without grant":                          run(noGrant),
					"session with grant":                             run(granted),
					"namespace key used on another namespace":        run(nsKey),
					"revoked key":                                    run(revokedKey),
					"key of principal without grants + admin cookie": run(keyWithAdminCookie),
					"revoked key + admin cookie":                     run(badKeyWithAdminCookie),
				}
				// Expired key: on the later server.
				{
					path, body := m.build(f)
					saved := e.srv
					e.srv = lateSrv
					code, _, _ := e.do(rt.Method, path, body, expiringKey)
					e.srv = saved
					got["expired key"] = code
				}
				keyNoGrant := m.noGrant
				if m.keyNoGrant != 0 {
					keyNoGrant = m.keyNoGrant
				}
				want := map[string]int{
					"anonymous":                               unauth,
					"session without grant":                   m.noGrant,
					"session with grant":                      m.ok,
					"namespace key used on another namespace": m.nsKey,
					"revoked key":                             unauth,
					"expired key":                             unauth,
					"key of principal without grants + admin cookie": keyNoGrant,
					"revoked key + admin cookie":                     unauth,
				}
				if m.perm != nil {
					var r idOnly
					e.must("POST", "/iam/restrictions", map[string]string{"subjectId": restrictedID,
						"action": string(m.perm.Action), "resourceKind": string(m.perm.ResourceKind)}, e.admin, 201, &r)
					got["deny restriction"] = run(restricted)
					want["deny restriction"] = m.restricted
					e.must("DELETE", "/iam/restrictions/"+r.ID, nil, e.admin, 200, nil)
				}
				if a := m.agent; a != nil {
					// scoped sends the request as c after setup has given
					// the grants or restrictions naming the path's Agent.
					scoped := func(c cred, setup func(agentID string) []func()) int {
						path, body := m.build(f)
						for _, undo := range setup(f.agentOf(path)) {
							defer undo()
						}
						code, _, _ := e.do(rt.Method, path, body, c)
						return code
					}
					none := func(string) []func() { return nil }
					exactAgent := func(id string) []func() {
						undo := []func(){f.bind(agentUserID, authz.RoleAdministratorID, store.KindAgent, id)}
						if a.config {
							undo = append(undo, f.bind(agentUserID, authz.RoleViewerID, store.KindConfiguration, f.cfg1))
						}
						return undo
					}
					got["exact-Agent binding"] = scoped(agentUser, exactAgent)
					want["exact-Agent binding"] = m.ok
					if a.config {
						got["exact-Agent binding without the Configuration"] = scoped(agentUser, func(id string) []func() {
							return []func(){f.bind(agentUserID, authz.RoleAdministratorID, store.KindAgent, id)}
						})
						want["exact-Agent binding without the Configuration"] = a.configNeeded
					}
					got["binding on another Agent"] = scoped(otherUser, none)
					want["binding on another Agent"] = a.other
					got["exact-Namespace binding"] = scoped(nsUser, none)
					want["exact-Namespace binding"] = m.ok
					got["deny restriction on the exact Agent"] = scoped(restricted, func(id string) []func() {
						return []func(){f.restrictAgent(restrictedID, a.action, id)}
					})
					want["deny restriction on the exact Agent"] = a.restricted
					if a.action != store.ActionRead {
						got["deny read on the exact Agent"] = scoped(restricted, func(id string) []func() {
							return []func(){f.restrictAgent(restrictedID, store.ActionRead, id)}
						})
						want["deny read on the exact Agent"] = a.readDenied
					}
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s: status by caller (-want +got):\n%s", key, diff)
				}
			})
		}
		t.Run("Agent list and Agent reads by scope", func(t *testing.T) {
			undo := f.bind(agentUserID, authz.RoleAdministratorID, store.KindAgent, f.agent1)
			defer undo()
			undoR := f.restrictAgent(restrictedID, store.ActionRead, f.agent1)
			defer undoR()
			var all struct{ Items []idOnly }
			e.must("GET", "/namespaces/"+f.ns1+"/agents", nil, e.admin, 200, &all)
			var allButAgent1 []string
			for _, a := range all.Items {
				if a.ID != f.agent1 {
					allButAgent1 = append(allButAgent1, a.ID)
				}
			}
			const missingNS = "ns_00000000-0000-4000-8000-000000000000"
			tests := []struct {
				name string
				c    cred
				path string
				code int
				ids  []string // for 200 on a list: exactly these Agents
			}{
				{"exact-Agent binding lists only its Agent", agentUser, "/namespaces/" + f.ns1 + "/agents", 200, []string{f.agent1}},
				{"other-Agent binding lists only its Agent", otherUser, "/namespaces/" + f.ns1 + "/agents", 200, []string{f.other}},
				{"exact-Namespace binding lists every Agent", nsUser, "/namespaces/" + f.ns1 + "/agents", 200, idsOf(all.Items)},
				{"restricted read on agent1 hides it from the list", restricted, "/namespaces/" + f.ns1 + "/agents", 200, allButAgent1},
				{"no grant in the Namespace", noGrant, "/namespaces/" + f.ns1 + "/agents", 404, nil},
				{"exact-Agent binding, another Namespace", agentUser, "/namespaces/" + f.ns2 + "/agents", 404, nil},
				{"administrator, missing Namespace", e.admin, "/namespaces/" + missingNS + "/agents", 404, nil},
				{"exact-Agent binding, missing Namespace", agentUser, "/namespaces/" + missingNS + "/agents", 404, nil},
				{"exact-Agent binding, its Agent under a missing Namespace", agentUser, "/namespaces/" + missingNS + "/agents/" + f.agent1, 404, nil},
				{"exact-Agent binding, its Agent under another Namespace", agentUser, "/namespaces/" + f.ns2 + "/agents/" + f.agent1, 404, nil},
				{"exact-Agent binding cannot read the Namespace", agentUser, "/namespaces/" + f.ns1, 404, nil},
				{"exact-Agent binding cannot read another Agent", agentUser, "/namespaces/" + f.ns1 + "/agents/" + f.other, 404, nil},
			}
			for _, tc := range tests {
				code, env, _ := e.do("GET", tc.path, nil, tc.c)
				if code != tc.code {
					t.Errorf("%s: GET %s: status %d, want %d", tc.name, tc.path, code, tc.code)
					continue
				}
				if tc.ids == nil {
					continue
				}
				var got struct{ Items []idOnly }
				if err := jsonUnmarshal(env.Data, &got); err != nil {
					t.Fatalf("%s: decode the list: %v", tc.name, err)
				}
				if diff := cmp.Diff(sortedIDs(tc.ids), sortedIDs(idsOf(got.Items))); diff != "" {
					t.Errorf("%s: listed Agents (-want +got):\n%s", tc.name, diff)
				}
			}
		})
		t.Run("a revision's configuration needs read on the Configuration", func(t *testing.T) {
			// The snapshot is a copy of the Configuration, which a binding
			// on the exact Agent does not cover: its revisions are listed
			// without it until the caller may also read the Configuration.
			undo := f.bind(agentUserID, authz.RoleViewerID, store.KindAgent, f.agent1)
			defer undo()
			type rev struct {
				ID            string          `json:"id"`
				Configuration json.RawMessage `json:"configuration"`
			}
			base := "/namespaces/" + f.ns1 + "/agents/" + f.agent1 + "/revisions"
			// snapshots returns the configuration of the first and the last
			// revision listed.
			snapshots := func(c cred) (first, last string) {
				t.Helper()
				var page struct{ Items []rev }
				e.must("GET", base, nil, c, 200, &page)
				if len(page.Items) == 0 {
					t.Fatalf("no revision of %s listed", f.agent1)
				}
				return string(page.Items[0].Configuration), string(page.Items[len(page.Items)-1].Configuration)
			}
			if first, last := snapshots(e.admin); first == "" || last == "" {
				t.Fatalf("the administrator sees no configuration: %q %q", first, last)
			}
			if first, last := snapshots(agentUser); first != "" || last != "" {
				t.Errorf("an exact-Agent viewer sees the configuration: %q %q", first, last)
			}
			undoC := f.bind(agentUserID, authz.RoleViewerID, store.KindConfiguration, f.cfg1)
			defer undoC()
			if first, _ := snapshots(agentUser); first == "" {
				t.Errorf("a viewer of the Agent and of its Configuration does not see the configuration")
			}
		})
		t.Run("one permission on the exact Agent is enough", func(t *testing.T) {
			// A role holding a single Agent permission, bound to the exact
			// Agent: the file routes need exactly read (GET) or operate
			// (PUT), stop exactly operate; nothing on the Namespace or the
			// revisions.
			role := func(a store.Action) string {
				var r idOnly
				e.must("POST", "/iam/roles", map[string]any{"name": fmt.Sprintf("only-%s-%d", a, f.seq()),
					"permissions": []store.Permission{{Action: a, ResourceKind: store.KindAgent}}}, e.admin, 201, &r)
				return r.ID
			}
			readerID, reader := e.user("agent-reader@example.com", "")
			defer f.bind(readerID, role(store.ActionRead), store.KindAgent, f.files)()
			operatorID, operator := e.user("agent-operator@example.com", "")
			defer f.bind(operatorID, role(store.ActionOperate), store.KindAgent, f.files)()
			file := "/namespaces/" + f.ns1 + "/agents/" + f.files + "/workspace/files/SOUL.md"
			tests := []struct {
				name   string
				c      cred
				method string
				path   string
				body   any
				code   int
			}{
				{"read: GET file", reader, "GET", file, nil, 200},
				{"read: GET Agent", reader, "GET", "/namespaces/" + f.ns1 + "/agents/" + f.files, nil, 200},
				{"read: PUT file is visible but forbidden", reader, "PUT", file, map[string]string{"content": "soul"}, 403},
				{"operate: PUT file", operator, "PUT", file, map[string]string{"content": "soul"}, 200},
				{"operate: GET file is hidden", operator, "GET", file, nil, 404},
				{"operate: GET Agent is hidden", operator, "GET", "/namespaces/" + f.ns1 + "/agents/" + f.files, nil, 404},
			}
			for _, tc := range tests {
				if code, env, _ := e.do(tc.method, tc.path, tc.body, tc.c); code != tc.code {
					t.Errorf("%s: %s %s: status %d, want %d; error %+v", tc.name, tc.method, tc.path, code, tc.code, env.Error)
				}
			}
		})
		for key := range table {
			found := false
			for _, rt := range e.srv.Routes {
				if rt.Method+" "+rt.Path == key {
					found = true
				}
			}
			if !found {
				t.Errorf("matrix entry %s names no route", key)
			}
		}
	})
}

func idsOf(xs []idOnly) []string {
	out := make([]string, 0, len(xs))
	for _, x := range xs {
		out = append(out, x.ID)
	}
	return out
}

func sortedIDs(ids []string) []string {
	out := slices.Clone(ids)
	slices.Sort(out)
	return out
}

// TestSignInOut covers the two routes that change the caller's session.
func TestSignInOut(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		e := newEnv(t, st)
		_, _, key := e.principal("signer", authz.RoleAdministratorID, "")
		tests := []struct {
			name string
			body map[string]string
			c    cred
			want int
		}{
			{"good password", map[string]string{"email": "admin@example.com", "password": testPassword}, cred{}, 200},
			{"email is case-insensitive", map[string]string{"email": "ADMIN@example.com", "password": testPassword}, cred{}, 200},
			{"wrong password", map[string]string{"email": "admin@example.com", "password": testPassword + "x"}, cred{}, 401},
			{"unknown user", map[string]string{"email": "nobody@example.com", "password": testPassword}, cred{}, 401},
			{"API keys cannot create sessions", map[string]string{"email": "admin@example.com", "password": testPassword}, key, 401},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				code, _, _ := e.do("POST", "/api/auth/sign-in/email", tc.body, tc.c)
				if code != tc.want {
					t.Errorf("sign-in: status %d, want %d", code, tc.want)
				}
			})
		}
		s := e.signIn("admin@example.com", testPassword)
		e.must("GET", "/api/auth/session", nil, s, 200, nil)
		_, _, rec := e.do("POST", "/api/auth/sign-out", nil, s)
		if rec.Code != http.StatusOK {
			t.Fatalf("sign-out: status %d", rec.Code)
		}
		if c := rec.Result().Cookies(); len(c) != 1 || c[0].MaxAge >= 0 {
			t.Errorf("sign-out cookie = %+v, want one expiring cookie", c)
		}
		if code, _, _ := e.do("GET", "/api/auth/session", nil, s); code != 401 {
			t.Errorf("session after sign-out: status %d, want 401", code)
		}
		if code, _, _ := e.do("POST", "/api/auth/sign-out", nil, cred{}); code != 401 {
			t.Errorf("anonymous sign-out: status %d, want 401", code)
		}
	})
}
