package ssh_test

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	xssh "golang.org/x/crypto/ssh"

	"github.com/openclaw/occ/internal/compute"
	computessh "github.com/openclaw/occ/internal/compute/ssh"
	"github.com/openclaw/occ/internal/compute/ssh/sshtest"
	"github.com/openclaw/occ/internal/ids"
)

func newRevision(ns, agent string, n int64) compute.Revision {
	return compute.Revision{ID: ids.New(ids.Revision), NamespaceID: ns, AgentID: agent, Number: n, Configuration: []byte(`{}`)}
}

// TestHostKeyPinned: a host whose key is not in known_hosts, or differs
// from the pinned one, is refused before anything runs on it.
func TestHostKeyPinned(t *testing.T) {
	cfg := sshtest.Config(t)
	pub, _, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	other, err := xssh.NewPublicKey(pub)
	if err != nil {
		t.Fatal(err)
	}
	host, port, _ := strings.Cut(cfg.Hosts[0].Address, ":")
	dir := t.TempDir()
	for _, tc := range []struct {
		name, knownHosts, want string
	}{
		{"unknown", "", "is not in"},
		{"changed", "[" + host + "]:" + port + " " + string(xssh.MarshalAuthorizedKey(other)), "differs from the one pinned"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			kh := filepath.Join(dir, tc.name)
			if err := os.WriteFile(kh, []byte(tc.knownHosts), 0o600); err != nil {
				t.Fatal(err)
			}
			c := cfg
			c.KnownHostsFile = kh
			d := newDriver(t, c)
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			rev := newRevision(ids.New(ids.Namespace), ids.New(ids.Agent), 1)
			_, err := d.PrepareRevision(ctx, rev, compute.RevisionContext{})
			if err == nil || !strings.Contains(err.Error(), tc.want) || !strings.Contains(err.Error(), "refusing to connect") {
				t.Fatalf("PrepareRevision = %v; want a refusal saying %q", err, tc.want)
			}
			if _, permanent := compute.AsPermanent(err); permanent {
				t.Errorf("a refused host key is retryable (the operator fixes known_hosts): %v", err)
			}
			if _, err := os.Stat(filepath.Join(c.Root, "bin")); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("something ran on the refused host: %s/bin: %v", c.Root, err)
			}
		})
	}
}

// TestPlacement: an Agent listed under a host goes there, others go to the
// host with free capacity, a full installation refuses (retryably), and a
// redeploy through a driver configured differently (hosts reordered, the
// pin gone) finds the Agent where it was placed.
func TestPlacement(t *testing.T) {
	cfg := sshtest.Config(t)
	acquireGateway(t)
	ns := ids.New(ids.Namespace)
	pinned, free, full := ids.New(ids.Agent), ids.New(ids.Agent), ids.New(ids.Agent)
	h1 := computessh.Host{Name: "h1", Address: cfg.Hosts[0].Address, Capacity: 1, Root: cfg.Root}
	h2 := computessh.Host{Name: "h2", Address: cfg.Hosts[0].Address, Capacity: 1, Root: sshtest.Root(t), Agents: []string{pinned}}
	cfg.Hosts = []computessh.Host{h1, h2}
	d := newDriver(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	t.Cleanup(func() {
		for _, a := range []string{pinned, free, full} {
			if err := d.DeleteAgent(context.Background(), compute.Agent{ID: a, NamespaceID: ns}); err != nil {
				t.Errorf("DeleteAgent: %v", err)
			}
		}
	})
	placedOn := func(agent string) string {
		for _, h := range cfg.Hosts {
			if _, err := os.Stat(filepath.Join(h.Root, "namespaces", ns, "agents", hash12(agent), "agent.json")); err == nil {
				return h.Name
			}
		}
		return ""
	}
	prepare := func(d compute.Driver, agent string, n int64) error {
		rev := newRevision(ns, agent, n)
		_, err := d.PrepareRevision(ctx, rev, compute.RevisionContext{})
		if err == nil {
			err = d.StopRevision(ctx, rev) // placement is what is tested, not the gateway
		}
		return err
	}
	if err := prepare(d, pinned, 1); err != nil {
		t.Fatal(err)
	}
	if err := prepare(d, free, 1); err != nil {
		t.Fatal(err)
	}
	err := prepare(d, full, 1)
	if err == nil || !strings.Contains(err.Error(), "capacity") {
		t.Errorf("third Agent on two hosts of capacity 1: %v; want a capacity error", err)
	} else if _, permanent := compute.AsPermanent(err); permanent {
		t.Errorf("a full installation is retryable: %v", err)
	}
	got := map[string]string{"pinned": placedOn(pinned), "free": placedOn(free), "full": placedOn(full)}
	want := map[string]string{"pinned": "h2", "free": "h1", "full": ""}
	check(t, "placement", want, got)

	c2 := cfg
	c2.Hosts = []computessh.Host{h2, h1}
	c2.Hosts[0].Agents, c2.Hosts[0].Capacity, c2.Hosts[1].Capacity = nil, 5, 5
	d2 := newDriver(t, c2)
	if err := prepare(d2, pinned, 2); err != nil {
		t.Fatal(err)
	}
	if err := prepare(d2, free, 2); err != nil {
		t.Fatal(err)
	}
	check(t, "placement after redeploy", want, map[string]string{"pinned": placedOn(pinned), "free": placedOn(free), "full": placedOn(full)})
	ep, err := d2.Endpoint(ctx, newRevision(ns, pinned, 2))
	if err != nil || ep.Tunnel == nil || ep.Transport != compute.Direct || !strings.HasPrefix(ep.URL, "ws://127.0.0.1:") {
		t.Errorf("Endpoint = %+v, %v; want a direct loopback URL with a tunnel", ep, err)
	}
}
