package server_test

import (
	"fmt"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// limitReply is what a limit case compares: the status and, on an error,
// its code and first detail ("path:CODE").
type limitReply struct {
	Status       int
	Code, Detail string
}

func replyOf(status int, env envelope) limitReply {
	got := limitReply{Status: status}
	if env.Error != nil {
		got.Code = env.Error.Code
		if len(env.Error.Details) > 0 {
			got.Detail = env.Error.Details[0].Path + ":" + env.Error.Details[0].Code
		}
	}
	return got
}

// rawPost sends body exactly as given, so a case controls its byte count.
func (e *env) rawPost(path, body string) limitReply {
	e.t.Helper()
	r := httptest.NewRequest("POST", path, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Origin", testOrigin)
	r.AddCookie(e.admin.cookie)
	rec := httptest.NewRecorder()
	serve(e.t, e.srv.Handler(), rec, r)
	var env envelope
	_ = jsonUnmarshal(rec.Body.Bytes(), &env)
	return replyOf(rec.Code, env)
}

// padJSON puts spaces before the closing brace of a JSON object so the
// body is exactly n bytes.
func padJSON(t *testing.T, object string, n int) string {
	t.Helper()
	if len(object) > n {
		t.Fatalf("padJSON: %d bytes already, want %d", len(object), n)
	}
	return object[:len(object)-1] + strings.Repeat(" ", n-len(object)) + "}"
}

// TestFieldLimits: every length and count limit of a request field, at the
// limit (accepted) and one past it (400 with the detail naming the field).
func TestFieldLimits(t *testing.T) {
	e := newEnv(t, testdb.SQLite(t))
	var ns, cfg, sp idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "limits"}, e.admin, 201, &ns)
	e.must("POST", "/namespaces/"+ns.ID+"/configurations", map[string]any{"name": "c", "kind": "agent", "document": map[string]any{}}, e.admin, 201, &cfg)
	e.must("POST", "/iam/service-principals", map[string]string{"name": "keyholder"}, e.admin, 201, &sp)

	name := func(prefix string, n int) string { return prefix + strings.Repeat("x", n-len(prefix)) }
	perms := func(n int) []map[string]string {
		out := make([]map[string]string, n)
		for i := range out {
			out[i] = map[string]string{"action": "read", "resourceKind": "agent"}
		}
		return out
	}
	// document returns a configuration document of exactly n bytes.
	document := func(n int) map[string]any {
		return map[string]any{"k": strings.Repeat("d", n-len(`{"k":""}`))}
	}
	email := func(n int) string { return strings.Repeat("u", n-len("@example.com")) + "@example.com" }
	created := limitReply{Status: 201}
	tooLong := func(path string) limitReply {
		return limitReply{Status: 400, Code: "INVALID_REQUEST", Detail: path + ":TOO_LONG"}
	}
	cfgs, agents := "/namespaces/"+ns.ID+"/configurations", "/namespaces/"+ns.ID+"/agents"
	tests := []struct {
		name, path string
		body       any
		want       limitReply
	}{
		// Resource names are DNS labels of at most 63 characters.
		{"Namespace name of 63", "/namespaces", map[string]string{"name": name("n", 63)}, created},
		{"Namespace name of 64", "/namespaces", map[string]string{"name": name("n", 64)}, tooLong("/name")},
		{"Configuration name of 63", cfgs, map[string]any{"name": name("c", 63), "kind": "agent", "document": map[string]any{}}, created},
		{"Configuration name of 64", cfgs, map[string]any{"name": name("c", 64), "kind": "agent", "document": map[string]any{}}, tooLong("/name")},
		{"Agent name of 63", agents, map[string]string{"name": name("a", 63), "configurationId": cfg.ID}, created},
		{"Agent name of 64", agents, map[string]string{"name": name("a", 64), "configurationId": cfg.ID}, tooLong("/name")},
		{"role name of 63", "/iam/roles", map[string]any{"name": name("r", 63), "permissions": perms(1)}, created},
		{"role name of 64", "/iam/roles", map[string]any{"name": name("r", 64), "permissions": perms(1)}, tooLong("/name")},
		{"service principal name of 63", "/iam/service-principals", map[string]string{"name": name("s", 63)}, created},
		{"service principal name of 64", "/iam/service-principals", map[string]string{"name": name("s", 64)}, tooLong("/name")},

		// Service key names: 1 to 32 characters, counted in UTF-16 code units.
		{"key name of 32", "/api/auth/service-keys", map[string]string{"servicePrincipalId": sp.ID, "name": name("k", 32)}, created},
		{"key name of 33", "/api/auth/service-keys", map[string]string{"servicePrincipalId": sp.ID, "name": name("k", 33)}, tooLong("/name")},
		{"key name of 32 two-byte characters", "/api/auth/service-keys", map[string]string{"servicePrincipalId": sp.ID, "name": strings.Repeat("é", 32)}, created},
		{"key name of 33 two-byte characters", "/api/auth/service-keys", map[string]string{"servicePrincipalId": sp.ID, "name": strings.Repeat("é", 33)}, tooLong("/name")},
		// Counted in UTF-16 code units, as the reference (JavaScript) does:
		// an emoji is two.
		{"key name of 16 emoji (32 units)", "/api/auth/service-keys", map[string]string{"servicePrincipalId": sp.ID, "name": strings.Repeat("🦞", 16)}, created},
		{"key name of 17 emoji (34 units)", "/api/auth/service-keys", map[string]string{"servicePrincipalId": sp.ID, "name": strings.Repeat("🦞", 17)}, tooLong("/name")},
		{"key name of 31 units and an emoji", "/api/auth/service-keys", map[string]string{"servicePrincipalId": sp.ID, "name": name("k", 31) + "🦞"}, tooLong("/name")},
		{"empty key name", "/api/auth/service-keys", map[string]string{"servicePrincipalId": sp.ID, "name": ""},
			limitReply{Status: 400, Code: "INVALID_REQUEST", Detail: "/name:REQUIRED"}},

		// A role has 1 to 64 permissions.
		{"role of 64 permissions", "/iam/roles", map[string]any{"name": "r64", "permissions": perms(64)}, created},
		{"role of 65 permissions", "/iam/roles", map[string]any{"name": "r65", "permissions": perms(65)}, tooLong("/permissions")},

		// A configuration document is at most 48 KiB.
		{"document of 48 KiB", cfgs, map[string]any{"name": "doc-at", "kind": "agent", "document": document(48 << 10)}, created},
		{"document of 48 KiB + 1", cfgs, map[string]any{"name": "doc-past", "kind": "agent", "document": document(48<<10 + 1)}, tooLong("/document")},

		// An exact resource scope's id is at most 200 characters, checked
		// before it is looked up: 200 passes the limit and is then refused
		// as naming no revision, 201 is refused as too long.
		{"scope id of 200 characters", "/iam/restrictions", map[string]string{"subjectId": sp.ID, "action": "read",
			"resourceKind": "agent_revision", "namespaceId": ns.ID, "resourceId": strings.Repeat("é", 200)},
			limitReply{Status: 400, Code: "INVALID_REQUEST", Detail: "/resourceId:INVALID_VALUE"}},
		{"scope id of 201 characters", "/iam/restrictions", map[string]string{"subjectId": sp.ID, "action": "read",
			"resourceKind": "agent_revision", "namespaceId": ns.ID, "resourceId": strings.Repeat("é", 201)}, tooLong("/resourceId")},

		// A user's email is at most 254 bytes.
		{"email of 254", "/iam/users", map[string]string{"email": email(254), "password": testPassword}, created},
		{"email of 255", "/iam/users", map[string]string{"email": email(255), "password": testPassword}, tooLong("/email")},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, env, _ := e.do("POST", tc.path, tc.body, e.admin)
			if diff := cmp.Diff(tc.want, replyOf(code, env)); diff != "" {
				t.Errorf("POST %s (-want +got):\n%s", tc.path, diff)
			}
		})
	}
}

