package setuprunner_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/setuprunner"
	"github.com/openclaw/occ/internal/workspace"
)

// The submission of the full-run tests: one custom file and one empty
// one, with the defaults identity of the installed release.
var fullFiles = map[string]string{workspace.SoulMD: soulText, workspace.IdentityMD: ""}

// fullSteps are the AfterStep names of a full run of fullFiles, in order.
var fullSteps = []string{
	"preflight",
	"prepared",
	"native-setup-1",
	"temp-written:SOUL.md",
	"file-written:SOUL.md",
	"temp-written:IDENTITY.md",
	"file-written:IDENTITY.md",
	"native-setup-2",
	"files-verified",
	"temp-written:.oce-workspace-setup.json",
	"marker-written",
}

// The crash tests submit one file, so each case costs at most four
// native setup runs; TestApply shows that two files take the same steps
// once per file.
var (
	crashFiles = map[string]string{workspace.SoulMD: soulText}
	crashSteps = []string{
		"preflight",
		"prepared",
		"native-setup-1",
		"temp-written:SOUL.md",
		"file-written:SOUL.md",
		"native-setup-2",
		"files-verified",
		"temp-written:.oce-workspace-setup.json",
		"marker-written",
	}
)

// recorder collects the steps a run reports.
type recorder struct{ steps []string }

func (r *recorder) hook(step string) error {
	r.steps = append(r.steps, step)
	return nil
}

func TestApply(t *testing.T) {
	t.Parallel()
	rt := needRuntime(t)
	ctx := testContext(t, 2*time.Minute)
	ws := newWorkspace(t)
	s := pendingSetup(fullFiles)
	var log bytes.Buffer
	var rec recorder
	opts := setuprunner.Options{Workspace: ws, Runtime: rt, Log: &log, AfterStep: rec.hook}

	if err := setuprunner.Apply(ctx, s, opts); err != nil {
		t.Fatalf("Apply: %v\nlog:\n%s", err, log.String())
	}
	if diff := cmp.Diff(fullSteps, rec.steps); diff != "" {
		t.Errorf("Apply steps mismatch (-want +got):\n%s", diff)
	}
	checkApplied(t, ws, s)
	// The files not submitted are native setup's, which equal the
	// rendered templates the defaults identity is computed from.
	defaults := workspace.Defaults()
	for _, name := range []string{workspace.AgentsMD, workspace.UserMD} {
		if got := readFile(t, filepath.Join(ws, name)); got != defaults[name] {
			t.Errorf("%s is not the stock rendering (%d bytes, want %d)", name, len(got), len(defaults[name]))
		}
	}
	// Observed native behaviour the second run exists for: once the
	// profile differs from stock, setup retires BOOTSTRAP.md.
	if exists(filepath.Join(ws, "BOOTSTRAP.md")) {
		t.Errorf("BOOTSTRAP.md still present after the second native setup")
	}
	if !exists(filepath.Join(ws, ".git")) {
		t.Errorf("native setup did not initialize git in the workspace")
	}
	if info, err := os.Stat(filepath.Join(ws, workspace.MarkerName)); err != nil || info.Mode().Perm() != 0o600 {
		t.Errorf("marker: %v, mode %v; want mode 0600", err, info.Mode())
	}
	if err := setuprunner.Verify(ctx, completedSetup(), setuprunner.Options{Workspace: ws}); err != nil {
		t.Errorf("Verify after Apply: %v", err)
	}
	checkNoContent(t, "Apply log", log.String())
	if !strings.Contains(log.String(), "step=native-setup-2") {
		t.Errorf("log names no native setup step:\n%s", log.String())
	}
}

