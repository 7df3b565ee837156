package ssh

import (
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	xssh "golang.org/x/crypto/ssh"
)

// TestKnownHostsReread, against the real sshd: the known_hosts file is
// read again when it changes, without restarting occ. A host refused
// because its key is not pinned is accepted at the next dial once the
// operator appends its line; a key that differs from the pinned one stays
// refused whatever else the file gains; a key removed from the file
// applies to the next connection (an open one keeps its key); and a file
// that cannot be used (no valid line, missing) refuses every host, never
// falling back to what was read before.
func TestKnownHostsReread(t *testing.T) {
	cfg := testConfig(t)
	real, err := os.ReadFile(cfg.KnownHostsFile)
	if err != nil {
		t.Fatal(err)
	}
	hostName, port, _ := strings.Cut(cfg.Hosts[0].Address, ":")
	otherKey := func() string {
		pub, _, err := ed25519.GenerateKey(rand.Reader)
		if err != nil {
			t.Fatal(err)
		}
		k, err := xssh.NewPublicKey(pub)
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(xssh.MarshalAuthorizedKey(k)))
	}
	unrelated := "[" + hostName + "]:1 " + otherKey() + "\n"
	wrong := "[" + hostName + "]:" + port + " " + otherKey() + "\n"

	kh := filepath.Join(t.TempDir(), "known_hosts")
	write := func(text string) {
		t.Helper()
		// Replaced by rename, as editors and Secret updates do.
		if err := os.WriteFile(kh+".tmp", []byte(text), 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(kh+".tmp", kh); err != nil {
			t.Fatal(err)
		}
	}
	appendLine := func(text string) {
		t.Helper()
		f, err := os.OpenFile(kh, os.O_APPEND|os.O_WRONLY, 0)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if _, err := f.WriteString(text); err != nil {
			t.Fatal(err)
		}
	}
	write(unrelated)
	cfg.KnownHostsFile = kh
	d, err := New(Options{Config: cfg, Binary: "/bin/sh"})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := d.hosts[0]
	dial := func(step, want string) {
		t.Helper()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		h.close() // a new connection: an open one keeps the key it was opened with
		_, err := h.conn(ctx)
		switch {
		case want == "" && err != nil:
			t.Fatalf("%s: dial = %v; want accepted", step, err)
		case want != "" && (err == nil || !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "refusing to connect")):
			t.Fatalf("%s: dial = %v; want a refusal saying %q", step, err, want)
		}
	}

	dial("not pinned", "is not in")
	appendLine(string(real))
	dial("its line appended", "")

	write(wrong)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if _, err := h.run(ctx, "probe", "true", nil); err != nil {
		t.Errorf("the open connection after the file changed: %v; want it kept", err)
	}
	dial("key changed", "differs from the one pinned")
	appendLine(unrelated)
	dial("key changed, another host's line appended", "differs from the one pinned")

	write("this is not a known_hosts line\n")
	dial("no valid line", "known hosts file")
	if err := os.Remove(kh); err != nil {
		t.Fatal(err)
	}
	dial("file removed", "known hosts file")

	write(string(real))
	dial("fixed", "")
}
