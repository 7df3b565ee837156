// Package compute owns the Compute driver contract: the small set of verbs
// the deployment worker uses to run an Agent's revisions on a backend (a
// local process, Docker, SSH hosts, Kubernetes), the capabilities a driver
// declares, and how drivers report failures. Drivers live in sub-packages
// and never import the store; the worker translates store records into the
// plain values below.
//
// Every method must be idempotent: the worker may call it again after a
// crash, a lost lease or a timeout, with the same arguments. Every method
// takes a context with a deadline and must give up when it ends.
package compute

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"syscall"

	"github.com/openclaw/occ/internal/workspace"
)

// Capabilities are what a driver can do beyond the required verbs.
type Capabilities struct {
	// WorkspaceSetup: the driver delivers initial workspace files to the
	// Agent's durable workspace before the runtime first starts, and
	// verifies the completion marker on every later start. A deployment of
	// an Agent with a setup record on a driver without it fails with
	// WORKSPACE_SETUP_UNSUPPORTED before PrepareRevision is called.
	WorkspaceSetup bool
	// LiveFiles: Endpoint returns a way to reach the running native
	// gateway, so OCC can read and write workspace files.
	LiveFiles bool
}

// Namespace is the part of a Namespace a driver sees.
type Namespace struct {
	ID   string
	Name string
}

// Agent is the part of an Agent a driver sees.
type Agent struct {
	ID          string
	NamespaceID string
	Name        string
}

// Revision is the immutable snapshot a driver runs.
type Revision struct {
	ID                      string
	NamespaceID             string
	AgentID                 string
	AgentName               string
	Number                  int64
	ConfigurationID         string
	ConfigurationGeneration int64
	// Configuration is the native OpenClaw JSON document. Drivers render
	// their runtime configuration from it and must not mutate it.
	Configuration json.RawMessage
}

// WorkspaceSetup is the setup delivered with a revision: workspace.Setup,
// the one type drivers deliver and the setup runner applies. While pending
// it carries Files; once completed only its identity (ID, NamespaceID,
// AgentID, DefaultsID) remains and drivers only verify the durable marker.
type WorkspaceSetup = workspace.Setup

// RevisionContext is what comes with a revision besides the snapshot.
type RevisionContext struct {
	// WorkspaceSetup is nil when the Agent has no setup record.
	WorkspaceSetup *WorkspaceSetup
}

// PrepareResult says whether a prepared revision is ready to activate.
type PrepareResult struct {
	Ready bool
	// PendingReason is a code when not ready, for example
	// AGENT_GATEWAY_UNAVAILABLE; Message says more, without secrets.
	PendingReason string
	Message       string
}

// Transport says how OCC reaches a running native gateway.
type Transport string

const (
	// Direct: a loopback WebSocket authenticated with the Agent's gateway
	// token (local, Docker with host networking, SSH through a tunnel).
	Direct Transport = "direct"
	// Routed: wss:// through the private Envoy Gateway route,
	// authenticated with the installation's service key.
	Routed Transport = "routed"
)

// Endpoint is how to reach a revision's native gateway. It proves nothing
// about readiness.
type Endpoint struct {
	URL       string
	Transport Transport
	// TokenFile is, for Direct, the 0600 file holding the gateway token;
	// it is read for each operation and never copied elsewhere.
	TokenFile string
	// Tunnel, for Direct, is set by a driver whose gateway listens on the
	// loopback of another host (SSH): the client then reaches URL's
	// address through it and reads the token through it, instead of
	// dialing here and reading TokenFile here. Nil for every other driver.
	Tunnel Tunnel
}

// Tunnel reaches a Direct gateway that listens on a remote host's
// loopback. URL still names that loopback address (as the gateway sees
// it); only the way to it differs. Both methods are called once per
// operation, honour ctx's deadline, and say nothing of the token in their
// errors. An implementation should be a comparable value that is equal
// for the same gateway across Endpoint calls: a gateway client that pools
// connections uses it to recognize the gateway (one that is not comparable
// is never pooled).
type Tunnel interface {
	// DialGateway opens a stream to the gateway's loopback port on the
	// remote host (an SSH direct-tcpip channel, for example).
	DialGateway(ctx context.Context) (net.Conn, error)
	// ReadToken reads the gateway token from its 0600 file on the remote
	// host, for this operation only.
	ReadToken(ctx context.Context) ([]byte, error)
}

