package store

import "time"

// Work kinds. Each names one level-based reconcile the worker performs.
const (
	WorkNamespaceReconcile = "namespace.reconcile" // make a Namespace ready through the driver
	WorkNamespaceDelete    = "namespace.delete"    // tear a Namespace down, then remove it
	// WorkNamespaceRepair brings a ready Namespace's backend objects in
	// line with the current installation configuration (an administrator's
	// reconcile request).
	WorkNamespaceRepair = "namespace.repair"
	WorkRevisionDeploy  = "revision.deploy" // prepare and activate one revision
	WorkAgentStop       = "agent.stop"      // stop the Agent's runtime
	WorkAgentDelete     = "agent.delete"    // retire everything, then remove the Agent
)

// WorkState is a work item's queue state.
type WorkState string

const (
	WorkQueued          WorkState = "queued"
	WorkRunning         WorkState = "running"
	WorkSucceeded       WorkState = "succeeded"
	WorkFailedPermanent WorkState = "failed_permanent"
	WorkCancelled       WorkState = "cancelled"
)

// WorkAttempt describes the last attempt of a work item that did not
// finish, for deployment progress. Its JSON names are the stored format of
// the work item's last-attempt column, not the API's (that is
// apitypes.DeploymentAttempt); changing them needs a migration.
type WorkAttempt struct {
	Code    string    `json:"code"`
	Message string    `json:"message"`
	At      time.Time `json:"at"`
}

// WorkItem is one entry of the durable work queue. A worker holds an item
// while ClaimToken is set and LeaseExpiresAt is in the future; an expired
// lease lets another worker claim it again.
type WorkItem struct {
	ID             string
	Kind           string
	IdempotencyKey string
	NamespaceID    string
	AgentID        string // empty for Namespace work
	RevisionID     string // set for revision work
	ActorID        string
	State          WorkState
	AvailableAt    time.Time
	Attempts       int
	ClaimToken     string
	LeaseExpiresAt time.Time // zero when not claimed
	CompletedAt    time.Time // zero until finished
	ReasonCode     string
	LastError      string // public, content-free message
	LastAttempt    *WorkAttempt
	CreatedAt      time.Time
	UpdatedAt      time.Time
}

// Claim is a request to claim work.
type Claim struct {
	Token string        // random, unique per claim
	Now   time.Time     // the worker's clock
	Lease time.Duration // how long the claim lives without renewal
}

// The codes of the Conflict errors with which the activation transaction
// refuses, so that the worker can tell a lost claim (another worker owns
// the item now and decides) from an Agent that no longer wants this
// revision to run (the item ends; the Agent's stop or delete item, queued
// behind it, undoes the driver's activation). A refusal with any other
// code (the revision or the pending setup does not match the Agent) can
// never succeed on a retry either.
const (
	ActivationClaimLost    = "CLAIM_LOST"
	ActivationAgentStopped = "AGENT_STOPPED"
	ActivationAgentGone    = "AGENT_NOT_FOUND"
)

// Activation is the input of the activation transaction.
type Activation struct {
	NamespaceID string
	AgentID     string
	RevisionID  string
	WorkID      string
	ClaimToken  string
	// SetupID, when set, is the pending workspace setup to complete in the
	// same transaction (files cleared, identity kept).
	SetupID string
	Now     time.Time
}
