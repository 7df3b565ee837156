package sqlstore

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// openCheckpointTest opens a migrated SQLite store in a new directory with
// the given checkpoint interval and returns it with its database file's
// path.
func openCheckpointTest(t *testing.T, interval time.Duration) (*Store, string) {
	t.Helper()
	prev := walCheckpointInterval
	walCheckpointInterval = interval
	t.Cleanup(func() { walCheckpointInterval = prev })
	dir := t.TempDir()
	ctx := context.Background()
	s, err := Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	return s, filepath.Join(dir, DefaultSQLiteFile)
}

// appendEvents commits n audit appends, each its own transaction.
func appendEvents(t *testing.T, s *Store, n int) {
	t.Helper()
	for range n {
		err := s.AppendAuditEvent(context.Background(), store.AuditEvent{ID: ids.New(ids.Audit), OccurredAt: time.Now(),
			Kind: store.AuditMutation, ActorID: "usr_test", Action: "workspace_file.write", Outcome: store.OutcomeAttempted,
			Resource: store.AuditResource{Kind: store.KindAgent, ID: "agt_test", NamespaceID: "ns_test"}})
		if err != nil {
			t.Fatal(err)
		}
	}
}

func fileSize(t *testing.T, path string) int64 {
	t.Helper()
	fi, err := os.Stat(path)
	if err != nil {
		t.Fatal(err)
	}
	return fi.Size()
}

// TestCommitsDoNotCheckpoint: with the store's own checkpoints held off,
// commits far past SQLite's default threshold (1,000 WAL pages) leave
// occ.db as it was: no request pays for a checkpoint. One checkpoint then
// copies the WAL into occ.db.
func TestCommitsDoNotCheckpoint(t *testing.T) {
	s, db := openCheckpointTest(t, time.Hour)
	before := fileSize(t, db)
	appendEvents(t, s, 1500)
	if wal := fileSize(t, db+"-wal"); wal < 1000*4096 {
		t.Fatalf("WAL is %d bytes after the appends; want more than 1,000 pages (the test writes too little)", wal)
	}
	if after := fileSize(t, db); after != before {
		t.Fatalf("occ.db grew from %d to %d bytes: a commit checkpointed", before, after)
	}
	if err := s.checkpointPassive(context.Background()); err != nil {
		t.Fatal(err)
	}
	if after := fileSize(t, db); after <= before {
		t.Fatalf("occ.db is %d bytes after the checkpoint, %d before: nothing was copied", after, before)
	}
}

// TestBackgroundCheckpoints: the store's goroutine checkpoints on its own,
// and Close stops it.
func TestBackgroundCheckpoints(t *testing.T) {
	s, db := openCheckpointTest(t, 20*time.Millisecond)
	// Let a tick take what the migrations wrote, then measure.
	time.Sleep(100 * time.Millisecond)
	before := fileSize(t, db)
	appendEvents(t, s, 300)
	deadline := time.Now().Add(10 * time.Second)
	for fileSize(t, db) <= before {
		if time.Now().After(deadline) {
			t.Fatalf("occ.db still %d bytes 10 s after the appends: no background checkpoint", before)
		}
		time.Sleep(20 * time.Millisecond)
	}
	c := s.checkpoints
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.done:
	default:
		t.Fatal("Close returned while the checkpoint goroutine runs")
	}
}

// TestCheckpointEmptiesTheWAL: Checkpoint copies every frame into occ.db
// and truncates occ.db-wal, and the data reads back afterwards.
func TestCheckpointEmptiesTheWAL(t *testing.T) {
	s, db := openCheckpointTest(t, time.Hour)
	before := fileSize(t, db)
	appendEvents(t, s, 200)
	if wal := fileSize(t, db+"-wal"); wal == 0 {
		t.Fatal("the WAL is empty after the appends (the test writes nothing)")
	}
	if err := s.Checkpoint(context.Background()); err != nil {
		t.Fatal(err)
	}
	if wal := fileSize(t, db+"-wal"); wal != 0 {
		t.Fatalf("the WAL is %d bytes after Checkpoint; want 0", wal)
	}
	if after := fileSize(t, db); after <= before {
		t.Fatalf("occ.db is %d bytes after Checkpoint, %d before: nothing was copied", after, before)
	}
	events, err := s.ListAuditEvents(context.Background(), store.AuditFilter{}, nil, 500)
	if err != nil {
		t.Fatal(err)
	}
	if len(events) != 200 {
		t.Fatalf("%d audit events read back after Checkpoint; want 200", len(events))
	}
}

// TestCheckpointWaitsForTheBackgroundOne: with the background checkpoint
// running every millisecond, Checkpoint still completes every time: it
// waits for a running checkpoint instead of meeting it (which SQLite
// answers with busy).
func TestCheckpointWaitsForTheBackgroundOne(t *testing.T) {
	s, db := openCheckpointTest(t, time.Millisecond)
	for i := range 30 {
		appendEvents(t, s, 50)
		if err := s.Checkpoint(context.Background()); err != nil {
			t.Fatalf("round %d: %v", i, err)
		}
		if wal := fileSize(t, db+"-wal"); wal != 0 {
			t.Fatalf("round %d: the WAL is %d bytes after Checkpoint; want 0", i, wal)
		}
	}
}
