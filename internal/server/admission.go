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
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return false
	}
	ip, err := netip.ParseAddr(host)
	if err != nil {
		return false
	}
	ip = ip.Unmap()
	for _, p := range a.trustedProxies {
		if p.Contains(ip) {
			return true
		}
	}
	return false
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
		subject, err := a.authn.Authenticate(r)
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
		ctx := r.Context()
		if subject != nil {
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
