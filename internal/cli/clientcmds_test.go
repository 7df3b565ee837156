package cli

import (
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/clientconfig"
)

// clientEnv returns the environment of a client command whose saved
// configuration, in a temporary $XDG_CONFIG_HOME, holds contexts (none
// when nil), with the one named "main", if any, current.
func clientEnv(t *testing.T, contexts map[string]clientconfig.Context) map[string]string {
	t.Helper()
	home := t.TempDir()
	if contexts != nil {
		cfg := clientconfig.Config{Contexts: contexts}
		if _, ok := contexts["main"]; ok {
			cfg.Current = "main"
		}
		if err := clientconfig.Save(filepath.Join(home, "occ"), cfg); err != nil {
			t.Fatal(err)
		}
	}
	// OCC_DATA_DIR keeps a command that opens the database (audit verify
	// or export, should one run) out of the source tree.
	return map[string]string{"XDG_CONFIG_HOME": home, "OCC_DATA_DIR": filepath.Join(home, "data"), "OCC_LOG_LEVEL": "error"}
}

// keyContext is a saved context that calls server with a service key.
func keyContext(server string) clientconfig.Context {
	return clientconfig.Context{Server: server, Namespace: "ns_x",
		Credential: clientconfig.Credential{Kind: clientconfig.KindKey, Key: "occk_test", SubjectID: "sa_x"}}
}

