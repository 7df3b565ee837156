package cli

import (
	"bytes"
	"context"
	"errors"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/testutil"
)

// TestInstallSelf runs `occ install-self` against a fake running binary
// (a file of known content) and checks what ends up at --to.
func TestInstallSelf(t *testing.T) {
	const binary = "\x7fELF pretend occ binary\n"
	type result struct {
		Code int
		// Dir lists the destination directory: name -> mode and content.
		Dir map[string]string
	}
	installed := "-r-xr-xr-x " + binary
	tests := []struct {
		name string
		// to is --to relative to the test directory ("" = no --to);
		// extra are more arguments.
		to      string
		extra   []string
		prepare func(t *testing.T, dir string)
		// source is the fake os.Executable (nil: the binary file).
		source  func(dir string) (string, error)
		want    result
		wantErr string // prefix of stderr when the command fails
	}{
		{
			name: "copies into an empty directory",
			to:   "bin/occ",
			want: result{Dir: map[string]string{"occ": installed}},
		},
		{
			name: "replaces an existing file",
			to:   "bin/occ",
			prepare: func(t *testing.T, dir string) {
				writeTestFile(t, filepath.Join(dir, "bin", "occ"), "old occ", 0o755)
			},
			want: result{Dir: map[string]string{"occ": installed}},
		},
		{
			name:    "the destination directory must exist",
			to:      "bin/missing/occ",
			want:    result{Code: 1, Dir: map[string]string{}},
			wantErr: "occ: install-self: open ",
		},
		{
			name:    "--to is required",
			want:    result{Code: 2, Dir: map[string]string{}},
			wantErr: "occ: install-self: --to is required\n",
		},
		{
			name:    "no arguments",
			to:      "bin/occ",
			extra:   []string{"extra"},
			want:    result{Code: 2, Dir: map[string]string{}},
			wantErr: "occ: unknown command \"extra\" for \"occ install-self\"\n",
		},
		{
			name:    "the running binary cannot be located",
			to:      "bin/occ",
			source:  func(string) (string, error) { return "", errors.New("no /proc") },
			want:    result{Code: 1, Dir: map[string]string{}},
			wantErr: "occ: install-self: locating the running binary: no /proc\n",
		},
		{
			name:    "the source must be a regular file",
			to:      "bin/occ",
			source:  func(dir string) (string, error) { return dir, nil },
			want:    result{Code: 1, Dir: map[string]string{}},
			wantErr: "occ: install-self: ",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			if err := os.Mkdir(filepath.Join(dir, "bin"), 0o755); err != nil {
				t.Fatal(err)
			}
			src := filepath.Join(dir, "occ-source")
			writeTestFile(t, src, binary, 0o755)
			if tt.prepare != nil {
				tt.prepare(t, dir)
			}
			var stdout, stderr bytes.Buffer
			d := deps{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" },
				executable: func() (string, error) { return src, nil }}
			if tt.source != nil {
				d.executable = func() (string, error) { return tt.source(dir) }
			}
			args := []string{"install-self"}
			if tt.to != "" {
				args = append(args, "--to", filepath.Join(dir, tt.to))
			}
			args = append(args, tt.extra...)
			got := result{Code: run(context.Background(), args, d), Dir: listDir(t, filepath.Join(dir, "bin"))}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("occ %q mismatch (-want +got):\n%s", args, diff)
			}
			if e := stderr.String(); (tt.wantErr == "") != (e == "") || !strings.HasPrefix(e, tt.wantErr) {
				t.Errorf("occ %q: stderr %q, want prefix %q", args, e, tt.wantErr)
			}
			if stdout.Len() > 0 {
				t.Errorf("occ %q printed %q on standard output, want nothing", args, stdout.String())
			}
		})
	}
}

func writeTestFile(t *testing.T, path, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(path, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(path, mode); err != nil {
		t.Fatal(err)
	}
}

// listDir returns every entry of dir as "mode content"; a temporary file
// left behind shows up under its own name.
func listDir(t *testing.T, dir string) map[string]string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, e := range entries {
		info, err := e.Info()
		if err != nil {
			t.Fatal(err)
		}
		if info.IsDir() {
			got[e.Name()] = info.Mode().String()
			continue
		}
		b, err := os.ReadFile(filepath.Join(dir, e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		got[e.Name()] = info.Mode().String() + " " + string(b)
	}
	return got
}

// TestInstallSelfCopiesTheRunningBinary runs `occ install-self` for real
// in a child process (this test binary, acting as occ) and checks that the
// copy is byte for byte the running executable, mode 0555.
func TestInstallSelfCopiesTheRunningBinary(t *testing.T) {
	const childEnv = "OCC_CLI_TEST_INSTALL_SELF_TO"
	if to := os.Getenv(childEnv); to != "" {
		os.Exit(execute([]string{"install-self", "--to", to}, defaultDeps()))
	}
	dst := filepath.Join(t.TempDir(), "occ")
	cmd := exec.CommandContext(testutil.Context(t), os.Args[0], "-test.run=^TestInstallSelfCopiesTheRunningBinary$")
	cmd.Env = append(os.Environ(), childEnv+"="+dst)
	if out, err := cmd.CombinedOutput(); err != nil || len(out) > 0 {
		t.Fatalf("occ install-self --to %s: %v, output %q (want success and no output)", dst, err, out)
	}
	self, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	want, err := os.ReadFile(self)
	if err != nil {
		t.Fatal(err)
	}
	got, err := os.ReadFile(dst)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(want, got) {
		t.Errorf("the copy at %s (%d bytes) differs from the running binary %s (%d bytes)", dst, len(got), self, len(want))
	}
	info, err := os.Stat(dst)
	if err != nil {
		t.Fatal(err)
	}
	if info.Mode() != installedMode {
		t.Errorf("the copy's mode is %v, want %v", info.Mode(), os.FileMode(installedMode))
	}
}
