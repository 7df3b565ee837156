package agentgw_test

// Tests of the routed transport: the client → gwtest.Proxy (playing the
// Envoy route) → the real gateway in trusted-proxy mode.

import (
	"errors"
	"net/http"
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

func TestRoutedSetGetAllNames(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TrustedProxyMode)
	p := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: g.HTTPURL})
	c := agentgw.New(agentgw.Options{})
	target := p.Target(t)
	for _, name := range workspace.Names {
		t.Run(name, func(t *testing.T) {
			preserve(t, g.Workspace, name)
			content := "# " + name + "\nrouted ✓\n"
			got, err := c.Set(testCtx(t), target, name, content, "")
			if err != nil {
				t.Fatalf("Set: %v", err)
			}
			if diff := cmp.Diff(fileOf(name, content), got); diff != "" {
				t.Errorf("Set (-want +got):\n%s", diff)
			}
			got, err = c.Get(testCtx(t), target, name)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			if diff := cmp.Diff(fileOf(name, content), got); diff != "" {
				t.Errorf("Get (-want +got):\n%s", diff)
			}
			_, err = c.Set(testCtx(t), target, name, "stale\n", sha("not the content"))
			if diff := cmp.Diff(outcome{Kind: agentgw.Conflict, Reason: "conflict", CurrentHash: sha(content)}, outcomeOf(err)); diff != "" {
				t.Errorf("Set with a stale hash (-want +got):\n%s", diff)
			}
		})
	}
	if h := p.LastUpstreamHeader(); h.Get(agentgw.HeaderAPIKey) != "" {
		t.Errorf("the proxy forwarded x-api-key upstream")
	}
}

// TestRoutedScopeReadOnly: an identity the gateway grants only
// operator.read can read but the client refuses to write with it, before
// sending the set.
func TestRoutedScopeReadOnly(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TrustedProxyMode)
	p := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: g.HTTPURL, Identity: gwtest.ReadOnlyIdentity})
	c := agentgw.New(agentgw.Options{})
	target := p.Target(t)
	name := workspace.AgentsMD
	preserve(t, g.Workspace, name)
	if err := os.WriteFile(filepath.Join(g.Workspace, name), []byte("readable\n"), 0o644); err != nil {
		t.Fatal(err)
	}

	got, err := c.Get(testCtx(t), target, name)
	if err != nil {
		t.Fatalf("Get with operator.read: %v", err)
	}
	if diff := cmp.Diff(fileOf(name, "readable\n"), got); diff != "" {
		t.Errorf("Get (-want +got):\n%s", diff)
	}
	_, err = c.Set(testCtx(t), target, name, "written\n", "")
	if diff := cmp.Diff(unavailable("scope"), outcomeOf(err)); diff != "" {
		t.Errorf("Set with operator.read (-want +got):\n%s", diff)
	}
	if disk, _ := onDisk(t, g.Workspace, name); disk != "readable\n" {
		t.Errorf("file changed to %q", disk)
	}
}

func TestRoutedKeyRefusedByProxy(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TrustedProxyMode)
	p := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: g.HTTPURL})
	c := agentgw.New(agentgw.Options{})
	target := p.Target(t)
	wrong := strings.Repeat("f", 64)
	target.KeyFile = gwtest.WriteFile(t, "wrong-key", []byte(wrong))

	for _, set := range []bool{false, true} {
		var err error
		if set {
			_, err = c.Set(testCtx(t), target, workspace.SoulMD, "x", "")
		} else {
			_, err = c.Get(testCtx(t), target, workspace.SoulMD)
		}
		if diff := cmp.Diff(unavailable("upgrade_refused"), outcomeOf(err)); diff != "" {
			t.Errorf("set=%v with a wrong key (-want +got):\n%s", set, diff)
		}
		noSecret(t, err, wrong, p.Key())
	}
	if n := p.Forwarded(); n != 0 {
		t.Errorf("proxy forwarded %d requests with a wrong key", n)
	}

	// No key at all (the client never does this; a bare dial does).
	_, err := gwtest.DialNative(testCtx(t), p.RouteURL(), gwtest.NativeOptions{TLS: p.TLSConfig()})
	var ue *gwtest.UpgradeError
	if !errors.As(err, &ue) || ue.Status != http.StatusUnauthorized {
		t.Errorf("dial without x-api-key: %v, want HTTP 401", err)
	}

	// Another Agent's path on the same host is not this route.
	other := p.Target(t)
	other.URL = strings.Replace(other.URL, "/agents/agent-test", "/agents/other", 1)
	_, err = c.Get(testCtx(t), other, workspace.SoulMD)
	if diff := cmp.Diff(unavailable("upgrade_refused"), outcomeOf(err)); diff != "" {
		t.Errorf("Get on another route (-want +got):\n%s", diff)
	}
	if n := p.Forwarded(); n != 0 {
		t.Errorf("proxy forwarded %d refused requests", n)
	}
}

