// Package sqlstore owns OCC's SQL persistence: the one implementation of
// store.Store over database/sql, for SQLite (modernc.org/sqlite, the
// embedded default) and PostgreSQL (pgx stdlib, production), and the
// schema migrations of both engines.
//
// Queries are written once, with "?" placeholders, and run unchanged on both
// engines; everything that differs between them (placeholder syntax, time
// and JSON encoding, error classification, connection settings, the goose
// dialect) lives in dialect.go. The schema itself is written per engine in
// migrations/<engine>/, embedded in the binary and applied with goose; the two
// files must describe the same tables and rules.
//
// Besides the domain records it holds the worker's durable queue
// (controller_work: idempotent enqueue, lease-based claims guarded by a
// token, per-Agent ordering, FOR UPDATE SKIP LOCKED on PostgreSQL) and the
// activation transaction that ties a deployment's success to its workspace
// setup.
//
// The database enforces the invariants that protect private or append-only
// data even against a buggy caller: workspace setup records (shape of the
// staged files, lifecycle triggers), immutable agent revisions and the
// append-only audit log. Errors follow package store: NotFound for a missing
// row, Conflict for uniqueness, referential and lifecycle-rule clashes,
// Invalid for values a CHECK constraint refuses, Unavailable when the
// database is busy or unreachable; the driver error is kept as the Cause.
package sqlstore
