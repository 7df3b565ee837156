package main

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
)

// TestMakeRunRuntime runs `make run` (the repository's Makefile, in a
// scratch directory with a stub bin/occ and install script; build and
// runtime marked done) and checks which OpenClaw runtime occ server gets:
// the one OCC_OPENCLAW_RUNTIME names when set, as make bench and
// scripts/test.sh do, else the install script's.
func TestMakeRunRuntime(t *testing.T) {
	makeBin, err := exec.LookPath("make")
	if err != nil {
		// make is how the README runs OCC and its tests: under CI it
		// must be there.
		if os.Getenv("CI") == "true" {
			t.Fatalf("make is not installed: %v", err)
		}
		t.Skip("make is not installed")
	}
	makefile, err := os.ReadFile(filepath.Join("..", "..", "Makefile"))
	if err != nil {
		t.Fatal(err)
	}
	dir := t.TempDir()
	for name, content := range map[string]string{
		"Makefile":                   string(makefile),
		"bin/occ":                    "#!/bin/sh\necho \"occ $* runtime=$OCC_OPENCLAW_RUNTIME\"\n",
		"scripts/install-runtime.sh": "echo /installed/runtime\n",
	} {
		path := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(content), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	tests := []struct{ name, env, want string }{
		{"runtime set", "/my/runtime", "occ server runtime=/my/runtime"},
		{"runtime unset", "", "occ server runtime=/installed/runtime"},
	}
	for _, tt := range tests {
		cmd := exec.CommandContext(t.Context(), makeBin, "--no-print-directory", "-s", "-o", "build", "-o", "runtime", "run")
		cmd.Dir = dir
		cmd.Env = []string{"PATH=" + os.Getenv("PATH"), "HOME=" + dir}
		if tt.env != "" {
			cmd.Env = append(cmd.Env, "OCC_OPENCLAW_RUNTIME="+tt.env)
		}
		out, err := cmd.CombinedOutput()
		if err != nil {
			t.Fatalf("make run (%s): %v\n%s", tt.name, err, out)
		}
		if got := strings.TrimSpace(string(out)); got != tt.want {
			t.Errorf("make run (%s) started %q, want %q", tt.name, got, tt.want)
		}
	}
}
