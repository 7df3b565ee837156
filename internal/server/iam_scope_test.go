package server_test

import (
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/testdb"
)

// role creates a custom role (in namespaceID, when set) holding perms.
func (e *env) role(name, namespaceID string, perms ...store.Permission) string {
	e.t.Helper()
	body := map[string]any{"name": name, "permissions": perms}
	if namespaceID != "" {
		body["namespaceId"] = namespaceID
	}
	var r idOnly
	e.must("POST", "/iam/roles", body, e.admin, 201, &r)
	return r.ID
}

// TestIssuerRestrictedInsideTheGrant: an administrator denied an action on
// one exact resource cannot issue a key for a principal that holds that
// action over a scope containing the resource (the key could then do what
// the issuer may not). Before, only the scope as a whole was checked, which
// no restriction on one exact resource matches.
func TestIssuerRestrictedInsideTheGrant(t *testing.T) {
	e := newEnv(t, testdb.SQLite(t))
	var nsA, nsB, cfg idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "a"}, e.admin, 201, &nsA)
	e.must("POST", "/namespaces", map[string]string{"name": "b"}, e.admin, 201, &nsB)
	e.must("POST", "/namespaces/"+nsA.ID+"/configurations", map[string]any{"name": "c", "kind": "agent", "document": map[string]any{}}, e.admin, 201, &cfg)
	var agentX idOnly
	e.must("POST", "/namespaces/"+nsA.ID+"/agents", map[string]any{"name": "x", "configurationId": cfg.ID}, e.admin, 201, &agentX)
	deleter := e.role("agent-deleter", "", store.Permission{Action: store.ActionDelete, ResourceKind: store.KindAgent})

	tests := []struct {
		name        string
		restriction map[string]string // the issuer's, on delete of Agents
		binding     map[string]string // the target principal's deleter binding scope
		want        int
	}{
		{"denied on Agent X, grant across its Namespace",
			map[string]string{"namespaceId": nsA.ID, "resourceId": agentX.ID}, map[string]string{"namespaceId": nsA.ID}, 403},
		{"denied on Agent X, grant installation-wide",
			map[string]string{"namespaceId": nsA.ID, "resourceId": agentX.ID}, map[string]string{}, 403},
		{"denied on Agent X, grant on its exact Namespace",
			map[string]string{"namespaceId": nsA.ID, "resourceId": agentX.ID},
			map[string]string{"namespaceId": nsA.ID, "resourceKind": "namespace", "resourceId": nsA.ID}, 403},
		{"denied on Agent X, grant across another Namespace",
			map[string]string{"namespaceId": nsA.ID, "resourceId": agentX.ID}, map[string]string{"namespaceId": nsB.ID}, 201},
		{"denied across Namespace B, grant across Namespace A",
			map[string]string{"namespaceId": nsB.ID}, map[string]string{"namespaceId": nsA.ID}, 201},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			issuerID, issuer := e.user("issuer-"+string(rune('a'+i))+"@example.com", authz.RoleAdministratorID)
			r := map[string]string{"subjectId": issuerID, "action": "delete", "resourceKind": "agent"}
			for k, v := range tc.restriction {
				r[k] = v
			}
			e.must("POST", "/iam/restrictions", r, e.admin, 201, nil)
			var sp idOnly
			e.must("POST", "/iam/service-principals", map[string]string{"name": "target-" + string(rune('a'+i))}, e.admin, 201, &sp)
			b := map[string]string{"subjectId": sp.ID, "roleId": deleter}
			for k, v := range tc.binding {
				b[k] = v
			}
			e.must("POST", "/iam/access-bindings", b, e.admin, 201, nil)
			code, env, _ := e.do("POST", "/api/auth/service-keys", map[string]string{"servicePrincipalId": sp.ID, "name": "k"}, issuer)
			if code != tc.want {
				t.Errorf("issuing a key: status %d, want %d; error %+v", code, tc.want, env.Error)
			}
		})
	}
}

