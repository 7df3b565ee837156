package apitypes

import (
	"encoding/json"
	"time"
)

// AgentStatus is whether an Agent exists normally or is being torn down.
// There is no "deleted": the Agent disappears when teardown finishes.
type AgentStatus string

// The Agent states.
const (
	AgentActive   AgentStatus = "active"   // exists normally
	AgentDeleting AgentStatus = "deleting" // being torn down
)

// RuntimeState is what the operator wants an Agent's runtime to be.
type RuntimeState string

// The desired runtime states.
const (
	RuntimeRunning RuntimeState = "running" // deployed and serving
	RuntimeStopped RuntimeState = "stopped" // not running
)

// Agent is one OpenClaw agent. It never carries workspace file content.
type Agent struct {
	// ID is the Agent's identifier ("agt_…").
	ID string `json:"id"`
	// NamespaceID is the owning Namespace.
	NamespaceID string `json:"namespaceId"`
	// Name is unique in the Namespace.
	Name string `json:"name"`
	// ConfigurationID is the Configuration the next deployment uses.
	ConfigurationID string `json:"configurationId"`
	// Status says whether the Agent is being deleted.
	Status AgentStatus `json:"status"`
	// DesiredRuntimeState is what the operator last asked for.
	DesiredRuntimeState RuntimeState `json:"desiredRuntimeState"`
	// ActiveRevisionID is the revision currently deployed; absent before
	// the first successful deployment.
	ActiveRevisionID string `json:"activeRevisionId,omitempty"`
	// CreatedAt is when the Agent was created.
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is when the Agent last changed.
	UpdatedAt time.Time `json:"updatedAt"`
}

func (Agent) isData() {}

// CreateAgentRequest is the body of POST /namespaces/{ns}/agents.
type CreateAgentRequest struct {
	// Name must be unique in the Namespace.
	Name string `json:"name"`
	// ConfigurationID names a Configuration of the same Namespace.
	ConfigurationID string `json:"configurationId"`
	// InitialWorkspaceFiles optionally maps workspace file names
	// (AGENTS.md, SOUL.md, IDENTITY.md, USER.md) to their initial
	// content, staged once for the first deployment and never returned.
	// It is kept raw because its strings are checked exactly as sent.
	InitialWorkspaceFiles json.RawMessage `json:"initialWorkspaceFiles,omitempty"`
	// WorkspaceDefaultsID, when set, must equal the ID answered by GET
	// /workspace-defaults: the defaults the client based its files on.
	// Absent (nil) skips the check; present, even empty, it must be 64
	// lowercase hex characters.
	WorkspaceDefaultsID *string `json:"workspaceDefaultsId,omitempty"`
}

// PatchAgentRequest is the body of PATCH /namespaces/{ns}/agents/{agentId}.
type PatchAgentRequest struct {
	// ConfigurationID is the Configuration the next deployment uses.
	ConfigurationID string `json:"configurationId"`
	// Name, when present, renames the Agent.
	Name *string `json:"name,omitempty"`
}

// Revision is the immutable snapshot of what one deployment runs. Its ID
// is also the deployment's ID. It never carries workspace file content.
type Revision struct {
	// ID is the revision's and the deployment's identifier ("rev_…").
	ID string `json:"id"`
	// NamespaceID is the Agent's Namespace.
	NamespaceID string `json:"namespaceId"`
	// AgentID is the deployed Agent.
	AgentID string `json:"agentId"`
	// Number counts the Agent's revisions from 1.
	Number int64 `json:"revision"`
	// ConfigurationID is the Configuration the snapshot was taken from.
	ConfigurationID string `json:"configurationId"`
	// ConfigurationKind is that Configuration's kind.
	ConfigurationKind string `json:"configurationKind"`
	// ConfigurationGeneration is that Configuration's generation.
	ConfigurationGeneration int64 `json:"configurationGeneration"`
	// Configuration is the native document as snapshotted; absent when
	// the caller may not read the Configuration it was taken from (a
	// binding on the Agent alone does not grant that).
	Configuration json.RawMessage `json:"configuration,omitempty"`
	// ComputeDriverID names the compute driver that runs the revision.
	ComputeDriverID string `json:"computeDriverId"`
	// CreatedAt is when the deployment was requested.
	CreatedAt time.Time `json:"createdAt"`
}

