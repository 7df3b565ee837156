package docker

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/client"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/agentdir"
	"github.com/openclaw/occ/internal/compute/readywatch"
	"github.com/openclaw/occ/internal/workspace"
)

// ID is the driver id recorded in each revision.
const ID = DriverName

// PendingReason is the code PrepareRevision answers while the gateway is
// starting or restarting.
const PendingReason = "AGENT_GATEWAY_UNAVAILABLE"

// Defaults of zero Options fields.
const (
	DefaultSetupTimeout = 3 * time.Minute
	DefaultStopGrace    = 10 * time.Second
	// DefaultRestartLimit is how many restarts of a gateway container that
	// never became ready make its revision fail permanently.
	DefaultRestartLimit = 5
	// DefaultReadyTimeout bounds one start of a revision that is not
	// serving yet, container start to /readyz 200 (the local driver's
	// default).
	DefaultReadyTimeout = 90 * time.Second
)

// Options configure a Driver.
type Options struct {
	// Config is the drivers.compute.docker section (defaulted here).
	Config Config
	// DataDir holds the Agents' host directories (DataDir/docker/...).
	// Required.
	DataDir string
	// SetupTimeout bounds one one-shot container (setup, occ copy).
	SetupTimeout time.Duration
	// StopGrace is how long a gateway gets after SIGTERM.
	StopGrace time.Duration
	// RestartLimit: see DefaultRestartLimit.
	RestartLimit int
	// ReadyTimeout: see DefaultReadyTimeout. A gateway of a revision that
	// is not serving and runs this long without answering /readyz is
	// stopped, and the revision fails with RUNTIME_FAILED.
	ReadyTimeout time.Duration
	// Labels are added to every object (tests mark theirs with it).
	Labels map[string]string
	// Logger receives the driver's lines (no secrets, no content).
	Logger *slog.Logger
}

// Driver is the Docker Compute driver; safe for concurrent use.
type Driver struct {
	o    Options
	c    *client.Client
	log  *slog.Logger
	root string // DataDir/docker
	http *http.Client

	mu     sync.Mutex
	locks  map[string]chan struct{} // per Agent
	portMu sync.Mutex

	// watch runs the readiness watchers of starting gateways, for
	// compute.ReadyNotifier: the driver keeps no supervisor.
	watch *readywatch.Watchers

	// Test stand-ins: when set, the gateway's and the setup container's
	// entrypoints (the gateway one given the Agent's port).
	gatewayCmd func(port int) []string
	setupCmd   []string
}

var (
	_ compute.Driver    = (*Driver)(nil)
	_ compute.Recoverer = (*Driver)(nil)
	_ compute.Closer    = (*Driver)(nil)

	_ compute.ReadyNotifier = (*Driver)(nil)
)

// New returns a driver for the daemon opts.Config.Host names (DOCKER_HOST
// or the local socket when empty). It makes no call to the daemon.
func New(opts Options) (*Driver, error) {
	if opts.DataDir == "" {
		return nil, errors.New("docker: DataDir is required")
	}
	opts.Config = opts.Config.WithDefaults()
	if err := opts.Config.Validate(); err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	if opts.SetupTimeout <= 0 {
		opts.SetupTimeout = DefaultSetupTimeout
	}
	if opts.StopGrace <= 0 {
		opts.StopGrace = DefaultStopGrace
	}
	if opts.RestartLimit <= 0 {
		opts.RestartLimit = DefaultRestartLimit
	}
	if opts.ReadyTimeout <= 0 {
		opts.ReadyTimeout = DefaultReadyTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	root, err := filepath.Abs(filepath.Join(opts.DataDir, "docker"))
	if err != nil {
		return nil, fmt.Errorf("docker: DataDir: %w", err)
	}
	if err := os.MkdirAll(root, 0o700); err != nil {
		return nil, fmt.Errorf("docker: create %s: %w", root, err)
	}
	copts := []client.Opt{client.FromEnv}
	if h := opts.Config.Host; h != "" {
		copts = append(copts, client.WithHost(h))
	}
	c, err := client.New(copts...)
	if err != nil {
		return nil, fmt.Errorf("docker: client: %w", err)
	}
	// Validate checked the configured host; DOCKER_HOST is checked here.
	if err := checkDaemonHost(c.DaemonHost()); err != nil {
		_ = c.Close()
		return nil, fmt.Errorf("docker: the daemon address (host, else DOCKER_HOST) %w", err)
	}
	return &Driver{
		o: opts, c: c, log: opts.Logger.With("driver", ID), root: root,
		http: &http.Client{
			Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true},
			Timeout:   2 * time.Second,
			CheckRedirect: func(*http.Request, []*http.Request) error {
				return http.ErrUseLastResponse
			},
		},
		locks: map[string]chan struct{}{},
		watch: readywatch.New(watchInterval, watchTimeout),
	}, nil
}