// Driver runs revisions on one backend. It is safe for concurrent use:
// the worker's loops call it for different Agents at once (and the API
// calls Endpoint meanwhile), while one Agent's verbs arrive one at a time
// (the queue serializes them). The conformance case Concurrency/TwoAgents
// checks that one Agent's calls leave the Agent next to it alone.
type Driver interface {
	// ID names the driver instance (its registry name); it is recorded
	// in each revision.
	ID() string
	Capabilities() Capabilities

	// EnsureNamespace makes the backend ready to host the Namespace's
	// Agents. DeleteNamespace removes what EnsureNamespace made; it is only
	// called for an empty Namespace. Absence is success.
	EnsureNamespace(ctx context.Context, ns Namespace) error
	DeleteNamespace(ctx context.Context, ns Namespace) error

	// PrepareRevision brings the revision's runtime up without making it
	// the Agent's serving revision: storage, workspace setup (when rc has
	// one), configuration, process. Ready=false means "call again later".
	PrepareRevision(ctx context.Context, rev Revision, rc RevisionContext) (PrepareResult, error)
	// ActivateRevision makes a prepared revision the one that serves (for
	// example moves the route to it). It must not disturb a newer
	// revision's resources. The worker calls it only after PrepareRevision
	// answered Ready for the same revision and context, and records the
	// activation (completing a pending setup and clearing the files from
	// the database) only after it returned nil. So, with a pending setup in
	// rc, it must leave no copy of the files anywhere the driver keeps
	// them outside the durable workspace (a delivery Secret, a payload
	// file), whatever the runtime's state at that moment, and a later
	// PrepareRevision with the same setup still pending (a retry after a
	// crash) must not deliver them again.
	ActivateRevision(ctx context.Context, rev Revision, rc RevisionContext) error
	// StopRevision stops execution and inbound routing, keeping durable
	// state. RetireRevision also cleans up everything owned only by this
	// revision. Neither may remove what a newer revision owns.
	StopRevision(ctx context.Context, rev Revision) error
	RetireRevision(ctx context.Context, rev Revision) error
	// DeleteAgent removes the Agent's runtime storage and credentials. It
	// is called after every revision was retired. Absence is success.
	DeleteAgent(ctx context.Context, a Agent) error

	// Endpoint returns how to reach the revision's gateway, or an error
	// wrapping ErrNoEndpoint when the driver cannot serve live files.
	Endpoint(ctx context.Context, rev Revision) (Endpoint, error)
}

// Optional lifecycle hooks. Only some drivers need them (the local driver
// keeps gateway processes that outlive occ; the Kubernetes driver keeps
// nothing in process), so they are not part of Driver: the server
// discovers them with a type assertion on the driver the registry opened,
// and never names a concrete driver type.

// Recoverer is a driver that must re-attach to what an earlier occ process
// left running before it serves: the server calls Recover once, after
// opening the driver and before the worker starts. An error stops the
// start (the server then closes the driver if it is a Closer).
type Recoverer interface {
	Recover(ctx context.Context) error
}

// Shutdowner is a driver that stops what it runs when occ stops
// gracefully, and releases itself (Close included). The server calls
// Shutdown once, with a deadline, when it stops; the error is logged.
type Shutdowner interface {
	Shutdown(ctx context.Context) error
}

// Closer is a driver that holds in-process resources (supervisors,
// goroutines) to release when occ stops, without stopping the Agents'
// runtimes. The server calls Close when the driver is not a Shutdowner,
// or when the start fails after opening it. Unlike io.Closer, Close
// reports nothing: there is nothing the caller could do about a failure.
type Closer interface {
	Close()
}

// ReadyNotifier is a driver that notices the moment an Agent's runtime may
// have become ready: the local driver's supervisor, when its gateway
// answers its first probe. The worker registers its callback once, when it
// is created (a later registration replaces it), and rechecks that Agent's
// pending work at once instead of at its readiness backoff (500 ms growing
// to 5 s). A notice is a hint: notify never blocks and may be called from
// any goroutine, and a missed or needless notice costs one backoff's wait
// or one extra PrepareRevision, nothing else.
type ReadyNotifier interface {
	NotifyReady(notify func(namespaceID, agentID string))
}

// NamespaceReconciler is a driver that can bring an existing, ready
// Namespace's backend objects in line with the current installation
// configuration (for example the route-attachment label and the gateway
// ingress policy after routing was turned on), which EnsureNamespace, run
// once while the Namespace is provisioning, does not. The worker discovers
// it with a type assertion; a driver without it gets EnsureNamespace again.
//
// ReconcileNamespace must check that what it changes is OCC's, refuse with
// a PermanentError whose Public message names the object when it is not or
// when something in the Namespace would defeat the change, write only on
// the state it read (a concurrent change is a retryable error, never
// overwritten) and never move an Agent's runtime or storage.
// PlanNamespace makes the same checks and answers what ReconcileNamespace
// would change, changing nothing.
type NamespaceReconciler interface {
	PlanNamespace(ctx context.Context, ns Namespace) (NamespacePlan, error)
	ReconcileNamespace(ctx context.Context, ns Namespace) (NamespacePlan, error)
}

