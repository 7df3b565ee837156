package local

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"sync"
	"syscall"
	"time"

	"github.com/openclaw/occ/internal/compute"
)

// Supervision constants. They are not options: they shape failure
// semantics documented in the package documentation.
const (
	// maxFailedStarts consecutive starts that never become ready make the
	// revision fail permanently (RUNTIME_FAILED).
	maxFailedStarts = 5
	// maxConfigExits consecutive exits with exitConfig make it fail with
	// CONFIGURATION_INVALID. One retry, as OpenClaw's embedding guide
	// advises, because a lock conflict can exit with the same status.
	maxConfigExits = 2
	// exitConfig is the gateway's EX_CONFIG: configuration refused.
	exitConfig = 78

	backoffMin = time.Second
	backoffMax = 30 * time.Second

	startPoll  = 250 * time.Millisecond // /readyz while starting
	healthPoll = 5 * time.Second        // /readyz once ready
	probeLimit = 2 * time.Second        // one probe's deadline
	// unhealthyProbes consecutive failed probes turn Ready off; a gateway
	// unhealthy for ReadyTimeout is killed and restarted.
	unhealthyProbes = 3
	// adoptedPoll is how often an adopted gateway (not our child, so no
	// wait(2)) is checked for liveness.
	adoptedPoll = 500 * time.Millisecond
	// killWait bounds waiting for exit after SIGKILL.
	killWait = 5 * time.Second
)

// revInfo is the revision a supervisor runs.
type revInfo struct {
	ID          string // "" for an adopted gateway whose revision is gone
	NamespaceID string // "" when ID is
	AgentID     string
	Number      int64
	ConfigPath  string
}

// procHandle is one gateway process, started by us or adopted.
type procHandle struct {
	pid   int
	start uint64
	child bool
	// exited is closed once the process is gone; status is its exit
	// status then (-1: killed by a signal, or unknown for adopted ones).
	exited chan struct{}
	status int
	state  string
	// stopPoll ends an adopted process's liveness poller.
	stopPoll     chan struct{}
	stopPollOnce sync.Once
}

func newAdopted(pid int, start uint64) *procHandle {
	return &procHandle{pid: pid, start: start, exited: make(chan struct{}), status: -1, stopPoll: make(chan struct{})}
}

// watchAdopted closes p.exited when the adopted process is gone.
func (p *procHandle) watchAdopted() {
	t := time.NewTicker(adoptedPoll)
	defer t.Stop()
	for {
		select {
		case <-p.stopPoll:
			return
		case <-t.C:
			if !procAlive(p.pid, p.start) {
				p.state = "exited (not our child: status unknown)"
				close(p.exited)
				return
			}
		}
	}
}

func (p *procHandle) release() {
	if !p.child {
		p.stopPollOnce.Do(func() { close(p.stopPoll) })
	}
}

func (p *procHandle) gone() bool {
	select {
	case <-p.exited:
		return true
	default:
		return false
	}
}

type phase int

const (
	phaseStarting phase = iota
	phaseReady
	phaseBackoff
	phaseStopped
	phaseFailed
	phaseDetached
)

// supervisor runs one revision's gateway for one Agent: it spawns or
// adopts the process, waits for readiness, restarts it after a crash and
// stops it on request. Verbs only read its state and request a stop; the
// goroutine in run owns the process.
type supervisor struct {
	d   *Driver
	a   *agent // paths, id and port lock only: the supervisor never takes the Agent's lock
	rev revInfo
	// port is where the gateway listens. Only the run goroutine uses it
	// after startSupervisor; spawn moves it when another process took it
	// while the gateway was down (startPort).
	port int

	ctx      context.Context // ends on stop or detach
	cancel   context.CancelFunc
	stopReq  chan struct{}
	stopOnce sync.Once
	detReq   chan struct{}
	detOnce  sync.Once
	done     chan struct{}

	mu       sync.Mutex
	phase    phase
	proc     *procHandle
	attempts int // consecutive failed starts
	cfgExits int // consecutive exits with exitConfig
	// verifyFails counts consecutive transient failures of the setup
	// verifier before a restart; they grow the backoff but are not
	// failed starts.
	verifyFails int
	lastExit    string
	retryAt     time.Time
	fail        error
	startAt     time.Time
}

