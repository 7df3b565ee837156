package agentgw

import (
	"bytes"
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"strings"
	"sync"
	"time"

	"github.com/coder/websocket"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw/occ/internal/buildinfo"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/workspace"
)

const (
	// DefaultReadLimit caps one inbound message. The hello-ok alone is
	// about 16.5 KB, and get and set answers echo the file content (at most
	// 16,384 bytes, up to six times that once JSON-escaped), so 1 MiB leaves
	// room without letting a confused peer make the client buffer megabytes.
	DefaultReadLimit = 1 << 20

	// DefaultTimeout bounds an operation whose context carries no deadline.
	// Callers normally pass the 30 s file-operation deadline themselves;
	// this only guarantees that no network call ever runs unbounded.
	DefaultTimeout = 30 * time.Second

	// closeTimeout bounds the close handshake in cleanup, so a peer that
	// never answers a close frame costs at most this much after the result
	// is known (the reference bounds its stop the same way).
	closeTimeout = time.Second
)

// Options configures a Client.
type Options struct {
	// ReadLimit caps one inbound WebSocket message in bytes; zero or less
	// means DefaultReadLimit. A larger answer fails the operation
	// (Unavailable for a get, OutcomeUnknown for a set).
	ReadLimit int64
	// Logger receives one debug record per operation: operation, transport,
	// file name, outcome reason and duration; never a credential, a URL
	// query or file content. nil discards.
	Logger *slog.Logger
	// Observer, when set, is told of every operation (metrics); nil
	// observes nothing.
	Observer Observer
	// Pool turns on the optional pooled connection per gateway
	// (pool.go); off by default.
	Pool PoolOptions
}

// Observer receives one call per operation: operation "get" or "set",
// transport "direct" or "routed", outcome "ok" (a missing file is ok),
// "unavailable", "conflict" or "outcome_unknown", and the duration. Every
// value comes from a fixed set, so they are safe as metric labels.
type Observer interface {
	GatewayOperation(operation, transport, outcome string, d time.Duration)
}

// tracer starts this package's spans. It is the global provider's: a
// no-op until telemetry.SetupTracing installs the SDK (the global
// delegates to the first provider set, so it may be taken at init).
var tracer = otel.Tracer("github.com/openclaw/occ/internal/agentgw")

// Client is the native gateway client. Without a pool it holds no
// connections and no credentials between operations; with one it holds
// connections but still reads the credentials for every operation. Either
// way it is safe for concurrent use and a rotated key, token or CA bundle
// takes effect on the next operation.
type Client struct {
	readLimit int64
	log       *slog.Logger
	obs       Observer
	version   string
	pool      *pool // nil: a fresh connection per operation
}

var _ FileClient = (*Client)(nil)

// New returns a Client.
func New(opts Options) *Client {
	c := &Client{readLimit: opts.ReadLimit, log: opts.Logger, obs: opts.Observer, version: buildinfo.Version}
	if c.readLimit <= 0 {
		c.readLimit = DefaultReadLimit
	}
	if c.log == nil {
		c.log = slog.New(slog.DiscardHandler)
	}
	if c.version == "" {
		c.version = "occ"
	}
	if opts.Pool.Enabled {
		c.pool = newPool(opts.Pool)
	}
	return c
}

// Close closes the pooled connections, if any; operations after it open
// a connection of their own each. Safe to call more than once.
func (c *Client) Close() {
	if c.pool != nil {
		c.pool.close()
	}
}

// Get reads a workspace file of the native agent "main". A missing file is
// File{Name: name, Missing: true} and no error; every failure is
// Unavailable.
func (c *Client) Get(ctx context.Context, t Target, name string) (File, error) {
	return c.do(ctx, t, operation{name: name})
}

// Set writes a workspace file of the native agent "main". expectedHash, when
// non-empty, must be 64 hex digits and makes the write a compare-and-swap;
// a mismatch is Conflict with the current hash. See the package comment for
// when a failure is Unavailable and when it is OutcomeUnknown. Set never
// retries.
func (c *Client) Set(ctx context.Context, t Target, name, content, expectedHash string) (File, error) {
	return c.SetAdmitted(ctx, t, name, content, expectedHash, nil)
}

