package testdb

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"os/user"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// Cluster is a private, throw-away PostgreSQL server for a test that must
// stop and start its database: the shared server of OCC_TEST_POSTGRES_URL
// serves other tests and engineers and is never stopped. It listens on a
// free loopback port with trust authentication and durability off (as
// scripts/testenv/postgres.sh), in a temporary directory removed when the
// test ends.
//
// The postmaster runs in the foreground as a child of the test process,
// as the OS user "postgres" when the test runs as root (PostgreSQL refuses
// root), with a parent-death signal: if the test binary dies (timeout,
// kill -9) the server shuts down instead of outliving it.
type Cluster struct {
	t    testing.TB
	bin  string // directory of initdb and postgres
	dir  string // temporary root: data/, socket, log
	port int
	cred *syscall.Credential // nil: run as the current user

	mu   sync.Mutex
	proc *exec.Cmd
	done chan struct{}
}

// EnvPostgresBin overrides where the PostgreSQL server binaries are found
// (a directory holding initdb and postgres).
const EnvPostgresBin = "OCC_TEST_POSTGRES_BIN"

// clusterStartTimeout bounds one start, until the server accepts
// connections; initdb is bounded by setupTimeout.
const clusterStartTimeout = time.Minute

// postgresBin finds the newest /usr/lib/postgresql/<version>/bin with
// initdb and postgres, as scripts/testenv/postgres.sh does.
func postgresBin() (string, error) {
	if d := os.Getenv(EnvPostgresBin); d != "" {
		return d, nil
	}
	dirs, _ := filepath.Glob("/usr/lib/postgresql/*/bin")
	slices.SortFunc(dirs, func(a, b string) int {
		va, _ := strconv.Atoi(filepath.Base(filepath.Dir(a)))
		vb, _ := strconv.Atoi(filepath.Base(filepath.Dir(b)))
		return va - vb
	})
	for i := len(dirs) - 1; i >= 0; i-- {
		if isExec(filepath.Join(dirs[i], "initdb")) && isExec(filepath.Join(dirs[i], "postgres")) {
			return dirs[i], nil
		}
	}
	return "", errors.New("no PostgreSQL server binaries (initdb, postgres) in /usr/lib/postgresql/*/bin; install the Debian 'postgresql' package or set " + EnvPostgresBin)
}

func isExec(p string) bool {
	fi, err := os.Stat(p)
	return err == nil && !fi.IsDir() && fi.Mode()&0o111 != 0
}

// NewCluster initialises and starts a private cluster. Without the server
// binaries it skips the test, or fails it when CI=true.
func NewCluster(t testing.TB) *Cluster {
	t.Helper()
	bin, err := postgresBin()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("testdb: CI=true requires a private PostgreSQL cluster: %v", err)
		}
		t.Skipf("testdb: %v", err)
	}
	// Not t.TempDir: user postgres must reach the directory, and the
	// test's temporary directories are 0700 under a root-owned parent.
	dir, err := os.MkdirTemp("", "occ-pgcluster-")
	if err != nil {
		t.Fatal(err)
	}
	c := &Cluster{t: t, bin: bin, dir: dir}
	t.Cleanup(func() {
		c.Stop()
		_ = os.RemoveAll(dir)
	})
	if os.Geteuid() == 0 {
		u, err := user.Lookup("postgres")
		if err != nil {
			t.Fatalf("testdb: running as root, and PostgreSQL refuses root: no OS user postgres (created by the Debian package): %v", err)
		}
		uid, _ := strconv.Atoi(u.Uid)
		gid, _ := strconv.Atoi(u.Gid)
		c.cred = &syscall.Credential{Uid: uint32(uid), Gid: uint32(gid)}
		if err := os.Chown(dir, uid, gid); err != nil {
			t.Fatal(err)
		}
	}
	if c.port, err = freePort(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, filepath.Join(bin, "initdb"), "-D", c.data(), "-U", "postgres", "--auth=trust",
		"--no-sync", "-E", "UTF8", "--locale=C.UTF-8")
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGKILL}
	cmd.Dir = dir
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("testdb: initdb: %v\n%s", err, out)
	}
	c.Start()
	return c
}

func (c *Cluster) data() string { return filepath.Join(c.dir, "data") }

// URL is the cluster's "postgres" database, with the test session time
// zone, as Postgres gives.
func (c *Cluster) URL() string {
	return fmt.Sprintf("postgres://postgres@127.0.0.1:%d/postgres?sslmode=disable&timezone=%s", c.port, testTimeZone)
}

// Start starts the server on its port and returns when it accepts
// connections; the test fails if it does not within a minute.
func (c *Cluster) Start() {
	c.t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc != nil {
		c.t.Fatal("testdb: cluster started twice")
	}
	// Opened by this process and inherited: the server's own user need
	// not be able to create it.
	logf, err := os.OpenFile(filepath.Join(c.dir, "postgres.log"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		c.t.Fatal(err)
	}
	defer logf.Close()
	cmd := exec.Command(filepath.Join(c.bin, "postgres"), "-D", c.data(), "-p", strconv.Itoa(c.port), "-k", c.dir,
		"-c", "listen_addresses=127.0.0.1", "-c", "fsync=off", "-c", "synchronous_commit=off",
		"-c", "full_page_writes=off", "-c", "max_connections=100")
	// SIGQUIT is PostgreSQL's immediate shutdown: the server and its
	// backends exit at once when the test binary dies.
	cmd.SysProcAttr = &syscall.SysProcAttr{Credential: c.cred, Pdeathsig: syscall.SIGQUIT, Setpgid: true}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		c.t.Fatalf("testdb: start postgres: %v", err)
	}
	done := make(chan struct{})
	go func() { _ = cmd.Wait(); close(done) }()
	c.proc, c.done = cmd, done

	db, err := sql.Open("pgx", c.URL())
	if err != nil {
		c.t.Fatal(err)
	}
	defer db.Close()
	deadline := time.Now().Add(clusterStartTimeout)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		err := db.PingContext(ctx)
		cancel()
		if err == nil {
			return
		}
		select {
		case <-done:
			b, _ := os.ReadFile(logf.Name())
			c.t.Fatalf("testdb: postgres exited at start:\n%s", b)
		default:
		}
		if time.Now().After(deadline) {
			b, _ := os.ReadFile(logf.Name())
			c.t.Fatalf("testdb: postgres does not accept connections after %s: %v\n%s", clusterStartTimeout, err, b)
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// Stop shuts the server down as "pg_ctl stop -m fast" does (SIGINT: open
// sessions are ended, then the server exits) and waits for it; stopping a
// stopped cluster does nothing. If it has not exited within a minute it is
// killed.
func (c *Cluster) Stop() {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.proc == nil {
		return
	}
	_ = c.proc.Process.Signal(syscall.SIGINT)
	select {
	case <-c.done:
	case <-time.After(time.Minute):
		_ = syscall.Kill(-c.proc.Process.Pid, syscall.SIGKILL)
		<-c.done
		c.t.Error("testdb: postgres did not stop within a minute after SIGINT; killed")
	}
	c.proc, c.done = nil, nil
}

// freePort returns a loopback TCP port that was free a moment ago.
func freePort() (int, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return 0, err
	}
	defer ln.Close()
	return ln.Addr().(*net.TCPAddr).Port, nil
}
