package agentgw

import (
	"errors"
	"fmt"

	"github.com/openclaw/occ/internal/compute"
)

// RoutedAuth is the installation's credential for routed targets: the file
// holding its service key and, optionally, a PEM CA bundle file added to
// the system roots. Both are read for each operation, never here.
type RoutedAuth struct {
	KeyFile string
	CAFile  string
}

// Errors of TargetFor. Each means the gateway cannot be reached as
// configured; callers answer "unavailable" and never retry on their own.
var (
	// ErrRoutedNotConfigured: the driver's endpoint is routed but OCC has
	// no service key file to authenticate to the route with.
	ErrRoutedNotConfigured = errors.New("agentgw: routed gateway access is not configured (no service key file)")
	// ErrUnknownTransport: the driver returned a transport this client
	// does not speak.
	ErrUnknownTransport = errors.New("agentgw: unknown endpoint transport")
)

// TargetFor turns a Compute driver's endpoint into the Target to talk to:
// a direct endpoint carries its own gateway token file; a routed endpoint
// is reached with the installation's service key (and CA) files. It reads
// no file and touches no network; prepare validates the result when an
// operation starts.
func TargetFor(ep compute.Endpoint, routed RoutedAuth) (Target, error) {
	switch ep.Transport {
	case compute.Direct:
		return Target{Transport: Direct, URL: ep.URL, TokenFile: ep.TokenFile, Tunnel: ep.Tunnel}, nil
	case compute.Routed:
		if routed.KeyFile == "" {
			return Target{}, ErrRoutedNotConfigured
		}
		return Target{Transport: Routed, URL: ep.URL, KeyFile: routed.KeyFile, CAFile: routed.CAFile}, nil
	default:
		return Target{}, fmt.Errorf("%w %q", ErrUnknownTransport, ep.Transport)
	}
}
