package config

import (
	"bytes"
	"log/slog"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// ambiguousDatabaseURLs are PostgreSQL URLs whose user information
// url.Parse and pgx read differently, each with the secret that must never
// be shown. In the first ones url.Parse takes "occ:<digits>" for host:port
// and finds no user, so url.URL.Redacted hid nothing.
var ambiguousDatabaseURLs = []struct{ name, url, secret string }{
	{"slash after an empty port", "postgres://occ:/Zq9+s3cr3tPW@127.0.0.1:1/occ", "s3cr3tPW"},
	{"slash after a digit port", "postgres://occ:1234/s3cr3t@127.0.0.1:1/occ", "s3cr3t"},
	{"question mark", "postgresql://occ:?s3cr3t@db:5432/occ", "s3cr3t"},
	{"question mark after digits", "postgres://occ:12?s3cr3t@db/occ?sslmode=disable", "s3cr3t"},
	{"hash after digits", "postgres://occ:42#s3cr3t@db/occ", "s3cr3t"},
	{"no path", "postgres://occ:/s3cr3t@db", "s3cr3t"},
	// url.Parse splits at the last '@', pgx at the first.
	{"two at signs", "postgres://occ:pw@s3cr3t@db/occ", "s3cr3t"},
	// pgx would take "db?password=p" for the user information.
	{"at sign in a query without user", "postgres://db?password=p@s3cr3t", "s3cr3t"},
	{"upper-case scheme", "POSTGRES://occ:1234/s3cr3t@db/occ", "s3cr3t"},
	// url.Parse fails on the port "ab"; it was never refused up front.
	{"slash after a non-numeric port", "postgres://occ:ab/s3cr3t@db/occ", "s3cr3t"},
}

// TestAmbiguousDatabaseURLRefused: such a URL is refused by Load with a
// message telling the operator to percent-encode, and neither that
// message nor the logged configuration shows the password.
func TestAmbiguousDatabaseURLRefused(t *testing.T) {
	const want = "database URL cannot be read unambiguously (the value is not shown because it may contain a password): " +
		"percent-encode each /, ?, # and @ in its user name and password (as %2F, %3F, %23 and %40)"
	for _, tt := range ambiguousDatabaseURLs {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(parseFlags(t, "--database-url", tt.url), nil)
			switch {
			case err == nil:
				t.Errorf("load(--database-url %s) succeeded, want an error", tt.name)
			case strings.Contains(err.Error(), tt.secret):
				t.Errorf("load(--database-url %s) error leaks the password: %s", tt.name, err)
			default:
				if diff := cmp.Diff(want, err.Error()); diff != "" {
					t.Errorf("load(--database-url %s) error (-want +got):\n%s", tt.name, diff)
				}
			}

			c := Default()
			c.DatabaseURL = tt.url
			scheme := strings.ToLower(tt.url[:strings.Index(tt.url, ":")])
			if diff := cmp.Diff(scheme+"://(not shown)", c.RedactedDatabaseURL()); diff != "" {
				t.Errorf("RedactedDatabaseURL(%s) (-want +got):\n%s", tt.name, diff)
			}
			var buf bytes.Buffer
			slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "config", c)
			if strings.Contains(buf.String(), tt.secret) {
				t.Errorf("logged config (%s) leaks the password: %s", tt.name, buf.String())
			}
		})
	}
}

// TestRedactedDatabaseURL: URLs that read the same way everywhere keep
// their user, host and database and lose only the password and query.
func TestRedactedDatabaseURL(t *testing.T) {
	tests := []struct{ name, url, want string }{
		{"password", "postgres://occ:s3cr3t@db:5432/occ", "postgres://occ:xxxxx@db:5432/occ"},
		{"encoded slash", "postgres://occ:1234%2Fs3cr3t@db/occ", "postgres://occ:xxxxx@db/occ"},
		{"encoded at sign", "postgres://occ:p%40s3cr3t@db/occ", "postgres://occ:xxxxx@db/occ"},
		{"query password", "postgres://db/occ?user=occ&password=s3cr3t", "postgres://db/occ"},
		{"at sign in the path", "postgres://occ@db/occ?application_name=a@b", "postgres://occ@db/occ"},
		{"no user", "postgresql://db:5432/occ", "postgresql://db:5432/occ"},
		{"SQLite", "sqlite:///var/lib/occ/occ.db", "sqlite:///var/lib/occ/occ.db"},
	}
	for _, tt := range tests {
		c := Default()
		c.DatabaseURL = tt.url
		if diff := cmp.Diff(tt.want, c.RedactedDatabaseURL()); diff != "" {
			t.Errorf("RedactedDatabaseURL(%s) (-want +got):\n%s", tt.name, diff)
		}
		if err := c.Validate(testDrivers); err != nil {
			t.Errorf("Validate(%s) = %v, want nil", tt.name, err)
		}
	}
}
