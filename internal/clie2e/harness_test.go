package clie2e_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"flag"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	_ "modernc.org/sqlite" // the server's own SQLite driver, to age a key

	"github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/cli"
	"github.com/openclaw/occ/internal/testutil"
)

// runOCCEnv makes the test binary act as the occ binary: every occ
// process a test runs (the server and each client command) is this
// binary re-executed with it set, so the real command tree runs in a real
// process, with real exit codes and streams.
const runOCCEnv = "OCC_CLIE2E_RUN_OCC"

var update = flag.Bool("update", false, "rewrite the golden files in testdata")

func TestMain(m *testing.M) {
	if os.Getenv(runOCCEnv) == "1" {
		os.Exit(cli.Execute())
	}
	flag.Parse()
	os.Exit(m.Run())
}

const adminEmail = "admin@localhost"

// guardedRoot holds every process's working directory (see doc.go).
var guardedRoot = sync.OnceValues(func() (string, error) { return gwtest.GuardedDir("occ-clie2e-") })

func guardedDir(t *testing.T) string {
	t.Helper()
	root, err := guardedRoot()
	if err != nil {
		t.Fatal(err)
	}
	dir, err := os.MkdirTemp(root, "t-")
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = os.RemoveAll(dir) })
	return dir
}

// baseEnv is the environment every occ process starts from: the test's
// own without any OCC_ or XDG_ setting (the test decides those).
func baseEnv() []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OCC_") && !strings.HasPrefix(kv, "XDG_") && !strings.HasPrefix(kv, "EDITOR=") &&
			!strings.HasPrefix(kv, "VISUAL=") {
			env = append(env, kv)
		}
	}
	return append(env, runOCCEnv+"=1")
}

// server is a running `occ server` process.
type server struct {
	URL      string
	Password string // the bootstrap administrator's
	DataDir  string
	stderr   *syncBuffer
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startServer starts `occ server` with the compute driver given and the
// extra flags, on a free loopback port, and waits until it is ready.
func startServer(t *testing.T, driver string, extra ...string) *server {
	t.Helper()
	dir := guardedDir(t)
	pwFile := filepath.Join(dir, "admin-password")
	const password = "correct horse battery staple 42"
	if err := os.WriteFile(pwFile, []byte(password), 0o600); err != nil {
		t.Fatal(err)
	}
	port := freePort(t)
	s := &server{URL: fmt.Sprintf("http://127.0.0.1:%d", port), Password: password,
		DataDir: filepath.Join(dir, "data"), stderr: &syncBuffer{}}
	args := append([]string{"server", "--data-dir", s.DataDir, "--listen", fmt.Sprintf("127.0.0.1:%d", port),
		"--compute-driver", driver, "--bootstrap-admin-email", adminEmail, "--bootstrap-admin-password-file", pwFile,
		"--log-level", "warn"}, extra...)
	cmd := exec.Command(os.Args[0], args...)
	cmd.Dir = dir
	cmd.Env = baseEnv()
	cmd.Stdout, cmd.Stderr = s.stderr, s.stderr
	// If this binary dies without cleanups, the guard kills the server by
	// its working directory; this kills it sooner.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	exited := make(chan error, 1)
	go func() { exited <- cmd.Wait() }()
	t.Cleanup(func() {
		_ = cmd.Process.Signal(syscall.SIGTERM)
		select {
		case <-exited:
		case <-time.After(30 * time.Second):
			_ = cmd.Process.Kill()
			<-exited
		}
		if t.Failed() {
			t.Logf("occ server output:\n%s", s.stderr.String())
		}
	})
	c, err := client.New(s.URL)
	if err != nil {
		t.Fatal(err)
	}
	ctx := testutil.Context(t)
	testutil.Eventually(t, 60*time.Second, func() bool {
		select {
		case err := <-exited:
			t.Fatalf("occ server exited: %v\n%s", err, s.stderr.String())
		default:
		}
		rctx, cancel := context.WithTimeout(ctx, 2*time.Second)
		defer cancel()
		_, err := c.Ready(rctx)
		return err == nil
	}, "occ server on %s to be ready", s.URL)
	return s
}

// freePort returns a loopback port nothing listens on. Another process
// could take it before the server does; the server then fails to start
// and the test says so.
func freePort(t *testing.T) int {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port
}

// expireKey makes a service key expired, in the server's own database:
// the shortest expiry the API grants is a day.
func (s *server) expireKey(t *testing.T, keyID string) {
	t.Helper()
	db, err := sql.Open("sqlite", "file:"+filepath.Join(s.DataDir, "occ.db")+"?_pragma=busy_timeout(10000)")
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	res, err := db.ExecContext(testutil.Context(t), "UPDATE api_keys SET expires_at = ? WHERE id = ?",
		"2000-01-01T00:00:00.000000Z", keyID)
	if err != nil {
		t.Fatal(err)
	}
	if n, _ := res.RowsAffected(); n != 1 {
		t.Fatalf("expiring key %s: %d rows changed", keyID, n)
	}
}

// user is one person's (or robot's) side: a home and config directory of
// its own, so contexts do not leak between tests.
type user struct {
	t      *testing.T
	home   string
	config string // $XDG_CONFIG_HOME
	env    []string
}

func newUser(t *testing.T) *user {
	t.Helper()
	home := guardedDir(t)
	return &user{t: t, home: home, config: filepath.Join(home, "xdg")}
}

// result is what one occ process did.
type result struct {
	Stdout, Stderr string
	Code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.Code, r.Stdout, r.Stderr)
}