// ID returns "docker".
func (d *Driver) ID() string { return ID }

// Capabilities: workspace setup in a one-shot container, live files over
// the loopback endpoint.
func (d *Driver) Capabilities() compute.Capabilities {
	return compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}
}

// Close stops the readiness watchers and releases the engine client; the
// containers keep running.
func (d *Driver) Close() {
	d.watch.Stop()
	_ = d.c.Close()
}

// Readiness notices: while PrepareRevision answers pending for a gateway
// container it started or found starting, a watcher (package readywatch)
// probes its /readyz every watchInterval, for at most watchTimeout.
const (
	watchInterval = 250 * time.Millisecond
	watchTimeout  = 5 * time.Minute
)

// NotifyReady registers the callback told when a starting gateway first
// answers its readiness probe (compute.ReadyNotifier); it must not block.
func (d *Driver) NotifyReady(notify func(namespaceID, agentID string)) { d.watch.SetNotify(notify) }

// watchReady starts the watcher of rev's gateway on port.
func (d *Driver) watchReady(rev compute.Revision, port int) {
	d.watch.Watch(rev.NamespaceID, rev.AgentID, func(ctx context.Context) bool { return d.ready(ctx, port) })
}

// EnsureNamespace does nothing: a Namespace needs nothing on the engine.
func (d *Driver) EnsureNamespace(ctx context.Context, ns compute.Namespace) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("docker: ensure namespace: %w", err)
	}
	return nil
}

// DeleteNamespace does nothing, like EnsureNamespace.
func (d *Driver) DeleteNamespace(ctx context.Context, ns compute.Namespace) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("docker: delete namespace: %w", err)
	}
	return nil
}

// ---- names ----

func volumeName(agentID, what string) string { return "occ-" + agentdir.Hash(agentID) + "-" + what }
func configVolume(agentID, revID string) string {
	return "occ-" + agentdir.Hash(agentID) + "-" + agentdir.Hash(revID) + "-config"
}
func gatewayName(agentID, revID string) string {
	return "occ-" + agentdir.Hash(agentID) + "-" + agentdir.Hash(revID)
}

func (d *Driver) host(agentID string) hostDir {
	return hostDir{agentdir.Dir(filepath.Join(d.root, agentdir.Hash(agentID)))}
}

