package setuprunner

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"io/fs"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/openclaw/occ/internal/exactjson"
	"github.com/openclaw/occ/internal/workspace"
)

// Runtime is the OpenClaw installation native setup runs from.
type Runtime struct {
	// Node is the node binary: a path, or a name looked up in PATH.
	Node string
	// Executable is OpenClaw's openclaw.mjs. Its real path (symbolic links
	// resolved) locates the package whose templates define the stock
	// files, so the templates and the native setup always come from the
	// same installation.
	Executable string
}

// Options say where and how a runner works.
type Options struct {
	// Workspace is the Agent's workspace directory: absolute and already
	// clean. It need not exist yet.
	Workspace string
	Runtime   Runtime
	// StateDir is HOME and OPENCLAW_STATE_DIR for native setup: absolute,
	// created with mode 0700 when missing. Native setup keeps its state
	// there (agents/main/sessions, state/openclaw.sqlite), so a driver can
	// pass the directory its gateway will use. When empty, a private
	// temporary directory is used and removed afterwards.
	StateDir string
	// TempDir is where the runner makes its private scratch directory: the
	// native config, native setup's log file (logging.file; OpenClaw's
	// default is the host-wide /tmp/openclaw/) and native setup's TMPDIR
	// all live there, and it is removed afterwards. Absolute, created with
	// mode 0700 when missing; a driver passes a directory of the Agent's
	// own, so nothing of one Agent's setup lands in a directory shared with
	// other Agents or the host user. Empty means the OS temp directory.
	TempDir string
	// Log receives step-level details: step names, file names, error
	// classes and durations, never file content and never the payload.
	// May be nil.
	Log io.Writer
	// SetupTimeout bounds each native setup run; zero means 120 s.
	SetupTimeout time.Duration
	// AfterStep, for tests, is called after each named step; an error
	// aborts the run right there, as a crash would (the reserved temp file
	// of an interrupted atomic write is left behind). The steps of a full
	// run, in order: preflight, prepared, native-setup-1, then for each
	// submitted file that is not already equal, in the order AGENTS.md,
	// SOUL.md, IDENTITY.md, USER.md, temp-written:<name> and
	// file-written:<name>; native-setup-2, files-verified,
	// temp-written:.oce-workspace-setup.json, marker-written.
	AfterStep func(step string) error
}

// DefaultSetupTimeout bounds one native setup run when
// Options.SetupTimeout is zero. Native setup takes 2–5 s.
const DefaultSetupTimeout = 120 * time.Second

// maxNativeOutput caps each output stream of native setup: one byte more
// fails the run and kills native setup at once, as the reference's
// maxBuffer does.
const maxNativeOutput = 1 << 20

// maxManifestBytes and maxTemplateBytes bound reads from the OpenClaw
// package (its package.json is ~10 KiB, a template a few KiB).
const (
	maxManifestBytes = 4 << 20
	maxTemplateBytes = 1 << 20
)

// packageSearchDepth is how many directories, starting with the one
// holding the executable, are searched for OpenClaw's package.json.
const packageSearchDepth = 4

// Apply runs the workspace setup runner for s in o.Workspace: steps 3–7 of
// the reference runner (everything but unlinking the payload file, which
// is the command's business). It returns nil when the workspace now holds
// the submitted files and a marker naming s, or already held a matching
// marker (a retry after a lost acknowledgement, which changes nothing).
// For a completed s it only checks the marker, like Verify.
//
// Callers must run at most one Apply per workspace at a time (exclusive
// startup): the reserved temp file and native setup assume it.
//
// Every failure wraps ErrFailed. After a failure the workspace may hold
// native setup's stock files and some submitted files, never a marker;
// running Apply again with the same s is the way forward.
func Apply(ctx context.Context, s workspace.Setup, o Options) error {
	r := newRun(ctx, s, o)
	err := r.apply()
	r.logResult(err)
	return err
}

// Verify is the verifier that guards every runtime start after setup
// completed: s is the identity (Completed true, no files) and the marker
// in o.Workspace must exist and match it. It never writes and never runs
// native setup; a failure (missing storage, a missing or divergent marker)
// must keep the runtime from starting. Every failure wraps ErrFailed.
func Verify(ctx context.Context, s workspace.Setup, o Options) error {
	r := newRun(ctx, s, o)
	err := r.verify()
	r.logResult(err)
	return err
}

