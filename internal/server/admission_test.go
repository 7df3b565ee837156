package server_test

import (
	"net/http"
	"net/http/httptest"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// TestAdmission covers the rules every route passes before its handler:
// forwarding headers only from trusted proxies, and the browser CSRF rules
// for session and anonymous callers (API-key callers are exempt).
func TestAdmission(t *testing.T) {
	st := testdb.SQLite(t)
	e := newEnv(t, st)
	_, _, key := e.principal("admission", authz.RoleAdministratorID, "")
	proxied := server.New(server.Options{Store: st, PublicOrigin: testOrigin, Now: e.clock.Now,
		TrustedProxies: []netip.Prefix{netip.MustParsePrefix("192.0.2.0/24")}})

	type req struct {
		method, path, body string
		headers            map[string]string
		remote             string
		c                  cred
		srv                *server.Server
	}
	const nsBody = `{"name":"adm-%s"}`
	tests := []struct {
		name string
		req  req
		want int
	}{
		{"session mutation with the public origin", req{method: "POST", path: "/namespaces", body: `{"name":"a1"}`,
			headers: map[string]string{"Origin": testOrigin}, c: e.admin}, 201},
		{"session mutation without origin", req{method: "POST", path: "/namespaces", body: `{"name":"a2"}`, c: e.admin}, 403},
		{"session mutation from another origin", req{method: "POST", path: "/namespaces", body: `{"name":"a3"}`,
			headers: map[string]string{"Origin": "http://evil.test"}, c: e.admin}, 403},
		{"session mutation with origin plus trailing slash", req{method: "POST", path: "/namespaces", body: `{"name":"a4"}`,
			headers: map[string]string{"Origin": testOrigin + "/"}, c: e.admin}, 403},
		{"session read marked cross-site", req{method: "GET", path: "/namespaces",
			headers: map[string]string{"Sec-Fetch-Site": "cross-site"}, c: e.admin}, 403},
		{"session read same-site", req{method: "GET", path: "/namespaces",
			headers: map[string]string{"Sec-Fetch-Site": "same-origin"}, c: e.admin}, 200},
		{"anonymous sign-in from another origin", req{method: "POST", path: "/api/auth/sign-in/email",
			body:    `{"email":"admin@example.com","password":"` + testPassword + `"}`,
			headers: map[string]string{"Origin": "http://evil.test"}}, 403},
		{"API key mutation without origin is exempt", req{method: "POST", path: "/namespaces", body: `{"name":"a5"}`, c: key}, 201},
		{"API key cross-site is exempt", req{method: "POST", path: "/namespaces", body: `{"name":"a6"}`,
			headers: map[string]string{"Sec-Fetch-Site": "cross-site", "Origin": "http://evil.test"}, c: key}, 201},
		{"X-Forwarded-For from an untrusted peer", req{method: "GET", path: "/namespaces",
			headers: map[string]string{"X-Forwarded-For": "203.0.113.9"}, c: key}, 403},
		{"X-Real-IP from an untrusted peer", req{method: "GET", path: "/namespaces",
			headers: map[string]string{"X-Real-IP": "203.0.113.9"}, c: key}, 403},
		{"Forwarded from an untrusted peer", req{method: "GET", path: "/namespaces",
			headers: map[string]string{"Forwarded": "for=203.0.113.9"}, c: key}, 403},
		{"X-Forwarded-Proto from an untrusted peer", req{method: "GET", path: "/namespaces",
			headers: map[string]string{"X-Forwarded-Proto": "https"}, c: key}, 403},
		{"X-Forwarded-For from a trusted proxy", req{method: "GET", path: "/namespaces",
			headers: map[string]string{"X-Forwarded-For": "203.0.113.9"}, remote: "192.0.2.10:4444", c: key, srv: proxied}, 200},
		{"X-Forwarded-For from just outside the trusted range", req{method: "GET", path: "/namespaces",
			headers: map[string]string{"X-Forwarded-For": "203.0.113.9"}, remote: "192.0.3.1:4444", c: key, srv: proxied}, 403},
		{"health ignores forwarding headers", req{method: "GET", path: "/healthz",
			headers: map[string]string{"X-Forwarded-For": "203.0.113.9"}}, 200},
	}
	_ = nsBody
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var r *http.Request
			if tc.req.body != "" {
				r = httptest.NewRequest(tc.req.method, tc.req.path, strings.NewReader(tc.req.body))
				r.Header.Set("Content-Type", "application/json")
			} else {
				r = httptest.NewRequest(tc.req.method, tc.req.path, nil)
			}
			for k, v := range tc.req.headers {
				r.Header.Set(k, v)
			}
			if tc.req.remote != "" {
				r.RemoteAddr = tc.req.remote
			}
			if tc.req.c.cookie != nil {
				r.AddCookie(tc.req.c.cookie)
			}
			if tc.req.c.key != "" {
				r.Header.Set("X-Api-Key", tc.req.c.key)
			}
			srv := e.srv
			if tc.req.srv != nil {
				srv = tc.req.srv
			}
			rec := httptest.NewRecorder()
			serve(t, srv.Handler(), rec, r)
			if rec.Code != tc.want {
				t.Errorf("status %d, want %d: %s", rec.Code, tc.want, rec.Body.String())
			}
		})
	}
}

