package server_test

import (
	"context"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/config"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/testutil"
)

// TestRunWorkerConcurrency: --worker-concurrency reaches the worker of
// "occ server" (server.Run) and of "occ worker" (server.RunWorker), as
// their metrics listeners report: occ_worker_loops is the setting and no
// loop is busy on an empty queue. Both also return the binary's start-up
// pages to the kernel once started, and log it (package pageout).
func TestRunWorkerConcurrency(t *testing.T) {
	for _, tt := range []struct {
		name  string
		loops int
		run   func(context.Context, config.Config, *slog.Logger) error
	}{
		{"occ server", 3, server.Run},
		{"occ worker", 2, server.RunWorker},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := runConfig(t)
			cfg.MetricsListen = testutil.FreeAddr(t)
			cfg.WorkerConcurrency = tt.loops
			if tt.name == "occ worker" {
				// occ worker does not migrate: let a server do it first.
				migrated := cfg
				migrated.MetricsListen, migrated.EmbeddedWorker = "", false
				runUntilReady(t, migrated)
			}
			logs, stop := startRun(t, tt.name, tt.run, cfg)
			want := []string{"occ_worker_loops " + strconv.Itoa(tt.loops), "occ_worker_loops_busy 0"}
			testutil.Eventually(t, 60*time.Second, func() bool {
				_, body := scrapeStatus("http://" + cfg.MetricsListen + "/metrics")
				for _, w := range want {
					if !strings.Contains(body, w+"\n") {
						return false
					}
				}
				return true
			}, "the metrics listener never reported %q", want)
			if runtime.GOOS == "linux" { // MADV_PAGEOUT exists only there; CI is Linux
				const line = `msg="start-up pages of the binary returned to the kernel" advisedMB=`
				testutil.Eventually(t, 10*time.Second, func() bool { return strings.Contains(logs.String(), line) },
					"%s never logged %q; its log:\n%s", tt.name, line, logs)
			}
			stop()
		})
	}
}

// runConfig is a configuration for server.Run or server.RunWorker on a
// new data directory: the none driver, loopback listeners, and a
// bootstrap password file.
func runConfig(t *testing.T) config.Config {
	t.Helper()
	dir := t.TempDir()
	pw := filepath.Join(dir, "pw")
	if err := os.WriteFile(pw, []byte(testPassword+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg := config.Default()
	cfg.DataDir, cfg.Listen = filepath.Join(dir, "data"), testutil.FreeAddr(t)
	cfg.PublicOrigin = "http://" + cfg.Listen
	cfg.ComputeDriver, cfg.BootstrapAdminPasswordFile = "none", pw
	cfg.ShutdownTimeout = 5 * time.Second
	return cfg
}

// startRun runs run (server.Run or server.RunWorker) with cfg in the
// background, its log in the returned buffer. stop ends it and fails the
// test when it returns an error or takes more than 30 s to stop; it must
// be called once.
func startRun(t *testing.T, name string, run func(context.Context, config.Config, *slog.Logger) error, cfg config.Config) (logs *lockedBuffer, stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(testutil.Context(t))
	t.Cleanup(cancel) // a test that fails before stop still ends the run
	done := make(chan error, 1)
	logs = &lockedBuffer{}
	go func() { done <- run(ctx, cfg, slog.New(slog.NewTextHandler(logs, nil))) }()
	return logs, func() {
		t.Helper()
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Fatalf("%s: %v", name, err)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("%s did not stop within 30 s of its context ending", name)
		}
	}
}

// runUntilReady runs "occ server" with cfg until /readyz answers 200 (it
// has migrated the database), then stops it.
func runUntilReady(t *testing.T, cfg config.Config) {
	t.Helper()
	ctx, cancel := context.WithCancel(testutil.Context(t))
	done := make(chan error, 1)
	go func() { done <- server.Run(ctx, cfg, slog.New(slog.NewTextHandler(io.Discard, nil))) }()
	testutil.Eventually(t, 60*time.Second, func() bool {
		code, _ := scrapeStatus("http://" + cfg.Listen + "/readyz")
		return code == 200
	}, "occ server on %s never became ready", cfg.Listen)
	cancel()
	if err := <-done; err != nil {
		t.Fatalf("occ server: %v", err)
	}
}

// scrapeStatus GETs url with a 5 s deadline: its status and body, or 0
// when nothing answered (yet).
func scrapeStatus(url string) (int, string) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, ""
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return 0, ""
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	return resp.StatusCode, string(b)
}

