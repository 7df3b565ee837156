package cli

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/setuprunner"
	"github.com/openclaw/occ/internal/workspace"
)

// execCall is one call of deps.execve.
type execCall struct {
	Path string
	Argv []string
	// SameEnv: the command got this process's environment.
	SameEnv bool
}

// TestWorkspaceSetupExec checks --exec: the command after "--" replaces
// occ only when the verifier passed, nothing is printed then, and every
// misuse or failure is WORKSPACE_SETUP_FAILED without an exec. The
// verifier itself runs for real over a workspace with a marker; execve is
// a fake (the real exec is tested by internal/setuprunner's CLI test).
func TestWorkspaceSetupExec(t *testing.T) {
	identity := workspace.Setup{ID: "setup-1", NamespaceID: "ns-1", AgentID: "agent-1", Completed: true}
	other := identity
	other.ID = "setup-2"

	// PATH holds one executable, "gateway"; LookPath only needs its mode.
	binDir := t.TempDir()
	gateway := filepath.Join(binDir, "gateway")
	writeTestFile(t, gateway, "", 0o755)
	t.Setenv("PATH", binDir)

	type result struct {
		Code           int
		Stdout, Stderr string
		Exec           *execCall
	}
	failed := result{Code: 1, Stderr: "WORKSPACE_SETUP_FAILED\n"}
	tests := []struct {
		name    string
		marker  *workspace.Setup // nil: no marker
		args    []string         // after "workspace-setup --payload P --workspace W"
		execErr error
		want    result
	}{
		{
			name:   "verified, then the command replaces occ",
			marker: &identity,
			args:   []string{"--verify", "--exec", "--", "gateway", "run", "--port", "8080"},
			want:   result{Exec: &execCall{Path: gateway, Argv: []string{"gateway", "run", "--port", "8080"}, SameEnv: true}},
		},
		{
			name:   "a path is used as it is",
			marker: &identity,
			args:   []string{"--verify", "--exec", "--", gateway},
			want:   result{Exec: &execCall{Path: gateway, Argv: []string{gateway}, SameEnv: true}},
		},
		{
			name:   "flags after -- belong to the command",
			marker: &identity,
			args:   []string{"--exec", "--verify", "--", "gateway", "--verify", "--payload", "x"},
			want:   result{Exec: &execCall{Path: gateway, Argv: []string{"gateway", "--verify", "--payload", "x"}, SameEnv: true}},
		},
		{
			name:   "without --exec the success line is printed",
			marker: &identity,
			args:   []string{"--verify"},
			want:   result{Stdout: `{"completed":true,"id":"setup-1"}` + "\n"},
		},
		{
			name: "missing marker: no exec",
			args: []string{"--verify", "--exec", "--", "gateway", "run"},
			want: failed,
		},
		{
			name:   "divergent marker: no exec",
			marker: &other,
			args:   []string{"--verify", "--exec", "--", "gateway", "run"},
			want:   failed,
		},
		{
			name:   "--exec without a command",
			marker: &identity,
			args:   []string{"--verify", "--exec"},
			want:   failed,
		},
		{
			name:   "--exec with an empty command after --",
			marker: &identity,
			args:   []string{"--verify", "--exec", "--"},
			want:   failed,
		},
		{
			name:   "a command without --exec",
			marker: &identity,
			args:   []string{"--verify", "--", "gateway", "run"},
			want:   failed,
		},
		{
			name:   "the command must come after --",
			marker: &identity,
			args:   []string{"--verify", "--exec", "gateway"},
			want:   failed,
		},
		{
			name:   "a command that is not in PATH",
			marker: &identity,
			args:   []string{"--verify", "--exec", "--", "no-such-gateway"},
			want:   failed,
		},
		{
			name:    "execve fails",
			marker:  &identity,
			args:    []string{"--verify", "--exec", "--", "gateway"},
			execErr: errors.New("exec format error"),
			want: result{Code: 1, Stderr: "WORKSPACE_SETUP_FAILED\n",
				Exec: &execCall{Path: gateway, Argv: []string{"gateway"}, SameEnv: true}},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			ws := filepath.Join(dir, "ws")
			if err := os.Mkdir(ws, 0o700); err != nil {
				t.Fatal(err)
			}
			if tt.marker != nil {
				writeTestFile(t, filepath.Join(ws, workspace.MarkerName), string(tt.marker.Identity().MarshalMarker()), 0o600)
			}
			payload := filepath.Join(dir, "identity.json")
			b, err := json.Marshal(identity)
			if err != nil {
				t.Fatal(err)
			}
			writeTestFile(t, payload, string(b), 0o400)

			var got result
			var stdout, stderr bytes.Buffer
			d := deps{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" },
				execve: func(path string, argv, env []string) error {
					got.Exec = &execCall{Path: path, Argv: argv, SameEnv: cmp.Equal(env, os.Environ())}
					return tt.execErr
				}}
			args := append([]string{"workspace-setup", "--payload", payload, "--workspace", ws}, tt.args...)
			got.Code = run(context.Background(), args, d)
			got.Stdout, got.Stderr = stdout.String(), stderr.String()
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("occ %q mismatch (-want +got):\n%s", args, diff)
			}
		})
	}
}

// TestWorkspaceSetupVerifyDeadline: a verifier that does not answer (a
// workspace on storage that hangs, which a test cannot make the kernel do:
// here a stand-in for setuprunner.Verify that never returns) fails the
// command at the deadline, WORKSPACE_SETUP_FAILED and no exec, and says so
// in the log.
func TestWorkspaceSetupVerifyDeadline(t *testing.T) {
	binDir := t.TempDir()
	writeTestFile(t, filepath.Join(binDir, "gateway"), "", 0o755)
	t.Setenv("PATH", binDir)
	dir := t.TempDir()
	payload := filepath.Join(dir, "identity.json")
	b, err := json.Marshal(workspace.Setup{ID: "setup-1", NamespaceID: "ns-1", AgentID: "agent-1", Completed: true})
	if err != nil {
		t.Fatal(err)
	}
	writeTestFile(t, payload, string(b), 0o400)
	logFile := filepath.Join(dir, "setup.log")

	hang := make(chan struct{})
	defer close(hang)
	var stdout, stderr bytes.Buffer
	execed := false
	d := deps{stdout: &stdout, stderr: &stderr, getenv: func(string) string { return "" },
		execve: func(string, []string, []string) error { execed = true; return nil },
		verifySetup: func(context.Context, workspace.Setup, setuprunner.Options) error {
			<-hang // ignores its context, as a read stuck in the kernel would
			return nil
		},
		verifyTimeout: 50 * time.Millisecond}
	args := []string{"workspace-setup", "--payload", payload, "--workspace", filepath.Join(dir, "ws"), "--log", logFile,
		"--verify", "--exec", "--", "gateway", "run"}
	code := run(context.Background(), args, d)
	if code != 1 || stderr.String() != "WORKSPACE_SETUP_FAILED\n" || stdout.Len() != 0 || execed {
		t.Fatalf("occ %q: exit %d, stdout %q, stderr %q, exec %v; want exit 1, WORKSPACE_SETUP_FAILED only, no exec",
			args, code, stdout.String(), stderr.String(), execed)
	}
	log, err := os.ReadFile(logFile)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(log), "workspace-setup: verify did not finish within 50ms") {
		t.Errorf("log %q does not name the deadline", log)
	}
	if VerifyTimeout != 10*time.Second {
		t.Errorf("VerifyTimeout %s, want the reference verifier's 10s", VerifyTimeout)
	}
}
