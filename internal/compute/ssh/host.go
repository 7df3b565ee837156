package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strconv"
	"strings"
	"sync"
	"time"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// maxOutput caps what one remote command may print on each of standard
// output and standard error; more is an error (the driver's commands print
// ids, hashes and small state files).
const maxOutput = 64 << 10

// host is one configured machine: its SSH client (dialed on first use,
// dropped and redialed after a failure), the semaphores bounding its
// sessions and its channels to gateways, and what was learnt about it on
// connecting.
type host struct {
	d   *Driver
	cfg Host

	// sem holds the MaxSessions slots of remote commands: one per exec
	// session, which sshd's own MaxSessions counts.
	sem chan struct{}
	// tunnels holds the slots of direct-tcpip channels to gateways (file
	// operations, pooled gateway connections, readiness probes). They are
	// a budget of their own (maxTunnels) because sshd's MaxSessions does
	// not count them ("MaxSessions 0 ... still permitting forwarding",
	// sshd_config(5)), and because a pooled connection holds its channel
	// while idle: sharing sem, eight idle pooled connections left no slot
	// for any command on the host (prepare, stop, delete, setup waited
	// until their deadline).
	tunnels chan struct{}

	// tokens is the long-lived token reader session (tokens.go).
	tokens hostTokens

	mu      sync.Mutex
	client  *xssh.Client
	dead    chan struct{} // closed when client's connection has ended
	systemd bool          // learnt on connect
	binOK   bool          // the uploaded occ binary matched on this connection
}

// maxTunnels bounds a host's open direct-tcpip channels (host.tunnels).
// All of them run over the host's one SSH connection (host.client), and
// sshd's process for that connection holds a socket for each: under the
// soft open-files limit it inherits from the listening sshd, typically
// 1,024 (systemd's default LimitNOFILE), channels past about 1,018 were
// refused at once ("open failed") instead of waiting for a slot.
// 512 leaves room under 1,024 for the connection's own files and the
// sessions beside the tunnels (3 each; at most 64 command sessions, the
// token reader and kills: under 220 in all;
// TestTunnelBudgetFitsSshdFileLimit). sshd sets no limit of its own on
// channels. It is far above the gateway pool's default of 64
// connections, so pooled connections leave room for readiness probes
// and other operations.
const maxTunnels = 512

// acquire takes one of the slots of sem (h.sem or h.tunnels; what names
// it in the error), giving up when ctx ends.
func (h *host) acquire(ctx context.Context, sem chan struct{}, what string) error {
	select {
	case sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("ssh: host %s: waiting for a %s slot: %w", h.cfg.Name, what, ctx.Err())
	}
}

// conn returns the host's client, dialing it when there is none. The
// dial and handshake are bounded by ConnectTimeout and ctx; the host key
// must be the one known_hosts pins, read as the file is at the dial
// (knownHosts).
func (h *host) conn(ctx context.Context) (*xssh.Client, error) {
	c, _, err := h.connDead(ctx)
	return c, err
}

