package sqlstore_test

import (
	"context"
	"io/fs"
	"os"
	"path/filepath"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// TestNewDatabaseFilesArePrivate: a database the store creates, and the
// WAL and shared-memory files SQLite makes beside it, are 0600 under a
// umask of 022, through the data directory and through a sqlite:/// URL,
// even in a directory others can read. An existing file keeps its mode.
func TestNewDatabaseFilesArePrivate(t *testing.T) {
	old := syscall.Umask(0o022)
	t.Cleanup(func() { syscall.Umask(old) })
	// The stores stay open until the test ends: while one is open (as occ
	// server holds it) the WAL and shared-memory files exist, and the
	// migrations have written to them.
	open := func(t *testing.T, url, dir string) { openMigrated(t, url, dir) }
	modes := func(t *testing.T, db string) map[string]fs.FileMode {
		t.Helper()
		got := map[string]fs.FileMode{}
		for _, f := range []string{db, db + "-wal", db + "-shm"} {
			fi, err := os.Stat(f)
			if err != nil {
				t.Fatal(err)
			}
			got[filepath.Base(f)] = fi.Mode().Perm()
		}
		return got
	}
	private := map[string]fs.FileMode{"occ.db": 0o600, "occ.db-wal": 0o600, "occ.db-shm": 0o600}

	t.Run("data directory", func(t *testing.T) {
		dir := t.TempDir()
		if err := os.Chmod(dir, 0o755); err != nil {
			t.Fatal(err)
		}
		open(t, "", dir)
		if diff := cmp.Diff(private, modes(t, filepath.Join(dir, sqlstore.DefaultSQLiteFile))); diff != "" {
			t.Errorf("modes (-want +got):\n%s", diff)
		}
	})
	t.Run("sqlite URL", func(t *testing.T) {
		db := filepath.Join(t.TempDir(), "occ.db")
		open(t, "sqlite://"+db, "")
		if diff := cmp.Diff(private, modes(t, db)); diff != "" {
			t.Errorf("modes (-want +got):\n%s", diff)
		}
	})
	t.Run("existing file keeps its mode", func(t *testing.T) {
		dir := t.TempDir()
		db := filepath.Join(dir, sqlstore.DefaultSQLiteFile)
		if err := os.WriteFile(db, nil, 0o640); err != nil {
			t.Fatal(err)
		}
		open(t, "", dir)
		fi, err := os.Stat(db)
		if err != nil {
			t.Fatal(err)
		}
		if fi.Mode().Perm() != 0o640 {
			t.Errorf("mode %o, want the existing 0640", fi.Mode().Perm())
		}
	})
}

// TestExposedFiles: the database files whose mode gives the group or other
// users any access are reported with their modes; the owner's own bits
// never count, and PostgreSQL has no files to report.
func TestExposedFiles(t *testing.T) {
	for _, tt := range []struct {
		name    string
		db, wal fs.FileMode
		want    []sqlstore.ExposedFile // paths relative to the data directory
	}{
		{name: "private", db: 0o600, wal: 0o600},
		{name: "owner execute is still private", db: 0o700, wal: 0o600},
		{name: "readable by all", db: 0o644, wal: 0o600,
			want: []sqlstore.ExposedFile{{Path: "occ.db", Mode: 0o644}}},
		{name: "group read", db: 0o640, wal: 0o600,
			want: []sqlstore.ExposedFile{{Path: "occ.db", Mode: 0o640}}},
		{name: "others write only", db: 0o602, wal: 0o600,
			want: []sqlstore.ExposedFile{{Path: "occ.db", Mode: 0o602}}},
		{name: "the WAL file", db: 0o600, wal: 0o604,
			want: []sqlstore.ExposedFile{{Path: "occ.db-wal", Mode: 0o604}}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			s := openMigrated(t, "", dir)
			db := filepath.Join(dir, sqlstore.DefaultSQLiteFile)
			if err := os.Chmod(db, tt.db); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(db+"-wal", tt.wal); err != nil {
				t.Fatal(err)
			}
			got, err := s.ExposedFiles()
			if err != nil {
				t.Fatal(err)
			}
			var want []sqlstore.ExposedFile
			for _, f := range tt.want {
				want = append(want, sqlstore.ExposedFile{Path: filepath.Join(dir, f.Path), Mode: f.Mode})
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ExposedFiles (-want +got):\n%s", diff)
			}
		})
	}
	t.Run("postgres", func(t *testing.T) {
		got, err := testdb.Postgres(t).ExposedFiles()
		if err != nil || got != nil {
			t.Errorf("ExposedFiles on PostgreSQL = %v, %v; want none", got, err)
		}
	})
}

// openMigrated opens and migrates a store on url or, without one, in dir;
// it is closed when the test ends.
func openMigrated(t *testing.T, url, dir string) *sqlstore.Store {
	t.Helper()
	ctx := context.Background()
	s, err := sqlstore.Open(ctx, url, dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s
}