// TestApplyCrashRecovery stops a run after each step, as a crash would,
// and retries with the same payload; the retry must succeed and leave
// exactly the submission.
func TestApplyCrashRecovery(t *testing.T) {
	t.Parallel()
	rt := needRuntime(t)
	errCrash := errors.New("injected crash")
	for i, crashAt := range crashSteps {
		t.Run(crashAt, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 3*time.Minute)
			ws := newWorkspace(t)
			s := pendingSetup(crashFiles)
			var log bytes.Buffer
			var rec recorder
			opts := setuprunner.Options{Workspace: ws, Runtime: rt, Log: &log}
			crashing := opts
			crashing.AfterStep = func(step string) error {
				rec.steps = append(rec.steps, step)
				if step == crashAt {
					return errCrash
				}
				return nil
			}
			err := setuprunner.Apply(ctx, s, crashing)
			if !errors.Is(err, setuprunner.ErrFailed) || !errors.Is(err, errCrash) {
				t.Fatalf("Apply crashing after %s = %v, want ErrFailed wrapping the crash", crashAt, err)
			}
			if diff := cmp.Diff(crashSteps[:i+1], rec.steps); diff != "" {
				t.Errorf("steps before the crash mismatch (-want +got):\n%s", diff)
			}
			markerWritten := i == len(crashSteps)-1
			if got := exists(filepath.Join(ws, workspace.MarkerName)); got != markerWritten {
				t.Errorf("after a crash at %s: marker exists = %v, want %v", crashAt, got, markerWritten)
			}
			if got, want := exists(filepath.Join(ws, setuprunner.TempName)), strings.HasPrefix(crashAt, "temp-written:"); got != want {
				t.Errorf("after a crash at %s: reserved temp file exists = %v, want %v", crashAt, got, want)
			}

			if err := setuprunner.Apply(ctx, s, opts); err != nil {
				t.Fatalf("retry after a crash at %s: %v\nlog:\n%s", crashAt, err, log.String())
			}
			checkApplied(t, ws, s)
			if err := setuprunner.Verify(ctx, completedSetup(), setuprunner.Options{Workspace: ws}); err != nil {
				t.Errorf("Verify after the retry: %v", err)
			}
			checkNoContent(t, "log", log.String())
		})
	}
}