// startSupervisor makes s the Agent's supervisor and starts it; adopted
// is a live gateway to supervise instead of spawning one. The caller
// holds the Agent's lock and has stopped any previous supervisor.
func (d *Driver) startSupervisor(a *agent, rev revInfo, port int, adopted *procHandle) *supervisor {
	ctx, cancel := context.WithCancel(context.Background())
	s := &supervisor{
		d: d, a: a, rev: rev, port: port, ctx: ctx, cancel: cancel,
		stopReq: make(chan struct{}), detReq: make(chan struct{}), done: make(chan struct{}),
		phase: phaseStarting, proc: adopted, startAt: time.Now(),
	}
	a.sup = s
	d.wg.Add(1)
	go func() {
		defer d.wg.Done()
		s.run(adopted)
	}()
	return s
}

// adopt supervises a live gateway found through the pid file.
func (d *Driver) adopt(a *agent, p *procHandle, pf pidFile) {
	rev := revInfo{ID: pf.Revision, AgentID: a.id}
	if rev.ID != "" {
		rev.ConfigPath = a.configPath(rev.ID)
		if info, err := a.readRevisionInfo(rev.ID); err == nil {
			rev.Number, rev.NamespaceID = info.Number, info.NamespaceID
		}
	}
	port := pf.Port
	if port == 0 {
		port, _ = a.files().Port()
	}
	if port != 0 {
		ports.claim(port, a.dir)
	}
	go p.watchAdopted()
	d.startSupervisor(a, rev, port, p)
	d.log.Info("local: adopted running gateway", "agent", a.id, "revision", rev.ID, "pid", p.pid, "port", port)
}

// ---- what verbs read ----

// result is PrepareRevision's answer for the supervised revision.
func (s *supervisor) result() (compute.PrepareResult, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	switch s.phase {
	case phaseReady:
		// The loop notices an exit within milliseconds (a child) or
		// adoptedPoll (an adopted gateway); do not report a dead process
		// ready meanwhile.
		if p := s.proc; p != nil && (p.gone() || !procAlive(p.pid, p.start)) {
			return pending("the gateway (pid %d) exited; restarting", p.pid), nil
		}
		return compute.PrepareResult{Ready: true}, nil
	case phaseFailed:
		return compute.PrepareResult{}, s.fail
	case phaseBackoff:
		return pending("the gateway exited (%s); restart %d in %s", s.lastExit, s.attempts+1,
			time.Until(s.retryAt).Round(100*time.Millisecond)), nil
	case phaseStarting:
		pid := 0
		if s.proc != nil {
			pid = s.proc.pid
		}
		return pending("the gateway is starting (pid %d, %s so far)", pid, time.Since(s.startAt).Round(100*time.Millisecond)), nil
	default:
		return pending("the gateway is stopping"), nil
	}
}

func pending(format string, args ...any) compute.PrepareResult {
	return compute.PrepareResult{PendingReason: PendingReason, Message: fmt.Sprintf(format, args...)}
}

// stopping reports whether a stop or detach was requested or happened.
func (s *supervisor) stopping() bool {
	select {
	case <-s.stopReq:
		return true
	case <-s.detReq:
		return true
	default:
		return false
	}
}

// failure returns the permanent failure, if the supervisor gave up.
func (s *supervisor) failure() (error, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.fail, s.phase == phaseFailed
}

func (s *supervisor) pid() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.proc == nil {
		return 0
	}
	return s.proc.pid
}

// detached reports whether Close ended this supervision.
func (s *supervisor) detached() bool {
	select {
	case <-s.detReq:
		return true
	default:
		return false
	}
}

func (s *supervisor) requestStop() {
	s.stopOnce.Do(func() { close(s.stopReq); s.cancel() })
}

// detach ends supervision and leaves the gateway running.
func (s *supervisor) detach() {
	s.detOnce.Do(func() { close(s.detReq); s.cancel() })
}

// stopGateway stops the Agent's gateway, if any, and waits for it to
// exit. When ctx ends first it returns ctx's error; the stop goes on in
// the background and the next call waits for it again.
func (d *Driver) stopGateway(ctx context.Context, a *agent) error {
	s := a.sup
	if s == nil {
		return nil
	}
	s.requestStop()
	select {
	case <-s.done:
	case <-ctx.Done():
		return fmt.Errorf("local: stopping the gateway of agent %s: %w", a.id, ctx.Err())
	}
	a.sup = nil
	return nil
}

// ---- the supervision loop ----

