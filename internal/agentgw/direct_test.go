package agentgw_test

// Tests of the direct transport against the real gateway (token mode),
// shared by the package through gwtest.Shared.

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/secretfile"
	"github.com/openclaw/occ/internal/workspace"
)

// The files `openclaw setup --baseline` seeds in 2026.9.6
// (openclaw-gateway.md section 8): byte-identical on every run.
var baselineHashes = map[string]string{
	workspace.AgentsMD:   "1e17784e422c0e47e44c5214d0b37092f7b378bb2d3746976032be3075203c88",
	workspace.SoulMD:     "4f9042f259b076e429d0f01ce39340030f47ea5b7f5befe306296c36baf1f60f",
	workspace.IdentityMD: "59b223766c8dd978162044e333a684c72e22af753d1ba3dc3bff4b2d915c54e2",
	workspace.UserMD:     "46e0d8c937df7b104de97a23c58537292672654194879ca9f76b02075e022555",
}

func TestDirectGetBaseline(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TokenMode)
	c := agentgw.New(agentgw.Options{})
	for _, name := range workspace.Names {
		t.Run(name, func(t *testing.T) {
			got, err := c.Get(testCtx(t), g.DirectTarget(), name)
			if err != nil {
				t.Fatalf("Get(%s): %v", name, err)
			}
			want, _ := onDisk(t, g.Workspace, name)
			if diff := cmp.Diff(fileOf(name, want), got); diff != "" {
				t.Errorf("Get(%s) (-want +got):\n%s", name, diff)
			}
			if got.Hash != baselineHashes[name] {
				t.Errorf("Get(%s).Hash = %s, want the baseline %s (another test did not restore it?)", name, got.Hash, baselineHashes[name])
			}
		})
	}
}

func TestDirectSetGetAllNames(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TokenMode)
	c := agentgw.New(agentgw.Options{})
	for _, name := range workspace.Names {
		t.Run(name, func(t *testing.T) {
			preserve(t, g.Workspace, name)
			content := fmt.Sprintf("# %s\n\nWritten by TestDirectSetGetAllNames: ünïcødé ✓ 🦀 <&>\n", name)
			got, err := c.Set(testCtx(t), g.DirectTarget(), name, content, "")
			if err != nil {
				t.Fatalf("Set(%s): %v", name, err)
			}
			if diff := cmp.Diff(fileOf(name, content), got); diff != "" {
				t.Errorf("Set(%s) (-want +got):\n%s", name, diff)
			}
			got, err = c.Get(testCtx(t), g.DirectTarget(), name)
			if err != nil {
				t.Fatalf("Get(%s): %v", name, err)
			}
			if diff := cmp.Diff(fileOf(name, content), got); diff != "" {
				t.Errorf("Get(%s) after Set (-want +got):\n%s", name, diff)
			}
			if disk, _ := onDisk(t, g.Workspace, name); disk != content {
				t.Errorf("%s on disk = %q, want %q", name, disk, content)
			}
		})
	}
}

func TestDirectMissingFile(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TokenMode)
	c := agentgw.New(agentgw.Options{})
	name := workspace.UserMD
	preserve(t, g.Workspace, name)
	if err := os.Remove(filepath.Join(g.Workspace, name)); err != nil {
		t.Fatal(err)
	}

	got, err := c.Get(testCtx(t), g.DirectTarget(), name)
	if err != nil {
		t.Fatalf("Get(missing): %v", err)
	}
	if diff := cmp.Diff(agentgw.File{Name: name, Missing: true}, got); diff != "" {
		t.Errorf("Get(missing) (-want +got):\n%s", diff)
	}

	// There is no "expect absent": any expected hash conflicts with a
	// missing file, and the conflict carries no current hash.
	_, err = c.Set(testCtx(t), g.DirectTarget(), name, "new", sha("anything"))
	if diff := cmp.Diff(outcome{Kind: agentgw.Conflict, Reason: "conflict"}, outcomeOf(err)); diff != "" {
		t.Errorf("Set(missing, expectedHash) (-want +got):\n%s", diff)
	}
	if _, exists := onDisk(t, g.Workspace, name); exists {
		t.Errorf("a conflicting Set created %s", name)
	}

	// Without an expected hash the write creates the file.
	if _, err := c.Set(testCtx(t), g.DirectTarget(), name, "created\n", ""); err != nil {
		t.Fatalf("Set(missing): %v", err)
	}
	if disk, _ := onDisk(t, g.Workspace, name); disk != "created\n" {
		t.Errorf("%s on disk = %q after create", name, disk)
	}
}