type run struct {
	ctx context.Context
	s   workspace.Setup
	o   Options
	log *slog.Logger
}

func newRun(ctx context.Context, s workspace.Setup, o Options) *run {
	w := o.Log
	if w == nil {
		w = io.Discard
	}
	return &run{ctx: ctx, s: s, o: o, log: slog.New(slog.NewTextHandler(w, nil))}
}

func (r *run) verify() error {
	if !r.s.Completed {
		return newFailure(stepPayload, "not-completed", nil)
	}
	if err := r.begin(); err != nil {
		return err
	}
	present, err := r.checkMarker()
	if err != nil {
		return err
	}
	if !present {
		return newFailure(stepMarker, "missing", nil)
	}
	return nil
}

// begin runs steps 1–3: the setup's own rules and the workspace path rules.
func (r *run) begin() error {
	if err := r.ctx.Err(); err != nil {
		return newFailure(stepContext, errClass(err), err)
	}
	if err := validateSetup(r.s); err != nil {
		return err
	}
	return checkWorkspacePath(r.o.Workspace)
}

// checkMarker is steps 4–5: a marker that exists must match the identity
// exactly; (true, nil) means it does.
func (r *run) checkMarker() (bool, error) {
	content, present, err := safeRead(filepath.Join(r.o.Workspace, workspace.MarkerName), markerLimit, stepMarker)
	if err != nil || !present {
		return false, err
	}
	if !markerMatches(content, r.s.Identity()) {
		return false, newFailure(stepMarker, "mismatch", nil)
	}
	return true, nil
}

func (r *run) apply() error {
	if err := r.begin(); err != nil {
		return err
	}
	present, err := r.checkMarker()
	if err != nil {
		return err
	}
	if present {
		// The setup already completed here; its acknowledgement was lost
		// or this is a restart. Nothing else may be applied: the files
		// may have been edited since.
		r.log.Info("workspace setup", "step", stepMarker, "result", "matches; nothing applied")
		return nil
	}
	if r.s.Completed {
		// Initialized storage is gone (or was never this one). Replaying
		// is impossible (the files were cleared) and would be wrong.
		return newFailure(stepMarker, "missing", nil)
	}

	exe, pkg, err := findPackage(r.o.Runtime.Executable)
	if err != nil {
		return err
	}
	stock, err := renderStock(pkg)
	if err != nil {
		return err
	}
	if r.s.DefaultsID != "" && r.s.DefaultsID != workspace.ComputeDefaultsID(stock) {
		// The operator saw other default texts than this installation
		// would keep: the submission may rely on them.
		return newFailure(stepDefaults, "foreign-defaults", nil)
	}
	// Check every native file before native setup can create defaults or
	// change BOOTSTRAP state: a retry accepts a file that is stock or
	// already the submission; anything else is someone's edit.
	for _, name := range workspace.Names {
		content, exists, err := safeRead(filepath.Join(r.o.Workspace, name), fileLimit, stepConflicts)
		if err != nil {
			return err
		}
		want, submitted := r.s.Files[name]
		if submitted && exists && string(content) != stock[name] && string(content) != want {
			return newFailure(stepConflicts, "conflict: "+name, nil)
		}
	}
	if err := r.after(stepPreflight); err != nil {
		return err
	}

	if err := os.MkdirAll(r.o.Workspace, 0o700); err != nil {
		return newFailure(stepWorkspace, "mkdir: "+errClass(err), err)
	}
	// The chain was checked before; check it again now that it exists, so
	// a component swapped for a link meanwhile is caught before writing.
	if err := checkWorkspacePath(r.o.Workspace); err != nil {
		return err
	}
	if r.o.TempDir != "" {
		if !filepath.IsAbs(r.o.TempDir) {
			return newFailure(stepPrepared, "temp-dir-not-absolute", nil)
		}
		if err := os.MkdirAll(r.o.TempDir, 0o700); err != nil {
			return newFailure(stepPrepared, "mkdir-temp: "+errClass(err), err)
		}
	}
	temp, err := os.MkdirTemp(r.o.TempDir, "oce-workspace-setup-")
	if err != nil {
		return newFailure(stepPrepared, "mkdtemp: "+errClass(err), err)
	}
	defer func() {
		// It holds only the native config and, without StateDir, native
		// state: no content. A crash leaves it in the OS temp dir, where it
		// does not influence a retry.
		if err := os.RemoveAll(temp); err != nil {
			r.log.Warn("workspace setup", "step", stepCleanup, "class", errClass(err))
		}
	}()
	nat, err := r.prepareNative(temp, exe)
	if err != nil {
		return err
	}
	if err := r.after(stepPrepared); err != nil {
		return err
	}

	if err := r.nativeSetup(nat, stepNative1); err != nil {
		return err
	}
	for _, name := range workspace.Names {
		want, ok := r.s.Files[name]
		if !ok {
			continue
		}
		file := filepath.Join(r.o.Workspace, name)
		content, exists, err := safeRead(file, fileLimit, stepWrite)
		if err != nil {
			return err
		}
		if exists && string(content) == want {
			continue
		}
		if exists && string(content) != stock[name] {
			return newFailure(stepWrite, "conflict: "+name, nil)
		}
		if err := r.atomicWrite(file, []byte(want), name); err != nil {
			return err
		}
		if err := r.after(stepFileWritten + name); err != nil {
			return err
		}
	}
	// Native BOOTSTRAP lifecycle sees the submitted profile before any
	// gateway starts (it removes BOOTSTRAP.md once the profile is no
	// longer stock).
	if err := r.nativeSetup(nat, stepNative2); err != nil {
		return err
	}
	for _, name := range workspace.Names {
		want, ok := r.s.Files[name]
		if !ok {
			continue
		}
		content, exists, err := safeRead(filepath.Join(r.o.Workspace, name), fileLimit, stepVerified)
		if err != nil {
			return err
		}
		if !exists || string(content) != want {
			return newFailure(stepVerified, "differs: "+name, nil)
		}
	}
	if err := r.after(stepVerified); err != nil {
		return err
	}
	if err := r.atomicWrite(filepath.Join(r.o.Workspace, workspace.MarkerName), r.s.Identity().MarshalMarker(), workspace.MarkerName); err != nil {
		return err
	}
	return r.after(stepMarkerWrite)
}