// TestRouteBodyLimits: the routes with their own body limit (448 KiB for
// Agent creation, 48 KiB for a workspace file PUT, see TestWorkspaceFilesAPI)
// accept a body of exactly that size and answer 413 one byte past it.
func TestRouteBodyLimits(t *testing.T) {
	e := newEnv(t, testdb.SQLite(t))
	var ns, cfg idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "bodies"}, e.admin, 201, &ns)
	e.must("POST", "/namespaces/"+ns.ID+"/configurations", map[string]any{"name": "c", "kind": "agent", "document": map[string]any{}}, e.admin, 201, &cfg)
	agents := "/namespaces/" + ns.ID + "/agents"
	create := func(name string) string { return fmt.Sprintf(`{"name":%q,"configurationId":%q}`, name, cfg.ID) }
	tooLarge := limitReply{Status: 413, Code: "PAYLOAD_TOO_LARGE"}
	tests := []struct {
		name, path, body string
		want             limitReply
	}{
		{"create Agent of 448 KiB", agents, padJSON(t, create("big"), 448<<10), limitReply{Status: 201}},
		{"create Agent of 448 KiB + 1", agents, padJSON(t, create("bigger"), 448<<10+1), tooLarge},
		{"other route of 64 KiB + 1", "/namespaces", padJSON(t, `{"name":"x"}`, 64<<10+1), tooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			if diff := cmp.Diff(tc.want, e.rawPost(tc.path, tc.body)); diff != "" {
				t.Errorf("POST %s (-want +got):\n%s", tc.path, diff)
			}
		})
	}
}