// TestRunWarnsOfExposedDatabaseFiles: occ server and occ worker log a
// warning naming the SQLite database file, with its mode, when other users
// may read it (a database made before new ones were created 0600), and
// start all the same; a private database gets no warning.
func TestRunWarnsOfExposedDatabaseFiles(t *testing.T) {
	const warning = "database file is accessible to other users"
	for _, tt := range []struct {
		name string
		run  func(context.Context, config.Config, *slog.Logger) error
		mode os.FileMode
		want string // the mode the warning names; "" for no warning
	}{
		{"occ server, 0644", server.Run, 0o644, "0644"},
		{"occ server, 0640", server.Run, 0o640, "0640"},
		{"occ server, 0600", server.Run, 0o600, ""},
		{"occ worker, 0604", server.RunWorker, 0o604, "0604"},
		{"occ worker, 0600", server.RunWorker, 0o600, ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			cfg := runConfig(t)
			runUntilReady(t, cfg) // creates and migrates the database, 0600
			db := filepath.Join(cfg.DataDir, "occ.db")
			if err := os.Chmod(db, tt.mode); err != nil {
				t.Fatal(err)
			}
			cfg.MetricsListen = testutil.FreeAddr(t)
			logs, stop := startRun(t, tt.name, tt.run, cfg)
			// Both serve the database's series once the store is open;
			// the warning comes before. (The metrics listener itself is
			// bound before the database is opened.)
			testutil.Eventually(t, 60*time.Second, func() bool {
				code, body := scrapeStatus("http://" + cfg.MetricsListen + "/metrics")
				return code == 200 && strings.Contains(body, "go_sql_open_connections")
			}, "%s never served its database's metrics", tt.name)
			stop()
			var dbWarning bool
			for _, line := range strings.Split(logs.String(), "\n") {
				if !strings.Contains(line, warning) {
					continue
				}
				if tt.want == "" {
					t.Errorf("a warning for a private database: %s", line)
				}
				if strings.Contains(line, "path="+db+" ") {
					dbWarning = true
					if !strings.Contains(line, "mode="+tt.want) {
						t.Errorf("the warning names another mode than %s: %s", tt.want, line)
					}
				}
			}
			if tt.want != "" && !dbWarning {
				t.Errorf("no warning naming %s; the log:\n%s", db, logs)
			}
		})
	}
}

// TestRunWorkerHealth: "occ worker" with --worker-health-listen answers
// GET /healthz and /readyz on that address and nothing else there (no
// metrics, no API); while its private PostgreSQL is stopped /readyz
// answers 503 DEPENDENCY_UNAVAILABLE and /healthz stays 200 (an outage is
// not a stuck loop: restarting the process would not bring the database
// back), and once it is started again /readyz answers 200 without a
// restart. A stuck loop is TestHealthReportsAStuckLoop's (internal/worker)
// and TestWorkerProbesAnswerAStuckLoop's.
func TestRunWorkerHealth(t *testing.T) {
	cluster := testdb.NewCluster(t)
	cfg := runConfig(t)
	cfg.DatabaseURL = cluster.URL()
	runUntilReady(t, cfg) // migrates; occ worker does not
	cfg.WorkerHealthListen = testutil.FreeAddr(t)
	logs, stop := startRun(t, "occ worker", server.RunWorker, cfg)
	base := "http://" + cfg.WorkerHealthListen
	type probe struct {
		Status int
		Body   string
	}
	reqID := regexp.MustCompile(`"requestId":"req_[0-9a-f]{32}"`)
	get := func(path string) probe {
		code, body := scrapeStatus(base + path)
		return probe{code, reqID.ReplaceAllString(strings.TrimSpace(body), `"requestId":"req_…"`)}
	}
	testutil.Eventually(t, 60*time.Second, func() bool { return get("/readyz").Status == 200 },
		"occ worker never answered /readyz with 200 on %s; its log:\n%s", base, logs)
	got := map[string]probe{"/healthz": get("/healthz"), "/readyz": get("/readyz")}
	for _, p := range []string{"/metrics", "/namespaces", "/debug/pprof/"} {
		got[p] = probe{Status: get(p).Status}
	}
	want := map[string]probe{
		"/healthz":      {200, `{"data":{"status":"ok"},"meta":{"requestId":"req_…"}}`},
		"/readyz":       {200, `{"data":{"status":"ready"},"meta":{"requestId":"req_…"}}`},
		"/metrics":      {Status: 404},
		"/namespaces":   {Status: 404},
		"/debug/pprof/": {Status: 404},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Fatalf("probes while the database is up (-want +got):\n%s", diff)
	}

	cluster.Stop()
	testutil.Eventually(t, 30*time.Second, func() bool { return get("/readyz").Status == 503 },
		"/readyz still %+v with the database stopped", get("/readyz"))
	wantDown := probe{503, `{"error":{"code":"DEPENDENCY_UNAVAILABLE","message":"A service this request depends on is unavailable; try again later."},"meta":{"requestId":"req_…"}}`}
	if diff := cmp.Diff(wantDown, get("/readyz")); diff != "" {
		t.Errorf("/readyz with the database stopped (-want +got):\n%s", diff)
	}
	// The loops meet the outage on their next look (1 poll, 500 ms) and
	// back off; liveness is unaffected for longer than a probe period.
	for range 6 {
		if p := get("/healthz"); p.Status != 200 {
			t.Fatalf("/healthz with the database stopped = %+v, want 200", p)
		}
		time.Sleep(500 * time.Millisecond)
	}

	cluster.Start()
	testutil.Eventually(t, 60*time.Second, func() bool { return get("/readyz").Status == 200 },
		"/readyz still %+v after the database was started again", get("/readyz"))
	stop()
	if code, _ := scrapeStatus(base + "/healthz"); code != 0 {
		t.Errorf("the health listener still answers (%d) after occ worker stopped", code)
	}
}
