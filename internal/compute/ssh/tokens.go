package ssh

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"io"
	"path"
	"regexp"
	"strconv"
	"strings"
	"sync"

	xssh "golang.org/x/crypto/ssh"

	"github.com/openclaw/occ/internal/secretfile"
)

// Token reads go through one long-lived session per host instead of one
// exec session per file operation: sshd sets up a session (fork, login
// shell, PAM) for every channel, serially per connection, which cost
// ~110 ms per operation and capped every Agent of a host at ~8.5 file
// operations a second. The session runs `occ ssh-token-reader` (the
// uploaded, checksummed occ binary) as root; it answers one request per
// line on standard input by reading the token file again, so a rotated
// token still applies to the next operation.
//
// Protocol (requests may be pipelined; the host answers them in order):
//
//	request:  <agentHash>\n                 (12 lowercase hex digits)
//	answer:   ok <n>\n<n bytes of token>    or   err <reason>\n
//
// A malformed request ends the reader (the stream can no longer be
// trusted to be in step). Reasons are fixed words and paths, never a
// byte of a token.

// tokenRequestRE is the only request the reader accepts.
var tokenRequestRE = regexp.MustCompile(`^[0-9a-f]{12}$`)

// ServeTokens is the host side (`occ ssh-token-reader --root ROOT`): it
// answers token requests from r on w until r ends. Each answer reads
// ROOT/tokens/<agentHash> with secretfile.ReadSecret, the rules the gateway
// client applies to a local token file (absolute, regular, no symlink, at
// most 4,096 bytes, printable ASCII).
func ServeTokens(r io.Reader, w io.Writer, root string) error {
	if !path.IsAbs(root) || !safePath.MatchString(root) || path.Clean(root) != root {
		return errors.New("ssh-token-reader: --root must be an absolute path of letters, digits and _./@+-")
	}
	in := bufio.NewReaderSize(r, 64)
	out := bufio.NewWriter(w)
	for {
		line, err := in.ReadSlice('\n')
		if errors.Is(err, io.EOF) && len(line) == 0 {
			return nil
		}
		if err != nil {
			return fmt.Errorf("ssh-token-reader: reading a request: %w", err)
		}
		req := strings.TrimSuffix(string(line), "\n")
		if !tokenRequestRE.MatchString(req) {
			fmt.Fprint(out, "err request\n")
			_ = out.Flush()
			return errors.New("ssh-token-reader: malformed request")
		}
		tok, err := secretfile.ReadSecret(path.Join(root, "tokens", req))
		if err != nil {
			// The error names the path and what is wrong with the file,
			// never its bytes; it is kept on one line.
			fmt.Fprintf(out, "err %s\n", oneLine(err.Error()))
		} else {
			fmt.Fprintf(out, "ok %d\n", len(tok))
			_, _ = out.Write(tok)
		}
		if err := out.Flush(); err != nil {
			return fmt.Errorf("ssh-token-reader: answering: %w", err)
		}
	}
}

// oneLine keeps an error message on one bounded line.
func oneLine(s string) string {
	s = strings.Map(func(r rune) rune {
		if r < ' ' || r == 0x7f {
			return ' '
		}
		return r
	}, s)
	if len(s) > 256 {
		s = s[:256]
	}
	return s
}

// tokenReader is the client side: the session, its pipes, the
// connection it was opened on, and the requests waiting for answers.
// Requests are pipelined: each is written (one writer at a time) and
// queued in order; the read loop hands each answer to the oldest waiter,
// since the host answers in order.
type tokenReader struct {
	client *xssh.Client
	sess   *xssh.Session
	in     io.WriteCloser
	out    *bufio.Reader

	wmu   chan struct{} // one writer; a channel so waiting honours ctx
	mu    sync.Mutex
	queue []chan tokenAnswer
	done  chan struct{} // closed when the read loop ends: the session is dead
	err   error         // why; set before done is closed
}

type tokenAnswer struct {
	tok []byte
	err error
}

// close ends the session (the reader on the host sees its standard input
// end and exits; the read loop ends and fails every waiter). Only the
// session is closed, not stdin on its own: that would race with a write
// still in progress (x/crypto/ssh's CloseWrite and Write share an
// unguarded flag), while closing the channel is safe.
func (t *tokenReader) close() {
	_ = t.sess.Close()
}

func (t *tokenReader) dead() bool {
	select {
	case <-t.done:
		return true
	default:
		return false
	}
}

// readLoop reads answers until the session ends or speaks out of
// protocol, then closes the session and fails the waiters left.
func (t *tokenReader) readLoop() {
	var err error
	for {
		var a tokenAnswer
		if a, err = t.answer(); err != nil {
			break
		}
		t.mu.Lock()
		if len(t.queue) == 0 {
			t.mu.Unlock()
			err = errors.New("the token reader answered a request nobody sent")
			break
		}
		ch := t.queue[0]
		t.queue = t.queue[1:]
		t.mu.Unlock()
		ch <- a // buffered: a waiter that gave up does not block the loop
	}
	t.close()
	t.mu.Lock()
	t.err = err
	for _, ch := range t.queue {
		ch <- tokenAnswer{err: err}
	}
	t.queue = nil
	close(t.done)
	t.mu.Unlock()
}