// run runs `occ args...` with stdin.
func (u *user) run(stdin string, args ...string) result {
	u.t.Helper()
	ctx, cancel := context.WithTimeout(testutil.Context(u.t), 5*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Dir = u.home
	cmd.Env = append(baseEnv(), "HOME="+u.home, "XDG_CONFIG_HOME="+u.config)
	cmd.Env = append(cmd.Env, u.env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	r := result{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		r.Code = exit.ExitCode()
	case err != nil:
		u.t.Fatalf("running occ %v: %v", args, err)
	}
	return r
}

// must runs occ and fails the test unless it exits 0.
func (u *user) must(stdin string, args ...string) result {
	u.t.Helper()
	r := u.run(stdin, args...)
	if r.Code != 0 {
		u.t.Fatalf("occ %s: %s", strings.Join(args, " "), r)
	}
	return r
}

// loginAdmin logs u in as the bootstrap administrator with a password.
func (u *user) loginAdmin(s *server, extra ...string) {
	u.t.Helper()
	u.must(s.Password+"\n", append([]string{"login", s.URL, "--email", adminEmail, "--password-stdin"}, extra...)...)
}

var (
	idPattern   = regexp.MustCompile(`\b((ns|cfg|agt|rev|sa|aud|usr|key|role|bnd|rst|ses|wrk)_[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}|req_[0-9a-f]{32})\b`)
	timePattern = regexp.MustCompile(`\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d(\.\d+)?(Z|[+-]\d\d:\d\d)`)
	portPattern = regexp.MustCompile(`127\.0\.0\.1:\d+`)
)

// normalize replaces what differs between runs (ids, times, ports) with
// placeholders of the same width, so tables stay aligned (ephemeral
// ports all have five digits).
func normalize(s string) string {
	s = idPattern.ReplaceAllStringFunc(s, func(m string) string {
		prefix := m[:strings.IndexByte(m, '_')+1]
		return prefix + strings.Repeat("x", len(m)-len(prefix))
	})
	s = timePattern.ReplaceAllStringFunc(s, func(m string) string {
		if len(m) == len("2006-01-02T15:04:05Z") {
			return "YYYY-MM-DDTHH:MM:SSZ"
		}
		return "<time>"
	})
	return portPattern.ReplaceAllStringFunc(s, func(m string) string {
		return "127.0.0.1:" + strings.Repeat("P", len(m)-len("127.0.0.1:"))
	})
}

// golden compares got (normalized) with testdata/name, or rewrites it
// with -update.
func golden(t *testing.T, name, got string) {
	t.Helper()
	got = normalize(got)
	path := filepath.Join("testdata", name)
	if *update {
		if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	want, err := os.ReadFile(path)
	if err != nil {
		t.Fatalf("%v (run go test ./internal/clie2e -update to create it)", err)
	}
	if string(want) != got {
		t.Errorf("%s differs (-want +got):\n%s", name, lineDiff(string(want), got))
	}
}

// lineDiff is a short, line-based report of two texts' differences.
func lineDiff(want, got string) string {
	w, g := strings.Split(want, "\n"), strings.Split(got, "\n")
	var b strings.Builder
	for i := 0; i < max(len(w), len(g)); i++ {
		var wl, gl string
		if i < len(w) {
			wl = w[i]
		}
		if i < len(g) {
			gl = g[i]
		}
		if wl != gl {
			fmt.Fprintf(&b, "line %d:\n-%s\n+%s\n", i+1, wl, gl)
		}
	}
	return b.String()
}

func itoa(n int) string { return fmt.Sprint(n) }

func sha256Hex(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
