package gwtest_test

import (
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
)

// TestProxyHeaders checks the route's request rewriting with a plain HTTP
// upstream that reports what it received.
func TestProxyHeaders(t *testing.T) {
	type seen struct {
		Path    string
		Headers map[string]string
	}
	got := make(chan seen, 1)
	up := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := map[string]string{}
		for _, name := range []string{"X-Occ-Identity", "X-Real-Ip", "X-Api-Key", "X-Forwarded-For",
			"X-Forwarded-Proto", "Forwarded", "X-Openclaw-Scopes", "Authorization", "Cookie", "X-Other"} {
			h[name] = r.Header.Get(name)
		}
		got <- seen{Path: r.URL.Path, Headers: h}
	}))
	defer up.Close()
	p := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: up.URL})
	client := &http.Client{Transport: &http.Transport{TLSClientConfig: p.TLSConfig()}}
	defer client.CloseIdleConnections()
	route := p.URL + "/namespaces/ns-test/agents/agent-test" // the default route
	if !strings.HasSuffix(p.RouteURL(), "/namespaces/ns-test/agents/agent-test") {
		t.Fatalf("RouteURL() = %s", p.RouteURL())
	}

	do := func(path, key string) int {
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, path, nil)
		if key != "" {
			req.Header.Set("X-Api-Key", key)
		}
		for name, v := range map[string]string{
			"X-Occ-Identity": "mallory", "X-Real-Ip": "127.0.0.1", "X-Forwarded-For": "10.0.0.1",
			"X-Forwarded-Proto": "http", "Forwarded": "for=10.0.0.1", "X-Openclaw-Scopes": "operator.admin",
			"Authorization": "Bearer x", "Cookie": "a=b", "X-Other": "kept",
		} {
			req.Header.Set(name, v)
		}
		resp, err := client.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		return resp.StatusCode
	}

	if code := do(route, p.Key()); code != http.StatusOK {
		t.Fatalf("route with the key: HTTP %d", code)
	}
	want := seen{Path: "/", Headers: map[string]string{
		"X-Occ-Identity": gwtest.Identity, "X-Real-Ip": gwtest.RealIP, "X-Api-Key": "", "X-Forwarded-For": "",
		"X-Forwarded-Proto": "", "Forwarded": "", "X-Openclaw-Scopes": "", "Authorization": "", "Cookie": "",
		"X-Other": "kept",
	}}
	if diff := cmp.Diff(want, <-got); diff != "" {
		t.Errorf("upstream saw (-want +got):\n%s", diff)
	}

	for _, tt := range []struct {
		name, path, key string
		want            int
	}{
		{"no key", route, "", http.StatusUnauthorized},
		{"wrong key", route, "nope", http.StatusUnauthorized},
		{"other agent", p.URL + "/namespaces/ns-test/agents/other", p.Key(), http.StatusNotFound},
		{"sub path", route + "/x", p.Key(), http.StatusNotFound},
		{"root", p.URL + "/", p.Key(), http.StatusNotFound},
	} {
		if code := do(tt.path, tt.key); code != tt.want {
			t.Errorf("%s: HTTP %d, want %d", tt.name, code, tt.want)
		}
	}
	p.SetKey("rotated")
	if code := do(route, "rotated"); code != http.StatusOK {
		t.Errorf("rotated key: HTTP %d", code)
	}
	<-got
	if n := p.Forwarded(); n != 2 {
		t.Errorf("Forwarded() = %d, want 2", n)
	}
}
