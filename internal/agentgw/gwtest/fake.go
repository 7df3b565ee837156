package gwtest

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"net/http"
	"net/http/httptest"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/coder/websocket"

	"github.com/openclaw/occ/internal/agentgw"
)

// Fault is what a FakeGateway does with a request instead of answering it
// properly. Faults that "apply" perform the write first: the dangerous
// case for a client is a write that happened but whose acknowledgement was
// lost or unusable.
type Fault int

const (
	// FaultNone answers like the real gateway.
	FaultNone Fault = iota
	// FaultClose closes the connection right after the request frame
	// arrives, without an answer. A set is applied first.
	FaultClose
	// FaultError answers INVALID_REQUEST; nothing is applied.
	FaultError
	// FaultHang never answers and holds the connection until the client
	// gives up (slower than any deadline). Nothing is applied.
	FaultHang
	// FaultWrongName answers with another file's name. A set is applied.
	FaultWrongName
	// FaultMalformed answers with a text frame that is not JSON. A set is
	// applied.
	FaultMalformed
	// FaultBadHash answers with a hash of other bytes. A set is applied.
	FaultBadHash
	// FaultIgnoreClose answers properly, then stops reading, so the
	// client's close handshake is never completed.
	FaultIgnoreClose
	// FaultPayloadType answers ok with a payload whose file is a string,
	// not an object: JSON, but not a file answer. A set is applied.
	FaultPayloadType
)

// HandshakeFault breaks the handshake.
type HandshakeFault int

const (
	HandshakeOK HandshakeFault = iota
	// HandshakeClose closes the connection before connect.challenge.
	HandshakeClose
	// HandshakeHang sends no challenge and waits for the client to leave.
	HandshakeHang
)

// FakeOptions configures NewFakeGateway.
type FakeOptions struct {
	// Token is the gateway token a direct connect must present; empty
	// generates one. A connect without auth is accepted only when the
	// upgrade carried x-occ-identity (trusted-proxy style, via a Proxy).
	Token string
	// Scopes granted in hello-ok; nil grants admin, read and write.
	Scopes []string
	// Files is the initial workspace.
	Files map[string]string
	// OnRequest, if set, is called with the method of every request frame
	// after connect, when it arrives and before it is answered (from the
	// connection's goroutine).
	OnRequest func(method string)
	// ChallengeBytes and HelloBytes, when positive, pad the
	// connect.challenge event and the hello-ok answer to exactly that many
	// bytes (a string "pad" in their payload, which clients ignore as they
	// ignore the real ones' many other fields), for tests of a client's
	// read limit before hello-ok.
	ChallengeBytes, HelloBytes int
}

// PreConnectLimit is the largest frame the fake, like the real gateway,
// reads before it has answered connect with hello-ok ("pre-auth frames are
// capped at 64 KiB"); a larger one closes the connection with status 1009.
const PreConnectLimit = 64 << 10

// FakeGateway is a scripted in-process gateway that speaks protocol 4 over
// WebSocket (challenge, connect, hello-ok, agents.files.get/set with
// expectedHash, events interleaved with answers) and can be told to
// misbehave in the ways the real gateway cannot be made to: see Fault and
// HandshakeFault. It enforces scopes like the real one (set needs
// operator.admin, get operator.read) and counts the frames it receives, so
// a test can prove a client never sent, or never re-sent, a request.
type FakeGateway struct {
	// URL is ws://127.0.0.1:<port>/; HTTPURL the same as http://, for a
	// Proxy upstream.
	URL     string
	HTTPURL string
	Token   string

	srv       *httptest.Server
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	onRequest func(string)

	mu          sync.Mutex
	files       map[string]string
	faults      map[string]Fault
	hs          HandshakeFault
	scopes      []string
	frames      map[string]int
	conns       int
	padChal     int
	padHello    int
	lastConnect map[string]any
	lastHeader  http.Header
}

