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

	xssh "golang.org/x/crypto/ssh"

	"github.com/openclaw/occ/internal/agentgw"
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
// Protocol (one request at a time, answered in order):
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
// ROOT/tokens/<agentHash> under agentgw's secret-file rules (absolute,
// regular, no symlink, at most 4,096 bytes, printable ASCII).
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
		tok, err := agentgw.ReadTokenFile(path.Join(root, "tokens", req))
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

// tokenReader is the client side: the session, its pipes, and the
// connection it was opened on. At most one request is in flight (mu).
type tokenReader struct {
	client *xssh.Client
	sess   *xssh.Session
	in     io.WriteCloser
	out    *bufio.Reader
}

// close ends the session (the reader on the host sees its standard input
// end and exits). Only the session is closed, not stdin on its own: that
// would race with a write still in progress (x/crypto/ssh's CloseWrite and
// Write share an unguarded flag), while closing the channel is safe.
func (t *tokenReader) close() {
	_ = t.sess.Close()
}

// hostTokens is a host's reader: mu is a one-slot semaphore (a channel, so
// waiting honours ctx).
type hostTokens struct {
	mu     chan struct{}
	reader *tokenReader // nil: open on next use
}

// readToken reads the Agent's token through the host's reader session,
// opening it (after the host check, which verifies the uploaded binary)
// when there is none or its connection was replaced. A reader that fails
// mid-request is closed and opened again once: reading a token changes
// nothing, so repeating it is safe. The token session is not one of the
// MaxSessions slots: it is one extra, long-lived session per host, and a
// slot-holding reader could starve (or, with maxSessions 1, deadlock) the
// operation that needs the token.
func (h *host) readToken(ctx context.Context, agentHash string) ([]byte, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("ssh: host %s: read token: %w", h.cfg.Name, err)
	}
	ctx, cancel := context.WithTimeout(ctx, h.d.cfg.CommandTimeout)
	defer cancel()
	select {
	case h.tokens.mu <- struct{}{}:
	case <-ctx.Done():
		return nil, fmt.Errorf("ssh: host %s: waiting for the token reader: %w", h.cfg.Name, ctx.Err())
	}
	defer func() { <-h.tokens.mu }()
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
		// The session broke or stalled: it is out of step, close it.
		tr.close()
		h.tokens.reader = nil
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
// opening one if needed. Called with h.tokens.mu held.
func (h *host) tokenReader(ctx context.Context) (*tokenReader, error) {
	if err := h.ready(ctx); err != nil {
		return nil, err
	}
	c, err := h.conn(ctx)
	if err != nil {
		return nil, err
	}
	if tr := h.tokens.reader; tr != nil {
		if tr.client == c {
			return tr, nil
		}
		tr.close() // the connection was replaced
		h.tokens.reader = nil
	}
	s, err := c.NewSession()
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
	if err := s.Start(cmd); err != nil {
		_ = s.Close()
		return nil, fmt.Errorf("ssh: host %s: start the token reader: %w", h.cfg.Name, err)
	}
	tr := &tokenReader{client: c, sess: s, in: in, out: bufio.NewReaderSize(out, 64+agentgw.MaxSecretFileBytes)}
	h.tokens.reader = tr
	return tr, nil
}

// read sends one request and reads its answer, within ctx: the session's
// streams have no deadlines, so a stalled answer is abandoned when ctx
// ends and the caller closes the session (it is then out of step).
func (t *tokenReader) read(ctx context.Context, agentHash string) ([]byte, error) {
	type result struct {
		tok []byte
		err error
	}
	done := make(chan result, 1)
	go func() {
		tok, err := t.exchange(agentHash)
		done <- result{tok, err}
	}()
	select {
	case r := <-done:
		return r.tok, r.err
	case <-ctx.Done():
		t.close() // unblocks exchange
		<-done
		return nil, ctx.Err()
	}
}

func (t *tokenReader) exchange(agentHash string) ([]byte, error) {
	if _, err := io.WriteString(t.in, agentHash+"\n"); err != nil {
		return nil, err
	}
	line, err := t.out.ReadSlice('\n')
	if err != nil {
		return nil, err
	}
	head := strings.TrimSuffix(string(line), "\n")
	if reason, ok := strings.CutPrefix(head, "err "); ok {
		return nil, &tokenError{reason: reason}
	}
	ns, ok := strings.CutPrefix(head, "ok ")
	n, err := strconv.Atoi(ns)
	if !ok || err != nil || n < 0 || n > agentgw.MaxSecretFileBytes {
		return nil, errors.New("the token reader answered out of protocol")
	}
	tok := make([]byte, n)
	if _, err := io.ReadFull(t.out, tok); err != nil {
		return nil, err
	}
	return tok, nil
}
