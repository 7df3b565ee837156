package server

import (
	"net"
	"net/http"
	"net/netip"
	"strings"

	"github.com/openclaw/occ/internal/audit"
	"github.com/openclaw/occ/internal/authn"
	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/httpx"
)

// admission runs before every route: it refuses forwarding headers from
// untrusted peers, authenticates the caller, applies the browser CSRF rules
// to session (and anonymous) callers, and sets up the request's denial
// audit buffer.
type admission struct {
	authn          *authn.Authenticator
	audit          *audit.Recorder
	publicOrigin   string
	trustedProxies []netip.Prefix
}

// forwardingHeader reports whether h is a header a proxy uses to speak for
// the client. Believing one from an arbitrary peer would let any client
// choose its apparent address.
func forwardingHeader(h string) bool {
	h = strings.ToLower(h)
	return h == "forwarded" || h == "x-real-ip" || strings.HasPrefix(h, "x-forwarded-")
}

func (a *admission) trustedPeer(r *http.Request) bool {
	return a.trusted(peerAddr(r))
}

// peerAddr is the TCP peer's address, invalid when RemoteAddr is not an
// IP:port (a test's or a unix socket's).
func peerAddr(r *http.Request) netip.Addr {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return netip.Addr{}
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return netip.Addr{}
	}
	return ip.Unmap()
}

func (a *admission) trusted(ip netip.Addr) bool {
	if !ip.IsValid() {
		return false
	}
	for _, p := range a.trustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
}

// clientAddr is the address the request came from, for the sign-in
// throttle: the TCP peer, unless the peer is a trusted proxy, in which case
// X-Forwarded-For is read from the right, skipping trusted proxies, and
// the first address that is not one is the client (each proxy appends the
// peer it saw, so entries left of an untrusted hop may be forged). A
// malformed entry stops the walk at the last trusted hop. Only
// X-Forwarded-For is read; "Forwarded" is refused like any forwarding
// header from an untrusted peer, and ignored from a trusted one.
func (a *admission) clientAddr(r *http.Request) netip.Addr {
	ip := peerAddr(r)
	if !a.trusted(ip) {
		return ip
	}
	var hops []string
	for _, v := range r.Header.Values("X-Forwarded-For") {
		hops = append(hops, strings.Split(v, ",")...)
	}
	for i := len(hops) - 1; i >= 0; i-- {
		hop, err := netip.ParseAddr(strings.TrimSpace(hops[i]))
		if err != nil {
			return ip
		}
		ip = hop.Unmap()
		if !a.trusted(ip) {
			return ip
		}
	}
	return ip
}

var (
	errForwarding  = errkind.New(errkind.PermissionDenied, "Forwarding headers are accepted only from configured trusted proxies.")
	errCrossSite   = errkind.New(errkind.PermissionDenied, "Cross-site requests are not allowed.")
	errBadOrigin   = errkind.New(errkind.PermissionDenied, "The request origin is not trusted.")
	errNeedsSignIn = errkind.New(errkind.Unauthenticated, "Authentication is required.")
)

func safeMethod(m string) bool {
	return m == http.MethodGet || m == http.MethodHead || m == http.MethodOptions
}

func (a *admission) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		for h := range r.Header {
			if forwardingHeader(h) && !a.trustedPeer(r) {
				httpx.WriteError(w, r, errForwarding)
				return
			}
		}
		subject, acc, err := a.authn.Authenticate(r)
		if err != nil {
			httpx.WriteError(w, r, err)
			return
		}
		// API-key callers are exempt from the browser rules: a key is never
		// sent automatically by a browser, so it cannot be ridden.
		if subject == nil || subject.Kind != authz.KindServicePrincipal {
			if r.Header.Get("Sec-Fetch-Site") == "cross-site" {
				httpx.WriteError(w, r, errCrossSite)
				return
			}
			if !safeMethod(r.Method) && r.Header.Get("Origin") != a.publicOrigin {
				httpx.WriteError(w, r, errBadOrigin)
				return
			}
		}
		ctx := authn.WithClientAddr(r.Context(), a.clientAddr(r))
		switch {
		case subject != nil && acc != nil:
			// The subject's grants came with its session or key (one query).
			ctx = authz.WithSubjectAccess(ctx, subject, *acc)
		case subject != nil:
			ctx = authz.WithSubject(ctx, subject)
		}
		ctx = audit.WithDenialBuffer(ctx)
		// Denials are written after the handler's transactions ended; see
		// audit.Recorder.Denial.
		defer a.audit.Flush(ctx)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// requireSubject guards Authenticated routes.
func requireSubject(next http.HandlerFunc) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if authz.SubjectFrom(r.Context()) == nil {
			httpx.WriteError(w, r, errNeedsSignIn)
			return
		}
		next(w, r)
	}
}
