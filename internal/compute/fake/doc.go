// Package fake owns an in-memory compute.Driver for tests of the deployment
// worker and of anything else that drives compute verbs. It runs nothing: it
// records every verb call, keeps the state a real backend would keep
// (ensured Namespaces, each Agent's revisions and serving revision, the
// durable workspace with its setup marker), and lets a test script failures,
// pending answers and delays.
//
// The fake is also a contract checker. Calls that break a rule stated on
// compute.Driver, or on the worker's side of it, are recorded as violations
// (Driver.Violations) instead of panicking, so a worker test can assert that
// the list is empty after exercising its scenario:
//
//   - a PrepareRevision or ActivateRevision for an Agent overlaps another
//     mutating call (Prepare, Activate, Stop, Retire, DeleteAgent) for the
//     same Agent: one Agent's deployments must be serialized;
//   - a workspace setup is delivered to a driver without
//     Capabilities.WorkspaceSetup (the worker must fail the work with
//     WORKSPACE_SETUP_UNSUPPORTED before PrepareRevision);
//   - PrepareRevision in a Namespace that was never ensured (or was deleted),
//     or for an Agent already deleted, or of a retired revision;
//   - ActivateRevision of a revision that is not prepared and ready;
//   - the same revision id sent with a different snapshot (revisions are
//     immutable);
//   - DeleteAgent while the Agent still has revisions that were not retired,
//     and DeleteNamespace while one of its Agents does.
//
// Workspace setup follows the shared runner's rules (occ-reference section
// 3): a pending setup writes its files and the identity marker once; a
// matching marker means "already applied" and nothing is rewritten; a
// completed setup is only verified and never replayed, so a missing or
// divergent marker fails with compute.CodeWorkspaceSetupFailed. The
// workspace survives Stop and Retire and is removed by DeleteAgent.
//
// Every verb honours its context: a context that is already done, or ends
// during a scripted delay, makes the call return an error wrapping the
// context's error without any effect. A Driver is safe for concurrent use.
package fake
