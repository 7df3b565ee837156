package gwtest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw"
)

// Mode is the gateway's auth mode.
type Mode string

const (
	// TokenMode: gateway.auth.mode "token"; reached by the direct
	// transport with the token from Gateway.TokenFile.
	TokenMode Mode = "token"
	// TrustedProxyMode: gateway.auth.mode "trusted-proxy" with the
	// Kubernetes-shaped config of openclaw-gateway.md Appendix B; reached
	// through a Proxy, which plays the Envoy route.
	TrustedProxyMode Mode = "trusted-proxy"
)

// Identities and headers of the trusted-proxy setup.
const (
	// IdentityHeader is the gateway's trustedProxy.userHeader.
	IdentityHeader = "x-occ-identity"
	// Identity is what the route sets; it is granted admin, read and write.
	Identity = "occ-workspace-files"
	// ReadOnlyIdentity is granted operator.read only, for scope tests.
	ReadOnlyIdentity = "occ-read-only"
	// RealIP is the client address the proxy claims in x-real-ip. The
	// gateway refuses trusted-proxy attribution to a loopback client, and
	// a test's real connection comes from loopback, so the proxy states a
	// documentation address (RFC 5737); it is header content only, no
	// traffic goes there.
	RealIP = "192.0.2.10"
)

// DefaultIdentityScopes is the identityScopes of a trusted-proxy gateway
// unless GatewayOptions says otherwise.
func DefaultIdentityScopes() map[string][]string {
	return map[string][]string{
		Identity:         {"operator.admin", "operator.read", "operator.write"},
		ReadOnlyIdentity: {"operator.read"},
	}
}

// Timeouts of the gateway's life cycle. Startup takes 9-16 s on the
// reference machine (2 vCPU) and more under load.
const (
	readyTimeout = 90 * time.Second
	setupTimeout = 90 * time.Second
	stopTimeout  = 15 * time.Second
	killTimeout  = 10 * time.Second
)

// GatewayOptions configures StartGateway.
type GatewayOptions struct {
	// Mode defaults to TokenMode.
	Mode Mode
	// Baseline runs `openclaw setup --baseline` on the workspace first,
	// seeding AGENTS.md, BOOTSTRAP.md, IDENTITY.md, SOUL.md and USER.md.
	// Without it every file starts missing.
	Baseline bool
	// IdentityScopes (trusted-proxy): identity → granted scopes; every key
	// is also in trustedProxy.allowUsers. nil means DefaultIdentityScopes.
	IdentityScopes map[string][]string
	// Plugins keeps the bundled plugins enabled; by default they are off,
	// which starts faster and schedules fewer background jobs, and does
	// not affect agents.files.*.
	Plugins bool
}

// Gateway is one running OpenClaw gateway on 127.0.0.1.
type Gateway struct {
	Mode Mode
	Port int
	// URL is the WebSocket URL, ws://127.0.0.1:<port>/.
	URL string
	// HTTPURL is http://127.0.0.1:<port>, the upstream for a Proxy.
	HTTPURL string
	// Token and TokenFile (token mode): the gateway token and a 0600 file
	// holding it, for direct targets.
	Token     string
	TokenFile string
	// Dir holds everything of this gateway: home, state, config, logs.
	Dir       string
	Workspace string
	// LogFile receives the gateway's stdout and stderr.
	LogFile string

	pid      int
	done     chan struct{}
	stopOnce sync.Once
	stopErr  error
}

// DirectTarget is a direct Target for a token-mode gateway.
func (g *Gateway) DirectTarget() agentgw.Target {
	return agentgw.Target{Transport: agentgw.Direct, URL: g.URL, TokenFile: g.TokenFile}
}

// LogTail returns the last n lines of the gateway's output.
func (g *Gateway) LogTail(n int) string {
	b, err := os.ReadFile(g.LogFile)
	if err != nil {
		return "(no log: " + err.Error() + ")"
	}
	return lastLines(string(b), n)
}

// StartGateway starts one real gateway for the test, with a private home,
// state, config and log under t.TempDir(), and stops it when the test ends.
// Without a runtime it skips the test, or fails it under CI=true.
//
// A gateway costs about 1 GB of memory and 10-15 s of CPU to start: prefer
// Shared for tests that can share one.
func StartGateway(t testing.TB, opts GatewayOptions) *Gateway {
	t.Helper()
	rt := requireRuntime(t)
	dir, err := testDir(t)
	if err != nil {
		t.Fatalf("gwtest: %v", err)
	}
	g, err := start(rt, dir, opts)
	if err != nil {
		t.Fatalf("gwtest: %v", err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("gwtest: gateway output (last lines):\n%s", g.LogTail(40))
		}
		if err := g.Stop(); err != nil {
			t.Errorf("gwtest: %v", err)
		}
	})
	return g
}