func (s *supervisor) run(p *procHandle) {
	defer close(s.done)
	defer s.cancel()
	restart := false
	for {
		if p == nil {
			if s.stopping() {
				s.finish(nil)
				return
			}
			if restart {
				if err := s.verifyBeforeRestart(); err != nil {
					if _, permanent := compute.AsPermanent(err); permanent {
						s.giveUp(err)
						return
					}
					// Transient (a timeout, resource exhaustion, an I/O
					// error): the workspace may be fine. Not starting is
					// safe; giving up would leave a serving Agent down
					// for good (ensureServing does not restart a failed
					// serving revision). Wait and verify again, without
					// limit and without counting a failed start.
					s.d.log.Warn("local: workspace setup could not be verified; retrying", "agent", s.a.id, "revision", s.rev.ID, "error", err)
					s.note("workspace setup could not be verified (%v); retrying", err)
					s.mu.Lock()
					s.verifyFails++
					s.lastExit = "its workspace setup could not be verified"
					s.mu.Unlock()
					if !s.backoff() {
						s.finish(nil)
						return
					}
					continue
				}
				s.mu.Lock()
				s.verifyFails = 0
				s.mu.Unlock()
				if s.stopping() {
					s.finish(nil)
					return
				}
			}
			var err error
			p, err = s.spawn()
			if err != nil {
				s.d.log.Warn("local: gateway did not spawn", "agent", s.a.id, "revision", s.rev.ID, "error", err)
				// The reason is public (the deployment's pending message):
				// a fixed text; the error, with its paths, is in the log.
				if !s.failedStart("it could not be started; see occ's log", -1) {
					return
				}
				if !s.backoff() {
					s.finish(nil)
					return
				}
				restart = true
				continue
			}
		}
		switch s.watch(p) {
		case outcomeStop:
			s.terminate(p)
			s.finish(p)
			return
		case outcomeDetach:
			p.release()
			s.setPhase(phaseDetached)
			return
		case outcomeTimeout:
			s.d.log.Warn("local: gateway not ready in time; killing it", "agent", s.a.id, "revision", s.rev.ID,
				"pid", p.pid, "timeout", s.d.o.ReadyTimeout)
			s.kill(p)
			s.a.removePIDFile(p.pid)
			p.release()
			if !s.failedStart("not ready within "+s.d.o.ReadyTimeout.String(), -1) {
				return
			}
		case outcomeExit:
			s.a.removePIDFile(p.pid)
			s.killGroup(p)
			s.d.log.Warn("local: gateway exited", "agent", s.a.id, "revision", s.rev.ID, "pid", p.pid, "state", p.state)
			s.note("gateway pid %d %s", p.pid, p.state)
			if !s.failedStart(p.state, p.status) {
				return
			}
		}
		p = nil
		restart = true
		if s.rev.ID == "" {
			// An adopted gateway whose revision is gone cannot be
			// started again; the next Prepare starts a revision.
			s.finish(nil)
			return
		}
		if !s.backoff() {
			s.finish(nil)
			return
		}
	}
}

type outcome int

const (
	outcomeStop outcome = iota
	outcomeDetach
	outcomeExit
	outcomeTimeout
)

// watch waits for the process to become ready, to exit, to hang, or for
// a stop or detach request, keeping the Ready flag and the log cap up to
// date meanwhile.
func (s *supervisor) watch(p *procHandle) outcome {
	s.mu.Lock()
	s.proc = p
	s.mu.Unlock()
	ready := false
	deadline := time.Now().Add(s.d.o.ReadyTimeout)
	var failedProbes int
	var unhealthySince time.Time
	timer := time.NewTimer(0)
	defer timer.Stop()
	for {
		select {
		case <-s.stopReq:
			return outcomeStop
		case <-s.detReq:
			return outcomeDetach
		case <-p.exited:
			return outcomeExit
		case <-timer.C:
		}
		capLog(s.a.path(fileLog), s.d.o.MaxLogBytes)
		// The owner is checked until the first success and again after
		// any failure: a gateway that stopped answering may have closed
		// its listener, and then another process could bind the port.
		ok := s.probe(p, !ready || failedProbes > 0)
		switch {
		case !ready && ok:
			ready = true
			failedProbes, unhealthySince = 0, time.Time{}
			s.mu.Lock()
			s.phase, s.attempts, s.cfgExits = phaseReady, 0, 0
			s.mu.Unlock()
			s.d.log.Info("local: gateway ready", "agent", s.a.id, "revision", s.rev.ID, "pid", p.pid,
				"port", s.port, "after", time.Since(s.startAt).Round(time.Millisecond))
			s.d.ready(s.rev)
		case !ready && time.Now().After(deadline):
			return outcomeTimeout
		case ready && ok:
			if failedProbes >= unhealthyProbes {
				s.setPhase(phaseReady)
				s.d.ready(s.rev)
			}
			failedProbes, unhealthySince = 0, time.Time{}
		case ready && !ok:
			failedProbes++
			if unhealthySince.IsZero() {
				unhealthySince = time.Now()
			}
			if failedProbes == unhealthyProbes {
				s.setPhase(phaseStarting)
				s.d.log.Warn("local: gateway stopped answering /readyz", "agent", s.a.id, "pid", p.pid)
			}
			if time.Since(unhealthySince) > s.d.o.ReadyTimeout {
				return outcomeTimeout
			}
		}
		if ready {
			timer.Reset(healthPoll)
		} else {
			timer.Reset(startPoll)
		}
	}
}

