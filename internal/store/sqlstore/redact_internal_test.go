package sqlstore

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/testutil"
)

// TestRedactPostgresURLRefusesAmbiguous: a URL whose user information
// url.Parse and pgx read differently is refused by redactPostgresURL, and
// so by Open before pgx sees it, without the password in the error. In
// the first cases url.Parse takes "occ:<digits>" for host:port and finds
// no user, so the "redacted" form was the URL itself, and pgx's own error
// quoted the password as the database name ("failed to connect to
// `user=root database=s3cr3t@127.0.0.1:1/occ`").
func TestRedactPostgresURLRefusesAmbiguous(t *testing.T) {
	tests := []struct{ name, url, secret string }{
		{"slash after an empty port", "postgres://occ:/Zq9+s3cr3tPW@127.0.0.1:1/occ?connect_timeout=2", "s3cr3tPW"},
		{"slash after a digit port", "postgres://occ:1234/s3cr3t@127.0.0.1:1/occ?connect_timeout=2", "s3cr3t"},
		{"question mark", "postgresql://occ:?s3cr3t@127.0.0.1:1/occ", "s3cr3t"},
		{"question mark after digits", "postgres://occ:12?s3cr3t@127.0.0.1:1/occ", "s3cr3t"},
		{"hash after digits", "postgres://occ:42#s3cr3t@127.0.0.1:1/occ", "s3cr3t"},
		{"no path", "postgres://occ:/s3cr3t@127.0.0.1:1", "s3cr3t"},
		// url.Parse splits at the last '@', pgx at the first (it would
		// look up the host "s3cr3t@127.0.0.1").
		{"two at signs", "postgres://occ:pw@s3cr3t@127.0.0.1:1/occ", "s3cr3t"},
		// pgx would read "127.0.0.1:1?password=p" as the user information.
		{"at sign in a query without user", "postgres://127.0.0.1:1?password=p@s3cr3t", "s3cr3t"},
		{"slash after a non-numeric port", "postgres://occ:ab/s3cr3t@127.0.0.1:1/occ", "s3cr3t"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			display, _, err := redactPostgresURL(tt.url)
			if err == nil {
				t.Errorf("redactPostgresURL(%s) = %q, nil; want an error", tt.name, display)
			}
			s, err := Open(testutil.Context(t), tt.url, "")
			if err == nil {
				_ = s.Close()
				t.Fatalf("Open(%s) succeeded, want an error", tt.name)
			}
			if strings.Contains(err.Error(), tt.secret) {
				t.Errorf("Open(%s) error leaks the password: %v", tt.name, err)
			}
			if !strings.Contains(err.Error(), "percent-encode") {
				t.Errorf("Open(%s) error = %v, want it to say percent-encode", tt.name, err)
			}
		})
	}
}

// TestRedactPostgresURL: URLs that read the same way everywhere are shown
// without their password, which is among the secrets scrubbed from
// driver errors.
func TestRedactPostgresURL(t *testing.T) {
	tests := []struct {
		name, url, display string
		secrets            []string
	}{
		{"password", "postgres://occ:s3cr3t@db:5432/occ", "postgres://occ:xxxxx@db:5432/occ",
			[]string{"s3cr3t", "s3cr3t", "s3cr3t", "s3cr3t"}},
		{"encoded slash", "postgres://occ:12%2Fs3cr3t@db/occ", "postgres://occ:xxxxx@db/occ",
			[]string{"12/s3cr3t", "12%2Fs3cr3t", "12%2Fs3cr3t", "12%2Fs3cr3t"}},
		{"at sign in a query after a user", "postgres://occ@db/occ?application_name=a@b", "postgres://occ@db/occ?application_name=a@b", nil},
		{"at sign in the path after a user", "postgres://occ@db/o@cc", "postgres://occ@db/o@cc", nil},
		{"no user, no at sign", "postgres://db/occ?sslmode=disable", "postgres://db/occ?sslmode=disable", nil},
	}
	for _, tt := range tests {
		display, secrets, err := redactPostgresURL(tt.url)
		if err != nil {
			t.Errorf("redactPostgresURL(%s) error = %v", tt.name, err)
			continue
		}
		if diff := cmp.Diff(tt.display, display); diff != "" {
			t.Errorf("redactPostgresURL(%s) display (-want +got):\n%s", tt.name, diff)
		}
		if diff := cmp.Diff(tt.secrets, secrets); diff != "" {
			t.Errorf("redactPostgresURL(%s) secrets (-want +got):\n%s", tt.name, diff)
		}
	}
}
