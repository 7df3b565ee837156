package server_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"maps"
	"net/http"
	"net/http/httptest"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/openclaw/occ/internal/api"
	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/testdb"
)

var updateOpenAPI = flag.Bool("update", false, "rewrite docs/openapi.json from the route table")

var committedOpenAPI = filepath.Join("..", "..", "docs", "openapi.json")

// TestOpenAPIDocument keeps docs/openapi.json equal to the document the
// server serves (built from the route table), checks it against the
// OpenAPI 3.1 specification, and checks that its operations are exactly
// the route table's. -update rewrites the committed file.
func TestOpenAPIDocument(t *testing.T) {
	doc, err := server.OpenAPIDocument()
	if err != nil {
		t.Fatal(err)
	}
	if *updateOpenAPI {
		if err := os.WriteFile(committedOpenAPI, append(doc, '\n'), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	committed, err := os.ReadFile(committedOpenAPI)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(bytes.TrimSuffix(committed, []byte("\n")), doc) {
		t.Errorf("%s differs from the route table's document; run: go test ./internal/server -run TestOpenAPIDocument -update", committedOpenAPI)
	}

	ok, errs := openAPIValidator(t).ValidateDocument()
	if !ok {
		for _, e := range errs {
			t.Errorf("the document breaks the OpenAPI specification: %s: %s", e.Message, e.Reason)
		}
	}

	var parsed struct {
		Paths map[string]map[string]json.RawMessage `json:"paths"`
	}
	if err := json.Unmarshal(committed, &parsed); err != nil {
		t.Fatal(err)
	}
	var inDoc, inTable []string
	for path, ops := range parsed.Paths {
		for m := range ops {
			inDoc = append(inDoc, strings.ToUpper(m)+" "+path)
		}
	}
	for _, r := range server.Routes(&api.API{}, &server.Health{}) {
		inTable = append(inTable, r.Method+" "+r.Path)
	}
	slices.Sort(inDoc)
	slices.Sort(inTable)
	if diff := cmp.Diff(inTable, inDoc); diff != "" {
		t.Errorf("the route table and %s disagree (-table +document):\n%s", committedOpenAPI, diff)
	}
}

func TestOpenAPIServed(t *testing.T) {
	rec := httptest.NewRecorder()
	e := newEnv(t, testdb.SQLite(t))
	serve(t, e.srv.Handler(), rec, httptest.NewRequest("GET", "/openapi.json", nil))
	doc, _ := server.OpenAPIDocument()
	if rec.Code != 200 || rec.Header().Get("Content-Type") != "application/json; charset=utf-8" || !bytes.Equal(rec.Body.Bytes(), doc) {
		t.Errorf("GET /openapi.json = %d %q, %d bytes; want 200, application/json and the document", rec.Code, rec.Header().Get("Content-Type"), rec.Body.Len())
	}
}

var (
	validatorOnce sync.Once
	apiValidator  validator.Validator
	validatorErr  error
	routeMux      *http.ServeMux
)

// openAPIValidator is built once per test binary from the served document.
func openAPIValidator(t testing.TB) validator.Validator {
	t.Helper()
	validatorOnce.Do(func() {
		doc, err := server.OpenAPIDocument()
		if err != nil {
			validatorErr = err
			return
		}
		d, err := libopenapi.NewDocument(doc)
		if err != nil {
			validatorErr = err
			return
		}
		v, errs := validator.NewValidator(d)
		if len(errs) > 0 {
			validatorErr = errs[0]
			return
		}
		apiValidator = v
		routeMux = http.NewServeMux()
		for _, r := range server.Routes(&api.API{}, &server.Health{}) {
			routeMux.HandleFunc(r.Method+" "+r.Path, func(http.ResponseWriter, *http.Request) {})
		}
	})
	if validatorErr != nil {
		t.Fatalf("building the OpenAPI validator: %v", validatorErr)
	}
	return apiValidator
}

// serve runs r through h and validates the reply against the OpenAPI
// document when r is for a documented route (a reply to an unknown path
// or method has no operation to be checked against).
func serve(t testing.TB, h http.Handler, rec *httptest.ResponseRecorder, r *http.Request) {
	t.Helper()
	v := openAPIValidator(t)
	h.ServeHTTP(rec, r)
	if _, pattern := routeMux.Handler(r); pattern == "" {
		return
	}
	resp := rec.Result()
	resp.Body = ioNopCloser{bytes.NewReader(rec.Body.Bytes())}
	if ok, errs := v.ValidateHttpResponse(r, resp); !ok {
		for _, e := range errs {
			t.Errorf("%s %s answered %d, which the OpenAPI document does not allow: %s: %s\nbody: %s",
				r.Method, r.URL.Path, rec.Code, e.Message, e.Reason, truncate(rec.Body.String(), 400))
		}
	}
}

type ioNopCloser struct{ *bytes.Reader }

func (ioNopCloser) Close() error { return nil }

func truncate(s string, n int) string {
	if len(s) > n {
		return s[:n] + "…"
	}
	return s
}

// TestOpenAPIValidationCanFail feeds the reply validator replies that
// break the document, so the validation serve does cannot silently pass.
func TestOpenAPIValidationCanFail(t *testing.T) {
	v := openAPIValidator(t)
	for _, tc := range []struct {
		name, path, body string
		status           int
	}{
		{"wrong type", "/namespaces/ns_1", `{"data":{"id":1,"name":"a","status":"ready","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z"},"meta":{"requestId":"req_1"}}`, 200},
		{"extra field", "/namespaces/ns_1", `{"data":{"id":"ns_1","name":"a","status":"ready","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z","secret":"x"},"meta":{"requestId":"req_1"}}`, 200},
		{"missing meta", "/namespaces/ns_1", `{"data":{"id":"ns_1","name":"a","status":"ready","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z"}}`, 200},
		{"undocumented status", "/namespaces/ns_1", `{"data":{},"meta":{"requestId":"req_1"}}`, 418},
		{"unknown error code", "/namespaces/ns_1", `{"error":{"code":"OOPS","message":"m"},"meta":{"requestId":"req_1"}}`, 404},
	} {
		t.Run(tc.name, func(t *testing.T) {
			rec := httptest.NewRecorder()
			rec.Header().Set("Content-Type", "application/json")
			rec.WriteHeader(tc.status)
			rec.WriteString(tc.body)
			resp := rec.Result()
			resp.Body = ioNopCloser{bytes.NewReader(rec.Body.Bytes())}
			if ok, _ := v.ValidateHttpResponse(httptest.NewRequest("GET", tc.path, nil), resp); ok {
				t.Errorf("a reply with %s passed validation", tc.name)
			}
		})
	}
	// And a correct one passes.
	rec := httptest.NewRecorder()
	rec.Header().Set("Content-Type", "application/json")
	rec.WriteString(`{"data":{"id":"ns_1","name":"a","status":"ready","createdAt":"2026-01-01T00:00:00Z","updatedAt":"2026-01-01T00:00:00Z"},"meta":{"requestId":"req_1"}}`)
	resp := rec.Result()
	resp.Body = ioNopCloser{bytes.NewReader(rec.Body.Bytes())}
	if ok, errs := v.ValidateHttpResponse(httptest.NewRequest("GET", "/namespaces/ns_1", nil), resp); !ok {
		t.Errorf("a correct reply failed validation: %v", errs[0].Message+": "+errs[0].Reason)
	}
}

// docParameter is one parameter of an operation of the served document.
type docParameter struct {
	Name   string `json:"name"`
	In     string `json:"in"`
	Schema struct {
		Pattern string   `json:"pattern"`
		Enum    []string `json:"enum"`
		Minimum *int     `json:"minimum"`
		Maximum *int     `json:"maximum"`
	} `json:"schema"`
}

type docOperation struct {
	OperationID string         `json:"operationId"`
	Parameters  []docParameter `json:"parameters"`
}

// servedOperations reads the served document's operations, by "METHOD /path".
func servedOperations(t *testing.T) map[string]docOperation {
	t.Helper()
	doc, err := server.OpenAPIDocument()
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Paths map[string]map[string]docOperation `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	out := map[string]docOperation{}
	for path, methods := range d.Paths {
		for m, o := range methods {
			out[strings.ToUpper(m)+" "+path] = o
		}
	}
	return out
}

// TestOpenAPIOperationIDs: the operations the reference API names carry its
// ids, every other keeps the id derived from its method and path, and no
// two share one.
func TestOpenAPIOperationIDs(t *testing.T) {
	named := map[string]string{
		"POST /namespaces/{ns}/agents":                                 "createAgent",
		"GET /namespaces/{ns}/agents/{agentId}/workspace/files/{name}": "getAgentWorkspaceFile",
		"PUT /namespaces/{ns}/agents/{agentId}/workspace/files/{name}": "putAgentWorkspaceFile",
	}
	words := regexp.MustCompile(`[A-Za-z0-9]+`)
	seen := map[string]string{}
	for route, op := range servedOperations(t) {
		want, ok := named[route]
		if !ok {
			method, path, _ := strings.Cut(route, " ")
			want = strings.ToLower(method)
			for _, w := range words.FindAllString(path, -1) {
				want += strings.ToUpper(w[:1]) + w[1:]
			}
		}
		if op.OperationID != want {
			t.Errorf("%s: operationId %q, want %q", route, op.OperationID, want)
		}
		if prev, dup := seen[op.OperationID]; dup {
			t.Errorf("%s and %s share the operationId %q", route, prev, op.OperationID)
		}
		seen[op.OperationID] = route
	}
	for route := range named {
		if _, ok := seen[named[route]]; !ok {
			t.Errorf("the document has no operation %s", route)
		}
	}
}

// openAPIIDPrefixes are every identifier prefix OCC has.
var openAPIIDPrefixes = []string{ids.Namespace, ids.Configuration, ids.Agent, ids.Revision, ids.ServicePrincipal,
	ids.Audit, ids.User, ids.APIKey, ids.Role, ids.Binding, ids.Restriction, ids.WorkItem, ids.WorkspaceSetup,
	ids.Installation, ids.Session}

// openAPIDetail reports whether the reply is a 400 with a detail at
// /path/<name> (or /query/<name>, /header/<name>).
func openAPIDetail(code int, env envelope, path string) bool {
	if code != http.StatusBadRequest || env.Error == nil {
		return false
	}
	for _, d := range env.Error.Details {
		if d.Path == path {
			return true
		}
	}
	return false
}

// TestOpenAPIPathParametersMatchServer holds every path parameter's
// documented schema to the server: each has a pattern or an enum; a value
// the pattern matches passes the server's check, and values it does not
// match (ids of other kinds, upper case, overlong) answer 400 naming the
// parameter. Page size bounds are checked the same way.
func TestOpenAPIParametersMatchServer(t *testing.T) {
	e := newEnv(t, testdb.SQLite(t))
	ops := servedOperations(t)
	routes := slices.Sorted(maps.Keys(ops))
	for _, route := range routes {
		op := ops[route]
		if len(op.Parameters) == 0 {
			continue // nothing to check; and POST /api/auth/sign-out would end the session
		}
		method, path, _ := strings.Cut(route, " ")
		good := map[string]string{}
		var idParams []string
		for _, p := range op.Parameters {
			if p.In != "path" {
				continue
			}
			switch {
			case p.Schema.Pattern != "":
				re := regexp.MustCompile(p.Schema.Pattern)
				var matched []string
				for _, prefix := range openAPIIDPrefixes {
					if id := ids.New(prefix); re.MatchString(id) {
						matched = append(matched, id)
					}
				}
				if len(matched) != 1 {
					t.Errorf("%s: the pattern of %s matches %d kinds of id, want 1: %v", route, p.Name, len(matched), matched)
					continue
				}
				good[p.Name] = matched[0]
				idParams = append(idParams, p.Name)
			case len(p.Schema.Enum) > 0:
				good[p.Name] = p.Schema.Enum[0]
			default:
				t.Errorf("%s: path parameter %s has neither a pattern nor an enum", route, p.Name)
			}
		}
		fill := func(vals map[string]string) string {
			return docPathParam.ReplaceAllStringFunc(path, func(m string) string {
				return url.PathEscape(vals[m[1:len(m)-1]])
			})
		}
		code, env, _ := e.do(method, fill(good), nil, e.admin)
		for name := range good {
			if openAPIDetail(code, env, "/path/"+name) {
				t.Errorf("%s with %s=%q, which the document allows: 400 %+v", route, name, good[name], env.Error)
			}
		}
		for _, name := range idParams {
			id := good[name]
			prefix, _, _ := strings.Cut(id, "_")
			bad := []string{strings.ToUpper(id), id[:len(id)-1], id + "0", "x", prefix + "_" + strings.Repeat("a", 400)}
			for _, other := range openAPIIDPrefixes {
				if other != prefix+"_" {
					bad = append(bad, ids.New(other))
				}
			}
			for _, v := range bad {
				vals := maps.Clone(good)
				vals[name] = v
				if code, env, _ := e.do(method, fill(vals), nil, e.admin); !openAPIDetail(code, env, "/path/"+name) {
					t.Errorf("%s with %s=%q, which the document refuses: %d %+v; want 400 at /path/%s", route, name, v, code, env.Error, name)
				}
			}
		}
		for _, p := range op.Parameters {
			if p.In != "query" || p.Name != "limit" {
				continue
			}
			if p.Schema.Minimum == nil || p.Schema.Maximum == nil {
				t.Errorf("%s: limit has no minimum or maximum", route)
				continue
			}
			lo, hi := *p.Schema.Minimum, *p.Schema.Maximum
			for n, allowed := range map[int]bool{lo - 1: false, lo: true, hi: true, hi + 1: false} {
				code, env, _ := e.do(method, fill(good)+"?limit="+strconv.Itoa(n), nil, e.admin)
				if got := openAPIDetail(code, env, "/query/limit"); got == allowed {
					t.Errorf("%s?limit=%d: %d %+v; the document allows %d..%d", route, n, code, env.Error, lo, hi)
				}
			}
		}
	}
}

var docPathParam = regexp.MustCompile(`\{[A-Za-z]+\}`)

// TestOpenAPIFileNameMatchesServer: the file routes accept exactly the
// names of the documented enum.
func TestOpenAPIFileNameMatchesServer(t *testing.T) {
	fe := newFilesEnv(t)
	op := servedOperations(t)["GET /namespaces/{ns}/agents/{agentId}/workspace/files/{name}"]
	var enum []string
	for _, p := range op.Parameters {
		if p.Name == "name" {
			enum = p.Schema.Enum
		}
	}
	if len(enum) == 0 {
		t.Fatal("the file name parameter has no enum")
	}
	for _, name := range append(slices.Clone(enum), "TOOLS.md", "agents.md", "AGENTS.MD", "AGENTS.md.bak", "MEMORY.md") {
		code, env, _ := fe.do("GET", fe.base+url.PathEscape(name), nil, fe.admin)
		if refused, documented := openAPIDetail(code, env, "/path/name"), slices.Contains(enum, name); refused == documented {
			t.Errorf("GET file %q: %d %+v; the document's enum %v", name, code, env.Error, enum)
		}
	}
}

// TestOpenAPIIfMatchMatchesServer: the If-Match pattern matches exactly the
// values the server accepts.
func TestOpenAPIIfMatchMatchesServer(t *testing.T) {
	e := newEnv(t, testdb.SQLite(t))
	op := servedOperations(t)["PUT /namespaces/{ns}/agents/{agentId}/workspace/files/{name}"]
	var pattern string
	for _, p := range op.Parameters {
		if p.Name == "If-Match" {
			pattern = p.Schema.Pattern
		}
	}
	re := regexp.MustCompile(pattern)
	hash := digest.Of("x")
	path := "/namespaces/" + ids.New(ids.Namespace) + "/agents/" + ids.New(ids.Agent) + "/workspace/files/AGENTS.md"
	for _, v := range []string{
		`"` + hash + `"`, `"` + strings.ToUpper(hash) + `"`, `"` + strings.ToUpper(hash[:10]) + hash[10:] + `"`,
		"\t\"" + hash + "\"\t", "\u00a0\"" + hash + "\"\u3000", "\u0085\"" + hash + "\"\u2028",
		"\ufeff\"" + hash + `"`, `W/"` + hash + `"`, `*`, hash, `"` + hash[1:] + `"`, `"` + hash + `0"`,
		`"` + hash + `", "` + hash + `"`, `" ` + hash + `"`, `"` + strings.Replace(hash, hash[:1], "g", 1) + `"`,
	} {
		r := httptest.NewRequest("PUT", path, strings.NewReader(`{"content":"x"}`))
		r.Header.Set("Content-Type", "application/json")
		r.Header.Set("Origin", testOrigin)
		r.Header.Set("If-Match", v)
		r.AddCookie(e.admin.cookie)
		rec := httptest.NewRecorder()
		serve(t, e.srv.Handler(), rec, r)
		var env envelope
		if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
			t.Fatal(err)
		}
		if refused, documented := openAPIDetail(rec.Code, env, "/header/If-Match"), re.MatchString(v); refused == documented {
			t.Errorf("If-Match %q: %d %+v; the document's pattern matches it: %v", v, rec.Code, env.Error, documented)
		}
	}
}
