package apitypes

import "time"

// Audit event kinds.
const (
	AuditBootstrap           = "bootstrap"            // the installation was bootstrapped
	AuditMutation            = "mutation"             // something was changed
	AuditAccess              = "access"               // something sensitive was read
	AuditAuthorizationDenial = "authorization_denial" // a request was refused
)

// Audit event outcomes.
const (
	OutcomeSuccess = "success" // the operation happened
	OutcomeDenied  = "denied"  // authorization refused it
	OutcomeFailure = "failure" // it was attempted and failed
	// OutcomeAttempted is a write-ahead record, committed before a
	// workspace file write is sent to the Agent's gateway; the write's
	// outcome record names it in attemptId.
	OutcomeAttempted = "attempted"
)

// AuditPage is the data of GET /audit-events: one page of events, newest
// first.
type AuditPage struct {
	// Items are the page's events; [] when there are none.
	Items []AuditEvent `json:"items"`
	// NextCursor, passed as the cursor query parameter, fetches the next
	// page; absent on the last page. It is opaque.
	NextCursor string `json:"nextCursor,omitempty"`
}

func (AuditPage) isData() {}

// AuditEvent is one append-only audit record. Details hold metadata only,
// never file content or secrets.
type AuditEvent struct {
	// ID is the event's identifier ("aud_…").
	ID string `json:"id"`
	// OccurredAt is when it happened.
	OccurredAt time.Time `json:"occurredAt"`
	// Kind is one of the Audit* kinds.
	Kind string `json:"kind"`
	// ActorID is the subject that acted: a user, a service principal, a
	// system subject's name, or "anonymous".
	ActorID string `json:"actorId"`
	// Credential is how the actor authenticated: "session",
	// "api_key:<keyId>" or "system"; absent when no one authenticated.
	Credential string `json:"credential,omitempty"`
	// RequestID is the API request that caused the event; absent for
	// background work.
	RequestID string `json:"requestId,omitempty"`
	// Action names the operation, for example "openclaw.agents.create".
	Action string `json:"action"`
	// Resource is what the event is about.
	Resource AuditResource `json:"resource"`
	// Outcome is one of the Outcome* values.
	Outcome string `json:"outcome"`
	// ReasonCode says why a denial or failure happened; absent otherwise.
	ReasonCode string `json:"reasonCode,omitempty"`
	// Details are operation-specific metadata; absent when there are none.
	Details map[string]string `json:"details,omitempty"`
	// AttemptID is set on the outcome record of a workspace file write:
	// the id of the "attempted" event committed before the write was sent.
	AttemptID string `json:"attemptId,omitempty"`
}

// AuditResource names what an audit event is about.
type AuditResource struct {
	// Kind is the resource's kind.
	Kind ResourceKind `json:"kind"`
	// ID is the resource's identifier; absent for the installation.
	ID string `json:"id,omitempty"`
	// NamespaceID is the resource's Namespace, when it has one.
	NamespaceID string `json:"namespaceId,omitempty"`
}

// AuditQuery holds the query parameters of GET /audit-events; each field's
// JSON name is its parameter name. Empty fields are not sent.
type AuditQuery struct {
	// NamespaceID keeps events about resources of this Namespace.
	NamespaceID string `json:"namespaceId,omitempty"`
	// ResourceKind keeps events about resources of this kind.
	ResourceKind ResourceKind `json:"resourceKind,omitempty"`
	// ResourceID keeps events about this resource.
	ResourceID string `json:"resourceId,omitempty"`
	// ActorID keeps events caused by this subject.
	ActorID string `json:"actorId,omitempty"`
	// Action keeps events of this operation, for example "openclaw.agents.create".
	Action string `json:"action,omitempty"`
	// Kind keeps events of one of the Audit* kinds.
	Kind string `json:"kind,omitempty"`
	// Outcome keeps events with one of the Outcome* values.
	Outcome string `json:"outcome,omitempty"`
	// Since keeps events at or after this time.
	Since *time.Time `json:"since,omitempty"`
	// Until keeps events before this time.
	Until *time.Time `json:"until,omitempty"`
	// WithoutOutcome, when true, keeps only "attempted" events that no
	// outcome record names: writes in flight, or whose OCC process ended
	// before it could record the outcome (their effect is unknown).
	WithoutOutcome bool `json:"withoutOutcome,omitempty"`
	// Limit is the page size (the server's default and maximum apply).
	Limit int `json:"limit,omitempty"`
	// Cursor is a previous page's NextCursor.
	Cursor string `json:"cursor,omitempty"`
}