// TestDenialsAreAudited checks that a 403 and a 404 caused by missing
// grants each leave an authorization_denial event, and that the events are
// listed for administrators with filters and cursor pagination.
func TestDenialsAreAudited(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		e := newEnv(t, st)
		userID, user := e.user("denied@example.com", "")
		var ns idOnly
		e.must("POST", "/namespaces", map[string]string{"name": "audited"}, e.admin, 201, &ns)
		if code, _, _ := e.do("POST", "/namespaces", map[string]string{"name": "nope"}, user); code != 403 {
			t.Fatalf("create namespace without grant: %d, want 403", code)
		}
		if code, _, _ := e.do("GET", "/namespaces/"+ns.ID, nil, user); code != 404 {
			t.Fatalf("get hidden namespace: %d, want 404", code)
		}
		var page struct {
			Items []struct {
				Kind       string `json:"kind"`
				ActorID    string `json:"actorId"`
				Action     string `json:"action"`
				Outcome    string `json:"outcome"`
				ReasonCode string `json:"reasonCode"`
				Resource   struct {
					Kind string `json:"kind"`
					ID   string `json:"id"`
				} `json:"resource"`
			} `json:"items"`
			NextCursor string `json:"nextCursor"`
		}
		e.must("GET", "/audit-events?kind=authorization_denial&actorId="+userID, nil, e.admin, 200, &page)
		type row struct{ Action, Outcome, Reason, ResKind, ResID string }
		var got []row
		for _, it := range page.Items {
			got = append(got, row{it.Action, it.Outcome, it.ReasonCode, it.Resource.Kind, it.Resource.ID})
		}
		want := []row{
			{"openclaw.namespace.read", "denied", "NO_GRANT", "namespace", ns.ID},
			{"openclaw.namespace.create", "denied", "NO_GRANT", "namespace", ""},
		}
		// The test clock stands still, so both events share a timestamp and
		// their order is by id; compare as a set.
		if diff := cmp.Diff(want, got, cmpopts.SortSlices(func(a, b row) bool { return a.Action < b.Action })); diff != "" {
			t.Errorf("denial events (-want +got):\n%s", diff)
		}

		// Pagination: page through every event two at a time and compare
		// with one big page.
		var all struct {
			Items []struct {
				ID string `json:"id"`
			} `json:"items"`
		}
		e.must("GET", "/audit-events?limit=200", nil, e.admin, 200, &all)
		if len(all.Items) < 5 {
			t.Fatalf("only %d audit events; want at least 5", len(all.Items))
		}
		var paged []string
		cursor := ""
		for i := 0; i < 100; i++ {
			var p struct {
				Items []struct {
					ID string `json:"id"`
				} `json:"items"`
				NextCursor string `json:"nextCursor"`
			}
			path := "/audit-events?limit=2"
			if cursor != "" {
				path += "&cursor=" + cursor
			}
			e.must("GET", path, nil, e.admin, 200, &p)
			for _, it := range p.Items {
				paged = append(paged, it.ID)
			}
			if p.NextCursor == "" {
				break
			}
			cursor = p.NextCursor
		}
		var allIDs []string
		for _, it := range all.Items {
			allIDs = append(allIDs, it.ID)
		}
		if diff := cmp.Diff(allIDs, paged); diff != "" {
			t.Errorf("paged audit events differ from one page (-want +got):\n%s", diff)
		}
		for _, bad := range []string{"?limit=0", "?limit=201", "?limit=x", "?cursor=%21%21", "?since=yesterday", "?color=red"} {
			if code, _, _ := e.do("GET", "/audit-events"+bad, nil, e.admin); code != 400 {
				t.Errorf("GET /audit-events%s: %d, want 400", bad, code)
			}
		}
		if code, _, _ := e.do("GET", "/audit-events?limit=200", nil, e.admin); code != 200 {
			t.Errorf("limit=200: %d, want 200", code)
		}
	})
}