// lock takes the Agent's lock until ctx ends.
func (d *Driver) lock(ctx context.Context, agentID string) (func(), error) {
	d.mu.Lock()
	l := d.locks[agentID]
	if l == nil {
		l = make(chan struct{}, 1)
		d.locks[agentID] = l
	}
	d.mu.Unlock()
	select {
	case l <- struct{}{}:
		return func() { <-l }, nil
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

func checkRevision(rev compute.Revision) error {
	if rev.ID == "" || rev.AgentID == "" {
		return compute.Permanent(compute.CodeRuntimeFailed, errors.New("docker: revision without id or agent id"))
	}
	return nil
}

func refusal(msg string) error { return compute.Refusal(compute.CodeRuntimeFailed, msg) }

func setupFailed(msg string) error { return compute.Refusal(compute.CodeWorkspaceSetupFailed, msg) }

// ---- PrepareRevision ----

// PrepareRevision brings rev's gateway container up and answers Ready
// once it serves /readyz on the Agent's loopback port. While rev's
// container exists it only reports (or, when it was stopped, starts) it;
// otherwise it makes the volumes, writes the configuration, runs the
// workspace setup (or its verification) in a one-shot container, then
// stops the Agent's other gateway and creates and starts the container.
// Failures: see the package documentation.
func (d *Driver) PrepareRevision(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) (compute.PrepareResult, error) {
	if err := ctx.Err(); err != nil {
		return compute.PrepareResult{}, fmt.Errorf("docker: prepare: %w", err)
	}
	if err := checkRevision(rev); err != nil {
		return compute.PrepareResult{}, err
	}
	unlock, err := d.lock(ctx, rev.AgentID)
	if err != nil {
		return compute.PrepareResult{}, fmt.Errorf("docker: prepare: %w", err)
	}
	defer unlock()
	res, err := d.prepare(ctx, rev, rc)
	if p, ok := compute.AsPermanent(err); ok {
		d.log.Warn("docker: prepare failed permanently", "agent", rev.AgentID, "revision", rev.ID, "code", p.Code, "error", err)
		if rerr := d.restoreServing(ctx, rev); rerr != nil {
			// Retryable, so that the next attempt restores it: the
			// failure is answered again then.
			return compute.PrepareResult{}, fmt.Errorf("docker: revision %s failed (%s), and restoring the serving revision failed: %w", rev.ID, p.Code, rerr)
		}
	}
	return res, err
}

// restoreServing runs after rev failed for good: unless rev is the
// serving revision (left to the engine's restart policy, as the best the
// Agent has), it stops rev's gateway container, so that a failed revision
// neither crash-loops for ever nor serves later unactivated, and starts
// the serving revision's container again (preparing rev stopped it).
func (d *Driver) restoreServing(ctx context.Context, rev compute.Revision) error {
	serving, _ := d.host(rev.AgentID).serving()
	if serving == rev.ID {
		return nil
	}
	if err := d.stopRevisionGateway(ctx, rev); err != nil {
		return err
	}
	if serving == "" {
		return nil
	}
	return d.startServing(ctx, rev.AgentID, serving)
}

func (d *Driver) prepare(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) (compute.PrepareResult, error) {
	h := d.host(rev.AgentID)
	if serving, n := h.serving(); serving != "" && serving != rev.ID && n > rev.Number {
		return compute.PrepareResult{}, compute.Permanent(compute.CodeRuntimeFailed,
			fmt.Errorf("docker: revision #%d is older than the serving revision #%d", rev.Number, n))
	}
	// Render first: a conflicting configuration is refused before
	// anything is touched.
	if _, err := renderConfig(rev, "0", 1); err != nil {
		return compute.PrepareResult{}, err
	}
	if err := h.ensure(rev.AgentID, rev.NamespaceID); err != nil {
		return compute.PrepareResult{}, err
	}
	token, err := h.Token()
	if err != nil {
		return compute.PrepareResult{}, err
	}
	d.portMu.Lock()
	port, err := h.allocatePort(d.root, d.o.Config.Ports.Low, d.o.Config.Ports.High)
	d.portMu.Unlock()
	if err != nil {
		return compute.PrepareResult{}, err
	}

	existing, err := d.containers(ctx, agentFilter(rev.AgentID, roleGateway, rev.ID))
	if err != nil {
		return compute.PrepareResult{}, err
	}
	if len(existing) > 0 {
		return d.report(ctx, rev, existing[0].ID, port, true)
	}

	identity, err := d.ensureStorage(ctx, rev, rc.WorkspaceSetup)
	if err != nil {
		return compute.PrepareResult{}, err
	}
	cfg, err := renderConfig(rev, token, port)
	if err != nil {
		return compute.PrepareResult{}, err
	}
	if err := d.writeFiles(ctx, rev, cfg, identity); err != nil {
		return compute.PrepareResult{}, err
	}
	if err := d.setup(ctx, rev, rc.WorkspaceSetup, identity); err != nil {
		return compute.PrepareResult{}, err
	}
	// One gateway per Agent: the new revision replaces the running one,
	// only now that its setup verified (a refused revision leaves the
	// serving gateway alone).
	if err := d.stopGateways(ctx, rev.AgentID, ""); err != nil {
		return compute.PrepareResult{}, err
	}
	id, err := d.createGateway(ctx, rev, port, identity)
	if err != nil {
		return compute.PrepareResult{}, err
	}
	if _, err := d.c.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return compute.PrepareResult{}, fmt.Errorf("docker: start gateway of revision %s: %w", rev.ID, err)
	}
	d.log.Info("docker: gateway container started", "agent", rev.AgentID, "revision", rev.ID, "port", port)
	d.watchReady(rev, port)
	return compute.PrepareResult{PendingReason: PendingReason, Message: "the gateway container is starting"}, nil
}

// report answers rev's readiness from its container; with start it starts
// a container that is not running and will not be restarted by its
// policy (stopped by StopRevision), after stopping the Agent's others.
func (d *Driver) report(ctx context.Context, rev compute.Revision, id string, port int, start bool) (compute.PrepareResult, error) {
	res, err := d.c.ContainerInspect(ctx, id, client.ContainerInspectOptions{})
	if err != nil {
		return compute.PrepareResult{}, fmt.Errorf("docker: inspect gateway of revision %s: %w", rev.ID, err)
	}
	st := res.Container.State
	switch {
	case st == nil:
		return pending("the gateway container has no state yet"), nil
	case st.Running && !st.Restarting:
		if d.ready(ctx, port) {
			return compute.PrepareResult{Ready: true}, nil
		}
		if res.Container.RestartCount >= d.o.RestartLimit {
			return compute.PrepareResult{}, compute.Permanent(compute.CodeRuntimeFailed,
				fmt.Errorf("docker: the gateway of revision %s restarted %d times without becoming ready", rev.ID, res.Container.RestartCount))
		}
		// A start of a revision that is not serving yet is bounded; the
		// serving one was ready once, and a slow answer now is no verdict.
		if serving, _ := d.host(rev.AgentID).serving(); serving != rev.ID {
			if started, err := time.Parse(time.RFC3339Nano, st.StartedAt); err == nil && time.Since(started) > d.o.ReadyTimeout {
				return compute.PrepareResult{}, compute.Permanent(compute.CodeRuntimeFailed,
					fmt.Errorf("docker: the gateway of revision %s did not become ready within %s", rev.ID, d.o.ReadyTimeout))
			}
		}
		d.watchReady(rev, port)
		return pending("the gateway is starting"), nil
	case st.ExitCode == exitConfigRefuse && res.Container.RestartCount >= 1:
		return compute.PrepareResult{}, compute.Permanent(compute.CodeConfigurationInvalid,
			fmt.Errorf("docker: the gateway of revision %s refused its configuration (exit status %d)", rev.ID, st.ExitCode))
	case res.Container.RestartCount >= d.o.RestartLimit:
		return compute.PrepareResult{}, compute.Permanent(compute.CodeRuntimeFailed,
			fmt.Errorf("docker: the gateway of revision %s exited %d times (last status %d)", rev.ID, res.Container.RestartCount, st.ExitCode))
	case st.Restarting:
		d.watchReady(rev, port)
		return pending("the gateway container is restarting"), nil
	case !start:
		return pending("the gateway container is not running"), nil
	}
	// Stopped (by StopRevision, or an exit the policy does not restart):
	// start it again, alone.
	if err := d.stopGateways(ctx, rev.AgentID, id); err != nil {
		return compute.PrepareResult{}, err
	}
	if _, err := d.c.ContainerStart(ctx, id, client.ContainerStartOptions{}); err != nil {
		return compute.PrepareResult{}, fmt.Errorf("docker: start gateway of revision %s: %w", rev.ID, err)
	}
	d.watchReady(rev, port)
	return pending("the gateway container is starting again"), nil
}

func pending(msg string) compute.PrepareResult {
	return compute.PrepareResult{PendingReason: PendingReason, Message: msg}
}

// ready reports whether the gateway answers GET /readyz with 200.
func (d *Driver) ready(ctx context.Context, port int) bool {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, "http://127.0.0.1:"+strconv.Itoa(port)+"/readyz", nil)
	if err != nil {
		return false
	}
	resp, err := d.http.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}