// answer reads one answer: a token, an answered refusal (tokenError), or
// an error that ends the session.
func (t *tokenReader) answer() (tokenAnswer, error) {
	line, err := t.out.ReadSlice('\n')
	if err != nil {
		return tokenAnswer{}, err
	}
	head := strings.TrimSuffix(string(line), "\n")
	if reason, ok := strings.CutPrefix(head, "err "); ok {
		return tokenAnswer{err: &tokenError{reason: reason}}, nil
	}
	ns, ok := strings.CutPrefix(head, "ok ")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 0 || n > secretfile.MaxSecretBytes {
		return tokenAnswer{}, errors.New("the token reader answered out of protocol")
	}
	tok := make([]byte, n)
	if _, err := io.ReadFull(t.out, tok); err != nil {
		return tokenAnswer{}, err
	}
	return tokenAnswer{tok: tok}, nil
}

// read sends one request and waits for its answer, within ctx. A waiter
// whose ctx ends closes the session: the host may be stuck on that file,
// and every later answer would then be late too (the others fail and are
// retried on a new session by readToken).
func (t *tokenReader) read(ctx context.Context, agentHash string) ([]byte, error) {
	select {
	case t.wmu <- struct{}{}:
	case <-t.done:
		return nil, t.err
	case <-ctx.Done():
		return nil, ctx.Err()
	}
	ch := make(chan tokenAnswer, 1)
	t.mu.Lock()
	if t.dead() {
		t.mu.Unlock()
		<-t.wmu
		return nil, t.err
	}
	t.queue = append(t.queue, ch)
	t.mu.Unlock()
	_, err := io.WriteString(t.in, agentHash+"\n")
	<-t.wmu
	if err != nil {
		t.close() // the loop fails ch with the session's end
	}
	select {
	case a := <-ch:
		return a.tok, a.err
	case <-ctx.Done():
		t.close()
		return nil, ctx.Err()
	}
}

// hostTokens is a host's reader: mu (a one-slot semaphore, a channel so
// waiting honours ctx) guards opening and replacing it, not the reads.
type hostTokens struct {
	mu     chan struct{}
	reader *tokenReader // nil: open on next use
}

// readToken reads the Agent's token through the host's reader session,
// opening it (after the host check, which verifies the uploaded binary)
// when there is none, it died, or its connection was replaced. A read on
// a session that fails is repeated once on a new one: reading a token
// changes nothing, so repeating it is safe. The token session is not one
// of the MaxSessions slots: it is one extra, long-lived session per host,
// and a slot-holding reader could starve (or, with maxSessions 1,
// deadlock) the operation that needs the token.
func (h *host) readToken(ctx context.Context, agentHash string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ssh: host %s: read token: %w", h.cfg.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, h.d.cfg.CommandTimeout)
	defer cancel()
	var err error
	for attempt := 0; attempt < 2; attempt++ {
		var tr *tokenReader
		if tr, err = h.tokenReader(ctx); err != nil {
			return nil, err
		}
		var tok []byte
		tok, err = tr.read(ctx, agentHash)
		if err == nil {
			return tok, nil
		}
		var answered *tokenError
		if errors.As(err, &answered) {
			return nil, err // the reader works; the file is the problem
		}
		tr.close()
		if ctx.Err() != nil {
			break
		}
	}
	return nil, fmt.Errorf("ssh: host %s: read token: %w", h.cfg.Name, err)
}

// tokenError is an answered "err": the file is missing or breaks a rule.
type tokenError struct{ reason string }

func (e *tokenError) Error() string { return "the host refused the token file: " + e.reason }

// tokenReader returns the open reader on the host's current client,
// opening one if needed.
//
// Opening one needs the host check (readyOn) when the connection is new.
// That check runs in the reader's own place, without a MaxSessions slot:
// the reader it replaces is closed first (it is dead, or on a connection
// that is gone, or, rarely, on one whose check has not run: it is then
// closed and opened again after the check), so the check and the new
// reader take one session at a time beside the slots, as the reader
// alone does. Waiting for a slot here, with h.tokens.mu held, made every
// file operation on the host wait behind the longest commands running on
// it (a setup run has 60 s), and until their deadline when the slots
// were all taken.
func (h *host) tokenReader(ctx context.Context) (*tokenReader, error) {
	select {
	case h.tokens.mu <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("ssh: host %s: waiting for the token reader: %w", h.cfg.Name, ctx.Err())
	}
	defer func() { <-h.tokens.mu }()
	h.mu.Lock()
	cur, checked := h.client, h.binOK
	h.mu.Unlock()
	if tr := h.tokens.reader; tr != nil {
		if checked && tr.client == cur && !tr.dead() {
			return tr, nil
		}
		tr.close()
		h.tokens.reader = nil
	}
	if err := h.readyOn(ctx, nil); err != nil {
		return nil, err
	}
	c, err := h.conn(ctx)
	if err != nil {
		return nil, err
	}
	s, err := h.newSession(c)
	if err != nil {
		h.drop(c)
		return nil, fmt.Errorf("ssh: host %s: open the token reader session: %w", h.cfg.Name, err)
	}
	in, err := s.StdinPipe()
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("ssh: host %s: token reader stdin: %w", h.cfg.Name, err)
	}
	out, err := s.StdoutPipe()
	if err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("ssh: host %s: token reader stdout: %w", h.cfg.Name, err)
	}
	// Its standard error is discarded: the reader prints nothing there but
	// a failure to start, which the first read reports as a broken session.
	cmd := shq(path.Join(h.cfg.Root, "bin", "occ")) + " ssh-token-reader --root " + shq(h.cfg.Root)
	if err := h.answered(c, func() error { return s.Start(cmd) }); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("ssh: host %s: start the token reader: %w", h.cfg.Name, err)
	}
	tr := &tokenReader{client: c, sess: s, in: in, out: bufio.NewReaderSize(out, 64+secretfile.MaxSecretBytes),
		wmu: make(chan struct{}, 1), done: make(chan struct{})}
	go tr.readLoop()
	h.tokens.reader = tr
	return tr, nil
}