// TestUnknownContext: a context name that no saved context has is an
// unknown name, exit 3, whether --context names it on a client command or
// on logout, or `occ context use` does; no current context at all is
// "not logged in", exit 4.
func TestUnknownContext(t *testing.T) {
	type result struct {
		Exit   int
		Stderr string
	}
	unknown := result{Exit: exitNotFound, Stderr: "occ: no context named \"nope\" (see `occ context list`)\n"}
	tests := []struct {
		name     string
		contexts map[string]clientconfig.Context
		args     []string
		want     result
	}{
		{"client command --context", map[string]clientconfig.Context{"main": keyContext("http://127.0.0.1:1")},
			[]string{"namespace", "list", "--context", "nope"}, unknown},
		{"logout --context", map[string]clientconfig.Context{"main": keyContext("http://127.0.0.1:1")},
			[]string{"logout", "--context", "nope"}, unknown},
		{"context use", map[string]clientconfig.Context{"main": keyContext("http://127.0.0.1:1")},
			[]string{"context", "use", "nope"}, unknown},
		{"not logged in", nil, []string{"namespace", "list"},
			result{Exit: exitAuth, Stderr: "occ: " + clientconfig.ErrNoContext.Error() + "\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := harness{env: clientEnv(t, tc.contexts)}
			got := result{Exit: h.run(t, tc.args...), Stderr: h.stder.String()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("occ %q (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

// TestAuditClientFlags: audit verify and audit export read the database,
// not the API, so the client flags are unknown flags there (exit 2)
// rather than accepted and ignored; audit list still takes them.
func TestAuditClientFlags(t *testing.T) {
	type result struct {
		Exit   int
		Stderr string // its first line
	}
	tests := []struct {
		args []string
		want result
	}{
		{[]string{"audit", "export", "--namespace", "x"}, result{exitUsage, "occ: unknown flag: --namespace"}},
		{[]string{"audit", "export", "-n", "x"}, result{exitUsage, "occ: unknown shorthand flag: 'n' in -n"}},
		{[]string{"audit", "export", "--output", "json"}, result{exitUsage, "occ: unknown flag: --output"}},
		{[]string{"audit", "verify", "--context", "c"}, result{exitUsage, "occ: unknown flag: --context"}},
		{[]string{"audit", "verify", "--namespace", "x"}, result{exitUsage, "occ: unknown flag: --namespace"}},
		// Accepted: the command gets as far as the saved contexts.
		{[]string{"audit", "list", "--namespace", "x", "--output", "json"},
			result{exitAuth, "occ: " + clientconfig.ErrNoContext.Error()}},
	}
	for _, tc := range tests {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			h := harness{env: clientEnv(t, nil)}
			got := result{Exit: h.run(t, tc.args...)}
			got.Stderr, _, _ = strings.Cut(h.stder.String(), "\n")
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("occ %q (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

// TestLoginRefused: a 401 during `occ login` exits 4 with the server's
// message and a hint about what login sent (the email and password, or
// the key file), never the hint of other commands that the saved session
// or key stopped working.
func TestLoginRefused(t *testing.T) {
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		msg := "invalid email or password" // POST /api/auth/sign-in/email
		if r.URL.Path == "/api/auth/session" {
			msg = "invalid credential"
		}
		envelope(w, http.StatusUnauthorized,
			`{"error":{"code":"UNAUTHENTICATED","message":"`+msg+`"},"meta":{"requestId":"req_1"}}`)
	}))
	defer srv.Close()
	keyFile := filepath.Join(t.TempDir(), "key")
	if err := os.WriteFile(keyFile, []byte("occk_wrong\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	type result struct {
		Exit   int
		Stderr string
	}
	tests := []struct {
		name  string
		args  []string
		stdin string
		want  result
	}{
		{"wrong password", []string{"login", srv.URL, "--email", "a@example.com", "--password-stdin"}, "wrong\n",
			result{exitAuth, "occ: invalid email or password [UNAUTHENTICATED, request req_1]\n" +
				"occ: The email or password was not accepted: check them and run `occ login` again.\n"}},
		{"refused key", []string{"login", srv.URL, "--api-key-file", keyFile}, "",
			result{exitAuth, "occ: invalid credential [UNAUTHENTICATED, request req_1]\n" +
				"occ: The key in " + keyFile + " was not accepted (expired, revoked or wrong).\n"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			h := harness{env: clientEnv(t, nil), stdin: strings.NewReader(tc.stdin)}
			got := result{Exit: h.run(t, tc.args...), Stderr: h.stder.String()}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("occ %q (-want +got):\n%s", tc.args, diff)
			}
		})
	}
}

// TestIntervalDefaultsDocumented: each polling command's --interval
// default is the one docs/cli.md gives in the paragraph about it.
func TestIntervalDefaultsDocumented(t *testing.T) {
	b, err := os.ReadFile("../../docs/cli.md")
	if err != nil {
		t.Fatal(err)
	}
	paragraphs := strings.Split(string(b), "\n\n")
	documented := regexp.MustCompile("`--interval`\\s+\\(default ([^)]+)\\)")
	tests := []struct {
		cmd    []string
		anchor string // text of the paragraph that documents the command
	}{
		{[]string{"agent", "deploy"}, "`deploy --wait` prints"},
		{[]string{"namespace", "reconcile"}, "`occ namespace reconcile NAMESPACE --wait`"},
		{[]string{"routing", "enable"}, "`occ routing enable (--namespace NS | --all)"},
		{[]string{"audit", "list"}, "audit list --follow` polls"},
	}
	root := newRoot(deps{})
	for _, tc := range tests {
		t.Run(strings.Join(tc.cmd, " "), func(t *testing.T) {
			cmd, _, err := root.Find(tc.cmd)
			if err != nil {
				t.Fatal(err)
			}
			fl := cmd.Flags().Lookup("interval")
			if fl == nil {
				t.Fatalf("occ %s has no --interval", cmd.CommandPath())
			}
			var docs []string
			for _, p := range paragraphs {
				if strings.Contains(p, tc.anchor) {
					for _, m := range documented.FindAllStringSubmatch(p, -1) {
						docs = append(docs, m[1])
					}
				}
			}
			if diff := cmp.Diff([]string{fl.DefValue}, docs); diff != "" {
				t.Errorf("%s --interval default (-code +docs/cli.md):\n%s", cmd.CommandPath(), diff)
			}
		})
	}
}

// TestReadPersonaDirRefusals: --files names a directory that must exist;
// a mistyped path says so, naming it, rather than reading as a directory
// that holds none of the files.
func TestReadPersonaDirRefusals(t *testing.T) {
	dir := t.TempDir()
	missing := filepath.Join(dir, "persona")
	notDir := sizedFile(t, dir, "SOUL.md", "s", 1)
	empty := filepath.Join(dir, "empty")
	if err := os.Mkdir(empty, 0o700); err != nil {
		t.Fatal(err)
	}
	type result struct {
		Exit int
		Msg  string
	}
	tests := []struct {
		name, dir string
		want      result
	}{
		{"missing", missing, result{exitUsage, "the --files directory " + missing + " does not exist"}},
		{"a file", notDir, result{exitUsage, "--files " + notDir + " is not a directory"}},
		{"empty", empty, result{exitUsage, empty + " holds none of [AGENTS.md SOUL.md IDENTITY.md USER.md]"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			_, err := readPersonaDir(tc.dir)
			var got result
			var ee *exitError
			if !errors.As(err, &ee) {
				t.Fatalf("readPersonaDir = %v, want an exit error", err)
			}
			got.Exit, got.Msg = ee.code, ee.err.Error()
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("readPersonaDir(%s) (-want +got):\n%s", tc.dir, diff)
			}
		})
	}
}

// TestFilesGetOut: files get -o FILE leaves FILE with the content alone
// and mode 0600, also when FILE existed with a wider mode and more
// content, and leaves no temporary file behind.
func TestFilesGetOut(t *testing.T) {
	const content = "be brief\n"
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet || r.URL.Path != "/namespaces/ns_x/agents/agt_x/workspace/files/SOUL.md" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("ETag", `"h1"`)
		envelope(w, 200, `{"data":{"name":"SOUL.md","content":"be brief\n"}}`)
	}))
	defer srv.Close()
	type result struct {
		Exit    int
		Content string
		Mode    os.FileMode
		Files   []string // the directory's entries afterwards
	}
	tests := []struct {
		name     string
		existing string // "": no file before
		mode     os.FileMode
	}{
		{"a new file", "", 0},
		{"over a 0644 file with more content", strings.Repeat("old content\n", 10), 0o644},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			out := filepath.Join(dir, "SOUL.md")
			if tc.existing != "" {
				if err := os.WriteFile(out, []byte(tc.existing), tc.mode); err != nil {
					t.Fatal(err)
				}
				if err := os.Chmod(out, tc.mode); err != nil { // past the umask
					t.Fatal(err)
				}
			}
			h := harness{env: clientEnv(t, map[string]clientconfig.Context{"main": keyContext(srv.URL)})}
			got := result{Exit: h.run(t, "files", "get", "agt_x", "SOUL.md", "-o", out)}
			b, err := os.ReadFile(out)
			if err != nil {
				t.Fatalf("exit %d, stderr %q: %v", got.Exit, h.stder.String(), err)
			}
			got.Content = string(b)
			fi, err := os.Stat(out)
			if err != nil {
				t.Fatal(err)
			}
			got.Mode = fi.Mode().Perm()
			entries, err := os.ReadDir(dir)
			if err != nil {
				t.Fatal(err)
			}
			for _, e := range entries {
				got.Files = append(got.Files, e.Name())
			}
			want := result{Content: content, Mode: 0o600, Files: []string{"SOUL.md"}}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("files get -o (-want +got):\n%s\nstderr: %s", diff, h.stder.String())
			}
		})
	}
	// A symbolic link (or a device) is refused, and left as it was: the
	// rename would replace it rather than write through it.
	t.Run("a symbolic link", func(t *testing.T) {
		dir := t.TempDir()
		target := filepath.Join(dir, "target")
		if err := os.WriteFile(target, []byte("kept"), 0o600); err != nil {
			t.Fatal(err)
		}
		link := filepath.Join(dir, "link")
		if err := os.Symlink(target, link); err != nil {
			t.Fatal(err)
		}
		h := harness{env: clientEnv(t, map[string]clientconfig.Context{"main": keyContext(srv.URL)})}
		if code := h.run(t, "files", "get", "agt_x", "SOUL.md", "-o", link); code == 0 {
			t.Fatal("files get -o onto a symbolic link exited 0")
		}
		if !strings.Contains(h.stder.String(), "is not a regular file") {
			t.Errorf("stderr %q does not say why", h.stder.String())
		}
		if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
			t.Errorf("the link was replaced: %v, %v", fi, err)
		}
		if b, _ := os.ReadFile(target); string(b) != "kept" {
			t.Errorf("the link's target holds %q, want it unchanged", b)
		}
	})
}