// stopGateways stops every running gateway container of the Agent except
// keep.
func (d *Driver) stopGateways(ctx context.Context, agentID, keep string) error {
	cs, err := d.containers(ctx, agentFilter(agentID, roleGateway, ""))
	if err != nil {
		return err
	}
	for _, c := range cs {
		if c.ID == keep || (c.State != container.StateRunning && c.State != container.StateRestarting) {
			continue
		}
		if err := d.stopContainer(ctx, c.ID); err != nil {
			return err
		}
	}
	return nil
}

// ensureStorage makes the Agent's state and workspace volumes and
// returns the setup identity to verify (the delivered one, else the one
// persisted by an earlier setup, else nil). The workspace volume is not
// recreated once a setup completed: an empty workspace must not start.
func (d *Driver) ensureStorage(ctx context.Context, rev compute.Revision, ws *compute.WorkspaceSetup) (*workspace.Setup, error) {
	h := d.host(rev.AgentID)
	persisted, err := h.Identity()
	if err != nil && !compute.TransientErrno(err) {
		// Malformed, or unreadable for good: every retry would read the
		// same (as the local driver decides).
		return nil, compute.Permanent(compute.CodeWorkspaceSetupFailed, fmt.Errorf("docker: read the setup identity: %w", err))
	}
	if err != nil {
		return nil, fmt.Errorf("docker: read the setup identity: %w", err)
	}
	var identity *workspace.Setup
	switch {
	case ws != nil:
		if ws.AgentID != rev.AgentID || ws.NamespaceID != rev.NamespaceID {
			return nil, compute.Permanent(compute.CodeWorkspaceSetupFailed,
				fmt.Errorf("docker: setup %s does not belong to agent %s", ws.ID, rev.AgentID))
		}
		id := ws.WithoutFiles()
		id.Completed = true
		identity = &id
	case persisted != nil:
		identity = persisted
	}
	initialized := persisted != nil || (ws != nil && ws.Completed)
	for _, v := range []struct{ name, role string }{
		{volumeName(rev.AgentID, "state"), roleState},
		{volumeName(rev.AgentID, "workspace"), roleWorkspace},
	} {
		err := d.ensureVolume(ctx, v.name, d.labels(rev.NamespaceID, rev.AgentID, v.role, ""), !initialized)
		if errors.Is(err, errMissing) {
			return nil, setupFailed(fmt.Sprintf("Initialized workspace storage is missing: Docker volume %s of this Agent "+
				"is gone after its workspace setup completed; restore it (the Agent will not start over an empty workspace)", v.name))
		}
		if err != nil {
			return nil, err
		}
	}
	return identity, nil
}