// SetAdmitted is Set with an admission (FileClient): admit runs in its own
// goroutine while the connection is dialed and the handshake done (or a
// pooled connection is taken), and the set frame waits for it. A write's
// latency is then the longer of the two instead of their sum. Whatever
// ends the operation early (a local check, a refused dial, the deadline),
// SetAdmitted waits for admit before it returns, so the caller always
// knows admit's result.
func (c *Client) SetAdmitted(ctx context.Context, t Target, name, content, expectedHash string, admit Admit) (File, error) {
	g := startGate(ctx, admit)
	defer g.wait()
	return c.do(ctx, t, operation{set: true, name: name, content: content, expectedHash: expectedHash, gate: g})
}

type operation struct {
	set          bool
	name         string
	content      string
	expectedHash string
	gate         *gate // nil: no admission
}

// gate is a running admission. wait may be called more than once, from
// the operation's goroutine only.
type gate struct {
	ch   chan error
	err  error
	done bool
}

// startGate runs admit in its own goroutine; nil admit is a nil gate,
// which is always open.
func startGate(ctx context.Context, admit Admit) *gate {
	if admit == nil {
		return nil
	}
	g := &gate{ch: make(chan error, 1)}
	go func() { g.ch <- admit(ctx) }()
	return g
}

// wait blocks until admit returned and gives its error.
func (g *gate) wait() error {
	if g == nil {
		return nil
	}
	if !g.done {
		g.err, g.done = <-g.ch, true
	}
	return g.err
}

// admitted is the last step before a set frame is sent: it waits for the
// admission, then checks that the context has not ended meanwhile.
func (o operation) admitted(ctx context.Context) error {
	if err := o.gate.wait(); err != nil {
		return unavailable("not_admitted", err)
	}
	if err := ctx.Err(); err != nil {
		return unavailable(ctxReason(err), err)
	}
	return nil
}

func (c *Client) do(ctx context.Context, t Target, o operation) (File, error) {
	start := time.Now()
	op := "get"
	if o.set {
		op = "set"
	}
	transport := transportLabel(t.Transport)
	// The span carries the operation, transport, outcome and reason code
	// only: never the URL, a file path, a credential or file content.
	ctx, span := tracer.Start(ctx, "agentgw."+op, trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("occ.gateway.operation", op), attribute.String("occ.gateway.transport", transport)))
	f, err := c.run(ctx, t, o)
	d := time.Since(start)
	outcome, reason := outcomeOf(err)
	span.SetAttributes(attribute.String("occ.gateway.outcome", outcome))
	if err != nil {
		span.SetAttributes(attribute.String("occ.gateway.reason", reason))
		span.SetStatus(codes.Error, outcome)
	}
	span.End()
	if c.obs != nil {
		c.obs.GatewayOperation(op, transport, outcome, d)
	}
	if c.log.Enabled(ctx, slog.LevelDebug) {
		name, logOutcome := o.name, "ok"
		if !workspace.ValidName(name) {
			name = "(invalid)" // caller input; not repeated
		}
		if err != nil {
			logOutcome = reason
		}
		c.log.LogAttrs(ctx, slog.LevelDebug, "agentgw operation",
			slog.String("op", op),
			slog.String("transport", transport),
			slog.String("file", name),
			slog.String("outcome", logOutcome),
			slog.Duration("duration", d))
	}
	return f, err
}

// outcomeOf names an operation's result for metrics and spans (one of a
// fixed set) and gives the error's content-free reason code.
func outcomeOf(err error) (outcome, reason string) {
	if err == nil {
		return "ok", ""
	}
	var e *Error
	if !errors.As(err, &e) {
		return "unavailable", "error"
	}
	switch e.Kind {
	case OutcomeUnknown:
		return "outcome_unknown", e.Reason
	case Conflict:
		return "conflict", e.Reason
	}
	return "unavailable", e.Reason
}

// transportLabel bounds the transport label to the two transports.
func transportLabel(t Transport) string {
	switch t {
	case Direct, Routed:
		return string(t)
	}
	return "invalid"
}

