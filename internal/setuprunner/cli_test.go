package setuprunner_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/workspace"
)

// occResult is what one `occ workspace-setup` process did.
type occResult struct {
	Stdout, Stderr string
	Code           int
}

// runOCC runs `occ <args>` as a separate process (this test binary,
// re-executed as occ) with stdin and extra environment.
func runOCC(t *testing.T, stdin string, env []string, args ...string) occResult {
	t.Helper()
	ctx := testContext(t, 2*time.Minute)
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	for _, kv := range os.Environ() {
		// The command reads OPENCLAW_* itself; only the test decides them.
		if !strings.HasPrefix(kv, "OPENCLAW_") {
			cmd.Env = append(cmd.Env, kv)
		}
	}
	cmd.Env = append(cmd.Env, cliEnv+"=1")
	cmd.Env = append(cmd.Env, env...)
	cmd.Stdin = strings.NewReader(stdin)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := occResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.Code = exit.ExitCode()
	case err != nil:
		t.Fatalf("running occ %v: %v", args, err)
	}
	return res
}

func payloadJSON(t *testing.T, s workspace.Setup) string {
	t.Helper()
	b, err := json.Marshal(s)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

var occFailed = occResult{Stderr: "WORKSPACE_SETUP_FAILED\n", Code: 1}

// TestWorkspaceSetupCommand runs `occ workspace-setup` end to end: apply
// from a payload file (which is then removed), verify from standard
// input, a completed payload file that is kept, a lost acknowledgement,
// and failures that say nothing but WORKSPACE_SETUP_FAILED.
func TestWorkspaceSetupCommand(t *testing.T) {
	t.Parallel()
	rt := needRuntime(t)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	logFile := filepath.Join(dir, "setup.log")
	pending := pendingSetup(fullFiles)
	pending.ID = `cli-"setup"-é/1` // the success line escapes it like JSON.stringify
	completed := pending
	completed.Files, completed.Completed = nil, true
	success := occResult{Stdout: `{"completed":true,"id":"cli-\"setup\"-é/1"}` + "\n"}
	runtimeEnv := []string{"OPENCLAW_EXECUTABLE=" + rt.Executable}

	// 1. A pending payload file given by flag: applied, then removed.
	payloadFile := filepath.Join(dir, "payload.json")
	writeFile(t, payloadFile, payloadJSON(t, pending))
	got := runOCC(t, "", nil, "workspace-setup", "--payload", payloadFile, "--workspace", ws,
		"--node", rt.Node, "--openclaw", rt.Executable, "--log", logFile)
	if diff := cmp.Diff(success, got); diff != "" {
		t.Fatalf("occ workspace-setup (pending payload file) mismatch (-want +got):\n%s\nlog:\n%s", diff, readFile(t, logFile))
	}
	checkApplied(t, ws, pending)
	if exists(payloadFile) {
		t.Errorf("the pending payload file was not removed after success")
	}
	log := readFile(t, logFile)
	checkNoContent(t, "--log file", log)
	if !strings.Contains(log, "step=marker-written") {
		t.Errorf("--log file records no steps:\n%s", log)
	}

	// 2. A completed payload file by environment, without --verify: the
	// runner checks the marker; the file is the restart guard and stays.
	completedFile := filepath.Join(dir, "completed.json")
	writeFile(t, completedFile, payloadJSON(t, completed))
	got = runOCC(t, "", append([]string{"OPENCLAW_WORKSPACE_SETUP_PATH=" + completedFile, "OPENCLAW_WORKSPACE_DIR=" + ws}, runtimeEnv...),
		"workspace-setup", "--node", rt.Node)
	if diff := cmp.Diff(success, got); diff != "" {
		t.Errorf("occ workspace-setup (completed payload file) mismatch (-want +got):\n%s", diff)
	}
	if !exists(completedFile) {
		t.Errorf("the completed payload file was removed")
	}

	// 3. The pending payload delivered again (lost acknowledgement): no
	// change, success, and the file is removed. The runtime named does not
	// exist, so native setup cannot have run.
	writeFile(t, payloadFile, payloadJSON(t, pending))
	before := snapshot(t, ws)
	got = runOCC(t, "", []string{"OPENCLAW_WORKSPACE_SETUP_PATH=" + payloadFile, "OPENCLAW_WORKSPACE_DIR=" + ws,
		"OPENCLAW_EXECUTABLE=/nonexistent/openclaw.mjs"}, "workspace-setup", "--node", "/nonexistent/node")
	if diff := cmp.Diff(success, got); diff != "" {
		t.Errorf("occ workspace-setup (redelivered payload) mismatch (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, snapshot(t, ws)); diff != "" {
		t.Errorf("a redelivered payload changed the workspace (-before +after):\n%s", diff)
	}
	if exists(payloadFile) {
		t.Errorf("the redelivered pending payload file was not removed")
	}

	// 4. The verifier: identity on standard input.
	got = runOCC(t, payloadJSON(t, completed), []string{"OPENCLAW_WORKSPACE_DIR=" + ws}, "workspace-setup", "--verify")
	if diff := cmp.Diff(success, got); diff != "" {
		t.Errorf("occ workspace-setup --verify mismatch (-want +got):\n%s", diff)
	}

	// 5. Failures: one line, exit 1, nothing on standard output, and a
	// pending payload file that failed is kept for the retry.
	other := pending
	other.ID = "setup-other"
	otherCompleted := completed
	otherCompleted.ID = "setup-other"
	otherFile := filepath.Join(dir, "other.json")
	writeFile(t, otherFile, payloadJSON(t, other))
	wsEnv := []string{"OPENCLAW_WORKSPACE_DIR=" + ws}
	failures := []struct {
		name  string
		stdin string
		env   []string
		args  []string
	}{
		{name: "verify a divergent marker", stdin: payloadJSON(t, otherCompleted), env: wsEnv, args: []string{"--verify"}},
		{name: "apply over a divergent marker", env: append([]string{"OPENCLAW_WORKSPACE_SETUP_PATH=" + otherFile}, wsEnv...)},
		{name: "verify a pending payload", stdin: payloadJSON(t, pending), env: wsEnv, args: []string{"--verify"}},
		{name: "verify where the marker is missing", stdin: payloadJSON(t, completed), args: []string{"--verify", "--workspace", filepath.Join(dir, "missing")}},
		{name: "invalid payload", stdin: `{}`, env: wsEnv},
		{name: "payload with unknown key", stdin: strings.TrimSuffix(payloadJSON(t, completed), "}") + `,"x":1}`, env: wsEnv},
		{name: "no workspace", stdin: payloadJSON(t, completed)},
		{name: "relative workspace", stdin: payloadJSON(t, completed), args: []string{"--workspace", "ws"}},
		{name: "payload file missing", args: []string{"--payload", filepath.Join(dir, "nope.json"), "--workspace", ws}},
		{name: "empty --payload", stdin: payloadJSON(t, completed), args: []string{"--payload=", "--workspace", ws}},
		{name: "log file not writable", stdin: payloadJSON(t, completed), args: []string{"--workspace", ws, "--log", filepath.Join(dir, "no", "dir", "log")}},
		{name: "unknown flag", stdin: payloadJSON(t, completed), args: []string{"--workspace", ws, "--bogus"}},
		{name: "flag without value", args: []string{"--workspace"}},
		{name: "extra argument", stdin: payloadJSON(t, completed), args: []string{"--workspace", ws, "extra"}},
	}
	for _, tt := range failures {
		t.Run(tt.name, func(t *testing.T) {
			got := runOCC(t, tt.stdin, tt.env, append([]string{"workspace-setup"}, tt.args...)...)
			if diff := cmp.Diff(occFailed, got); diff != "" {
				t.Errorf("occ workspace-setup %v mismatch (-want +got):\n%s", tt.args, diff)
			}
		})
	}
	if !exists(otherFile) {
		t.Errorf("a pending payload file was removed although its setup failed")
	}
	if got := readFile(t, filepath.Join(ws, workspace.MarkerName)); got != string(pending.Identity().MarshalMarker()) {
		t.Errorf("a failed run changed the marker to %q", got)
	}
}

// TestWorkspaceSetupExec runs the gateway container's command line for
// real: `occ workspace-setup --verify ... --exec -- <command>` replaces
// occ with the command (same process id, same environment, its exit
// code) once the marker matches, prints nothing of its own, and never
// starts the command when the marker differs. No runtime is needed: the
// verifier only reads the marker.
func TestWorkspaceSetupExec(t *testing.T) {
	t.Parallel()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	completed := pendingSetup(fullFiles)
	completed.Files, completed.Completed = nil, true
	writeFile(t, filepath.Join(ws, workspace.MarkerName), string(completed.Identity().MarshalMarker()))
	identityFile := filepath.Join(dir, "identity.json")
	writeFile(t, identityFile, payloadJSON(t, completed))
	other := completed
	other.ID = "setup-other"
	otherFile := filepath.Join(dir, "other.json")
	writeFile(t, otherFile, payloadJSON(t, other))
	ran := filepath.Join(dir, "ran")

	// The command prints its pid, an argument and a variable, leaves a
	// trace and exits 3.
	script := `echo "pid=$$ arg=$1 env=$OCC_EXEC_TEST"; : >"$2"; exit 3`
	start := func(payload string) (occResult, int) {
		ctx := testContext(t, time.Minute)
		cmd := exec.CommandContext(ctx, os.Args[0], "workspace-setup", "--verify", "--payload", payload, "--workspace", ws,
			"--exec", "--", "sh", "-c", script, "sh", "--verify", ran)
		cmd.Env = append(os.Environ(), cliEnv+"=1", "OCC_EXEC_TEST=kept")
		var stdout, stderr strings.Builder
		cmd.Stdout, cmd.Stderr = &stdout, &stderr
		err := cmd.Run()
		res := occResult{Stdout: stdout.String(), Stderr: stderr.String()}
		var exit *exec.ExitError
		switch {
		case errors.As(err, &exit):
			res.Code = exit.ExitCode()
		case err != nil:
			t.Fatalf("running occ workspace-setup --exec: %v", err)
		}
		return res, cmd.Process.Pid
	}

	got, pid := start(identityFile)
	want := occResult{Stdout: fmt.Sprintf("pid=%d arg=--verify env=kept\n", pid), Code: 3}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("occ workspace-setup --verify --exec (marker matches) mismatch (-want +got):\n%s", diff)
	}
	if !exists(ran) {
		t.Errorf("the command did not run")
	}

	if err := os.Remove(ran); err != nil {
		t.Fatal(err)
	}
	got, _ = start(otherFile)
	if diff := cmp.Diff(occFailed, got); diff != "" {
		t.Errorf("occ workspace-setup --verify --exec (divergent marker) mismatch (-want +got):\n%s", diff)
	}
	if exists(ran) {
		t.Errorf("the command ran although the marker differs")
	}
}
