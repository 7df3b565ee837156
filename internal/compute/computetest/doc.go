// Package computetest is the conformance suite every compute.Driver must
// pass: local process, Docker, SSH, Kubernetes and the fake. It checks,
// through the interface only, the promises compute.Driver makes to the
// deployment worker: idempotent verbs, absence as success, readiness by
// polling PrepareRevision, retirement that never touches a newer revision,
// Endpoint agreeing with Capabilities.LiveFiles, workspace setup delivered
// byte for byte and never replayed, and contexts that are honoured.
//
// A driver's test calls Run with a Harness. Every case is an independent,
// parallel subtest with fresh identifiers (a new Namespace and Agent), its
// own driver from Harness.New and its own deadline (Harness.Timeout), and
// it cleans up after itself in t.Cleanup: every revision it used is
// retired, then the Agent and the Namespace are deleted. A cleanup verb that
// fails is a failure of the case, since those verbs must succeed.
//
// Cases (subtest names):
//
//	Identity                           ID non-empty and stable, Capabilities stable
//	Namespace/EnsureTwice              EnsureNamespace is idempotent
//	Namespace/DeleteTwice              DeleteNamespace is idempotent
//	Namespace/DeleteNeverEnsured       DeleteNamespace of an unknown Namespace succeeds
//	Revision/Lifecycle                 * Prepare (until Ready), Prepare again, Activate twice
//	                                     (serving), Endpoint, Stop twice (not serving), Retire
//	                                     twice, DeleteAgent
//	Revision/RetireBeforeReady         one Prepare (ready or not), Stop, Retire twice, DeleteAgent
//	Revision/StopAndRetireUnknown      Stop and Retire of never-prepared revisions succeed, twice
//	Revision/RetireOlderKeepsNewer     * retiring revision 1 while revision 2 serves leaves 2
//	                                     serving, ready and, with LiveFiles, its Endpoint
//	                                     resolving
//	Agent/DeleteUnknown                DeleteAgent of an unknown Agent succeeds, twice
//	Endpoint                           after one Prepare: ErrNoEndpoint iff !LiveFiles, else a
//	                                     ws:// or wss:// URL and a known Transport (Routed: wss://)
//	WorkspaceSetup/PrepareAccepted     (WorkspaceSetup only) one Prepare with a pending setup
//	                                     returns no error
//	WorkspaceSetup/DeliverThenVerify   * (WorkspaceSetup only) four files, one empty, applied
//	                                     byte for byte (checked with Inspect.WorkspaceFile when
//	                                     given); after activation, and after a retried Prepare
//	                                     and Activate with the setup still pending, no copy of
//	                                     their content outside the workspace (Inspect.SetupCopies
//	                                     when given); a later revision with the completed
//	                                     identity prepares and activates, and the files are
//	                                     unchanged
//	Concurrency/TwoAgents              * two Agents in one Namespace on one driver (Harness.NewPair)
//	                                     at once: EnsureNamespace, activation (serving, Endpoint),
//	                                     then one Agent's retirement and deletion while the other's
//	                                     Endpoint is read; the other keeps serving, still ready
//	Context/Cancelled                  every verb with a cancelled context returns a
//	                                     non-permanent error within a few seconds
//
// "Serving", the byte-for-byte file check and the copy check use the
// optional Inspect hooks; without them those steps are skipped and only the
// interface is checked.
//
// Cases marked * need a runtime that really becomes ready and are skipped
// when Harness.SkipRunning is set (for example Kubernetes on kwok, where no
// container runs). The other cases call PrepareRevision at most once per
// revision and accept Ready=false, so they run everywhere.
package computetest
