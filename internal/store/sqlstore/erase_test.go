package sqlstore_test

import (
	"bytes"
	"context"
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
)

// filesWith lists the files under dir whose bytes contain needle.
func filesWith(t *testing.T, dir, needle string) []string {
	t.Helper()
	var hits []string
	err := filepath.WalkDir(dir, func(path string, d os.DirEntry, err error) error {
		if err != nil || d.IsDir() {
			return err
		}
		b, err := os.ReadFile(path)
		if err != nil {
			return err
		}
		if bytes.Contains(b, []byte(needle)) {
			hits = append(hits, filepath.Base(path))
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return hits
}

// stagedAgent creates an Agent with staged files that carry marker, in
// enough volume to need overflow pages (the largest file is 16 KiB).
func stagedAgent(t *testing.T, s *sqlstore.Store, marker string) (store.Agent, store.WorkspaceSetup) {
	t.Helper()
	return stagedAgentWith(t, s, marker, map[string]string{
		"AGENTS.md": "short " + marker,
		"SOUL.md":   strings.Repeat("soul text "+marker+" ", 16384/(len(marker)+12)),
		"USER.md":   marker,
	})
}

// stagedAgentWith creates an Agent with these staged files; marker names
// its Namespace.
func stagedAgentWith(t *testing.T, s *sqlstore.Store, marker string, files map[string]string) (store.Agent, store.WorkspaceSetup) {
	t.Helper()
	ctx := testCtx(t)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	ns := store.Namespace{ID: ids.New(ids.Namespace), Name: "erase-" + marker[len(marker)-6:], Status: store.NamespaceReady, CreatedAt: now, UpdatedAt: now}
	c := store.Configuration{ID: ids.New(ids.Configuration), NamespaceID: ns.ID, Name: "c", Kind: store.ConfigurationKindAgent,
		Document: json.RawMessage(`{}`), Generation: 1, CreatedAt: now, UpdatedAt: now}
	a := store.Agent{ID: ids.New(ids.Agent), NamespaceID: ns.ID, Name: "a", ConfigurationID: c.ID,
		Status: store.AgentActive, DesiredRuntimeState: store.RuntimeRunning, CreatedAt: now, UpdatedAt: now}
	ws := store.WorkspaceSetup{ID: ids.New(ids.WorkspaceSetup), NamespaceID: ns.ID, AgentID: a.ID,
		DefaultsID: fmt.Sprintf("%x", sha256.Sum256([]byte("defaults"))),
		Files:      files}
	must := func(err error) {
		t.Helper()
		if err != nil {
			t.Fatal(err)
		}
	}
	must(s.CreateNamespace(ctx, ns))
	must(s.CreateConfiguration(ctx, c))
	must(s.CreateAgent(ctx, a, &ws))
	return a, ws
}

// TestErasedStagedFilesLeaveNoBytesInTheDataDir: after activation clears
// the staged files, and after an undeployed Agent is deleted, no file of
// the data directory (occ.db, occ.db-wal, occ.db-shm) holds a byte of
// them, while the store stays open as a live server's would.
func TestErasedStagedFilesLeaveNoBytesInTheDataDir(t *testing.T) {
	cases := []struct {
		name  string
		erase func(ctx context.Context, s *sqlstore.Store, a store.Agent, ws store.WorkspaceSetup) error
	}{
		{"cleared at activation", func(ctx context.Context, s *sqlstore.Store, a store.Agent, ws store.WorkspaceSetup) error {
			_, err := s.CompleteWorkspaceSetup(ctx, a.NamespaceID, a.ID, ws.ID)
			return err
		}},
		{"deleted with an undeployed Agent", func(ctx context.Context, s *sqlstore.Store, a store.Agent, _ store.WorkspaceSetup) error {
			// What DELETE of an Agent without revision does: the setup goes
			// in the request's transaction, the Agent row later.
			return s.InTx(ctx, func(tx store.Store) error {
				_, err := tx.DeleteWorkspaceSetup(ctx, a.NamespaceID, a.ID)
				return err
			})
		}},
		{"cascaded by the Agent's removal", func(ctx context.Context, s *sqlstore.Store, a store.Agent, _ store.WorkspaceSetup) error {
			return s.DeleteAgent(ctx, a.NamespaceID, a.ID)
		}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testCtx(t)
			dir := t.TempDir()
			s := openMigrated(t, "", dir)
			marker := "ERASE-MARKER-" + ids.New("")[:8]
			a, ws := stagedAgent(t, s, marker)
			// Move the staged bytes into occ.db too, as a checkpoint
			// between staging and activation would.
			if _, err := s.DB().ExecContext(ctx, `PRAGMA wal_checkpoint(PASSIVE)`); err != nil {
				t.Fatal(err)
			}
			if hits := filesWith(t, dir, marker); len(hits) == 0 {
				t.Fatal("the staged marker is in no file before the erasure; the test would prove nothing")
			}
			// Unrelated writes after the staging, so the erasure is not
			// simply the newest thing in the WAL.
			for i := range 20 {
				if err := s.AppendAuditEvent(ctx, chainEvent(i)); err != nil {
					t.Fatal(err)
				}
			}
			if err := tc.erase(ctx, s, a, ws); err != nil {
				t.Fatal(err)
			}
			if hits := filesWith(t, dir, marker); len(hits) != 0 {
				t.Errorf("staged bytes remain in %v after the erasure", hits)
			}
			// A shorter piece of a file too: not only whole values.
			if hits := filesWith(t, dir, "soul text "+marker[:10]); len(hits) != 0 {
				t.Errorf("fragments of staged bytes remain in %v", hits)
			}
		})
	}
}
