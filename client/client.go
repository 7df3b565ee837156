// Package client is the Go client of OCC's HTTP API: one typed method per
// route, speaking the wire types of package apitypes.
//
// A Client authenticates either with a service key (WithServiceKey; sent in
// the x-api-key header, never in a URL) or with a browser-style session
// (SignIn stores the session cookie in the Client's cookie jar and sends
// the Origin header that OCC's cross-site checks require of session
// callers). Every method takes a context: its deadline bounds the whole
// request, and without one the Client's default timeout applies.
//
// Failures: a reply with an error envelope is returned as *Error (code,
// message, details, request id and HTTP status); use errors.As, or the
// IsCode helper. A reply without the envelope (a proxy's error page, a
// redirect, which the Client never follows) is an *Error with code
// HTTP_<status>. Transport failures (connection refused, deadline) are
// returned wrapped, unchanged, so errors.Is(err, context.DeadlineExceeded)
// works; those that happened before the request was written also match
// ErrNotSent. A write whose reply never arrived, and that is not
// ErrNotSent, has an unknown outcome: the Client never retries a request
// by itself.
package client

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/cookiejar"
	"net/http/httptrace"
	"net/url"
	"strings"
	"sync/atomic"
	"time"

	"github.com/openclaw/occ/apitypes"
)

// DefaultTimeout bounds a request whose context has no deadline.
const DefaultTimeout = 60 * time.Second

// maxReplyBytes bounds how much of a reply the Client reads: the largest
// reply OCC sends (an audit page, a 16 KiB file as JSON) is far below it.
const maxReplyBytes = 8 << 20

// Client calls one OCC server. It is safe for concurrent use.
type Client struct {
	base      *url.URL
	origin    string
	http      *http.Client
	key       string
	userAgent string
	timeout   time.Duration
}

// Option configures a Client.
type Option func(*Client)

// WithServiceKey makes the Client authenticate every request with a
// service key ("occk_…").
func WithServiceKey(key string) Option { return func(c *Client) { c.key = key } }

// WithHTTPClient replaces the underlying *http.Client (its Jar is replaced
// by the Client's own when nil, so that sessions work).
func WithHTTPClient(h *http.Client) Option { return func(c *Client) { c.http = h } }

// WithUserAgent sets the User-Agent header.
func WithUserAgent(ua string) Option { return func(c *Client) { c.userAgent = ua } }

// WithTimeout sets the bound of a request whose context has no deadline
// (default DefaultTimeout).
func WithTimeout(d time.Duration) Option { return func(c *Client) { c.timeout = d } }

// New returns a Client for the server at baseURL (scheme://host[:port],
// optionally with a path prefix). The URL must be http or https and carry
// no query, fragment or credentials.
func New(baseURL string, opts ...Option) (*Client, error) {
	// The URL is never quoted as given: it may carry credentials, which
	// it must not, and an error is where they would leak.
	u, err := url.Parse(baseURL)
	if err != nil {
		var ue *url.Error
		if errors.As(err, &ue) {
			err = ue.Err // without the URL, which url.Error repeats
		}
		return nil, fmt.Errorf("client: the server URL does not parse: %w", err)
	}
	if (u.Scheme != "http" && u.Scheme != "https") || u.Host == "" {
		return nil, errors.New("client: the server URL must be http:// or https:// with a host")
	}
	if u.User != nil || u.RawQuery != "" || u.Fragment != "" {
		return nil, fmt.Errorf("client: server URL %q must not carry credentials, a query or a fragment", u.Redacted())
	}
	u.Path = strings.TrimSuffix(u.Path, "/")
	c := &Client{base: u, origin: u.Scheme + "://" + u.Host, userAgent: "occ-go-client", timeout: DefaultTimeout}
	for _, o := range opts {
		o(c)
	}
	if c.http == nil {
		c.http = &http.Client{}
	}
	if c.http.Jar == nil {
		jar, _ := cookiejar.New(nil) // cookiejar.New never fails without options
		h := *c.http
		h.Jar = jar
		c.http = &h
	}
	if c.http.CheckRedirect == nil {
		// Redirects are not followed: net/http would send x-api-key (it
		// strips only Authorization and Cookie) and, on a 307 or 308, the
		// sign-in body with its password to whatever the Location names,
		// another host or plain http included. A 3xx is an error instead.
		h := *c.http
		h.CheckRedirect = func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse }
		c.http = &h
	}
	return c, nil
}