func (c *Client) run(ctx context.Context, t Target, o operation) (File, error) {
	// Everything that can be decided locally is decided before dialing, so
	// a bad request never costs a connection and never reaches a gateway.
	if !workspace.ValidName(o.name) {
		return File{}, unavailable("invalid_name", errors.New("not one of the four workspace file names"))
	}
	if o.set {
		if err := workspace.CheckContent(o.content); err != nil {
			return File{}, unavailable("invalid_content", err) // *ContentError never holds the text
		}
		if o.expectedHash != "" && !digest.Valid(strings.ToLower(o.expectedHash)) {
			return File{}, unavailable("invalid_expected_hash", errors.New("expected hash must be 64 hex digits"))
		}
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultTimeout)
		defer cancel()
	}
	p, err := prepare(ctx, t)
	if err != nil {
		return File{}, err
	}
	if err := ctx.Err(); err != nil {
		return File{}, unavailable(ctxReason(err), err)
	}
	if c.pool != nil {
		if key, ok := keyOf(t); ok {
			return c.runPooled(ctx, key, p, o)
		}
	}

	s, err := c.dial(ctx, p)
	if err != nil {
		return File{}, err
	}
	// The close handshake waits for the gateway's close frame (a round
	// trip, up to closeTimeout); the operation's result does not depend on
	// it, so the caller gets the result first and the connection closes in
	// the background, at most closeTimeout later.
	defer func() { go s.close() }()

	hello, err := s.handshake(ctx, p, c.version)
	if err != nil {
		return File{}, err
	}
	if err := checkGrant(hello, o.set); err != nil {
		return File{}, err
	}
	if o.set {
		return s.set(ctx, o)
	}
	return s.get(ctx, o)
}

// runPooled runs o on the gateway's pooled connection (pool.go), after
// prepare has read and validated this operation's credential and CA.
func (c *Client) runPooled(ctx context.Context, key poolKey, p *prepared, o operation) (File, error) {
	fp := c.pool.fingerprint(p)
	dial := func() (*pconn, error) {
		s, err := c.dial(ctx, p)
		if err != nil {
			return nil, err
		}
		hello, err := s.handshake(ctx, p, c.version)
		if err != nil {
			s.close()
			return nil, err
		}
		pc := &pconn{p: c.pool, key: key, fp: fp, s: s, hello: hello,
			turns: make(chan struct{}, c.pool.opts.MaxInFlight), writing: make(chan struct{}, 1), done: make(chan struct{}),
			pending: map[string]chan frame[filePayload]{}}
		go pc.readLoop()
		return pc, nil
	}
	for attempt := 0; ; attempt++ {
		pc, err := c.pool.acquire(ctx, key, fp, dial)
		if err != nil {
			return File{}, err
		}
		f, err := pooledOp(ctx, pc, o)
		pc.releaseTurn()
		c.pool.release(pc)
		if attempt == 0 && errors.Is(err, errPooledDead) {
			continue // nothing was sent: one fresh dial
		}
		return f, err
	}
}

// pooledOp is get or set on a pooled connection, with the same failure
// semantics as on a connection of its own: before Write nothing was sent
// (Unavailable); after it, a set without a reliable answer is
// OutcomeUnknown.
func pooledOp(ctx context.Context, pc *pconn, o operation) (File, error) {
	if err := checkGrant(pc.hello, o.set); err != nil {
		return File{}, err
	}
	if !o.set {
		res, _, err := pc.roundTrip(ctx, methodGet, getParams{AgentID: NativeAgentID, Name: o.name})
		if err != nil {
			return File{}, unavailable(readReason(ctx, err, "connection_lost"), err)
		}
		return getResult(res, o)
	}
	// Last point at which nothing has been sent.
	if err := o.admitted(ctx); err != nil {
		return File{}, err
	}
	res, sent, err := pc.roundTrip(ctx, methodSet,
		setParams{AgentID: NativeAgentID, Name: o.name, Content: o.content, ExpectedHash: strings.ToLower(o.expectedHash)})
	if err != nil {
		if !sent {
			return File{}, unavailable(readReason(ctx, err, "connection_lost"), err)
		}
		return File{}, outcomeUnknown(readReason(ctx, err, "connection_lost_after_send"), err)
	}
	return setResult(res, o)
}

