package sqlstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// seedAgents stores n Agents, each in its own Namespace with its own
// Configuration, every change audited, and returns them.
func seedAgents(t *testing.T, s *sqlstore.Store, n int) []store.Agent {
	t.Helper()
	ctx := testCtx(t)
	now := time.Date(2026, 12, 1, 9, 0, 0, 0, time.UTC)
	var out []store.Agent
	for i := range n {
		ns := store.Namespace{ID: ids.New(ids.Namespace), Name: fmt.Sprintf("seed-%d", i), Status: store.NamespaceReady, CreatedAt: now, UpdatedAt: now}
		c := store.Configuration{ID: ids.New(ids.Configuration), NamespaceID: ns.ID, Name: "c", Kind: store.ConfigurationKindAgent,
			Document: json.RawMessage(`{}`), Generation: 1, CreatedAt: now, UpdatedAt: now}
		a := store.Agent{ID: ids.New(ids.Agent), NamespaceID: ns.ID, Name: fmt.Sprintf("agent-%d", i), ConfigurationID: c.ID,
			Status: store.AgentActive, DesiredRuntimeState: store.RuntimeRunning, CreatedAt: now, UpdatedAt: now}
		err := s.InTx(ctx, func(tx store.Store) error {
			if err := tx.CreateNamespace(ctx, ns); err != nil {
				return err
			}
			if err := tx.CreateConfiguration(ctx, c); err != nil {
				return err
			}
			if err := tx.CreateAgent(ctx, a, nil); err != nil {
				return err
			}
			e := chainEvent(i)
			e.Resource = store.AuditResource{Kind: store.KindAgent, ID: a.ID, NamespaceID: ns.ID}
			return tx.AppendAuditEvent(ctx, e)
		})
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, a)
	}
	return out
}

// writeLoad appends audited Namespaces until stop is closed or max
// iterations, and reports how many it wrote. It must be running when the
// backup is taken for the test to mean anything.
func writeLoad(t *testing.T, s *sqlstore.Store, stop <-chan struct{}, running chan<- struct{}) func() int64 {
	var n atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	wg.Add(1)
	go func() {
		defer wg.Done()
		ctx := context.Background()
		for i := 0; i < 5000; i++ {
			select {
			case <-stop:
				return
			default:
			}
			now := time.Now().UTC()
			ns := store.Namespace{ID: ids.New(ids.Namespace), Name: fmt.Sprintf("load-%d", i), Status: store.NamespaceReady, CreatedAt: now, UpdatedAt: now}
			err := s.InTx(ctx, func(tx store.Store) error {
				if err := tx.CreateNamespace(ctx, ns); err != nil {
					return err
				}
				e := chainEvent(i)
				e.OccurredAt = now
				return tx.AppendAuditEvent(ctx, e)
			})
			if err != nil {
				t.Errorf("write load: %v", err)
				return
			}
			if n.Add(1) == 20 {
				once.Do(func() { close(running) })
			}
		}
	}()
	return func() int64 { wg.Wait(); return n.Load() }
}

// checkRestored proves a restored database serves: it migrates, its audit
// chain verifies, it holds the seeded Agents, and it accepts new writes.
func checkRestored(t *testing.T, r *sqlstore.Store, agents []store.Agent, minEvents int64) {
	t.Helper()
	ctx := testCtx(t)
	if err := r.Migrate(ctx); err != nil {
		t.Fatalf("migrate the restored database: %v", err)
	}
	res, brk, err := r.VerifyAuditChain(ctx)
	if err != nil || brk != nil {
		t.Fatalf("restored audit chain: %+v, %v, %v", res, brk, err)
	}
	if res.Chained < minEvents {
		t.Errorf("restored chain holds %d events, want at least %d", res.Chained, minEvents)
	}
	for _, a := range agents {
		page, err := r.ListAgents(ctx, a.NamespaceID, store.PageRequest{Limit: 10})
		if err != nil {
			t.Fatal(err)
		}
		want := []store.Agent{a}
		got := page.Items
		if diff := cmp.Diff(want, got, cmp.Comparer(func(x, y time.Time) bool { return x.Equal(y) })); diff != "" {
			t.Errorf("restored Agents of %s (-want +got):\n%s", a.NamespaceID, diff)
		}
	}
	if err := r.AppendAuditEvent(ctx, chainEvent(99)); err != nil {
		t.Fatalf("append to the restored chain: %v", err)
	}
	if _, brk, err := r.VerifyAuditChain(ctx); err != nil || brk != nil {
		t.Fatalf("chain after an append to the restore: %v %v", brk, err)
	}
}