// BaseURL returns the server URL the Client calls.
func (c *Client) BaseURL() string { return c.base.String() }

// Error is a reply with OCC's error envelope.
type Error struct {
	// Status is the HTTP status code.
	Status int
	// Code, Message, Details and Data are the envelope's error member.
	Code    string
	Message string
	Details []apitypes.ErrorDetail
	Data    map[string]any
	// RequestID identifies the request in the server's logs.
	RequestID string
}

func (e *Error) Error() string {
	s := fmt.Sprintf("%s: %s", e.Code, e.Message)
	if len(e.Details) > 0 {
		parts := make([]string, len(e.Details))
		for i, d := range e.Details {
			parts[i] = d.Path + " " + d.Code
		}
		s += " (" + strings.Join(parts, ", ") + ")"
	}
	if e.RequestID != "" {
		s += " [request " + e.RequestID + "]"
	}
	return s
}

// ErrNotSent matches (with errors.Is) a transport failure that happened
// before the request was written: the connection was refused, a DNS
// lookup or a proxy's CONNECT failed, the TLS handshake failed (a refused
// certificate, a plain-HTTP server), or the context ended first. Nothing
// reached the server, so even a write certainly did not happen and may be
// sent again. A transport failure without it (the reply was lost after
// the request went out) has an unknown outcome for a write.
var ErrNotSent = errors.New("client: the request was not sent")

// notSentError marks a transport error as ErrNotSent while keeping it in
// the chain (errors.As to *url.Error or *net.OpError, errors.Is to
// context.DeadlineExceeded) and its text unchanged.
type notSentError struct{ err error }

func (e notSentError) Error() string        { return e.err.Error() }
func (e notSentError) Unwrap() error        { return e.err }
func (e notSentError) Is(target error) bool { return target == ErrNotSent }

// IsCode reports whether err is an *Error with the given code.
func IsCode(err error, code string) bool {
	var e *Error
	return errors.As(err, &e) && e.Code == code
}

// request is one call: method, path (already escaped: build it with p),
// query, JSON body, extra headers.
type request struct {
	method string
	path   string
	query  url.Values
	body   any
	header http.Header
	// raw: the reply is not an envelope; out receives it whole.
	raw bool
}

// reply is what a call returns besides its data.
type reply struct {
	header http.Header
}