// TestPageSizeLimits: every paged list takes limit 1 to 500 (the audit
// list 1 to 200); 0 and one past the maximum answer 400 naming the query
// parameter. TestPagedLists checks what the pages hold.
func TestPageSizeLimits(t *testing.T) {
	e := newEnv(t, testdb.SQLite(t))
	var ns, cfg, agent idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "pages"}, e.admin, 201, &ns)
	e.must("POST", "/namespaces/"+ns.ID+"/configurations", map[string]any{"name": "c", "kind": "agent", "document": map[string]any{}}, e.admin, 201, &cfg)
	e.must("POST", "/namespaces/"+ns.ID+"/agents", map[string]string{"name": "a", "configurationId": cfg.ID}, e.admin, 201, &agent)
	lists := map[string]int{
		"/namespaces": 500, "/namespaces/" + ns.ID + "/configurations": 500, "/namespaces/" + ns.ID + "/agents": 500,
		"/namespaces/" + ns.ID + "/agents/" + agent.ID + "/revisions": 500,
		"/iam/service-principals":                                     500, "/iam/roles": 500, "/iam/access-bindings": 500, "/iam/restrictions": 500,
		"/audit-events": 200,
	}
	refused := limitReply{Status: 400, Code: "INVALID_REQUEST", Detail: "/query/limit:INVALID_VALUE"}
	for path, max := range lists {
		for _, tc := range []struct {
			limit int
			want  limitReply
		}{{1, limitReply{Status: 200}}, {max, limitReply{Status: 200}}, {0, refused}, {max + 1, refused}} {
			code, env, _ := e.do("GET", fmt.Sprintf("%s?limit=%d", path, tc.limit), nil, e.admin)
			if diff := cmp.Diff(tc.want, replyOf(code, env)); diff != "" {
				t.Errorf("GET %s?limit=%d (-want +got):\n%s", path, tc.limit, diff)
			}
		}
		// A query that does not parse whole is refused, not read as if
		// the pair it could not decode had not been sent.
		malformed := limitReply{Status: 400, Code: "INVALID_REQUEST", Detail: "/query:INVALID_FORMAT"}
		for _, q := range []string{"limit=5;x=1", "%zz=1", "limit=1&bogus;=2"} {
			code, env, _ := e.do("GET", path+"?"+q, nil, e.admin)
			if diff := cmp.Diff(malformed, replyOf(code, env)); diff != "" {
				t.Errorf("GET %s?%s (-want +got):\n%s", path, q, diff)
			}
		}
	}
}