// NamespacePlan lists the backend objects of a Namespace that a
// reconciliation looks at, and what it does (or would do) to each.
type NamespacePlan struct {
	Changes []ObjectChange
}

// Changed reports whether the plan changes anything.
func (p NamespacePlan) Changed() bool {
	for _, c := range p.Changes {
		if c.Action != ActionUnchanged {
			return true
		}
	}
	return false
}

// Object change actions.
const (
	ActionCreate    = "create"
	ActionUpdate    = "update"
	ActionUnchanged = "unchanged"
)

// ObjectChange is one backend object of a NamespacePlan. Live is the object
// as read (nil when absent), Desired what the driver applies; both are the
// backend's own JSON and hold no secrets (drivers list only objects without
// any).
type ObjectChange struct {
	Kind            string
	Namespace       string
	Name            string
	ResourceVersion string
	Action          string
	// Fields are the changed fields, as dotted paths, for a person to read.
	Fields  []string
	Live    json.RawMessage
	Desired json.RawMessage
}

// ErrNoEndpoint says a driver does not expose its gateways.
var ErrNoEndpoint = errors.New("compute: driver exposes no gateway endpoint")

// Failure codes a driver may return with Permanent; the worker records them
// as the deployment's error code.
const (
	CodeWorkspaceSetupUnsupported = "WORKSPACE_SETUP_UNSUPPORTED"
	CodeWorkspaceSetupFailed      = "WORKSPACE_SETUP_FAILED"
	CodeConfigurationInvalid      = "CONFIGURATION_INVALID"
	CodeRuntimeFailed             = "RUNTIME_FAILED"
	// Refusals of ReconcileNamespace.
	CodeNamespaceNotOwned      = "NAMESPACE_NOT_OWNED"
	CodeGatewaySelectorChanged = "GATEWAY_SELECTOR_CHANGED"
	CodePermissivePolicy       = "PERMISSIVE_NETWORK_POLICY"
)

// PermanentError is a failure that retrying cannot fix. The worker stops
// retrying and fails the work with Code.
type PermanentError struct {
	Code string
	Err  error
	// Public, when set, is a message the driver vouches is fit for the
	// API (names of backend objects, no content, no secrets); the worker
	// shows it instead of the code's fixed message.
	Public string
}

func (e *PermanentError) Error() string { return fmt.Sprintf("%s: %v", e.Code, e.Err) }
func (e *PermanentError) Unwrap() error { return e.Err }

// Permanent wraps err as a permanent failure with a public code.
func Permanent(code string, err error) error { return &PermanentError{Code: code, Err: err} }

// Refusal is a permanent failure with a public message: msg is shown as
// it is, so it must name only backend objects and say what to do.
func Refusal(code, msg string) error {
	return &PermanentError{Code: code, Err: errors.New(msg), Public: msg}
}

// AsPermanent returns the permanent failure in err's chain, if any. Any
// other error is retryable.
func AsPermanent(err error) (*PermanentError, bool) {
	var p *PermanentError
	ok := errors.As(err, &p)
	return p, ok
}

// transientErrnos are the system errors that describe the host's state
// (resources, the disk) rather than what was read or written: retrying
// may succeed. Others (a symbolic link met with O_NOFOLLOW, a
// non-directory, a missing or non-executable runtime, a permission
// refused) stay as they are until someone changes the files or the
// installation.
var transientErrnos = map[syscall.Errno]bool{
	syscall.EINTR: true, syscall.EAGAIN: true, syscall.EBUSY: true, syscall.ETXTBSY: true,
	syscall.ENOMEM: true, syscall.ENOBUFS: true, syscall.EMFILE: true, syscall.ENFILE: true,
	syscall.ENOSPC: true, syscall.EDQUOT: true, syscall.EIO: true, syscall.ESTALE: true,
	syscall.ETIMEDOUT: true,
}

// TransientErrno reports whether err holds a system error that describes
// the host's state (transientErrnos): the drivers retry such a failure
// of their host files, and fail for good on any other.
func TransientErrno(err error) bool {
	var errno syscall.Errno
	return errors.As(err, &errno) && transientErrnos[errno]
}
