package testdb

import (
	"context"
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"net/url"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	_ "github.com/jackc/pgx/v5/stdlib" // database/sql driver "pgx" for the admin connection

	"github.com/openclaw/occ/internal/store/sqlstore"
)

// EnvPostgresURL names the PostgreSQL server for tests.
const EnvPostgresURL = "OCC_TEST_POSTGRES_URL"

// testTimeZone is the session time zone of every test connection to
// PostgreSQL, so that SQL which leans on the server's zone shows up as a
// wrong time rather than passing by luck on a UTC server.
const testTimeZone = "America/New_York"

// setupTimeout bounds opening, migrating, cloning and dropping a database.
const setupTimeout = 2 * time.Minute

// SQLite returns a migrated store on a new database file in t.TempDir(),
// closed when the test ends.
func SQLite(t testing.TB) *sqlstore.Store {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	s, err := sqlstore.Open(ctx, "", t.TempDir())
	if err != nil {
		t.Fatalf("testdb: open SQLite: %v", err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("testdb: close SQLite: %v", err)
		}
	})
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("testdb: migrate SQLite: %v", err)
	}
	return s
}

// Postgres returns a migrated store on a new PostgreSQL database of its own,
// cloned from this process's template; the store is closed and the database
// dropped when the test ends. Without OCC_TEST_POSTGRES_URL it skips the
// test, or fails it when CI=true.
func Postgres(t testing.TB) *sqlstore.Store {
	t.Helper()
	s, _ := PostgresURL(t)
	return s
}

// PostgresURL is Postgres, and also returns the URL of the store's
// database, for tests that point a client (pg_dump, an occ command) at it.
func PostgresURL(t testing.TB) (*sqlstore.Store, string) {
	t.Helper()
	srv, name := pgClone(t, "")
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()
	s, err := sqlstore.Open(ctx, srv.urlFor(name), "")
	if err != nil {
		t.Fatalf("testdb: open PostgreSQL database %s: %v", name, err)
	}
	t.Cleanup(func() {
		if err := s.Close(); err != nil {
			t.Errorf("testdb: close PostgreSQL database %s: %v", name, err)
		}
	})
	return s, srv.urlFor(name)
}

// EmptyPostgres returns the URL of a new PostgreSQL database with no schema
// at all (a restore target), dropped when the test ends. It skips or fails
// as Postgres does.
func EmptyPostgres(t testing.TB) string {
	t.Helper()
	srv, name := pgClone(t, "template0")
	return srv.urlFor(name)
}

// pgClone creates a database from template (the migrated template when
// empty), dropped when the test ends.
func pgClone(t testing.TB, template string) (*pgServer, string) {
	t.Helper()
	raw := os.Getenv(EnvPostgresURL)
	if raw == "" {
		if os.Getenv("CI") == "true" {
			t.Fatalf("testdb: %s is not set, and CI=true requires the PostgreSQL tests to run: "+
				"start a server with scripts/testenv/postgres.sh start and set %s=$(scripts/testenv/postgres.sh url)",
				EnvPostgresURL, EnvPostgresURL)
		}
		t.Skipf("testdb: %s is not set; skipping PostgreSQL (scripts/testenv/postgres.sh start)", EnvPostgresURL)
	}
	ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
	defer cancel()

	srv, err := server(ctx, raw)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	name, err := srv.clone(ctx, template)
	if err != nil {
		t.Fatalf("testdb: %v", err)
	}
	// Registered before the store's Close, so it runs after it (cleanups run
	// last-in first-out) and the database has no connections left.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), setupTimeout)
		defer cancel()
		if err := srv.drop(ctx, name); err != nil {
			t.Errorf("testdb: %v", err)
		}
	})
	return srv, name
}

// Engines runs fn as the subtests "sqlite" and "postgres", each with a fresh
// migrated store. The postgres subtest skips (or fails under CI=true) as
// Postgres does.
func Engines(t *testing.T, fn func(t *testing.T, s *sqlstore.Store)) {
	t.Helper()
	t.Run(sqlstore.EngineSQLite, func(t *testing.T) { fn(t, SQLite(t)) })
	t.Run(sqlstore.EnginePostgres, func(t *testing.T) { fn(t, Postgres(t)) })
}

// pgServer is this process's connection to the test server: an admin pool,
// the connection that holds the process's liveness lock, and the template.
type pgServer struct {
	base     *url.URL // OCC_TEST_POSTGRES_URL
	admin    *sql.DB
	lockConn *sql.Conn // holds pg_advisory_lock(run key) until the process exits
	run      string    // random per process; every database name starts with occt_<run>_
	template string
	seq      atomic.Int64
}

var (
	srvOnce sync.Once
	srv     *pgServer
	srvErr  error
	srvURL  string
)

// server prepares the process-wide template on first use. The URL cannot
// change within a process; if it did, that is a test bug worth failing on.
func server(ctx context.Context, raw string) (*pgServer, error) {
	srvOnce.Do(func() {
		srvURL = raw
		srv, srvErr = newServer(ctx, raw)
	})
	if srvErr != nil {
		return nil, srvErr
	}
	if raw != srvURL {
		return nil, errors.New(EnvPostgresURL + " changed within one test process")
	}
	return srv, nil
}

const namePrefix = "occt_"

