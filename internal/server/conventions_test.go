package server_test

import (
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/testdb"
)

// TestConventionsThroughRoutes checks the generic HTTP behaviour on real
// routes of the assembled server (package httpx has the exhaustive limit
// tables): status, error code, detail and the headers every reply carries.
func TestConventionsThroughRoutes(t *testing.T) {
	e := newEnv(t, testdb.SQLite(t))
	var ns idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "conv"}, e.admin, 201, &ns)
	big := `{"name":"` + strings.Repeat("a", 64<<10) + `"}`
	atLimitName := strings.Repeat("b", 64<<10-len(`{"name":""}`))

	type want struct {
		Status int
		Code   string
		Detail string
		Allow  string
	}
	tests := []struct {
		name, method, path, body, ctype string
		want                            want
	}{
		{"unknown path", "GET", "/nope", "", "", want{404, "NOT_FOUND", "", ""}},
		{"wrong method", "PUT", "/namespaces", `{}`, "application/json", want{405, "METHOD_NOT_ALLOWED", "", "GET, HEAD, POST"}},
		{"not JSON", "POST", "/namespaces", `name=x`, "application/x-www-form-urlencoded", want{415, "UNSUPPORTED_MEDIA_TYPE", "", ""}},
		{"body over 64 KiB", "POST", "/namespaces", big, "application/json", want{413, "PAYLOAD_TOO_LARGE", "", ""}},
		{"body at 64 KiB reaches validation", "POST", "/namespaces", `{"name":"` + atLimitName + `"}`, "application/json",
			want{400, "INVALID_REQUEST", "/name:TOO_LONG", ""}},
		{"unknown field", "POST", "/namespaces", `{"name":"x","extra":1}`, "application/json", want{400, "INVALID_REQUEST", "/extra:UNKNOWN_FIELD", ""}},
		{"missing field", "POST", "/namespaces", `{}`, "application/json", want{400, "INVALID_REQUEST", "/name:REQUIRED", ""}},
		{"wrong type", "POST", "/namespaces", `{"name":5}`, "application/json", want{400, "INVALID_REQUEST", "/name:INVALID_TYPE", ""}},
		{"prototype key", "POST", "/namespaces", `{"name":"x","__proto__":{}}`, "application/json", want{400, "INVALID_REQUEST", "", ""}},
		{"malformed path id", "GET", "/namespaces/ns_123", "", "", want{400, "INVALID_REQUEST", "/path/ns:INVALID_FORMAT", ""}},
		{"uppercase path id", "GET", "/namespaces/" + strings.ToUpper(ns.ID), "", "", want{400, "INVALID_REQUEST", "/path/ns:INVALID_FORMAT", ""}},
		{"query on a route without one", "GET", "/namespaces?x=1", "", "", want{400, "INVALID_REQUEST", "", ""}},
		{"body on a bodyless route", "GET", "/namespaces/" + ns.ID, `{"a":1}`, "application/json", want{400, "INVALID_REQUEST", "", ""}},
		{"hidden or absent id", "GET", "/namespaces/ns_00000000-0000-4000-8000-000000000000", "", "", want{404, "NOT_FOUND", "", ""}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r *http.Request
			if tc.body != "" {
				r = httptest.NewRequest(tc.method, tc.path, strings.NewReader(tc.body))
				r.Header.Set("Content-Type", tc.ctype)
			} else {
				r = httptest.NewRequest(tc.method, tc.path, nil)
			}
			r.Header.Set("Origin", testOrigin)
			r.AddCookie(e.admin.cookie)
			rec := httptest.NewRecorder()
			serve(t, e.srv.Handler(), rec, r)
			var env envelope
			_ = jsonUnmarshal(rec.Body.Bytes(), &env)
			got := want{Status: rec.Code, Allow: rec.Header().Get("Allow")}
			if env.Error != nil {
				got.Code = env.Error.Code
				if len(env.Error.Details) > 0 && tc.want.Detail != "" {
					got.Detail = env.Error.Details[0].Path + ":" + env.Error.Details[0].Code
				}
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s %s (-want +got):\n%s\nbody: %.300s", tc.method, tc.path, diff, rec.Body.String())
			}
			for h, v := range map[string]string{"Cache-Control": "no-store", "X-Content-Type-Options": "nosniff",
				"Content-Type": "application/json; charset=utf-8"} {
				if got := rec.Header().Get(h); got != v {
					t.Errorf("%s = %q, want %q", h, got, v)
				}
			}
			if rec.Header().Get("X-Request-Id") == "" || env.Meta.RequestID != rec.Header().Get("X-Request-Id") {
				t.Errorf("request id header %q and meta %q must match and be set", rec.Header().Get("X-Request-Id"), env.Meta.RequestID)
			}
		})
	}
}
