package server_test

import (
	"bytes"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"

	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// TestBootstrap: the first start creates the administrator and prints a
// generated password exactly once; the password works; later starts do
// nothing and print nothing.
func TestBootstrap(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		srv := server.New(server.Options{Store: st, PublicOrigin: testOrigin})
		var out bytes.Buffer
		created, err := srv.Service.Bootstrap(t.Context(), occ.BootstrapInput{Out: &out})
		if err != nil || !created {
			t.Fatalf("first Bootstrap: created=%v err=%v", created, err)
		}
		m := regexp.MustCompile(`(?m)^    (\S+)$`).FindStringSubmatch(out.String())
		if m == nil {
			t.Fatalf("first Bootstrap printed no password: %q", out.String())
		}
		if !strings.Contains(out.String(), "admin@localhost") {
			t.Errorf("bootstrap output does not name the default administrator: %q", out.String())
		}
		e := &env{t: t, srv: srv, clock: newClock(), store: st}
		e.signIn("admin@localhost", m[1])

		out.Reset()
		created, err = srv.Service.Bootstrap(t.Context(), occ.BootstrapInput{Out: &out})
		if err != nil || created || out.Len() != 0 {
			t.Fatalf("second Bootstrap: created=%v err=%v output=%q; want nothing", created, err, out.String())
		}
	})
}

func TestBootstrapPasswordFile(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name, content string
		wantErr       bool
		errHas        string // with wantErr: a part of the error that tells which check refused
	}{
		{"trailing newline ignored", "a-long-enough-password\n", false, ""},
		{"empty", "", true, "empty"},
		{"too short for the policy", "short\n", true, "at least 12 bytes"},
		// The file limit (4096 bytes) is above the password policy's 1024:
		// a file at it is read and then refused by the policy.
		{"4096 bytes reach the policy", strings.Repeat("x", 4096), true, "at most 1024 bytes"},
		{"over 4096 bytes", strings.Repeat("x", 4097), true, "larger than 4096 bytes"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			st := testdb.SQLite(t)
			srv := server.New(server.Options{Store: st, PublicOrigin: testOrigin})
			p := filepath.Join(dir, strings.ReplaceAll(tc.name, " ", "-"))
			if err := os.WriteFile(p, []byte(tc.content), 0o600); err != nil {
				t.Fatal(err)
			}
			var out bytes.Buffer
			_, err := srv.Service.Bootstrap(t.Context(), occ.BootstrapInput{AdminEmail: "root@example.com", PasswordFile: p, Out: &out})
			if (err != nil) != tc.wantErr {
				t.Fatalf("Bootstrap err = %v, wantErr %v", err, tc.wantErr)
			}
			if err != nil && !strings.Contains(err.Error(), tc.errHas) {
				t.Errorf("Bootstrap err = %v, want one containing %q", err, tc.errHas)
			}
			if err != nil && strings.Contains(err.Error(), strings.TrimSpace(tc.content)) && tc.content != "" {
				t.Errorf("error %q repeats the password", err)
			}
			if out.Len() != 0 {
				t.Errorf("Bootstrap with a password file printed %q", out.String())
			}
		})
	}
}
