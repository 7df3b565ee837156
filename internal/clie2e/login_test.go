package clie2e_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/testutil"
)

// serviceKey creates a service principal and a key for it with the
// administrator's session, through the Go client, and returns the key.
func serviceKey(t *testing.T, s *server) apitypes.ServiceKey {
	t.Helper()
	ctx := testutil.Context(t)
	c, err := client.New(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.SignIn(ctx, adminEmail, s.Password); err != nil {
		t.Fatal(err)
	}
	sa, err := c.CreateServicePrincipal(ctx, apitypes.CreateServicePrincipalRequest{Name: "robot"})
	if err != nil {
		t.Fatal(err)
	}
	k, err := c.CreateServiceKey(ctx, apitypes.CreateServiceKeyRequest{ServicePrincipalID: sa.ID, Name: "ci"})
	if err != nil {
		t.Fatal(err)
	}
	return k
}

// TestLogin: password and key logins, the saved file's modes, contexts,
// and that no secret reaches the output.
func TestLogin(t *testing.T) {
	s := startServer(t, "none")
	u := newUser(t)

	r := u.must(s.Password+"\n", "login", s.URL, "--email", adminEmail, "--password-stdin")
	if r.Stdout != "" || !strings.Contains(r.Stderr, "Logged in to "+s.URL+" as "+adminEmail) {
		t.Errorf("login output: %s", r)
	}
	dir := filepath.Join(u.config, "occ")
	for path, mode := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, "config.json"): 0o600} {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, %v; want %04o", path, st.Mode().Perm(), err, mode)
		}
	}
	if strings.Contains(r.Stdout+r.Stderr, s.Password) {
		t.Errorf("login printed the password: %s", r)
	}
	u.must("", "namespace", "create", "team-a")

	// A key from a file, as a second context with a default Namespace.
	k := serviceKey(t, s)
	keyFile := filepath.Join(u.home, "key")
	if err := os.WriteFile(keyFile, []byte(k.Key+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = u.must("", "login", s.URL, "--api-key-file", keyFile, "--name", "ci", "--namespace", "team-a")
	if strings.Contains(r.Stdout+r.Stderr, k.Key) {
		t.Errorf("key login printed the key: %s", r)
	}
	r = u.must("", "context", "list")
	golden(t, "context-login.table", r.Stdout)
	cfg, err := os.ReadFile(filepath.Join(dir, "config.json"))
	if err != nil || !strings.Contains(string(cfg), k.Key) {
		t.Errorf("the key is not in the saved configuration: %v", err)
	}
	// The key's principal holds no grant: it is authenticated, sees nothing.
	r = u.must("", "namespace", "list", "--output", "json")
	if diff := cmp.Diff("{\n  \"items\": []\n}\n", r.Stdout); diff != "" {
		t.Errorf("namespace list with the key (-want +got):\n%s", diff)
	}
	u.must("", "context", "use", s.URL[len("http://"):])
	if r := u.must("", "namespace", "list"); !strings.Contains(r.Stdout, "team-a") {
		t.Errorf("namespace list as the administrator: %s", r)
	}

	// Logout forgets the context; the next command says to log in.
	u.must("", "logout")
	r = u.run("", "namespace", "list")
	if r.Code != 4 || !strings.Contains(r.Stderr, "not logged in") {
		t.Errorf("after logout: %s; want exit 4, not logged in", r)
	}
	if r := u.must("", "namespace", "list", "--context", "ci"); !strings.Contains(r.Stdout, "NAME") {
		t.Errorf("the other context: %s", r)
	}
}

// TestErrorClasses: each failure class has its own exit code and a
// message that says what happened, with the API's code and request id.
func TestErrorClasses(t *testing.T) {
	s := startServer(t, "none")
	admin := newUser(t)
	admin.loginAdmin(s, "--namespace", "team-a")
	admin.must("", "namespace", "create", "team-a")

	k := serviceKey(t, s)
	expired := newUser(t)
	keyFile := filepath.Join(expired.home, "key")
	if err := os.WriteFile(keyFile, []byte(k.Key), 0o600); err != nil {
		t.Fatal(err)
	}
	expired.must("", "login", s.URL, "--api-key-file", keyFile)
	s.expireKey(t, k.ID)

	tests := []struct {
		name     string
		u        *user
		stdin    string
		args     []string
		wantCode int
		want     []string // in standard error
	}{
		{"wrong password", newUser(t), "wrong\n", []string{"login", s.URL, "--email", adminEmail, "--password-stdin"}, 4,
			[]string{"UNAUTHENTICATED", "request req_"}},
		{"expired key", expired, "", []string{"namespace", "list"}, 4,
			[]string{"UNAUTHENTICATED", "request req_", "occ login"}},
		{"expired key at login", newUser(t), "", []string{"login", s.URL, "--api-key-file", keyFile}, 4,
			[]string{"UNAUTHENTICATED"}},
		{"unknown agent name", admin, "", []string{"agent", "get", "nobody"}, 3, []string{`no Agent named "nobody"`}},
		{"unknown namespace name", admin, "", []string{"agent", "list", "-n", "nowhere"}, 3, []string{`no Namespace named "nowhere"`}},
		{"unknown id", admin, "", []string{"namespace", "get", "ns_00000000-0000-4000-8000-000000000000"}, 3,
			[]string{"NOT_FOUND", "request req_"}},
		{"name taken", admin, "", []string{"namespace", "create", "team-a"}, 5, []string{"RESOURCE_CONFLICT"}},
		{"invalid name", admin, "", []string{"namespace", "create", "Not_A_Label"}, 2, []string{"INVALID_REQUEST", "/name"}},
		{"network refused", newUser(t), "pw\n", []string{"login", "http://127.0.0.1:" + itoa(freePort(t)), "--email", adminEmail,
			"--password-stdin"}, 7, []string{"cannot reach the server", "connection refused"}},
		{"not logged in", newUser(t), "", []string{"agent", "list"}, 4, []string{"not logged in"}},
		{"bad output format", admin, "", []string{"namespace", "list", "--output", "xml"}, 2, []string{"--output must be one of"}},
		{"unknown flag", admin, "", []string{"namespace", "list", "--bogus"}, 2, []string{"unknown flag"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tt.u.t = t
			r := tt.u.run(tt.stdin, tt.args...)
			if r.Code != tt.wantCode {
				t.Errorf("occ %v: exit %d; want %d\n%s", tt.args, r.Code, tt.wantCode, r)
			}
			for _, w := range tt.want {
				if !strings.Contains(r.Stderr, w) {
					t.Errorf("occ %v: stderr lacks %q\n%s", tt.args, w, r)
				}
			}
			if r.Stdout != "" {
				t.Errorf("occ %v: printed to stdout on failure:\n%s", tt.args, r)
			}
			if strings.Contains(r.Stderr, s.Password) || strings.Contains(r.Stderr, k.Key) {
				t.Errorf("occ %v: a secret in the output", tt.args)
			}
		})
	}
}
