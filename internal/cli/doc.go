// Package cli owns the occ command tree: the root command, its
// subcommands (server, worker, migrate, workspace-setup, install-self, version), how each turns flags,
// environment and config file into a config.Config, and the exit codes.
//
// Exit codes: 0 success, 1 the command ran and failed (a runtime error),
// 2 the command was not run as written (unknown command or flag, bad
// argument, invalid configuration). Errors are printed once, to standard
// error, as "occ: <message>"; cobra's own error and usage printing is
// turned off so nothing is said twice. The one exception is
// workspace-setup, whose every failure prints exactly
// WORKSPACE_SETUP_FAILED and exits 1, so that no detail of a workspace's
// content can reach a container log.
//
// This package wires; it holds no behaviour of its own. The server and
// the store are reached through the small deps struct so tests run the
// real command tree against fakes.
package cli
