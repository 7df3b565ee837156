package clie2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/testutil"
)

// TestListGolden: every list command in each output format, against a
// server with one of everything (the "none" Compute driver: a deployment
// fails, which deploy --wait reports with exit 1).
func TestListGolden(t *testing.T) {
	s := startServer(t, "none")
	u := newUser(t)
	u.loginAdmin(s, "--name", "admin", "--namespace", "team-a")
	u.must("", "namespace", "create", "team-a")
	testutil.Eventually(t, 30*time.Second, func() bool {
		var ns struct{ Status string }
		r := u.must("", "namespace", "get", "team-a", "--output", "json")
		return json.Unmarshal([]byte(r.Stdout), &ns) == nil && ns.Status == "ready"
	}, "Namespace team-a to be ready")

	cfgFile := filepath.Join(u.home, "openclaw.json")
	if err := os.WriteFile(cfgFile, []byte(`{"agents":{"defaults":{}}}`), 0o600); err != nil {
		t.Fatal(err)
	}
	u.must("", "configuration", "create", "base", "-f", cfgFile)
	persona := filepath.Join(u.home, "persona")
	if err := os.MkdirAll(persona, 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(persona, "SOUL.md"), []byte("Be brief.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	u.must("", "agent", "create", "helper", "--configuration", "base", "--files", persona)
	r := u.run("", "agent", "deploy", "helper", "--wait", "--interval", "200ms", "--timeout", "2m")
	// The creation line always says queued; a progress line with the
	// deployment still queued appears only when a poll wins the race with
	// the worker, so the test does not ask for one.
	if r.Code != 1 || !strings.Contains(r.Stderr, ": failed: ") || !strings.Contains(r.Stderr, "(revision 1) queued") {
		t.Errorf("deploy --wait on the none driver: %s; want exit 1 with the progress and the error", r)
	}
	u.must("", "service-principal", "create", "deployer")
	u.must("", "role", "create", "reader", "--permission", "read:agent", "--permission", "read:agent_revision")

	// The key: once, on standard output only, and nowhere after.
	sa := strings.Fields(strings.Split(u.must("", "service-principal", "list").Stdout, "\n")[1])[0]
	k := u.must("", "key", "create", "--service-principal", sa, "--name", "ci")
	key := strings.TrimSpace(k.Stdout)
	if !strings.HasPrefix(key, "occk_") || strings.Count(k.Stdout, "\n") != 1 || strings.Contains(k.Stderr, key) {
		t.Errorf("key create: %s; want the key alone on stdout", k)
	}
	u.must("", "binding", "create", "--subject", sa, "--role", "reader", "--namespace", "team-a")
	u.must("", "restriction", "create", "--subject", sa, "--action", "delete", "--resource-kind", "agent", "--namespace", "team-a")

	lists := []struct {
		name string
		args []string
	}{
		{"context", []string{"context", "list"}},
		{"namespace", []string{"namespace", "list"}},
		{"configuration", []string{"configuration", "list"}},
		{"agent", []string{"agent", "list"}},
		{"revisions", []string{"agent", "revisions", "helper"}},
		{"deployments", []string{"agent", "deployments", "helper"}},
		{"service-principal", []string{"service-principal", "list"}},
		{"role", []string{"role", "list"}},
		{"binding", []string{"binding", "list"}},
		{"restriction", []string{"restriction", "list"}},
		{"session", []string{"session", "list"}},
		{"audit", []string{"audit", "list", "--kind", "mutation", "--outcome", "success", "--resource-kind", "agent"}},
	}
	var all strings.Builder
	for _, l := range lists {
		for _, format := range []string{"table", "json", "yaml"} {
			t.Run(l.name+"-"+format, func(t *testing.T) {
				u.t = t
				r := u.must("", append(l.args, "--output", format)...)
				golden(t, l.name+"."+format, r.Stdout)
				all.WriteString(r.Stdout + r.Stderr)
			})
		}
	}
	u.t = t
	if strings.Contains(all.String(), key) {
		t.Errorf("a list printed the key again")
	}

	// The revisions and IAM lists page like the others: --limit 1 prints
	// one item and, with more to come, the next page's cursor on standard
	// error; following it reaches the last page, which has none.
	u.must("", "role", "create", "writer", "--permission", "update:agent")
	for _, args := range [][]string{{"role", "list"}, {"agent", "revisions", "helper"}} {
		r := u.must("", append(args, "--limit", "1", "--output", "json")...)
		var page struct {
			Items      []json.RawMessage `json:"items"`
			NextCursor string            `json:"nextCursor"`
		}
		if err := json.Unmarshal([]byte(r.Stdout), &page); err != nil || len(page.Items) != 1 {
			t.Fatalf("%v --limit 1: %s; want one item (%v)", args, r, err)
		}
		for range 10 {
			if page.NextCursor == "" {
				break
			}
			r = u.must("", append(args, "--limit", "1", "--cursor", page.NextCursor, "--output", "json")...)
			page.NextCursor = ""
			if err := json.Unmarshal([]byte(r.Stdout), &page); err != nil || len(page.Items) > 1 {
				t.Fatalf("%v --cursor: %s; want at most one item (%v)", args, r, err)
			}
		}
		if page.NextCursor != "" {
			t.Errorf("%v: more than 10 pages of one", args)
		}
		if r := u.run("", append(args, "--limit", "501")...); r.Code == 0 {
			t.Errorf("%v --limit 501: %s; want a usage error", args, r)
		}
	}
}
