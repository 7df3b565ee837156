package config

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// tlsPair writes two files standing for a certificate and its key.
// Validate only opens them; internal/tlscert parses them.
func tlsPair(t *testing.T) (cert, key string) {
	t.Helper()
	dir := t.TempDir()
	cert, key = filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	for _, p := range []string{cert, key} {
		if err := os.WriteFile(p, []byte("PEM\n"), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return cert, key
}

// TestValidateTLSFiles: a half TLS pair and a TLS file that cannot be read
// are configuration errors naming the flag, found before "occ server"
// opens (and migrates) the database.
func TestValidateTLSFiles(t *testing.T) {
	cert, key := tlsPair(t)
	missing := filepath.Join(t.TempDir(), "absent.crt")
	dir := t.TempDir()
	tests := []struct {
		name      string
		cert, key string
		want      string // "" means valid; otherwise the whole error text
	}{
		{"neither", "", "", ""},
		{"both", cert, key, ""},
		{"certificate only", cert, "",
			"TLS certificate file (--tls-cert-file) is set but the TLS key file (--tls-key-file) is not: set both to serve HTTPS, or neither"},
		{"key only", "", key,
			"TLS key file (--tls-key-file) is set but the TLS certificate file (--tls-cert-file) is not: set both to serve HTTPS, or neither"},
		{"missing certificate", missing, key,
			`TLS certificate file "` + missing + `" (--tls-cert-file) cannot be read: no such file or directory`},
		{"key is a directory", cert, dir,
			`TLS key file "` + dir + `" (--tls-key-file) cannot be read: it is a directory`},
		{"missing certificate without key", missing, "",
			"TLS certificate file (--tls-cert-file) is set but the TLS key file (--tls-key-file) is not: set both to serve HTTPS, or neither\n" +
				`TLS certificate file "` + missing + `" (--tls-cert-file) cannot be read: no such file or directory`},
	}
	if os.Geteuid() != 0 { // root reads any file
		unreadable := filepath.Join(t.TempDir(), "tls.key")
		if err := os.WriteFile(unreadable, []byte("PEM\n"), 0o000); err != nil {
			t.Fatal(err)
		}
		tests = append(tests, struct {
			name      string
			cert, key string
			want      string
		}{"unreadable key", cert, unreadable, `TLS key file "` + unreadable + `" (--tls-key-file) cannot be read: permission denied`})
	}
	for _, tt := range tests {
		c := Default()
		c.TLSCertFile, c.TLSKeyFile = tt.cert, tt.key
		got := ""
		if err := c.Validate(testDrivers); err != nil {
			got = err.Error()
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("Validate(%s) error (-want +got):\n%s", tt.name, diff)
		}
	}
}

// TestLoadRefusesMissingTLSFile: through Load, as occ server runs it.
func TestLoadRefusesMissingTLSFile(t *testing.T) {
	_, key := tlsPair(t)
	missing := filepath.Join(t.TempDir(), "tls.crt")
	_, err := load(parseFlags(t, "--tls-cert-file", missing, "--tls-key-file", key), nil)
	want := `TLS certificate file "` + missing + `" (--tls-cert-file) cannot be read: no such file or directory`
	if err == nil || err.Error() != want {
		t.Errorf("load(--tls-cert-file <missing>) error = %v, want %q", err, want)
	}
}