// TestApplyRefuses covers failures that happen before anything is
// written: each must leave the workspace exactly as it was.
func TestApplyRefuses(t *testing.T) {
	t.Parallel()
	rt := needRuntime(t)
	tests := []struct {
		name    string
		prepare func(t *testing.T, dir string) (ws string) // dir: a fresh real directory
		setup   func(s *workspace.Setup)
		runtime *setuprunner.Runtime
	}{
		{
			name: "workspace is a symlink",
			prepare: func(t *testing.T, dir string) string {
				mkdir(t, filepath.Join(dir, "real"))
				symlink(t, filepath.Join(dir, "real"), filepath.Join(dir, "ws"))
				return filepath.Join(dir, "ws")
			},
		},
		{
			name: "component is a symlink",
			prepare: func(t *testing.T, dir string) string {
				mkdir(t, filepath.Join(dir, "real", "ws"))
				symlink(t, filepath.Join(dir, "real"), filepath.Join(dir, "link"))
				return filepath.Join(dir, "link", "ws")
			},
		},
		{
			name: "component is a file",
			prepare: func(t *testing.T, dir string) string {
				writeFile(t, filepath.Join(dir, "file"), "x")
				return filepath.Join(dir, "file", "ws")
			},
		},
		{
			name:    "relative workspace",
			prepare: func(*testing.T, string) string { return "relative/ws" },
		},
		{
			name:    "workspace with a trailing slash",
			prepare: func(_ *testing.T, dir string) string { return dir + "/ws/" },
		},
		{
			name:    "workspace with a dot-dot",
			prepare: func(_ *testing.T, dir string) string { return dir + "/x/../ws" },
		},
		{
			name: "conflicting existing file",
			prepare: func(t *testing.T, dir string) string {
				writeFile(t, filepath.Join(dir, "ws", workspace.SoulMD), "user-edit-text")
				return filepath.Join(dir, "ws")
			},
		},
		{
			name: "submitted file is a symlink, even to the submitted text",
			prepare: func(t *testing.T, dir string) string {
				writeFile(t, filepath.Join(dir, "elsewhere"), soulText)
				mkdir(t, filepath.Join(dir, "ws"))
				symlink(t, filepath.Join(dir, "elsewhere"), filepath.Join(dir, "ws", workspace.SoulMD))
				return filepath.Join(dir, "ws")
			},
		},
		{
			name: "unsubmitted file is hard-linked",
			prepare: func(t *testing.T, dir string) string {
				writeFile(t, filepath.Join(dir, "other"), workspace.Defaults()[workspace.AgentsMD])
				mkdir(t, filepath.Join(dir, "ws"))
				if err := os.Link(filepath.Join(dir, "other"), filepath.Join(dir, "ws", workspace.AgentsMD)); err != nil {
					t.Fatal(err)
				}
				return filepath.Join(dir, "ws")
			},
		},
		{
			name: "file over 32768 bytes",
			prepare: func(t *testing.T, dir string) string {
				writeFile(t, filepath.Join(dir, "ws", workspace.UserMD), strings.Repeat("u", 32769))
				return filepath.Join(dir, "ws")
			},
		},
		{
			name: "file is a directory",
			prepare: func(t *testing.T, dir string) string {
				mkdir(t, filepath.Join(dir, "ws", workspace.IdentityMD))
				return filepath.Join(dir, "ws")
			},
		},
		{
			name:    "foreign defaults identity",
			prepare: func(_ *testing.T, dir string) string { return filepath.Join(dir, "ws") },
			setup:   func(s *workspace.Setup) { s.DefaultsID = strings.Repeat("0", 64) },
		},
		{
			name:    "no OpenClaw package above the executable",
			prepare: func(t *testing.T, dir string) string { return filepath.Join(dir, "ws") },
			runtime: &setuprunner.Runtime{Node: "node", Executable: "/bin/sh"},
		},
		{
			name: "marker of another setup",
			prepare: func(t *testing.T, dir string) string {
				other := pendingSetup(nil).Identity()
				other.ID = "setup-2"
				writeFile(t, filepath.Join(dir, "ws", workspace.MarkerName), string(other.MarshalMarker()))
				return filepath.Join(dir, "ws")
			},
		},
		{
			name:    "completed setup given files",
			prepare: func(_ *testing.T, dir string) string { return filepath.Join(dir, "ws") },
			setup:   func(s *workspace.Setup) { s.Completed = true },
		},
		{
			name:    "pending setup without files",
			prepare: func(_ *testing.T, dir string) string { return filepath.Join(dir, "ws") },
			setup:   func(s *workspace.Setup) { s.Files = map[string]string{} },
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, time.Minute)
			dir, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			ws := tt.prepare(t, dir)
			s := pendingSetup(fullFiles)
			if tt.setup != nil {
				tt.setup(&s)
			}
			r := rt
			if tt.runtime != nil {
				r = *tt.runtime
			}
			before := snapshot(t, dir)
			var log bytes.Buffer
			var rec recorder
			err = setuprunner.Apply(ctx, s, setuprunner.Options{Workspace: ws, Runtime: r, Log: &log, AfterStep: rec.hook})
			if !errors.Is(err, setuprunner.ErrFailed) {
				t.Fatalf("Apply = %v, want ErrFailed", err)
			}
			if len(rec.steps) != 0 {
				t.Errorf("Apply got past %v before failing", rec.steps)
			}
			if diff := cmp.Diff(before, snapshot(t, dir)); diff != "" {
				t.Errorf("Apply changed the directory (-before +after):\n%s", diff)
			}
			if filepath.IsAbs(ws) && exists(filepath.Join(ws, ".git")) {
				t.Errorf("native setup ran")
			}
			checkNoContent(t, "error", err.Error())
			checkNoContent(t, "log", log.String())
			if !strings.Contains(log.String(), "result=failed") {
				t.Errorf("log does not record the failure:\n%s", log.String())
			}
		})
	}
}

// TestReservedTempNotSafe: a leftover reserved temp file that is a
// symbolic link is refused, not followed and not removed.
func TestReservedTempNotSafe(t *testing.T) {
	t.Parallel()
	rt := needRuntime(t)
	ctx := testContext(t, time.Minute)
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	ws := filepath.Join(dir, "ws")
	target := filepath.Join(dir, "target")
	writeFile(t, target, "target text")
	mkdir(t, ws)
	symlink(t, target, filepath.Join(ws, setuprunner.TempName))

	err = setuprunner.Apply(ctx, pendingSetup(fullFiles), setuprunner.Options{Workspace: ws, Runtime: rt})
	if !errors.Is(err, setuprunner.ErrFailed) {
		t.Fatalf("Apply = %v, want ErrFailed", err)
	}
	if got := readFile(t, target); got != "target text" {
		t.Errorf("the link target was changed: %q", got)
	}
	if info, err := os.Lstat(filepath.Join(ws, setuprunner.TempName)); err != nil || info.Mode()&os.ModeSymlink == 0 {
		t.Errorf("the reserved temp link was removed or replaced: %v", err)
	}
	if exists(filepath.Join(ws, workspace.MarkerName)) {
		t.Errorf("marker written by a failed run")
	}
}

