package store

import (
	"encoding/json"
	"time"
)

// Installation is the singleton that owns everything else.
type Installation struct {
	ID        string    `json:"id"`
	Name      string    `json:"name"`
	CreatedAt time.Time `json:"createdAt"`
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
	ID        string          `json:"id"`
	Name      string          `json:"name"`
	Status    NamespaceStatus `json:"status"`
	CreatedAt time.Time       `json:"createdAt"`
	UpdatedAt time.Time       `json:"updatedAt"`
}

// ConfigurationKindAgent is the only Configuration kind.
const ConfigurationKindAgent = "agent"

// Configuration is a native OpenClaw JSON document owned by a Namespace.
// Generation starts at 1 and grows by one on every update.
type Configuration struct {
	ID          string          `json:"id"`
	NamespaceID string          `json:"namespaceId"`
	Name        string          `json:"name"`
	Kind        string          `json:"kind"`
	Document    json.RawMessage `json:"document"`
	Generation  int64           `json:"generation"`
	CreatedAt   time.Time       `json:"createdAt"`
	UpdatedAt   time.Time       `json:"updatedAt"`
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
	ID                  string       `json:"id"`
	NamespaceID         string       `json:"namespaceId"`
	Name                string       `json:"name"`
	ConfigurationID     string       `json:"configurationId"`
	Status              AgentStatus  `json:"status"`
	DesiredRuntimeState RuntimeState `json:"desiredRuntimeState"`
	ActiveRevisionID    string       `json:"activeRevisionId,omitempty"`
	DeletionRequestedBy string       `json:"-"`
	CreatedAt           time.Time    `json:"createdAt"`
	UpdatedAt           time.Time    `json:"updatedAt"`
}

// Revision is an immutable snapshot of what one deployment runs. Its id is
// also the deployment id. It never carries workspace setup data.
type Revision struct {
	ID                      string          `json:"id"`
	NamespaceID             string          `json:"namespaceId"`
	AgentID                 string          `json:"agentId"`
	Number                  int64           `json:"revision"`
	ConfigurationID         string          `json:"configurationId"`
	ConfigurationKind       string          `json:"configurationKind"`
	ConfigurationGeneration int64           `json:"configurationGeneration"`
	Configuration           json.RawMessage `json:"configuration"`
	ComputeDriverID         string          `json:"computeDriverId"`
	CreatedBy               string          `json:"-"`
	CreatedAt               time.Time       `json:"createdAt"`
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
	ID           string    `json:"id"`
	Email        string    `json:"email"`
	PasswordHash string    `json:"-"`
	CreatedAt    time.Time `json:"createdAt"`
}

// Session is a browser session. Only the SHA-256 of its token is stored.
type Session struct {
	TokenHash []byte
	UserID    string
	ExpiresAt time.Time
	CreatedAt time.Time
}

// ServicePrincipal is a non-human identity. NamespaceID limits it to one
// Namespace; AgentID marks an Agent-owned principal that cannot use the API.
type ServicePrincipal struct {
	ID          string    `json:"id"`
	Name        string    `json:"name"`
	NamespaceID string    `json:"namespaceId,omitempty"`
	AgentID     string    `json:"agentId,omitempty"`
	CreatedAt   time.Time `json:"createdAt"`
}

// APIKey authenticates a ServicePrincipal. Only the SHA-256 of the secret
// part is stored; the key itself is shown once, at creation.
type APIKey struct {
	ID                 string     `json:"id"`
	ServicePrincipalID string     `json:"servicePrincipalId"`
	NamespaceID        string     `json:"namespaceId,omitempty"`
	Name               string     `json:"name"`
	SecretHash         []byte     `json:"-"`
	CreatedBy          string     `json:"createdBy"`
	ExpiresAt          time.Time  `json:"expiresAt"`
	RevokedAt          *time.Time `json:"revokedAt,omitempty"`
	CreatedAt          time.Time  `json:"createdAt"`
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

// Permission grants one action on one kind of resource.
type Permission struct {
	Action       Action       `json:"action"`
	ResourceKind ResourceKind `json:"resourceKind"`
}

// Role is a named set of permissions. A Namespace role can only be bound
// inside its Namespace. Built-in roles cannot be deleted.
type Role struct {
	ID          string       `json:"id"`
	NamespaceID string       `json:"namespaceId,omitempty"`
	Name        string       `json:"name"`
	Permissions []Permission `json:"permissions"`
	Builtin     bool         `json:"builtin"`
	CreatedAt   time.Time    `json:"createdAt"`
}

// AccessBinding grants a Role to a subject, installation-wide (no
// NamespaceID, no resource), in one Namespace (NamespaceID only), or on one
// exact resource (ResourceKind and ResourceID, with its NamespaceID).
type AccessBinding struct {
	ID           string       `json:"id"`
	NamespaceID  string       `json:"namespaceId,omitempty"`
	SubjectID    string       `json:"subjectId"`
	RoleID       string       `json:"roleId"`
	ResourceKind ResourceKind `json:"resourceKind,omitempty"`
	ResourceID   string       `json:"resourceId,omitempty"`
	CreatedAt    time.Time    `json:"createdAt"`
}

// Restriction denies one action on a kind of resource to a subject, with
// the same scoping as AccessBinding. A matching restriction always wins over
// any grant.
type Restriction struct {
	ID           string       `json:"id"`
	NamespaceID  string       `json:"namespaceId,omitempty"`
	SubjectID    string       `json:"subjectId"`
	Action       Action       `json:"action"`
	ResourceKind ResourceKind `json:"resourceKind"`
	ResourceID   string       `json:"resourceId,omitempty"`
	Effect       string       `json:"effect"` // always "deny"
	CreatedAt    time.Time    `json:"createdAt"`
}

// Grant is one binding expanded with its role's permissions, as the
// authorizer consumes it.
type Grant struct {
	Binding     AccessBinding
	Permissions []Permission
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
)

// AuditResource names what an audit event is about.
type AuditResource struct {
	Kind        ResourceKind `json:"kind"`
	ID          string       `json:"id,omitempty"`
	NamespaceID string       `json:"namespaceId,omitempty"`
}

// AuditEvent is one append-only audit record. Details hold metadata only,
// never file content or secrets.
type AuditEvent struct {
	ID         string            `json:"id"`
	OccurredAt time.Time         `json:"occurredAt"`
	Kind       string            `json:"kind"`
	ActorID    string            `json:"actorId"`
	Credential string            `json:"credential,omitempty"` // "session" or "api_key:<keyId>"
	RequestID  string            `json:"requestId,omitempty"`
	Action     string            `json:"action"`
	Resource   AuditResource     `json:"resource"`
	Outcome    string            `json:"outcome"`
	ReasonCode string            `json:"reasonCode,omitempty"`
	Details    map[string]string `json:"details,omitempty"`
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
}

// AuditCursor marks the position after the last event of a page. Events
// are ordered newest first by (OccurredAt, ID).
type AuditCursor struct {
	OccurredAt time.Time
	ID         string
}
