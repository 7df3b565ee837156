package server_test

import (
	"bytes"
	"encoding/json"
	"flag"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/pb33f/libopenapi"
	validator "github.com/pb33f/libopenapi-validator"

	"github.com/openclaw/occ/internal/api"
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