// TestMarkerComparison: a marker matches when JSON.stringify of its parse
// equals the identity's serialization, and only then; it must also be a
// safe regular file of at most 4,096 bytes.
func TestMarkerComparison(t *testing.T) {
	t.Parallel()
	exact := string(completedSetup().Identity().MarshalMarker())
	d := workspace.DefaultsID
	tests := []struct {
		name    string
		marker  string
		prepare func(t *testing.T, dir, marker string) // instead of writing marker
		wantOK  bool
	}{
		{name: "exact", marker: exact, wantOK: true},
		{name: "other whitespace", marker: "{ \"id\" : \"setup-1\",\n\t\"namespaceId\": \"ns-1\", \"agentId\": \"agent-1\", \"defaultsId\": \"" + d + "\" }\n", wantOK: true},
		{name: "escaped but equal", marker: `{"id":"\u0073etup\u002d1","namespaceId":"ns\u002D1","agentId":"agent-1","defaultsId":"` + d + `"}`, wantOK: true},
		{name: "duplicate key, last value wins", marker: `{"id":1,"namespaceId":"ns-1","agentId":"agent-1","defaultsId":"` + d + `","id":"setup-1"}`, wantOK: true},
		{name: "duplicate key, last value differs", marker: `{"id":"setup-1","namespaceId":"ns-1","agentId":"agent-1","defaultsId":"` + d + `","id":"setup-2"}`},
		{name: "other id", marker: strings.Replace(exact, "setup-1", "setup-2", 1)},
		{name: "keys reordered", marker: `{"namespaceId":"ns-1","id":"setup-1","agentId":"agent-1","defaultsId":"` + d + `"}`},
		{name: "extra key", marker: strings.TrimSuffix(exact, "}") + `,"completed":true}`},
		{name: "defaults identity missing", marker: `{"id":"setup-1","namespaceId":"ns-1","agentId":"agent-1"}`},
		{name: "number instead of string", marker: `{"id":1,"namespaceId":"ns-1","agentId":"agent-1","defaultsId":"` + d + `"}`},
		{name: "unpaired surrogate", marker: `{"id":"setup-1\ud800","namespaceId":"ns-1","agentId":"agent-1","defaultsId":"` + d + `"}`},
		{name: "not JSON", marker: "setup-1"},
		{name: "empty", marker: ""},
		{name: "array", marker: "[" + exact + "]"},
		{name: "byte order mark", marker: "\uFEFF" + exact},
		{name: "4096 bytes", marker: exact + strings.Repeat(" ", 4096-len(exact)), wantOK: true},
		{name: "4097 bytes", marker: exact + strings.Repeat(" ", 4097-len(exact))},
		{
			name: "symlink to a matching marker",
			prepare: func(t *testing.T, dir, marker string) {
				writeFile(t, filepath.Join(dir, "elsewhere"), marker)
				symlink(t, filepath.Join(dir, "elsewhere"), filepath.Join(dir, "ws", workspace.MarkerName))
			},
		},
		{
			name: "hard-linked matching marker",
			prepare: func(t *testing.T, dir, marker string) {
				writeFile(t, filepath.Join(dir, "ws", workspace.MarkerName), marker)
				if err := os.Link(filepath.Join(dir, "ws", workspace.MarkerName), filepath.Join(dir, "second")); err != nil {
					t.Fatal(err)
				}
			},
		},
		{
			name: "directory",
			prepare: func(t *testing.T, dir, _ string) {
				mkdir(t, filepath.Join(dir, "ws", workspace.MarkerName))
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 10*time.Second)
			dir, err := filepath.EvalSymlinks(t.TempDir())
			if err != nil {
				t.Fatal(err)
			}
			ws := filepath.Join(dir, "ws")
			mkdir(t, ws)
			if tt.prepare != nil {
				tt.prepare(t, dir, exact)
			} else {
				writeFile(t, filepath.Join(ws, workspace.MarkerName), tt.marker)
			}
			before := snapshot(t, ws)
			opts := setuprunner.Options{Workspace: ws, Runtime: noRuntime}
			verr := setuprunner.Verify(ctx, completedSetup(), opts)
			// A pending payload delivered again takes the same decision.
			aerr := setuprunner.Apply(ctx, pendingSetup(fullFiles), opts)
			for what, err := range map[string]error{"Verify": verr, "Apply": aerr} {
				if tt.wantOK && err != nil {
					t.Errorf("%s = %v, want success", what, err)
				}
				if !tt.wantOK && !errors.Is(err, setuprunner.ErrFailed) {
					t.Errorf("%s = %v, want ErrFailed", what, err)
				}
			}
			if diff := cmp.Diff(before, snapshot(t, ws)); diff != "" {
				t.Errorf("the workspace changed (-before +after):\n%s", diff)
			}
		})
	}
}

