package ssh_test

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	computessh "github.com/openclaw/occ/internal/compute/ssh"
	"github.com/openclaw/occ/internal/compute/ssh/sshtest"
)

// TestServeTokens: the host side of the token reader answers each request
// by reading the file again, refuses files that break the secret rule
// without quoting them, and stops at a malformed request.
func TestServeTokens(t *testing.T) {
	root := t.TempDir()
	tokens := filepath.Join(root, "tokens")
	if err := os.Mkdir(tokens, 0o700); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) {
		t.Helper()
		if err := os.WriteFile(filepath.Join(tokens, name), []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write("aaaaaaaaaaaa", "token-one")
	write("bbbbbbbbbbbb", "secret with space")
	write("cccccccccccc", strings.Repeat("x", 4097))
	write("eeeeeeeeeeee", strings.Repeat("y", 4096))
	if err := os.Symlink(filepath.Join(tokens, "aaaaaaaaaaaa"), filepath.Join(tokens, "dddddddddddd")); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name, in string
		wantOut  func(string) bool
		wantErr  bool
	}{
		{"token", "aaaaaaaaaaaa\n", func(s string) bool { return s == "ok 9\ntoken-one" }, false},
		{"two requests answered in order", "aaaaaaaaaaaa\naaaaaaaaaaaa\n", func(s string) bool { return s == "ok 9\ntoken-oneok 9\ntoken-one" }, false},
		{"at the size limit", "eeeeeeeeeeee\n", func(s string) bool { return s == "ok 4096\n"+strings.Repeat("y", 4096) }, false},
		{"one past the size limit", "cccccccccccc\n", func(s string) bool { return strings.HasPrefix(s, "err ") && strings.Count(s, "\n") == 1 }, false},
		{"content rule", "bbbbbbbbbbbb\n", func(s string) bool { return strings.HasPrefix(s, "err ") && !strings.Contains(s, "secret") }, false},
		{"symlink", "dddddddddddd\n", func(s string) bool { return strings.HasPrefix(s, "err ") && !strings.Contains(s, "token-one") }, false},
		{"missing", "ffffffffffff\n", func(s string) bool { return strings.HasPrefix(s, "err ") }, false},
		{"malformed request ends the reader", "../../etc/pa\naaaaaaaaaaaa\n", func(s string) bool { return s == "err request\n" }, true},
		{"no newline", "aaaaaaaaaaaa", func(s string) bool { return s == "" }, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var out bytes.Buffer
			err := computessh.ServeTokens(strings.NewReader(tc.in), &out, root)
			if (err != nil) != tc.wantErr {
				t.Errorf("ServeTokens error = %v, want error %v", err, tc.wantErr)
			}
			if !tc.wantOut(out.String()) {
				t.Errorf("answer = %.80q", out.String())
			}
		})
	}
	if err := computessh.ServeTokens(strings.NewReader(""), &bytes.Buffer{}, "relative/root"); err == nil {
		t.Error("a relative root was accepted")
	}
}

// TestTokenReader: through the real sshd, the driver reads tokens with one
// long-lived session: a rotated token applies to the next read on the
// same session, a refused file leaves the session in place, and a session
// that died is replaced on the next read.
func TestTokenReader(t *testing.T) {
	cfg := sshtest.Config(t)
	d := newDriver(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	if err := os.MkdirAll(filepath.Join(cfg.Root, "tokens"), 0o700); err != nil {
		t.Fatal(err)
	}
	const agentHash = "0123456789ab"
	file := filepath.Join(cfg.Root, "tokens", agentHash)
	read := func(want string) {
		t.Helper()
		got, err := computessh.ReadTokenOnHost(ctx, d, agentHash)
		if err != nil {
			t.Fatalf("read token: %v", err)
		}
		if diff := cmp.Diff(want, string(got)); diff != "" {
			t.Errorf("token (-want +got):\n%s", diff)
		}
	}
	if err := os.WriteFile(file, []byte("first-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	read("first-token")
	sess := computessh.TokenReaderSession(d)
	if sess == nil {
		t.Fatal("no reader session after a read")
	}
	// Rotation: written to a temporary file and renamed, as the driver does.
	if err := os.WriteFile(file+".tmp", []byte("second-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(file+".tmp", file); err != nil {
		t.Fatal(err)
	}
	read("second-token")
	if computessh.TokenReaderSession(d) != sess {
		t.Error("a second read opened a new session")
	}
	if _, err := computessh.ReadTokenOnHost(ctx, d, "ba9876543210"); err == nil || !strings.Contains(err.Error(), "refused the token file") {
		t.Errorf("missing token file: %v", err)
	}
	if computessh.TokenReaderSession(d) != sess {
		t.Error("a refused file replaced the session")
	}
	// Pipelined: concurrent reads share the session, each gets its answer.
	other := filepath.Join(cfg.Root, "tokens", "ba9876543211")
	if err := os.WriteFile(other, []byte("other-token"), 0o600); err != nil {
		t.Fatal(err)
	}
	errs := make(chan error, 32)
	for i := range 32 {
		go func() {
			hash, want := agentHash, "second-token"
			if i%2 == 1 {
				hash, want = "ba9876543211", "other-token"
			}
			got, err := computessh.ReadTokenOnHost(ctx, d, hash)
			if err == nil && string(got) != want {
				err = fmt.Errorf("read %s = %q, want %q", hash, got, want)
			}
			errs <- err
		}()
	}
	for range 32 {
		if err := <-errs; err != nil {
			t.Error(err)
		}
	}
	if computessh.TokenReaderSession(d) != sess {
		t.Error("concurrent reads opened a new session")
	}
	computessh.BreakTokenReader(d)
	read("second-token")
	if s := computessh.TokenReaderSession(d); s == nil || s == sess {
		t.Error("the broken session was not replaced")
	}
	expired, cancelExpired := context.WithCancel(ctx)
	cancelExpired()
	if _, err := computessh.ReadTokenOnHost(expired, d, agentHash); err == nil {
		t.Error("a read with an ended context succeeded")
	}
	read("second-token")
}