// TestControlCharactersRefused: free-text fields refuse control
// characters with a detail naming the field, on both engines alike (a NUL
// reached PostgreSQL, which refused it without naming a field, while
// SQLite stored it), and a sign-in with such an email is a wrong
// credential, not an internal error.
func TestControlCharactersRefused(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		e := newEnv(t, st)
		var sp idOnly
		e.must("POST", "/iam/service-principals", map[string]string{"name": "keyholder"}, e.admin, 201, &sp)
		tests := []struct {
			name, path string
			body       any
			c          cred
			want       limitReply
		}{
			{"key name with NUL", "/api/auth/service-keys", map[string]string{"servicePrincipalId": sp.ID, "name": "a\x00b"}, e.admin,
				limitReply{Status: 400, Code: "INVALID_REQUEST", Detail: "/name:INVALID_VALUE"}},
			{"key name with a line break", "/api/auth/service-keys", map[string]string{"servicePrincipalId": sp.ID, "name": "a\nb"}, e.admin,
				limitReply{Status: 400, Code: "INVALID_REQUEST", Detail: "/name:INVALID_VALUE"}},
			{"email with NUL", "/iam/users", map[string]string{"email": "a\x00b@example.com", "password": testPassword}, e.admin,
				limitReply{Status: 400, Code: "INVALID_REQUEST", Detail: "/email:INVALID_FORMAT"}},
			{"sign-in with NUL in the email", "/api/auth/sign-in/email", map[string]string{"email": "a\x00b@example.com", "password": testPassword}, cred{},
				limitReply{Status: 401, Code: "UNAUTHENTICATED"}},
		}
		for _, tc := range tests {
			t.Run(tc.name, func(t *testing.T) {
				code, env, _ := e.do("POST", tc.path, tc.body, tc.c)
				if diff := cmp.Diff(tc.want, replyOf(code, env)); diff != "" {
					t.Errorf("POST %s (-want +got):\n%s", tc.path, diff)
				}
			})
		}
		// The audit log's filters: a control character or invalid UTF-8
		// is refused naming the parameter (PostgreSQL refused a NUL
		// without naming it; SQLite answered an empty page).
		// A time past the UTC year 9999, written with an offset, is
		// refused (each engine would order it differently).
		for _, q := range []string{"since=9999-12-31T23:00:00-23:00", "until=9999-12-31T23:00:00-23:00"} {
			name, _, _ := strings.Cut(q, "=")
			want := limitReply{Status: 400, Code: "INVALID_REQUEST", Detail: "/query/" + name + ":INVALID_VALUE"}
			code, env, _ := e.do("GET", "/audit-events?"+q, nil, e.admin)
			if diff := cmp.Diff(want, replyOf(code, env)); diff != "" {
				t.Errorf("GET /audit-events?%s (-want +got):\n%s", q, diff)
			}
		}
		for _, q := range []string{"actorId=a%00b", "action=a%0Ab", "resourceId=%FF", "kind=%7F"} {
			name, _, _ := strings.Cut(q, "=")
			want := limitReply{Status: 400, Code: "INVALID_REQUEST", Detail: "/query/" + name + ":INVALID_VALUE"}
			code, env, _ := e.do("GET", "/audit-events?"+q, nil, e.admin)
			if diff := cmp.Diff(want, replyOf(code, env)); diff != "" {
				t.Errorf("GET /audit-events?%s (-want +got):\n%s", q, diff)
			}
		}
	})
}