// TestLostAcknowledgement: a matching marker means setup already
// happened; a redelivered payload applies nothing, even over edits, and
// native setup does not run (the runtime given does not exist).
func TestLostAcknowledgement(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 10*time.Second)
	ws := newWorkspace(t)
	writeFile(t, filepath.Join(ws, workspace.MarkerName), string(pendingSetup(nil).Identity().MarshalMarker()))
	writeFile(t, filepath.Join(ws, workspace.SoulMD), "user-edit-text")
	writeFile(t, filepath.Join(ws, workspace.AgentsMD), "")
	before := snapshot(t, ws)

	var rec recorder
	var log bytes.Buffer
	opts := setuprunner.Options{Workspace: ws, Runtime: noRuntime, AfterStep: rec.hook, Log: &log}
	if err := setuprunner.Apply(ctx, pendingSetup(fullFiles), opts); err != nil {
		t.Fatalf("Apply over a matching marker = %v, want success", err)
	}
	if err := setuprunner.Apply(ctx, completedSetup(), opts); err != nil {
		t.Errorf("Apply (completed) over a matching marker = %v, want success", err)
	}
	if len(rec.steps) != 0 {
		t.Errorf("steps ran over a matching marker: %v", rec.steps)
	}
	if diff := cmp.Diff(before, snapshot(t, ws)); diff != "" {
		t.Errorf("Apply changed the workspace (-before +after):\n%s", diff)
	}
	checkNoContent(t, "log", log.String())
}

// TestCompletedWithoutMarker: once setup completed, a missing marker (or
// missing storage) is a failure, never a reason to replay.
func TestCompletedWithoutMarker(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name    string
		prepare func(t *testing.T, ws string)
	}{
		{name: "storage missing", prepare: func(*testing.T, string) {}},
		{name: "empty storage", prepare: func(t *testing.T, ws string) { mkdir(t, ws) }},
		{name: "files without a marker", prepare: func(t *testing.T, ws string) {
			writeFile(t, filepath.Join(ws, workspace.SoulMD), soulText)
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, 10*time.Second)
			ws := newWorkspace(t)
			tt.prepare(t, ws)
			before := snapshot(t, ws)
			opts := setuprunner.Options{Workspace: ws, Runtime: noRuntime}
			if err := setuprunner.Verify(ctx, completedSetup(), opts); !errors.Is(err, setuprunner.ErrFailed) {
				t.Errorf("Verify = %v, want ErrFailed", err)
			}
			if err := setuprunner.Apply(ctx, completedSetup(), opts); !errors.Is(err, setuprunner.ErrFailed) {
				t.Errorf("Apply (completed) = %v, want ErrFailed", err)
			}
			if diff := cmp.Diff(before, snapshot(t, ws)); diff != "" {
				t.Errorf("the workspace changed (-before +after):\n%s", diff)
			}
		})
	}
}

func TestVerifyRefusesPendingSetup(t *testing.T) {
	t.Parallel()
	ctx := testContext(t, 10*time.Second)
	ws := newWorkspace(t)
	writeFile(t, filepath.Join(ws, workspace.MarkerName), string(pendingSetup(nil).Identity().MarshalMarker()))
	err := setuprunner.Verify(ctx, pendingSetup(fullFiles), setuprunner.Options{Workspace: ws})
	if !errors.Is(err, setuprunner.ErrFailed) {
		t.Errorf("Verify(pending setup) = %v, want ErrFailed", err)
	}
}