// probe asks /readyz. With checkOwner (before the first success, and
// after a failed probe) it also checks that the listener is the
// process's own, so that another process on the port cannot pass for our
// gateway; while ours answers it holds the port and nobody else can bind
// it, so the health probes of a healthy gateway skip that /proc scan.
//
// When the check cannot be made it is skipped (no /proc), except when our
// process is gone: then /proc/<pid>/fd is unreadable, and whatever answers
// on the port is someone else's. A gateway that exits at once because the
// port was taken ("address in use") must not be reported ready for the
// listener that took it.
func (s *supervisor) probe(p *procHandle, checkOwner bool) bool {
	ctx, cancel := context.WithTimeout(s.ctx, probeLimit)
	defer cancel()
	if !s.d.http.ready(ctx, s.port) {
		return false
	}
	if !checkOwner {
		return true
	}
	owned, checked := listenerOwned(p.pid, s.port)
	if !checked && (p.gone() || !procAlive(p.pid, p.start)) {
		return false
	}
	return owned || !checked
}

// failedStart counts a start (or run) that ended; it reports false when
// the supervisor gave up.
func (s *supervisor) failedStart(why string, status int) bool {
	s.mu.Lock()
	s.attempts++
	if status == exitConfig {
		s.cfgExits++
	} else {
		s.cfgExits = 0
	}
	s.lastExit = why
	attempts, cfgExits := s.attempts, s.cfgExits
	s.mu.Unlock()
	switch {
	case cfgExits >= maxConfigExits:
		s.giveUp(compute.Permanent(compute.CodeConfigurationInvalid, fmt.Errorf(
			"local: the gateway refused its configuration (exit status %d, %d times); see %s",
			exitConfig, cfgExits, s.a.path(fileLog))))
		return false
	case attempts >= maxFailedStarts:
		s.giveUp(compute.Permanent(compute.CodeRuntimeFailed, fmt.Errorf(
			"local: the gateway failed %d starts in a row (last: %s); see %s", attempts, why, s.a.path(fileLog))))
		return false
	}
	return true
}

// backoff waits before the next start: 1 s doubling to 30 s with each
// failed start or transient verify failure. It reports false when a stop
// or detach came first.
func (s *supervisor) backoff() bool {
	s.mu.Lock()
	wait := backoffMin << min(max(s.attempts, s.verifyFails)-1, 10)
	wait = min(max(wait, backoffMin), backoffMax)
	s.phase, s.retryAt = phaseBackoff, time.Now().Add(wait)
	s.mu.Unlock()
	t := time.NewTimer(wait)
	defer t.Stop()
	select {
	case <-t.C:
		s.mu.Lock()
		s.phase, s.startAt = phaseStarting, time.Now()
		s.mu.Unlock()
		return true
	case <-s.stopReq:
		return false
	case <-s.detReq:
		s.setPhase(phaseDetached)
		return false
	}
}

func (s *supervisor) giveUp(err error) {
	s.d.log.Warn("local: giving up on the gateway", "agent", s.a.id, "revision", s.rev.ID, "error", err)
	s.note("giving up: %v", err)
	s.mu.Lock()
	s.phase, s.fail = phaseFailed, err
	s.mu.Unlock()
}

func (s *supervisor) setPhase(ph phase) {
	s.mu.Lock()
	s.phase = ph
	s.mu.Unlock()
}