// guardedRoot is this process's GuardedDir for gateway directories.
var guardedRoot = sync.OnceValues(func() (string, error) { return GuardedDir("occ-gwtest-") })

// testDir makes a directory for one test's gateway under the guarded
// root, removed when the test ends (the gateway is stopped first: cleanups
// run last-registered first).
func testDir(t testing.TB) (string, error) {
	r, err := guardedRoot()
	if err != nil {
		return "", err
	}
	name := strings.NewReplacer("/", "_", " ", "_").Replace(t.Name())
	dir, err := os.MkdirTemp(r, name[:min(len(name), 40)]+"-")
	if err != nil {
		return "", err
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir, nil
}

// shared gateways, one per mode, for the lifetime of a test process.
var shared struct {
	mu      sync.Mutex
	entries map[Mode]*sharedEntry
}

type sharedEntry struct {
	once      sync.Once
	g         *Gateway
	dir       string
	err       error
	noRuntime bool
}

// Shared returns this process's gateway for mode, starting it on first
// use: a token-mode gateway with the baseline files, or a trusted-proxy
// gateway with DefaultIdentityScopes and no baseline. Tests must not stop
// it, and should restore what they change (files they write, files they
// delete), because the other tests of the package see the same workspace.
//
// A package that uses Shared must stop the gateways when its tests are
// done, from TestMain:
//
//	func TestMain(m *testing.M) {
//		code := m.Run()
//		gwtest.StopShared()
//		os.Exit(code)
//	}
func Shared(t testing.TB, mode Mode) *Gateway {
	t.Helper()
	shared.mu.Lock()
	if shared.entries == nil {
		shared.entries = map[Mode]*sharedEntry{}
	}
	e := shared.entries[mode]
	if e == nil {
		e = &sharedEntry{}
		shared.entries[mode] = e
	}
	shared.mu.Unlock()

	e.once.Do(func() {
		rt, err := FindRuntime()
		if err != nil {
			e.err, e.noRuntime = err, true
			return
		}
		e.dir, e.err = guardedRoot()
		if e.err == nil {
			e.dir, e.err = os.MkdirTemp(e.dir, "shared-"+string(mode)+"-")
		}
		if e.err != nil {
			return
		}
		opts := GatewayOptions{Mode: mode, Baseline: mode == TokenMode}
		e.g, e.err = start(rt, e.dir, opts)
	})
	if e.noRuntime {
		unavailableRuntime(t, e.err)
	}
	if e.err != nil {
		t.Fatalf("gwtest: shared %s gateway: %v", mode, e.err)
	}
	return e.g
}

// StopShared stops the gateways Shared started and removes their
// directories. Call it from TestMain after m.Run.
func StopShared() {
	shared.mu.Lock()
	defer shared.mu.Unlock()
	for mode, e := range shared.entries {
		if e.g != nil {
			if err := e.g.Stop(); err != nil {
				fmt.Fprintf(os.Stderr, "gwtest: stop shared %s gateway: %v\n", mode, err)
			}
		}
		if e.dir != "" {
			_ = os.RemoveAll(e.dir)
		}
	}
	shared.entries = nil
}

func start(rt Runtime, dir string, opts GatewayOptions) (*Gateway, error) {
	if opts.Mode == "" {
		opts.Mode = TokenMode
	}
	g := &Gateway{
		Mode:      opts.Mode,
		Dir:       dir,
		Workspace: filepath.Join(dir, "ws"),
		LogFile:   filepath.Join(dir, "gateway.log"),
	}
	for _, d := range []string{"home", "state", "tmp"} {
		if err := os.MkdirAll(filepath.Join(dir, d), 0o700); err != nil {
			return nil, err
		}
	}
	if g.Mode == TokenMode {
		g.Token = randomHex(32)
		g.TokenFile = filepath.Join(dir, "gateway-token")
		if err := os.WriteFile(g.TokenFile, []byte(g.Token), 0o600); err != nil {
			return nil, err
		}
	}
	cfg, err := g.config(opts)
	if err != nil {
		return nil, err
	}
	if err := os.WriteFile(g.configPath(), cfg, 0o600); err != nil {
		return nil, err
	}
	if opts.Baseline {
		if err := g.setupBaseline(rt); err != nil {
			return nil, err
		}
	}
	// The port is chosen by binding :0 and releasing it, so another process
	// can take it in between; a start that fails with EADDRINUSE is retried
	// on a fresh port.
	for attempt := 1; ; attempt++ {
		port, err := freePort()
		if err != nil {
			return nil, err
		}
		err = g.launch(rt, port, opts)
		if err == nil {
			return g, nil
		}
		if attempt == 3 || !strings.Contains(g.LogTail(200), "EADDRINUSE") {
			return nil, fmt.Errorf("%w\ngateway output (last lines):\n%s", err, g.LogTail(40))
		}
	}
}

func (g *Gateway) configPath() string { return filepath.Join(g.Dir, "openclaw.json") }

// config renders openclaw.json. Port is left to --port, which takes
// precedence, so a retry on another port need not rewrite the file (which
// the gateway and setup rewrite themselves).
func (g *Gateway) config(opts GatewayOptions) ([]byte, error) {
	gw := map[string]any{"mode": "local", "bind": "loopback"}
	switch g.Mode {
	case TokenMode:
		gw["auth"] = map[string]any{"mode": "token", "token": g.Token}
	case TrustedProxyMode:
		scopes := opts.IdentityScopes
		if scopes == nil {
			scopes = DefaultIdentityScopes()
		}
		users := make([]string, 0, len(scopes))
		for u := range scopes {
			users = append(users, u)
		}
		slices.Sort(users)
		gw["trustedProxies"] = []string{"127.0.0.1"}
		gw["allowRealIpFallback"] = true
		gw["auth"] = map[string]any{
			"mode": "trusted-proxy",
			"trustedProxy": map[string]any{
				"userHeader":    IdentityHeader,
				"allowUsers":    users,
				"allowLoopback": true,
			},
			"identityScopes": scopes,
		}
	default:
		return nil, fmt.Errorf("unknown mode %q", g.Mode)
	}
	cfg := map[string]any{
		"gateway": gw,
		"agents": map[string]any{"defaults": map[string]any{
			"workspace": g.Workspace,
			"heartbeat": map[string]any{"every": "0m"},
		}},
		"logging": map[string]any{"file": filepath.Join(g.Dir, "openclaw-file.log")},
	}
	if !opts.Plugins {
		cfg["plugins"] = map[string]any{"enabled": false}
	}
	return json.MarshalIndent(cfg, "", "  ")
}

// env is the complete environment of the gateway and of setup: nothing is
// inherited except PATH (git for setup), so a developer's OPENCLAW_* or
// proxy settings cannot leak in, and nothing is written outside Dir.
func (g *Gateway) env(rt Runtime) []string {
	return []string{
		"PATH=" + filepath.Dir(rt.Node) + string(os.PathListSeparator) + os.Getenv("PATH"),
		"HOME=" + filepath.Join(g.Dir, "home"),
		"TMPDIR=" + filepath.Join(g.Dir, "tmp"),
		"OPENCLAW_STATE_DIR=" + filepath.Join(g.Dir, "state"),
		"OPENCLAW_CONFIG_PATH=" + g.configPath(),
		"OPENCLAW_SKIP_CHANNELS=1",
		"OPENCLAW_DISABLE_BONJOUR=1",
		"OPENCLAW_NO_AUTO_UPDATE=1",
		"OPENCLAW_OFFLINE=1",
	}
}

func (g *Gateway) setupBaseline(rt Runtime) error {
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, rt.Node, rt.OpenClaw, "setup", "--baseline", "--workspace", g.Workspace)
	cmd.Dir = g.Dir
	cmd.Env = g.env(rt)
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	// On timeout kill setup's whole process group (it runs git).
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	cmd.WaitDelay = killTimeout
	out, err := cmd.CombinedOutput()
	if err != nil {
		return fmt.Errorf("openclaw setup --baseline: %v: %s", err, lastLines(string(out), 20))
	}
	if _, err := os.Stat(filepath.Join(g.Workspace, "AGENTS.md")); err != nil {
		return fmt.Errorf("openclaw setup --baseline seeded no AGENTS.md: %w", err)
	}
	return nil
}

