package ssh

import (
	"bytes"
	"context"
	"crypto/ed25519"
	"crypto/rand"
	"errors"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	xssh "golang.org/x/crypto/ssh"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/testutil"
)

// TestRunOutputLimit: against the real sshd, without gateways. A remote
// command (the workspace setup runner among them) may print 64 KiB on
// each of its standard output and standard error, as the reference's
// maxBuffer allows per stream, and its whole standard output comes back;
// one byte more on either fails the command, whatever its exit status. A
// command that exits non-zero within the cap reports its status, with the
// first 4,096 bytes of its standard error.
//
// The "then sleeps" cases go past the cap and then wait on a child that
// sleeps 600 s, as root and as the runtime account (through runuser, as
// the setup runner runs): run must give up as soon as the cap is passed
// and end the command on the host, so it fails as too much output and
// neither process runs afterwards. A run that checked the cap only when
// the command ends would wait until the test's one-minute context ends
// and fail with another error.
func TestRunOutputLimit(t *testing.T) {
	d, err := New(Options{Config: testConfig(t), Binary: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := d.hosts[0]
	const kib64 = 64 << 10
	const tooMuch = "ssh: host h1: print printed more than 65536 bytes"
	// result is what run returned: the length of its output, or its error
	// (a remote status with the length of the standard error kept).
	type result struct {
		Stdout         int
		Err            string
		Status, Stderr int
	}
	tests := []struct {
		name                   string
		stdout, stderr, status int  // what the command prints, and its exit status
		sleep, runtime         bool // then waits on a sleeping child; run as the runtime account
		want                   result
	}{
		{name: "64 KiB on standard output", stdout: kib64, want: result{Stdout: kib64}},
		{name: "64 KiB + 1 on standard output", stdout: kib64 + 1, want: result{Err: tooMuch}},
		{name: "64 KiB on standard error", stderr: kib64, want: result{}},
		{name: "64 KiB + 1 on standard error", stderr: kib64 + 1, want: result{Err: tooMuch}},
		{name: "64 KiB on each", stdout: kib64, stderr: kib64, want: result{Stdout: kib64}},
		{name: "exit 3 after 64 KiB on each", stdout: kib64, stderr: kib64, status: 3, want: result{Status: 3, Stderr: 4096}},
		{name: "exit 3 after 64 KiB + 1 on each", stdout: kib64 + 1, stderr: kib64 + 1, status: 3, want: result{Err: tooMuch}},
		{name: "64 KiB + 1 on standard output, then sleeps", stdout: kib64 + 1, sleep: true, want: result{Err: tooMuch}},
		{name: "64 KiB + 1 on standard error, then sleeps", stderr: kib64 + 1, sleep: true, want: result{Err: tooMuch}},
		{name: "as the runtime account, 64 KiB + 1 on standard output, then sleeps", stdout: kib64 + 1, sleep: true, runtime: true, want: result{Err: tooMuch}},
		{name: "as the runtime account, 64 KiB + 1 on standard error, then sleeps", stderr: kib64 + 1, sleep: true, runtime: true, want: result{Err: tooMuch}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			script := `head -c "$1" /dev/zero && head -c "$2" /dev/zero | tr '\0' e >&2 && exit "$3"`
			pids := filepath.Join(pidDir(t), "pids")
			if tt.sleep {
				// The sleeping child holds both output pipes, as a
				// stuck child of the setup runner would.
				script = `sleep 600 & echo $$ $! > "$4"; head -c "$1" /dev/zero; head -c "$2" /dev/zero | tr '\0' e >&2; wait; exit "$3"`
			}
			args := []string{strconv.Itoa(tt.stdout), strconv.Itoa(tt.stderr), strconv.Itoa(tt.status), pids}
			cmd := shellCmd(script, args...)
			if tt.runtime {
				cmd = h.asRuntime(script, args...)
			}
			out, err := h.run(ctx, "print", cmd, nil)
			var got result
			var re *remoteError
			switch {
			case errors.As(err, &re):
				got.Status, got.Stderr = re.Status, len(re.Stderr)
			case err != nil:
				got.Err = err.Error()
			default:
				got.Stdout = len(out)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("run (-want +got):\n%s", diff)
			}
			if tt.sleep {
				gwtest.CheckPIDsGone(t, pids)
			}
		})
	}
}

// pidDir is a directory the runtime account can write its pids into.
func pidDir(t *testing.T) string {
	t.Helper()
	dir := traversableDir(t)
	if err := os.Chmod(dir, 0o777); err != nil {
		t.Fatal(err)
	}
	return dir
}

// TestRunSetup: runSetup on the real sshd with a stand-in for the uploaded
// occ binary (a script as <root>/bin/occ, run as the runtime account
// exactly as `occ workspace-setup` is). Its failures are classed as the
// reference's "Workspace initialization failed." requires: exit 1 and
// output past the 64 KiB cap are permanent WORKSPACE_SETUP_FAILED (the
// same binary and payload would print it again); a runner still running
// at its own deadline (setupRunnerTimeout, shortened here to 3 s while
// CommandTimeout stays 2 minutes) is a retryable deadline error, returned
// while the test's one-minute context still runs. In both the
// overflow and the deadline case the stand-in (and the child it waits on)
// are gone when runSetup returns.
func TestRunSetup(t *testing.T) {
	cfg := testConfig(t)
	cfg.Root = traversableDir(t)
	d, err := New(Options{Config: cfg, Binary: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	if d.setupTimeout != 60*time.Second || d.cfg.CommandTimeout != 2*time.Minute {
		t.Fatalf("New: setup runner timeout %s and command timeout %s, want the reference's 60s and the default 2m0s", d.setupTimeout, d.cfg.CommandTimeout)
	}
	d.setupTimeout = 3 * time.Second
	h := d.hosts[0]
	if err := os.MkdirAll(filepath.Join(cfg.Root, "bin"), 0o755); err != nil {
		t.Fatal(err)
	}
	type result struct {
		Err       bool
		Permanent string // the code of a permanent error
		Deadline  bool   // the error wraps context.DeadlineExceeded
	}
	tests := []struct {
		name  string
		occ   string // the stand-in's script; $PIDS is the pid file
		sleep bool
		want  result
	}{
		{name: "success", occ: `echo '{"completed":true,"id":"s"}'`, want: result{}},
		{name: "exit 1", occ: `echo WORKSPACE_SETUP_FAILED >&2; exit 1`, want: result{Err: true, Permanent: compute.CodeWorkspaceSetupFailed}},
		{name: "64 KiB + 1 of output, then sleeps", occ: `sleep 600 & echo $$ $! > "$PIDS"; head -c 65537 /dev/zero; wait`, sleep: true,
			want: result{Err: true, Permanent: compute.CodeWorkspaceSetupFailed}},
		{name: "past its deadline", occ: `sleep 600 & echo $$ $! > "$PIDS"; wait`, sleep: true, want: result{Err: true, Deadline: true}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			pids := filepath.Join(pidDir(t), "pids")
			script := "#!/bin/sh\nPIDS=" + shq(pids) + "\n" + tt.occ + "\n"
			if err := os.WriteFile(h.occPath(), []byte(script), 0o755); err != nil {
				t.Fatal(err)
			}
			err := d.runSetup(ctx, h, filepath.Join(cfg.Root, "agent"), "apply", strings.NewReader(`{}`))
			var got result
			if err != nil {
				got.Err = true
				if p, ok := compute.AsPermanent(err); ok {
					got.Permanent = p.Code
				}
				got.Deadline = errors.Is(err, context.DeadlineExceeded)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("runSetup = %v (-want +got):\n%s", err, diff)
			}
			if ctx.Err() != nil {
				t.Errorf("runSetup returned only when the test's own context ended: %v", err)
			}
			if tt.sleep {
				gwtest.CheckPIDsGone(t, pids)
			}
		})
	}
}

// TestSessionHeader: the preamble's line is taken off standard error
// however the session's copy splits it, and anything that is not that
// line (another first line, a pid of 1 or none, no start time, 64 bytes
// without a newline, output that ends before a newline) reaches the
// command's standard error untouched, naming no session to kill.
func TestSessionHeader(t *testing.T) {
	type result struct {
		Session remoteSession
		OK      bool
		Rest    string
	}
	long := strings.Repeat("x", 65)
	tests := []struct {
		name   string
		writes []string
		want   result
	}{
		{name: "one write", writes: []string{"occ-session 123 456\nerr"}, want: result{remoteSession{123, 456}, true, "err"}},
		{name: "split line", writes: []string{"occ-ses", "sion 123 4", "56\n", "err"}, want: result{remoteSession{123, 456}, true, "err"}},
		{name: "line only", writes: []string{"occ-session 7 0\n"}, want: result{remoteSession{7, 0}, true, ""}},
		{name: "another line", writes: []string{"hello\nworld"}, want: result{Rest: "hello\nworld"}},
		{name: "pid 1", writes: []string{"occ-session 1 5\n"}, want: result{Rest: "occ-session 1 5\n"}},
		{name: "no start time", writes: []string{"occ-session 12 \n"}, want: result{Rest: "occ-session 12 \n"}},
		{name: "no newline within 64 bytes", writes: []string{long[:40], long[40:], "\nerr"}, want: result{Rest: long + "\nerr"}},
		{name: "ends before a newline", writes: []string{"occ-s"}, want: result{Rest: "occ-s"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var next bytes.Buffer
			h := newSessionHeader(&next)
			for _, w := range tt.writes {
				if n, err := h.Write([]byte(w)); n != len(w) || err != nil {
					t.Fatalf("Write(%q) = %d, %v", w, n, err)
				}
			}
			h.flush()
			var got result
			got.Session, got.OK = h.session()
			got.Rest = next.String()
			if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(remoteSession{})); diff != "" {
				t.Errorf("sessionHeader (-want +got):\n%s", diff)
			}
		})
	}
}

// TestRunBrokenConnection: the connection under a running command breaks
// (its socket closed here, with no SSH goodbye, as a network failure or a
// restarted sshd would leave it). sshd does not end a command without a
// terminal when its connection goes, so run, having told its caller that
// the command failed, ends it over a new connection: neither the command
// nor the child it waits on runs afterwards, and the next retry cannot
// overlap it. The connection is closed only once the command has started
// its child, so the preamble's line has come.
func TestRunBrokenConnection(t *testing.T) {
	d, err := New(Options{Config: testConfig(t), Binary: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := d.hosts[0]
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	for _, runtime := range []bool{false, true} {
		t.Run(map[bool]string{false: "as root", true: "as the runtime account"}[runtime], func(t *testing.T) {
			pids := filepath.Join(pidDir(t), "pids")
			script := `sleep 600 & echo $$ $! > "$1.tmp" && mv "$1.tmp" "$1"; wait`
			cmd := shellCmd(script, pids)
			if runtime {
				cmd = h.asRuntime(script, pids)
			}
			errc := make(chan error, 1)
			go func() {
				_, err := h.run(ctx, "sleep", cmd, nil)
				errc <- err
			}()
			testutil.Eventually(t, 30*time.Second, func() bool {
				_, err := os.Stat(pids)
				return err == nil
			}, "the command's pids in %s", pids)
			h.mu.Lock()
			c := h.client
			h.mu.Unlock()
			if c == nil {
				t.Fatal("no connection while the command runs")
			}
			_ = c.Close()
			select {
			case err := <-errc:
				var re *remoteError
				if err == nil || errors.As(err, &re) || !strings.HasPrefix(err.Error(), "ssh: host h1: sleep: ") {
					t.Fatalf("run after the connection broke = %v, want a connection error", err)
				}
			case <-ctx.Done():
				t.Fatal("run did not return after its connection broke")
			}
			gwtest.CheckPIDsGone(t, pids)
		})
	}
}

// TestHostThatStopsAnswering: a host whose sshd completes the handshake
// and then answers nothing (no channel is ever accepted or refused), as a
// host that hangs or a network that drops packets on an open connection
// leaves it. x/crypto/ssh waits for a channel without a deadline, so a
// remote command and a token read must give up after connectTimeout (1 s
// here), dropping the connection, instead of holding the host's slot for
// as long as TCP takes. The stalling server is a fake, in this process:
// a real sshd cannot be made to do this on purpose (the other tests run
// against the real one).
func TestHostThatStopsAnswering(t *testing.T) {
	addr, knownHosts := stallingSSHServer(t)
	cfg := testConfig(t)
	cfg.Hosts = []Host{{Name: "h1", Address: addr, Capacity: 10}}
	cfg.KnownHostsFile = knownHosts
	cfg.ConnectTimeout = time.Second
	d, err := New(Options{Config: cfg, Binary: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := d.hosts[0]
	for name, call := range map[string]func(context.Context) error{
		"a remote command": func(ctx context.Context) error { _, err := h.run(ctx, "true", "true", nil); return err },
		"a token read":     func(ctx context.Context) error { _, err := h.readToken(ctx, "0123456789ab"); return err },
		"a tunnel to the gateway": func(ctx context.Context) error {
			c, err := h.dialLoopback(ctx, 18800)
			if err == nil {
				c.Close()
			}
			return err
		},
	} {
		t.Run(name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
			defer cancel()
			errc := make(chan error, 1)
			go func() { errc <- call(ctx) }()
			select {
			case err := <-errc:
				if err == nil || !strings.Contains(err.Error(), "the host did not answer within 1s") {
					t.Fatalf("= %v; want the host's silence named", err)
				}
			case <-ctx.Done():
				t.Fatal("still waiting on the silent host after a minute")
			}
		})
	}
}

// stallingSSHServer serves SSH on a loopback port: it accepts any client
// key, completes the handshake, and never answers a channel. It returns
// the address and a known_hosts file that pins its key.
func stallingSSHServer(t *testing.T) (addr, knownHosts string) {
	t.Helper()
	_, priv, err := ed25519.GenerateKey(rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	signer, err := xssh.NewSignerFromKey(priv)
	if err != nil {
		t.Fatal(err)
	}
	sc := &xssh.ServerConfig{PublicKeyCallback: func(xssh.ConnMetadata, xssh.PublicKey) (*xssh.Permissions, error) { return nil, nil }}
	sc.AddHostKey(signer)
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	testutil.Serve(t, l, func(c net.Conn) {
		_, chans, reqs, err := xssh.NewServerConn(c, sc)
		if err != nil {
			return
		}
		go xssh.DiscardRequests(reqs)
		for range chans { // never accepted, never refused
		}
	})
	host, port, _ := net.SplitHostPort(l.Addr().String())
	knownHosts = filepath.Join(t.TempDir(), "known_hosts")
	line := "[" + host + "]:" + port + " " + string(xssh.MarshalAuthorizedKey(signer.PublicKey()))
	if err := os.WriteFile(knownHosts, []byte(line), 0o600); err != nil {
		t.Fatal(err)
	}
	return l.Addr().String(), knownHosts
}
