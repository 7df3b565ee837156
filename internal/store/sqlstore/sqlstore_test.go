package sqlstore_test

import (
	"context"
	"database/sql"
	"net/url"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"
	_ "time/tzdata" // the zone below must load on machines without tzdata

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/store/storetest"
	"github.com/openclaw/occ/internal/testdb"
)

// A non-UTC local zone catches times that are formatted or compared in
// time.Local instead of UTC.
func init() {
	loc, err := time.LoadLocation("America/New_York")
	if err != nil {
		panic(err)
	}
	time.Local = loc
}

func harness(s *sqlstore.Store) storetest.Harness {
	return storetest.Harness{Store: s, DB: s.DB(), Engine: s.Engine()}
}

func TestStore(t *testing.T) {
	t.Run("sqlite", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Harness { return harness(testdb.SQLite(t)) })
	})
	t.Run("postgres", func(t *testing.T) {
		storetest.Run(t, func(t *testing.T) storetest.Harness { return harness(testdb.Postgres(t)) })
	})
}

func testCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func TestOpenSQLiteDefault(t *testing.T) {
	ctx := testCtx(t)
	dir := filepath.Join(t.TempDir(), "data", "occ")
	s, err := sqlstore.Open(ctx, "", dir)
	if err != nil {
		t.Fatalf("Open(%q, %q): %v", "", dir, err)
	}
	defer s.Close()
	if got := s.Engine(); got != sqlstore.EngineSQLite {
		t.Errorf("Engine() = %q, want %q", got, sqlstore.EngineSQLite)
	}
	fi, err := os.Stat(dir)
	if err != nil {
		t.Fatalf("data directory: %v", err)
	}
	if perm := fi.Mode().Perm(); perm != 0o700 {
		t.Errorf("data directory mode = %o, want 700", perm)
	}
	if err := s.Migrate(ctx); err != nil {
		t.Fatalf("Migrate: %v", err)
	}
	if _, err := os.Stat(filepath.Join(dir, sqlstore.DefaultSQLiteFile)); err != nil {
		t.Errorf("database file: %v", err)
	}
	// The connection pragmas the store depends on.
	for pragma, want := range map[string]string{"journal_mode": "wal", "foreign_keys": "1", "busy_timeout": "10000"} {
		var got string
		if err := s.DB().QueryRowContext(ctx, "PRAGMA "+pragma).Scan(&got); err != nil {
			t.Fatalf("PRAGMA %s: %v", pragma, err)
		}
		if got != want {
			t.Errorf("PRAGMA %s = %q, want %q", pragma, got, want)
		}
	}
}

func TestOpenSQLiteURLs(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	odd := filepath.Join(dir, "a dir?#%", "x.db") // characters a URI would misread
	if err := os.MkdirAll(filepath.Dir(odd), 0o700); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		url  string
		file string
	}{
		{"sqlite://" + filepath.Join(dir, "one.db"), filepath.Join(dir, "one.db")},
		{"file:" + filepath.Join(dir, "two.db"), filepath.Join(dir, "two.db")},
		{"file://" + filepath.Join(dir, "three.db"), filepath.Join(dir, "three.db")},
		{"sqlite://" + (&url.URL{Path: odd}).EscapedPath(), odd},
		{"", filepath.Join(filepath.Dir(odd), sqlstore.DefaultSQLiteFile)}, // data directory with odd characters
	}
	for _, tt := range tests {
		s, err := sqlstore.Open(ctx, tt.url, filepath.Dir(odd))
		if err != nil {
			t.Errorf("Open(%q): %v", tt.url, err)
			continue
		}
		if err := s.Migrate(ctx); err != nil {
			t.Errorf("Migrate on %q: %v", tt.url, err)
		}
		_ = s.Close()
		if _, err := os.Stat(tt.file); err != nil {
			t.Errorf("Open(%q) did not create %s: %v", tt.url, tt.file, err)
		}
	}
}