// TestEarlierPartialAttempt: files that equal the submission (written by
// an earlier attempt) or the stock text are accepted, files not submitted
// are left alone whatever they hold, and a leftover reserved temp file is
// cleared.
func TestEarlierPartialAttempt(t *testing.T) {
	t.Parallel()
	rt := needRuntime(t)
	ctx := testContext(t, 2*time.Minute)
	ws := newWorkspace(t)
	writeFile(t, filepath.Join(ws, workspace.SoulMD), soulText)
	writeFile(t, filepath.Join(ws, workspace.AgentsMD), workspace.Defaults()[workspace.AgentsMD])
	writeFile(t, filepath.Join(ws, workspace.UserMD), "user-edit-text")
	writeFile(t, filepath.Join(ws, setuprunner.TempName), "half a file")
	s := pendingSetup(map[string]string{
		workspace.SoulMD:     soulText,
		workspace.AgentsMD:   agentText,
		workspace.IdentityMD: "",
	})
	var rec recorder
	state := filepath.Join(filepath.Dir(ws), "state") // the state dir a gateway would use
	if err := setuprunner.Apply(ctx, s, setuprunner.Options{Workspace: ws, Runtime: rt, StateDir: state, AfterStep: rec.hook}); err != nil {
		t.Fatalf("Apply after a partial attempt: %v", err)
	}
	checkApplied(t, ws, s)
	if !exists(filepath.Join(state, "agents", "main", "sessions")) {
		t.Errorf("native setup did not keep its state in StateDir")
	}
	if got := readFile(t, filepath.Join(ws, workspace.UserMD)); got != "user-edit-text" {
		t.Errorf("USER.md (not submitted) was changed to %d bytes", len(got))
	}
	for _, step := range rec.steps {
		if step == "file-written:SOUL.md" {
			t.Errorf("SOUL.md, already equal to the submission, was written again")
		}
	}
}

// TestUserEditsAfterCompletion: after setup, the marker makes a
// redelivered payload a no-op, so a user's edit survives; and deleting
// the marker does not force a replay either: the edit is a conflict.
func TestUserEditsAfterCompletion(t *testing.T) {
	t.Parallel()
	rt := needRuntime(t)
	ctx := testContext(t, 2*time.Minute)
	ws := newWorkspace(t)
	s := pendingSetup(fullFiles)
	opts := setuprunner.Options{Workspace: ws, Runtime: rt}
	if err := setuprunner.Apply(ctx, s, opts); err != nil {
		t.Fatalf("Apply: %v", err)
	}
	writeFile(t, filepath.Join(ws, workspace.SoulMD), "user-edit-text")
	before := snapshot(t, ws)

	var rec recorder
	redeliver := opts
	redeliver.AfterStep = rec.hook
	if err := setuprunner.Apply(ctx, s, redeliver); err != nil {
		t.Fatalf("Apply of the same pending payload after completion = %v, want success", err)
	}
	if len(rec.steps) != 0 {
		t.Errorf("steps ran after completion: %v", rec.steps)
	}
	if diff := cmp.Diff(before, snapshot(t, ws)); diff != "" {
		t.Errorf("the workspace changed (-before +after):\n%s", diff)
	}
	if err := setuprunner.Verify(ctx, completedSetup(), opts); err != nil {
		t.Errorf("Verify after a user edit: %v", err)
	}

	// An operator deletes the marker to force a replay: it must not work.
	if err := os.Remove(filepath.Join(ws, workspace.MarkerName)); err != nil {
		t.Fatal(err)
	}
	if err := setuprunner.Apply(ctx, s, redeliver); !errors.Is(err, setuprunner.ErrFailed) {
		t.Errorf("Apply without the marker over a user edit = %v, want ErrFailed", err)
	}
	if got := readFile(t, filepath.Join(ws, workspace.SoulMD)); got != "user-edit-text" {
		t.Errorf("the user's SOUL.md was overwritten")
	}
	if err := setuprunner.Verify(ctx, completedSetup(), opts); !errors.Is(err, setuprunner.ErrFailed) {
		t.Errorf("Verify without the marker = %v, want ErrFailed", err)
	}
}

