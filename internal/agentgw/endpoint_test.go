package agentgw_test

import (
	"errors"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/compute"
)

// TestTargetFor checks how a driver's endpoint becomes a Target: a direct
// endpoint keeps its own token file and never gets the installation's
// service key; a routed one gets the key and CA files and never a token
// file; anything else is refused.
func TestTargetFor(t *testing.T) {
	auth := agentgw.RoutedAuth{KeyFile: "/etc/occ/gateway.key", CAFile: "/etc/occ/ca.pem"}
	tests := []struct {
		name    string
		ep      compute.Endpoint
		auth    agentgw.RoutedAuth
		want    agentgw.Target
		wantErr error
	}{
		{"direct keeps its token file only", compute.Endpoint{URL: "ws://127.0.0.1:18789/", Transport: compute.Direct, TokenFile: "/run/agent/token"}, auth,
			agentgw.Target{Transport: agentgw.Direct, URL: "ws://127.0.0.1:18789/", TokenFile: "/run/agent/token"}, nil},
		{"direct without routed credentials", compute.Endpoint{URL: "ws://127.0.0.1:1/", Transport: compute.Direct, TokenFile: "/t"}, agentgw.RoutedAuth{},
			agentgw.Target{Transport: agentgw.Direct, URL: "ws://127.0.0.1:1/", TokenFile: "/t"}, nil},
		{"routed takes the installation's key and CA", compute.Endpoint{URL: "wss://gw.example/namespaces/n/agents/a", Transport: compute.Routed, TokenFile: "/ignored"}, auth,
			agentgw.Target{Transport: agentgw.Routed, URL: "wss://gw.example/namespaces/n/agents/a", KeyFile: auth.KeyFile, CAFile: auth.CAFile}, nil},
		{"routed with a key and no CA", compute.Endpoint{URL: "wss://gw.example/x", Transport: compute.Routed}, agentgw.RoutedAuth{KeyFile: "/k"},
			agentgw.Target{Transport: agentgw.Routed, URL: "wss://gw.example/x", KeyFile: "/k"}, nil},
		{"routed without a key file", compute.Endpoint{URL: "wss://gw.example/x", Transport: compute.Routed}, agentgw.RoutedAuth{CAFile: "/ca"},
			agentgw.Target{}, agentgw.ErrRoutedNotConfigured},
		{"unknown transport", compute.Endpoint{URL: "http://x/", Transport: "carrier-pigeon"}, auth,
			agentgw.Target{}, agentgw.ErrUnknownTransport},
		{"no transport", compute.Endpoint{}, auth, agentgw.Target{}, agentgw.ErrUnknownTransport},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got, err := agentgw.TargetFor(tc.ep, tc.auth)
			if !errors.Is(err, tc.wantErr) {
				t.Fatalf("error = %v, want %v", err, tc.wantErr)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("target (-want +got):\n%s", diff)
			}
		})
	}
}
