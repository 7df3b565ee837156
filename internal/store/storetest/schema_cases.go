package storetest

import (
	"database/sql"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// These cases go around the Store, with raw SQL, to prove that the schema
// itself refuses what must never be stored, whatever code writes to it.

const insertSetupSQL = `INSERT INTO workspace_setups (id, namespace_id, agent_id, defaults_id, files, completed) VALUES (?, ?, ?, ?, ?, ?)`

// rawSetup is one workspace_setups row for raw inserts; nil pointers are
// NULL.
type rawSetup struct {
	id         string
	defaultsID *string
	files      *string
	completed  bool
}

func str(s string) *string { return &s }

func insertSetup(t *testing.T, h Harness, a store.Agent, r rawSetup) error {
	t.Helper()
	var defaults, files any
	if r.defaultsID != nil {
		defaults = *r.defaultsID
	}
	if r.files != nil {
		files = *r.files
	}
	return rawExec(t, h, insertSetupSQL, r.id, a.NamespaceID, a.ID, defaults, files, r.completed)
}

func validSetup() rawSetup {
	return rawSetup{id: ids.New(ids.WorkspaceSetup), defaultsID: str(defaultsID), files: str(`{"AGENTS.md":"hello"}`)}
}

// jsonString is s as a JSON string literal (s holds no quotes or backslashes).
func jsonString(s string) string { return `"` + s + `"` }

var schemaCases = []testCase{
	{"Schema/WorkspaceSetupChecks", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		e := "é" // two UTF-8 bytes
		tests := []struct {
			name   string
			modify func(r *rawSetup)
			ok     bool
		}{
			{"valid", func(r *rawSetup) {}, true},
			{"no defaults id", func(r *rawSetup) { r.defaultsID = nil }, true},
			{"defaults id uppercase", func(r *rawSetup) { r.defaultsID = str(strings.ToUpper(defaultsID)) }, false},
			{"defaults id 63 chars", func(r *rawSetup) { r.defaultsID = str(defaultsID[:63]) }, false},
			{"defaults id 65 chars", func(r *rawSetup) { r.defaultsID = str(defaultsID + "0") }, false},
			{"defaults id not hex", func(r *rawSetup) { r.defaultsID = str("g" + defaultsID[1:]) }, false},
			{"defaults id empty", func(r *rawSetup) { r.defaultsID = str("") }, false},
			{"defaults id with newline", func(r *rawSetup) { r.defaultsID = str(defaultsID[:63] + "\n") }, false},
			{"files NULL while pending", func(r *rawSetup) { r.files = nil }, false},
			{"files {}", func(r *rawSetup) { r.files = str(`{}`) }, false},
			{"files { } with space", func(r *rawSetup) { r.files = str(`{ }`) }, false},
			{"files an array", func(r *rawSetup) { r.files = str(`["AGENTS.md"]`) }, false},
			{"files a string", func(r *rawSetup) { r.files = str(`"AGENTS.md"`) }, false},
			{"unknown key", func(r *rawSetup) { r.files = str(`{"MEMORY.md":"x"}`) }, false},
			{"unknown key beside a known one", func(r *rawSetup) { r.files = str(`{"AGENTS.md":"x","agents.md":"y"}`) }, false},
			{"number value", func(r *rawSetup) { r.files = str(`{"SOUL.md":1}`) }, false},
			{"null value", func(r *rawSetup) { r.files = str(`{"SOUL.md":null}`) }, false},
			{"object value", func(r *rawSetup) { r.files = str(`{"SOUL.md":{"a":"b"}}`) }, false},
			{"all four files, one empty", func(r *rawSetup) {
				r.files = str(`{"AGENTS.md":"a","SOUL.md":"","IDENTITY.md":"c","USER.md":"d"}`)
			}, true},
			{"16384 bytes", func(r *rawSetup) { r.files = str(`{"USER.md":` + jsonString(strings.Repeat(e, 8192)) + `}`) }, true},
			{"16385 bytes", func(r *rawSetup) { r.files = str(`{"USER.md":` + jsonString(strings.Repeat(e, 8192)+"a") + `}`) }, false},
			// The limit is on the decoded text, not on its JSON spelling.
			{"16384 escaped bytes", func(r *rawSetup) { r.files = str(`{"USER.md":"` + strings.Repeat(`\n`, 16384) + `"}`) }, true},
			{"16385 escaped bytes", func(r *rawSetup) { r.files = str(`{"USER.md":"` + strings.Repeat(`\n`, 16385) + `"}`) }, false},
			{"id empty", func(r *rawSetup) { r.id = "" }, false},
			{"id 200 chars", func(r *rawSetup) { r.id = strings.Repeat(e, 200) }, true},
			{"id 201 chars", func(r *rawSetup) { r.id = strings.Repeat("x", 201) }, false},
		}
		for _, tt := range tests {
			a := f.agent()
			r := validSetup()
			tt.modify(&r)
			err := insertSetup(t, h, a, r)
			if tt.ok {
				if err != nil {
					t.Errorf("insert setup %s: %v, want success", tt.name, err)
				}
				continue
			}
			wantRefused(t, h, "insert setup "+tt.name, err, ruleCheck)
		}
	}},
	{"Schema/WorkspaceSetupCompletedCheck", func(t *testing.T, h Harness) {
		// The CHECK alone (triggers dropped inside a transaction that is
		// rolled back): completed rows have no files, pending rows do.
		f := newFixture(t, h)
		a := f.agent()
		c := ctx(t)
		tx, err := h.DB.BeginTx(c, nil)
		must(t, "begin", err)
		defer func() { _ = tx.Rollback() }()
		drops := []string{`DROP TRIGGER workspace_setups_insert_guard`, `DROP TRIGGER workspace_setups_update_guard`}
		if h.Engine == "postgres" {
			drops = []string{`DROP TRIGGER workspace_setups_guard ON workspace_setups`}
		}
		for _, q := range drops {
			_, err := tx.ExecContext(c, q)
			must(t, q, err)
		}
		try := func(name string, r rawSetup, ok bool) {
			t.Helper()
			// A savepoint keeps a PostgreSQL transaction usable after an error.
			_, err := tx.ExecContext(c, `SAVEPOINT s`)
			must(t, "savepoint", err)
			var files any
			if r.files != nil {
				files = *r.files
			}
			_, err = tx.ExecContext(c, rebind(h.Engine, insertSetupSQL), r.id, a.NamespaceID, a.ID, nil, files, r.completed)
			if ok {
				if err != nil {
					t.Errorf("%s: %v, want success", name, err)
				}
			} else {
				wantRefused(t, h, name, err, ruleCheck)
			}
			_, err = tx.ExecContext(c, `ROLLBACK TO SAVEPOINT s`)
			must(t, "rollback to savepoint", err)
		}
		try("completed with files", rawSetup{id: "ws-1", files: str(`{"AGENTS.md":"x"}`), completed: true}, false)
		try("pending without files", rawSetup{id: "ws-2"}, false)
		try("completed without files", rawSetup{id: "ws-3", completed: true}, true)
	}},
	{"Schema/WorkspaceSetupInsertTriggers", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		active := f.agent()
		cfg := f.configuration(f.namespace())
		deleting := f.newAgent(cfg)
		deleting.Status = store.AgentDeleting
		must(t, "CreateAgent deleting", h.Store.CreateAgent(ctx(t), deleting, nil))
		missing := f.newAgent(cfg) // never stored

		r := validSetup()
		r.files, r.completed = nil, true // would satisfy the CHECK: only the trigger refuses
		wantRefused(t, h, "insert a completed setup", insertSetup(t, h, active, r), ruleTrigger)
		wantRefused(t, h, "insert a setup for a deleting agent", insertSetup(t, h, deleting, validSetup()), ruleTrigger)
		wantRefused(t, h, "insert a setup for a missing agent", insertSetup(t, h, missing, validSetup()), ruleTrigger)
		if n := rawCount(t, h, `SELECT count(*) FROM workspace_setups`); n != 0 {
			t.Errorf("workspace_setups has %d rows, want 0", n)
		}
		must(t, "insert a pending setup for an active agent", insertSetup(t, h, active, validSetup()))
	}},
	{"Schema/WorkspaceSetupUpdateTriggers", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		other := f.agent()
		pending := func() (store.Agent, string) {
			a := f.agent()
			r := validSetup()
			must(t, "insert setup", insertSetup(t, h, a, r))
			return a, r.id
		}
		tests := []struct {
			name string
			set  string
			args func(a store.Agent) []any
		}{
			{"change id", `id = ?`, func(store.Agent) []any { return []any{ids.New(ids.WorkspaceSetup)} }},
			{"change namespace_id", `namespace_id = ?`, func(store.Agent) []any { return []any{other.NamespaceID} }},
			{"change agent_id", `agent_id = ?`, func(store.Agent) []any { return []any{other.ID} }},
			{"change defaults_id", `defaults_id = ?`, func(store.Agent) []any { return []any{strings.Repeat("0", 64)} }},
			{"clear defaults_id", `defaults_id = NULL`, func(store.Agent) []any { return nil }},
			{"change pending files", `files = ?`, func(store.Agent) []any { return []any{`{"SOUL.md":"changed"}`} }},
			{"complete but keep files", `completed = TRUE`, func(store.Agent) []any { return nil }},
		}
		for _, tt := range tests {
			a, id := pending()
			args := append(tt.args(a), id)
			err := rawExec(t, h, `UPDATE workspace_setups SET `+tt.set+` WHERE id = ?`, args...)
			wantRefused(t, h, "update pending setup: "+tt.name, err, ruleTrigger)
		}

		// pending → completed with files cleared is the one allowed change.
		a, id := pending()
		must(t, "complete a pending setup", rawExec(t, h, `UPDATE workspace_setups SET completed = TRUE, files = NULL WHERE id = ?`, id))
		setup, err := h.Store.GetWorkspaceSetup(ctx(t), a.NamespaceID, a.ID)
		must(t, "GetWorkspaceSetup", err)
		if !setup.Completed || setup.Files != nil {
			t.Errorf("after completion: Completed=%v Files=%v, want true and nil", setup.Completed, setup.Files)
		}

		// A completed row is fully immutable, even a no-op update.
		for _, tt := range []struct{ name, set string }{
			{"reopen", `completed = FALSE, files = '{"AGENTS.md":"x"}'`},
			{"set files", `files = '{"AGENTS.md":"x"}'`},
			{"no-op", `completed = TRUE`},
			{"change defaults_id", `defaults_id = NULL`},
		} {
			err := rawExec(t, h, `UPDATE workspace_setups SET `+tt.set+` WHERE id = ?`, id)
			wantRefused(t, h, "update completed setup: "+tt.name, err, ruleTrigger)
		}
	}},
	{"Schema/AuditEventsAppendOnly", func(t *testing.T, h Harness) {
		e := auditEvent(1)
		must(t, "AppendAuditEvent", h.Store.AppendAuditEvent(ctx(t), e))
		wantRefused(t, h, "UPDATE audit_events", rawExec(t, h, `UPDATE audit_events SET outcome = 'failure' WHERE id = ?`, e.ID), ruleTrigger)
		wantRefused(t, h, "DELETE one audit event", rawExec(t, h, `DELETE FROM audit_events WHERE id = ?`, e.ID), ruleTrigger)
		wantRefused(t, h, "DELETE all audit events", rawExec(t, h, `DELETE FROM audit_events`), ruleTrigger)
		if h.Engine == "postgres" {
			wantRefused(t, h, "TRUNCATE audit_events", rawExec(t, h, `TRUNCATE audit_events`), ruleTrigger)
		}
		got, err := h.Store.ListAuditEvents(ctx(t), store.AuditFilter{}, nil, 10)
		must(t, "ListAuditEvents", err)
		check(t, "audit log after refused changes", []store.AuditEvent{storedEvent(e)}, got)
	}},
	{"Schema/AgentRevisionsImmutable", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a := f.agent()
		rev := ids.New(ids.Revision)
		must(t, "insert revision", rawExec(t, h, `INSERT INTO agent_revisions
			(id, namespace_id, agent_id, revision_number, configuration_id, configuration_kind,
			 configuration_generation, configuration, compute_driver_id, created_by, created_at)
			VALUES (?, ?, ?, 1, ?, 'agent', 1, '{"model":"x"}', 'local', 'usr_1', '2026-03-08T07:00:00.000000Z')`,
			rev, a.NamespaceID, a.ID, a.ConfigurationID))
		for _, set := range []string{`revision_number = 2`, `configuration = '{}'`, `created_by = created_by`} {
			err := rawExec(t, h, `UPDATE agent_revisions SET `+set+` WHERE id = ?`, rev)
			wantRefused(t, h, "UPDATE agent_revisions SET "+set, err, ruleTrigger)
		}
		wantRefused(t, h, "insert a duplicate revision number", rawExec(t, h, `INSERT INTO agent_revisions
			(id, namespace_id, agent_id, revision_number, configuration_id, configuration_kind,
			 configuration_generation, configuration, compute_driver_id, created_by, created_at)
			VALUES (?, ?, ?, 1, ?, 'agent', 1, '{}', 'local', 'usr_1', '2026-03-08T07:00:00.000000Z')`,
			ids.New(ids.Revision), a.NamespaceID, a.ID, a.ConfigurationID), ruleUnique)
		// Revisions go with their Agent.
		must(t, "delete agent", rawExec(t, h, `DELETE FROM agents WHERE id = ?`, a.ID))
		if n := rawCount(t, h, `SELECT count(*) FROM agent_revisions WHERE id = ?`, rev); n != 0 {
			t.Errorf("agent_revisions still has the deleted agent's revision")
		}
	}},
	{"Schema/TimeEncoding", func(t *testing.T, h Harness) {
		// SQLite keeps times as fixed-width UTC text (so text order is time
		// order); PostgreSQL as timestamptz. Either way: UTC, microseconds.
		f := newFixture(t, h)
		ns := f.namespace()
		want := ns.CreatedAt
		row := h.DB.QueryRowContext(ctx(t), rebind(h.Engine, `SELECT created_at FROM namespaces WHERE id = ?`), ns.ID)
		if h.Engine == "postgres" {
			var got time.Time
			must(t, "scan created_at", row.Scan(&got))
			if !got.Equal(want) {
				t.Errorf("created_at = %v, want %v", got, want)
			}
			return
		}
		var got sql.NullString
		must(t, "scan created_at", row.Scan(&got))
		if w := want.Format("2006-01-02T15:04:05.000000Z"); got.String != w {
			t.Errorf("created_at stored as %q, want %q", got.String, w)
		}
	}},
}