// TestRoutedSpoofedHeadersOverwritten: whatever identity, scope cap or
// client address a caller claims, the route replaces or strips it.
func TestRoutedSpoofedHeadersOverwritten(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TrustedProxyMode)
	p := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: g.HTTPURL, Identity: gwtest.ReadOnlyIdentity})
	h := http.Header{}
	h.Set(agentgw.HeaderAPIKey, p.Key())
	h.Set(gwtest.IdentityHeader, gwtest.Identity) // the admin identity
	h.Set("x-forwarded-for", "192.0.2.99")
	h.Set("x-real-ip", "192.0.2.99")
	h.Set("x-openclaw-scopes", "operator.admin")
	n, err := gwtest.DialNative(testCtx(t), p.RouteURL(), gwtest.NativeOptions{Header: h, TLS: p.TLSConfig(), Scopes: []string{}})
	if err != nil {
		t.Fatal(err)
	}
	defer n.Close()
	if !n.Hello.OK {
		t.Fatalf("connect refused: %v", n.Hello.Error)
	}
	// The route's identity (read-only) counts, not the claimed admin one.
	if diff := cmp.Diff([]string{"operator.read"}, n.Hello.Scopes()); diff != "" {
		t.Errorf("granted scopes (-want +got):\n%s", diff)
	}
	up := p.LastUpstreamHeader()
	for name, want := range map[string]string{
		gwtest.IdentityHeader: gwtest.ReadOnlyIdentity,
		"X-Real-Ip":           gwtest.RealIP,
		"X-Forwarded-For":     "",
		"X-Openclaw-Scopes":   "",
		agentgw.HeaderAPIKey:  "",
	} {
		if got := up.Get(name); got != want {
			t.Errorf("upstream %s = %q, want %q", name, got, want)
		}
	}
}

// TestRoutedMisconfiguredProxy: a route that passes x-occ-identity through
// instead of setting it. The gateway still refuses identities it does not
// allow and requests without one; the client fails cleanly.
func TestRoutedMisconfiguredProxy(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TrustedProxyMode)
	p := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: g.HTTPURL, PassIdentity: true})
	c := agentgw.New(agentgw.Options{})

	for _, identity := range []string{"mallory", ""} {
		h := http.Header{}
		h.Set(agentgw.HeaderAPIKey, p.Key())
		if identity != "" {
			h.Set(gwtest.IdentityHeader, identity)
		}
		n, err := gwtest.DialNative(testCtx(t), p.RouteURL(), gwtest.NativeOptions{Header: h, TLS: p.TLSConfig(), Scopes: []string{}})
		if err != nil {
			t.Fatalf("identity %q: %v", identity, err)
		}
		n.Close()
		if n.Hello.OK || n.Hello.Error == nil || n.Hello.Error.Code != "NOT_PAIRED" {
			t.Errorf("identity %q: hello %+v, want NOT_PAIRED", identity, n.Hello)
		}
	}
	// The client sends no identity; through this route it gets none.
	_, err := c.Get(testCtx(t), p.Target(t), workspace.AgentsMD)
	if diff := cmp.Diff(unavailable("connect_refused"), outcomeOf(err)); diff != "" {
		t.Errorf("Get through a pass-through route (-want +got):\n%s", diff)
	}
}

