package api

import (
	"encoding/json"
	"go/ast"
	"go/parser"
	"go/token"
	"maps"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/store"
)

// TestConvertedJSON pins the wire bytes of every converter. The wanted
// strings are what the API answered before the wire types existed, when
// handlers serialized store records and domain values directly: the move to
// package apitypes must not change one byte a client reads (names, order,
// omitted members, nulls). Each record also carries the private fields
// that must never appear (password hash, key hash, content hash, creator).
func TestConvertedJSON(t *testing.T) {
	t0 := time.Date(2026, 1, 2, 3, 4, 5, 600000000, time.UTC)
	t1 := time.Date(2026, 1, 2, 3, 4, 6, 0, time.UTC)
	ns := store.Namespace{ID: "ns_1", Name: "team", Status: store.NamespaceReady, CreatedAt: t0, UpdatedAt: t1}
	tests := []struct {
		name string
		got  apitypes.Data
		want string
	}{
		{"namespace", toNamespace(ns),
			`{"id":"ns_1","name":"team","status":"ready","createdAt":"2026-01-02T03:04:05.6Z","updatedAt":"2026-01-02T03:04:06Z"}`},
		{"configuration", toConfiguration(store.Configuration{ID: "cfg_1", NamespaceID: "ns_1", Name: "c", Kind: "agent",
			Document: json.RawMessage(`{"agents":{"list":[]}}`), Generation: 2, CreatedAt: t0, UpdatedAt: t1}),
			`{"id":"cfg_1","namespaceId":"ns_1","name":"c","kind":"agent","document":{"agents":{"list":[]}},"generation":2,"createdAt":"2026-01-02T03:04:05.6Z","updatedAt":"2026-01-02T03:04:06Z"}`},
		{"agent, never deployed", toAgent(store.Agent{ID: "agt_1", NamespaceID: "ns_1", Name: "a", ConfigurationID: "cfg_1",
			Status: store.AgentActive, DesiredRuntimeState: store.RuntimeStopped, DeletionRequestedBy: "usr_x", CreatedAt: t0, UpdatedAt: t1}),
			`{"id":"agt_1","namespaceId":"ns_1","name":"a","configurationId":"cfg_1","status":"active","desiredRuntimeState":"stopped","createdAt":"2026-01-02T03:04:05.6Z","updatedAt":"2026-01-02T03:04:06Z"}`},
		{"agent, deployed", toAgent(store.Agent{ID: "agt_1", NamespaceID: "ns_1", Name: "a", ConfigurationID: "cfg_1",
			Status: store.AgentDeleting, DesiredRuntimeState: store.RuntimeRunning, ActiveRevisionID: "rev_1", CreatedAt: t0, UpdatedAt: t1}),
			`{"id":"agt_1","namespaceId":"ns_1","name":"a","configurationId":"cfg_1","status":"deleting","desiredRuntimeState":"running","activeRevisionId":"rev_1","createdAt":"2026-01-02T03:04:05.6Z","updatedAt":"2026-01-02T03:04:06Z"}`},
		{"revision", toRevision(store.Revision{ID: "rev_1", NamespaceID: "ns_1", AgentID: "agt_1", Number: 3, ConfigurationID: "cfg_1",
			ConfigurationKind: "agent", ConfigurationGeneration: 2, Configuration: json.RawMessage(`{"x":1}`), ComputeDriverID: "test-driver",
			CreatedBy: "usr_x", CreatedAt: t0}),
			`{"id":"rev_1","namespaceId":"ns_1","agentId":"agt_1","revision":3,"configurationId":"cfg_1","configurationKind":"agent","configurationGeneration":2,"configuration":{"x":1},"computeDriverId":"test-driver","createdAt":"2026-01-02T03:04:05.6Z"}`},
		{"deployment succeeded", toDeployment(occ.Deployment{ID: "rev_1", NamespaceID: "ns_1", AgentID: "agt_1", Revision: 3,
			Status: occ.DeploymentSucceeded, CreatedAt: t0, UpdatedAt: t1}),
			`{"id":"rev_1","namespaceId":"ns_1","agentId":"agt_1","revision":3,"status":"succeeded","error":null,"progress":null,"createdAt":"2026-01-02T03:04:05.6Z","updatedAt":"2026-01-02T03:04:06Z"}`},
		{"deployment failed", toDeployment(occ.Deployment{ID: "rev_1", NamespaceID: "ns_1", AgentID: "agt_1", Revision: 3,
			Status: occ.DeploymentFailed, Error: &occ.DeploymentError{Code: "CANCELLED", Message: "m"}, CreatedAt: t0, UpdatedAt: t1}),
			`{"id":"rev_1","namespaceId":"ns_1","agentId":"agt_1","revision":3,"status":"failed","error":{"code":"CANCELLED","message":"m"},"progress":null,"createdAt":"2026-01-02T03:04:05.6Z","updatedAt":"2026-01-02T03:04:06Z"}`},
		{"deployment queued for a retry", toDeployment(occ.Deployment{ID: "rev_1", NamespaceID: "ns_1", AgentID: "agt_1", Revision: 3,
			Status: occ.DeploymentQueued, Progress: &occ.DeploymentProgress{LastAttempt: &store.WorkAttempt{Code: "C", Message: "m", At: t0},
				NextAttemptAt: &t1, Attempts: 2}, CreatedAt: t0, UpdatedAt: t1}),
			`{"id":"rev_1","namespaceId":"ns_1","agentId":"agt_1","revision":3,"status":"queued","error":null,"progress":{"lastAttempt":{"code":"C","message":"m","at":"2026-01-02T03:04:05.6Z"},"nextAttemptAt":"2026-01-02T03:04:06Z","attempts":2},"createdAt":"2026-01-02T03:04:05.6Z","updatedAt":"2026-01-02T03:04:06Z"}`},
		{"deployment running", toDeployment(occ.Deployment{ID: "rev_1", NamespaceID: "ns_1", AgentID: "agt_1", Revision: 3,
			Status: occ.DeploymentRunning, Progress: &occ.DeploymentProgress{}, CreatedAt: t0, UpdatedAt: t1}),
			`{"id":"rev_1","namespaceId":"ns_1","agentId":"agt_1","revision":3,"status":"running","error":null,"progress":{"attempts":0},"createdAt":"2026-01-02T03:04:05.6Z","updatedAt":"2026-01-02T03:04:06Z"}`},
		{"workspace file", toWorkspaceFile(occ.WorkspaceFile{Name: "SOUL.md", Content: "hi", Hash: "abc"}),
			`{"name":"SOUL.md","content":"hi"}`},
		{"written file", toWrittenFile(occ.WrittenFile{Name: "SOUL.md", Size: 6, Hash: "abc"}),
			`{"name":"SOUL.md","size":6}`},
		{"user", toUser(store.User{ID: "usr_1", Email: "a@example.com", PasswordHash: "h", CreatedAt: t0}),
			`{"id":"usr_1","email":"a@example.com","createdAt":"2026-01-02T03:04:05.6Z"}`},
		{"service principal", toServicePrincipal(store.ServicePrincipal{ID: "sp_1", Name: "ci", CreatedAt: t0}),
			`{"id":"sp_1","name":"ci","createdAt":"2026-01-02T03:04:05.6Z"}`},
		{"Agent service principal", toServicePrincipal(store.ServicePrincipal{ID: "sp_1", Name: "ci", NamespaceID: "ns_1", AgentID: "agt_1", CreatedAt: t0}),
			`{"id":"sp_1","name":"ci","namespaceId":"ns_1","agentId":"agt_1","createdAt":"2026-01-02T03:04:05.6Z"}`},
		{"issued key", toServiceKey(occ.IssuedKey{APIKey: store.APIKey{ID: "key_1", ServicePrincipalID: "sp_1", Name: "k",
			SecretHash: []byte{1}, CreatedBy: "usr_1", ExpiresAt: t1, CreatedAt: t0}, Key: "occ_secret"}),
			`{"id":"key_1","servicePrincipalId":"sp_1","name":"k","createdBy":"usr_1","expiresAt":"2026-01-02T03:04:06Z","createdAt":"2026-01-02T03:04:05.6Z","key":"occ_secret"}`},
		{"issued key, every member", toServiceKey(occ.IssuedKey{APIKey: store.APIKey{ID: "key_1", ServicePrincipalID: "sp_1", NamespaceID: "ns_1",
			Name: "k", CreatedBy: "usr_1", ExpiresAt: t1, RevokedAt: &t1, CreatedAt: t0}, Key: "occ_secret"}),
			`{"id":"key_1","servicePrincipalId":"sp_1","namespaceId":"ns_1","name":"k","createdBy":"usr_1","expiresAt":"2026-01-02T03:04:06Z","revokedAt":"2026-01-02T03:04:06Z","createdAt":"2026-01-02T03:04:05.6Z","key":"occ_secret"}`},
		{"role", toRole(store.Role{ID: "rol_1", NamespaceID: "ns_1", Name: "r", Permissions: []store.Permission{{Action: store.ActionRead,
			ResourceKind: store.KindAgent}}, Builtin: true, CreatedAt: t0}),
			`{"id":"rol_1","namespaceId":"ns_1","name":"r","permissions":[{"action":"read","resourceKind":"agent"}],"builtin":true,"createdAt":"2026-01-02T03:04:05.6Z"}`},
		{"role without permissions", toRole(store.Role{ID: "rol_1", Name: "r", CreatedAt: t0}),
			`{"id":"rol_1","name":"r","permissions":null,"builtin":false,"createdAt":"2026-01-02T03:04:05.6Z"}`},
		{"installation binding", toAccessBinding(store.AccessBinding{ID: "bnd_1", SubjectID: "usr_1", RoleID: "rol_1", CreatedAt: t0}),
			`{"id":"bnd_1","subjectId":"usr_1","roleId":"rol_1","createdAt":"2026-01-02T03:04:05.6Z"}`},
		{"exact-resource binding", toAccessBinding(store.AccessBinding{ID: "bnd_1", NamespaceID: "ns_1", SubjectID: "usr_1", RoleID: "rol_1",
			ResourceKind: store.KindAgent, ResourceID: "agt_1", CreatedAt: t0}),
			`{"id":"bnd_1","namespaceId":"ns_1","subjectId":"usr_1","roleId":"rol_1","resourceKind":"agent","resourceId":"agt_1","createdAt":"2026-01-02T03:04:05.6Z"}`},
		{"installation restriction", toRestriction(store.Restriction{ID: "rst_1", SubjectID: "usr_1", Action: store.ActionDelete,
			ResourceKind: store.KindNamespace, Effect: "deny", CreatedAt: t0}),
			`{"id":"rst_1","subjectId":"usr_1","action":"delete","resourceKind":"namespace","effect":"deny","createdAt":"2026-01-02T03:04:05.6Z"}`},
		{"exact-resource restriction", toRestriction(store.Restriction{ID: "rst_1", NamespaceID: "ns_1", SubjectID: "usr_1", Action: store.ActionDelete,
			ResourceKind: store.KindAgent, ResourceID: "agt_1", Effect: "deny", CreatedAt: t0}),
			`{"id":"rst_1","namespaceId":"ns_1","subjectId":"usr_1","action":"delete","resourceKind":"agent","resourceId":"agt_1","effect":"deny","createdAt":"2026-01-02T03:04:05.6Z"}`},
		{"audit page", toAuditPage(occ.AuditPage{Items: []store.AuditEvent{
			{ID: "aud_1", OccurredAt: t0, Kind: "mutation", ActorID: "usr_1", Credential: "session", RequestID: "req_1", Action: "agent.create",
				Resource: store.AuditResource{Kind: store.KindAgent, ID: "agt_1", NamespaceID: "ns_1"}, Outcome: "success", ReasonCode: "R",
				Details: map[string]string{"name": "a", "b": "c"}},
			{ID: "aud_2", OccurredAt: t1, Kind: "bootstrap", ActorID: "system", Action: "x", Resource: store.AuditResource{Kind: store.KindInstallation},
				Outcome: "success"},
		}, NextCursor: "cur"}),
			`{"items":[{"id":"aud_1","occurredAt":"2026-01-02T03:04:05.6Z","kind":"mutation","actorId":"usr_1","credential":"session","requestId":"req_1","action":"agent.create","resource":{"kind":"agent","id":"agt_1","namespaceId":"ns_1"},"outcome":"success","reasonCode":"R","details":{"b":"c","name":"a"}},{"id":"aud_2","occurredAt":"2026-01-02T03:04:06Z","kind":"bootstrap","actorId":"system","action":"x","resource":{"kind":"installation"},"outcome":"success"}],"nextCursor":"cur"}`},
		{"empty audit page", toAuditPage(occ.AuditPage{}), `{"items":[]}`},
		{"empty list", list([]store.Namespace(nil), toNamespace), `{"items":[]}`},
		{"list", list([]store.Namespace{ns}, toNamespace),
			`{"items":[{"id":"ns_1","name":"team","status":"ready","createdAt":"2026-01-02T03:04:05.6Z","updatedAt":"2026-01-02T03:04:06Z"}]}`},
		// The fixed shapes handlers build themselves, formerly maps and
		// unexported structs.
		{"user session", apitypes.Session{Subject: apitypes.Subject{ID: "usr_1", Kind: "user", Credential: "session"},
			User: new(toUser(store.User{ID: "usr_1", Email: "a@example.com", CreatedAt: t0}))},
			`{"subject":{"id":"usr_1","kind":"user","credential":"session"},"user":{"id":"usr_1","email":"a@example.com","createdAt":"2026-01-02T03:04:05.6Z"}}`},
		{"key session", apitypes.Session{Subject: apitypes.Subject{ID: "sp_1", Kind: "service_principal", NamespaceID: "ns_1", Credential: "api_key:key_1"}},
			`{"subject":{"id":"sp_1","kind":"service_principal","namespaceId":"ns_1","credential":"api_key:key_1"}}`},
		{"workspace defaults", apitypes.WorkspaceDefaults{ID: "d", Version: "v", Files: map[string]string{"SOUL.md": "s", "AGENTS.md": "a"}},
			`{"id":"d","version":"v","files":{"AGENTS.md":"a","SOUL.md":"s"}}`},
		{"signed out", apitypes.SignedOut{SignedOut: true}, `{"signedOut":true}`},
		{"revoked", apitypes.RevokedServiceKey{ID: "key_1", Revoked: true}, `{"id":"key_1","revoked":true}`},
		{"deleted", apitypes.Deleted{Deleted: true, ID: "rol_1"}, `{"deleted":true,"id":"rol_1"}`},
		{"health", apitypes.Health{Status: "ok"}, `{"status":"ok"}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			b, err := json.Marshal(tt.got)
			if err != nil {
				t.Fatalf("json.Marshal(%T): %v", tt.got, err)
			}
			if diff := cmp.Diff(tt.want, string(b)); diff != "" {
				t.Errorf("wire JSON of %T (-want +got):\n%s", tt.got, diff)
			}
		})
	}
}

// TestPermissionsRoundTrip checks the one inbound conversion of a list:
// a role request's permissions reach the domain unchanged, nil stays nil.
func TestPermissionsRoundTrip(t *testing.T) {
	in := []apitypes.Permission{{Action: apitypes.ActionRead, ResourceKind: apitypes.KindAgent},
		{Action: apitypes.ActionReadLogs, ResourceKind: apitypes.KindAgentRevision}}
	want := []store.Permission{{Action: store.ActionRead, ResourceKind: store.KindAgent},
		{Action: store.ActionReadLogs, ResourceKind: store.KindAgentRevision}}
	if diff := cmp.Diff(want, fromPermissions(in)); diff != "" {
		t.Errorf("fromPermissions (-want +got):\n%s", diff)
	}
	if got := fromPermissions(nil); got != nil {
		t.Errorf("fromPermissions(nil) = %#v; want nil", got)
	}
}

// TestEnumsMatchStore checks that every value of the enumerations the wire
// shares with the store exists on both sides: the converters cast between
// them, so a value added to one side only would reach clients unnamed, or
// be refused by the domain. Both files are read as source because Go
// cannot list a type's constants at run time.
func TestEnumsMatchStore(t *testing.T) {
	enums := []string{"NamespaceStatus", "AgentStatus", "RuntimeState", "Action", "ResourceKind"}
	wire := typedConsts(t, "../../apitypes")
	st := typedConsts(t, "../store")
	for _, e := range enums {
		if len(st[e]) == 0 {
			t.Errorf("store declares no %s constants; the source check found nothing", e)
		}
		if diff := cmp.Diff(st[e], wire[e]); diff != "" {
			t.Errorf("%s values, store (-) vs apitypes (+):\n%s", e, diff)
		}
	}
	want := []string{occ.DeploymentQueued, occ.DeploymentRunning, occ.DeploymentSucceeded, occ.DeploymentFailed}
	slices.Sort(want)
	if diff := cmp.Diff(want, wire["DeploymentStatus"]); diff != "" {
		t.Errorf("DeploymentStatus values, occ (-) vs apitypes (+):\n%s", diff)
	}
}

// typedConsts returns, per type name, the sorted string values of the
// constants declared with that explicit type in dir's non-test files.
func typedConsts(t *testing.T, dir string) map[string][]string {
	t.Helper()
	out := map[string]map[string]bool{}
	for _, f := range parseSources(t, dir) {
		for _, d := range f.Decls {
			g, ok := d.(*ast.GenDecl)
			if !ok || g.Tok != token.CONST {
				continue
			}
			for _, s := range g.Specs {
				vs := s.(*ast.ValueSpec)
				id, ok := vs.Type.(*ast.Ident)
				if !ok {
					continue
				}
				for _, v := range vs.Values {
					if lit, ok := v.(*ast.BasicLit); ok && lit.Kind == token.STRING {
						s, _ := strconv.Unquote(lit.Value)
						if out[id.Name] == nil {
							out[id.Name] = map[string]bool{}
						}
						out[id.Name][s] = true
					}
				}
			}
		}
	}
	res := map[string][]string{}
	for k, v := range out {
		res[k] = slices.Sorted(maps.Keys(v))
	}
	return res
}

// parseSources parses the non-test Go files of dir, failing the test when
// there are none (a check over nothing would pass silently).
func parseSources(t *testing.T, dir string) map[string]*ast.File {
	t.Helper()
	ents, err := os.ReadDir(dir)
	if err != nil {
		t.Fatalf("read %s: %v", dir, err)
	}
	out := map[string]*ast.File{}
	fset := token.NewFileSet()
	for _, e := range ents {
		n := e.Name()
		if e.IsDir() || !strings.HasSuffix(n, ".go") || strings.HasSuffix(n, "_test.go") {
			continue
		}
		f, err := parser.ParseFile(fset, filepath.Join(dir, n), nil, parser.ParseComments)
		if err != nil {
			t.Fatalf("parse %s: %v", n, err)
		}
		out[n] = f
	}
	if len(out) == 0 {
		t.Fatalf("no Go source in %s", dir)
	}
	return out
}
