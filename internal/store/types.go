package store

import (
	"encoding/json"
	"time"
)

// Installation is the singleton that owns everything else.
type Installation struct {
	ID        string
	Name      string
	CreatedAt time.Time
}

// NamespaceStatus is a Namespace's lifecycle state.
type NamespaceStatus string

const (
	NamespaceProvisioning NamespaceStatus = "provisioning"
	NamespaceReady        NamespaceStatus = "ready"
	NamespaceFailed       NamespaceStatus = "failed"
	NamespaceDeleting     NamespaceStatus = "deleting"
)

// Namespace groups Agents and Configurations; it is also the unit of
// Namespace-scoped access.
type Namespace struct {
	ID        string
	Name      string
	Status    NamespaceStatus
	CreatedAt time.Time
	UpdatedAt time.Time
}

// ConfigurationKindAgent is the only Configuration kind.
const ConfigurationKindAgent = "agent"

// Configuration is a native OpenClaw JSON document owned by a Namespace.
// Generation starts at 1 and grows by one on every update.
type Configuration struct {
	ID          string
	NamespaceID string
	Name        string
	Kind        string
	Document    json.RawMessage
	Generation  int64
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// AgentStatus is whether an Agent exists normally or is being torn down.
// There is no "deleted": the row disappears when teardown finishes.
type AgentStatus string

const (
	AgentActive   AgentStatus = "active"
	AgentDeleting AgentStatus = "deleting"
)

// RuntimeState is what the operator wants an Agent's runtime to be.
type RuntimeState string

const (
	RuntimeRunning RuntimeState = "running"
	RuntimeStopped RuntimeState = "stopped"
)

// Agent is one OpenClaw agent. It never carries initial workspace files.
type Agent struct {
	ID                  string
	NamespaceID         string
	Name                string
	ConfigurationID     string
	Status              AgentStatus
	DesiredRuntimeState RuntimeState
	ActiveRevisionID    string
	DeletionRequestedBy string
	CreatedAt           time.Time
	UpdatedAt           time.Time
}

// AgentScope is an Agent with its Namespace and its active revision, as
// Store.GetAgentFor reads them for one operation on the Agent. It is never
// sent to a client.
type AgentScope struct {
	Agent     Agent
	Namespace Namespace
	// ActiveRevision is nil when the Agent has no active revision, or when
	// its row is gone.
	ActiveRevision *Revision
}

// Revision is an immutable snapshot of what one deployment runs. Its id is
// also the deployment id. It never carries workspace setup data.
type Revision struct {
	ID                      string
	NamespaceID             string
	AgentID                 string
	Number                  int64
	ConfigurationID         string
	ConfigurationKind       string
	ConfigurationGeneration int64
	Configuration           json.RawMessage
	ComputeDriverID         string
	CreatedBy               string
	CreatedAt               time.Time
}

// WorkspaceFileNames are the only workspace files OCC stages or serves, in
// their canonical order.
var WorkspaceFileNames = []string{"AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md"}

// WorkspaceSetup is the private record of an Agent's initial workspace
// files. Pending: Files non-empty, Completed false. Completed: Files nil.
// It is never part of an Agent, a Revision, an API response, a log line or an
// audit record.
type WorkspaceSetup struct {
	ID          string
	NamespaceID string
	AgentID     string
	DefaultsID  string // empty when not submitted
	Files       map[string]string
	Completed   bool
}

// Identity-kind values of an authenticated subject.
const (
	SubjectUser             = "user"
	SubjectServicePrincipal = "service_principal"
)

// User is a human principal that signs in with email and password.
type User struct {
	ID           string
	Email        string
	PasswordHash string `json:"-"` // a secret: never encoded, whatever encodes a User
	CreatedAt    time.Time
}

// Session is a browser session. Only the SHA-256 of its token is stored;
// ID is its public name ("ses_<uuid>"), by which its user lists and
// revokes it. ExpiresAt is the absolute end; LastUsedAt (written at most
// once a minute) drives the idle timeout, which the caller judges.
type Session struct {
	ID         string
	TokenHash  []byte `json:"-"` // never encoded: it identifies the cookie
	UserID     string
	ExpiresAt  time.Time
	CreatedAt  time.Time
	LastUsedAt time.Time
}

// ServicePrincipal is a non-human identity. NamespaceID limits it to one
// Namespace; AgentID marks an Agent-owned principal that cannot use the API.
type ServicePrincipal struct {
	ID          string
	Name        string
	NamespaceID string
	AgentID     string
	CreatedAt   time.Time
}

// APIKey authenticates a ServicePrincipal. Only the SHA-256 of the secret
// part is stored; the key itself is shown once, at creation.
type APIKey struct {
	ID                 string
	ServicePrincipalID string
	NamespaceID        string
	Name               string
	SecretHash         []byte `json:"-"` // a secret: never encoded, whatever encodes an APIKey
	CreatedBy          string
	ExpiresAt          time.Time
	RevokedAt          *time.Time
	CreatedAt          time.Time
	// LastUsedAt is when the key last authenticated a request, to the
	// minute (written at most once a minute); nil when never used.
	LastUsedAt *time.Time
}

// Action is a permission verb. No action implies another.
type Action string

const (
	ActionCreate     Action = "create"
	ActionRead       Action = "read"
	ActionUpdate     Action = "update"
	ActionDelete     Action = "delete"
	ActionDeploy     Action = "deploy"
	ActionOperate    Action = "operate"
	ActionAdminister Action = "administer"
	ActionReadLogs   Action = "read_logs"
)

// ResourceKind names a kind of resource that permissions talk about.
type ResourceKind string

const (
	KindInstallation   ResourceKind = "installation"
	KindNamespace      ResourceKind = "namespace"
	KindConfiguration  ResourceKind = "configuration"
	KindServiceAccount ResourceKind = "service_account"
	KindAgent          ResourceKind = "agent"
	KindAgentRevision  ResourceKind = "agent_revision"
	KindAuditEvent     ResourceKind = "audit_event"
	KindRole           ResourceKind = "role"
	KindAccessBinding  ResourceKind = "access_binding"
	KindRestriction    ResourceKind = "restriction"
	KindAPIKey         ResourceKind = "api_key"
	KindUser           ResourceKind = "user"
)

// Permission grants one action on one kind of resource. Its JSON names are
// the stored format of a role's permissions column, not the API's (that is
// apitypes.Permission); changing them needs a migration.
type Permission struct {
	Action       Action       `json:"action"`
	ResourceKind ResourceKind `json:"resourceKind"`
}

// Role is a named set of permissions. A Namespace role can only be bound
// inside its Namespace. Built-in roles cannot be deleted.
type Role struct {
	ID          string
	NamespaceID string
	Name        string
	Permissions []Permission
	Builtin     bool
	CreatedAt   time.Time
}

// AccessBinding grants a Role to a subject, installation-wide (no
// NamespaceID, no resource), in one Namespace (NamespaceID only), or on one
// exact resource (ResourceKind and ResourceID, with its NamespaceID).
type AccessBinding struct {
	ID           string
	NamespaceID  string
	SubjectID    string
	RoleID       string
	ResourceKind ResourceKind
	ResourceID   string
	CreatedAt    time.Time
}

// Restriction denies one action on a kind of resource to a subject, with
// the same scoping as AccessBinding. A matching restriction always wins over
// any grant.
type Restriction struct {
	ID           string
	NamespaceID  string
	SubjectID    string
	Action       Action
	ResourceKind ResourceKind
	ResourceID   string
	Effect       string // always "deny"
	CreatedAt    time.Time
}

// Grant is one binding expanded with its role's permissions, as the
// authorizer consumes it.
type Grant struct {
	Binding     AccessBinding
	Permissions []Permission
}

// Access is everything the authorizer decides a subject's requests by: its
// grants and the restrictions naming it.
type Access struct {
	Grants       []Grant
	Restrictions []Restriction
}

// Audit event kinds and outcomes.
const (
	AuditBootstrap           = "bootstrap"
	AuditMutation            = "mutation"
	AuditAccess              = "access"
	AuditAuthorizationDenial = "authorization_denial"

	OutcomeSuccess = "success"
	OutcomeDenied  = "denied"
	OutcomeFailure = "failure"
	// OutcomeAttempted marks a write-ahead record: committed before an
	// operation with an external effect (a workspace file write) is sent;
	// its outcome record names it in AttemptID.
	OutcomeAttempted = "attempted"
)

// AuditResource names what an audit event is about.
type AuditResource struct {
	Kind        ResourceKind
	ID          string
	NamespaceID string
}

// AuditEvent is one append-only audit record. Details hold metadata only,
// never file content or secrets.
type AuditEvent struct {
	ID         string
	OccurredAt time.Time
	Kind       string
	ActorID    string
	Credential string // "session" or "api_key:<keyId>"
	RequestID  string
	Action     string
	Resource   AuditResource
	Outcome    string
	ReasonCode string
	Details    map[string]string
	// AttemptID is set on the outcome record of a write-ahead attempt: the
	// ID of the OutcomeAttempted event it resolves.
	AttemptID string
}

// AuditFilter selects audit events; empty fields match everything.
type AuditFilter struct {
	NamespaceID  string
	ResourceKind ResourceKind
	ResourceID   string
	ActorID      string
	Action       string
	Kind         string
	Outcome      string
	Since        time.Time // inclusive; zero means unbounded
	Until        time.Time // exclusive; zero means unbounded
	// WithoutOutcome keeps only attempted events that no outcome record
	// names yet: writes still in flight, or whose OCC process died.
	WithoutOutcome bool
}

// AuditCursor marks the position after the last event of a page. Events
// are ordered newest first by (OccurredAt, ID).
type AuditCursor struct {
	OccurredAt time.Time
	ID         string
}

// MaxPageSize bounds every paged list: a store refuses a PageRequest with
// a larger Limit (Invalid), so no call reads an unbounded number of rows.
const MaxPageSize = 500

// PageRequest asks for one page of a list ordered oldest first by
// (CreatedAt, ID): at most Limit items (1..MaxPageSize) strictly after
// After, or from the start when After is nil.
type PageRequest struct {
	After *PageCursor
	Limit int
}

// PageCursor marks a position in a list ordered by (CreatedAt, ID). The ID
// breaks ties, so paging visits every item exactly once even when many
// share a creation time.
type PageCursor struct {
	CreatedAt time.Time
	ID        string
}

// Page is one page of a list. Next is the position of the page's last
// item (nil on the last page). The authorizing wrapper leaves out the
// items the caller may not read and fills its page from further store
// pages, so that its Next, too, names an item it returns, never a hidden
// one (a client can decode its cursor).
type Page[T any] struct {
	Items []T
	Next  *PageCursor
}