// session is one WebSocket connection: used for exactly one operation, or,
// pooled (pool.go), for many.
type session struct {
	conn *websocket.Conn
	raw  *connRecorder
	tr   *http.Transport
	buf  []byte // readMessage's; used by the session's one reader at a time
}

// connRecorder keeps the TCP connections the HTTP transport dials for this
// session, so cleanup can put a deadline on the close handshake and close
// the socket whatever state the WebSocket layer is in.
type connRecorder struct {
	d      net.Dialer
	tunnel compute.Tunnel // nil: dial d
	mu     sync.Mutex
	conns  []net.Conn
}

func (r *connRecorder) dial(ctx context.Context, network, addr string) (net.Conn, error) {
	var c net.Conn
	var err error
	if r.tunnel != nil {
		// The URL's loopback address is the remote host's; only the
		// tunnel reaches it.
		c, err = r.tunnel.DialGateway(ctx)
	} else {
		c, err = r.d.DialContext(ctx, network, addr)
	}
	if err != nil {
		return nil, err
	}
	r.mu.Lock()
	r.conns = append(r.conns, c)
	r.mu.Unlock()
	return c, nil
}

func (r *connRecorder) each(fn func(net.Conn)) {
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, c := range r.conns {
		fn(c)
	}
}

// dial opens the WebSocket. The HTTP transport is built per operation: it
// carries this operation's TLS roots, uses no environment proxy (the
// targets are loopback or a private route), and follows no redirect (a
// redirect would carry x-api-key to wherever it points).
func (c *Client) dial(ctx context.Context, p *prepared) (*session, error) {
	rec := &connRecorder{tunnel: p.tunnel}
	tr := &http.Transport{
		Proxy:                  nil,
		DialContext:            rec.dial,
		TLSClientConfig:        p.tls,
		DisableKeepAlives:      true,
		DisableCompression:     true,
		MaxResponseHeaderBytes: 64 << 10,
	}
	hc := &http.Client{
		Transport:     tr,
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	conn, resp, err := websocket.Dial(ctx, p.url, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: p.header})
	if err != nil {
		rec.each(func(c net.Conn) { _ = c.Close() })
		tr.CloseIdleConnections()
		return nil, dialError(ctx, resp, err)
	}
	conn.SetReadLimit(c.readLimit)
	return &session{conn: conn, raw: rec, tr: tr}, nil
}

// close ends the connection within closeTimeout: a normal close handshake
// if the peer answers in time, else the socket is closed under it. The
// deadline is not enough on its own: a tunnel's stream (an SSH channel)
// supports none, and the close would then wait on the websocket
// library's own 5 s timeouts while the stream holds one of its host's
// tunnel slots. So a timer closes the raw connections at closeTimeout
// whatever they are.
func (s *session) close() {
	s.raw.each(func(c net.Conn) { _ = c.SetDeadline(time.Now().Add(closeTimeout)) })
	t := time.AfterFunc(closeTimeout, func() { s.raw.each(func(c net.Conn) { _ = c.Close() }) })
	_ = s.conn.Close(websocket.StatusNormalClosure, "")
	t.Stop()
	s.raw.each(func(c net.Conn) { _ = c.Close() })
	s.tr.CloseIdleConnections()
}