// do sends rq and decodes the data member of the success envelope into out
// (when out is not nil).
func (c *Client) do(ctx context.Context, rq request, out any) (reply, error) {
	if _, ok := ctx.Deadline(); !ok && c.timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.timeout)
		defer cancel()
	}
	// rq.path is already escaped (p escapes each parameter), so it goes in
	// RawPath and its decoded form in Path: URL.String uses RawPath only
	// when it encodes Path, and otherwise escapes Path again, which would
	// send "a b/c" as a%2520b%252Fc.
	u := *c.base
	u.RawPath = c.base.EscapedPath() + rq.path
	path, err := url.PathUnescape(u.RawPath)
	if err != nil {
		return reply{}, fmt.Errorf("client: %s %s: the path does not decode: %w", rq.method, rq.path, err)
	}
	u.Path = path
	if len(rq.query) > 0 {
		u.RawQuery = rq.query.Encode()
	}
	var body io.Reader
	if rq.body != nil {
		b, err := json.Marshal(rq.body)
		if err != nil {
			return reply{}, fmt.Errorf("client: encoding the request: %w", err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, rq.method, u.String(), body)
	if err != nil {
		return reply{}, fmt.Errorf("client: %w", err)
	}
	for k, vs := range rq.header {
		req.Header[k] = vs
	}
	if rq.body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	req.Header.Set("Accept", "application/json")
	req.Header.Set("User-Agent", c.userAgent)
	if c.key != "" {
		req.Header.Set("x-api-key", c.key)
	} else {
		// Session callers pass OCC's browser checks: same origin.
		req.Header.Set("Origin", c.origin)
	}
	// mayHaveSent records whether the transport got as far as a usable
	// connection for the request (GotConn: dialled, through any proxy's
	// CONNECT, TLS handshake done) or wrote its headers. Before both, no
	// byte of the request was written, so no server or proxy can have
	// acted on it and a failure is a definite "not sent" (ErrNotSent):
	// a refused connection or proxy, a failed handshake, a context that
	// ended first. GotConn fires, for HTTP/1 and HTTP/2 alike, before the
	// first byte is written (WroteHeaders only after the header is
	// buffered, and for HTTP/2 possibly after it is flushed), so it errs
	// on the side of "may have been sent". The flag only ever turns true,
	// across the transport's own retries on a new connection.
	var mayHaveSent atomic.Bool
	req = req.WithContext(httptrace.WithClientTrace(req.Context(), &httptrace.ClientTrace{
		GotConn:      func(httptrace.GotConnInfo) { mayHaveSent.Store(true) },
		WroteHeaders: func() { mayHaveSent.Store(true) },
	}))
	resp, err := c.http.Do(req)
	if err != nil {
		if !mayHaveSent.Load() {
			err = notSentError{err}
		}
		return reply{}, fmt.Errorf("client: %s %s: %w", rq.method, rq.path, err)
	}
	defer resp.Body.Close()
	data, err := io.ReadAll(io.LimitReader(resp.Body, maxReplyBytes+1))
	if err != nil {
		return reply{}, fmt.Errorf("client: %s %s: reading the reply: %w", rq.method, rq.path, err)
	}
	if len(data) > maxReplyBytes {
		return reply{}, fmt.Errorf("client: %s %s: reply larger than %d bytes", rq.method, rq.path, maxReplyBytes)
	}
	if resp.StatusCode >= 300 && resp.StatusCode < 400 {
		// A reply without OCC's envelope, like a proxy's error page: an
		// *Error with code HTTP_<status>, so that callers see a definite
		// answer (the request reached something that refused to handle
		// it) rather than a transport failure of unknown outcome.
		return reply{}, &Error{Status: resp.StatusCode, Code: "HTTP_" + fmt.Sprint(resp.StatusCode),
			Message: fmt.Sprintf("%s %s: the server answered %s redirecting to %q; the client follows no redirect (the credential would go with it): use the URL it names as the server URL",
				rq.method, rq.path, resp.Status, resp.Header.Get("Location")),
			RequestID: resp.Header.Get("X-Request-Id")}
	}
	if resp.StatusCode >= 400 {
		var env apitypes.ErrorEnvelope
		if err := json.Unmarshal(data, &env); err != nil || env.Error.Code == "" {
			return reply{}, &Error{Status: resp.StatusCode, Code: "HTTP_" + fmt.Sprint(resp.StatusCode),
				Message:   "the server answered " + resp.Status + " without an OCC error body",
				RequestID: resp.Header.Get("X-Request-Id")}
		}
		return reply{}, &Error{Status: resp.StatusCode, Code: env.Error.Code, Message: env.Error.Message,
			Details: env.Error.Details, Data: env.Error.Data, RequestID: env.Meta.RequestID}
	}
	if out != nil && rq.raw {
		if err := json.Unmarshal(data, out); err != nil {
			return reply{}, fmt.Errorf("client: %s %s: decoding the reply: %w", rq.method, rq.path, err)
		}
	} else if out != nil {
		env := apitypes.Envelope[json.RawMessage]{}
		if err := json.Unmarshal(data, &env); err != nil {
			return reply{}, fmt.Errorf("client: %s %s: the reply is not an OCC envelope: %w", rq.method, rq.path, err)
		}
		if err := json.Unmarshal(env.Data, out); err != nil {
			return reply{}, fmt.Errorf("client: %s %s: decoding the reply: %w", rq.method, rq.path, err)
		}
	}
	return reply{header: resp.Header}, nil
}

// p builds an escaped path from literal segments and parameters: every
// argument after the format is path-escaped.
func p(format string, args ...string) string {
	esc := make([]any, len(args))
	for i, a := range args {
		esc[i] = url.PathEscape(a)
	}
	return fmt.Sprintf(format, esc...)
}

// call is do for routes with a typed data member.
func call[T any](ctx context.Context, c *Client, rq request) (T, error) {
	var out T
	_, err := c.do(ctx, rq, &out)
	return out, err
}
