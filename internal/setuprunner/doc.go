// Package setuprunner owns the workspace setup runner and its verifier:
// the one implementation of "put an Agent's initial workspace files into
// its workspace, exactly once" that every Compute driver runs. The local
// driver calls Apply and Verify in process; the Docker, SSH and Kubernetes
// drivers run the same code as `occ workspace-setup` inside a container, on
// a remote host or in an init container (internal/cli wires the command).
//
// The algorithm is the reference runner's (docs/workspace-setup.md, and
// the spec's "Shared runner"): validate the payload, check the workspace
// path, read the marker .oce-workspace-setup.json. A marker that matches
// the setup identity means the setup already happened (its acknowledgement
// was lost) and nothing else is done; a marker that differs, or a missing
// marker for a completed setup, is a failure. Otherwise the runner finds
// the installed OpenClaw package, renders its templates, checks the
// defaults identity and every existing file for conflicts, runs native
// `openclaw setup --baseline`, writes each submitted file atomically, runs
// native setup again (so its BOOTSTRAP lifecycle sees the submitted
// profile), verifies the files and finally writes the marker atomically.
//
// # Failure semantics
//
// Every failure wraps ErrFailed. Apply is safe to retry with the same
// setup after a failure or a crash at any point: files that already equal
// the submission (or the stock rendering) are accepted again, a leftover
// reserved temporary file is removed, and once the marker exists a retry
// changes nothing. It never replays a submission over later user edits:
// after completion only the marker is consulted, and without a marker any
// file that is neither stock nor the submission blocks the run.
//
// # Content never leaves
//
// File content and the payload never appear in errors, logs or the output
// of native setup (which is captured and discarded). Errors and the
// Options.Log lines name only a step, a file name and an error class.
package setuprunner
