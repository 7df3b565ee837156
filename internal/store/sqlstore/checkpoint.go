package sqlstore

import (
	"context"
	"errors"
	"time"
)

// This file: SQLite's WAL checkpoints, off the request path.
//
// By default SQLite checkpoints in the connection whose commit takes the
// WAL past 1,000 pages: that commit then copies the WAL into occ.db and
// syncs both files before it returns, 3-6 ms instead of about 0.1 ms, once
// every few hundred audit appends (measured: docs/performance.md), which
// is what a file PUT's p99 then shows. Every connection therefore runs with
// wal_autocheckpoint(0) (sqliteDSN), and the owning Store runs a PASSIVE
// checkpoint from a goroutine of its own every walCheckpointInterval. A
// PASSIVE checkpoint takes no lock that readers or writers wait for; it
// copies what no reader still needs.
//
// Failure semantics: nothing waits for a checkpoint. One that fails, or
// cannot copy everything (a reader of an older snapshot), is retried at the
// next tick; meanwhile the WAL holds the frames and reads stay correct.
// With synchronous=NORMAL a checkpoint is also when the WAL is synced, so a
// power cut loses at most the commits of about the last interval (with
// SQLite's default, everything since the last 1,000 pages, however old).
// The erasure checkpoint (erase.go) and SQLite's own at the last close
// still run as before.

// walCheckpointInterval is how often the store checkpoints (a variable for
// tests).
var walCheckpointInterval = time.Second

// checkpointTimeout bounds one background checkpoint: it copies at most the
// frames written since the last one, so only a disk that stopped answering
// reaches it.
const checkpointTimeout = 30 * time.Second

// checkpointer is the owning Store's checkpoint goroutine.
type checkpointer struct {
	stop chan struct{}
	done chan struct{}
}

// startCheckpoints starts s's checkpoint goroutine (SQLite only); Close
// stops it.
func (s *Store) startCheckpoints() {
	c := &checkpointer{stop: make(chan struct{}), done: make(chan struct{})}
	s.checkpoints = c
	interval := walCheckpointInterval
	go func() {
		defer close(c.done)
		t := time.NewTicker(interval)
		defer t.Stop()
		for {
			select {
			case <-c.stop:
				return
			case <-t.C:
				ctx, cancel := context.WithTimeout(context.Background(), checkpointTimeout)
				_ = s.checkpointPassive(ctx)
				cancel()
			}
		}
	}()
}

// stopCheckpoints stops the checkpoint goroutine and waits for it: a
// checkpoint in progress finishes first.
func (s *Store) stopCheckpoints() {
	if s.checkpoints == nil {
		return
	}
	close(s.checkpoints.stop)
	<-s.checkpoints.done
	s.checkpoints = nil
}

// checkpointPassive runs one PASSIVE checkpoint; one that could not copy
// every frame is no error (the next tick copies the rest).
func (s *Store) checkpointPassive(ctx context.Context) error {
	_, err := s.walCheckpoint(ctx, "PASSIVE")
	return s.dbErr("checkpoint", err)
}

// walCheckpoint runs PRAGMA wal_checkpoint in mode (PASSIVE or TRUNCATE, a
// constant of the caller's) and returns SQLite's busy flag: set when a
// TRUNCATE checkpoint was kept from finishing (by a reader of an older
// snapshot, past the busy timeout); a PASSIVE one never sets it.
//
// This process's checkpoints run one at a time: SQLite answers a
// checkpoint that starts while another is running with SQLITE_BUSY, which
// the pragma reports as busy, so a TRUNCATE checkpoint (the erasure's,
// Checkpoint's) failed whenever it met the background PASSIVE one (the
// bench's checkpoint after seeding did, copying 39 MB). A checkpoint of
// another process can still make it busy.
func (s *Store) walCheckpoint(ctx context.Context, mode string) (busy bool, err error) {
	s.checkpointing.Lock()
	defer s.checkpointing.Unlock()
	var b, logFrames, checkpointed int
	err = s.db.QueryRowContext(ctx, `PRAGMA wal_checkpoint(`+mode+`)`).Scan(&b, &logFrames, &checkpointed)
	return b != 0, err
}

// Checkpoint copies every WAL frame into occ.db and truncates occ.db-wal,
// waiting (busy timeout) for readers of older snapshots; on PostgreSQL it
// does nothing. The background checkpoints copy a little at a time; the
// erasure (erase.go) calls this so that erased bytes leave occ.db-wal at
// once, and the benchmarks after seeding, so that their first measurements
// do not share the machine with the copying of the seed. A checkpoint that
// could not complete is an error, and loses nothing: the frames stay in
// the WAL for the next one.
func (s *Store) Checkpoint(ctx context.Context) error {
	if s.d.engine() != EngineSQLite {
		return nil
	}
	busy, err := s.walCheckpoint(ctx, "TRUNCATE")
	if err != nil {
		return s.dbErr("checkpoint", err)
	}
	if busy {
		return errors.New("sqlstore: the checkpoint could not complete (a reader of an older snapshot, or another process checkpointing)")
	}
	return nil
}
