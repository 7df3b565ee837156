package agentgw

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/netip"
	"net/url"
	"strconv"
	"strings"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/secretfile"
)

// HeaderAPIKey carries the installation's service key to the private route
// (Envoy's API-key SecurityPolicy validates and strips it). It is the only
// credential a routed operation sends.
const HeaderAPIKey = "x-api-key"

// prepared is everything an operation needs before it dials, built from the
// Target and the files it names. Building it touches no network, so every
// failure here is Unavailable with no connection made.
type prepared struct {
	transport Transport
	url       string
	header    http.Header // upgrade request headers (routed: x-api-key)
	tls       *tls.Config // routed only
	token     string      // direct only; goes into connect.params.auth
	tunnel    compute.Tunnel
	caPEM     []byte // routed: the CA bundle as read (public), for the pool's fingerprint
}

// prepare validates the Target and reads its credential (and CA bundle) for
// this operation only.
func prepare(ctx context.Context, t Target) (*prepared, error) {
	switch t.Transport {
	case Direct:
		if err := checkDirectURL(t.URL); err != nil {
			return nil, unavailable("invalid_target", err)
		}
		if t.Tunnel != nil {
			// The token file is on the remote host: read it there, for
			// this operation, under the same content rule.
			tok, err := t.Tunnel.ReadToken(ctx)
			if err != nil {
				return nil, unavailable("credential", fmt.Errorf("gateway token through the tunnel: %w", err))
			}
			if err := secretfile.CheckSecret(tok); err != nil {
				return nil, unavailable("credential", fmt.Errorf("gateway token through the tunnel: %w", err))
			}
			return &prepared{transport: Direct, url: t.URL, header: http.Header{}, token: string(tok), tunnel: t.Tunnel}, nil
		}
		if t.TokenFile == "" {
			return nil, unavailable("credential", errors.New("direct target has no token file"))
		}
		tok, err := secretfile.ReadSecret(t.TokenFile)
		if err != nil {
			return nil, unavailable("credential", fmt.Errorf("gateway token file: %w", err))
		}
		return &prepared{transport: Direct, url: t.URL, header: http.Header{}, token: string(tok)}, nil
	case Routed:
		if err := checkRoutedURL(t.URL); err != nil {
			return nil, unavailable("invalid_target", err)
		}
		if t.KeyFile == "" {
			return nil, unavailable("credential", errors.New("routed target has no service key file"))
		}
		key, err := secretfile.ReadMountedSecret(t.KeyFile)
		if err != nil {
			return nil, unavailable("credential", fmt.Errorf("service key file: %w", err))
		}
		tc, caPEM, err := routedTLS(t.CAFile)
		if err != nil {
			return nil, unavailable("ca", err)
		}
		h := http.Header{}
		h.Set(HeaderAPIKey, string(key))
		return &prepared{transport: Routed, url: t.URL, header: h, tls: tc, caPEM: caPEM}, nil
	default:
		return nil, unavailable("invalid_target", fmt.Errorf("unknown transport %q", t.Transport))
	}
}

// checkDirectURL accepts only ws://<loopback IP literal>[:port][/]. The
// direct transport sends the Agent's gateway token in clear text inside the
// connect frame, so it must never leave the host: a host name could resolve
// anywhere, and a non-loopback address would put the token on a network.
// (SSH targets reach the remote loopback through a local forward, which is
// itself a loopback address here.)
func checkDirectURL(raw string) error {
	u, err := parseBareURL(raw, "ws")
	if err != nil {
		return err
	}
	addr, err := netip.ParseAddr(u.Hostname())
	if err != nil {
		return errors.New("direct URL host must be an IP literal")
	}
	// netip unmaps ::ffff:127.0.0.1 before IsLoopback; only the two
	// canonical forms are accepted, so what an audit shows is what was dialed.
	if addr.Zone() != "" || addr.Is4In6() || !addr.IsLoopback() {
		return errors.New("direct URL host must be a loopback address (127.0.0.0/8 or ::1)")
	}
	if u.Path != "" && u.Path != "/" {
		return errors.New("direct URL path must be /")
	}
	return nil
}

// checkRoutedURL accepts wss:// URLs with no userinfo, query or fragment:
// the route is authenticated by x-api-key alone, and anything else in the
// URL would either be a second, unreviewed credential or end up in proxy
// access logs.
func checkRoutedURL(raw string) error {
	u, err := parseBareURL(raw, "wss")
	if err != nil {
		return err
	}
	if u.Hostname() == "" {
		return errors.New("routed URL has no host")
	}
	return nil
}

// parseBareURL parses raw and checks the scheme and the absence of
// userinfo, query, fragment and an invalid port. Errors never quote the URL:
// a URL with userinfo could hold a password.
func parseBareURL(raw, scheme string) (*url.URL, error) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, errors.New("URL does not parse")
	}
	switch {
	case u.Scheme != scheme:
		return nil, fmt.Errorf("URL scheme must be %s", scheme)
	case u.Opaque != "" || u.Host == "":
		return nil, errors.New("URL has no host")
	case u.User != nil:
		return nil, errors.New("URL must not contain userinfo")
	case u.RawQuery != "" || u.ForceQuery:
		return nil, errors.New("URL must not contain a query")
	case u.Fragment != "" || strings.Contains(raw, "#"): // a bare trailing "#" parses as no fragment
		return nil, errors.New("URL must not contain a fragment")
	}
	if p := u.Port(); p != "" {
		n, err := strconv.Atoi(p)
		if err != nil || n < 1 || n > 65535 {
			return nil, errors.New("URL port is out of range")
		}
	}
	return u, nil
}

// routedTLS builds the client TLS configuration: the system roots plus the
// certificates in caFile (read now, for this operation), hostname
// verification by crypto/tls (ServerName comes from the URL), TLS 1.2 or
// newer, and HTTP/1.1 only because the WebSocket upgrade needs it.
func routedTLS(caFile string) (*tls.Config, []byte, error) {
	pool, err := x509.SystemCertPool()
	if err != nil || pool == nil {
		// No system roots (a scratch image): the CA file alone must do.
		pool = x509.NewCertPool()
	}
	var pem []byte
	if caFile != "" {
		if pem, err = secretfile.ReadCABundle(caFile); err != nil {
			return nil, nil, fmt.Errorf("CA file: %w", err)
		}
		if !pool.AppendCertsFromPEM(pem) {
			return nil, nil, errors.New("CA file holds no PEM certificate")
		}
	}
	return &tls.Config{
		RootCAs:    pool,
		MinVersion: tls.VersionTLS12,
		NextProtos: []string{"http/1.1"},
	}, pem, nil
}
