package agentgw

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
)

// Wire constants of the native protocol as served by openclaw 2026.9.6.
const (
	// ProtocolVersion is the only protocol the client speaks (min = max).
	ProtocolVersion = 4
	// NativeAgentID is the native agent every OCC Agent's gateway serves.
	NativeAgentID = "main"

	methodConnect = "connect"
	methodGet     = "agents.files.get"
	methodSet     = "agents.files.set"

	eventChallenge = "connect.challenge"

	// Request ids are per connection. A connection of its own carries
	// exactly one connect and one file request (these two ids); a pooled
	// connection numbers its file requests r1, r2, ... (pool.go).
	connectID = "1"
	requestID = "2"

	// clientID/clientMode are the device-less backend identity: client.id
	// is a closed set on the gateway, and gateway-client/backend is the
	// only device-less id whose requested scopes survive token auth on a
	// loopback connection (openclaw-gateway.md 4.1).
	clientID       = "gateway-client"
	clientMode     = "backend"
	clientPlatform = "linux"
	role           = "operator"

	scopeAdmin = "operator.admin"
	scopeRead  = "operator.read"
	scopeWrite = "operator.write"

	conflictType = "agent_file_conflict"
)

// reqFrame is a request frame. Frames are closed objects on the gateway:
// no field may be added.
type reqFrame struct {
	Type   string `json:"type"`
	ID     string `json:"id"`
	Method string `json:"method"`
	Params any    `json:"params"`
}

type connectParams struct {
	MinProtocol int          `json:"minProtocol"`
	MaxProtocol int          `json:"maxProtocol"`
	Client      clientInfo   `json:"client"`
	Role        string       `json:"role"`
	Scopes      []string     `json:"scopes"`
	Caps        []string     `json:"caps"`
	Auth        *connectAuth `json:"auth,omitempty"`
}

type clientInfo struct {
	ID       string `json:"id"`
	Version  string `json:"version"`
	Platform string `json:"platform"`
	Mode     string `json:"mode"`
}

type connectAuth struct {
	Token string `json:"token"`
}

type getParams struct {
	AgentID string `json:"agentId"`
	Name    string `json:"name"`
}

type setParams struct {
	AgentID      string `json:"agentId"`
	Name         string `json:"name"`
	Content      string `json:"content"`
	ExpectedHash string `json:"expectedHash,omitempty"`
}

// frame is a server frame whose payload decodes as P in the same pass as
// the envelope: P is the payload of the answer being awaited (a hello-ok of
// about 16.5 KB, a file answer), so it is scanned once instead of being
// kept raw and decoded again. Only the fields the client reads are decoded.
// Frames that are not the awaited answer (events, such as ticks and
// health) may carry a payload of another shape; decodeFrame keeps their
// envelope and marks the payload, and await skips them.
type frame[P any] struct {
	Type    string     `json:"type"`
	ID      string     `json:"id"`
	Event   string     `json:"event"`
	OK      bool       `json:"ok"`
	Payload P          `json:"payload"`
	Error   *wireError `json:"error"`
	// badPayload: the payload is not a P (a JSON type mismatch under
	// "payload"); Payload is then the zero P.
	badPayload bool
}

// decodeFrame decodes one server frame. A frame that is not JSON, or whose
// envelope or error has the wrong types, is errMalformed; a payload that
// does not fit P only sets badPayload.
func decodeFrame[P any](data []byte) (frame[P], error) {
	var f frame[P]
	err := json.Unmarshal(data, &f)
	var te *json.UnmarshalTypeError
	switch {
	case err == nil:
	case errors.As(err, &te) && (te.Field == "payload" || strings.HasPrefix(te.Field, "payload.")):
		// encoding/json reports only the first mismatch (and decodes the
		// rest as best it can), so the envelope is checked again with the
		// payload kept raw: rare (an event of another shape), and strict.
		var env frame[json.RawMessage]
		if json.Unmarshal(data, &env) != nil {
			return frame[P]{}, errMalformed
		}
		f = frame[P]{Type: env.Type, ID: env.ID, Event: env.Event, OK: env.OK, Error: env.Error, badPayload: true}
	default:
		return frame[P]{}, errMalformed
	}
	return f, nil
}

type wireError struct {
	Code      string           `json:"code"`
	Message   string           `json:"message"`
	Details   wireErrorDetails `json:"details"`
	Retryable bool             `json:"retryable"`
}

type wireErrorDetails struct {
	Code         string `json:"code"`
	Type         string `json:"type"`
	Reason       string `json:"reason"`
	MissingScope string `json:"missingScope"`
	CurrentHash  string `json:"currentHash"`
}

type helloOK struct {
	Type     string     `json:"type"`
	Protocol int        `json:"protocol"`
	Auth     *helloAuth `json:"auth"`
}

type helloAuth struct {
	Role   string   `json:"role"`
	Scopes []string `json:"scopes"`
}

// filePayload is the success payload of agents.files.get and .set.
type filePayload struct {
	OK      *bool      `json:"ok"` // set only
	Missing bool       `json:"missing"`
	File    *fileEntry `json:"file"`
}

type fileEntry struct {
	Name    string  `json:"name"`
	Missing bool    `json:"missing"`
	Hash    string  `json:"hash"`
	Content *string `json:"content"`
}

// GatewayError is an error the gateway answered, reduced to its
// machine-readable codes. It deliberately drops the human message: messages
// are free text, and an answered error never carries the gateway's text into
// an error or a log line. (A transport failure's error can still hold the
// WebSocket library's text, a close reason included.)
type GatewayError struct {
	Code         string // INVALID_REQUEST, FORBIDDEN, NOT_PAIRED, UNAVAILABLE, ...
	DetailCode   string // details.code, e.g. AUTH_TOKEN_MISMATCH, MISSING_SCOPE
	DetailType   string // details.type, e.g. agent_file_conflict
	DetailReason string // details.reason, e.g. startup-sidecars
	MissingScope string // details.missingScope
	Retryable    bool
}

func (e *GatewayError) Error() string {
	var b strings.Builder
	b.WriteString("gateway answered ")
	b.WriteString(codeOrUnknown(e.Code))
	for _, s := range []string{e.DetailCode, e.DetailType, e.DetailReason, e.MissingScope} {
		if s != "" {
			b.WriteString(" ")
			b.WriteString(s)
		}
	}
	if e.Retryable {
		b.WriteString(" (retryable)")
	}
	return b.String()
}

func codeOrUnknown(s string) string {
	if s == "" {
		return "an error without a code"
	}
	return s
}

func (w *wireError) gatewayError() *GatewayError {
	return &GatewayError{
		Code:         token(w.Code),
		DetailCode:   token(w.Details.Code),
		DetailType:   token(w.Details.Type),
		DetailReason: token(w.Details.Reason),
		MissingScope: token(w.Details.MissingScope),
		Retryable:    w.Retryable,
	}
}

// token keeps a code only if it looks like one (short, [A-Za-z0-9._:-]):
// codes are enums, and anything else is not something to repeat.
func token(s string) string {
	if len(s) > 64 {
		return "(invalid)"
	}
	for i := 0; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '.' || c == '_' || c == '-' || c == ':') {
			return "(invalid)"
		}
	}
	return s
}

// encodeFrame marshals a request frame without HTML escaping (the gateway
// reads JSON, not HTML; escaping only grows frames with <, > or & in them).
func encodeFrame(f reqFrame) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(f); err != nil {
		return nil, fmt.Errorf("encode %s frame: %w", f.Method, err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}
