package agentgw_test

import (
	"context"
	"errors"
	"net"
	"net/url"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/secretfile"
	"github.com/openclaw/occ/internal/workspace"
)

// fakeTunnel reaches addr whatever the URL says, and hands out token.
type fakeTunnel struct {
	addr     string
	token    []byte
	tokenErr error
	dials    atomic.Int32
}

func (f *fakeTunnel) DialGateway(ctx context.Context) (net.Conn, error) {
	f.dials.Add(1)
	var d net.Dialer
	return d.DialContext(ctx, "tcp", f.addr)
}

func (f *fakeTunnel) ReadToken(context.Context) ([]byte, error) { return f.token, f.tokenErr }

// TestTunnel: a direct target with a tunnel is dialed through it (the
// URL's port is the remote one, where nothing listens here) and
// authenticated with the token it reads; a token the tunnel cannot read,
// or one that breaks the secret rule, fails before any dial.
func TestTunnel(t *testing.T) {
	g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
	u, err := url.Parse(g.URL)
	if err != nil {
		t.Fatal(err)
	}
	c := agentgw.New(agentgw.Options{})
	remote := "ws://127.0.0.1:1/" // nothing listens on port 1 here

	ok := &fakeTunnel{addr: u.Host, token: []byte(g.Token)}
	target := agentgw.Target{Transport: agentgw.Direct, URL: remote, Tunnel: ok}
	if _, err := c.Set(testCtx(t), target, workspace.SoulMD, "through the tunnel\n", ""); err != nil {
		t.Fatalf("Set through the tunnel: %v", err)
	}
	if got, _ := g.File(workspace.SoulMD); got != "through the tunnel\n" {
		t.Errorf("gateway file = %q", got)
	}
	if ok.dials.Load() != 1 {
		t.Errorf("tunnel dialed %d times, want 1", ok.dials.Load())
	}

	for _, tc := range []struct {
		name string
		tun  *fakeTunnel
	}{
		{"token unreadable", &fakeTunnel{addr: u.Host, tokenErr: errors.New("host down")}},
		{"token with a newline", &fakeTunnel{addr: u.Host, token: []byte(g.Token + "\n")}},
		{"token empty", &fakeTunnel{addr: u.Host, token: nil}},
		{"token too long", &fakeTunnel{addr: u.Host, token: []byte(strings.Repeat("x", secretfile.MaxSecretBytes+1))}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := c.Get(testCtx(t), agentgw.Target{Transport: agentgw.Direct, URL: remote, Tunnel: tc.tun}, workspace.SoulMD)
			if got := outcomeOf(err); got != unavailable("credential") {
				t.Errorf("Get = %+v, want unavailable(credential)", got)
			}
			if tc.tun.dials.Load() != 0 {
				t.Error("dialed with an unusable token")
			}
			noSecret(t, err, g.Token)
		})
	}
}