// after reports a finished step to the log and to AfterStep, and stops
// the run when the caller's context has ended.
func (r *run) after(step string, attrs ...any) error {
	r.log.Info("workspace setup", append([]any{"step", step, "result", "ok"}, attrs...)...)
	if r.o.AfterStep != nil {
		if err := r.o.AfterStep(step); err != nil {
			return newFailure(stepAborted, step, err)
		}
	}
	if err := r.ctx.Err(); err != nil {
		return newFailure(stepContext, errClass(err), err)
	}
	return nil
}

func (r *run) logResult(err error) {
	if err == nil {
		return
	}
	var f *failure
	if errors.As(err, &f) {
		r.log.Error("workspace setup", "step", f.step, "result", "failed", "class", f.class)
	}
}

// markerMatches reports whether marker, parsed as JSON and serialized
// again as JSON.stringify would, is exactly the identity's marker text,
// which is how the reference compares. So whitespace and escaping may
// differ from what the runner writes, but key order, key set, types and
// values may not.
func markerMatches(marker []byte, id workspace.Identity) bool {
	v, err := decodeJSON(marker)
	if err != nil || v.Kind != exactjson.Object {
		return false
	}
	// An identity holds only string values. Any other value stands in as
	// an empty array, which serializes differently from every string; it
	// is kept (not refused at once) because a later duplicate key may
	// replace it, as in JavaScript. An unpaired surrogate serializes as an
	// escape no well-formed identity string produces.
	notString := []any{}
	obj := make(workspace.Object, 0, len(v.Members))
	for _, m := range v.Members {
		if isLone(m.Key) {
			return false
		}
		var value any = notString
		if m.Value.Kind == exactjson.String && !isLone(m.Value) {
			value = jsString(m.Value)
		}
		obj = append(obj, workspace.Member{Key: jsString(m.Key), Value: value})
	}
	got, err := workspace.StringifyJS(obj)
	return err == nil && bytes.Equal(got, id.MarshalMarker())
}