// TestWaitServerSilent: under --wait, a poll the server does not answer
// ends after the request timeout (not after --timeout) with exit 7 and a
// message that blames the server's silence, never a deployment or
// reconciliation that "did not finish".
func TestWaitServerSilent(t *testing.T) {
	var polls atomic.Int32
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		_, _ = io.Copy(io.Discard, r.Body)
		switch {
		case r.Method == http.MethodPost && r.URL.Path == "/namespaces/ns_x/agents/agt_x/deploy":
			envelope(w, 200, `{"data":{"id":"rev_1","agentId":"agt_x","number":1}}`)
		case r.Method == http.MethodPost && r.URL.Path == "/namespaces/ns_x/reconcile":
			envelope(w, 200, `{"data":{"id":"rec_1","namespaceId":"ns_x","status":"queued"}}`)
		case r.Method == http.MethodGet && polls.Add(1) == 1: // the first poll answers, "running"
			if strings.Contains(r.URL.Path, "/reconciliations/") {
				envelope(w, 200, `{"data":{"id":"rec_1","namespaceId":"ns_x","status":"running"}}`)
			} else {
				envelope(w, 200, `{"data":{"id":"rev_1","status":"running"}}`)
			}
		default: // every later one hangs
			<-r.Context().Done()
		}
	}))
	defer srv.Close()
	type result struct {
		Exit                   int
		BlamesServer, Finished bool
	}
	tests := []struct {
		name string
		args []string
	}{
		{"agent deploy", []string{"agent", "deploy", "agt_x", "--wait", "--timeout", "20s", "--interval", "100ms"}},
		{"namespace reconcile", []string{"namespace", "reconcile", "ns_x", "--wait", "--timeout", "20s", "--interval", "100ms"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			polls.Store(0)
			h := harness{env: clientEnv(t, map[string]clientconfig.Context{"main": keyContext(srv.URL)}),
				requestTimeout: 300 * time.Millisecond}
			got := result{Exit: h.run(t, tc.args...)}
			got.BlamesServer = strings.Contains(h.stder.String(), "the server did not answer a poll of")
			got.Finished = strings.Contains(h.stder.String(), "did not finish")
			if diff := cmp.Diff(result{Exit: exitUnreachable, BlamesServer: true}, got); diff != "" {
				t.Errorf("occ %q (-want +got):\n%s\nstderr: %s", tc.args, diff, h.stder.String())
			}
		})
	}
}
