package server_test

import (
	"io"
	"log/slog"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openclaw/occ/internal/config"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testutil"
)

// TestRunFailsBeforeTouchingTheDatabase: a start that cannot serve (the
// API or metrics port taken, a certificate pair that does not load) fails
// before it migrates the database or creates the administrator, whose
// generated one-time password would otherwise be printed above the error
// and never again.
func TestRunFailsBeforeTouchingTheDatabase(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := busy.Addr().String()
	bad := t.TempDir()
	badCert, badKey := filepath.Join(bad, "tls.crt"), filepath.Join(bad, "tls.key")
	for _, p := range []string{badCert, badKey} {
		if err := os.WriteFile(p, []byte("not PEM\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct {
		name    string
		change  func(*config.Config)
		wantErr string
	}{
		{"API port taken", func(c *config.Config) { c.Listen, c.PublicOrigin = taken, "http://"+taken }, "listen on " + taken},
		{"metrics port taken", func(c *config.Config) { c.MetricsListen = taken }, "metrics listen on " + taken},
		{"certificate pair does not load", func(c *config.Config) { c.TLSCertFile, c.TLSKeyFile = badCert, badKey }, "tls"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := config.Default()
			cfg.DataDir, cfg.ComputeDriver = filepath.Join(t.TempDir(), "data"), "none"
			cfg.Listen, cfg.PublicOrigin = "127.0.0.1:0", "http://127.0.0.1:0"
			tt.change(&cfg)
			err := server.Run(testutil.Context(t), cfg, slog.New(slog.NewTextHandler(io.Discard, nil)))
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Fatalf("Run(%s) = %v, want an error containing %q", tt.name, err, tt.wantErr)
			}
			if migrated, admins := databaseState(t, cfg.DataDir); migrated || admins != 0 {
				t.Errorf("after Run(%s) failed: database migrated %v, %d administrators; want neither", tt.name, migrated, admins)
			}
		})
	}
}

// databaseState reports whether the embedded database in dataDir has the
// schema, and how many users it holds.
func databaseState(t *testing.T, dataDir string) (migrated bool, users int) {
	t.Helper()
	if _, err := os.Stat(filepath.Join(dataDir, sqlstore.DefaultSQLiteFile)); os.IsNotExist(err) {
		return false, 0
	}
	ctx := testutil.Context(t)
	st, err := sqlstore.Open(ctx, "", dataDir)
	if err != nil {
		t.Fatal(err)
	}
	defer st.Close()
	var tables int
	if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM sqlite_master WHERE type = 'table' AND name = 'users'`).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables == 0 {
		return false, 0
	}
	if err := st.DB().QueryRowContext(ctx, `SELECT count(*) FROM users`).Scan(&users); err != nil {
		t.Fatal(err)
	}
	return true, users
}
