package console_test

import (
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/console"
	"github.com/openclaw/occ/internal/server"
)

var wantHeaders = map[string]string{
	"Content-Security-Policy":      console.ContentSecurityPolicy,
	"Referrer-Policy":              "same-origin",
	"X-Content-Type-Options":       "nosniff",
	"X-Frame-Options":              "DENY",
	"Cross-Origin-Opener-Policy":   "same-origin",
	"Cross-Origin-Resource-Policy": "same-origin",
	"Cache-Control":                "no-store",
}

func securityHeaders(h http.Header) map[string]string {
	got := map[string]string{}
	for k := range wantHeaders {
		got[k] = h.Get(k)
	}
	return got
}

// TestConsoleResponses: every Console response (pages, redirects, assets,
// not-found pages) carries the Console's security headers; pages need a
// session, malformed ids answer 404, and the CSP has no inline allowance.
func TestConsoleResponses(t *testing.T) {
	s := newServer(t, server.Options{})
	admin := s.signIn(adminEmail, adminPassword)
	const ns, agent = "ns_11111111-1111-4111-8111-111111111111", "agt_22222222-2222-4222-8222-222222222222"
	tests := []struct {
		name, path   string
		signedIn     bool
		wantStatus   int
		wantLocation string
		wantType     string
	}{
		{"root", "/", true, 303, "/console/namespaces", ""},
		{"console root", "/console/", true, 303, "/console/namespaces", ""},
		{"sign-in anonymous", "/console/sign-in", false, 200, "", "text/html; charset=utf-8"},
		{"namespaces anonymous", "/console/namespaces", false, 303, "/console/sign-in", ""},
		{"namespaces", "/console/namespaces", true, 200, "", "text/html; charset=utf-8"},
		{"agents", "/console/namespaces/" + ns, true, 200, "", "text/html; charset=utf-8"},
		{"agents bad id", "/console/namespaces/ns_nope", true, 404, "", "text/html; charset=utf-8"},
		{"agent new", "/console/namespaces/" + ns + "/agents/new", true, 200, "", "text/html; charset=utf-8"},
		{"agent", "/console/namespaces/" + ns + "/agents/" + agent, true, 200, "", "text/html; charset=utf-8"},
		{"agent bad id", "/console/namespaces/" + ns + "/agents/x", true, 404, "", "text/html; charset=utf-8"},
		{"file", "/console/namespaces/" + ns + "/agents/" + agent + "/files/SOUL.md", true, 200, "", "text/html; charset=utf-8"},
		{"file bad name", "/console/namespaces/" + ns + "/agents/" + agent + "/files/soul.md", true, 404, "", "text/html; charset=utf-8"},
		{"audit", "/console/audit", true, 200, "", "text/html; charset=utf-8"},
		{"iam", "/console/iam", true, 200, "", "text/html; charset=utf-8"},
		{"script", "/console/assets/app.js", false, 200, "", "text/javascript; charset=utf-8"},
		{"style", "/console/assets/app.css", false, 200, "", "text/css; charset=utf-8"},
		{"unknown page", "/console/nope", true, 404, "", "text/html; charset=utf-8"},
		{"missing asset", "/console/assets/nope.js", false, 404, "", "text/html; charset=utf-8"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c := admin
			if !tc.signedIn {
				c = nil
			}
			res := s.get(tc.path, c)
			got := map[string]any{"status": res.StatusCode, "location": res.Header.Get("Location"),
				"type": res.Header.Get("Content-Type"), "headers": securityHeaders(res.Header)}
			want := map[string]any{"status": tc.wantStatus, "location": tc.wantLocation, "type": tc.wantType, "headers": wantHeaders}
			if tc.wantType == "" {
				got["type"], want["type"] = "", ""
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("GET %s (-want +got):\n%s", tc.path, diff)
			}
		})
	}
	if strings.Contains(console.ContentSecurityPolicy, "unsafe") {
		t.Errorf("the CSP allows something unsafe: %s", console.ContentSecurityPolicy)
	}
	// The API keeps its own policy.
	if res := s.get("/healthz", nil); res.Header.Get("Content-Security-Policy") != "default-src 'none'; frame-ancestors 'none'" {
		t.Errorf("/healthz CSP = %q; the API's policy changed", res.Header.Get("Content-Security-Policy"))
	}
}

// TestTemplatesHaveNoInlineCode: the CSP refuses inline scripts, styles and
// event handlers, so none may exist.
func TestTemplatesHaveNoInlineCode(t *testing.T) {
	inline := regexp.MustCompile(`(?i)<script>|<script [^>]*>[^<]|<style|\sstyle=|\son[a-z]+=|javascript:`)
	paths, err := filepath.Glob("templates/*.html")
	if err != nil || len(paths) == 0 {
		t.Fatalf("no templates: %v", err)
	}
	for _, p := range paths {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		if m := inline.Find(b); m != nil {
			t.Errorf("%s has inline code %q", p, m)
		}
	}
}

var pageRowRE = regexp.MustCompile("^\\| `(/console/[^`]*)` \\|")

// TestDocsListEveryPage keeps docs/console.md's page table equal to Pages.
func TestDocsListEveryPage(t *testing.T) {
	b, err := os.ReadFile(filepath.Join("..", "..", "docs", "console.md"))
	if err != nil {
		t.Fatal(err)
	}
	var documented, served []string
	for _, line := range strings.Split(string(b), "\n") {
		if m := pageRowRE.FindStringSubmatch(line); m != nil {
			documented = append(documented, m[1])
		}
	}
	for _, p := range console.Pages {
		served = append(served, p.Pattern)
	}
	slices.Sort(documented)
	slices.Sort(served)
	if diff := cmp.Diff(served, documented); diff != "" {
		t.Errorf("docs/console.md page table and console.Pages disagree (-served +documented):\n%s", diff)
	}
}