func TestOpenRefusesBadURLs(t *testing.T) {
	ctx := testCtx(t)
	tests := []struct{ name, url, wantInErr string }{
		{"unknown scheme", "mysql://root:hunter2@db/occ", `"mysql"`},
		{"no scheme", "just-a-path.db", "unsupported"},
		{"relative sqlite URL", "sqlite://relative.db", "sqlite:///absolute/path"},
		{"sqlite URL with parameters", "sqlite:///tmp/x.db?_pragma=foreign_keys(0)", "not supported"},
		{"file URL with parameters", "file:/tmp/x.db?mode=memory", "not supported"},
		{"file URL with a host", "file://server/x.db", "malformed"},
		{"sqlite URL naming a directory", "sqlite:///tmp/", "names no file"},
		{"malformed postgres URL", "postgres://user:hunter2@host:notaport/db", "malformed"},
	}
	for _, tt := range tests {
		s, err := sqlstore.Open(ctx, tt.url, t.TempDir())
		if err == nil {
			_ = s.Close()
			t.Errorf("Open(%s) succeeded, want an error", tt.name)
			continue
		}
		if !strings.Contains(err.Error(), tt.wantInErr) {
			t.Errorf("Open(%s) error %q does not mention %q", tt.name, err, tt.wantInErr)
		}
		if strings.Contains(err.Error(), "hunter2") {
			t.Errorf("Open(%s) error leaks the password: %q", tt.name, err)
		}
	}
	if _, err := sqlstore.Open(ctx, "", ""); err == nil {
		t.Errorf("Open with neither URL nor data directory succeeded")
	}
}

func TestOpenPostgresUnreachableHidesPassword(t *testing.T) {
	ctx := testCtx(t)
	for _, url := range []string{
		"postgres://occ:hunter2@127.0.0.1:1/occ?sslmode=disable&connect_timeout=2",
		"postgresql://occ@127.0.0.1:1/occ?sslmode=disable&password=hunter2&connect_timeout=2",
		"postgres://occ:hun%40ter2@127.0.0.1:1/occ?sslmode=disable&connect_timeout=2",
		// The client key's passphrase is a secret too.
		"postgres://occ@127.0.0.1:1/occ?sslmode=disable&sslpassword=hunter2&connect_timeout=2",
		"postgres://occ@127.0.0.1:1/occ?sslmode=disable&SSLPassword=hun%40ter2&connect_timeout=2",
	} {
		s, err := sqlstore.Open(ctx, url, "")
		if err == nil {
			_ = s.Close()
			t.Fatalf("Open of a closed port succeeded")
		}
		if !errkind.Is(err, errkind.Unavailable) {
			t.Errorf("Open of a closed port: kind %v, want Unavailable: %v", errkind.KindOf(err), err)
		}
		for _, secret := range []string{"hunter2", "hun@ter2", "hun%40ter2"} {
			if strings.Contains(err.Error(), secret) {
				t.Errorf("Open error leaks the password: %q", err)
			}
		}
	}
}

// TestPoolCap: with SetMaxConnections(2) and both connections held, a
// store query waits for one instead of opening a third, and when its
// deadline passes first it fails as Unavailable (503), not as an internal
// error; once a connection is free the same query is served.
func TestPoolCap(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := testCtx(t)
		s.SetMaxConnections(2)
		if got := s.DB().Stats().MaxOpenConnections; got != 2 {
			t.Fatalf("MaxOpenConnections = %d, want 2", got)
		}
		var held []*sql.Conn
		for range 2 {
			c, err := s.DB().Conn(ctx)
			if err != nil {
				t.Fatal(err)
			}
			held = append(held, c)
		}
		short, cancel := context.WithTimeout(ctx, 300*time.Millisecond)
		defer cancel()
		_, err := s.GetRole(short, ids.New("role"))
		if !errkind.Is(err, errkind.Unavailable) {
			t.Errorf("GetRole with the pool exhausted: %v (kind %v), want Unavailable", err, errkind.KindOf(err))
		}
		if st := s.DB().Stats(); st.OpenConnections != 2 || st.WaitCount == 0 {
			t.Errorf("pool stats %+v: want 2 open connections and a wait", st)
		}
		mustClose(t, held[0])
		if _, err := s.GetRole(ctx, ids.New("role")); !errkind.Is(err, errkind.NotFound) {
			t.Errorf("GetRole with a connection free: %v, want NotFound", err)
		}
		mustClose(t, held[1])
	})
}