// findPackage resolves the executable's real path and looks for the
// OpenClaw package.json (name "openclaw") in its directory and up to three
// parents. It returns the real executable and the package root.
func findPackage(executable string) (exe, root string, err error) {
	if executable == "" {
		return "", "", newFailure(stepPackage, "no-executable", nil)
	}
	abs, err := filepath.Abs(executable)
	if err == nil {
		exe, err = filepath.EvalSymlinks(abs)
	}
	if err != nil {
		return "", "", newFailure(stepPackage, "realpath: "+errClass(err), err)
	}
	dir := filepath.Dir(exe)
	for range packageSearchDepth {
		manifest := filepath.Join(dir, "package.json")
		_, err := os.Lstat(manifest)
		switch {
		case err == nil:
			data, err := readCapped(manifest, maxManifestBytes)
			if err != nil {
				return "", "", newFailure(stepPackage, "read-manifest: "+errClass(err), err)
			}
			var v any
			if err := json.Unmarshal(data, &v); err != nil {
				// JSON.parse throws in the reference: an unreadable
				// manifest on the way up is a broken installation.
				return "", "", newFailure(stepPackage, "invalid-manifest", nil)
			}
			if m, ok := v.(map[string]any); ok && m["name"] == "openclaw" {
				return exe, dir, nil
			}
		case !errors.Is(err, fs.ErrNotExist):
			return "", "", newFailure(stepPackage, "lstat-manifest: "+errClass(err), err)
		}
		dir = filepath.Dir(dir)
	}
	return "", "", newFailure(stepPackage, "not-found", nil)
}

// renderStock renders the four templates of the package at root with
// workspace.Render: what native setup seeds.
func renderStock(root string) (map[string]string, error) {
	stock := make(map[string]string, len(workspace.Names))
	for _, name := range workspace.Names {
		raw, err := readCapped(filepath.Join(root, "docs", "reference", "templates", name), maxTemplateBytes)
		if err != nil {
			return nil, newFailure(stepDefaults, "read-template: "+errClass(err), err)
		}
		stock[name] = workspace.Render(raw)
	}
	return stock, nil
}

var errTooLarge = errors.New("file too large")

func readCapped(path string, limit int64) ([]byte, error) {
	f, err := os.Open(path)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	data, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err == nil && int64(len(data)) > limit {
		err = errTooLarge
	}
	return data, err
}

// native is what each native setup run needs.
type native struct {
	node, exe, dir string
	env            []string
}

// prepareNative writes the private native config into temp (mode 0600)
// and builds the environment. The environment is built, not inherited:
// in the local driver the runner runs inside the OCC server, whose
// environment may hold its own secrets.
func (r *run) prepareNative(temp, exe string) (native, error) {
	if r.o.Runtime.Node == "" {
		return native{}, newFailure(stepPrepared, "no-node", nil)
	}
	state := r.o.StateDir
	if state == "" {
		state = filepath.Join(temp, "state")
	}
	if !filepath.IsAbs(state) {
		return native{}, newFailure(stepPrepared, "state-dir-not-absolute", nil)
	}
	if err := os.MkdirAll(state, 0o700); err != nil {
		return native{}, newFailure(stepPrepared, "mkdir-state: "+errClass(err), err)
	}
	config, err := workspace.StringifyJS(workspace.Object{
		{Key: "agents", Value: workspace.Object{
			{Key: "defaults", Value: workspace.Object{{Key: "workspace", Value: r.o.Workspace}}},
			{Key: "entries", Value: workspace.Object{{Key: "main", Value: workspace.Object{}}}},
		}},
		{Key: "gateway", Value: workspace.Object{{Key: "mode", Value: "local"}}},
		// Native setup's own log, which OpenClaw otherwise writes to the
		// host-wide /tmp/openclaw/ (not moved by TMPDIR). It can quote the
		// workspace path; it goes with the scratch directory.
		{Key: "logging", Value: workspace.Object{{Key: "file", Value: filepath.Join(temp, "openclaw-setup.log")}}},
	})
	if err != nil {
		return native{}, newFailure(stepPrepared, "config", err)
	}
	configPath := filepath.Join(temp, "openclaw.json")
	f, err := os.OpenFile(configPath, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return native{}, newFailure(stepPrepared, "create-config: "+errClass(err), err)
	}
	_, werr := f.Write(config)
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return native{}, newFailure(stepPrepared, "write-config: "+errClass(werr), werr)
	}
	path := os.Getenv("PATH")
	if path == "" {
		path = "/usr/local/bin:/usr/bin:/bin" // native setup runs git
	}
	env := []string{
		"PATH=" + path,
		"HOME=" + state,
		"OPENCLAW_STATE_DIR=" + state,
		"OPENCLAW_CONFIG_PATH=" + configPath,
		"OPENCLAW_SKIP_CHANNELS=1",
		"OPENCLAW_DISABLE_BONJOUR=1",
		"OPENCLAW_NO_AUTO_UPDATE=1",
		"OPENCLAW_OFFLINE=1",
		// Temporary files of node, OpenClaw and git stay in the scratch
		// directory (OpenClaw's fallbacks for an unusable /tmp/openclaw
		// are under os.tmpdir(), which follows TMPDIR).
		"TMPDIR=" + temp,
	}
	return native{node: r.o.Runtime.Node, exe: exe, dir: temp, env: env}, nil
}