// TestRoutedKeyRotation: the key file is read on every operation, so a
// rotation takes effect on the next one without restarting anything.
func TestRoutedKeyRotation(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TrustedProxyMode)
	p := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: g.HTTPURL})
	c := agentgw.New(agentgw.Options{})
	target := p.Target(t)
	oldKey, newKey := p.Key(), strings.Repeat("ab", 32)

	if _, err := c.Get(testCtx(t), target, workspace.SoulMD); err != nil {
		t.Fatalf("Get with the original key: %v", err)
	}
	p.SetKey(newKey) // the route now accepts only the new key
	_, err := c.Get(testCtx(t), target, workspace.SoulMD)
	if diff := cmp.Diff(unavailable("upgrade_refused"), outcomeOf(err)); diff != "" {
		t.Errorf("Get with the old key file (-want +got):\n%s", diff)
	}
	gwtest.ReplaceFile(t, target.KeyFile, []byte(newKey))
	if _, err := c.Get(testCtx(t), target, workspace.SoulMD); err != nil {
		t.Errorf("Get after the key file was replaced: %v", err)
	}
	noSecret(t, err, oldKey, newKey)
}

// TestRoutedKeyFileRules: every violation is refused before dialing (the
// proxy sees nothing).
func TestRoutedKeyFileRules(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TrustedProxyMode)
	p := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: g.HTTPURL})
	c := agentgw.New(agentgw.Options{})
	key := p.Key()
	dir := t.TempDir()
	write := func(name, content string) string {
		path := filepath.Join(dir, name)
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return path
	}
	write("good", key) // the target of "relative path"
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	fifoLink := filepath.Join(dir, "fifo-link")
	if err := os.Symlink(fifo, fifoLink); err != nil {
		t.Fatal(err)
	}
	// A symlink to a good key is how Kubernetes mounts a Secret item: it
	// is followed (TestRoutedKeyFromSecretMount); the resolved file must
	// still pass every rule, as "symlink to a FIFO" shows.
	tests := []struct {
		name, path string
	}{
		{"none", ""},
		{"relative path", "good"},
		{"symlink to a FIFO", fifoLink},
		{"FIFO", fifo},
		{"directory", dir},
		{"missing", filepath.Join(dir, "nope")},
		{"empty", write("empty", "")},
		{"4097 bytes", write("big", key+strings.Repeat("k", secretfile.MaxSecretBytes+1-len(key)))},
		{"trailing newline", write("nl", key+"\n")},
		{"CRLF", write("crlf", key+"\r\n")},
		{"space", write("space", key[:8]+" "+key[8:])},
		{"leading space", write("lead", " "+key)},
		{"tab", write("tab", key+"\t")},
		{"DEL", write("del", key+"\x7f")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := p.Target(t)
			target.KeyFile = tt.path
			_, err := c.Set(testCtx(t), target, workspace.SoulMD, "x", "")
			if diff := cmp.Diff(unavailable("credential"), outcomeOf(err)); diff != "" {
				t.Errorf("Set (-want +got):\n%s", diff)
			}
			noSecret(t, err, key)
		})
	}
	if n := p.Forwarded() + p.Refused(); n != 0 {
		t.Errorf("the proxy saw %d requests; key file violations must be refused before dialing", n)
	}
}

