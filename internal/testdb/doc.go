// Package testdb owns the databases that tests run against: a fresh,
// migrated SQLite file per call, and a fresh PostgreSQL database per call,
// cloned from a template that is migrated once per test process. It is test
// support only; production code never imports it.
//
// PostgreSQL tests need OCC_TEST_POSTGRES_URL, a URL of a server on which the
// user may create databases (scripts/testenv/postgres.sh start prints one).
// Without it Postgres skips the test, except under CI=true, where it fails:
// a CI run that silently skipped half of the store tests would prove nothing.
//
// Database names: every database a process creates is named
// occt_<run>_..., where <run> is random per process, and the process holds a
// PostgreSQL advisory lock keyed by <run> for as long as it lives. Clones are
// dropped in t.Cleanup; the template, and anything a crashed process left
// behind, is dropped by a later process once the owner's lock is free.
package testdb