// nativeSetup runs `<node> <openclaw.mjs> setup --baseline --workspace
// <dir>` once. Its output is counted and discarded: it can quote
// workspace files, so it is never logged. A non-zero exit, a timeout or
// more than maxNativeOutput bytes on either stream is a failure. The
// process runs in its own process group, and the group is killed with
// SIGKILL as soon as the timeout passes or either stream passes
// maxNativeOutput (as the reference's maxBuffer kills the child at once),
// so neither a stuck setup nor a git child outlives the failure; Run
// waits for the killed process before nativeSetup returns.
func (r *run) nativeSetup(n native, step string) error {
	timeout := r.o.SetupTimeout
	if timeout <= 0 {
		timeout = DefaultSetupTimeout
	}
	ctx, cancel := context.WithTimeout(r.ctx, timeout)
	defer cancel()
	// kill ends the run when a stream passes the cap; the timeout's
	// context is its parent, so either one kills the group.
	ctx, kill := context.WithCancel(ctx)
	defer kill()
	cmd := exec.CommandContext(ctx, n.node, n.exe, "setup", "--baseline", "--workspace", r.o.Workspace)
	cmd.Env = n.env
	cmd.Dir = n.dir
	stdout, stderr := &cappedDiscard{over: kill}, &cappedDiscard{over: kill}
	cmd.Stdout, cmd.Stderr = stdout, stderr
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
	// A child that left the process group and keeps the output pipes open
	// cannot hold the run past this.
	cmd.WaitDelay = 5 * time.Second
	start := time.Now()
	err := cmd.Run()
	elapsed := time.Since(start).Round(time.Millisecond)
	switch {
	case stdout.overflow.Load() || stderr.overflow.Load():
		// First: the kill for too much output also ends ctx, and a
		// process that printed too much and then failed anyway failed
		// for its output, as in the reference.
		return newFailure(step, "output-too-large", nil)
	case ctx.Err() != nil:
		// The timeout or the caller's context: kill was not called, so
		// ctx carries its parent's error.
		return newFailure(step, errClass(ctx.Err()), ctx.Err())
	case err != nil:
		var exit *exec.ExitError
		if errors.As(err, &exit) {
			return newFailure(step, "exit-status", err)
		}
		return newFailure(step, "start: "+errClass(err), err)
	}
	return r.after(step, "elapsed", elapsed.String())
}

// cappedDiscard counts output and drops it. When more than
// maxNativeOutput bytes have arrived it notes the overflow and calls over
// (which kills the process group). It never fails a write: a failed write
// would stop exec's copy and could leave the child blocked on a full pipe
// instead of dying of the kill. Write runs on exec's copy goroutine, so
// the flag is atomic.
type cappedDiscard struct {
	n        int
	overflow atomic.Bool
	over     func()
}

func (c *cappedDiscard) Write(p []byte) (int, error) {
	c.n += len(p)
	if c.n > maxNativeOutput && !c.overflow.Swap(true) {
		c.over()
	}
	return len(p), nil
}
