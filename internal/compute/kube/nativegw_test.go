package kube

// The native configuration this driver renders, loaded into the real
// OpenClaw gateway behind gwtest.Proxy (which plays the HTTPRoute and the
// API-key SecurityPolicy), with the loopback adjustments of
// openclaw-gateway.md §4.2 / Appendix B. Needs the OpenClaw runtime
// (scripts/install-runtime.sh or OCC_OPENCLAW_RUNTIME); without it the
// test is skipped, or failed under CI=true.

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
)

// loopbackAdjust applies the adjustments a test on one machine needs to a
// rendered native configuration, and nothing else: Envoy's source CIDRs
// become 127.0.0.1 (the proxy connects from loopback), which the gateway
// accepts only with trustedProxy.allowLoopback; the listener binds
// loopback on a free port; the workspace moves to a temporary directory.
// Plugins are disabled and the file log moved, which starts the gateway
// faster and touches nothing of authentication.
func loopbackAdjust(t *testing.T, native []byte, port int, dir string) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(native, &doc); err != nil {
		t.Fatal(err)
	}
	gw := doc["gateway"].(map[string]any)
	gw["trustedProxies"] = []string{"127.0.0.1"}
	gw["bind"] = "loopback"
	gw["port"] = port
	gw["auth"].(map[string]any)["trustedProxy"].(map[string]any)["allowLoopback"] = true
	doc["agents"].(map[string]any)["defaults"].(map[string]any)["workspace"] = filepath.Join(dir, "workspace")
	doc["plugins"] = map[string]any{"enabled": false}
	doc["logging"] = map[string]any{"file": filepath.Join(dir, "openclaw-file.log")}
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// TestNativeConfigOnRealGateway renders a revision's ConfigMap, starts the
// real gateway with its openclaw.json (loopback-adjusted), puts the test
// proxy in front, and uses OCC's real client over the routed transport:
// a write and a read succeed through the rendered trusted-proxy
// authentication; an identity the client claims is overwritten by the
// route; and a spoofed identity that reaches the gateway (a route that
// passes it through) is refused by the rendered configuration.
func TestNativeConfigOnRealGateway(t *testing.T) {
	rt, err := gwtest.FindRuntime()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the OpenClaw runtime is required under CI=true: %v", err)
		}
		t.Skipf("no OpenClaw runtime (set %s or run scripts/install-runtime.sh): %v", gwtest.EnvRuntime, err)
	}
	f := newFixture()
	cfg := baseConfig("occ-system", "")
	d, err := New(cfg, nopClient{}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	objs, err := Render(d.cfg, f.revision(1, `{"agents":{"defaults":{"heartbeat":{"every":"0m"}}}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	native := []byte(objs.ConfigMap.Data[ConfigKey])

	dir := t.TempDir()
	port := freePort(t)
	adjusted := loopbackAdjust(t, native, port, dir)
	configPath := filepath.Join(dir, "openclaw.json")
	if err := os.WriteFile(configPath, adjusted, 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	upstream := startGateway(t, rt, dir, configPath, port)
	t.Logf("gateway ready after %v", time.Since(start).Round(time.Millisecond))

	// The route the driver would create: this Agent's exact path.
	ep, err := d.Endpoint(t.Context(), f.revision(1, `{}`))
	if err != nil {
		t.Fatal(err)
	}
	proxy := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: upstream, Namespace: f.ns.ID, Agent: f.agent.ID})
	if want := AgentPath(f.ns.ID, f.agent.ID); !strings.HasSuffix(proxy.RouteURL(), want) || !strings.HasSuffix(ep.URL, want) {
		t.Fatalf("route %s and endpoint %s do not both end with %s", proxy.RouteURL(), ep.URL, want)
	}
	target := proxy.Target(t)
	c := agentgw.New(agentgw.Options{})

	t.Run("OCC writes and reads through the route", func(t *testing.T) {
		content := "# Agents\nrendered by the Kubernetes driver ✓\n"
		set, err := c.Set(testCtx(t, 30*time.Second), target, "AGENTS.md", content, "")
		if err != nil {
			t.Fatalf("Set: %v\ngateway log:\n%s", err, tail(filepath.Join(dir, "gateway.log")))
		}
		got, err := c.Get(testCtx(t, 30*time.Second), target, "AGENTS.md")
		if err != nil {
			t.Fatalf("Get: %v", err)
		}
		if got.Content != content || got.Hash != set.Hash || got.Missing {
			t.Errorf("Get = %+v, want the content written (hash %s)", got, set.Hash)
		}
		disk, err := os.ReadFile(filepath.Join(dir, "workspace", "AGENTS.md"))
		if err != nil || string(disk) != content {
			t.Errorf("workspace file = %q, %v; want the content written", disk, err)
		}
	})

	t.Run("a claimed identity is overwritten by the route", func(t *testing.T) {
		h := http.Header{}
		h.Set(agentgw.HeaderAPIKey, proxy.Key())
		h.Set(IdentityHeader, "mallory")
		n, err := gwtest.DialNative(testCtx(t, 30*time.Second), proxy.RouteURL(), gwtest.NativeOptions{Header: h, TLS: proxy.TLSConfig(), Scopes: []string{}})
		if err != nil {
			t.Fatal(err)
		}
		defer n.Close()
		if !n.Hello.OK {
			t.Fatalf("connect through the route refused: %v", n.Hello.Error)
		}
		if diff := cmp.Diff(IdentityScopes(), n.Hello.Scopes()); diff != "" {
			t.Errorf("granted scopes (-want +got):\n%s", diff)
		}
	})

	t.Run("a spoofed identity that reaches the gateway is refused", func(t *testing.T) {
		leaky := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: upstream, Namespace: f.ns.ID, Agent: f.agent.ID, PassIdentity: true})
		for _, identity := range []string{"mallory", "OCC-WORKSPACE-FILES", ""} {
			h := http.Header{}
			h.Set(agentgw.HeaderAPIKey, leaky.Key())
			if identity != "" {
				h.Set(IdentityHeader, identity)
			}
			n, err := gwtest.DialNative(testCtx(t, 30*time.Second), leaky.RouteURL(), gwtest.NativeOptions{Header: h, TLS: leaky.TLSConfig(), Scopes: []string{}})
			var ue *gwtest.UpgradeError
			switch {
			case errors.As(err, &ue):
				t.Logf("identity %q: upgrade refused with HTTP %d", identity, ue.Status)
			case err != nil:
				t.Fatalf("identity %q: %v", identity, err)
			default:
				if n.Hello.OK {
					t.Errorf("identity %q: connected with scopes %v, want refused", identity, n.Hello.Scopes())
				} else {
					t.Logf("identity %q: refused: %v", identity, n.Hello.Error)
				}
				n.Close()
			}
		}
		// OCC's own client sends no identity: through a leaky route it
		// gets nothing either.
		leakyTarget := leaky.Target(t)
		if _, err := c.Get(testCtx(t, 30*time.Second), leakyTarget, "AGENTS.md"); agentgw.KindOf(err) != agentgw.Unavailable {
			t.Errorf("Get through a route that sets no identity: %v, want Unavailable", err)
		}
	})

	// The Pod mounts openclaw.json read-only from the ConfigMap; that
	// works only while `gateway run` never writes its configuration.
	if after, err := os.ReadFile(configPath); err != nil || string(after) != string(adjusted) {
		t.Errorf("the gateway rewrote its configuration file (a read-only ConfigMap mount would break): %v\n%s", err, after)
	}
}

// nopClient is a client.Client for tests that never call the API; any
// call panics (embedding the nil interface).
type nopClient struct{ client.Client }

// startGateway runs `openclaw gateway run` with configPath in dir on port
// and waits for /readyz; the gateway's whole process group is killed when
// the test ends. It returns the upstream URL for a proxy.
func startGateway(t *testing.T, rt gwtest.Runtime, dir, configPath string, port int) string {
	t.Helper()
	for _, d := range []string{"home", "state", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			t.Fatal(err)
		}
	}
	logf, err := os.Create(filepath.Join(dir, "gateway.log"))
	if err != nil {
		t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(rt.Node, rt.OpenClaw, "gateway", "run", "--port", strconv.Itoa(port))
	cmd.Dir = dir
	// A complete environment: nothing of the developer's OPENCLAW_* leaks in.
	cmd.Env = []string{
		"PATH=" + filepath.Dir(rt.Node) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + filepath.Join(dir, "home"),
		"TMPDIR=" + filepath.Join(dir, "tmp"),
		"OPENCLAW_STATE_DIR=" + filepath.Join(dir, "state"),
		"OPENCLAW_CONFIG_PATH=" + configPath,
		"OPENCLAW_SKIP_CHANNELS=1", "OPENCLAW_DISABLE_BONJOUR=1", "OPENCLAW_NO_AUTO_UPDATE=1", "OPENCLAW_OFFLINE=1",
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatalf("start the gateway: %v", err)
	}
	exited := make(chan struct{})
	go func() { _ = cmd.Wait(); close(exited) }()
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gateway log (last lines):\n%s", tail(filepath.Join(dir, "gateway.log")))
		}
		_ = syscall.Kill(cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(15 * time.Second):
		}
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) // helpers left in the group
		<-exited
	})

	upstream := fmt.Sprintf("http://127.0.0.1:%d", port)
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()
	tick := time.NewTicker(200 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-exited:
			t.Fatalf("the gateway exited during startup:\n%s", tail(filepath.Join(dir, "gateway.log")))
		case <-ctx.Done():
			t.Fatalf("the gateway was not ready within 2 minutes:\n%s", tail(filepath.Join(dir, "gateway.log")))
		case <-tick.C:
		}
		resp, err := hc.Get(upstream + "/readyz")
		if err != nil {
			continue
		}
		resp.Body.Close()
		if resp.StatusCode == http.StatusOK {
			return upstream
		}
	}
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}

func tail(path string) string {
	b, err := os.ReadFile(path)
	if err != nil {
		return "(" + err.Error() + ")"
	}
	lines := strings.Split(strings.TrimRight(string(b), "\n"), "\n")
	if len(lines) > 40 {
		lines = lines[len(lines)-40:]
	}
	return strings.Join(lines, "\n")
}