// NewFakeGateway starts a fake on 127.0.0.1, closed when the test ends.
func NewFakeGateway(t testing.TB, opts FakeOptions) *FakeGateway {
	t.Helper()
	g := &FakeGateway{
		Token:     opts.Token,
		files:     map[string]string{},
		faults:    map[string]Fault{},
		frames:    map[string]int{},
		scopes:    opts.Scopes,
		onRequest: opts.OnRequest,
		padChal:   opts.ChallengeBytes,
		padHello:  opts.HelloBytes,
	}
	if g.Token == "" {
		g.Token = randomHex(32)
	}
	if g.scopes == nil {
		g.scopes = []string{"operator.admin", "operator.read", "operator.write"}
	}
	for k, v := range opts.Files {
		g.files[k] = v
	}
	g.ctx, g.cancel = context.WithCancel(context.Background())
	g.srv = httptest.NewServer(http.HandlerFunc(g.serve))
	g.HTTPURL = g.srv.URL
	g.URL = "ws" + strings.TrimPrefix(g.srv.URL, "http") + "/"
	t.Cleanup(g.Close)
	return g
}

// Close stops the server and waits for every connection to end.
func (g *FakeGateway) Close() {
	g.cancel()
	g.srv.Close()
	g.wg.Wait()
}

// DirectTarget writes the token to a file and returns a direct Target.
func (g *FakeGateway) DirectTarget(t testing.TB) agentgw.Target {
	t.Helper()
	return agentgw.Target{Transport: agentgw.Direct, URL: g.URL, TokenFile: WriteFile(t, "gateway-token", []byte(g.Token))}
}

// SetFault sets the fault for a method ("agents.files.get",
// "agents.files.set") on all later requests.
func (g *FakeGateway) SetFault(method string, f Fault) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.faults[method] = f
}

// SetHandshakeFault breaks the handshake of later connections.
func (g *FakeGateway) SetHandshakeFault(f HandshakeFault) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.hs = f
}

// SetScopes sets the scopes granted to later connections.
func (g *FakeGateway) SetScopes(scopes ...string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.scopes = append([]string{}, scopes...)
}

// Frames counts the request frames received for method ("connect",
// "agents.files.set", ...).
func (g *FakeGateway) Frames(method string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.frames[method]
}

// Connections counts accepted upgrade requests.
func (g *FakeGateway) Connections() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.conns
}

// LastConnect is the params of the last connect frame.
func (g *FakeGateway) LastConnect() map[string]any {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lastConnect
}

// LastHeader is the header of the last upgrade request.
func (g *FakeGateway) LastHeader() http.Header {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.lastHeader.Clone()
}

// File returns a workspace file.
func (g *FakeGateway) File(name string) (string, bool) {
	g.mu.Lock()
	defer g.mu.Unlock()
	c, ok := g.files[name]
	return c, ok
}

// PutFile sets a workspace file directly.
func (g *FakeGateway) PutFile(name, content string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.files[name] = content
}

// nativeNames are the names agents.files.* accepts in openclaw 2026.9.6.
var nativeNames = []string{"AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md", "BOOTSTRAP.md", "MEMORY.md"}

type fakeReq struct {
	Type   string          `json:"type"`
	ID     string          `json:"id"`
	Method string          `json:"method"`
	Params json.RawMessage `json:"params"`
}