func TestDirectContentLimits(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TokenMode)
	c := agentgw.New(agentgw.Options{})
	name := workspace.SoulMD
	tests := []struct {
		name    string
		content string
		want    outcome
	}{
		{"16384 ASCII bytes", strings.Repeat("a", workspace.MaxFileBytes), outcome{}},
		{"16384 bytes of 4-byte runes", strings.Repeat("🦀", workspace.MaxFileBytes/4), outcome{}},
		{"empty", "", outcome{}},
		{"16385 bytes", strings.Repeat("a", workspace.MaxFileBytes+1), unavailable("invalid_content")},
		{"NUL", "before\x00after", unavailable("invalid_content")},
		{"invalid UTF-8", "bad \xff byte", unavailable("invalid_content")},
		{"encoded surrogate", "\xed\xa0\x80", unavailable("invalid_content")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			preserve(t, g.Workspace, name)
			before, _ := onDisk(t, g.Workspace, name)
			got, err := c.Set(testCtx(t), g.DirectTarget(), name, tt.content, "")
			if diff := cmp.Diff(tt.want, outcomeOf(err)); diff != "" {
				t.Fatalf("Set (-want +got):\n%s", diff)
			}
			noSecret(t, err, tt.content)
			disk, _ := onDisk(t, g.Workspace, name)
			if err != nil {
				if disk != before {
					t.Errorf("a refused Set changed the file")
				}
				return
			}
			if diff := cmp.Diff(fileOf(name, tt.content), got); diff != "" {
				t.Errorf("Set (-want +got):\n%s", diff)
			}
			if disk != tt.content {
				t.Errorf("file on disk (%d bytes) differs from the content (%d bytes)", len(disk), len(tt.content))
			}
			read, err := c.Get(testCtx(t), g.DirectTarget(), name)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if diff := cmp.Diff(fileOf(name, tt.content), read); diff != "" {
				t.Errorf("Get after Set (-want +got):\n%s", diff)
			}
		})
	}
}

func TestDirectCompareAndSwap(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TokenMode)
	c := agentgw.New(agentgw.Options{})
	target := g.DirectTarget()
	name := workspace.IdentityMD
	preserve(t, g.Workspace, name)

	v1, err := c.Set(testCtx(t), target, name, "v1\n", "")
	if err != nil {
		t.Fatal(err)
	}
	v2, err := c.Set(testCtx(t), target, name, "v2\n", v1.Hash)
	if err != nil {
		t.Fatalf("Set with the current hash: %v", err)
	}
	if diff := cmp.Diff(fileOf(name, "v2\n"), v2); diff != "" {
		t.Errorf("Set with the current hash (-want +got):\n%s", diff)
	}

	// A stale hash: refused, with the hash the file has now.
	_, err = c.Set(testCtx(t), target, name, "v3\n", v1.Hash)
	if diff := cmp.Diff(outcome{Kind: agentgw.Conflict, Reason: "conflict", CurrentHash: v2.Hash}, outcomeOf(err)); diff != "" {
		t.Errorf("Set with a stale hash (-want +got):\n%s", diff)
	}
	if disk, _ := onDisk(t, g.Workspace, name); disk != "v2\n" {
		t.Errorf("a conflicting Set changed the file to %q", disk)
	}

	// Hex case does not matter (the gateway compares case-insensitively).
	if _, err := c.Set(testCtx(t), target, name, "v4\n", strings.ToUpper(v2.Hash)); err != nil {
		t.Errorf("Set with an upper-case current hash: %v", err)
	}
}

func TestDirectWrongToken(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TokenMode)
	c := agentgw.New(agentgw.Options{})
	wrong := strings.Repeat("0", 64)
	target := agentgw.Target{Transport: agentgw.Direct, URL: g.URL, TokenFile: gwtest.WriteFile(t, "token", []byte(wrong))}

	_, err := c.Get(testCtx(t), target, workspace.AgentsMD)
	if diff := cmp.Diff(unavailable("connect_refused"), outcomeOf(err)); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	var ge *agentgw.GatewayError
	if !errors.As(err, &ge) || ge.DetailCode != "AUTH_TOKEN_MISMATCH" {
		t.Errorf("Get error = %v, want the gateway's AUTH_TOKEN_MISMATCH", err)
	}
	_, err = c.Set(testCtx(t), target, workspace.AgentsMD, "x", "")
	if diff := cmp.Diff(unavailable("connect_refused"), outcomeOf(err)); diff != "" {
		t.Errorf("Set (-want +got):\n%s", diff)
	}
	noSecret(t, err, wrong, g.Token)
}

