package agentgw_test

// Fault tests against gwtest.FakeGateway: the failures the real gateway
// cannot be made to produce, and the exact frames the client sends.

import (
	"bytes"
	"context"
	"errors"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/secretfile"
	"github.com/openclaw/occ/internal/workspace"
)

const (
	methodGet = "agents.files.get"
	methodSet = "agents.files.set"
)

// TestSetConnectionClosedAfterFrame is the case the whole OutcomeUnknown
// contract exists for: the gateway applied the write and the connection
// dropped before the acknowledgement. The client must say "unknown", and
// must not have sent the write twice.
func TestSetConnectionClosedAfterFrame(t *testing.T) {
	g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
	g.SetFault(methodSet, gwtest.FaultClose)
	c := agentgw.New(agentgw.Options{})

	_, err := c.Set(testCtx(t), g.DirectTarget(t), workspace.SoulMD, "applied?\n", "")
	if diff := cmp.Diff(unknown("connection_lost_after_send"), outcomeOf(err)); diff != "" {
		t.Errorf("Set (-want +got):\n%s", diff)
	}
	if n := g.Frames(methodSet); n != 1 {
		t.Errorf("gateway received %d set frames, want exactly 1", n)
	}
	if got, _ := g.File(workspace.SoulMD); got != "applied?\n" {
		t.Errorf("fake did not apply the write (test setup)")
	}
	noSecret(t, err, "applied?")
}

func TestFaults(t *testing.T) {
	tests := []struct {
		name   string
		method string
		fault  gwtest.Fault
		want   outcome
	}{
		{"get answered error", methodGet, gwtest.FaultError, unavailable("answered_error")},
		{"set answered error", methodSet, gwtest.FaultError, unavailable("answered_error")},
		{"get connection closed", methodGet, gwtest.FaultClose, unavailable("connection_lost")},
		{"get wrong file name", methodGet, gwtest.FaultWrongName, unavailable("invalid_answer")},
		{"set wrong file name", methodSet, gwtest.FaultWrongName, unknown("invalid_answer")},
		{"get malformed answer", methodGet, gwtest.FaultMalformed, unavailable("invalid_answer")},
		{"set malformed answer", methodSet, gwtest.FaultMalformed, unknown("invalid_answer")},
		{"get hash of other bytes", methodGet, gwtest.FaultBadHash, unavailable("invalid_answer")},
		{"set hash of other bytes", methodSet, gwtest.FaultBadHash, unknown("invalid_answer")},
		{"get answer of another shape", methodGet, gwtest.FaultPayloadType, unavailable("invalid_answer")},
		{"set answer of another shape", methodSet, gwtest.FaultPayloadType, unknown("invalid_answer")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{Files: map[string]string{workspace.SoulMD: "before\n"}})
			g.SetFault(tt.method, tt.fault)
			c := agentgw.New(agentgw.Options{})
			var err error
			if tt.method == methodSet {
				_, err = c.Set(testCtx(t), g.DirectTarget(t), workspace.SoulMD, "after\n", "")
			} else {
				_, err = c.Get(testCtx(t), g.DirectTarget(t), workspace.SoulMD)
			}
			if diff := cmp.Diff(tt.want, outcomeOf(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if n := g.Frames(tt.method); n != 1 {
				t.Errorf("gateway received %d %s frames, want 1", n, tt.method)
			}
			noSecret(t, err, "before", "after", g.Token)
		})
	}
}

