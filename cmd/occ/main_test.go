package main

import (
	"bytes"
	"context"
	"errors"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"
)

// runMainEnv makes the test binary run main instead of the tests, so that
// the tests below run occ itself, in a process of its own, without
// building it.
const runMainEnv = "OCC_TEST_RUN_MAIN"

func TestMain(m *testing.M) {
	if os.Getenv(runMainEnv) == "1" {
		main()
		return
	}
	os.Exit(m.Run())
}

// TestStartupRefusals runs occ with a configuration that cannot work and
// checks what an operator sees: the exit code, that neither output shows
// the database password, and that nothing was created in the data
// directory (a database, and the administrator whose one-time password
// would be printed on standard output above the error and never again).
func TestStartupRefusals(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	taken := busy.Addr().String()
	files := t.TempDir()
	key := filepath.Join(files, "tls.key")
	if err := os.WriteFile(key, []byte("PEM\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	const percentEncode = "percent-encode each /, ?, # and @ in its user name and password"
	tests := []struct {
		name     string
		args     []string
		env      []string // the database URL goes here: never in arguments
		secret   string   // must appear in neither output
		wantCode int
		wantErr  string // in standard error
	}{
		{"server, slash after the user's colon", []string{"server", "--compute-driver", "none"},
			[]string{"OCC_DATABASE_URL=postgres://occ:/Zq9+s3cr3tPW@127.0.0.1:1/occ"}, "s3cr3tPW", 2, percentEncode},
		{"migrate, digits then a slash", []string{"migrate"},
			[]string{"OCC_DATABASE_URL=postgres://occ:1234/s3cr3t@127.0.0.1:1/occ"}, "s3cr3t", 2, percentEncode},
		{"server, question mark", []string{"server", "--compute-driver", "none"},
			[]string{"OCC_DATABASE_URL=postgresql://occ:?s3cr3t@127.0.0.1:1/occ"}, "s3cr3t", 2, percentEncode},
		{"server, missing certificate", []string{"server", "--compute-driver", "none", "--listen", "127.0.0.1:0", "--public-origin", "http://localhost:8080",
			"--tls-cert-file", filepath.Join(files, "missing.crt"), "--tls-key-file", key}, nil, "", 2, "(--tls-cert-file) cannot be read"},
		{"server, API port taken", []string{"server", "--compute-driver", "none", "--listen", taken}, nil, "", 1, "listen on " + taken},
		{"server, metrics port taken", []string{"server", "--compute-driver", "none", "--listen", "127.0.0.1:0", "--public-origin", "http://localhost:8080", "--metrics-listen", taken},
			nil, "", 1, "metrics listen on " + taken},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dataDir := filepath.Join(t.TempDir(), "data")
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			cmd := exec.CommandContext(ctx, os.Args[0], append(tt.args, "--data-dir", dataDir)...)
			cmd.Env = append([]string{runMainEnv + "=1", "HOME=" + t.TempDir(), "PATH=" + os.Getenv("PATH")}, tt.env...)
			var stdout, stderr bytes.Buffer
			cmd.Stdout, cmd.Stderr = &stdout, &stderr
			err := cmd.Run()
			var ee *exec.ExitError
			if !errors.As(err, &ee) {
				t.Fatalf("occ %s: %v, want exit code %d; stderr:\n%s", tt.name, err, tt.wantCode, &stderr)
			}
			if got := ee.ExitCode(); got != tt.wantCode {
				t.Errorf("occ %s exit code = %d, want %d; stderr:\n%s", tt.name, got, tt.wantCode, &stderr)
			}
			if !strings.Contains(stderr.String(), tt.wantErr) {
				t.Errorf("occ %s stderr does not contain %q:\n%s", tt.name, tt.wantErr, &stderr)
			}
			if tt.secret != "" && strings.Contains(stdout.String()+stderr.String(), tt.secret) {
				t.Errorf("occ %s shows the database password:\n%s%s", tt.name, &stdout, &stderr)
			}
			if stdout.Len() != 0 {
				t.Errorf("occ %s printed on standard output:\n%s", tt.name, &stdout)
			}
			if _, err := os.Stat(dataDir); !os.IsNotExist(err) {
				t.Errorf("occ %s created its data directory %s (stat: %v)", tt.name, dataDir, err)
			}
		})
	}
}