// handshake waits for connect.challenge, sends connect and returns the
// hello-ok. Every failure is Unavailable: nothing has been requested yet.
func (s *session) handshake(ctx context.Context, p *prepared, version string) (*helloOK, error) {
	for {
		f, err := readFrame[struct{}](ctx, s)
		if err != nil {
			return nil, unavailable(readReason(ctx, err, "handshake"), err)
		}
		if f.Type == "event" && f.Event == eventChallenge {
			break
		}
		if f.Type == "res" {
			return nil, unavailable("handshake", errors.New("response before connect.challenge"))
		}
		// Other events (health, tick, presence, ...) may come first.
	}

	params := connectParams{
		MinProtocol: ProtocolVersion,
		MaxProtocol: ProtocolVersion,
		Client:      clientInfo{ID: clientID, Version: version, Platform: clientPlatform, Mode: clientMode},
		Role:        role,
		Caps:        []string{},
	}
	if p.transport == Direct {
		// Token auth keeps the requested scopes only for gateway-client on
		// loopback, so ask for exactly what OCC needs.
		params.Scopes = []string{scopeAdmin, scopeRead, scopeWrite}
		params.Auth = &connectAuth{Token: p.token}
	} else {
		// Trusted-proxy mode grants scopes from the identity the route
		// sets and clears whatever the client asks for; ask for nothing
		// and send no credential in the frame.
		params.Scopes = []string{}
	}
	data, err := encodeFrame(reqFrame{Type: "req", ID: connectID, Method: methodConnect, Params: params})
	if err != nil {
		return nil, unavailable("handshake", err)
	}
	if err := s.conn.Write(ctx, websocket.MessageText, data); err != nil {
		return nil, unavailable(readReason(ctx, err, "handshake"), err)
	}

	res, err := await[helloOK](ctx, s, connectID)
	if errors.Is(err, errBadPayload) {
		return nil, unavailable("handshake", errors.New("hello-ok does not decode"))
	}
	if err != nil {
		return nil, unavailable(readReason(ctx, err, "handshake"), err)
	}
	if !res.OK {
		if res.Error == nil {
			return nil, unavailable("handshake", errors.New("connect answer has neither payload nor error"))
		}
		return nil, unavailable("connect_refused", res.Error.gatewayError())
	}
	hello := res.Payload
	if hello.Type != "hello-ok" || hello.Protocol != ProtocolVersion {
		return nil, unavailable("handshake", fmt.Errorf("expected hello-ok for protocol %d", ProtocolVersion))
	}
	return &hello, nil
}

// checkGrant checks the hello's role and scopes, which are what the gateway
// will enforce: a connect can succeed with scopes [] (the gateway clears
// requested scopes in several cases), and then every method would fail.
// Checking here turns that into a clear "scope" failure before any request
// is sent; in particular a set is never written on a connection that
// cannot carry it.
func checkGrant(h *helloOK, set bool) error {
	if h.Auth == nil || h.Auth.Role != role {
		return unavailable("scope", errors.New("hello-ok does not grant the operator role"))
	}
	var admin, read bool
	for _, s := range h.Auth.Scopes {
		switch s {
		case scopeAdmin:
			admin = true
		case scopeRead:
			read = true
		}
	}
	switch {
	case set && !admin:
		return unavailable("scope", errors.New("granted scopes lack operator.admin, which agents.files.set needs"))
	case !set && !admin && !read:
		return unavailable("scope", errors.New("granted scopes lack operator.read"))
	}
	return nil
}

func (s *session) get(ctx context.Context, o operation) (File, error) {
	data, err := encodeFrame(reqFrame{Type: "req", ID: requestID, Method: methodGet,
		Params: getParams{AgentID: NativeAgentID, Name: o.name}})
	if err != nil {
		return File{}, unavailable("invalid_name", err)
	}
	if err := s.conn.Write(ctx, websocket.MessageText, data); err != nil {
		return File{}, unavailable(readReason(ctx, err, "connection_lost"), err)
	}
	res, err := await[filePayload](ctx, s, requestID)
	if err != nil {
		return File{}, unavailable(readReason(ctx, err, "connection_lost"), err)
	}
	return getResult(res, o)
}

// getResult maps a get's answer.
func getResult(res frame[filePayload], o operation) (File, error) {
	if !res.OK {
		if res.Error == nil {
			return File{}, unavailable("invalid_answer", errors.New("answer has neither payload nor error"))
		}
		return File{}, unavailable("answered_error", res.Error.gatewayError())
	}
	f, err := parseGet(res.Payload, o.name)
	if err != nil {
		return File{}, unavailable("invalid_answer", err)
	}
	return f, nil
}

