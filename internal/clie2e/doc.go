// Package clie2e holds, in its tests only, the end-to-end tests of occ's
// client commands (occ login, occ agent …, occ files …; docs/cli.md): each
// test starts a real `occ server` process on 127.0.0.1 with SQLite in a
// temporary directory and runs the occ command tree as separate processes
// against it (the test binary re-executed as occ), checking exit codes,
// standard output (golden files in testdata, refreshed with -update) and
// standard error.
//
// One test runs an Agent on the local Compute driver with a real OpenClaw
// gateway (the file commands need one); it is the only gateway this
// package starts, so scripts/test.sh runs the package in its own step.
// Every process runs with its working directory under a gwtest.GuardedDir,
// so none outlives the test binary.
package clie2e