// connDead is conn, with the channel closed when that client's
// connection ends (it broke, or was dropped or closed).
func (h *host) connDead(ctx context.Context) (*xssh.Client, <-chan struct{}, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.client != nil {
		return h.client, h.dead, nil
	}
	ccfg, err := h.d.clientConfig(h.cfg.Address)
	if err != nil {
		// Fail closed: without a usable known_hosts no key is pinned, so
		// none is accepted. Retryable: the operator fixes the file.
		return nil, nil, fmt.Errorf("ssh: host %s: known hosts file: %w; refusing to connect", h.cfg.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, h.d.cfg.ConnectTimeout)
	defer cancel()
	var nd net.Dialer
	raw, err := nd.DialContext(ctx, "tcp", h.cfg.Address)
	if err != nil {
		return nil, nil, fmt.Errorf("ssh: host %s: dial: %w", h.cfg.Name, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	// Close the socket when ctx ends during the handshake, so a host that
	// accepts and stalls cannot hold this call past its deadline.
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	cc, chans, reqs, err := xssh.NewClientConn(raw, h.cfg.Address, ccfg)
	stopped := stop()
	if err != nil {
		_ = raw.Close()
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			if len(ke.Want) == 0 {
				return nil, nil, fmt.Errorf("ssh: host %s: its host key is not in %s; refusing to connect", h.cfg.Name, h.d.cfg.KnownHostsFile)
			}
			return nil, nil, fmt.Errorf("ssh: host %s: its host key differs from the one pinned in %s; refusing to connect", h.cfg.Name, h.d.cfg.KnownHostsFile)
		}
		return nil, nil, fmt.Errorf("ssh: host %s: handshake: %w", h.cfg.Name, err)
	}
	if !stopped {
		_ = cc.Close()
		return nil, nil, fmt.Errorf("ssh: host %s: handshake: %w", h.cfg.Name, ctx.Err())
	}
	_ = raw.SetDeadline(time.Time{})
	c := xssh.NewClient(cc, chans, reqs)
	dead := make(chan struct{})
	h.client, h.dead, h.binOK = c, dead, false
	go func() {
		// Forget the client when the connection dies, so the next call
		// dials again, and tell its tunnels (slotConn), whose slots are
		// given back at once.
		_ = c.Wait()
		close(dead)
		h.mu.Lock()
		if h.client == c {
			h.client = nil
		}
		h.mu.Unlock()
	}()
	return c, dead, nil
}

// drop closes c if it is still the host's client (after a failure that
// may have left it broken).
func (h *host) drop(c *xssh.Client) {
	h.mu.Lock()
	if h.client == c {
		h.client = nil
	}
	h.mu.Unlock()
	_ = c.Close()
}

// close drops the client (and with it the token reader's session).
func (h *host) close() {
	h.mu.Lock()
	c := h.client
	h.client = nil
	h.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

// remoteError is a remote command that ran and failed. Stderr is the
// command's own (the driver's scripts print only paths and codes there,
// never content) and is capped.
type remoteError struct {
	Host   string
	Op     string
	Status int
	Stderr string
}

func (e *remoteError) Error() string {
	msg := strings.TrimSpace(e.Stderr)
	if len(msg) > 512 {
		msg = msg[:512] + "..."
	}
	if msg == "" {
		return fmt.Sprintf("ssh: host %s: %s exited with status %d", e.Host, e.Op, e.Status)
	}
	return fmt.Sprintf("ssh: host %s: %s exited with status %d: %s", e.Host, e.Op, e.Status, msg)
}

// statusOf returns the exit status of a remoteError, -1 otherwise.
func statusOf(err error) int {
	var re *remoteError
	if errors.As(err, &re) {
		return re.Status
	}
	return -1
}

// run runs cmd (a shell command line for the login shell) with stdin and
// returns its standard output, bounded by CommandTimeout; see runFor.
func (h *host) run(ctx context.Context, op, cmd string, stdin io.Reader) ([]byte, error) {
	return h.runFor(ctx, h.d.cfg.CommandTimeout, op, cmd, stdin)
}

// errOutputTooLarge is wrapped by the error of a command that printed more
// than maxOutput bytes on a stream. Callers decide what it means: for most
// commands a retryable failure like any other (see runSetup).
var errOutputTooLarge = fmt.Errorf("printed more than %d bytes", maxOutput)

// runFor runs cmd (a shell command line for the login shell) with stdin
// and returns its standard output, at most maxOutput bytes. It holds one
// of the host's MaxSessions slots (runOn) while it runs and gives up on
// the command when ctx, capped by timeout, ends, or as soon as it has
// printed more than maxOutput bytes on standard output or standard error
// (wrapping errOutputTooLarge, which wins over the exit status: a command
// that printed too much and exited non-zero fails for its output, as the
// reference's maxBuffer does). A
// command given up on is ended on the host (abandon) before runFor
// returns. op names the operation in errors.
func (h *host) runFor(ctx context.Context, timeout time.Duration, op, cmd string, stdin io.Reader) ([]byte, error) {
	return h.runOn(ctx, h.sem, timeout, op, cmd, stdin)
}

// runOn is runFor holding a slot of sem while the command runs, or none
// when sem is nil: the caller then holds the place the session takes in
// sshd's MaxSessions (the token reader's, tokens.go).
func (h *host) runOn(ctx context.Context, sem chan struct{}, timeout time.Duration, op, cmd string, stdin io.Reader) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	if sem != nil {
		if err := h.acquire(ctx, sem, "session"); err != nil {
			return nil, err
		}
		defer func() { <-sem }()
	}
	c, err := h.conn(ctx)
	if err != nil {
		return nil, err
	}
	s, err := h.newSession(c)
	if err != nil {
		h.drop(c)
		return nil, fmt.Errorf("ssh: host %s: %s: open session: %w", h.cfg.Name, op, err)
	}
	defer s.Close()
	// Both streams count against maxOutput, as the reference's maxBuffer
	// does; of standard error only the start is kept, for the error. The
	// first stream past the cap closes tooMuch.
	tooMuch := make(chan struct{})
	over := sync.OnceFunc(func() { close(tooMuch) })
	stdout := &capped{keep: maxOutput, over: over}
	stderr := &capped{keep: 4096, over: over}
	hdr := newSessionHeader(stderr)
	s.Stdout, s.Stderr = stdout, hdr
	if stdin != nil {
		s.Stdin = stdin
	}
	if err := h.answered(c, func() error { return s.Start(sessionPreamble + cmd) }); err != nil {
		return nil, fmt.Errorf("ssh: host %s: %s: start: %w", h.cfg.Name, op, err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		h.abandon(c, s, hdr, op)
		return nil, fmt.Errorf("ssh: host %s: %s: %w", h.cfg.Name, op, ctx.Err())
	case <-tooMuch:
		h.abandon(c, s, hdr, op)
		return nil, fmt.Errorf("ssh: host %s: %s %w", h.cfg.Name, op, errOutputTooLarge)
	}
	// Wait has returned, so the session's copies are done: the counts and
	// buffers are final.
	hdr.flush()
	var exit *xssh.ExitError
	switch {
	case stdout.n > maxOutput || stderr.n > maxOutput:
		// It passed the cap as it ended, and the select took done.
		return nil, fmt.Errorf("ssh: host %s: %s %w", h.cfg.Name, op, errOutputTooLarge)
	case errors.As(err, &exit):
		return nil, &remoteError{Host: h.cfg.Name, Op: op, Status: exit.ExitStatus(), Stderr: stderr.buf.String()}
	case err != nil:
		// No exit status: the connection broke (or sshd closed the
		// channel) with the command perhaps still running, which sshd
		// does not end for a command without a terminal. It is ended
		// over a new connection, as abandon ends one given up on.
		h.drop(c)
		if id, ok := hdr.session(); ok {
			h.endSession(nil, id, op)
		}
		return nil, fmt.Errorf("ssh: host %s: %s: %w", h.cfg.Name, op, err)
	}
	return stdout.buf.Bytes(), nil
}

// answered runs one of a session's opening round trips (opening the
// channel, the exec request), which x/crypto/ssh waits for without a
// context or deadline: a host that stops answering on an open connection
// would hold the call, and the host slot its caller holds, until TCP gives
// up (about 15 minutes) or for ever. Past ConnectTimeout the connection is
// dropped, which ends the wait with an error; the caller's context is not
// watched here, since dropping a working connection on a cancellation
// would fail the other sessions on it.
func (h *host) answered(c *xssh.Client, step func() error) error {
	return h.within(c, h.d.cfg.ConnectTimeout, step)
}

// within runs step, which waits on the host over c, for at most d; past
// it c is dropped, which ends the step, and within says the host did not
// answer.
func (h *host) within(c *xssh.Client, d time.Duration, step func() error) error {
	done := make(chan error, 1)
	go func() { done <- step() }()
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case err := <-done:
		return err
	case <-t.C:
		h.drop(c)
		<-done // the closed connection ends the step
		return fmt.Errorf("the host did not answer within %s", d)
	}
}

// newSession opens a session on c, bounded as answered says.
func (h *host) newSession(c *xssh.Client) (*xssh.Session, error) {
	var s *xssh.Session
	err := h.answered(c, func() (err error) {
		s, err = c.NewSession()
		return err
	})
	if err != nil && s != nil {
		_ = s.Close()
	}
	return s, err
}

// sessionPreamble comes before every command runFor starts. The login
// shell, which sshd made the leader of a new session (so the command and
// its children, unless they leave it with setsid as gateways do, are in
// that session), prints its pid and its start time (field 22 of
// /proc/<pid>/stat) as the first line of standard error, then execs the
// command, which keeps both. It is how a command occ gives up on is ended
// (abandon): closing the session does not end a command that runs
// without a terminal, and OpenSSH refuses the "signal" request for root
// logins, the only ones the driver makes ("session signalling requires
// privilege separation", which sshd turns off after a root login). The
// line is printed even when /proc cannot be read (with no start time,
// which makes the kill a no-op), so the command itself can never supply
// the first line.
const sessionPreamble = `read -r s 2>/dev/null </proc/$$/stat; s=${s##*") "}; set -- $s; printf 'occ-session %s %s\n' "$$" "${20}" >&2; exec `

// killTimeout bounds waiting for the preamble's line and the kill of an
// abandoned command; past it the connection is dropped.
const killTimeout = 10 * time.Second

// abandon ends a command runFor gives up on: it waits (at most
// killTimeout) for the preamble's line, closes the session and kills,
// with SIGKILL from a second session, every process of the command's
// session on the host (scriptKillSession), so that a command that runs
// past its deadline or prints too much does not go on changing the host,
// nor overlap the retry. When that cannot be done (no preamble line, the
// kill failed or timed out) it is logged and the command may go on
// running until it ends by itself. The kill's session comes on top of
// the slot the command holds (sshd keeps the closed session until its
// command has ended), so sshd's MaxSessions must leave room for it.
func (h *host) abandon(c *xssh.Client, s *xssh.Session, hdr *sessionHeader, op string) {
	t := time.NewTimer(killTimeout)
	defer t.Stop()
	select {
	case <-hdr.ready:
	case <-t.C:
	}
	_ = s.Close()
	id, ok := hdr.session()
	if !ok {
		h.d.log.Warn("ssh: a remote command occ gave up on could not be ended; it may still run", "host", h.cfg.Name, "op", op, "error", "no session line")
		return
	}
	h.endSession(c, id, op)
}

// endSession kills the command session id on the host (killSession) over
// c, or over a new connection when c is nil or can no longer open a
// session (it broke: c is dropped). Connecting again is bounded by
// killTimeout and the driver's ConnectTimeout. What it cannot do is
// logged: the command may then go on running until it ends by itself.
func (h *host) endSession(c *xssh.Client, id remoteSession, op string) {
	err := errNoKillSession
	if c != nil {
		err = h.killSession(c, id)
	}
	if errors.Is(err, errNoKillSession) {
		if c != nil {
			h.drop(c)
		}
		ctx, cancel := context.WithTimeout(context.Background(), killTimeout)
		defer cancel()
		var nc *xssh.Client
		if nc, err = h.conn(ctx); err == nil {
			err = h.killSession(nc, id)
		}
	}
	if err != nil {
		h.d.log.Warn("ssh: a remote command occ gave up on could not be ended; it may still run", "host", h.cfg.Name, "op", op, "error", err)
	}
}

// errNoKillSession is killSession's error when its connection cannot open
// a session at all.
var errNoKillSession = errors.New("cannot open a session for the kill")

// killSession runs scriptKillSession for id in a new session on c. A
// connection that cannot even open the session within killTimeout is
// dropped (which also unblocks the goroutine).
func (h *host) killSession(c *xssh.Client, id remoteSession) error {
	return h.within(c, killTimeout, func() error {
		s, err := c.NewSession()
		if err != nil {
			return fmt.Errorf("%w: %w", errNoKillSession, err)
		}
		defer s.Close()
		return s.Run(shellCmd(scriptKillSession, strconv.FormatUint(id.pid, 10), strconv.FormatUint(id.start, 10)))
	})
}

// remoteSession is the session leader of a command on the host: its pid
// and start time (clock ticks since boot), so a pid reused since is not
// taken for it.
type remoteSession struct{ pid, start uint64 }

// sessionHeader takes the preamble's line off the front of a command's
// standard error and passes everything after it to next. Write runs on
// the session's copy goroutine; ready is closed once the line is read
// (or known not to be there: more than maxSessionLine bytes without a
// newline, or another line), and id may be read only after that.
type sessionHeader struct {
	next  io.Writer
	line  []byte
	done  bool
	id    remoteSession
	ok    bool
	ready chan struct{}
}

func newSessionHeader(next io.Writer) *sessionHeader {
	return &sessionHeader{next: next, ready: make(chan struct{})}
}

func (h *sessionHeader) Write(p []byte) (int, error) {
	if h.done {
		return h.next.Write(p)
	}
	n := len(p)
	i := bytes.IndexByte(p, '\n')
	switch {
	case i < 0 && len(h.line)+len(p) <= maxSessionLine:
		h.line = append(h.line, p...)
		return n, nil
	case i >= 0 && len(h.line)+i <= maxSessionLine:
		h.id, h.ok = parseSessionLine(string(append(h.line, p[:i]...)))
	}
	if h.ok {
		p = p[i+1:]
	} else {
		// Not the preamble's line (a login shell's start-up files may
		// print first): it is the command's output.
		p = append(h.line, p...)
	}
	h.done, h.line = true, nil
	close(h.ready)
	_, err := h.next.Write(p)
	return n, err
}

// flush passes on a first line that never ended (after the command has).
func (h *sessionHeader) flush() {
	if !h.done {
		h.done = true
		_, _ = h.next.Write(h.line)
		close(h.ready)
	}
}

// session returns the leader named by the preamble's line, if it came.
func (h *sessionHeader) session() (remoteSession, bool) {
	select {
	case <-h.ready:
		return h.id, h.ok
	default:
		return remoteSession{}, false
	}
}

// maxSessionLine bounds the preamble's line ("occ-session", a pid and a
// start time).
const maxSessionLine = 64

// parseSessionLine parses "occ-session <pid> <start>".
func parseSessionLine(line string) (remoteSession, bool) {
	f := strings.Fields(line)
	if len(f) != 3 || f[0] != "occ-session" {
		return remoteSession{}, false
	}
	pid, err1 := strconv.ParseUint(f[1], 10, 32)
	start, err2 := strconv.ParseUint(f[2], 10, 64)
	if err1 != nil || err2 != nil || pid <= 1 {
		return remoteSession{}, false
	}
	return remoteSession{pid: pid, start: start}, true
}

// dialLoopback opens a direct-tcpip channel to 127.0.0.1:port on the host,
// holding one of the host's tunnel slots (h.tunnels, not a command's)
// until the returned connection is closed or the SSH connection under it
// ends, whichever comes first: a pooled gateway connection is closed
// only when its pool notices, and until then a dead one must not keep
// the slot.
func (h *host) dialLoopback(ctx context.Context, port int) (net.Conn, error) {
	if err := h.acquire(ctx, h.tunnels, "tunnel"); err != nil {
		return nil, err
	}
	release := sync.OnceFunc(func() { <-h.tunnels })
	c, dead, err := h.connDead(ctx)
	if err != nil {
		release()
		return nil, err
	}
	// The channel open waits on the host like a session's opening does
	// (answered): bounded by ctx and, on a host that stops answering, by
	// connectTimeout, after which the connection is dropped.
	var nc net.Conn
	err = h.answered(c, func() (err error) {
		nc, err = c.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
		return err
	})
	if err != nil {
		if nc != nil {
			_ = nc.Close()
		}
		release()
		return nil, fmt.Errorf("ssh: host %s: direct-tcpip to the gateway's loopback port: %w", h.cfg.Name, err)
	}
	sc := &slotConn{Conn: nc, release: release, closed: make(chan struct{})}
	go sc.watch(dead)
	return sc, nil
}

// slotConn gives its host's tunnel slot back when closed, or as soon as
// the SSH connection it runs on has ended (its reads and writes fail from
// then on, as the channel's do).
type slotConn struct {
	net.Conn
	release   func() // idempotent
	closeOnce sync.Once
	closed    chan struct{}
}

// watch releases the slot when dead (the SSH connection's end) comes
// before Close; it returns on either, so no goroutine outlives both.
func (c *slotConn) watch(dead <-chan struct{}) {
	select {
	case <-dead:
		c.release()
	case <-c.closed:
	}
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.closeOnce.Do(func() { close(c.closed) })
	c.release()
	return err
}

// capped keeps the first keep bytes written to it and counts all of them;
// the first write that takes the count past maxOutput calls over. It
// never fails a write, so the session's copy keeps draining the channel
// until runFor closes it. The buffer is a field, not embedded: embedded,
// its ReadFrom would be promoted, and io.Copy (which the SSH session
// copies output with) would call it and bypass Write, keeping everything
// and counting nothing.
type capped struct {
	buf  bytes.Buffer
	keep int
	n    int
	over func()
}

func (c *capped) Write(p []byte) (int, error) {
	c.n += len(p)
	if room := c.keep - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
	}
	if c.n > maxOutput && c.over != nil {
		c.over()
	}
	return len(p), nil
}

// shq quotes s for a POSIX shell.
func shq(s string) string {
	return "'" + strings.ReplaceAll(s, "'", `'\''`) + "'"
}

// shellCmd is `sh -c script sh args...`, quoted for the login shell.
func shellCmd(script string, args ...string) string {
	var b strings.Builder
	b.WriteString("sh -c ")
	b.WriteString(shq(script))
	b.WriteString(" occ-ssh")
	for _, a := range args {
		b.WriteByte(' ')
		b.WriteString(shq(a))
	}
	return b.String()
}

// asRuntime is shellCmd run as the runtime account with an environment
// built from scratch, so nothing of the login session's environment
// reaches it and root never writes into directories the account owns.
func (h *host) asRuntime(script string, args ...string) string {
	inner := []string{"env", "-i", "PATH=/usr/bin:/bin", "sh", "-c", script, "occ-ssh"}
	inner = append(inner, args...)
	var b strings.Builder
	b.WriteString("runuser -u ")
	b.WriteString(shq(h.d.cfg.RuntimeUser))
	b.WriteString(" --")
	for _, a := range inner {
		b.WriteByte(' ')
		b.WriteString(shq(a))
	}
	return b.String()
}