func (g *FakeGateway) serve(w http.ResponseWriter, r *http.Request) {
	g.wg.Add(1)
	defer g.wg.Done()
	g.mu.Lock()
	g.conns++
	g.lastHeader = r.Header.Clone()
	hs := g.hs
	g.mu.Unlock()

	c, err := websocket.Accept(w, r, &websocket.AcceptOptions{InsecureSkipVerify: true})
	if err != nil {
		return
	}
	defer c.CloseNow()
	c.SetReadLimit(PreConnectLimit)
	ctx := g.ctx

	switch hs {
	case HandshakeClose:
		return
	case HandshakeHang:
		for {
			if _, _, err := c.Read(ctx); err != nil {
				return
			}
		}
	}

	// Unrelated events first: clients must wait for the challenge
	// specifically, not for the first frame, whatever its payload.
	g.send(c, map[string]any{"type": "event", "event": "health", "payload": map[string]any{"ok": true}})
	g.send(c, map[string]any{"type": "event", "event": "presence", "payload": []any{map[string]any{"host": "gwtest"}}})
	g.sendPadded(c, map[string]any{"type": "event", "event": "connect.challenge",
		"payload": map[string]any{"nonce": randomHex(16), "ts": time.Now().UnixMilli()}}, g.padChal)

	req, ok := g.read(ctx, c)
	if !ok {
		return
	}
	g.count(req.Method)
	if req.Type != "req" || req.Method != "connect" {
		g.answerErr(c, req.ID, "INVALID_REQUEST", "invalid handshake: first request must be connect", nil)
		_ = c.Close(websocket.StatusPolicyViolation, "invalid handshake")
		return
	}
	var params map[string]any
	_ = json.Unmarshal(req.Params, &params)
	g.mu.Lock()
	g.lastConnect = params
	scopes := append([]string{}, g.scopes...)
	g.mu.Unlock()

	token := ""
	if auth, ok := params["auth"].(map[string]any); ok {
		token, _ = auth["token"].(string)
	}
	switch {
	case token != "" && token != g.Token:
		g.answerErr(c, req.ID, "INVALID_REQUEST", "unauthorized: gateway token mismatch",
			map[string]any{"code": "AUTH_TOKEN_MISMATCH"})
		_ = c.Close(websocket.StatusPolicyViolation, "unauthorized")
		return
	case token == "" && r.Header.Get(IdentityHeader) == "":
		g.answerErr(c, req.ID, "NOT_PAIRED", "device identity required",
			map[string]any{"code": "DEVICE_IDENTITY_REQUIRED"})
		_ = c.Close(websocket.StatusPolicyViolation, "not paired")
		return
	}
	g.sendPadded(c, map[string]any{"type": "res", "id": req.ID, "ok": true, "payload": map[string]any{
		"type": "hello-ok", "protocol": 4,
		"server": map[string]any{"version": "gwtest-fake"},
		"auth":   map[string]any{"method": "token", "role": "operator", "scopes": scopes},
		"policy": map[string]any{"maxPayload": 26214400, "maxBufferedBytes": 52428800, "tickIntervalMs": 30000},
	}}, g.padHello)
	c.SetReadLimit(32 << 20)

	for {
		req, ok := g.read(ctx, c)
		if !ok {
			return
		}
		g.count(req.Method)
		if g.onRequest != nil {
			g.onRequest(req.Method)
		}
		g.mu.Lock()
		fault := g.faults[req.Method]
		g.mu.Unlock()
		// Events interleave with answers on the real gateway; the second
		// one's payload is no object, so it fits no answer's shape.
		g.send(c, map[string]any{"type": "event", "event": "tick", "payload": map[string]any{"ts": time.Now().UnixMilli()}})
		g.send(c, map[string]any{"type": "event", "event": "presence", "payload": []any{map[string]any{"host": "gwtest"}}})
		if !g.handle(c, req, scopes, fault) {
			return
		}
	}
}