func mustClose(t *testing.T, c *sql.Conn) {
	t.Helper()
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestMigrateTwiceAndDown(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := testCtx(t)
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("second Migrate: %v", err)
		}
		if err := sqlstore.MigrateDownForTest(ctx, s); err != nil {
			t.Fatalf("migrate down: %v", err)
		}
		var tables []string
		q := `SELECT name FROM sqlite_schema WHERE type IN ('table', 'trigger', 'view') AND name NOT LIKE 'sqlite_%' AND name <> 'goose_db_version'`
		if s.Engine() == sqlstore.EnginePostgres {
			q = `SELECT table_name FROM information_schema.tables WHERE table_schema = 'public' AND table_name <> 'goose_db_version'
				UNION ALL SELECT routine_name FROM information_schema.routines WHERE routine_schema = 'public'`
		}
		rows, err := s.DB().QueryContext(ctx, q)
		if err != nil {
			t.Fatal(err)
		}
		defer rows.Close()
		for rows.Next() {
			var n string
			if err := rows.Scan(&n); err != nil {
				t.Fatal(err)
			}
			tables = append(tables, n)
		}
		if len(tables) != 0 {
			t.Errorf("after migrating down, these remain: %v", tables)
		}
		// And up again from nothing.
		if err := s.Migrate(ctx); err != nil {
			t.Fatalf("Migrate after down: %v", err)
		}
	})
}

func TestTxBoundStoreRefusesOwnerOperations(t *testing.T) {
	s := testdb.SQLite(t)
	ctx := testCtx(t)
	err := s.InTx(ctx, func(tx store.Store) error {
		txs, ok := tx.(*sqlstore.Store)
		if !ok {
			t.Fatalf("InTx passed %T, want *sqlstore.Store", tx)
		}
		if err := txs.Close(); err == nil {
			t.Errorf("Close on a transaction-bound store succeeded")
		}
		if err := txs.Migrate(ctx); err == nil {
			t.Errorf("Migrate on a transaction-bound store succeeded")
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	// The owner's pool is still open.
	if err := s.DB().PingContext(ctx); err != nil {
		t.Errorf("ping after tx: %v", err)
	}
}

// sqliteNewerFunctions are SQL functions that SQLite added after 3.40,
// the sqlite3 of Debian 12 (concat and concat_ws 3.44, string_agg 3.44,
// unhex 3.41, octet_length 3.43, timediff 3.43, if 3.48, unistr 3.50, the
// jsonb functions 3.45, json_pretty 3.46).
var sqliteNewerFunctions = regexp.MustCompile(`(?i)\b(concat|concat_ws|string_agg|unhex|octet_length|timediff|if|unistr|json_pretty|jsonb\w*)\s*\(`)

// TestSQLiteSchemaReadableByOlderSQLite: the migrated SQLite schema calls
// no function that SQLite added after 3.40, so an operator's older SQLite
// tool can still check, inspect and repair occ.db. OCC's own driver is
// newer, so nothing else would notice: with concat_ws in an index
// expression, Debian 12's sqlite3 (3.40.1) failed PRAGMA integrity_check
// with "unknown function: concat_ws()".
func TestSQLiteSchemaReadableByOlderSQLite(t *testing.T) {
	ctx := testCtx(t)
	s, err := sqlstore.Open(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	rows, err := s.DB().QueryContext(ctx, `SELECT type, name, sql FROM sqlite_schema WHERE sql IS NOT NULL`)
	if err != nil {
		t.Fatal(err)
	}
	defer rows.Close()
	n := 0
	for rows.Next() {
		var typ, name, text string
		if err := rows.Scan(&typ, &name, &text); err != nil {
			t.Fatal(err)
		}
		n++
		if m := sqliteNewerFunctions.FindString(text); m != "" {
			t.Errorf("%s %s calls %q, newer than SQLite 3.40:\n%s", typ, name, m, text)
		}
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	if n < 20 {
		t.Fatalf("read %d schema entries; the migrated schema has more", n)
	}
}
