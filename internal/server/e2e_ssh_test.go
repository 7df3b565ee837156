package server_test

import (
	"crypto/sha256"
	"encoding/hex"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	computessh "github.com/openclaw/occ/internal/compute/ssh"
	"github.com/openclaw/occ/internal/compute/ssh/sshtest"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/testutil"
)

// sshEnv is the real-driver environment (newRealEnv) over the SSH
// Compute driver and the real sshd of scripts/testenv/sshd.sh.
type sshEnv struct {
	*deployEnv
	ssh  *computessh.Driver
	root string
}

func (se *sshEnv) waitFor(d time.Duration, cond func() bool) {
	se.t.Helper()
	testutil.Eventually(se.t, d, cond, "the SSH deployment's condition")
}

// workspaceDir is the Agent's durable workspace on the host.
func (se *sshEnv) workspaceDir(agent string) string {
	return filepath.Join(se.agentDir(agent), "state", "workspace")
}

// occBinary builds the occ binary the SSH driver uploads (the test
// binary is not occ), once per test process.
var occBinary = sync.OnceValues(func() (string, error) {
	dir, err := os.MkdirTemp("", "occ-bin-")
	if err != nil {
		return "", err
	}
	out := filepath.Join(dir, "occ")
	cmd := exec.Command("go", "build", "-o", out, "github.com/openclaw/occ/cmd/occ")
	if b, err := cmd.CombinedOutput(); err != nil {
		return "", &buildError{out: string(b), err: err}
	}
	return out, nil
})

type buildError struct {
	out string
	err error
}

func (e *buildError) Error() string { return "go build occ: " + e.err.Error() + ": " + e.out }

func newSSHEnv(t testing.TB) *sshEnv {
	t.Helper()
	cfg := sshtest.Config(t)
	bin, err := occBinary()
	if err != nil {
		t.Fatal(err)
	}
	d, err := computessh.New(computessh.Options{Config: cfg, Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return &sshEnv{deployEnv: newRealEnv(t, testdb.SQLite(t), d), ssh: d, root: cfg.Root}
}

func (se *sshEnv) agentDir(agent string) string {
	return filepath.Join(se.root, "namespaces", se.ns, "agents", hash12(agent))
}

// TestSSHEndToEnd: an Agent with four files deployed through the API onto
// the SSH driver (real sshd, real gateway run as the runtime account), the
// files on the host, live reads and writes with compare-and-swap through
// the API and the SSH tunnel, a dead gateway answering 503 quickly and
// coming back (the supervisor restarts it), and delete removing the
// Agent's directory from the host.
func TestSSHEndToEnd(t *testing.T) {
	se := newSSHEnv(t)
	files := map[string]string{
		"AGENTS.md":   "# Agents over SSH\r\n",
		"SOUL.md":     "",
		"IDENTITY.md": "name: Ünïcode",
		"USER.md":     "user\n",
	}
	agent := se.createAgent("ssh-e2e", files)
	rev := se.deploy(agent)
	se.waitFor(6*time.Minute, se.finished(agent, rev))
	if d := se.deployment(agent, rev); d.Status != "succeeded" {
		t.Fatalf("deployment %s = %+v; want succeeded", rev, d)
	}
	for name, want := range files {
		got, err := os.ReadFile(filepath.Join(se.workspaceDir(agent), name))
		if err != nil || string(got) != want {
			t.Errorf("workspace %s = %q, %v; want %q", name, got, err, want)
		}
	}
	base := "/namespaces/" + se.ns + "/agents/" + agent + "/workspace/files/"
	var got struct {
		Content string `json:"content"`
	}
	se.must("GET", base+"AGENTS.md", nil, se.admin, 200, &got)
	if got.Content != files["AGENTS.md"] {
		t.Errorf("GET AGENTS.md = %q", got.Content)
	}

	t.Run("files", func(t *testing.T) { liveFileCases(t, se.deployEnv, se.workspaceDir(agent), agent) })

	// Kill the gateway (not its supervisor): the API answers 503 at once,
	// and the supervisor brings the gateway back.
	pidText, err := os.ReadFile(filepath.Join(se.agentDir(agent), "supervisor.pid"))
	if err != nil {
		t.Fatal(err)
	}
	sup := strings.Fields(string(pidText))[0]
	out, _ := exec.Command("pgrep", "-s", sup).Output()
	for _, p := range strings.Fields(string(out)) {
		if p != sup {
			pid, _ := strconv.Atoi(p)
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	}
	time.Sleep(100 * time.Millisecond)
	start := time.Now()
	code, env, _ := se.do("GET", base+"AGENTS.md", nil, se.admin)
	if code != 503 || time.Since(start) > 5*time.Second {
		t.Errorf("GET from a dead gateway: %d %+v after %s; want 503 within 5 s", code, env.Error, time.Since(start))
	}
	se.waitFor(4*time.Minute, func() bool {
		code, _, _ := se.do("GET", base+"AGENTS.md", nil, se.admin)
		return code == 200
	})

	se.must("DELETE", "/namespaces/"+se.ns+"/agents/"+agent, nil, se.admin, 202, nil)
	se.waitFor(2*time.Minute, func() bool {
		code, _, _ := se.do("GET", "/namespaces/"+se.ns+"/agents/"+agent, nil, se.admin)
		return code == 404
	})
	if _, err := os.Stat(se.agentDir(agent)); !os.IsNotExist(err) {
		t.Errorf("Agent directory still on the host after delete: %v", err)
	}
}

func hash12(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:12]
}
