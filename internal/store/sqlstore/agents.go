package sqlstore

import (
	"bytes"
	"context"
	"database/sql"
	"errors"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// This file: Agents and their private workspace setup records.

const agentColumns = `id, namespace_id, name, configuration_id, status, desired_runtime_state,
	active_revision_id, deletion_requested_by, created_at, updated_at`

func scanAgent(r rowScanner) (store.Agent, error) {
	var a store.Agent
	var status, runtime string
	err := r.Scan(&a.ID, &a.NamespaceID, &a.Name, &a.ConfigurationID, &status, &runtime,
		optStringCol{&a.ActiveRevisionID}, optStringCol{&a.DeletionRequestedBy},
		timeCol{&a.CreatedAt}, timeCol{&a.UpdatedAt})
	a.Status, a.DesiredRuntimeState = store.AgentStatus(status), store.RuntimeState(runtime)
	return a, err
}

// CreateAgent inserts the Agent and, when setup is non-nil, its pending
// workspace setup, in one transaction (joining the caller's, if any): either
// both exist afterwards or neither does. The setup's NamespaceID and AgentID
// default to the Agent's and must match it when given. The Namespace must
// exist (NotFound) and be provisioning or ready (Conflict
// RESOURCE_CONFLICT, as the reference answers a Namespace not accepting
// new resources); its row stays share-locked until commit so that
// MarkNamespaceDeleting cannot pass its emptiness check meanwhile.
func (s *Store) CreateAgent(ctx context.Context, a store.Agent, setup *store.WorkspaceSetup) error {
	var ws store.WorkspaceSetup
	if setup != nil {
		ws = *setup
		if ws.NamespaceID == "" {
			ws.NamespaceID = a.NamespaceID
		}
		if ws.AgentID == "" {
			ws.AgentID = a.ID
		}
		if ws.NamespaceID != a.NamespaceID || ws.AgentID != a.ID {
			return errkind.New(errkind.Invalid, "the workspace setup belongs to a different agent")
		}
	}
	return s.inTx(ctx, func(tx *Store) error {
		status, err := tx.lockNamespaceForInsert(ctx, "create agent", a.NamespaceID)
		if err != nil {
			return err
		}
		if status != store.NamespaceProvisioning && status != store.NamespaceReady {
			return conflict("", "agents can only be created in a provisioning or ready namespace", nil)
		}
		_, err = tx.exec(ctx, `INSERT INTO agents (`+agentColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
			a.ID, a.NamespaceID, a.Name, a.ConfigurationID, string(a.Status), string(a.DesiredRuntimeState),
			nullString(a.ActiveRevisionID), nullString(a.DeletionRequestedBy), tx.t(a.CreatedAt), tx.t(a.UpdatedAt))
		if err != nil && tx.d.classify(err) == failUnique {
			return conflict("", "an agent with this name or id already exists in the namespace", err)
		}
		if err != nil && tx.d.classify(err) == failForeignKey {
			return conflict("", "the agent's configuration does not exist in its namespace", err)
		}
		if err != nil {
			return tx.dbErr("create agent", err)
		}
		if setup == nil {
			return nil
		}
		return tx.insertWorkspaceSetup(ctx, ws)
	})
}

// GetAgent reads one Agent, through the read cache (readcache.go).
func (s *Store) GetAgent(ctx context.Context, namespaceID, id string) (store.Agent, error) {
	return cachedRead(ctx, s, "get agent", cacheKey("agent", namespaceID, id),
		func(a store.Agent) store.Agent { return a },
		func() (store.Agent, error) { return s.getAgent(ctx, namespaceID, id) })
}

func (s *Store) getAgent(ctx context.Context, namespaceID, id string) (store.Agent, error) {
	a, err := scanAgent(s.queryRow(ctx, `SELECT `+agentColumns+` FROM agents WHERE namespace_id = ? AND id = ?`, namespaceID, id))
	return a, s.getErr("get agent", "agent", err)
}

// GetAgentFor reads the Agent, its Namespace and its active revision in
// one query (every operation on an Agent starts with it, so it is one
// round trip instead of three). It opens no transaction of its own (on
// SQLite that would take the write lock for a read); inside the caller's
// transaction the query sees that transaction. A dangling active revision
// id (no row) leaves ActiveRevision nil rather than failing: the caller
// decides what an Agent without a usable revision means. action is for the
// authorizing wrapper; the store ignores it. It reads through the read
// cache (readcache.go).
func (s *Store) GetAgentFor(ctx context.Context, _ store.Action, namespaceID, id string) (store.AgentScope, error) {
	return cachedRead(ctx, s, "get agent", cacheKey("agent scope", namespaceID, id), cloneAgentScope,
		func() (store.AgentScope, error) { return s.getAgentFor(ctx, namespaceID, id) })
}

// cloneAgentScope copies the active revision and its configuration, the
// parts of an AgentScope a caller could change under the cache.
func cloneAgentScope(a store.AgentScope) store.AgentScope {
	if a.ActiveRevision != nil {
		r := *a.ActiveRevision
		r.Configuration = bytes.Clone(r.Configuration)
		a.ActiveRevision = &r
	}
	return a
}

func (s *Store) getAgentFor(ctx context.Context, namespaceID, id string) (store.AgentScope, error) {
	var out store.AgentScope
	a, ns := &out.Agent, &out.Namespace
	var status, runtime, nsStatus string
	var rev store.Revision
	var revNumber, revGeneration sql.NullInt64
	var revCreated *time.Time
	err := s.queryRow(ctx, `SELECT a.id, a.namespace_id, a.name, a.configuration_id, a.status, a.desired_runtime_state,
			a.active_revision_id, a.deletion_requested_by, a.created_at, a.updated_at,
			n.id, n.name, n.status, n.created_at, n.updated_at,
			r.id, r.namespace_id, r.agent_id, r.revision_number, r.configuration_id, r.configuration_kind,
			r.configuration_generation, r.configuration, r.compute_driver_id, r.created_by, r.created_at
		FROM agents a
		JOIN namespaces n ON n.id = a.namespace_id
		LEFT JOIN agent_revisions r ON r.namespace_id = a.namespace_id AND r.agent_id = a.id AND r.id = a.active_revision_id
		WHERE a.namespace_id = ? AND a.id = ?`, namespaceID, id).Scan(
		&a.ID, &a.NamespaceID, &a.Name, &a.ConfigurationID, &status, &runtime,
		optStringCol{&a.ActiveRevisionID}, optStringCol{&a.DeletionRequestedBy}, timeCol{&a.CreatedAt}, timeCol{&a.UpdatedAt},
		&ns.ID, &ns.Name, &nsStatus, timeCol{&ns.CreatedAt}, timeCol{&ns.UpdatedAt},
		optStringCol{&rev.ID}, optStringCol{&rev.NamespaceID}, optStringCol{&rev.AgentID}, &revNumber,
		optStringCol{&rev.ConfigurationID}, optStringCol{&rev.ConfigurationKind}, &revGeneration, jsonCol{&rev.Configuration},
		optStringCol{&rev.ComputeDriverID}, optStringCol{&rev.CreatedBy}, optTimeCol{&revCreated})
	if err != nil {
		return store.AgentScope{}, s.getErr("get agent", "agent", err)
	}
	a.Status, a.DesiredRuntimeState = store.AgentStatus(status), store.RuntimeState(runtime)
	ns.Status = store.NamespaceStatus(nsStatus)
	if rev.ID != "" && revCreated != nil {
		rev.Number, rev.ConfigurationGeneration, rev.CreatedAt = revNumber.Int64, revGeneration.Int64, *revCreated
		out.ActiveRevision = &rev
	}
	return out, nil
}

// ListAgents returns one page of the Namespace's Agents, oldest first: on
// PostgreSQL by the index agents_namespace_created_idx; on SQLite read
// packed (packed.go) from the covering index agents_page_idx alone, whose
// expression must stay the packed form of this select list (sqlite
// migration 00006). The rows' namespace_id is the one asked for, so it is
// not read back.
// It reads through the read cache (readcache.go).
func (s *Store) ListAgents(ctx context.Context, namespaceID string, p store.PageRequest) (store.Page[store.Agent], error) {
	return cachedRead(ctx, s, "list agents", cacheKey(append([]string{"agents", namespaceID}, pageKey(p)...)...), clonePage[store.Agent],
		func() (store.Page[store.Agent], error) { return s.listAgents(ctx, namespaceID, p) })
}

func (s *Store) listAgents(ctx context.Context, namespaceID string, p store.PageRequest) (store.Page[store.Agent], error) {
	dest := func(a *store.Agent) []any {
		return []any{&a.ID, &a.Name, &a.ConfigurationID, (*string)(&a.Status), (*string)(&a.DesiredRuntimeState),
			optStringCol{&a.ActiveRevisionID}, optStringCol{&a.DeletionRequestedBy}, timeCol{&a.CreatedAt}, timeCol{&a.UpdatedAt}}
	}
	page, err := listPage(ctx, s, "list agents", into(dest),
		func(a store.Agent) store.PageCursor { return store.PageCursor{CreatedAt: a.CreatedAt, ID: a.ID} },
		`SELECT `+packedIndexed(`id, name, configuration_id, status, desired_runtime_state, active_revision_id, deletion_requested_by,
			created_at, updated_at`)+` FROM agents WHERE namespace_id = ?`, "AND", p, namespaceID)
	for i := range page.Items {
		page.Items[i].NamespaceID = namespaceID
	}
	return page, err
}

// UpdateAgent replaces the Agent's name and configuration and sets
// updated_at to a.UpdatedAt; the other fields change only through their own
// methods. An Agent being deleted is Conflict AGENT_DELETING.
func (s *Store) UpdateAgent(ctx context.Context, a store.Agent) (store.Agent, error) {
	out, err := s.updateActiveAgent(ctx, "update agent", a.NamespaceID, a.ID,
		`UPDATE agents SET name = ?, configuration_id = ?, updated_at = ?
		 WHERE namespace_id = ? AND id = ? AND status = 'active' RETURNING `+agentColumns,
		a.Name, a.ConfigurationID, s.t(a.UpdatedAt), a.NamespaceID, a.ID)
	switch {
	case err != nil && s.d.classify(err) == failUnique:
		return store.Agent{}, conflict("", "an agent with this name already exists in the namespace", err)
	case err != nil && s.d.classify(err) == failForeignKey:
		return store.Agent{}, conflict("", "the agent's configuration does not exist in its namespace", err)
	case err != nil:
		return store.Agent{}, s.dbErr("update agent", err)
	}
	return out, nil
}

// SetAgentRuntimeState records the desired runtime state. Refusing a
// deleting Agent (Conflict AGENT_DELETING) in the same statement keeps a
// late deploy from undoing MarkAgentDeleting's "stopped".
func (s *Store) SetAgentRuntimeState(ctx context.Context, namespaceID, id string, state store.RuntimeState, at time.Time) (store.Agent, error) {
	out, err := s.updateActiveAgent(ctx, "set agent runtime state", namespaceID, id,
		`UPDATE agents SET desired_runtime_state = ?, updated_at = ?
		 WHERE namespace_id = ? AND id = ? AND status = 'active' RETURNING `+agentColumns,
		string(state), s.t(at), namespaceID, id)
	if err != nil {
		return store.Agent{}, s.dbErr("set agent runtime state", err)
	}
	return out, nil
}

// MarkAgentDeleting starts teardown: status deleting, desired stopped, and
// who asked. Marking a deleting Agent again returns it unchanged, keeping
// the first requester and time.
func (s *Store) MarkAgentDeleting(ctx context.Context, namespaceID, id, actorID string, at time.Time) (store.Agent, error) {
	out, err := s.updateActiveAgent(ctx, "mark agent deleting", namespaceID, id,
		`UPDATE agents SET status = 'deleting', desired_runtime_state = 'stopped', deletion_requested_by = ?, updated_at = ?
		 WHERE namespace_id = ? AND id = ? AND status = 'active' RETURNING `+agentColumns,
		nullString(actorID), s.t(at), namespaceID, id)
	if errkind.As(err) != nil && errkind.As(err).Code == errkind.CodeAgentDeleting {
		return s.GetAgent(ctx, namespaceID, id)
	}
	if err != nil {
		return store.Agent{}, s.dbErr("mark agent deleting", err)
	}
	return out, nil
}

// updateActiveAgent runs an UPDATE ... WHERE status = 'active' RETURNING
// agent columns. When it matches no row it tells a missing Agent (NotFound)
// from one being deleted (Conflict AGENT_DELETING). It runs in a
// transaction: a RETURNING write is a query, which passes no write gate on
// its own (only exec and transactions do), and the check for a missing
// Agent then sees the same state as the update.
func (s *Store) updateActiveAgent(ctx context.Context, op, namespaceID, id, query string, args ...any) (store.Agent, error) {
	var out store.Agent
	err := s.inTx(ctx, func(tx *Store) error {
		a, err := scanAgent(tx.queryRow(ctx, query, args...))
		if !errors.Is(err, sql.ErrNoRows) {
			out = a
			return err
		}
		exists, err := tx.exists(ctx, op, `SELECT 1 FROM agents WHERE namespace_id = ? AND id = ?`, namespaceID, id)
		if err != nil {
			return err
		}
		if !exists {
			return notFound("agent")
		}
		return conflict(errkind.CodeAgentDeleting, "the agent is being deleted", nil)
	})
	return out, err
}

// DeleteAgent removes the Agent for good, in one transaction: its work items
// and the bindings and restrictions scoped to exactly this Agent
// (explicitly: they carry no foreign key), then the Agent row, whose
// revisions and workspace setup go by cascade. Only the teardown worker
// calls it.
func (s *Store) DeleteAgent(ctx context.Context, namespaceID, id string) error {
	return s.inTx(ctx, func(tx *Store) error {
		ok, err := tx.exists(ctx, "delete agent",
			`SELECT 1 FROM agents WHERE namespace_id = ? AND id = ?`+tx.d.forUpdate(), namespaceID, id)
		if err != nil {
			return err
		}
		if !ok {
			return notFound("agent")
		}
		// Agent ids are unique installation-wide, so a binding names the
		// Agent by resource id alone, whatever Namespace it was created with.
		tx.markErased() // the cascade removes the Agent's staged files, if any
		for _, st := range []struct {
			query string
			args  []any
		}{
			{`DELETE FROM controller_work WHERE namespace_id = ? AND agent_id = ?`, []any{namespaceID, id}},
			{`DELETE FROM iam_access_bindings WHERE resource_kind = 'agent' AND resource_id = ?`, []any{id}},
			{`DELETE FROM iam_restrictions WHERE resource_kind = 'agent' AND resource_id = ?`, []any{id}},
			{`DELETE FROM agents WHERE namespace_id = ? AND id = ?`, []any{namespaceID, id}},
		} {
			if _, err := tx.exec(ctx, st.query, st.args...); err != nil {
				return tx.dbErr("delete agent", err)
			}
		}
		return nil
	})
}

// ---- workspace setups ----
//
// The staged files are the operator's private text. They are never put into
// an error message (driver errors in Cause quote constraint names, not
// values) and never logged here.

// workspaceSetupFileNames are the keys the schema allows in files.
var workspaceSetupFileNames = map[string]bool{"AGENTS.md": true, "SOUL.md": true, "IDENTITY.md": true, "USER.md": true}

// checkWorkspaceSetup applies every rule the schema checks on a row that
// carries files, before the files are bound to a statement: a constraint
// that fails on PostgreSQL writes "Failing row contains (...)", every
// column included, to the server log, so the database's checks (and the
// guard trigger that now runs them first, naming no value) are only a
// second line that valid input never reaches.
func checkWorkspaceSetup(ws store.WorkspaceSetup) error {
	malformed := errkind.New(errkind.Invalid, "the workspace setup is malformed (file names, file sizes, defaults id or state)")
	if n := utf8.RuneCountInString(ws.ID); n < 1 || n > 200 || ws.NamespaceID == "" || ws.AgentID == "" {
		return malformed
	}
	if ws.DefaultsID != "" && (len(ws.DefaultsID) != 64 || strings.Trim(ws.DefaultsID, "0123456789abcdef") != "") {
		return malformed
	}
	if ws.Completed {
		if ws.Files != nil {
			return malformed
		}
		return nil
	}
	if len(ws.Files) == 0 {
		return malformed
	}
	for name, content := range ws.Files {
		// The engines disagree on text JSON cannot carry portably
		// (PostgreSQL's jsonb refuses \u0000, SQLite stores it;
		// encoding/json would silently replace invalid UTF-8), so refuse
		// it here, the same way on both.
		if !utf8.ValidString(content) || strings.ContainsRune(content, 0) {
			return errkind.New(errkind.Invalid, "workspace file content must be valid UTF-8 without NUL characters")
		}
		if !workspaceSetupFileNames[name] || len(content) > 16384 {
			return malformed
		}
	}
	return nil
}

func (s *Store) insertWorkspaceSetup(ctx context.Context, ws store.WorkspaceSetup) error {
	if err := checkWorkspaceSetup(ws); err != nil {
		return err
	}
	var files any // nil map: NULL, which the schema refuses for a pending setup
	if ws.Files != nil {
		j, err := jsonArg(ws.Files)
		if err != nil {
			return err
		}
		files = j
	}
	_, err := s.exec(ctx, `INSERT INTO workspace_setups (id, namespace_id, agent_id, defaults_id, files, completed)
		VALUES (?, ?, ?, ?, ?, ?)`,
		ws.ID, ws.NamespaceID, ws.AgentID, nullString(ws.DefaultsID), files, ws.Completed)
	switch {
	case err == nil:
		return nil
	case s.d.classify(err) == failUnique:
		return conflict("", "the agent already has a workspace setup", err)
	case s.d.classify(err) == failCheck:
		return errkind.Wrap(errkind.Invalid, "the workspace setup is malformed (file names, file sizes, defaults id or state)", err)
	}
	return s.dbErr("create workspace setup", err)
}

const workspaceSetupColumns = `id, namespace_id, agent_id, defaults_id, files, completed`

func scanWorkspaceSetup(r rowScanner) (store.WorkspaceSetup, error) {
	var ws store.WorkspaceSetup
	err := r.Scan(&ws.ID, &ws.NamespaceID, &ws.AgentID, optStringCol{&ws.DefaultsID}, jsonCol{&ws.Files}, &ws.Completed)
	return ws, err
}

func (s *Store) GetWorkspaceSetup(ctx context.Context, namespaceID, agentID string) (store.WorkspaceSetup, error) {
	ws, err := scanWorkspaceSetup(s.queryRow(ctx,
		`SELECT `+workspaceSetupColumns+` FROM workspace_setups WHERE namespace_id = ? AND agent_id = ?`, namespaceID, agentID))
	return ws, s.getErr("get workspace setup", "workspace setup", err)
}

// CompleteWorkspaceSetup clears the staged files and marks the record
// completed. Only a pending row is updated (the schema forbids touching a
// completed one); for a completed row the record is read back unchanged, so
// the call is idempotent. A mismatch of Namespace, Agent or setup id is
// NotFound.
func (s *Store) CompleteWorkspaceSetup(ctx context.Context, namespaceID, agentID, setupID string) (store.WorkspaceSetup, error) {
	var out store.WorkspaceSetup
	err := s.inTx(ctx, func(tx *Store) error {
		var err error
		out, err = scanWorkspaceSetup(tx.queryRow(ctx,
			`UPDATE workspace_setups SET completed = TRUE, files = NULL
			 WHERE namespace_id = ? AND agent_id = ? AND id = ? AND completed = FALSE
			 RETURNING `+workspaceSetupColumns, namespaceID, agentID, setupID))
		if err == nil {
			tx.markErased()
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return tx.dbErr("complete workspace setup", err)
		}
		out, err = scanWorkspaceSetup(tx.queryRow(ctx,
			`SELECT `+workspaceSetupColumns+` FROM workspace_setups WHERE namespace_id = ? AND agent_id = ? AND id = ?`,
			namespaceID, agentID, setupID))
		return tx.getErr("complete workspace setup", "workspace setup", err)
	})
	if err != nil {
		return store.WorkspaceSetup{}, err
	}
	return out, nil
}

// DeleteWorkspaceSetup removes the record (for example when an undeployed
// Agent is deleted) and reports whether one existed.
func (s *Store) DeleteWorkspaceSetup(ctx context.Context, namespaceID, agentID string) (bool, error) {
	var n int64
	err := s.inTx(ctx, func(tx *Store) error {
		res, err := tx.exec(ctx, `DELETE FROM workspace_setups WHERE namespace_id = ? AND agent_id = ?`, namespaceID, agentID)
		if err != nil {
			return tx.dbErr("delete workspace setup", err)
		}
		if n, err = res.RowsAffected(); err != nil {
			return tx.dbErr("delete workspace setup", err)
		}
		if n > 0 {
			tx.markErased()
		}
		return nil
	})
	return n > 0, err
}