func (Revision) isData() {}

// DeploymentStatus is where one deployment stands.
type DeploymentStatus string

// The deployment states.
const (
	DeploymentQueued    DeploymentStatus = "queued"    // waiting; no worker holds it
	DeploymentRunning   DeploymentStatus = "running"   // a worker is working on it
	DeploymentSucceeded DeploymentStatus = "succeeded" // activated
	DeploymentFailed    DeploymentStatus = "failed"    // ended without activating
)

// Deployment is the status of one revision's deployment.
type Deployment struct {
	// ID is the revision's identifier ("rev_…").
	ID string `json:"id"`
	// NamespaceID is the Agent's Namespace.
	NamespaceID string `json:"namespaceId"`
	// AgentID is the deployed Agent.
	AgentID string `json:"agentId"`
	// Revision is the revision's number.
	Revision int64 `json:"revision"`
	// Status is where the deployment stands.
	Status DeploymentStatus `json:"status"`
	// Error is why a failed deployment failed; null otherwise.
	Error *DeploymentError `json:"error"`
	// Progress is set while the deployment is queued or running; null
	// otherwise.
	Progress *DeploymentProgress `json:"progress"`
	// CreatedAt is when the deployment was requested.
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is when its state last changed.
	UpdatedAt time.Time `json:"updatedAt"`
}

func (Deployment) isData() {}

// DeploymentError is why a deployment failed.
type DeploymentError struct {
	// Code is a stable reason code, for example COMPUTE_NOT_CONFIGURED
	// or CANCELLED.
	Code string `json:"code"`
	// Message is a public, content-free explanation.
	Message string `json:"message"`
}

// DeploymentProgress says what the last unfinished attempt saw and when
// the next one is due.
type DeploymentProgress struct {
	// LastAttempt is the last attempt that did not finish; absent before
	// the first one.
	LastAttempt *DeploymentAttempt `json:"lastAttempt,omitempty"`
	// NextAttemptAt is when a queued deployment is retried; absent when
	// it has not been attempted yet or is running.
	NextAttemptAt *time.Time `json:"nextAttemptAt,omitempty"`
	// Attempts counts the attempts so far that ran or failed; a recheck
	// of a revision that is not ready yet is not one.
	Attempts int `json:"attempts"`
}

// DeploymentAttempt is what one unfinished deployment attempt saw.
type DeploymentAttempt struct {
	// Code is a stable reason code.
	Code string `json:"code"`
	// Message is a public, content-free explanation.
	Message string `json:"message"`
	// At is when the attempt ended.
	At time.Time `json:"at"`
}

// WorkspaceFile is the data of GET
// /namespaces/{ns}/agents/{agentId}/workspace/files/{name}. The reply's
// ETag header carries the SHA-256 of Content for compare-and-swap writes.
type WorkspaceFile struct {
	// Name is the file name.
	Name string `json:"name"`
	// Content is the file's text as the Agent's gateway holds it now.
	Content string `json:"content"`
}

func (WorkspaceFile) isData() {}

// PutWorkspaceFileRequest is the body of PUT
// /namespaces/{ns}/agents/{agentId}/workspace/files/{name}. An If-Match
// header with the ETag of a read makes the write a compare-and-swap.
type PutWorkspaceFileRequest struct {
	// Content is the file's new text.
	Content string `json:"content"`
}

// WrittenFile is the data of a successful workspace file PUT. The reply's
// ETag header carries the SHA-256 of the written content.
type WrittenFile struct {
	// Name is the file name.
	Name string `json:"name"`
	// Size is the written content's length in bytes.
	Size int `json:"size"`
}

func (WrittenFile) isData() {}

// WorkspaceDefaults is the data of GET /workspace-defaults: the default
// persona files of the pinned OpenClaw release, for create forms.
type WorkspaceDefaults struct {
	// ID identifies this set of defaults; send it back as
	// CreateAgentRequest.WorkspaceDefaultsID.
	ID string `json:"id"`
	// Version is the OpenClaw release the defaults come from.
	Version string `json:"version"`
	// Files maps each workspace file name to its default content.
	Files map[string]string `json:"files"`
}

func (WorkspaceDefaults) isData() {}