// parseGet normalizes a get answer. The content must satisfy the same rule
// OCC applies to writes, and the hash is recomputed: the native hash is of
// the file's bytes while content is the gateway's UTF-8 decoding of them,
// so a disagreement means the text is not the file (for example a binary
// file decoded lossily) and must not be offered as a base for an edit.
func parseGet(p filePayload, name string) (File, error) {
	if p.File == nil {
		return File{}, errors.New("get answer has no file")
	}
	if p.File.Name != name {
		return File{}, errors.New("get answer names another file")
	}
	if p.Missing || p.File.Missing {
		return File{Name: name, Missing: true}, nil
	}
	if p.File.Content == nil {
		return File{}, errors.New("get answer has no content")
	}
	content := *p.File.Content
	if err := workspace.CheckContent(content); err != nil {
		return File{}, fmt.Errorf("file on the gateway breaks the content rule: %w", err)
	}
	hash := digest.Of(content)
	if native := strings.ToLower(p.File.Hash); digest.Valid(native) && native != hash {
		return File{}, errors.New("native hash does not match the content")
	}
	return File{Name: name, Content: content, Hash: hash, Size: int64(len(content))}, nil
}

// set sends the write. From the moment the frame is handed to the
// connection the gateway may apply it, so from there on every failure other
// than an answered error is OutcomeUnknown.
func (s *session) set(ctx context.Context, o operation) (File, error) {
	data, err := encodeFrame(reqFrame{Type: "req", ID: requestID, Method: methodSet,
		Params: setParams{AgentID: NativeAgentID, Name: o.name, Content: o.content, ExpectedHash: strings.ToLower(o.expectedHash)}})
	if err != nil {
		return File{}, unavailable("invalid_content", err)
	}
	// Last point at which nothing has been sent: a refused admission, or a
	// context that ended during the handshake, is still a clean
	// Unavailable.
	if err := o.admitted(ctx); err != nil {
		return File{}, err
	}
	if err := s.conn.Write(ctx, websocket.MessageText, data); err != nil {
		// Part of the frame, or all of it, may have reached the gateway.
		return File{}, outcomeUnknown(readReason(ctx, err, "connection_lost_after_send"), err)
	}
	res, err := await[filePayload](ctx, s, requestID)
	if err != nil {
		return File{}, outcomeUnknown(readReason(ctx, err, "connection_lost_after_send"), err)
	}
	return setResult(res, o)
}

// setResult maps a set's answer: answered errors were not applied;
// anything unusable after the frame was sent is OutcomeUnknown.
func setResult(res frame[filePayload], o operation) (File, error) {
	if !res.OK {
		if res.Error == nil {
			return File{}, outcomeUnknown("invalid_answer", errors.New("answer has neither payload nor error"))
		}
		return File{}, setError(res.Error)
	}
	f, err := parseSet(res.Payload, o)
	if err != nil {
		return File{}, outcomeUnknown("invalid_answer", err)
	}
	return f, nil
}

// setError maps an answered set error. The gateway answered, so the write
// was not applied: a failed expectedHash is Conflict, anything else is
// Unavailable.
func setError(w *wireError) error {
	ge := w.gatewayError()
	if w.Details.Type != conflictType {
		return unavailable("answered_error", ge)
	}
	cur := w.Details.CurrentHash
	if cur != "" && !digest.Valid(strings.ToLower(cur)) {
		// Still not applied, but a conflict without a usable current hash
		// would mislead a caller into "the file is missing".
		return unavailable("answered_error", ge)
	}
	return &Error{Kind: Conflict, Reason: "conflict", CurrentHash: strings.ToLower(cur), Err: ge}
}

// parseSet checks the acknowledgement. An acknowledgement that names
// another file, reports the file missing, or echoes other content or a hash
// of other content does not prove that this write was applied as sent.
func parseSet(p filePayload, o operation) (File, error) {
	if p.OK != nil && !*p.OK {
		return File{}, errors.New("set answer says ok:false")
	}
	if p.File == nil {
		return File{}, errors.New("set answer has no file")
	}
	if p.File.Name != o.name {
		return File{}, errors.New("set answer names another file")
	}
	if p.Missing || p.File.Missing {
		return File{}, errors.New("set answer reports the file missing")
	}
	hash := digest.Of(o.content)
	if p.File.Content != nil && *p.File.Content != o.content {
		return File{}, errors.New("set answer echoes other content")
	}
	if native := strings.ToLower(p.File.Hash); digest.Valid(native) && native != hash {
		return File{}, errors.New("set answer hash does not match the content sent")
	}
	return File{Name: o.name, Content: o.content, Hash: hash, Size: int64(len(o.content))}, nil
}

