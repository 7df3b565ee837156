// Package store owns OCC's persistent state: the domain types and the Store
// interface over them. Implementations live in sub-packages (sqlstore for
// SQLite and PostgreSQL); storetest is the one suite every implementation
// must pass.
//
// Errors: a missing row is errkind.NotFound, a uniqueness or referential
// clash is errkind.Conflict (with a specific code where the API has one),
// and anything else is an internal error. The store never imports HTTP.
//
// Times are stored with microsecond precision in UTC; implementations
// truncate on write so that what is read back equals what was written.
//
// Records carry no JSON names of the API: they are never serialized to a
// client. The wire types are package apitypes, converted from these records
// in internal/api. The only JSON names here are stored column formats
// (Permission, WorkAttempt) and the "-" that keeps secret hashes out of any
// encoding.
package store

import (
	"context"
	"time"
)

// Store is every read and write OCC makes. The authz package wraps it so
// that each call is authorized against the subject in the context; only the
// wrapped form is handed to request handlers and domain code.
type Store interface {
	// InTx runs fn inside one transaction; fn's Store must be used for every
	// call that belongs to the transaction. An error from fn rolls back.
	// Nested InTx calls join the outer transaction.
	InTx(ctx context.Context, fn func(tx Store) error) error

	// Installation. CreateInstallation fails with Conflict
	// INSTALLATION_EXISTS when one exists.
	GetInstallation(ctx context.Context) (Installation, error)
	CreateInstallation(ctx context.Context, in Installation) error

	// Users and sessions. Emails are compared case-insensitively.
	CreateUser(ctx context.Context, u User) error
	GetUser(ctx context.Context, id string) (User, error)
	GetUserByEmail(ctx context.Context, email string) (User, error)
	CreateSession(ctx context.Context, s Session) error
	// GetSession is NotFound also when the session's user no longer
	// exists, so the session alone authenticates its user.
	GetSession(ctx context.Context, tokenHash []byte) (Session, error)
	// GetSessionAccess is GetSession and, in the same read, ListAccess of
	// the session's user: authenticating a request and loading what its
	// checks need cost one query, not two. NotFound as GetSession.
	GetSessionAccess(ctx context.Context, tokenHash []byte) (Session, Access, error)
	DeleteSession(ctx context.Context, tokenHash []byte) error
	DeleteExpiredSessions(ctx context.Context, now time.Time) (int64, error)
	// ListUserSessions returns the user's sessions, newest first, expired
	// ones included (the caller judges expiry). DeleteUserSession deletes
	// one of them by id: NotFound when the user has no such session.
	ListUserSessions(ctx context.Context, userID string) ([]Session, error)
	DeleteUserSession(ctx context.Context, userID, id string) error
	// TouchSession and TouchAPIKey record a use at `at` only when the
	// recorded last use is older than notAfter (or absent), so that
	// concurrent requests write at most once per interval; they report
	// whether they wrote. An unknown session or key is not an error.
	TouchSession(ctx context.Context, tokenHash []byte, at, notAfter time.Time) (bool, error)
	TouchAPIKey(ctx context.Context, id string, at, notAfter time.Time) (bool, error)
	// RevokeUserCredentials deletes every session of the user and revokes
	// (at `at`) every unrevoked API key the user created, in one
	// transaction; it returns how many of each. NotFound for an unknown
	// user.
	RevokeUserCredentials(ctx context.Context, userID string, at time.Time) (sessions, keys int64, err error)

	// Service principals and their API keys. Deleting a principal deletes
	// its keys, bindings and restrictions.
	CreateServicePrincipal(ctx context.Context, sp ServicePrincipal) error
	GetServicePrincipal(ctx context.Context, id string) (ServicePrincipal, error)
	// ListServicePrincipals returns one page of principals, oldest first.
	ListServicePrincipals(ctx context.Context, page PageRequest) (Page[ServicePrincipal], error)
	DeleteServicePrincipal(ctx context.Context, id string) error
	CreateAPIKey(ctx context.Context, k APIKey) error
	GetAPIKey(ctx context.Context, id string) (APIKey, error)
	// GetAPIKeyAccess is GetAPIKey, GetServicePrincipal of the key's
	// principal and ListAccess of that principal in one read:
	// authenticating a key's request and loading what its checks need cost
	// one query, not three. NotFound when the key or its principal does
	// not exist.
	GetAPIKeyAccess(ctx context.Context, id string) (APIKey, ServicePrincipal, Access, error)
	// RevokeAPIKey marks the key revoked at the given time; revoking a
	// revoked key keeps the first time and succeeds.
	RevokeAPIKey(ctx context.Context, id string, at time.Time) error

	// IAM. DeleteRole fails with Conflict while a binding uses the role, and
	// for built-in roles.
	CreateRole(ctx context.Context, r Role) error
	GetRole(ctx context.Context, id string) (Role, error)
	// ListRoles, ListAccessBindings and ListRestrictions return one page,
	// oldest first.
	ListRoles(ctx context.Context, page PageRequest) (Page[Role], error)
	DeleteRole(ctx context.Context, id string) error
	CreateAccessBinding(ctx context.Context, b AccessBinding) error
	GetAccessBinding(ctx context.Context, id string) (AccessBinding, error)
	ListAccessBindings(ctx context.Context, page PageRequest) (Page[AccessBinding], error)
	DeleteAccessBinding(ctx context.Context, id string) error
	CreateRestriction(ctx context.Context, r Restriction) error
	GetRestriction(ctx context.Context, id string) (Restriction, error)
	ListRestrictions(ctx context.Context, page PageRequest) (Page[Restriction], error)
	DeleteRestriction(ctx context.Context, id string) error
	// ListGrants returns the subject's bindings, each with its role's
	// permissions; ListSubjectRestrictions the restrictions naming it.
	ListGrants(ctx context.Context, subjectID string) ([]Grant, error)
	ListSubjectRestrictions(ctx context.Context, subjectID string) ([]Restriction, error)
	// ListAccess returns both in one read (what ListGrants and
	// ListSubjectRestrictions return, in their order): the authorizer
	// reads it for every request, so it is one query, not two.
	ListAccess(ctx context.Context, subjectID string) (Access, error)

	// Namespaces. Names are unique (Conflict). DeleteNamespace fails with
	// Conflict NAMESPACE_NOT_EMPTY while Agents or Configurations remain.
	CreateNamespace(ctx context.Context, ns Namespace) error
	GetNamespace(ctx context.Context, id string) (Namespace, error)
	// ListNamespaces returns one page of Namespaces, oldest first.
	ListNamespaces(ctx context.Context, page PageRequest) (Page[Namespace], error)
	UpdateNamespaceStatus(ctx context.Context, id string, status NamespaceStatus, at time.Time) error
	DeleteNamespace(ctx context.Context, id string) error
	// MarkNamespaceDeleting atomically checks that the Namespace holds no
	// Agents and no Configurations (Conflict NAMESPACE_NOT_EMPTY otherwise)
	// and sets its status to deleting; the worker then tears it down.
	MarkNamespaceDeleting(ctx context.Context, id string, at time.Time) (Namespace, error)

	// Configurations, always addressed within their Namespace. Names are
	// unique per Namespace. UpdateConfiguration replaces name and document
	// and increments Generation, returning the stored result.
	// DeleteConfiguration fails with Conflict while an Agent references it.
	CreateConfiguration(ctx context.Context, c Configuration) error
	GetConfiguration(ctx context.Context, namespaceID, id string) (Configuration, error)
	// ListConfigurations returns one page of the Namespace's
	// Configurations, oldest first.
	ListConfigurations(ctx context.Context, namespaceID string, page PageRequest) (Page[Configuration], error)
	UpdateConfiguration(ctx context.Context, c Configuration) (Configuration, error)
	DeleteConfiguration(ctx context.Context, namespaceID, id string) error

	// Agents. CreateAgent inserts the Agent and, when setup is non-nil, its
	// pending workspace setup in the same transaction. Names are unique per
	// Namespace.
	CreateAgent(ctx context.Context, a Agent, setup *WorkspaceSetup) error
	GetAgent(ctx context.Context, namespaceID, id string) (Agent, error)
	// ListAgents returns one page of the Namespace's Agents, oldest first.
	ListAgents(ctx context.Context, namespaceID string, page PageRequest) (Page[Agent], error)
	// GetAgentFor reads an Agent for an operation that needs action on
	// that exact Agent, with what such operations decide on: its
	// Namespace (for example, its status before a deployment) and its
	// active revision (nil when it has none or that row is gone). It is
	// NotFound when the Agent does not exist in the Namespace. The store
	// itself ignores action; the authorizing wrapper checks exactly
	// (action, the Agent), because the Namespace is implied by the path
	// and the revision belongs to the Agent.
	GetAgentFor(ctx context.Context, action Action, namespaceID, id string) (AgentScope, error)

	// Agent changes are split by intent so that each needs its own
	// permission: UpdateAgent changes name and configuration (update);
	// SetAgentRuntimeState records the desired runtime state (deploy to
	// run, operate to stop); MarkAgentDeleting starts teardown (delete):
	// status deleting, desired stopped, and who asked. Each returns the
	// stored Agent. DeleteAgent removes the Agent for good with its
	// revisions, setup record and work items, and every binding and
	// restriction scoped to the exact Agent (worker only).
	UpdateAgent(ctx context.Context, a Agent) (Agent, error)
	SetAgentRuntimeState(ctx context.Context, namespaceID, id string, state RuntimeState, at time.Time) (Agent, error)
	MarkAgentDeleting(ctx context.Context, namespaceID, id, actorID string, at time.Time) (Agent, error)
	DeleteAgent(ctx context.Context, namespaceID, id string) error

	// Revisions are immutable. CreateRevision assigns the next Number for
	// the Agent (1, 2, ...) and returns the stored revision.
	CreateRevision(ctx context.Context, r Revision) (Revision, error)
	GetRevision(ctx context.Context, namespaceID, agentID, id string) (Revision, error)
	// ListRevisions returns one page of the Agent's revisions by number,
	// oldest first.
	ListRevisions(ctx context.Context, namespaceID, agentID string, page PageRequest) (Page[Revision], error)

	// Work queue. EnqueueWork is idempotent on IdempotencyKey: enqueueing
	// an existing key returns the existing item unchanged.
	EnqueueWork(ctx context.Context, w WorkItem) (WorkItem, error)
	GetWork(ctx context.Context, id string) (WorkItem, error)
	GetWorkByKey(ctx context.Context, key string) (WorkItem, error)
	// ClaimWork claims the oldest claimable item, or reports none. An item
	// is claimable when it is queued and available, or running with an
	// expired lease; and no older unfinished item exists for the same
	// Agent (one Agent's work runs strictly in order, one at a time).
	// PostgreSQL claims with FOR UPDATE SKIP LOCKED so replicas never wait
	// on each other. Claiming sets state running, the token, the lease
	// and increments Attempts.
	ClaimWork(ctx context.Context, c Claim) (WorkItem, bool, error)
	// RenewWork extends a live claim; Conflict when the claim was lost.
	RenewWork(ctx context.Context, id, token string, until time.Time) error
	// RetryWork releases a claim and requeues the item for availableAt,
	// recording the attempt; with counted false the claim is taken back
	// out of Attempts (a recheck of something not ready yet, or an item
	// handed back unfinished, is not an attempt that failed). FinishWork
	// ends it (succeeded, failed_permanent or cancelled) with a reason
	// code. Both answer Conflict when the token no longer holds the claim.
	RetryWork(ctx context.Context, id, token string, availableAt time.Time, attempt WorkAttempt, counted bool) error
	FinishWork(ctx context.Context, id, token string, state WorkState, reasonCode, message string, now time.Time) error
	// CancelAgentWork cancels the Agent's queued (unclaimed) items of the
	// given kinds, for example pending deployments when the Agent is
	// deleted.
	CancelAgentWork(ctx context.Context, namespaceID, agentID string, kinds []string, now time.Time) (int64, error)
	// ExpediteAgentWork makes the Agent's queued items that wait for a
	// later time available at now, and returns how many it changed: a
	// Compute driver said the Agent's runtime may have become ready, so
	// its pending readiness check need not wait out its backoff. Items
	// already available, claimed or finished, and other Agents' items,
	// are left alone; the order of one Agent's items is unchanged.
	ExpediteAgentWork(ctx context.Context, namespaceID, agentID string, now time.Time) (int64, error)

	// ActivateRevision is the activation transaction: it re-checks that
	// the claim is still held and the Agent is active and wants to run,
	// makes the revision the Agent's active revision and completes the
	// pending setup when a.SetupID is set — all or nothing. Conflict when
	// any check fails. The work item stays claimed: the worker finishes it
	// after retiring older revisions, so that nothing else acts on the
	// Agent meanwhile. Repeating it (after a crash) is harmless: the setup
	// completion is idempotent.
	ActivateRevision(ctx context.Context, a Activation) error

	// Workspace setups (private). CompleteWorkspaceSetup clears the files
	// and marks the record completed; it is idempotent for a completed
	// record and NotFound when namespace, agent or setup id do not match.
	GetWorkspaceSetup(ctx context.Context, namespaceID, agentID string) (WorkspaceSetup, error)
	CompleteWorkspaceSetup(ctx context.Context, namespaceID, agentID, setupID string) (WorkspaceSetup, error)
	DeleteWorkspaceSetup(ctx context.Context, namespaceID, agentID string) (bool, error)

	// Audit events are append-only; the database refuses updates and
	// deletes. ListAuditEvents returns at most limit events after the
	// cursor (nil: from the newest), newest first.
	AppendAuditEvent(ctx context.Context, e AuditEvent) error
	ListAuditEvents(ctx context.Context, f AuditFilter, after *AuditCursor, limit int) ([]AuditEvent, error)

	// Close releases the database handle. Only the owner calls it.
	Close() error
}