// launch starts `openclaw gateway run` on port and waits until it serves
// file requests; on failure the process is stopped.
func (g *Gateway) launch(rt Runtime, port int, opts GatewayOptions) error {
	g.Port = port
	g.URL = fmt.Sprintf("ws://127.0.0.1:%d/", port)
	g.HTTPURL = fmt.Sprintf("http://127.0.0.1:%d", port)
	g.done = make(chan struct{})
	g.stopOnce = sync.Once{}

	logf, err := os.OpenFile(g.LogFile, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		return err
	}
	defer logf.Close() // the child has its own descriptor
	cmd := exec.Command(rt.Node, rt.OpenClaw, "gateway", "run", "--port", strconv.Itoa(port))
	cmd.Dir = g.Dir
	cmd.Env = g.env(rt)
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = gatewayProcAttr()
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // never unlocked: the thread ends with this goroutine, after the child
		if err := cmd.Start(); err != nil {
			started <- err
			close(g.done)
			return
		}
		g.pid = cmd.Process.Pid
		started <- nil
		_ = cmd.Wait()
		close(g.done)
	}()
	if err := <-started; err != nil {
		return fmt.Errorf("start gateway: %w", err)
	}

	ctx, cancel := context.WithTimeout(context.Background(), readyTimeout)
	defer cancel()
	if err := g.waitReady(ctx, opts); err != nil {
		_ = g.Stop()
		return err
	}
	return nil
}

