package gwtest

import (
	"crypto/subtle"
	"crypto/tls"
	"crypto/x509"
	"io"
	"log"
	"net"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw"
)

// Proxy is a test stand-in for the Envoy route in front of an Agent's
// gateway. Per request it does what the installation's Gateway,
// SecurityPolicy and HTTPRoute do (occ-reference.md section 6):
//   - terminates TLS with a certificate from an in-memory CA (CAPEM);
//   - checks x-api-key against the accepted key (constant time), answers
//     401 when it is missing or wrong, and strips it;
//   - overwrites x-occ-identity with the route's identity;
//   - removes forwarding, scope and credential headers (Forwarded,
//     X-Forwarded-*, X-Openclaw-Scopes, Authorization, Cookie) and sets
//     x-real-ip to RealIP (see RealIP for why not the real client address);
//   - rewrites exactly /namespaces/<ns>/agents/<agent> to / and answers 404
//     for any other path;
//   - forwards the WebSocket upgrade to the upstream on loopback.
type Proxy struct {
	// URL is https://127.0.0.1:<port>.
	URL string
	// CAPEM is the PEM of the CA that issued the proxy's certificate.
	CAPEM []byte

	opts      ProxyOptions
	key       atomic.Pointer[string]
	forwarded atomic.Int64
	refused   atomic.Int64
	lastMu    sync.Mutex
	last      http.Header
}

// ProxyOptions configures NewProxy.
type ProxyOptions struct {
	// Upstream is the gateway's http://127.0.0.1:<port> (Gateway.HTTPURL,
	// FakeGateway.HTTPURL).
	Upstream string
	// Key is the accepted service key; empty generates one (Key()).
	Key string
	// Namespace and Agent make the route path; defaults "ns-test" and
	// "agent-test".
	Namespace, Agent string
	// Identity is written into x-occ-identity; default Identity.
	Identity string
	// PassIdentity misconfigures the route: the client's x-occ-identity
	// (if any) passes through unchanged and none is set. Only for tests
	// that prove the gateway, not the proxy, refuses a spoofed identity.
	PassIdentity bool
	// CertHosts are the SANs of the proxy's certificate; default
	// 127.0.0.1 and localhost.
	CertHosts []string
	// MoreRoutes are further "<namespace>/<agent>" routes to the same
	// upstream, as one installation's Envoy serves every Agent's route.
	MoreRoutes []string
}

// NewProxy starts a proxy for the test; it is closed when the test ends.
func NewProxy(t testing.TB, opts ProxyOptions) *Proxy {
	t.Helper()
	if opts.Key == "" {
		opts.Key = randomHex(32)
	}
	if opts.Namespace == "" {
		opts.Namespace = "ns-test"
	}
	if opts.Agent == "" {
		opts.Agent = "agent-test"
	}
	if opts.Identity == "" {
		opts.Identity = Identity
	}
	if len(opts.CertHosts) == 0 {
		opts.CertHosts = []string{"127.0.0.1", "localhost"}
	}
	upstream, err := url.Parse(opts.Upstream)
	if err != nil || upstream.Host == "" {
		t.Fatalf("gwtest: proxy upstream %q is not a URL", opts.Upstream)
	}
	ca, err := NewCA()
	if err != nil {
		t.Fatalf("gwtest: %v", err)
	}
	cert, err := ca.Issue(opts.CertHosts...)
	if err != nil {
		t.Fatalf("gwtest: %v", err)
	}

	p := &Proxy{CAPEM: ca.PEM, opts: opts}
	p.SetKey(opts.Key)
	rp := &httputil.ReverseProxy{
		Rewrite: func(pr *httputil.ProxyRequest) {
			pr.SetURL(upstream)
			pr.Out.URL.Path, pr.Out.URL.RawPath = "/", ""
			h := pr.Out.Header
			h.Del(agentgw.HeaderAPIKey)
			for name := range h {
				if strings.HasPrefix(strings.ToLower(name), "x-forwarded-") {
					h.Del(name)
				}
			}
			for _, name := range []string{"Forwarded", "X-Openclaw-Scopes", "Authorization", "Cookie", "X-Real-Ip"} {
				h.Del(name)
			}
			if !opts.PassIdentity {
				h.Set(IdentityHeader, opts.Identity)
			}
			h.Set("X-Real-Ip", RealIP)
			p.lastMu.Lock()
			p.last = h.Clone()
			p.lastMu.Unlock()
		},
		Transport: &http.Transport{
			Proxy:                 nil,
			DialContext:           (&net.Dialer{Timeout: 10 * time.Second}).DialContext,
			ResponseHeaderTimeout: 30 * time.Second,
		},
		// Proxy errors are expected in fault tests; t.Log from a handler
		// goroutine after the test ended would panic.
		ErrorLog: log.New(io.Discard, "", 0),
	}
	routes := map[string]bool{"/namespaces/" + opts.Namespace + "/agents/" + opts.Agent: true}
	for _, r := range opts.MoreRoutes {
		ns, agent, ok := strings.Cut(r, "/")
		if !ok {
			t.Fatalf("gwtest: route %q is not <namespace>/<agent>", r)
		}
		routes["/namespaces/"+ns+"/agents/"+agent] = true
	}
	srv := httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		got := r.Header.Get(agentgw.HeaderAPIKey)
		want := *p.key.Load()
		if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(want)) != 1 {
			p.refused.Add(1)
			http.Error(w, "unauthorized", http.StatusUnauthorized)
			return
		}
		if !routes[r.URL.Path] || r.URL.RawQuery != "" {
			p.refused.Add(1)
			http.NotFound(w, r)
			return
		}
		p.forwarded.Add(1)
		rp.ServeHTTP(w, r)
	}))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0) // handshake failures are what some tests provoke
	srv.StartTLS()
	t.Cleanup(srv.Close)
	p.URL = srv.URL
	return p
}

// Key is the accepted service key.
func (p *Proxy) Key() string { return *p.key.Load() }

// SetKey replaces the accepted key; requests after it see the new key.
func (p *Proxy) SetKey(k string) { p.key.Store(&k) }

// RouteURL is the Agent's route, wss://<host>:<port>/namespaces/<ns>/agents/<agent>.
func (p *Proxy) RouteURL() string {
	return "wss" + strings.TrimPrefix(p.URL, "https") + "/namespaces/" + p.opts.Namespace + "/agents/" + p.opts.Agent
}

// Target writes the key and the CA to files and returns a routed Target.
func (p *Proxy) Target(t testing.TB) agentgw.Target {
	t.Helper()
	return agentgw.Target{
		Transport: agentgw.Routed,
		URL:       p.RouteURL(),
		KeyFile:   WriteFile(t, "service-key", []byte(p.Key())),
		CAFile:    WriteFile(t, "ca.crt", p.CAPEM),
	}
}

// TLSConfig trusts the proxy's CA, for DialNative.
func (p *Proxy) TLSConfig() *tls.Config {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(p.CAPEM)
	return &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
}

// Forwarded counts requests passed to the upstream.
func (p *Proxy) Forwarded() int64 { return p.forwarded.Load() }

// Refused counts requests answered 401 or 404.
func (p *Proxy) Refused() int64 { return p.refused.Load() }

// LastUpstreamHeader is the header of the last request sent upstream.
func (p *Proxy) LastUpstreamHeader() http.Header {
	p.lastMu.Lock()
	defer p.lastMu.Unlock()
	return p.last.Clone()
}