func newServer(ctx context.Context, raw string) (*pgServer, error) {
	base, err := url.Parse(raw)
	if err != nil { // url's error quotes the URL, password included
		return nil, errors.New(EnvPostgresURL + " is not a valid URL")
	}
	admin, err := sql.Open("pgx", raw)
	if err != nil {
		return nil, fmt.Errorf("open %s (%s): %w", EnvPostgresURL, base.Redacted(), err)
	}
	admin.SetMaxIdleConns(2)
	fail := func(err error) (*pgServer, error) {
		_ = admin.Close()
		return nil, err
	}
	if err := admin.PingContext(ctx); err != nil {
		return fail(fmt.Errorf("connect to %s (%s); is scripts/testenv/postgres.sh start running? %w", EnvPostgresURL, base.Redacted(), err))
	}

	var b [8]byte
	if _, err := rand.Read(b[:]); err != nil {
		return fail(err)
	}
	s := &pgServer{base: base, admin: admin, run: hex.EncodeToString(b[:])[:15]}
	s.template = namePrefix + s.run + "_tmpl"

	// The liveness lock: taken before any database is created, so a
	// concurrent sweep by another process can never mistake ours for litter.
	s.lockConn, err = admin.Conn(ctx)
	if err != nil {
		return fail(fmt.Errorf("admin connection: %w", err))
	}
	if _, err := s.lockConn.ExecContext(ctx, `SELECT pg_advisory_lock($1)`, runKey(s.run)); err != nil {
		return fail(fmt.Errorf("take liveness lock: %w", err))
	}
	s.sweep(ctx)

	if _, err := admin.ExecContext(ctx, `CREATE DATABASE `+quoteIdent(s.template)); err != nil {
		return fail(fmt.Errorf("create template database: %w", err))
	}
	st, err := sqlstore.Open(ctx, s.urlFor(s.template), "")
	if err != nil {
		return fail(fmt.Errorf("open template database: %w", err))
	}
	migErr := st.Migrate(ctx)
	// Close before cloning: CREATE DATABASE refuses a template with open
	// connections.
	if err := errors.Join(migErr, st.Close()); err != nil {
		return fail(fmt.Errorf("migrate template database: %w", err))
	}
	return s, nil
}

// runKey is the advisory lock key of a run id (15 hex digits fit an int64).
func runKey(run string) int64 {
	k, _ := strconv.ParseInt(run, 16, 64)
	return k
}

// sweep drops databases left by test processes that no longer run: their
// liveness lock is free. It is best effort; anything it misses is retried by
// the next process.
func (s *pgServer) sweep(ctx context.Context) {
	rows, err := s.admin.QueryContext(ctx, `SELECT datname FROM pg_database WHERE datname LIKE 'occt\_%'`)
	if err != nil {
		return
	}
	byRun := map[string][]string{}
	for rows.Next() {
		var name string
		if rows.Scan(&name) != nil {
			continue
		}
		run, _, ok := strings.Cut(strings.TrimPrefix(name, namePrefix), "_")
		if ok && len(run) == 15 && run != s.run {
			byRun[run] = append(byRun[run], name)
		}
	}
	_ = rows.Close()
	for run, names := range byRun {
		var free bool
		if err := s.lockConn.QueryRowContext(ctx, `SELECT pg_try_advisory_lock($1)`, runKey(run)).Scan(&free); err != nil || !free {
			continue // owner alive (or unknown): leave its databases alone
		}
		for _, name := range names {
			_ = s.drop(ctx, name)
		}
		_, _ = s.lockConn.ExecContext(ctx, `SELECT pg_advisory_unlock($1)`, runKey(run))
	}
}

// clone creates a new database from the template and returns its name.
func (s *pgServer) clone(ctx context.Context, template string) (string, error) {
	name := fmt.Sprintf("%s%s_%d", namePrefix, s.run, s.seq.Add(1))
	if template == "" {
		template = s.template
	}
	// Parallel tests clone concurrently: CREATE DATABASE only requires that
	// no session is connected to the template, and none is after newServer.
	// (Measured here: 70-120 ms per clone and drop, either copy strategy.)
	_, err := s.admin.ExecContext(ctx, `CREATE DATABASE `+quoteIdent(name)+` TEMPLATE `+quoteIdent(template))
	if err != nil {
		return "", fmt.Errorf("clone template into %s: %w", name, err)
	}
	return name, nil
}

// drop removes a database, disconnecting any session still on it.
func (s *pgServer) drop(ctx context.Context, name string) error {
	if _, err := s.admin.ExecContext(ctx, `DROP DATABASE IF EXISTS `+quoteIdent(name)+` WITH (FORCE)`); err != nil {
		return fmt.Errorf("drop database %s: %w", name, err)
	}
	return nil
}

// urlFor is the server URL pointed at database name, with the test session
// time zone (pgx passes unknown URL parameters to the server as settings).
func (s *pgServer) urlFor(name string) string {
	u := *s.base
	u.Path = "/" + name
	u.RawPath = ""
	q := u.Query()
	q.Set("timezone", testTimeZone)
	u.RawQuery = q.Encode()
	return u.String()
}

// quoteIdent quotes a PostgreSQL identifier.
func quoteIdent(s string) string {
	return `"` + strings.ReplaceAll(s, `"`, `""`) + `"`
}
