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