// setup runs `occ workspace-setup` in a one-shot container when there is
// a setup: with a pending one it applies the files (a retry after the
// marker was written changes nothing), with a completed identity it only
// verifies the marker.
func (d *Driver) setup(ctx context.Context, rev compute.Revision, ws *compute.WorkspaceSetup, identity *workspace.Setup) error {
	if identity == nil {
		return nil
	}
	if err := d.installOCC(ctx, rev); err != nil {
		return err
	}
	payload := *identity
	if ws != nil && !ws.Completed {
		payload = *ws
	}
	p, err := json.Marshal(payload)
	if err != nil {
		return fmt.Errorf("docker: encode the workspace setup: %w", err)
	}
	files, err := archive(
		tarEntry{name: "run/occ/", dir: true, mode: 0o755},
		tarEntry{name: "run/occ/setup/", dir: true, mode: 0o700, uid: runtimeUID},
		tarEntry{name: "run/occ/setup/payload.json", mode: 0o600, uid: runtimeUID, data: p},
	)
	if err != nil {
		return fmt.Errorf("docker: archive the workspace setup: %w", err)
	}
	hc := d.hardened("none", []mount.Mount{
		volumeMount(volumeName(rev.AgentID, "state"), stateDir, false),
		volumeMount(volumeName(rev.AgentID, "workspace"), workspaceDir, false),
		volumeMount(volumeName(rev.AgentID, "occ"), occBinDir, true),
	})
	// Nothing of the run is kept: occ prints only a fixed line.
	hc.LogConfig = container.LogConfig{Type: "none"}
	entrypoint := []string{occBin}
	if d.setupCmd != nil {
		entrypoint = d.setupCmd
	}
	exit, err := d.runOnce(ctx, oneShot{
		name: "occ-" + agentdir.Hash(rev.AgentID) + "-setup",
		create: client.ContainerCreateOptions{
			Config: &container.Config{
				Image:      d.o.Config.GatewayImage,
				User:       fmt.Sprintf("%d:%d", runtimeUID, runtimeUID),
				Entrypoint: entrypoint,
				Cmd: []string{"workspace-setup", "--payload", payloadPath, "--workspace", workspaceDir,
					"--node", nodePath, "--openclaw", openclawPath, "--state-dir", stateDir},
				Env:        baseEnv(),
				WorkingDir: homeDir,
				Labels:     d.labels(rev.NamespaceID, rev.AgentID, roleSetup, ""),
			},
			HostConfig: hc,
		},
		files: files,
	}, d.o.SetupTimeout)
	if err != nil {
		return err
	}
	what := "verification"
	if payload.Files != nil {
		what = "delivery"
	}
	if err := setupExitError(exit, what, "occ-"+agentdir.Hash(rev.AgentID)+"-setup"); err != nil {
		return err
	}
	if err := d.host(rev.AgentID).WriteIdentity(*identity); err != nil {
		return err
	}
	d.log.Info("docker: workspace setup applied or verified", "agent", rev.AgentID, "setup", identity.ID)
	return nil
}

