package gwtest

import (
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"strconv"

	"github.com/coder/websocket"
)

// Native is a bare protocol-4 connection for tests: it does what the real
// client does on the wire and nothing else (no validation, no scope check,
// no outcome mapping), so tests can send what the real client never would,
// such as a spoofed identity header, and benchmarks have a floor to compare
// the client with.
type Native struct {
	conn *websocket.Conn
	next int
	// Hello is the answer to connect.
	Hello Response
}

// NativeOptions configures DialNative.
type NativeOptions struct {
	// Header is sent with the upgrade request (x-api-key, identity headers).
	Header http.Header
	// TLS is used for wss:// URLs.
	TLS *tls.Config
	// Token, when set, is sent as connect.params.auth.token.
	Token string
	// Scopes requested; nil requests admin, read and write.
	Scopes []string
	// Dial, when set, opens the connection instead of dialing the URL's
	// address (a gateway reached through an SSH channel).
	Dial func(ctx context.Context, network, addr string) (net.Conn, error)
}

// Response is an answer frame.
type Response struct {
	OK      bool            `json:"ok"`
	Payload json.RawMessage `json:"payload"`
	Error   *ResponseError  `json:"error"`
}

// ResponseError is an answered error, verbatim.
type ResponseError struct {
	Code    string         `json:"code"`
	Message string         `json:"message"`
	Details map[string]any `json:"details"`
}

func (e *ResponseError) Error() string { return e.Code + ": " + e.Message }

// Scopes returns hello-ok.auth.scopes (nil if the connect failed).
func (r Response) Scopes() []string {
	var h struct {
		Auth struct {
			Scopes []string `json:"scopes"`
		} `json:"auth"`
	}
	_ = json.Unmarshal(r.Payload, &h)
	return h.Auth.Scopes
}

// DialNative connects, waits for connect.challenge and sends connect. A
// refused connect is not an error: it is returned in Hello (OK false), and
// the connection is already closed by the gateway.
func DialNative(ctx context.Context, url string, o NativeOptions) (*Native, error) {
	hc := &http.Client{Transport: &http.Transport{Proxy: nil, TLSClientConfig: o.TLS, DialContext: o.Dial}}
	c, resp, err := websocket.Dial(ctx, url, &websocket.DialOptions{HTTPClient: hc, HTTPHeader: o.Header})
	if err != nil {
		if resp != nil {
			return nil, &UpgradeError{Status: resp.StatusCode}
		}
		return nil, err
	}
	c.SetReadLimit(64 << 20)
	n := &Native{conn: c, next: 1}
	for {
		f, err := n.read(ctx)
		if err != nil {
			n.Close()
			return nil, fmt.Errorf("wait for connect.challenge: %w", err)
		}
		if f.Type == "event" && f.Event == "connect.challenge" {
			break
		}
	}
	scopes := o.Scopes
	if scopes == nil {
		scopes = []string{"operator.admin", "operator.read", "operator.write"}
	}
	params := map[string]any{
		"minProtocol": 4, "maxProtocol": 4,
		"client": map[string]any{"id": "gateway-client", "version": "gwtest", "platform": "linux", "mode": "backend"},
		"role":   "operator", "scopes": scopes, "caps": []string{},
	}
	if o.Token != "" {
		params["auth"] = map[string]any{"token": o.Token}
	}
	hello, err := n.Call(ctx, "connect", params)
	if err != nil {
		n.Close()
		return nil, err
	}
	n.Hello = hello
	return n, nil
}

// UpgradeError is a refused WebSocket upgrade.
type UpgradeError struct{ Status int }

func (e *UpgradeError) Error() string { return "upgrade refused with HTTP " + strconv.Itoa(e.Status) }

type frame struct {
	Type  string `json:"type"`
	ID    string `json:"id"`
	Event string `json:"event"`
	Response
}

// Call sends one request and waits for its answer, skipping events.
func (n *Native) Call(ctx context.Context, method string, params any) (Response, error) {
	id := strconv.Itoa(n.next)
	n.next++
	data, err := json.Marshal(map[string]any{"type": "req", "id": id, "method": method, "params": params})
	if err != nil {
		return Response{}, err
	}
	if err := n.conn.Write(ctx, websocket.MessageText, data); err != nil {
		return Response{}, err
	}
	for {
		f, err := n.read(ctx)
		if err != nil {
			return Response{}, err
		}
		if f.Type == "res" && f.ID == id {
			return f.Response, nil
		}
	}
}

// GetFile calls agents.files.get for agent main and returns the file
// object of the payload.
func (n *Native) GetFile(ctx context.Context, name string) (NativeFile, error) {
	r, err := n.Call(ctx, "agents.files.get", map[string]any{"agentId": "main", "name": name})
	return fileOf(r, err)
}

// SetFile calls agents.files.set for agent main.
func (n *Native) SetFile(ctx context.Context, name, content string) (NativeFile, error) {
	r, err := n.Call(ctx, "agents.files.set", map[string]any{"agentId": "main", "name": name, "content": content})
	return fileOf(r, err)
}

// NativeFile is the file object of a get or set answer.
type NativeFile struct {
	Name    string `json:"name"`
	Missing bool   `json:"missing"`
	Size    int64  `json:"size"`
	Hash    string `json:"hash"`
	Content string `json:"content"`
}

func fileOf(r Response, err error) (NativeFile, error) {
	if err != nil {
		return NativeFile{}, err
	}
	if !r.OK {
		if r.Error == nil {
			return NativeFile{}, errors.New("answer without payload or error")
		}
		return NativeFile{}, r.Error
	}
	var p struct {
		File NativeFile `json:"file"`
	}
	if err := json.Unmarshal(r.Payload, &p); err != nil {
		return NativeFile{}, err
	}
	return p.File, nil
}

func (n *Native) read(ctx context.Context) (frame, error) {
	_, data, err := n.conn.Read(ctx)
	if err != nil {
		return frame{}, err
	}
	var f frame
	if err := json.Unmarshal(data, &f); err != nil {
		return frame{}, err
	}
	return f, nil
}

// Close closes the connection without a close handshake.
func (n *Native) Close() { _ = n.conn.CloseNow() }