// finish records a requested stop.
func (s *supervisor) finish(p *procHandle) {
	if p != nil {
		s.a.removePIDFile(p.pid)
		p.release()
	}
	s.setPhase(phaseStopped)
}

// verifyBeforeRestart runs the setup verifier before a restart, as before
// the first start: a workspace whose marker vanished must not serve. A
// verdict on the workspace (marker missing or different, a symbolic link,
// ...) is a permanent WORKSPACE_SETUP_FAILED; a failure that says nothing
// about it (setupTransient: a timeout, resource exhaustion, an I/O error)
// is returned as a plain, retryable error. The identity file is classed
// the same way: reading it may fail for the host (EIO, EMFILE: retried),
// but a malformed file, or one refused for good (EACCES, ELOOP), would be
// read the same on every retry, and retrying it without limit would
// report the revision pending for ever.
func (s *supervisor) verifyBeforeRestart() error {
	id, err := s.a.files().Identity()
	if err != nil {
		if setupTransient(err) {
			return fmt.Errorf("local: read the setup identity (retryable): %w", err)
		}
		return compute.Permanent(compute.CodeWorkspaceSetupFailed, fmt.Errorf("local: read the setup identity: %w", err))
	}
	if id == nil {
		return nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.d.o.SetupTimeout)
	defer cancel()
	if err := s.d.verifySetup(ctx, *id, s.d.setupOptions(s.a)); err != nil {
		if s.ctx.Err() != nil {
			return nil // stopping anyway; the loop notices
		}
		return s.d.setupError(s.ctx, "verify", err)
	}
	return nil
}

// ---- processes ----

// spawn starts the gateway in the Agent's directory, in its own process
// group, with output appended to gateway.log, and records it in the pid
// file. The process is deliberately not tied to occ's lifetime (no
// parent-death signal, output to a file rather than a pipe) so it keeps
// serving across an occ restart and can be re-attached.
func (s *supervisor) spawn() (*procHandle, error) {
	if s.rev.ConfigPath == "" {
		return nil, errors.New("local: the revision's configuration is gone")
	}
	// Check the port before every start, restarts included: another
	// process may have bound it while the gateway was down, and then
	// every start on it would exit "address in use" until the revision
	// failed. A new port is persisted first (the Endpoint names it from
	// now on), then written into the configuration; a failure here is a
	// failed start, and the next one converges (the port file already
	// holds the new port, so the configuration is updated then).
	port, err := s.d.startPort(s.a)
	if err != nil {
		return nil, fmt.Errorf("local: port for the gateway: %w", err)
	}
	if err := repointConfig(s.rev.ConfigPath, port); err != nil {
		return nil, fmt.Errorf("local: update the configuration's port: %w", err)
	}
	if port != s.port {
		s.d.log.Warn("local: the gateway's port was taken while it was down; moved", "agent", s.a.id, "revision", s.rev.ID,
			"from", s.port, "to", port)
		s.note("port %d was taken by another process; the gateway moves to port %d", s.port, port)
		s.port = port
	}
	logf, err := os.OpenFile(s.a.path(fileLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return nil, fmt.Errorf("local: open %s: %w", fileLog, err)
	}
	defer logf.Close() // the child has its own descriptor
	fmt.Fprintf(logf, "%s occ-local: starting the gateway of revision %s on port %d\n",
		time.Now().UTC().Format(time.RFC3339Nano), s.rev.ID, s.port)
	rt := s.d.o.Runtime
	cmd := exec.Command(rt.Node, rt.OpenClaw, "gateway", "run", "--port", strconv.Itoa(s.port))
	cmd.Dir = s.a.dir
	cmd.Env = s.env()
	cmd.Stdout, cmd.Stderr = logf, logf
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		return nil, fmt.Errorf("local: start the gateway: %w", err)
	}
	p := &procHandle{pid: cmd.Process.Pid, child: true, exited: make(chan struct{}), status: -1}
	// The child cannot be reaped before Wait, so its stat is readable.
	if st, err := readProcStat(p.pid); err == nil {
		p.start = st.start
	}
	go func() {
		err := cmd.Wait()
		if ps := cmd.ProcessState; ps != nil {
			p.status, p.state = ps.ExitCode(), ps.String()
		} else {
			p.state = fmt.Sprintf("wait: %v", err)
		}
		close(p.exited)
	}()
	if err := s.a.writePIDFile(pidFile{PID: p.pid, Start: p.start, Revision: s.rev.ID, Port: s.port}); err != nil {
		// Without a pid file a restarted occ could not find it: do not
		// leave it running.
		s.kill(p)
		return nil, err
	}
	s.mu.Lock()
	s.startAt = time.Now()
	s.mu.Unlock()
	s.d.log.Info("local: gateway started", "agent", s.a.id, "revision", s.rev.ID, "pid", p.pid, "port", s.port)
	return p, nil
}