// setupExitError judges the setup container's exit. `occ workspace-setup`
// exits 1 on every failure of its own (a verdict on the payload or the
// workspace, or a host failure it cannot tell apart): permanent
// WORKSPACE_SETUP_FAILED, as is any other status below 128. A container
// killed by the OOM killer, or by a signal (status 128+n: a force removal,
// an engine stop), says nothing about the workspace: retryable.
func setupExitError(exit oneShotExit, what, name string) error {
	switch {
	case exit.code == 0 && !exit.oomKilled:
		return nil
	case exit.oomKilled || exit.code >= 128:
		return fmt.Errorf("docker: workspace setup %s in container %s was killed (exit status %d, out of memory %t); retrying",
			what, name, exit.code, exit.oomKilled)
	}
	return setupFailed(fmt.Sprintf("Workspace setup %s failed in container %s (exit status %d): "+
		"the workspace holds files that differ from the submission or a marker of another setup", what, name, exit.code))
}

// writeFiles sets the roots of the state and workspace volumes to uid
// 1000, mode 0700 (the engine creates them root-owned), and writes the
// revision's configuration volume: its root likewise, openclaw.json (it
// holds the token) and the setup identity, 0600, uid 1000. It goes
// through a container that is created, given the archive and removed,
// never started, so the gateway can mount its configuration read-only
// and nothing that runs code ever holds a writable copy.
func (d *Driver) writeFiles(ctx context.Context, rev compute.Revision, cfg []byte, identity *workspace.Setup) error {
	cv := configVolume(rev.AgentID, rev.ID)
	if err := d.ensureVolume(ctx, cv, d.labels(rev.NamespaceID, rev.AgentID, roleConfig, rev.ID), true); err != nil {
		return err
	}
	entries := []tarEntry{
		{name: "home/node/.openclaw/", dir: true, mode: 0o700, uid: runtimeUID},
		{name: "home/node/.openclaw/workspace/", dir: true, mode: 0o700, uid: runtimeUID},
		{name: "run/occ/", dir: true, mode: 0o755},
		{name: "run/occ/config/", dir: true, mode: 0o700, uid: runtimeUID},
		{name: "run/occ/config/openclaw.json", mode: 0o600, uid: runtimeUID, data: cfg},
	}
	if identity != nil {
		id, err := json.Marshal(identity.WithoutFiles())
		if err != nil {
			return err
		}
		entries = append(entries, tarEntry{name: "run/occ/config/identity.json", mode: 0o600, uid: runtimeUID, data: id})
	}
	files, err := archive(entries...)
	if err != nil {
		return err
	}
	name := "occ-" + agentdir.Hash(rev.AgentID) + "-files"
	labels := d.labels(rev.NamespaceID, rev.AgentID, roleFiles, "")
	if err := d.clearLeftover(ctx, name, labels); err != nil {
		return err
	}
	hc := d.hardened("none", []mount.Mount{
		volumeMount(volumeName(rev.AgentID, "state"), stateDir, false),
		volumeMount(volumeName(rev.AgentID, "workspace"), workspaceDir, false),
		volumeMount(cv, configDir, false),
	})
	created, err := d.c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name:       name,
		Config:     &container.Config{Image: d.o.Config.GatewayImage, User: "1000:1000", Labels: labels},
		HostConfig: hc,
	})
	if err != nil {
		return fmt.Errorf("docker: create container %s: %w", name, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = d.removeContainer(rctx, created.ID)
	}()
	if _, err := d.c.CopyToContainer(ctx, created.ID, client.CopyToContainerOptions{DestinationPath: "/", Content: bytesReader(files)}); err != nil {
		return fmt.Errorf("docker: write the configuration of revision %s: %w", rev.ID, err)
	}
	return nil
}