// TestDirectTokenFileRules: the token file obeys the service key's rules
// and every violation is refused before dialing.
func TestDirectTokenFileRules(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TokenMode)
	c := agentgw.New(agentgw.Options{})
	dir := t.TempDir()
	good := filepath.Join(dir, "good")
	if err := os.WriteFile(good, []byte(g.Token), 0o600); err != nil {
		t.Fatal(err)
	}
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name, path string
		want       outcome
	}{
		{"64-hex token", good, outcome{}},
		{"none", "", unavailable("credential")},
		{"relative path", "good", unavailable("credential")},
		{"symlink to the good file", link, unavailable("credential")},
		{"directory", dir, unavailable("credential")},
		{"FIFO", fifo, unavailable("credential")},
		{"missing", filepath.Join(dir, "nope"), unavailable("credential")},
		{"empty", write("empty", ""), unavailable("credential")},
		{"trailing newline", write("nl", g.Token+"\n"), unavailable("credential")},
		{"space inside", write("space", g.Token[:10]+" "+g.Token[10:]), unavailable("credential")},
		{"4097 bytes", write("big", strings.Repeat("k", secretfile.MaxSecretBytes+1)), unavailable("credential")},
		{"non-ASCII", write("utf8", g.Token+"é"), unavailable("credential")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := agentgw.Target{Transport: agentgw.Direct, URL: g.URL, TokenFile: tt.path}
			_, err := c.Get(testCtx(t), target, workspace.AgentsMD)
			if diff := cmp.Diff(tt.want, outcomeOf(err)); diff != "" {
				t.Errorf("Get (-want +got):\n%s", diff)
			}
			noSecret(t, err, g.Token)
		})
	}
	// 4096 bytes is allowed (and then refused by the gateway as a wrong token).
	_, err := c.Get(testCtx(t), agentgw.Target{Transport: agentgw.Direct, URL: g.URL,
		TokenFile: write("max", strings.Repeat("k", secretfile.MaxSecretBytes))}, workspace.AgentsMD)
	if diff := cmp.Diff(unavailable("connect_refused"), outcomeOf(err)); diff != "" {
		t.Errorf("Get with a 4096-byte token (-want +got):\n%s", diff)
	}
}

// TestDirectURLRules: direct targets must be ws:// to a loopback IP literal.
func TestDirectURLRules(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TokenMode)
	c := agentgw.New(agentgw.Options{})
	port := fmt.Sprint(g.Port)
	tests := []struct {
		url  string
		want string // reason
	}{
		{"ws://127.0.0.1:" + port + "/", ""},
		{"ws://127.0.0.1:" + port, ""},
		{"ws://127.0.0.2:" + port + "/", "dial"}, // loopback, but nothing listens there
		{"wss://127.0.0.1:" + port + "/", "invalid_target"},
		{"http://127.0.0.1:" + port + "/", "invalid_target"},
		{"ws://localhost:" + port + "/", "invalid_target"},
		{"ws://10.1.2.3:" + port + "/", "invalid_target"},
		{"ws://192.0.2.10:" + port + "/", "invalid_target"},
		{"ws://[::ffff:127.0.0.1]:" + port + "/", "invalid_target"},
		{"ws://[fe80::1%25lo]:" + port + "/", "invalid_target"},
		{"ws://user:hunter2@127.0.0.1:" + port + "/", "invalid_target"},
		{"ws://127.0.0.1:" + port + "/?token=x", "invalid_target"},
		{"ws://127.0.0.1:" + port + "/#", "invalid_target"},
		{"ws://127.0.0.1:" + port + "/x", "invalid_target"},
		{"ws://127.0.0.1:0/", "invalid_target"},
		{"ws://127.0.0.1:70000/", "invalid_target"},
		{"ws:///", "invalid_target"},
		{"::", "invalid_target"},
	}
	for _, tt := range tests {
		t.Run(tt.url, func(t *testing.T) {
			target := agentgw.Target{Transport: agentgw.Direct, URL: tt.url, TokenFile: g.TokenFile}
			_, err := c.Get(testCtx(t), target, workspace.AgentsMD)
			got := outcomeOf(err)
			want := outcome{}
			if tt.want != "" {
				want = unavailable(tt.want)
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("Get(%s) (-want +got):\n%s", tt.url, diff)
			}
			noSecret(t, err, "hunter2", g.Token)
		})
	}
	_, err := c.Get(testCtx(t), agentgw.Target{URL: g.URL, TokenFile: g.TokenFile}, workspace.AgentsMD)
	if diff := cmp.Diff(unavailable("invalid_target"), outcomeOf(err)); diff != "" {
		t.Errorf("Get with no transport (-want +got):\n%s", diff)
	}
}