// TestSQLiteBackupUnderWriteLoad takes `occ backup`'s copy from a second
// pool on the same file (as the command does beside a live server) while
// the first keeps writing, then restores it as the docs say.
func TestSQLiteBackupUnderWriteLoad(t *testing.T) {
	ctx := testCtx(t)
	dir := t.TempDir()
	live, err := sqlstore.Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	defer live.Close()
	if err := live.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	agents := seedAgents(t, live, 3)
	stop, running := make(chan struct{}), make(chan struct{})
	wait := writeLoad(t, live, stop, running)
	<-running

	tool, err := sqlstore.Open(ctx, "", dir)
	if err != nil {
		t.Fatal(err)
	}
	out := filepath.Join(t.TempDir(), "backup.db")
	berr := tool.BackupTo(ctx, out)
	_ = tool.Close()
	close(stop)
	written := wait()
	if berr != nil {
		t.Fatalf("backup: %v", berr)
	}
	if err := tool.BackupTo(ctx, out); err == nil {
		t.Error("a second backup over an existing file succeeded")
	}
	fi, err := os.Stat(out)
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("backup file: %v, mode %v; want 0600", err, fi.Mode().Perm())
	}
	t.Logf("%d audited writes ran while the backup was taken", written)

	// Restore: the copy becomes occ.db of a new data directory.
	restoreDir := t.TempDir()
	b, err := os.ReadFile(out)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(restoreDir, sqlstore.DefaultSQLiteFile), b, 0o600); err != nil {
		t.Fatal(err)
	}
	r, err := sqlstore.Open(ctx, "", restoreDir)
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	checkRestored(t, r, agents, 3+20)
}

// TestPostgresDumpRestoreUnderWriteLoad runs the documented pg_dump
// procedure (docs/reliability.md) against a database being written, and
// restores the dump into an empty database with pg_restore.
func TestPostgresDumpRestoreUnderWriteLoad(t *testing.T) {
	live, liveURL := testdb.PostgresURL(t)
	targetURL := testdb.EmptyPostgres(t)
	for _, tool := range []string{"pg_dump", "pg_restore"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is required under CI: %v", tool, err)
			}
			t.Skipf("no %s: %v", tool, err)
		}
	}
	agents := seedAgents(t, live, 3)
	stop, running := make(chan struct{}), make(chan struct{})
	wait := writeLoad(t, live, stop, running)
	<-running
	ctx := testCtx(t)
	dump := filepath.Join(t.TempDir(), "occ.dump")
	out, err := exec.CommandContext(ctx, "pg_dump", "--format=custom", "--no-owner", "--file", dump, "--dbname", libpqURL(t, liveURL)).CombinedOutput()
	close(stop)
	written := wait()
	if err != nil {
		t.Fatalf("pg_dump: %v\n%s", err, out)
	}
	t.Logf("%d audited writes ran while pg_dump ran", written)
	out, err = exec.CommandContext(ctx, "pg_restore", "--no-owner", "--exit-on-error", "--dbname", libpqURL(t, targetURL), dump).CombinedOutput()
	if err != nil {
		t.Fatalf("pg_restore: %v\n%s", err, out)
	}
	r, err := sqlstore.Open(ctx, targetURL, "")
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	checkRestored(t, r, agents, 3+20)
}

// libpqURL drops the pgx-only session parameters testdb adds (libpq's
// tools refuse unknown URI parameters).
func libpqURL(t *testing.T, raw string) string {
	u, err := url.Parse(raw)
	if err != nil {
		t.Fatal(err)
	}
	q := u.Query()
	q.Del("timezone")
	u.RawQuery = q.Encode()
	return u.String()
}
