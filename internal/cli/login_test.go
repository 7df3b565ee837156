package cli

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/clientconfig"
)

// TestSecretInputLimits: a password on standard input and a key file are
// read up to 4096 bytes; one byte more is a usage error that says so and
// quotes nothing of the input.
func TestSecretInputLimits(t *testing.T) {
	dir := t.TempDir()
	keyFile := func(name string, n int) string { return sizedFile(t, dir, name, "k", n) }
	password := func(n int) func() (string, error) {
		return func() (string, error) {
			return readPassword(deps{stdin: strings.NewReader(strings.Repeat("p", n))}, true)
		}
	}
	key := func(path string) func() (string, error) {
		return func() (string, error) { return readSecretFile(path) }
	}
	type result struct {
		Len  int
		Exit int // 0: read
		Msg  string
	}
	past := keyFile("past", maxSecretBytes+1)
	tests := []struct {
		name string
		read func() (string, error)
		want result
	}{
		{"password at the limit", password(maxSecretBytes), result{Len: maxSecretBytes}},
		{"password one past", password(maxSecretBytes + 1), result{Exit: exitUsage, Msg: "the password on standard input is longer than 4096 bytes"}},
		{"key file at the limit", key(keyFile("at", maxSecretBytes)), result{Len: maxSecretBytes}},
		{"key file one past", key(past), result{Exit: exitUsage, Msg: "the key file " + past + " is longer than 4096 bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.read()
			got := result{Len: len(s)}
			var ee *exitError
			if errors.As(err, &ee) {
				got.Exit, got.Msg = ee.code, ee.err.Error()
			} else if err != nil {
				t.Fatalf("read: %v, want an exit error", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestLoginConfigFirst: login reads the saved configuration before it
// signs in, so a file it cannot use (readable by others) fails the
// command before the server creates a session (or is asked about a key).
// A session that was created but cannot be saved is signed out again,
// and the error says so.
func TestLoginConfigFirst(t *testing.T) {
	var mu sync.Mutex
	type calls struct{ SignIns, Sessions, SignOuts int }
	var got calls
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		mu.Lock()
		defer mu.Unlock()
		switch r.URL.Path {
		case "/api/auth/sign-in/email":
			got.SignIns++
			http.SetCookie(w, &http.Cookie{Name: "occ_session", Value: "s1", Path: "/", HttpOnly: true})
			envelope(w, 200, `{"data":{"subject":{"id":"usr_1","kind":"user"}}}`)
		case "/api/auth/session":
			got.Sessions++
			envelope(w, 200, `{"data":{"subject":{"id":"sa_1","kind":"service_principal"}}}`)
		case "/api/auth/sign-out":
			if ck, err := r.Cookie("occ_session"); err == nil && ck.Value == "s1" {
				got.SignOuts++
			}
			envelope(w, 200, `{"data":{"signedOut":true}}`)
		default:
			http.NotFound(w, r)
		}
	}))
	defer srv.Close()
	keyFile := sizedFile(t, t.TempDir(), "key", "k", 10)
	password := []string{"login", srv.URL, "--email", "a@example.com", "--password-stdin"}
	key := []string{"login", srv.URL, "--api-key-file", keyFile}
	// readableByOthers saves a valid configuration, then opens its mode.
	readableByOthers := func(t *testing.T, home string) {
		dir := filepath.Join(home, "occ")
		if err := clientconfig.Save(dir, clientconfig.Config{Contexts: map[string]clientconfig.Context{}}); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(filepath.Join(dir, clientconfig.FileName), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	// unsavable leaves the configuration directory a dangling symbolic
	// link: it reads as no configuration, but cannot be created (which
	// holds for root too, unlike a directory without write permission).
	unsavable := func(t *testing.T, home string) {
		if err := os.Symlink(filepath.Join(home, "missing", "occ"), filepath.Join(home, "occ")); err != nil {
			t.Fatal(err)
		}
	}
	type result struct {
		Exit  int
		Calls calls
		Says  bool // stderr holds the case's words
	}
	tests := []struct {
		name  string
		setup func(t *testing.T, home string)
		args  []string
		says  string
		want  result
	}{
		{"a configuration readable by others: no sign-in", readableByOthers, password, "must be 0600",
			result{Exit: exitRuntime, Says: true}},
		{"a configuration readable by others: the key is not tried", readableByOthers, key, "must be 0600",
			result{Exit: exitRuntime, Says: true}},
		{"a session that cannot be saved is ended", unsavable, password, "the session just signed in was ended on the server",
			result{Exit: exitRuntime, Calls: calls{SignIns: 1, SignOuts: 1}, Says: true}},
		{"a key that cannot be saved stays valid", unsavable, key, "occ: creating ",
			result{Exit: exitRuntime, Calls: calls{Sessions: 1}, Says: true}},
		{"saved", func(*testing.T, string) {}, password, "Logged in to",
			result{Calls: calls{SignIns: 1}, Says: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			mu.Lock()
			got = calls{}
			mu.Unlock()
			env := clientEnv(t, nil)
			tc.setup(t, env["XDG_CONFIG_HOME"])
			h := harness{env: env, stdin: strings.NewReader("pw\n")}
			res := result{Exit: h.run(t, tc.args...)}
			res.Says = strings.Contains(h.stder.String(), tc.says)
			mu.Lock()
			res.Calls = got
			mu.Unlock()
			if diff := cmp.Diff(tc.want, res); diff != "" {
				t.Errorf("occ %q (-want +got):\n%s\nstderr: %s", tc.args, diff, h.stder.String())
			}
		})
	}
}