// installOCC copies occ from the OCC image into the Agent's occ volume
// (`occ install-self`), so the setup runner and the verifier run the
// image's occ. It runs before each new gateway container, so the volume
// follows the image.
func (d *Driver) installOCC(ctx context.Context, rev compute.Revision) error {
	name := volumeName(rev.AgentID, "occ")
	if err := d.ensureVolume(ctx, name, d.labels(rev.NamespaceID, rev.AgentID, roleOCC, ""), true); err != nil {
		return err
	}
	hc := d.hardened("none", []mount.Mount{volumeMount(name, occBinDir, false)})
	hc.ReadonlyRootfs = true
	hc.LogConfig = container.LogConfig{Type: "none"}
	exit, err := d.runOnce(ctx, oneShot{
		name: "occ-" + agentdir.Hash(rev.AgentID) + "-install",
		create: client.ContainerCreateOptions{
			Config: &container.Config{
				Image: d.o.Config.OCCImage,
				// The volume's root is root's; uid 0 without capabilities
				// can write there and nowhere else.
				User:       "0:0",
				Entrypoint: []string{occImageBinary},
				Cmd:        []string{"install-self", "--to", occBin},
				Labels:     d.labels(rev.NamespaceID, rev.AgentID, roleInstall, ""),
			},
			HostConfig: hc,
		},
	}, d.o.SetupTimeout)
	if err != nil {
		return err
	}
	if exit.code != 0 {
		return refusal(fmt.Sprintf("occ install-self failed in image %s (exit status %d)", d.o.Config.OCCImage, exit.code))
	}
	return nil
}