// TestNativeSetupFailure: native setup that fails, cannot start or runs
// too long fails the run, and no marker is written.
func TestNativeSetupFailure(t *testing.T) {
	t.Parallel()
	rt := needRuntime(t)
	tests := []struct {
		name    string
		node    string
		timeout time.Duration
		wantErr error
	}{
		{name: "non-zero exit", node: "false"},
		{name: "node missing", node: "/nonexistent/node"},
		{name: "timeout", node: rt.Node, timeout: time.Millisecond, wantErr: context.DeadlineExceeded},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			ctx := testContext(t, time.Minute)
			ws := newWorkspace(t)
			opts := setuprunner.Options{
				Workspace:    ws,
				Runtime:      setuprunner.Runtime{Node: tt.node, Executable: rt.Executable},
				SetupTimeout: tt.timeout,
			}
			err := setuprunner.Apply(ctx, pendingSetup(fullFiles), opts)
			if !errors.Is(err, setuprunner.ErrFailed) {
				t.Fatalf("Apply = %v, want ErrFailed", err)
			}
			if tt.wantErr != nil && !errors.Is(err, tt.wantErr) {
				t.Errorf("Apply = %v, want it to wrap %v", err, tt.wantErr)
			}
			if exists(filepath.Join(ws, workspace.MarkerName)) {
				t.Errorf("marker written although native setup failed")
			}
		})
	}
}

func mkdir(t *testing.T, dir string) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o700); err != nil {
		t.Fatal(err)
	}
}

func symlink(t *testing.T, target, link string) {
	t.Helper()
	if err := os.Symlink(target, link); err != nil {
		t.Fatal(err)
	}
}

// TestReadBounds: every bounded read of a run at its limit (the run gets
// through all read-only checks) and one byte past it (the run fails,
// naming the rule): package.json 4 MiB, a template 1 MiB, a workspace file
// 32,768 bytes; and the package.json search, which covers the executable's
// directory and three parents. No OpenClaw runtime is needed: the package
// is a stand-in and the run stops before native setup.
func TestReadBounds(t *testing.T) {
	t.Parallel()
	stop := errors.New("stop before native setup")
	tests := []struct {
		name     string
		depth    int // directories between the package root and the executable
		manifest int // bytes of package.json; 0: unpadded
		template int // bytes of the AGENTS.md template; 0: a short one
		userFile int // bytes of a USER.md already in the workspace; 0: none
		want     string
	}{
		{name: "package.json three parents up", depth: 3},
		{name: "package.json four parents up", depth: 4, want: "workspace setup failed at package: not-found"},
		{name: "package.json of 4 MiB", manifest: 4 << 20},
		{name: "package.json of 4 MiB + 1", manifest: 4<<20 + 1, want: "workspace setup failed at package: read-manifest: too-large"},
		{name: "template of 1 MiB", template: 1 << 20},
		{name: "template of 1 MiB + 1", template: 1<<20 + 1, want: "workspace setup failed at defaults: read-template: too-large"},
		{name: "workspace file of 32768 bytes", userFile: 32768},
		{name: "workspace file of 32769 bytes", userFile: 32769, want: "workspace setup failed at conflicts: USER.md: too-large"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := standInPackage(t, tt.manifest, tt.template)
			exe := root
			for i := range tt.depth {
				exe = filepath.Join(exe, fmt.Sprintf("d%d", i))
			}
			exe = filepath.Join(exe, "openclaw.mjs")
			writeFile(t, exe, "")
			ws := newWorkspace(t)
			if tt.userFile > 0 {
				writeFile(t, filepath.Join(ws, workspace.UserMD), strings.Repeat("u", tt.userFile))
			}
			s := pendingSetup(crashFiles)
			s.DefaultsID = "" // the stand-in's templates are not the pinned release's
			err := setuprunner.Apply(testContext(t, time.Minute), s, setuprunner.Options{
				Workspace: ws, Runtime: setuprunner.Runtime{Node: noRuntime.Node, Executable: exe},
				AfterStep: func(step string) error {
					if step == "preflight" {
						return stop
					}
					return nil
				},
			})
			got := ""
			if !errors.Is(err, stop) {
				got = fmt.Sprint(err)
			}
			if got != tt.want {
				t.Errorf("Apply: %q, want %q", got, tt.want)
			}
		})
	}
}

