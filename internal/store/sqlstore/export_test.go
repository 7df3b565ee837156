package sqlstore

import (
	"context"
	"database/sql"
	"testing"
)

// MigrateDownForTest rolls every migration back, so tests can prove the
// Down sections drop everything the Up sections create.
func MigrateDownForTest(ctx context.Context, s *Store) error {
	p, err := s.migrationProvider()
	if err != nil {
		return err
	}
	_, err = p.DownTo(ctx, 0)
	return err
}

// RecordQueriesForTest returns a copy of s that passes every query (as
// sent to the engine, placeholders rebound) and its arguments to rec before
// running it; the query-plan test explains exactly what the store runs.
func RecordQueriesForTest(s *Store, rec func(query string, args []any)) *Store {
	c := *s
	c.q = recordingQuerier{inner: s.q, rec: rec}
	return &c
}

type recordingQuerier struct {
	inner querier
	rec   func(string, []any)
}

func (r recordingQuerier) ExecContext(ctx context.Context, q string, args ...any) (sql.Result, error) {
	r.rec(q, args)
	return r.inner.ExecContext(ctx, q, args...)
}

func (r recordingQuerier) QueryContext(ctx context.Context, q string, args ...any) (*sql.Rows, error) {
	r.rec(q, args)
	return r.inner.QueryContext(ctx, q, args...)
}

func (r recordingQuerier) QueryRowContext(ctx context.Context, q string, args ...any) *sql.Row {
	r.rec(q, args)
	return r.inner.QueryRowContext(ctx, q, args...)
}

// WithoutWriteGateForTest returns a copy of s whose writers queue on the
// database's own locks alone (SQLite's lock, PostgreSQL's row lock on the
// audit chain head), as before the write gates: the baseline of
// BenchmarkAppendAuditEventParallel.
func WithoutWriteGateForTest(s *Store) *Store {
	c := *s
	c.writers = nil
	c.appends = nil
	c.head = nil // its appends in one statement need the gate
	c.w = nil    // and on any pooled connection, as before the writer
	return &c
}

// HoldWriteGateForTest takes s's SQLite write gate, and only the gate (no
// transaction, so SQLite's own lock stays free), until release is called.
func HoldWriteGateForTest(t testing.TB, s *Store) (release func()) {
	t.Helper()
	if err := s.writers.acquire(t.Context()); err != nil {
		t.Fatal(err)
	}
	return s.writers.release
}

// CommitCheckpointsForTest makes s checkpoint as SQLite does by default,
// in the connection whose commit takes the WAL past 1,000 pages, instead of
// in the background: the baseline of BenchmarkAppendAuditEvent. It stops
// the checkpoint goroutine and sets the pragma on the writer, the one
// connection that commits.
func CommitCheckpointsForTest(ctx context.Context, s *Store) error {
	s.stopCheckpoints()
	_, err := s.w.db.ExecContext(ctx, `PRAGMA wal_autocheckpoint(1000)`)
	return err
}

// SnapshotQueryForTest is the read cache's snapshot query (readcache.go),
// which the query-plan test leaves out: it reads no table.
const SnapshotQueryForTest = snapshotQuery

// SnapshotsForTest is how many snapshots s's read cache has asked the
// database for (0 without a read cache).
func SnapshotsForTest(s *Store) uint64 {
	if s.reads == nil {
		return 0
	}
	return s.reads.snapshots.Load()
}

// SetActiveRevisionForTest points the Agent at the revision id, as an
// activation does, without the rest of the activation.
func SetActiveRevisionForTest(ctx context.Context, s *Store, namespaceID, agentID, id string) error {
	_, err := s.exec(ctx, `UPDATE agents SET active_revision_id = ? WHERE namespace_id = ? AND id = ?`, id, namespaceID, agentID)
	return err
}

// WithoutKnownHeadForTest returns a copy of s whose audit appends always
// read the chain head in a transaction: the baseline of the one-statement
// append on PostgreSQL (BenchmarkAppendAuditEvent's "postgres-transaction").
func WithoutKnownHeadForTest(s *Store) *Store {
	c := *s
	c.head = nil
	return &c
}