func TestRoutedTLS(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TrustedProxyMode)
	p := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: g.HTTPURL})
	byName := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: g.HTTPURL, CertHosts: []string{"occ-gateway.example"}})
	c := agentgw.New(agentgw.Options{})
	other, err := gwtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	tests := []struct {
		name   string
		proxy  *gwtest.Proxy
		caFile string // "-" keeps the proxy's CA
		want   outcome
	}{
		{"proxy CA", p, "-", outcome{}},
		{"another CA", p, gwtest.WriteFile(t, "other.pem", other.PEM), unavailable("tls")},
		{"system roots only", p, "", unavailable("tls")},
		{"name not in the certificate", byName, "-", unavailable("tls")},
		{"CA file missing", p, filepath.Join(dir, "nope.pem"), unavailable("ca")},
		{"CA file relative", p, "ca.pem", unavailable("ca")},
		{"CA file without PEM", p, gwtest.WriteFile(t, "junk.pem", []byte("not a certificate")), unavailable("ca")},
		{"CA file over 1 MiB", p, gwtest.WriteFile(t, "huge.pem", make([]byte, secretfile.MaxCABytes+1)), unavailable("ca")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			target := tt.proxy.Target(t)
			if tt.caFile != "-" {
				target.CAFile = tt.caFile
			}
			_, err := c.Get(testCtx(t), target, workspace.SoulMD)
			if diff := cmp.Diff(tt.want, outcomeOf(err)); diff != "" {
				t.Errorf("Get (-want +got):\n%s", diff)
			}
		})
	}
	// Only the successful case reached the gateway.
	if n := p.Forwarded() + byName.Forwarded(); n != 1 {
		t.Errorf("proxies forwarded %d requests, want 1", n)
	}

	// The CA file is read per operation too: symlinked (as a mounted
	// Secret item is) and replaced in place.
	target := p.Target(t)
	link := filepath.Join(dir, "ca-link.pem")
	if err := os.Symlink(target.CAFile, link); err != nil {
		t.Fatal(err)
	}
	target.CAFile = link
	if _, err := c.Get(testCtx(t), target, workspace.SoulMD); err != nil {
		t.Errorf("Get with a symlinked CA file: %v", err)
	}
}

func TestRoutedURLRules(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TrustedProxyMode)
	p := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: g.HTTPURL})
	c := agentgw.New(agentgw.Options{})
	route := p.RouteURL()
	tests := []string{
		strings.Replace(route, "wss://", "ws://", 1),
		strings.Replace(route, "wss://", "https://", 1),
		strings.Replace(route, "wss://", "wss://occ:hunter2@", 1),
		route + "?x=1",
		route + "?",
		route + "#frag",
		"wss:///namespaces/ns-test/agents/agent-test",
		"wss://127.0.0.1:99999/namespaces/ns-test/agents/agent-test",
	}
	for _, u := range tests {
		t.Run(u, func(t *testing.T) {
			target := p.Target(t)
			target.URL = u
			_, err := c.Get(testCtx(t), target, workspace.SoulMD)
			if diff := cmp.Diff(unavailable("invalid_target"), outcomeOf(err)); diff != "" {
				t.Errorf("Get(%s) (-want +got):\n%s", u, diff)
			}
			noSecret(t, err, "hunter2")
		})
	}
	if n := p.Forwarded() + p.Refused(); n != 0 {
		t.Errorf("the proxy saw %d requests", n)
	}
}

// TestRoutedKeyFromSecretMount reads the key the way a Kubernetes Secret
// volume presents it, key -> ..data/key with ..data -> a timestamped dir,
// and rotates it by swapping ..data atomically, as the kubelet does.
func TestRoutedKeyFromSecretMount(t *testing.T) {
	g := gwtest.Shared(t, gwtest.TrustedProxyMode)
	p := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: g.HTTPURL})
	c := agentgw.New(agentgw.Options{})
	mount := t.TempDir()
	publish := func(gen, key string) {
		d := filepath.Join(mount, gen)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(filepath.Join(d, "key"), []byte(key), 0o600); err != nil {
			t.Fatal(err)
		}
		tmp := filepath.Join(mount, "..data_tmp")
		if err := os.Symlink(gen, tmp); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(mount, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	publish("..2026_11_29_1", p.Key())
	if err := os.Symlink(filepath.Join("..data", "key"), filepath.Join(mount, "key")); err != nil {
		t.Fatal(err)
	}
	target := p.Target(t)
	target.KeyFile = filepath.Join(mount, "key")
	if _, err := c.Get(testCtx(t), target, workspace.SoulMD); err != nil {
		t.Fatalf("Get with a Secret-mounted key: %v", err)
	}
	newKey := strings.Repeat("r", 64)
	p.SetKey(newKey)
	publish("..2026_11_29_2", newKey)
	if _, err := c.Get(testCtx(t), target, workspace.SoulMD); err != nil {
		t.Fatalf("Get after rotating the mounted key: %v", err)
	}
}