// env is the gateway's whole environment: built from scratch so that
// nothing of occ's environment (database URLs, keys) leaks into it. The
// token is not here; the gateway reads it from its 0600 configuration.
func (s *supervisor) env() []string {
	return []string{
		"HOME=" + s.a.path(dirHome),
		"OPENCLAW_STATE_DIR=" + s.a.path(dirState),
		"OPENCLAW_CONFIG_PATH=" + s.rev.ConfigPath,
		"OPENCLAW_SKIP_CHANNELS=1",
		"OPENCLAW_DISABLE_BONJOUR=1",
		"OPENCLAW_NO_AUTO_UPDATE=1",
		"OPENCLAW_OFFLINE=1",
		// Keep restarts in process, so the pid we supervise stays the
		// gateway (OpenClaw's embedding guide).
		"OPENCLAW_NO_RESPAWN=1",
		// Temporary files stay in the Agent's directory, not the host's /tmp.
		"TMPDIR=" + s.a.path(dirTmp),
		"PATH=" + filepath.Dir(s.d.o.Runtime.Node) + ":/usr/local/bin:/usr/bin:/bin",
	}
}

// terminate stops the process: SIGTERM, then SIGKILL to its process group
// after StopGrace.
func (s *supervisor) terminate(p *procHandle) {
	if p.gone() {
		s.killGroup(p)
		return
	}
	s.note("stopping gateway pid %d", p.pid)
	_ = syscall.Kill(p.pid, syscall.SIGTERM)
	t := time.NewTimer(s.d.o.StopGrace)
	defer t.Stop()
	select {
	case <-p.exited:
		s.killGroup(p)
		return
	case <-t.C:
	}
	s.d.log.Warn("local: gateway ignored SIGTERM; killing it", "agent", s.a.id, "pid", p.pid, "grace", s.d.o.StopGrace)
	s.kill(p)
}

// kill sends SIGKILL to the process group and waits for the exit.
func (s *supervisor) kill(p *procHandle) {
	s.killGroup(p)
	_ = syscall.Kill(p.pid, syscall.SIGKILL)
	select {
	case <-p.exited:
	case <-time.After(killWait):
		if !p.child {
			waitGone(p.pid, p.start, killWait)
		}
	}
}

// killGroup kills what is left of the gateway's process group (its
// helpers), if the process leads its own group as spawn made it.
func (s *supervisor) killGroup(p *procHandle) {
	if p.pid <= 1 {
		return
	}
	if !p.gone() {
		st, err := readProcStat(p.pid)
		if err != nil || st.pgrp != p.pid || st.start != p.start {
			return
		}
	}
	_ = syscall.Kill(-p.pid, syscall.SIGKILL)
}

// note appends a line of our own to gateway.log, for whoever reads it
// next to the gateway's output. Never secrets.
func (s *supervisor) note(format string, args ...any) {
	f, err := os.OpenFile(s.a.path(fileLog), os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	if err != nil {
		return
	}
	defer f.Close()
	fmt.Fprintf(f, "%s occ-local: %s\n", time.Now().UTC().Format(time.RFC3339Nano), fmt.Sprintf(format, args...))
}

// ---- readiness probe ----

// prober asks a gateway's /readyz. No proxy (the environment's proxy
// settings must not see loopback traffic), no keep-alive (thousands of
// gateways must not hold idle connections), a deadline on every request.
type prober struct{ c *http.Client }

func newProber() *prober {
	return &prober{c: &http.Client{
		Transport: &http.Transport{Proxy: nil, DisableKeepAlives: true, ResponseHeaderTimeout: probeLimit},
		Timeout:   probeLimit,
		CheckRedirect: func(*http.Request, []*http.Request) error {
			return http.ErrUseLastResponse
		},
	}}
}

func (p *prober) ready(ctx context.Context, port int) bool {
	if port <= 0 {
		return false
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/readyz", port), nil)
	if err != nil {
		return false
	}
	resp, err := p.c.Do(req)
	if err != nil {
		return false
	}
	resp.Body.Close()
	return resp.StatusCode == http.StatusOK
}