// TestExactScopeBelongsToItsNamespace: a binding or restriction on one
// exact resource names the Namespace the resource lives in. A Namespace's
// role bound "in Namespace A" on a service principal of Namespace B was
// accepted and then let its subject delete that principal; a revision
// scope was not looked up at all.
func TestExactScopeBelongsToItsNamespace(t *testing.T) {
	e := newDeployEnv(t, testdb.SQLite(t), compute.Capabilities{})
	nsB := e.ns
	var nsA idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "a"}, e.admin, 201, &nsA)
	var saB, saInst idOnly
	e.must("POST", "/iam/service-principals", map[string]string{"name": "in-b", "namespaceId": nsB}, e.admin, 201, &saB)
	e.must("POST", "/iam/service-principals", map[string]string{"name": "installation"}, e.admin, 201, &saInst)
	rev := e.deploy(e.createAgent("a", nil))
	roleA := e.role("sa-admin", nsA.ID, store.Permission{Action: store.ActionRead, ResourceKind: store.KindServiceAccount},
		store.Permission{Action: store.ActionDelete, ResourceKind: store.KindServiceAccount})
	subject, _, key := e.principal("subject", "", "")
	// Restrictions go to another subject: a deny on the principal of B
	// would hide what the refused binding of subject could do.
	restricted, _, _ := e.principal("restricted", "", "")

	invalid := limitReply{Status: 400, Code: "INVALID_REQUEST", Detail: "/resourceId:INVALID_VALUE"}
	created := limitReply{Status: 201}
	tests := []struct {
		name string
		path string
		body map[string]string
		want limitReply
	}{
		{"Namespace A's role on a principal of B", "/iam/access-bindings", map[string]string{"roleId": roleA, "namespaceId": nsA.ID,
			"resourceKind": "service_account", "resourceId": saB.ID}, invalid},
		{"Namespace A's role on an installation-level principal", "/iam/access-bindings", map[string]string{"roleId": roleA, "namespaceId": nsA.ID,
			"resourceKind": "service_account", "resourceId": saInst.ID}, invalid},
		{"a principal of B without its Namespace", "/iam/access-bindings", map[string]string{"roleId": authz.RoleViewerID,
			"resourceKind": "service_account", "resourceId": saB.ID}, invalid},
		{"a principal of B in B", "/iam/access-bindings", map[string]string{"roleId": authz.RoleViewerID, "namespaceId": nsB,
			"resourceKind": "service_account", "resourceId": saB.ID}, created},
		{"an installation-level principal without a Namespace", "/iam/access-bindings", map[string]string{"roleId": authz.RoleViewerID,
			"resourceKind": "service_account", "resourceId": saInst.ID}, created},
		{"a revision of B in A", "/iam/access-bindings", map[string]string{"roleId": authz.RoleViewerID, "namespaceId": nsA.ID,
			"resourceKind": "agent_revision", "resourceId": rev}, invalid},
		{"a revision of B in B", "/iam/access-bindings", map[string]string{"roleId": authz.RoleViewerID, "namespaceId": nsB,
			"resourceKind": "agent_revision", "resourceId": rev}, created},
		{"a revision that does not exist", "/iam/access-bindings", map[string]string{"roleId": authz.RoleViewerID, "namespaceId": nsB,
			"resourceKind": "agent_revision", "resourceId": ids.New(ids.Revision)}, invalid},
		{"a restriction on a principal of B in A", "/iam/restrictions", map[string]string{"action": "delete", "namespaceId": nsA.ID,
			"resourceKind": "service_account", "resourceId": saB.ID}, invalid},
		{"a restriction on a revision of B in A", "/iam/restrictions", map[string]string{"action": "read", "namespaceId": nsA.ID,
			"resourceKind": "agent_revision", "resourceId": rev}, invalid},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.body["subjectId"] = subject
			if tc.path == "/iam/restrictions" {
				tc.body["subjectId"] = restricted
			}
			code, env, _ := e.do("POST", tc.path, tc.body, e.admin)
			if diff := cmp.Diff(tc.want, replyOf(code, env)); diff != "" {
				t.Errorf("POST %s (-want +got):\n%s", tc.path, diff)
			}
		})
	}
	// The refused binding gave nothing: the subject may read the principal
	// of B (the viewer binding in B above) but not delete it.
	if code, _, _ := e.do("DELETE", "/iam/service-principals/"+saB.ID, nil, key); code != 403 {
		t.Errorf("DELETE the principal of B by the subject: status %d, want 403 (it may read it, not delete it)", code)
	}
	e.must("GET", "/iam/service-principals/"+saB.ID, nil, e.admin, 200, nil)
}

// TestNamespaceKeyFindsNothingElsewhere: a key limited to Namespace A that
// names an object by its id alone (a service principal, a reconciliation)
// gets 404 for one outside A, exactly as for an id that does not exist:
// it can never see the object, and the request named no other Namespace.
// Before, an existing one answered 403 and a missing one 404.
func TestNamespaceKeyFindsNothingElsewhere(t *testing.T) {
	e := newDeployEnv(t, testdb.SQLite(t), compute.Capabilities{})
	nsB := e.ns
	var nsA idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "a"}, e.admin, 201, &nsA)
	var saA, saB, saInst, recB idOnly
	e.must("POST", "/iam/service-principals", map[string]string{"name": "in-a", "namespaceId": nsA.ID}, e.admin, 201, &saA)
	e.must("POST", "/iam/service-principals", map[string]string{"name": "in-b", "namespaceId": nsB}, e.admin, 201, &saB)
	e.must("POST", "/iam/service-principals", map[string]string{"name": "installation"}, e.admin, 201, &saInst)
	e.must("POST", "/namespaces/"+nsB+"/reconcile", nil, e.admin, 202, &recB)
	_, _, key := e.principal("limited-to-a", authz.RoleAdministratorID, nsA.ID)

	tests := []struct {
		method, path string
		want         int
	}{
		{"GET", "/iam/service-principals/" + saA.ID, 200},
		{"GET", "/iam/service-principals/" + saB.ID, 404},
		{"GET", "/iam/service-principals/" + saInst.ID, 404},
		{"GET", "/iam/service-principals/" + ids.New(ids.ServicePrincipal), 404},
		{"DELETE", "/iam/service-principals/" + saB.ID, 404},
		{"DELETE", "/iam/service-principals/" + saInst.ID, 404},
		{"DELETE", "/iam/service-principals/" + ids.New(ids.ServicePrincipal), 404},
		{"GET", "/namespaces/" + nsA.ID + "/reconciliations/" + recB.ID, 404},
		// Naming the other Namespace itself stays 403, as the reference.
		{"GET", "/namespaces/" + nsB, 403},
	}
	for _, tc := range tests {
		if code, env, _ := e.do(tc.method, tc.path, nil, key); code != tc.want {
			t.Errorf("%s %s by a key limited to A: status %d, want %d; error %+v", tc.method, tc.path, code, tc.want, env.Error)
		}
	}
	// Nothing was deleted.
	e.must("GET", "/iam/service-principals/"+saB.ID, nil, e.admin, 200, nil)
	e.must("GET", "/iam/service-principals/"+saInst.ID, nil, e.admin, 200, nil)
}

