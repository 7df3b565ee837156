// Package deptest holds the test that enforces OCC's dependency rule: the
// table "Must not depend on" in docs/architecture.md. The test reads that
// table and the module's import graph (`go list -deps`), so the rule has
// one statement that both people and the build read. It has no non-test
// code.
package deptest
