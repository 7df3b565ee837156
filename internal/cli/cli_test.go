package cli

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/buildinfo"
	"github.com/openclaw/occ/internal/config"
)

type fakeStore struct {
	migrateErr, closeErr error
	migrated, closed     bool
}

func (s *fakeStore) Migrate(context.Context) error { s.migrated = true; return s.migrateErr }
func (s *fakeStore) Close() error                  { s.closed = true; return s.closeErr }

// harness runs the real command tree with fake server and store.
type harness struct {
	env           map[string]string
	serverErr     error
	openErr       error
	store         fakeStore
	gotCfg        *config.Config
	gotURL        string
	gotDir        string
	stdin         io.Reader // nil: none
	stdout, stder bytes.Buffer
	// requestTimeout: deps.requestTimeout (0: the command's default).
	requestTimeout time.Duration
}

func (h *harness) run(t *testing.T, args ...string) int {
	t.Helper()
	d := deps{
		runServer: func(_ context.Context, cfg config.Config, _ *slog.Logger) error {
			h.gotCfg = &cfg
			return h.serverErr
		},
		openStore: func(_ context.Context, url, dir string) (migrator, error) {
			h.gotURL, h.gotDir = url, dir
			if h.openErr != nil {
				return nil, h.openErr
			}
			return &h.store, nil
		},
		stdin:          h.stdin,
		stdout:         &h.stdout,
		stderr:         &h.stder,
		getenv:         func(k string) string { return h.env[k] },
		requestTimeout: h.requestTimeout,
	}
	return run(context.Background(), args, d)
}

func TestVersion(t *testing.T) {
	var h harness
	if code := h.run(t, "version"); code != 0 {
		t.Fatalf("occ version: exit %d, stderr %q", code, h.stder.String())
	}
	want := "occ " + buildinfo.Version + "\ncommit: " + buildinfo.Commit + "\ngo: " + runtime.Version() + " " + runtime.GOOS + "/" + runtime.GOARCH + "\n"
	if diff := cmp.Diff(want, h.stdout.String()); diff != "" {
		t.Errorf("occ version output mismatch (-want +got):\n%s", diff)
	}
}

func TestExitCodesAndErrors(t *testing.T) {
	tests := []struct {
		name       string
		args       []string
		env        map[string]string
		serverErr  error
		openErr    error
		migrateErr error
		closeErr   error
		wantCode   int
		wantStderr string // prefix of stderr; "" means stderr must be empty
	}{
		{name: "server runs", args: []string{"server"}, wantCode: 0},
		{name: "server fails", args: []string{"server"}, serverErr: errors.New("listen on 127.0.0.1:8080: address already in use"),
			wantCode: 1, wantStderr: "occ: listen on 127.0.0.1:8080: address already in use\n"},
		{name: "unknown command", args: []string{"serve"},
			wantCode: 2, wantStderr: "occ: unknown command \"serve\" for \"occ\""},
		{name: "no command", args: nil, wantCode: 2},
		{name: "unknown flag", args: []string{"server", "--listne", "x"},
			wantCode: 2, wantStderr: "occ: unknown flag: --listne\nRun 'occ server --help' for usage.\n"},
		{name: "bad flag value", args: []string{"server", "--session-ttl", "forever"},
			wantCode: 2, wantStderr: "occ: invalid argument \"forever\" for \"--session-ttl\" flag: \"forever\" is not a duration like 90s, 15m or 12h\n"},
		{name: "extra argument", args: []string{"server", "now"},
			wantCode: 2, wantStderr: "occ: unknown command \"now\" for \"occ server\"\n"},
		{name: "invalid config, every problem on its own line", args: []string{"server", "--listen", "nope"},
			env:      map[string]string{"OCC_LOG_FORMAT": "xml"},
			wantCode: 2, wantStderr: "occ: listen address \"nope\" is not host:port (like 127.0.0.1:8080)\nocc: log format \"xml\" is not one of text, json\n"},
		{name: "version takes no flags of the server", args: []string{"version", "--listen", "x"},
			wantCode: 2, wantStderr: "occ: unknown flag: --listen\n"},
		{name: "migrate", args: []string{"migrate"}, wantCode: 0},
		{name: "migrate open fails", args: []string{"migrate"}, openErr: errors.New("connection refused"),
			wantCode: 1, wantStderr: "occ: opening database: connection refused\n"},
		{name: "migrate fails", args: []string{"migrate"}, migrateErr: errors.New("relation exists"),
			wantCode: 1, wantStderr: "occ: applying migrations: relation exists\n"},
		{name: "migrate close fails", args: []string{"migrate"}, closeErr: errors.New("disk full"),
			wantCode: 1, wantStderr: "occ: closing database: disk full\n"},
		{name: "migrate invalid config", args: []string{"migrate", "--database-url", "::"},
			wantCode: 2, wantStderr: "occ: database URL must start with postgres://"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := harness{env: tt.env, serverErr: tt.serverErr, openErr: tt.openErr}
			h.store.migrateErr, h.store.closeErr = tt.migrateErr, tt.closeErr
			if h.env == nil {
				h.env = map[string]string{}
			}
			// Keep the logs out of stderr so the test sees only errors.
			h.env["OCC_LOG_LEVEL"] = "error"
			code := h.run(t, tt.args...)
			if code != tt.wantCode {
				t.Errorf("occ %q: exit %d, want %d; stderr:\n%s", tt.args, code, tt.wantCode, h.stder.String())
			}
			got := h.stder.String()
			switch {
			case tt.wantStderr == "" && tt.wantCode == 0 && got != "":
				t.Errorf("occ %q: stderr = %q, want empty", tt.args, got)
			case !strings.HasPrefix(got, tt.wantStderr):
				t.Errorf("occ %q: stderr = %q, want prefix %q", tt.args, got, tt.wantStderr)
			}
			if n := strings.Count(got, "occ: "); tt.wantCode != 0 && n == 0 {
				t.Errorf("occ %q: stderr %q has no \"occ: \" error line", tt.args, got)
			}
		})
	}
}

