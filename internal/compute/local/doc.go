// Package local owns the embedded default Compute driver: one native
// OpenClaw gateway process (`node openclaw.mjs gateway run`) per Agent on
// this host, listening on a loopback port and authenticated with a
// per-Agent random token. It is what `occ server` runs with no flags.
//
// # Layout
//
// Everything lives under Options.DataDir/agents/<sha256(agentId)[:12]>
// (mode 0700):
//
//	agent.json           the Agent and Namespace ids (for Recover)
//	token                32 random bytes, hex, 0600, created once
//	port                 the Agent's loopback port, stable across restarts
//	home/ state/         HOME and OPENCLAW_STATE_DIR of the gateway
//	workspace/           the durable workspace (agents.defaults.workspace)
//	setup-identity.json  the workspace setup identity, once applied
//	revisions/<sha256(revisionId)[:12]>/openclaw.json  rendered config, 0600
//	revisions/<...>/revision.json                       id and number
//	serving              the id of the revision that should run
//	pid                  the running gateway: pid, start time, revision
//	gateway.log(.1)      the gateway's stdout and stderr, capped
//	logs/openclaw.log*   the gateway's own JSON file log, capped natively
//
// # Secrets
//
// The token reaches the gateway only through its 0600 configuration file
// (gateway.auth.token); it is never in a command line, an environment, a
// log line or an error. OCC clients read it from the token file for each
// operation (compute.Endpoint.TokenFile). The gateway's environment is
// built from scratch: nothing of occ's own environment is inherited.
//
// # Supervision and failure semantics
//
// PrepareRevision renders the configuration, applies a pending workspace
// setup in process (setuprunner.Apply), verifies the setup marker
// (setuprunner.Verify) before every start, and starts the gateway under a
// supervisor goroutine. It answers Ready=false (AGENT_GATEWAY_UNAVAILABLE)
// until GET /readyz answers 200 on the Agent's port and the listener is
// owned by the process we started (a process already gone owns nothing);
// the worker polls it again. One gateway runs per Agent: preparing another
// revision stops the current gateway and starts the new one. A gateway
// that exits is restarted with exponential backoff (1 s doubling to 30 s).
// Every start, restarts included, first checks the Agent's port and moves
// the Agent to a new one (port file, so the Endpoint, and configuration)
// when another process took it. Setup failures of the host (a timeout,
// resource exhaustion, I/O) are retryable, and before a restart they only
// delay it; a verdict on the payload or the workspace is permanent
// WORKSPACE_SETUP_FAILED. Five consecutive starts that never reach
// readiness, or two consecutive exits with status 78 (the gateway's
// "configuration refused"), end the revision with a permanent
// RUNTIME_FAILED or CONFIGURATION_INVALID. Whenever no gateway runs and a
// serving revision is recorded, that revision is started again, so a
// failed or abandoned deployment falls back to what served before. When
// that start fails after a revision failed for good, PrepareRevision
// answers a retryable error instead of the failure, so the next attempt
// starts it again (restoreServing).
//
// # Re-attach
//
// Gateways are not children that die with occ: Close stops supervision and
// leaves them running, and Recover (after a restart) adopts each live
// gateway, found through the Agent's pid file or, when that was lost, by
// its working directory. A process is adopted only after /proc shows it is
// the same process (start time), an OpenClaw gateway, in the Agent's
// directory; the revision it runs comes from its OPENCLAW_CONFIG_PATH
// (its command line no longer shows it: OpenClaw replaces its process
// title). Adopted gateways are supervised by polling. A dead gateway
// whose Agent has a serving revision is started again; a duplicate is
// never started. Shutdown stops every gateway and keeps the serving marks,
// so the next Recover starts them again.
//
// Linux only: the driver reads /proc.
package local
