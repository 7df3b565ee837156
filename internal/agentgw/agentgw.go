// Package agentgw is OCC's client for the native OpenClaw gateway protocol
// (WebSocket protocol 4, as served by openclaw 2026.9.6): one connection per
// operation (or, optionally, one pooled connection per gateway that is
// dropped when the credential or CA read for an operation differs from
// what it was opened with: pool.go), the connect.challenge / connect /
// hello-ok handshake as a
// device-less backend ("gateway-client"/"backend"), a scope check on the
// hello, and agents.files.get / agents.files.set for the native agent
// "main".
//
// Two transports reach a gateway. Direct: ws://127.0.0.1:<port>/ with the
// Agent's gateway token read from a 0600 file for each operation (local,
// Docker, SSH through a tunnel); loopback only. Routed: wss:// through the
// private Envoy Gateway route, authenticated only by the installation's
// service key in x-api-key, read and re-validated from its file for each
// operation, with TLS verified against system roots plus an optional CA
// bundle; the gateway runs in trusted-proxy mode.
//
// Failure semantics, the contract every caller relies on:
//   - Get: a missing file is a result (File.Missing), not an error. Any other
//     failure is Unavailable.
//   - Set: an error answered by the gateway means the write was definitely
//     not applied (Unavailable, or Conflict for a failed expectedHash). Any
//     failure after the set frame was handed to the connection — a dropped
//     connection, a deadline, an unreadable or mismatched answer — is
//     OutcomeUnknown: the write may have been applied. The client never
//     retries a set.
package agentgw

import (
	"context"
	"errors"
	"fmt"

	"github.com/openclaw/occ/internal/compute"
)

// Transport selects how a Target is reached.
type Transport string

const (
	Direct Transport = "direct"
	Routed Transport = "routed"
)

// Target is one gateway to talk to. It comes from the Compute driver's
// endpoint, never from a caller's request.
type Target struct {
	Transport Transport
	// URL is ws://127.0.0.1:<port>/ (Direct, loopback only) or
	// wss://host[:port]/namespaces/<ns>/agents/<agent> (Routed).
	URL string
	// TokenFile (Direct) holds the Agent's gateway token.
	TokenFile string
	// Tunnel (Direct, optional) reaches a gateway on a remote host's
	// loopback: the connection is dialed and the token read through it,
	// and TokenFile is not used (compute.Endpoint.Tunnel).
	Tunnel compute.Tunnel
	// KeyFile (Routed) holds the installation's service key; CAFile
	// optionally adds trusted CA certificates (PEM) to the system roots.
	KeyFile string
	CAFile  string
}

// File is a workspace file as the gateway reports it.
type File struct {
	Name    string
	Content string
	// Hash is the lowercase hex SHA-256 of the content bytes.
	Hash    string
	Size    int64
	Missing bool
}

// Kind classifies a failure.
type Kind int

const (
	// Unavailable: the operation did not happen (or, for a read, gave no
	// usable answer). Safe to retry.
	Unavailable Kind = iota + 1
	// OutcomeUnknown: a set may or may not have been applied. Never retry
	// blindly; read and compare hashes first.
	OutcomeUnknown
	// Conflict: a set with an expected hash was refused because the file
	// changed; CurrentHash is the file's hash now (empty when missing).
	Conflict
)

// Error is the only error type the client returns. Reason is a short,
// content-free code for logs and audit (for example "dial", "handshake",
// "scope", "deadline", "answered_error", "connection_lost_after_send").
type Error struct {
	Kind        Kind
	Reason      string
	CurrentHash string
	Err         error
}

func (e *Error) Error() string {
	kinds := map[Kind]string{Unavailable: "unavailable", OutcomeUnknown: "outcome unknown", Conflict: "conflict"}
	if e.Err != nil {
		return fmt.Sprintf("agentgw: %s (%s): %v", kinds[e.Kind], e.Reason, e.Err)
	}
	return fmt.Sprintf("agentgw: %s (%s)", kinds[e.Kind], e.Reason)
}

func (e *Error) Unwrap() error { return e.Err }

// KindOf returns the kind of an error from this package, 0 otherwise.
func KindOf(err error) Kind {
	var e *Error
	if errors.As(err, &e) {
		return e.Kind
	}
	return 0
}

// FileClient is what OCC's workspace-file operations need from a gateway
// client; tests substitute fakes.
type FileClient interface {
	Get(ctx context.Context, t Target, name string) (File, error)
	// SetAdmitted writes content. expectedHash, when non-empty, is sent as
	// the native expectedHash (compare-and-swap). admit, when non-nil, is
	// the write's admission (OCC's write-ahead audit record): it is called
	// exactly once, concurrently with opening the connection, and has
	// returned before SetAdmitted returns; the set frame is sent only after
	// it returned nil. An admit error ends the write with nothing sent
	// (Unavailable, reason "not_admitted", wrapping that error).
	SetAdmitted(ctx context.Context, t Target, name, content, expectedHash string, admit Admit) (File, error)
}

// Admit is a write's admission, run by SetAdmitted alongside the dial and
// handshake (see FileClient). Its context is the operation's.
type Admit func(ctx context.Context) error