// readMessage returns the next message's bytes, read into the session's
// buffer (valid until the next read): what websocket.Conn.Read does, without
// growing a new slice from 512 bytes for every frame. The connection's read
// limit applies as with Read.
func (s *session) readMessage(ctx context.Context) ([]byte, error) {
	typ, r, err := s.conn.Reader(ctx)
	if err != nil {
		return nil, err
	}
	if typ != websocket.MessageText {
		return nil, errMalformed
	}
	if s.buf == nil {
		s.buf = make([]byte, 0, readBufferSize)
	}
	buf := bytes.NewBuffer(s.buf[:0])
	if _, err := buf.ReadFrom(r); err != nil {
		return nil, err
	}
	b := buf.Bytes()
	if cap(b) <= maxKeptBuffer {
		s.buf = b
	}
	return b, nil
}

// readBufferSize holds a hello-ok (about 16.5 KB) and a file answer of
// the largest content; maxKeptBuffer bounds what a session keeps after a
// larger message.
const (
	readBufferSize = 32 << 10
	maxKeptBuffer  = 256 << 10
)

// readFrame returns the next frame, its payload decoded as P.
func readFrame[P any](ctx context.Context, s *session) (frame[P], error) {
	data, err := s.readMessage(ctx)
	if err != nil {
		return frame[P]{}, err
	}
	return decodeFrame[P](data)
}

// await returns the response with the given id, its payload decoded as P.
// Events interleave freely with responses and are skipped; so is a
// response to another id, which this client never sends and therefore
// cannot be waiting for. A successful response whose payload is not a P is
// errBadPayload.
func await[P any](ctx context.Context, s *session, id string) (frame[P], error) {
	for {
		f, err := readFrame[P](ctx, s)
		if err != nil {
			return frame[P]{}, err
		}
		if f.Type == "res" && f.ID == id {
			if f.OK && f.badPayload {
				return frame[P]{}, errBadPayload
			}
			return f, nil
		}
	}
}

var (
	errMalformed  = errors.New("frame is not a JSON text message")
	errBadPayload = errors.New("answer's payload does not decode")
)

// readReason names a connection-level failure: the context first (a read
// cut short by the deadline reports a closed connection), then the read
// limit, then a malformed frame, else fallback.
func readReason(ctx context.Context, err error, fallback string) string {
	if cerr := ctx.Err(); cerr != nil {
		return ctxReason(cerr)
	}
	switch {
	case errors.Is(err, websocket.ErrMessageTooBig):
		return "read_limit"
	case errors.Is(err, errMalformed), errors.Is(err, errBadPayload):
		return "invalid_answer"
	}
	return fallback
}

func ctxReason(err error) string {
	if errors.Is(err, context.Canceled) {
		return "canceled"
	}
	return "deadline"
}

// dialError classifies a failed dial or upgrade. Nothing was requested, so
// it is always Unavailable.
func dialError(ctx context.Context, resp *http.Response, err error) error {
	if cerr := ctx.Err(); cerr != nil {
		return unavailable(ctxReason(cerr), err)
	}
	if resp != nil && resp.StatusCode != http.StatusSwitchingProtocols {
		// The proxy refused the upgrade (401 for a bad key, 404 for an
		// unknown route, 403 from the gateway's own checks).
		return unavailable("upgrade_refused", fmt.Errorf("upgrade answered HTTP %d", resp.StatusCode))
	}
	var cve *tls.CertificateVerificationError
	var rhe tls.RecordHeaderError
	if errors.As(err, &cve) || errors.As(err, &rhe) {
		return unavailable("tls", err)
	}
	return unavailable("dial", err)
}

func unavailable(reason string, err error) *Error {
	return &Error{Kind: Unavailable, Reason: reason, Err: err}
}

func outcomeUnknown(reason string, err error) *Error {
	return &Error{Kind: OutcomeUnknown, Reason: reason, Err: err}
}