func TestServerGetsResolvedConfig(t *testing.T) {
	dir := t.TempDir()
	h := harness{env: map[string]string{"OCC_DATA_DIR": dir, "OCC_LISTEN": "127.0.0.1:9999", "OCC_LOG_LEVEL": "error"}}
	if code := h.run(t, "server", "--listen", "127.0.0.1:7777", "--log-format", "json"); code != 0 {
		t.Fatalf("occ server: exit %d, stderr %q", code, h.stder.String())
	}
	want := config.Default()
	want.DataDir = dir
	want.Listen = "127.0.0.1:7777"
	want.PublicOrigin = "http://127.0.0.1:7777"
	want.LogLevel = "error"
	want.LogFormat = "json"
	if diff := cmp.Diff(&want, h.gotCfg); diff != "" {
		t.Errorf("config passed to server.Run mismatch (-want +got):\n%s", diff)
	}
}

func TestMigrateOpensConfiguredDatabase(t *testing.T) {
	dir := t.TempDir()
	h := harness{env: map[string]string{"OCC_LOG_LEVEL": "error"}}
	code := h.run(t, "migrate", "--data-dir", dir, "--database-url", "postgres://occ@127.0.0.1:5432/occ")
	if code != 0 {
		t.Fatalf("occ migrate: exit %d, stderr %q", code, h.stder.String())
	}
	if h.gotURL != "postgres://occ@127.0.0.1:5432/occ" || h.gotDir != dir {
		t.Errorf("openStore(%q, %q), want the configured URL and %q", h.gotURL, h.gotDir, dir)
	}
	if !h.store.migrated || !h.store.closed {
		t.Errorf("store migrated=%v closed=%v, want both", h.store.migrated, h.store.closed)
	}
}

func TestServerShutdownOnContextIsSuccess(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var stderr bytes.Buffer
	d := deps{
		runServer: func(ctx context.Context, _ config.Config, _ *slog.Logger) error {
			cancel()
			<-ctx.Done()
			return ctx.Err()
		},
		stdout: io.Discard,
		stderr: &stderr,
		getenv: func(k string) string { return map[string]string{"OCC_DATA_DIR": t.TempDir()}[k] },
	}
	if code := run(ctx, []string{"server"}, d); code != 0 {
		t.Errorf("occ server cancelled by its context: exit %d, want 0; stderr:\n%s", code, stderr.String())
	}
}

func TestLoggerFormat(t *testing.T) {
	var buf bytes.Buffer
	newLogger(&buf, "warn", "json").Info("hidden")
	newLogger(&buf, "warn", "json").Warn("shown", "k", "v")
	if got := buf.String(); strings.Contains(got, "hidden") || !strings.HasPrefix(got, `{"time":`) || !strings.Contains(got, `"k":"v"`) {
		t.Errorf("JSON logger at warn wrote %q", got)
	}
	buf.Reset()
	newLogger(&buf, "debug", "text").Debug("shown")
	if got := buf.String(); !strings.Contains(got, "level=DEBUG msg=shown") {
		t.Errorf("text logger at debug wrote %q", got)
	}
}

// TestSIGTERMStopsServerGracefully runs the real Execute path in a child
// process (this test binary again) whose fake server blocks until its
// context ends, sends it SIGTERM, and expects a clean exit 0.
func TestSIGTERMStopsServerGracefully(t *testing.T) {
	if os.Getenv("OCC_CLI_TEST_CHILD") == "1" {
		d := defaultDeps()
		d.runServer = func(ctx context.Context, _ config.Config, _ *slog.Logger) error {
			os.Stdout.WriteString("ready\n")
			<-ctx.Done()
			os.Stdout.WriteString("draining\n")
			return nil
		}
		os.Exit(execute([]string{"server"}, d))
	}
	if runtime.GOOS == "windows" {
		t.Skip("no SIGTERM on windows")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, os.Args[0], "-test.run=^TestSIGTERMStopsServerGracefully$")
	cmd.Env = append(os.Environ(),
		"OCC_CLI_TEST_CHILD=1",
		"OCC_DATA_DIR="+filepath.Join(t.TempDir(), "occ"),
		"OCC_LOG_LEVEL=error",
		"OCC_CONFIG=",
	)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatalf("StdoutPipe: %v", err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatalf("starting child: %v", err)
	}
	sc := bufio.NewScanner(out)
	if !sc.Scan() || sc.Text() != "ready" {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		t.Fatalf("child did not report ready: %q, stderr:\n%s", sc.Text(), stderr.String())
	}
	if err := cmd.Process.Signal(syscall.SIGTERM); err != nil {
		t.Fatalf("sending SIGTERM: %v", err)
	}
	rest, _ := io.ReadAll(out)
	if err := cmd.Wait(); err != nil {
		t.Fatalf("child after SIGTERM: %v (want exit 0); stderr:\n%s", err, stderr.String())
	}
	if got := string(rest); got != "draining\n" {
		t.Errorf("child output after SIGTERM = %q, want %q", got, "draining\n")
	}
}