// standInPackage writes a stand-in OpenClaw package in a fresh real
// directory (symbolic links of the temp dir resolved), which it returns:
// package.json padded with spaces to manifest bytes (0: unpadded) and the
// four templates, AGENTS.md of template bytes (0: a short one like the
// others). Its templates are not the pinned release's: a setup run on it
// needs an empty DefaultsID.
func standInPackage(t *testing.T, manifest, template int) (root string) {
	t.Helper()
	root, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	const name = `{"name":"openclaw"}`
	writeFile(t, filepath.Join(root, "package.json"), name+strings.Repeat(" ", max(manifest-len(name), 0)))
	for _, n := range workspace.Names {
		text := "# " + n + "\n"
		if n == workspace.AgentsMD && template > 0 {
			text = strings.Repeat("a", template)
		}
		writeFile(t, filepath.Join(root, "docs", "reference", "templates", n), text)
	}
	return root
}

// TestNativeOutputLimit: native setup may print 1 MiB on each of its
// standard output and standard error (the reference's maxBuffer, per
// stream); one byte more on either is a failure of class output-too-large,
// and no marker is written. The real OpenClaw cannot be made to print a
// chosen amount, so "node" here is /bin/sh and the executable a script in
// a stand-in package that prints exactly that many bytes and exits 0: the
// runner starts it as it starts native setup (same arguments, environment
// and process group), and the run goes on to write the files and the
// marker as after a real native setup.
//
// The "then sleeps" cases are a setup that goes past the cap and then
// waits on a child that sleeps 600 s (in its process group, holding the
// output pipes, as a git child would): the group must be killed as soon as
// the cap is passed, so the run fails as output-too-large and neither
// process runs afterwards. A runner that checked the cap only when native
// setup ends would wait until the test's one-minute context ends and fail
// with another class.
func TestNativeOutputLimit(t *testing.T) {
	t.Parallel()
	const mib = 1 << 20
	const tooLarge = "workspace setup failed at native-setup-1: output-too-large"
	tests := []struct {
		name           string
		stdout, stderr int  // bytes native setup prints
		sleep          bool // and then waits on a sleeping child
		want           string
	}{
		{name: "1 MiB on standard output", stdout: mib},
		{name: "1 MiB + 1 on standard output", stdout: mib + 1, want: tooLarge},
		{name: "1 MiB on standard error", stderr: mib},
		{name: "1 MiB + 1 on standard error", stderr: mib + 1, want: tooLarge},
		{name: "1 MiB on each", stdout: mib, stderr: mib},
		{name: "1 MiB + 1 on standard output, then sleeps", stdout: mib + 1, sleep: true, want: tooLarge},
		{name: "1 MiB + 1 on standard error, then sleeps", stderr: mib + 1, sleep: true, want: tooLarge},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			root := standInPackage(t, 0, 0)
			exe := filepath.Join(root, "openclaw.mjs")
			pids := filepath.Join(root, "pids")
			script := fmt.Sprintf("head -c %d /dev/zero\nhead -c %d /dev/zero >&2\n", tt.stdout, tt.stderr)
			if tt.sleep {
				script = fmt.Sprintf("sleep 600 &\necho $$ $! > %s\n%swait\n", pids, script)
			}
			writeFile(t, exe, script)
			ws := newWorkspace(t)
			s := pendingSetup(crashFiles)
			s.DefaultsID = "" // the stand-in's templates
			err := setuprunner.Apply(testContext(t, time.Minute), s, setuprunner.Options{
				Workspace: ws, Runtime: setuprunner.Runtime{Node: "/bin/sh", Executable: exe},
			})
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Apply: %q, want %q", got, tt.want)
			}
			if marker := exists(filepath.Join(ws, workspace.MarkerName)); marker != (tt.want == "") {
				t.Errorf("marker written: %v, want %v", marker, tt.want == "")
			}
			if !tt.sleep {
				return
			}
			// Apply has returned: native setup was waited for and its
			// group killed.
			gwtest.CheckPIDsGone(t, pids)
		})
	}
}