// TestAgentReadAcrossTheNamespaceLists: a caller holding Agent read over a
// whole Namespace (bound across it, on it, or installation-wide) but not
// read on the Namespace itself may list its Agents, as it may read each.
// Before, only bindings on exact Agents counted and the list answered 404.
func TestAgentReadAcrossTheNamespaceLists(t *testing.T) {
	e := newEnv(t, testdb.SQLite(t))
	var ns, other, cfg idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "agents"}, e.admin, 201, &ns)
	e.must("POST", "/namespaces", map[string]string{"name": "other"}, e.admin, 201, &other)
	e.must("POST", "/namespaces/"+ns.ID+"/configurations", map[string]any{"name": "c", "kind": "agent", "document": map[string]any{}}, e.admin, 201, &cfg)
	var want []string
	for _, name := range []string{"a", "b", "c"} {
		var a idOnly
		e.must("POST", "/namespaces/"+ns.ID+"/agents", map[string]any{"name": name, "configurationId": cfg.ID}, e.admin, 201, &a)
		want = append(want, a.ID)
	}
	agentRead := e.role("agent-read", "", store.Permission{Action: store.ActionRead, ResourceKind: store.KindAgent})
	const missingNS = "ns_00000000-0000-4000-8000-000000000000"

	tests := []struct {
		name        string
		binding     map[string]string
		restriction map[string]string // a deny of Agent read, when set
		path        string
		code        int
		ids         []string
	}{
		{name: "bound across the Namespace", binding: map[string]string{"namespaceId": ns.ID}, path: ns.ID, code: 200, ids: want},
		{name: "bound on the exact Namespace", binding: map[string]string{"namespaceId": ns.ID, "resourceKind": "namespace", "resourceId": ns.ID},
			path: ns.ID, code: 200, ids: want},
		{name: "bound installation-wide", binding: map[string]string{}, path: ns.ID, code: 200, ids: want},
		{name: "bound installation-wide, one Agent denied", binding: map[string]string{},
			restriction: map[string]string{"namespaceId": ns.ID, "resourceId": want[1]}, path: ns.ID, code: 200, ids: []string{want[0], want[2]}},
		{name: "bound installation-wide, denied across the Namespace", binding: map[string]string{},
			restriction: map[string]string{"namespaceId": ns.ID}, path: ns.ID, code: 404},
		{name: "bound across another Namespace", binding: map[string]string{"namespaceId": other.ID}, path: ns.ID, code: 404},
		{name: "bound installation-wide, a missing Namespace", binding: map[string]string{}, path: missingNS, code: 404},
		{name: "bound installation-wide, an empty Namespace", binding: map[string]string{}, path: other.ID, code: 200, ids: []string{}},
	}
	for i, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			uid, c := e.user("reader-"+string(rune('a'+i))+"@example.com", "")
			b := map[string]string{"subjectId": uid, "roleId": agentRead}
			for k, v := range tc.binding {
				b[k] = v
			}
			e.must("POST", "/iam/access-bindings", b, e.admin, 201, nil)
			if tc.restriction != nil {
				r := map[string]string{"subjectId": uid, "action": "read", "resourceKind": "agent"}
				for k, v := range tc.restriction {
					r[k] = v
				}
				e.must("POST", "/iam/restrictions", r, e.admin, 201, nil)
			}
			code, env, _ := e.do("GET", "/namespaces/"+tc.path+"/agents", nil, c)
			if code != tc.code {
				t.Fatalf("GET the Agent list: status %d, want %d; error %+v", code, tc.code, env.Error)
			}
			if tc.ids == nil {
				return
			}
			var got struct{ Items []idOnly }
			if err := jsonUnmarshal(env.Data, &got); err != nil {
				t.Fatal(err)
			}
			if diff := cmp.Diff(sortedIDs(tc.ids), sortedIDs(idsOf(got.Items))); diff != "" {
				t.Errorf("listed Agents (-want +got):\n%s", diff)
			}
			for _, id := range tc.ids {
				e.must("GET", "/namespaces/"+tc.path+"/agents/"+id, nil, c, 200, nil)
			}
		})
	}
}