// waitReady polls /readyz, then proves a full connect and agents.files.get:
// the first WebSocket connect can lag /readyz by up to a second, and a test
// should never see a gateway that is "ready" but refuses connects.
func (g *Gateway) waitReady(ctx context.Context, opts GatewayOptions) error {
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	ready := false
	var lastErr error
	for {
		select {
		case <-g.done:
			return errors.New("gateway exited during startup")
		case <-ctx.Done():
			return fmt.Errorf("gateway not ready after %s (last: %v)", readyTimeout, lastErr)
		case <-tick.C:
		}
		if !ready {
			resp, err := hc.Get(g.HTTPURL + "/readyz")
			if err != nil {
				lastErr = err
				continue
			}
			resp.Body.Close()
			if resp.StatusCode != http.StatusOK {
				lastErr = fmt.Errorf("/readyz answered %d", resp.StatusCode)
				continue
			}
			ready = true
		}
		if lastErr = g.probe(ctx, opts); lastErr == nil {
			return nil
		}
	}
}

func (g *Gateway) probe(ctx context.Context, opts GatewayOptions) error {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	o := NativeOptions{Token: g.Token}
	if g.Mode == TrustedProxyMode {
		o.Header = http.Header{}
		o.Header.Set(IdentityHeader, probeIdentity(opts))
		o.Header.Set("x-real-ip", RealIP)
		o.Scopes = []string{}
	}
	n, err := DialNative(ctx, g.URL, o)
	if err != nil {
		return err
	}
	defer n.Close()
	if !n.Hello.OK {
		return fmt.Errorf("probe connect refused: %v", n.Hello.Error)
	}
	_, err = n.GetFile(ctx, "AGENTS.md")
	return err
}

func probeIdentity(opts GatewayOptions) string {
	scopes := opts.IdentityScopes
	if scopes == nil {
		return Identity
	}
	if _, ok := scopes[Identity]; ok {
		return Identity
	}
	for u, s := range scopes {
		if slices.Contains(s, "operator.read") || slices.Contains(s, "operator.admin") {
			return u
		}
	}
	return ""
}

// Stop stops the gateway: SIGTERM (a clean shutdown takes 0.5-3 s), then
// SIGKILL to its process group after stopTimeout. Helpers left in the
// group after the gateway exits are killed too. Stop is idempotent.
func (g *Gateway) Stop() error {
	g.stopOnce.Do(func() {
		select {
		case <-g.done:
		default:
			_ = syscall.Kill(g.pid, syscall.SIGTERM)
			select {
			case <-g.done:
			case <-time.After(stopTimeout):
				_ = syscall.Kill(-g.pid, syscall.SIGKILL)
				select {
				case <-g.done:
				case <-time.After(killTimeout):
					g.stopErr = fmt.Errorf("gateway pid %d did not exit after SIGKILL", g.pid)
					return
				}
			}
		}
		if g.pid > 0 && syscall.Kill(-g.pid, 0) == nil {
			// Something of ours is still in the group: give it the
			// gateway's own grace period, then kill it.
			deadline := time.Now().Add(2 * time.Second)
			for time.Now().Before(deadline) && syscall.Kill(-g.pid, 0) == nil {
				time.Sleep(50 * time.Millisecond)
			}
			_ = syscall.Kill(-g.pid, syscall.SIGKILL)
		}
	})
	return g.stopErr
}

func freePort() (int, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
