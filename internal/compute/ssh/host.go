package ssh

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
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
// dropped and redialed after a failure), the semaphore bounding sessions
// and channels, and what was learnt about it on connecting.
type host struct {
	d   *Driver
	cfg Host

	sem chan struct{}

	// tokens is the long-lived token reader session (tokens.go).
	tokens hostTokens

	mu      sync.Mutex
	client  *xssh.Client
	systemd bool // learnt on connect
	binOK   bool // the uploaded occ binary matched on this connection
}

// acquire takes one of the host's MaxSessions slots, giving up when ctx
// ends.
func (h *host) acquire(ctx context.Context) error {
	select {
	case h.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("ssh: host %s: waiting for a session slot: %w", h.cfg.Name, ctx.Err())
	}
}

func (h *host) release() { <-h.sem }

// conn returns the host's client, dialing it when there is none. The
// dial and handshake are bounded by ConnectTimeout and ctx; the host key
// must be the one known_hosts pins.
func (h *host) conn(ctx context.Context) (*xssh.Client, error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.client != nil {
		return h.client, nil
	}
	ctx, cancel := context.WithTimeout(ctx, h.d.cfg.ConnectTimeout)
	defer cancel()
	var nd net.Dialer
	raw, err := nd.DialContext(ctx, "tcp", h.cfg.Address)
	if err != nil {
		return nil, fmt.Errorf("ssh: host %s: dial: %w", h.cfg.Name, err)
	}
	if dl, ok := ctx.Deadline(); ok {
		_ = raw.SetDeadline(dl)
	}
	// Close the socket when ctx ends during the handshake, so a host that
	// accepts and stalls cannot hold this call past its deadline.
	stop := context.AfterFunc(ctx, func() { _ = raw.Close() })
	cc, chans, reqs, err := xssh.NewClientConn(raw, h.cfg.Address, h.d.clientConfig(h.cfg.Address))
	stopped := stop()
	if err != nil {
		_ = raw.Close()
		var ke *knownhosts.KeyError
		if errors.As(err, &ke) {
			if len(ke.Want) == 0 {
				return nil, fmt.Errorf("ssh: host %s: its host key is not in %s; refusing to connect", h.cfg.Name, h.d.cfg.KnownHostsFile)
			}
			return nil, fmt.Errorf("ssh: host %s: its host key differs from the one pinned in %s; refusing to connect", h.cfg.Name, h.d.cfg.KnownHostsFile)
		}
		return nil, fmt.Errorf("ssh: host %s: handshake: %w", h.cfg.Name, err)
	}
	if !stopped {
		_ = cc.Close()
		return nil, fmt.Errorf("ssh: host %s: handshake: %w", h.cfg.Name, ctx.Err())
	}
	_ = raw.SetDeadline(time.Time{})
	c := xssh.NewClient(cc, chans, reqs)
	h.client, h.binOK = c, false
	go func() {
		// Forget the client when the connection dies, so the next call
		// dials again.
		_ = c.Wait()
		h.mu.Lock()
		if h.client == c {
			h.client = nil
		}
		h.mu.Unlock()
	}()
	return c, nil
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
// returns its standard output, at most maxOutput bytes; a command that
// prints more on standard output or standard error fails, even with exit
// status 0 (its status is reported first when it is not 0). It holds a session
// slot while it runs and ends the command when ctx (capped by
// CommandTimeout) ends. op names the operation in errors.
func (h *host) run(ctx context.Context, op, cmd string, stdin io.Reader) ([]byte, error) {
	ctx, cancel := context.WithTimeout(ctx, h.d.cfg.CommandTimeout)
	defer cancel()
	if err := h.acquire(ctx); err != nil {
		return nil, err
	}
	defer h.release()
	c, err := h.conn(ctx)
	if err != nil {
		return nil, err
	}
	s, err := c.NewSession()
	if err != nil {
		h.drop(c)
		return nil, fmt.Errorf("ssh: host %s: %s: open session: %w", h.cfg.Name, op, err)
	}
	defer s.Close()
	// Both streams count against maxOutput, as the reference's maxBuffer
	// does; of standard error only the start is kept, for the error.
	stdout, stderr := capped{keep: maxOutput}, capped{keep: 4096}
	s.Stdout, s.Stderr = &stdout, &stderr
	if stdin != nil {
		s.Stdin = stdin
	}
	if err := s.Start(cmd); err != nil {
		return nil, fmt.Errorf("ssh: host %s: %s: start: %w", h.cfg.Name, op, err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Wait() }()
	select {
	case err = <-done:
	case <-ctx.Done():
		_ = s.Signal(xssh.SIGKILL)
		_ = s.Close()
		return nil, fmt.Errorf("ssh: host %s: %s: %w", h.cfg.Name, op, ctx.Err())
	}
	var exit *xssh.ExitError
	switch {
	case errors.As(err, &exit):
		return nil, &remoteError{Host: h.cfg.Name, Op: op, Status: exit.ExitStatus(), Stderr: stderr.buf.String()}
	case err != nil:
		h.drop(c)
		return nil, fmt.Errorf("ssh: host %s: %s: %w", h.cfg.Name, op, err)
	case stdout.n > maxOutput || stderr.n > maxOutput:
		return nil, fmt.Errorf("ssh: host %s: %s printed more than %d bytes", h.cfg.Name, op, maxOutput)
	}
	return stdout.buf.Bytes(), nil
}

// dialLoopback opens a direct-tcpip channel to 127.0.0.1:port on the host,
// holding a session slot until the returned connection is closed.
func (h *host) dialLoopback(ctx context.Context, port int) (net.Conn, error) {
	if err := h.acquire(ctx); err != nil {
		return nil, err
	}
	c, err := h.conn(ctx)
	if err != nil {
		h.release()
		return nil, err
	}
	nc, err := c.DialContext(ctx, "tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		h.release()
		return nil, fmt.Errorf("ssh: host %s: direct-tcpip to the gateway's loopback port: %w", h.cfg.Name, err)
	}
	return &slotConn{Conn: nc, release: sync.OnceFunc(h.release)}, nil
}

// slotConn gives its host's session slot back when closed.
type slotConn struct {
	net.Conn
	release func()
}

func (c *slotConn) Close() error {
	err := c.Conn.Close()
	c.release()
	return err
}

// capped keeps the first keep bytes written to it and counts all of them.
// It never fails a write, so the session's copy keeps draining the channel
// and the command can run to its end. The buffer is a field, not embedded:
// embedded, its ReadFrom would be promoted, and io.Copy (which the SSH
// session copies output with) would call it and bypass Write, keeping
// everything and counting nothing.
type capped struct {
	buf  bytes.Buffer
	keep int
	n    int
}

func (c *capped) Write(p []byte) (int, error) {
	c.n += len(p)
	if room := c.keep - c.buf.Len(); room > 0 {
		c.buf.Write(p[:min(room, len(p))])
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