// baseEnv is the environment of the gateway image's processes: fixed,
// with no secret and no content.
func baseEnv() []string {
	return []string{
		"HOME=" + homeDir,
		"PATH=/usr/local/bin:/usr/bin:/bin",
		"TMPDIR=/tmp",
		// The root file system is read-only: OpenClaw's cache goes to the
		// tmpfs.
		"XDG_CACHE_HOME=/tmp/.cache",
		"OPENCLAW_STATE_DIR=" + stateDir,
		"OPENCLAW_WORKSPACE_DIR=" + workspaceDir,
		"OPENCLAW_NO_AUTO_UPDATE=1",
		"OPENCLAW_DISABLE_BONJOUR=1",
		"OPENCLAW_SKIP_CHANNELS=1",
		"OPENCLAW_OFFLINE=1",
	}
}

// createGateway creates rev's gateway container over the volumes
// writeFiles prepared; the configuration is mounted read-only. The
// container is not started.
func (d *Driver) createGateway(ctx context.Context, rev compute.Revision, port int, identity *workspace.Setup) (string, error) {
	gatewayCmd := []string{nodePath, openclawPath, "gateway", "run", "--port", strconv.Itoa(port)}
	if d.gatewayCmd != nil {
		gatewayCmd = d.gatewayCmd(port)
	}
	cmd := gatewayCmd
	mounts := []mount.Mount{
		volumeMount(volumeName(rev.AgentID, "state"), stateDir, false),
		volumeMount(volumeName(rev.AgentID, "workspace"), workspaceDir, false),
		volumeMount(configVolume(rev.AgentID, rev.ID), configDir, true),
		{Type: mount.TypeTmpfs, Target: "/tmp", TmpfsOptions: &mount.TmpfsOptions{
			SizeBytes: int64(d.o.Config.TmpMiB) << 20, Mode: 0o1777}},
	}
	if identity != nil {
		cmd = append([]string{occBin, "workspace-setup", "--verify", "--payload", identityPath,
			"--workspace", workspaceDir, "--exec", "--"}, gatewayCmd...)
		mounts = append(mounts, volumeMount(volumeName(rev.AgentID, "occ"), occBinDir, true))
	}
	labels := d.labels(rev.NamespaceID, rev.AgentID, roleGateway, rev.ID)
	labels[LabelRevisionNumber] = strconv.FormatInt(rev.Number, 10)
	hc := d.hardened("host", mounts)
	hc.ReadonlyRootfs = true
	// unless-stopped, not on-failure: a gateway that exits 0 (OpenClaw's
	// graceful exit on SIGTERM, which is also what an engine that shuts
	// down sends) must come back too, or an engine restart would leave
	// every Agent down until occ restarted. A container the driver stops
	// (ContainerStop) stays stopped, across engine restarts as well. No
	// retry cap: the engine never resets its count while the container
	// lives, so a cap would end a serving gateway after that many crashes
	// over its whole life. A revision that is not serving and keeps
	// failing is stopped by restoreServing instead.
	hc.RestartPolicy = container.RestartPolicy{Name: container.RestartPolicyUnlessStopped}
	hc.LogConfig = container.LogConfig{Type: "json-file", Config: map[string]string{"max-size": "5m", "max-file": "2"}}
	env := append(baseEnv(), "OPENCLAW_CONFIG_PATH="+configPath, "OPENCLAW_NO_RESPAWN=1")
	created, err := d.c.ContainerCreate(ctx, client.ContainerCreateOptions{
		Name: gatewayName(rev.AgentID, rev.ID),
		Config: &container.Config{
			Image:      d.o.Config.GatewayImage,
			User:       fmt.Sprintf("%d:%d", runtimeUID, runtimeUID),
			Entrypoint: cmd,
			Env:        env,
			WorkingDir: homeDir,
			Labels:     labels,
			StopSignal: "SIGTERM",
		},
		HostConfig: hc,
	})
	if err != nil {
		return "", fmt.Errorf("docker: create gateway of revision %s: %w", rev.ID, err)
	}
	return created.ID, nil
}