// TestSlowerThanDeadline: a gateway that never answers. The operation ends
// at the caller's deadline (plus a bounded cleanup), a get as Unavailable
// and a set as OutcomeUnknown, since the set frame was sent.
func TestSlowerThanDeadline(t *testing.T) {
	const deadline = 300 * time.Millisecond
	tests := []struct {
		name      string
		handshake gwtest.HandshakeFault
		set       bool
		want      outcome
	}{
		{"get, request unanswered", gwtest.HandshakeOK, false, unavailable("deadline")},
		{"set, request unanswered", gwtest.HandshakeOK, true, unknown("deadline")},
		{"get, no challenge", gwtest.HandshakeHang, false, unavailable("deadline")},
		{"set, no challenge", gwtest.HandshakeHang, true, unavailable("deadline")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
			g.SetFault(methodGet, gwtest.FaultHang)
			g.SetFault(methodSet, gwtest.FaultHang)
			g.SetHandshakeFault(tt.handshake)
			c := agentgw.New(agentgw.Options{})
			ctx, cancel := context.WithTimeout(t.Context(), deadline)
			defer cancel()
			start := time.Now()
			var err error
			if tt.set {
				_, err = c.Set(ctx, g.DirectTarget(t), workspace.SoulMD, "x", "")
			} else {
				_, err = c.Get(ctx, g.DirectTarget(t), workspace.SoulMD)
			}
			elapsed := time.Since(start)
			if diff := cmp.Diff(tt.want, outcomeOf(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			if elapsed > deadline+2*time.Second {
				t.Errorf("returned after %s; the deadline was %s", elapsed, deadline)
			}
			wantSets := 0
			if tt.set && tt.handshake == gwtest.HandshakeOK {
				wantSets = 1
			}
			if n := g.Frames(methodSet); n != wantSets {
				t.Errorf("gateway received %d set frames, want %d", n, wantSets)
			}
		})
	}
}

// TestCancelledMidRequest: the caller's context is cancelled after the
// request frame reached the gateway (the HTTP client went away).
func TestCancelledMidRequest(t *testing.T) {
	for _, set := range []bool{false, true} {
		t.Run(map[bool]string{false: "get", true: "set"}[set], func(t *testing.T) {
			ctx, cancel := context.WithCancel(testCtx(t))
			defer cancel()
			g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{OnRequest: func(string) { cancel() }})
			g.SetFault(methodGet, gwtest.FaultHang)
			g.SetFault(methodSet, gwtest.FaultHang)
			c := agentgw.New(agentgw.Options{})
			var err error
			want := unavailable("canceled")
			if set {
				want = unknown("canceled")
				_, err = c.Set(ctx, g.DirectTarget(t), workspace.SoulMD, "x", "")
			} else {
				_, err = c.Get(ctx, g.DirectTarget(t), workspace.SoulMD)
			}
			if diff := cmp.Diff(want, outcomeOf(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	t.Run("set, cancelled before sending", func(t *testing.T) {
		g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
		ctx, cancel := context.WithCancel(t.Context())
		cancel()
		_, err := agentgw.New(agentgw.Options{}).Set(ctx, g.DirectTarget(t), workspace.SoulMD, "x", "")
		if diff := cmp.Diff(unavailable("canceled"), outcomeOf(err)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
		if n := g.Connections(); n != 0 {
			t.Errorf("dialed %d times with a cancelled context", n)
		}
	})
}

// TestHelloScopes: the client checks hello-ok.auth.scopes itself and never
// sends a set on a connection that lacks operator.admin.
func TestHelloScopes(t *testing.T) {
	tests := []struct {
		name    string
		scopes  []string
		wantGet outcome
		wantSet outcome
	}{
		{"admin read write", []string{"operator.admin", "operator.read", "operator.write"}, outcome{}, outcome{}},
		{"admin only", []string{"operator.admin"}, outcome{}, outcome{}},
		{"read only", []string{"operator.read"}, outcome{}, unavailable("scope")},
		{"read and write", []string{"operator.read", "operator.write"}, outcome{}, unavailable("scope")},
		{"write only", []string{"operator.write"}, unavailable("scope"), unavailable("scope")},
		{"none", []string{}, unavailable("scope"), unavailable("scope")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{Scopes: tt.scopes})
			c := agentgw.New(agentgw.Options{})
			_, err := c.Get(testCtx(t), g.DirectTarget(t), workspace.SoulMD)
			if diff := cmp.Diff(tt.wantGet, outcomeOf(err)); diff != "" {
				t.Errorf("Get (-want +got):\n%s", diff)
			}
			_, err = c.Set(testCtx(t), g.DirectTarget(t), workspace.SoulMD, "x", "")
			if diff := cmp.Diff(tt.wantSet, outcomeOf(err)); diff != "" {
				t.Errorf("Set (-want +got):\n%s", diff)
			}
			wantSets := 0
			if tt.wantSet == (outcome{}) {
				wantSets = 1
			}
			if n := g.Frames(methodSet); n != wantSets {
				t.Errorf("gateway received %d set frames, want %d", n, wantSets)
			}
		})
	}
}

func TestHandshakeFailures(t *testing.T) {
	t.Run("closed before challenge", func(t *testing.T) {
		g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
		g.SetHandshakeFault(gwtest.HandshakeClose)
		_, err := agentgw.New(agentgw.Options{}).Set(testCtx(t), g.DirectTarget(t), workspace.SoulMD, "x", "")
		if diff := cmp.Diff(unavailable("handshake"), outcomeOf(err)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
	t.Run("nothing listening", func(t *testing.T) {
		g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
		target := g.DirectTarget(t)
		g.Close()
		_, err := agentgw.New(agentgw.Options{}).Get(testCtx(t), target, workspace.SoulMD)
		if diff := cmp.Diff(unavailable("dial"), outcomeOf(err)); diff != "" {
			t.Errorf("(-want +got):\n%s", diff)
		}
	})
}

// TestAnswerLimits: the read limit and the content rule apply to what the
// gateway sends back.
func TestAnswerLimits(t *testing.T) {
	big := strings.Repeat("b", 10_000)
	tests := []struct {
		name    string
		limit   int64
		file    string
		set     bool
		content string
		want    outcome
	}{
		{"get over the read limit", 8192, big, false, "", unavailable("read_limit")},
		{"set echo over the read limit", 8192, "", true, big, unknown("read_limit")},
		{"get within the default limit", 0, big, false, "", outcome{}},
		{"get of a file of 16 KiB", 0, strings.Repeat("b", workspace.MaxFileBytes), false, "", outcome{}},
		{"get of a file over 16 KiB", 0, strings.Repeat("b", workspace.MaxFileBytes+1), false, "", unavailable("invalid_answer")},
		{"get of a file with NUL", 0, "a\x00b", false, "", unavailable("invalid_answer")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{Files: map[string]string{workspace.SoulMD: tt.file}})
			c := agentgw.New(agentgw.Options{ReadLimit: tt.limit})
			var err error
			if tt.set {
				_, err = c.Set(testCtx(t), g.DirectTarget(t), workspace.SoulMD, tt.content, "")
			} else {
				_, err = c.Get(testCtx(t), g.DirectTarget(t), workspace.SoulMD)
			}
			if diff := cmp.Diff(tt.want, outcomeOf(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}

// TestHandshakeLimits: the read limit applies to the frames before
// hello-ok as to answers: a connect.challenge or hello-ok of exactly
// ReadLimit bytes is read, one byte more fails the operation as read_limit
// before anything is requested (Unavailable, for a set too), with a set
// limit and the default one. The gateway's own cap, 64 KiB on a frame it
// reads before hello-ok (which the fake enforces as the real one does),
// concerns only the connect frame: with the longest token OCC accepts
// (4,096 bytes, each of which JSON may double) it is about 8.5 KB and
// is read.
func TestHandshakeLimits(t *testing.T) {
	const limit = 8192
	tests := []struct {
		name             string
		limit            int64
		challenge, hello int // frame sizes; 0: unpadded
		token            string
		set              bool
		want             outcome
	}{
		{name: "challenge at the read limit", limit: limit, challenge: limit},
		{name: "challenge over the read limit", limit: limit, challenge: limit + 1, want: unavailable("read_limit")},
		{name: "hello-ok at the read limit", limit: limit, hello: limit},
		{name: "hello-ok over the read limit", limit: limit, hello: limit + 1, want: unavailable("read_limit")},
		{name: "set, hello-ok over the read limit", limit: limit, hello: limit + 1, set: true, want: unavailable("read_limit")},
		{name: "challenge at the default read limit", challenge: agentgw.DefaultReadLimit},
		{name: "challenge over the default read limit", challenge: agentgw.DefaultReadLimit + 1, want: unavailable("read_limit")},
		{name: "hello-ok at the default read limit", hello: agentgw.DefaultReadLimit},
		{name: "hello-ok over the default read limit", hello: agentgw.DefaultReadLimit + 1, want: unavailable("read_limit")},
		{name: "connect with the longest token", token: strings.Repeat(`"`, secretfile.MaxSecretBytes), set: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{Token: tt.token, ChallengeBytes: tt.challenge, HelloBytes: tt.hello})
			c := agentgw.New(agentgw.Options{ReadLimit: tt.limit})
			var err error
			if tt.set {
				_, err = c.Set(testCtx(t), g.DirectTarget(t), workspace.SoulMD, "x", "")
			} else {
				_, err = c.Get(testCtx(t), g.DirectTarget(t), workspace.SoulMD)
			}
			if diff := cmp.Diff(tt.want, outcomeOf(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			wantSets := 0
			if tt.set && tt.want == (outcome{}) {
				wantSets = 1
			}
			if n := g.Frames(methodSet); n != wantSets {
				t.Errorf("gateway received %d set frames, want %d", n, wantSets)
			}
		})
	}
}

// TestPrechecks: requests the client can refuse on its own never cost a
// connection.
func TestPrechecks(t *testing.T) {
	g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
	c := agentgw.New(agentgw.Options{})
	target := g.DirectTarget(t)
	tests := []struct {
		name                string
		file, content, hash string
		set                 bool
		want                outcome
	}{
		{"TOOLS.md", "TOOLS.md", "", "", false, unavailable("invalid_name")},
		{"BOOTSTRAP.md (native, not OCC's)", "BOOTSTRAP.md", "", "", false, unavailable("invalid_name")},
		{"lower case", "agents.md", "", "", false, unavailable("invalid_name")},
		{"path", "../AGENTS.md", "x", "", true, unavailable("invalid_name")},
		{"trailing space", "SOUL.md ", "x", "", true, unavailable("invalid_name")},
		{"empty name", "", "", "", false, unavailable("invalid_name")},
		{"16385 bytes", workspace.SoulMD, strings.Repeat("a", 16385), "", true, unavailable("invalid_content")},
		{"NUL", workspace.SoulMD, "\x00", "", true, unavailable("invalid_content")},
		{"invalid UTF-8", workspace.SoulMD, "\xc3\x28", "", true, unavailable("invalid_content")},
		{"short hash", workspace.SoulMD, "x", "abc", true, unavailable("invalid_expected_hash")},
		{"non-hex hash", workspace.SoulMD, "x", strings.Repeat("g", 64), true, unavailable("invalid_expected_hash")},
		{"65-digit hash", workspace.SoulMD, "x", strings.Repeat("a", 65), true, unavailable("invalid_expected_hash")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var err error
			if tt.set {
				_, err = c.Set(testCtx(t), target, tt.file, tt.content, tt.hash)
			} else {
				_, err = c.Get(testCtx(t), target, tt.file)
			}
			if diff := cmp.Diff(tt.want, outcomeOf(err)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
	if n := g.Connections(); n != 0 {
		t.Errorf("the gateway saw %d connections; refused requests must not dial", n)
	}
}

// TestConnectFrame pins the connect params of both transports and the
// upgrade headers the gateway sees through the route.
func TestConnectFrame(t *testing.T) {
	g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
	c := agentgw.New(agentgw.Options{})
	client := map[string]any{"id": "gateway-client", "version": "dev", "platform": "linux", "mode": "backend"}

	if _, err := c.Get(testCtx(t), g.DirectTarget(t), workspace.SoulMD); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"minProtocol": 4.0, "maxProtocol": 4.0, "client": client, "role": "operator",
		"scopes": []any{"operator.admin", "operator.read", "operator.write"}, "caps": []any{},
		"auth": map[string]any{"token": g.Token},
	}
	if diff := cmp.Diff(want, g.LastConnect()); diff != "" {
		t.Errorf("direct connect params (-want +got):\n%s", diff)
	}

	p := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: g.HTTPURL})
	if _, err := c.Get(testCtx(t), p.Target(t), workspace.SoulMD); err != nil {
		t.Fatal(err)
	}
	want = map[string]any{
		"minProtocol": 4.0, "maxProtocol": 4.0, "client": client, "role": "operator",
		"scopes": []any{}, "caps": []any{},
	}
	if diff := cmp.Diff(want, g.LastConnect()); diff != "" {
		t.Errorf("routed connect params (-want +got):\n%s", diff)
	}
	h := g.LastHeader()
	got := map[string]string{}
	for _, name := range []string{"X-Occ-Identity", "X-Real-Ip", "X-Api-Key", "X-Forwarded-For", "Forwarded", "Authorization"} {
		got[name] = h.Get(name)
	}
	wantHeaders := map[string]string{
		"X-Occ-Identity": gwtest.Identity, "X-Real-Ip": gwtest.RealIP,
		"X-Api-Key": "", "X-Forwarded-For": "", "Forwarded": "", "Authorization": "",
	}
	if diff := cmp.Diff(wantHeaders, got); diff != "" {
		t.Errorf("upgrade headers at the gateway (-want +got):\n%s", diff)
	}
}

// TestBoundedCleanup: a peer that answers but never completes the close
// handshake delays the result by at most the 1 s close bound.
func TestBoundedCleanup(t *testing.T) {
	g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{Files: map[string]string{workspace.SoulMD: "x"}})
	g.SetFault(methodGet, gwtest.FaultIgnoreClose)
	start := time.Now()
	if _, err := agentgw.New(agentgw.Options{}).Get(testCtx(t), g.DirectTarget(t), workspace.SoulMD); err != nil {
		t.Fatal(err)
	}
	if elapsed := time.Since(start); elapsed > 2500*time.Millisecond {
		t.Errorf("Get took %s with a peer that ignores the close frame; cleanup must be bounded at about 1 s", elapsed)
	}
}

// TestBoundedCleanupWithoutDeadlines is TestBoundedCleanup through a
// tunnel whose streams refuse deadlines, as an SSH channel does: the
// stream must still be closed 1 s into the close (its host's tunnel slot
// freed then), not after the websocket library's own 5 s timeouts.
func TestBoundedCleanupWithoutDeadlines(t *testing.T) {
	g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{Files: map[string]string{workspace.SoulMD: "x"}})
	g.SetFault(methodGet, gwtest.FaultIgnoreClose)
	tun := &noDeadlineTunnel{addr: strings.TrimSuffix(strings.TrimPrefix(g.URL, "ws://"), "/"), token: g.Token, closed: make(chan time.Time, 1)}
	start := time.Now()
	target := agentgw.Target{Transport: agentgw.Direct, URL: g.URL, Tunnel: tun}
	if _, err := agentgw.New(agentgw.Options{}).Get(testCtx(t), target, workspace.SoulMD); err != nil {
		t.Fatal(err)
	}
	answered := time.Since(start)
	select {
	case at := <-tun.closed:
		// The close begins once the answer is in; the stream is closed
		// when the 1 s bound runs out, which the loaded machine may delay
		// a little, but never to the library's 5 s.
		if took := at.Sub(start) - answered; took > 3*time.Second {
			t.Errorf("the stream was closed %s after the answer; the close must be bounded at about 1 s", took)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("the tunnel's stream was not closed within 10 s of the answer")
	}
}

// noDeadlineTunnel dials the fake gateway and hands out streams that
// refuse deadlines, and records when the first one is closed.
type noDeadlineTunnel struct {
	addr, token string
	closed      chan time.Time
}

func (n *noDeadlineTunnel) DialGateway(ctx context.Context) (net.Conn, error) {
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", n.addr)
	if err != nil {
		return nil, err
	}
	return &noDeadlineConn{Conn: c, closed: n.closed}, nil
}

func (n *noDeadlineTunnel) ReadToken(context.Context) ([]byte, error) { return []byte(n.token), nil }

type noDeadlineConn struct {
	net.Conn
	closed chan time.Time
	once   sync.Once
}

func (c *noDeadlineConn) SetDeadline(time.Time) error { return errors.New("deadline not supported") }
func (c *noDeadlineConn) SetReadDeadline(time.Time) error {
	return errors.New("deadline not supported")
}
func (c *noDeadlineConn) SetWriteDeadline(time.Time) error {
	return errors.New("deadline not supported")
}
func (c *noDeadlineConn) Close() error {
	c.once.Do(func() { c.closed <- time.Now() })
	return c.Conn.Close()
}

// TestNoSecretsInLogs runs successful and failing operations with debug
// logging and checks that no token, key or content reaches the log or an
// error.
func TestNoSecretsInLogs(t *testing.T) {
	var buf bytes.Buffer
	var mu sync.Mutex
	log := slog.New(slog.NewTextHandler(lockedWriter{&mu, &buf}, &slog.HandlerOptions{Level: slog.LevelDebug}))
	c := agentgw.New(agentgw.Options{Logger: log})
	content := "secret-persona-content-0123"

	g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
	p := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: g.HTTPURL})
	direct, routed := g.DirectTarget(t), p.Target(t)
	wrongKey := p.Target(t)
	wrongKey.KeyFile = gwtest.WriteFile(t, "k", []byte("wrong-key-0123456789"))
	wrongToken := g.DirectTarget(t)
	wrongToken.TokenFile = gwtest.WriteFile(t, "t", []byte("wrong-token-0123456789"))
	badKeyFile := p.Target(t)
	badKeyFile.KeyFile = gwtest.WriteFile(t, "k", []byte(p.Key()+"\n"))

	var errs []error
	for _, target := range []agentgw.Target{direct, routed, wrongKey, wrongToken, badKeyFile} {
		_, err := c.Set(testCtx(t), target, workspace.SoulMD, content, "")
		errs = append(errs, err)
		_, err = c.Get(testCtx(t), target, workspace.SoulMD)
		errs = append(errs, err)
		_, err = c.Set(testCtx(t), target, workspace.SoulMD, content+"\x00", "")
		errs = append(errs, err)
	}
	g.SetFault(methodSet, gwtest.FaultWrongName)
	_, err := c.Set(testCtx(t), direct, workspace.SoulMD, content, "")
	errs = append(errs, err)

	secrets := []string{g.Token, p.Key(), content, "wrong-key-0123456789", "wrong-token-0123456789"}
	for _, err := range errs {
		noSecret(t, err, secrets...)
	}
	mu.Lock()
	logText := buf.String()
	mu.Unlock()
	if !strings.Contains(logText, "agentgw operation") {
		t.Fatalf("no debug records logged:\n%s", logText)
	}
	for _, s := range secrets {
		if strings.Contains(logText, s) {
			t.Errorf("log contains a secret or content:\n%s", logText)
		}
	}
}

type lockedWriter struct {
	mu *sync.Mutex
	w  *bytes.Buffer
}

func (l lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

// TestConcurrentUse: one Client serves many goroutines (run under -race).
func TestConcurrentUse(t *testing.T) {
	g := gwtest.NewFakeGateway(t, gwtest.FakeOptions{})
	c := agentgw.New(agentgw.Options{})
	target := g.DirectTarget(t)
	var wg sync.WaitGroup
	errs := make(chan error, 64)
	for i := range 16 {
		wg.Go(func() {
			name := workspace.Names[i%len(workspace.Names)]
			for range 4 {
				if _, err := c.Set(testCtx(t), target, name, "x", ""); err != nil {
					errs <- err
				}
				if _, err := c.Get(testCtx(t), target, name); err != nil {
					errs <- err
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Error(err)
	}
}
