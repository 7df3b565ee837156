package server_test

import (
	"bytes"
	"database/sql"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/workspace"
)

// sqliteFilesWith returns the files beside a SQLite store's database file
// (occ.db, occ.db-wal, occ.db-shm: the data directory) whose bytes hold
// needle, read while the store is open; nil on PostgreSQL.
func sqliteFilesWith(t *testing.T, st *sqlstore.Store, needle string) []string {
	t.Helper()
	if st.Engine() != sqlstore.EngineSQLite {
		return nil
	}
	var seq int
	var name, file string
	if err := st.DB().QueryRowContext(t.Context(), `PRAGMA database_list`).Scan(&seq, &name, &file); err != nil {
		t.Fatal(err)
	}
	entries, err := os.ReadDir(filepath.Dir(file))
	if err != nil {
		t.Fatal(err)
	}
	var hits []string
	for _, e := range entries {
		if e.IsDir() {
			continue
		}
		b, err := os.ReadFile(filepath.Join(filepath.Dir(file), e.Name()))
		if err != nil {
			t.Fatal(err)
		}
		if bytes.Contains(b, []byte(needle)) {
			hits = append(hits, e.Name())
		}
	}
	return hits
}

// tablesWith returns the tables in which some row holds needle, rendering
// every column of every row as text.
func tablesWith(t *testing.T, st *sqlstore.Store, needle string) []string {
	t.Helper()
	db := st.DB()
	q := `SELECT table_name FROM information_schema.tables WHERE table_schema = current_schema() AND table_type = 'BASE TABLE'`
	if st.Engine() == "sqlite" {
		q = `SELECT name FROM sqlite_master WHERE type = 'table'`
	}
	names := queryStrings(t, db, q)
	if len(names) < 10 {
		t.Fatalf("found only %d tables: %v", len(names), names)
	}
	var hits []string
	for _, name := range names {
		rows, err := db.QueryContext(t.Context(), fmt.Sprintf(`SELECT * FROM %q`, name))
		if err != nil {
			t.Fatalf("dump %s: %v", name, err)
		}
		cols, _ := rows.Columns()
		found := false
		for rows.Next() {
			vals := make([]any, len(cols))
			ptrs := make([]any, len(cols))
			for i := range vals {
				ptrs[i] = &vals[i]
			}
			if err := rows.Scan(ptrs...); err != nil {
				t.Fatalf("scan %s: %v", name, err)
			}
			for _, v := range vals {
				var s string
				switch x := v.(type) {
				case []byte:
					s = string(x)
				default:
					s = fmt.Sprint(x)
				}
				if strings.Contains(s, needle) {
					found = true
				}
			}
		}
		if err := rows.Err(); err != nil {
			t.Fatalf("rows %s: %v", name, err)
		}
		rows.Close()
		if found {
			hits = append(hits, name)
		}
	}
	return hits
}

func queryStrings(t *testing.T, db *sql.DB, q string) []string {
	t.Helper()
	rows, err := db.QueryContext(t.Context(), q)
	if err != nil {
		t.Fatalf("%s: %v", q, err)
	}
	defer rows.Close()
	var out []string
	for rows.Next() {
		var s string
		if err := rows.Scan(&s); err != nil {
			t.Fatal(err)
		}
		out = append(out, s)
	}
	return out
}

// TestStagedFilesStayPrivate creates an Agent whose files carry a unique
// marker and searches every table, every API response of the flow, the
// log output and the audit records for it: before activation it is only
// in the workspace setups table, afterwards nowhere.
func TestStagedFilesStayPrivate(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		var logs bytes.Buffer
		logger := slog.New(slog.NewJSONHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		d := fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true}})
		e := &deployEnv{env: newEnvWith(t, st, server.Options{Driver: d, Logger: logger}), driver: d}
		var ns idOnly
		e.must("POST", "/namespaces", map[string]string{"name": "private"}, e.admin, 201, &ns)
		e.ns = ns.ID
		e.runUntil(func() bool {
			var got struct{ Status string }
			e.must("GET", "/namespaces/"+ns.ID, nil, e.admin, 200, &got)
			return got.Status == "ready"
		})
		var c idOnly
		e.must("POST", "/namespaces/"+ns.ID+"/configurations", map[string]any{"name": "base", "kind": "agent", "document": map[string]any{}}, e.admin, 201, &c)
		e.cfg = c.ID

		marker := "MARKER-" + strings.ReplaceAll(t.Name(), "/", "-") + "-7f3a9c"
		files := map[string]string{"AGENTS.md": "agents " + marker, "SOUL.md": marker, "IDENTITY.md": "", "USER.md": "u" + marker + "u"}
		body := map[string]any{"name": "secretive", "configurationId": e.cfg,
			"initialWorkspaceFiles": files, "workspaceDefaultsId": workspace.DefaultsID}
		var a idOnly
		e.must("POST", "/namespaces/"+e.ns+"/agents", body, e.admin, 201, &a)
		e.must("GET", "/namespaces/"+e.ns+"/agents/"+a.ID, nil, e.admin, 200, nil)
		e.must("GET", "/namespaces/"+e.ns+"/agents", nil, e.admin, 200, nil)

		if got := tablesWith(t, st, marker); len(got) != 1 || got[0] != "workspace_setups" {
			t.Fatalf("before deployment the marker is in tables %v; want only workspace_setups", got)
		}
		rev := e.deploy(a.ID)
		e.deployment(a.ID, rev)
		e.runUntil(e.finished(a.ID, rev))
		if dd := e.deployment(a.ID, rev); dd.Status != "succeeded" {
			t.Fatalf("deployment = %+v", dd)
		}
		e.must("GET", "/namespaces/"+e.ns+"/agents/"+a.ID+"/revisions", nil, e.admin, 200, nil)
		e.must("GET", "/audit-events?limit=200", nil, e.admin, 200, nil)

		if got := tablesWith(t, st, marker); len(got) != 0 {
			t.Fatalf("after activation the marker is in tables %v; want none", got)
		}
		if got := sqliteFilesWith(t, st, marker); len(got) != 0 {
			t.Fatalf("after activation the marker is in data directory files %v; want none", got)
		}
		if strings.Contains(e.transcript.String(), marker) {
			t.Fatal("an API response of the flow contains the marker")
		}
		if logs.Len() == 0 {
			t.Fatal("no log output was captured; the search would prove nothing")
		}
		if strings.Contains(logs.String(), marker) {
			t.Fatal("the log output contains the marker")
		}
		// The driver did receive it: the search above is not vacuous.
		if got := d.Delivered(a.ID); len(got) == 0 || got[0].Files["SOUL.md"] != marker {
			t.Fatal("the driver never received the staged files")
		}
	})
}
