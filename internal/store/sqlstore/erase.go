package sqlstore

import (
	"context"
	"sync/atomic"
	"time"
)

// This file: making erased staged files unreadable in the SQLite files.
//
// Staged initial workspace files are cleared when their Agent's first
// revision activates and deleted with an undeployed (or any) Agent. A
// cleared row's bytes would otherwise survive in two places: free space of
// occ.db's pages, and older frames of occ.db-wal. secure_delete (set on
// every connection, see sqliteDSN) zeroes freed content in the page images;
// a TRUNCATE checkpoint after the clearing transaction commits copies those
// zeroed pages into occ.db and truncates occ.db-wal to zero bytes, so no
// file of the data directory still holds them.
//
// Failure semantics: the clearing transaction has committed before the
// checkpoint runs, so a checkpoint that cannot finish (a long reader keeps
// an old snapshot past the busy timeout, an I/O error) does not fail the
// operation; it is remembered and retried after every later commit until
// one succeeds (SQLite's own checkpoint when the last connection closes
// also removes the WAL). PostgreSQL keeps old row versions until VACUUM;
// what an operator runs is in docs/reliability.md.

// eraseState is shared by a Store and its transaction-bound copies.
type eraseState struct {
	// pending: a checkpoint after an erasure has not completed yet.
	pending atomic.Bool
}

// eraseCheckpointTimeout bounds one checkpoint after an erasure. It runs
// after the commit, so it must not depend on the caller's context.
const eraseCheckpointTimeout = 15 * time.Second

// markErased records that staged file bytes were cleared: in a transaction,
// the checkpoint runs after its commit (inTx); outside one, at once.
func (s *Store) markErased() {
	if s.d.engine() != EngineSQLite || s.erase == nil {
		return
	}
	if s.erased != nil {
		*s.erased = true
		return
	}
	s.erase.pending.Store(true)
}

// afterCommit runs the erasure checkpoint when the committed transaction
// cleared staged files, or an earlier one could not finish.
func (s *Store) afterCommit(ctx context.Context, erased bool) {
	if s.d.engine() != EngineSQLite || s.erase == nil {
		return
	}
	if erased {
		s.erase.pending.Store(true)
	}
	if !s.erase.pending.Load() {
		return
	}
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), eraseCheckpointTimeout)
	defer cancel()
	if s.Checkpoint(cctx) == nil {
		s.erase.pending.Store(false)
	}
}