// handle answers one request; false ends the connection.
func (g *FakeGateway) handle(c *websocket.Conn, req fakeReq, scopes []string, fault Fault) bool {
	var p struct {
		AgentID      string  `json:"agentId"`
		Name         string  `json:"name"`
		Content      *string `json:"content"`
		ExpectedHash string  `json:"expectedHash"`
	}
	_ = json.Unmarshal(req.Params, &p)
	need := ""
	switch req.Method {
	case "agents.files.get":
		need = "operator.read"
	case "agents.files.set":
		need = "operator.admin"
	default:
		g.answerErr(c, req.ID, "INVALID_REQUEST", "unknown method: "+req.Method, nil)
		return true
	}
	if !slices.Contains(scopes, "operator.admin") && !slices.Contains(scopes, need) {
		g.answerErr(c, req.ID, "FORBIDDEN", "missing scope: "+need,
			map[string]any{"code": "MISSING_SCOPE", "missingScope": need})
		return true
	}
	switch fault {
	case FaultError:
		g.answerErr(c, req.ID, "INVALID_REQUEST", "scripted failure", map[string]any{"code": "GWTEST_FAULT"})
		return true
	case FaultHang:
		return true // keep reading; the client leaves when its deadline passes
	}
	if p.AgentID != "main" {
		g.answerErr(c, req.ID, "INVALID_REQUEST", "agent not found", nil)
		return true
	}
	if !slices.Contains(nativeNames, p.Name) {
		g.answerErr(c, req.ID, "INVALID_REQUEST", "unsupported file", nil)
		return true
	}

	file := map[string]any{"name": p.Name, "path": "/fake/ws/" + p.Name}
	if req.Method == "agents.files.set" {
		if p.Content == nil {
			g.answerErr(c, req.ID, "INVALID_REQUEST", "invalid agents.files.set params", nil)
			return true
		}
		g.mu.Lock()
		cur, exists := g.files[p.Name]
		if p.ExpectedHash != "" && (!exists || !strings.EqualFold(hashOf(cur), p.ExpectedHash)) {
			g.mu.Unlock()
			d := map[string]any{"type": "agent_file_conflict", "name": p.Name}
			if exists {
				d["currentHash"] = hashOf(cur)
			}
			g.answerErr(c, req.ID, "INVALID_REQUEST", "agent file changed since it was read", d)
			return true
		}
		g.files[p.Name] = *p.Content
		g.mu.Unlock()
		file["missing"] = false
		file["size"] = len(*p.Content)
		file["hash"] = hashOf(*p.Content)
		file["content"] = *p.Content
	} else {
		g.mu.Lock()
		cur, exists := g.files[p.Name]
		g.mu.Unlock()
		if exists {
			file["missing"] = false
			file["size"] = len(cur)
			file["hash"] = hashOf(cur)
			file["content"] = cur
		} else {
			file["missing"] = true
		}
	}
	switch fault {
	case FaultClose:
		_ = c.CloseNow()
		return false
	case FaultMalformed:
		_ = c.Write(g.ctx, websocket.MessageText, []byte("not json {"))
		return true
	case FaultWrongName:
		if p.Name == "SOUL.md" {
			file["name"] = "USER.md"
		} else {
			file["name"] = "SOUL.md"
		}
	case FaultBadHash:
		if c, ok := file["content"].(string); ok {
			file["hash"] = hashOf(c + "x")
		}
	case FaultPayloadType:
		g.send(c, map[string]any{"type": "res", "id": req.ID, "ok": true, "payload": map[string]any{"file": p.Name}})
		return true
	}
	payload := map[string]any{"agentId": "main", "workspace": "/fake/ws", "file": file}
	if req.Method == "agents.files.set" {
		payload["ok"] = true
	}
	g.send(c, map[string]any{"type": "res", "id": req.ID, "ok": true, "payload": payload})
	if fault == FaultIgnoreClose {
		<-g.ctx.Done()
		return false
	}
	return true
}

func (g *FakeGateway) read(ctx context.Context, c *websocket.Conn) (fakeReq, bool) {
	_, data, err := c.Read(ctx)
	if err != nil {
		return fakeReq{}, false
	}
	var req fakeReq
	if err := json.Unmarshal(data, &req); err != nil {
		return fakeReq{Type: "invalid"}, true
	}
	return req, true
}

func (g *FakeGateway) count(method string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.frames[method]++
}

func (g *FakeGateway) send(c *websocket.Conn, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		panic(err) // test support: only maps of plain values are sent
	}
	ctx, cancel := context.WithTimeout(g.ctx, 5*time.Second)
	defer cancel()
	_ = c.Write(ctx, websocket.MessageText, data)
}

// sendPadded sends v, a frame with an object payload, with payload.pad
// making it exactly n bytes; n <= 0 sends it as it is.
func (g *FakeGateway) sendPadded(c *websocket.Conn, v map[string]any, n int) {
	if n > 0 {
		p := v["payload"].(map[string]any)
		p["pad"] = ""
		data, err := json.Marshal(v)
		if err != nil || len(data) > n {
			panic(fmt.Sprintf("gwtest: a frame of %d bytes cannot be padded to %d (%v)", len(data), n, err))
		}
		p["pad"] = strings.Repeat("x", n-len(data))
	}
	g.send(c, v)
}

func (g *FakeGateway) answerErr(c *websocket.Conn, id, code, msg string, details map[string]any) {
	e := map[string]any{"code": code, "message": msg}
	if details != nil {
		e["details"] = details
	}
	g.send(c, map[string]any{"type": "res", "id": id, "ok": false, "error": e})
}

func hashOf(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}
