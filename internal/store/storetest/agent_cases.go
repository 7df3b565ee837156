package storetest

import (
	"strings"
	"testing"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

var agentCases = []testCase{
	{"Agent/CreateGetList", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		cfg := f.configuration(f.namespace())
		check(t, "ListAgents of an empty namespace", []store.Agent{}, allAgents(t, h.Store, cfg.NamespaceID))

		a := f.agent(cfg)
		full := f.newAgent(cfg)
		full.Status, full.DesiredRuntimeState = store.AgentDeleting, store.RuntimeRunning
		full.ActiveRevisionID, full.DeletionRequestedBy = ids.New(ids.Revision), ids.New(ids.User)
		must(t, "CreateAgent with every field", h.Store.CreateAgent(ctx(t), full, nil))
		full = storedAgent(full)
		f.agent() // in another namespace

		for _, want := range []store.Agent{a, full} {
			got, err := h.Store.GetAgent(ctx(t), want.NamespaceID, want.ID)
			must(t, "GetAgent", err)
			check(t, "GetAgent "+want.Name, want, got)
		}
		check(t, "ListAgents", []store.Agent{a, full}, allAgents(t, h.Store, cfg.NamespaceID))

		_, err := h.Store.GetAgent(ctx(t), f.namespace().ID, a.ID)
		wantErr(t, "GetAgent through another namespace", err, errkind.NotFound, "")
		_, err = h.Store.GetAgent(ctx(t), a.NamespaceID, ids.New(ids.Agent))
		wantErr(t, "GetAgent unknown id", err, errkind.NotFound, "")
		_, err = h.Store.GetWorkspaceSetup(ctx(t), a.NamespaceID, a.ID)
		wantErr(t, "GetWorkspaceSetup of an agent created without one", err, errkind.NotFound, "")
	}},
	{"Agent/GetAgentFor", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		ns := f.namespace()
		cfg := f.configuration(ns)
		a := f.agent(cfg)

		// No active revision yet. The action is the wrapper's: the store
		// answers the same for every action.
		for _, action := range []store.Action{store.ActionRead, store.ActionOperate, store.ActionDeploy} {
			got, err := h.Store.GetAgentFor(ctx(t), action, a.NamespaceID, a.ID)
			must(t, "GetAgentFor "+string(action), err)
			check(t, "GetAgentFor without an active revision", store.AgentScope{Agent: a, Namespace: ns}, got)
		}

		// An active revision is returned with the Agent.
		rev := f.revision(a)
		f.revision(a) // a newer, inactive revision is not the active one
		must(t, "set the active revision", rawExec(t, h, `UPDATE agents SET active_revision_id = ? WHERE id = ?`, rev.ID, a.ID))
		a.ActiveRevisionID = rev.ID
		got, err := h.Store.GetAgentFor(ctx(t), store.ActionRead, a.NamespaceID, a.ID)
		must(t, "GetAgentFor", err)
		check(t, "GetAgentFor with an active revision", store.AgentScope{Agent: a, Namespace: ns, ActiveRevision: &rev}, got)

		// Inside a transaction it reads that transaction.
		err = h.Store.InTx(ctx(t), func(tx store.Store) error {
			got, err := tx.GetAgentFor(ctx(t), store.ActionDeploy, a.NamespaceID, a.ID)
			check(t, "GetAgentFor in a transaction", store.AgentScope{Agent: a, Namespace: ns, ActiveRevision: &rev}, got)
			return err
		})
		must(t, "InTx", err)

		// A dangling active revision id leaves ActiveRevision nil.
		dangling := ids.New(ids.Revision)
		must(t, "set a dangling active revision", rawExec(t, h, `UPDATE agents SET active_revision_id = ? WHERE id = ?`, dangling, a.ID))
		a.ActiveRevisionID = dangling
		got, err = h.Store.GetAgentFor(ctx(t), store.ActionRead, a.NamespaceID, a.ID)
		must(t, "GetAgentFor with a dangling active revision", err)
		check(t, "GetAgentFor with a dangling active revision", store.AgentScope{Agent: a, Namespace: ns}, got)

		_, err = h.Store.GetAgentFor(ctx(t), store.ActionRead, f.namespace().ID, a.ID)
		wantErr(t, "GetAgentFor through another namespace", err, errkind.NotFound, "")
		_, err = h.Store.GetAgentFor(ctx(t), store.ActionRead, ids.New(ids.Namespace), a.ID)
		wantErr(t, "GetAgentFor through a missing namespace", err, errkind.NotFound, "")
		_, err = h.Store.GetAgentFor(ctx(t), store.ActionRead, a.NamespaceID, ids.New(ids.Agent))
		wantErr(t, "GetAgentFor unknown id", err, errkind.NotFound, "")
	}},
	{"Agent/CreateErrors", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		cfg := f.configuration(f.namespace())
		existing := f.agent(cfg)
		foreignCfg := f.configuration(f.namespace())
		tests := []struct {
			name   string
			modify func(a *store.Agent)
			kind   errkind.Kind
		}{
			{"same name in the namespace", func(a *store.Agent) { a.Name = existing.Name }, errkind.Conflict},
			{"existing id", func(a *store.Agent) { a.ID = existing.ID }, errkind.Conflict},
			{"unknown configuration", func(a *store.Agent) { a.ConfigurationID = ids.New(ids.Configuration) }, errkind.Conflict},
			{"configuration of another namespace", func(a *store.Agent) { a.ConfigurationID = foreignCfg.ID }, errkind.Conflict},
			{"unknown namespace", func(a *store.Agent) { a.NamespaceID = ids.New(ids.Namespace) }, errkind.NotFound},
			{"unknown status", func(a *store.Agent) { a.Status = "deleted" }, errkind.Invalid},
			{"unknown runtime state", func(a *store.Agent) { a.DesiredRuntimeState = "paused" }, errkind.Invalid},
		}
		for _, tt := range tests {
			a := f.newAgent(cfg)
			tt.modify(&a)
			wantErr(t, "CreateAgent with "+tt.name, h.Store.CreateAgent(ctx(t), a, nil), tt.kind, "")
		}
		// The same name in another namespace is fine.
		a := f.newAgent(foreignCfg)
		a.Name = existing.Name
		must(t, "CreateAgent with the same name in another namespace", h.Store.CreateAgent(ctx(t), a, nil))
	}},
	{"Agent/CreateNeedsUsableNamespace", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		for _, tt := range []struct {
			status store.NamespaceStatus
			ok     bool
		}{
			{store.NamespaceProvisioning, true},
			{store.NamespaceReady, true},
			{store.NamespaceFailed, false},
			{store.NamespaceDeleting, false},
		} {
			cfg := f.configuration(f.namespace())
			must(t, "UpdateNamespaceStatus", h.Store.UpdateNamespaceStatus(ctx(t), cfg.NamespaceID, tt.status, at(f.now())))
			err := h.Store.CreateAgent(ctx(t), f.newAgent(cfg), nil)
			if tt.ok {
				must(t, "CreateAgent in a "+string(tt.status)+" namespace", err)
			} else {
				wantErr(t, "CreateAgent in a "+string(tt.status)+" namespace", err, errkind.Conflict, errkind.CodeResourceConflict)
			}
		}
	}},
	{"Agent/Update", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		cfg := f.configuration(f.namespace())
		other := f.configuration(f.namespace())
		cfg2 := f.configuration(store.Namespace{ID: cfg.NamespaceID})
		a, sibling := f.agent(cfg), f.agent(cfg)

		upd := a
		upd.Name, upd.ConfigurationID, upd.UpdatedAt = "renamed", cfg2.ID, at(70)
		// Not changed by UpdateAgent: they have their own methods.
		upd.Status, upd.DesiredRuntimeState, upd.ActiveRevisionID, upd.CreatedAt = store.AgentDeleting, store.RuntimeRunning, "rev_x", at(999)
		got, err := h.Store.UpdateAgent(ctx(t), upd)
		must(t, "UpdateAgent", err)
		want := a
		want.Name, want.ConfigurationID, want.UpdatedAt = "renamed", cfg2.ID, stored(upd.UpdatedAt)
		check(t, "UpdateAgent result", want, got)
		read, err := h.Store.GetAgent(ctx(t), a.NamespaceID, a.ID)
		must(t, "GetAgent", err)
		check(t, "GetAgent after UpdateAgent", want, read)

		tests := []struct {
			name   string
			modify func(a *store.Agent)
			kind   errkind.Kind
		}{
			{"a sibling's name", func(x *store.Agent) { x.Name = sibling.Name }, errkind.Conflict},
			{"another namespace's configuration", func(x *store.Agent) { x.ConfigurationID = other.ID }, errkind.Conflict},
			{"unknown id", func(x *store.Agent) { x.ID = ids.New(ids.Agent) }, errkind.NotFound},
			{"another namespace", func(x *store.Agent) { x.NamespaceID = other.NamespaceID }, errkind.NotFound},
		}
		for _, tt := range tests {
			x := want
			tt.modify(&x)
			_, err := h.Store.UpdateAgent(ctx(t), x)
			wantErr(t, "UpdateAgent with "+tt.name, err, tt.kind, "")
		}
		_, err = h.Store.MarkAgentDeleting(ctx(t), a.NamespaceID, a.ID, "usr_1", at(80))
		must(t, "MarkAgentDeleting", err)
		_, err = h.Store.UpdateAgent(ctx(t), want)
		wantErr(t, "UpdateAgent of a deleting agent", err, errkind.Conflict, errkind.CodeAgentDeleting)
	}},
	{"Agent/RuntimeStateAndDeleting", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a := f.agent()
		got, err := h.Store.SetAgentRuntimeState(ctx(t), a.NamespaceID, a.ID, store.RuntimeRunning, at(60))
		must(t, "SetAgentRuntimeState", err)
		want := a
		want.DesiredRuntimeState, want.UpdatedAt = store.RuntimeRunning, stored(at(60))
		check(t, "SetAgentRuntimeState result", want, got)
		_, err = h.Store.SetAgentRuntimeState(ctx(t), a.NamespaceID, a.ID, "paused", at(61))
		wantErr(t, "SetAgentRuntimeState to an unknown state", err, errkind.Invalid, "")
		_, err = h.Store.SetAgentRuntimeState(ctx(t), a.NamespaceID, ids.New(ids.Agent), store.RuntimeStopped, at(61))
		wantErr(t, "SetAgentRuntimeState unknown agent", err, errkind.NotFound, "")

		got, err = h.Store.MarkAgentDeleting(ctx(t), a.NamespaceID, a.ID, "usr_first", at(62))
		must(t, "MarkAgentDeleting", err)
		want.Status, want.DesiredRuntimeState, want.DeletionRequestedBy, want.UpdatedAt =
			store.AgentDeleting, store.RuntimeStopped, "usr_first", stored(at(62))
		check(t, "MarkAgentDeleting result", want, got)
		// Again: unchanged, the first requester is kept.
		got, err = h.Store.MarkAgentDeleting(ctx(t), a.NamespaceID, a.ID, "usr_second", at(63))
		must(t, "MarkAgentDeleting again", err)
		check(t, "repeated MarkAgentDeleting", want, got)
		// A deleting agent cannot be started again.
		_, err = h.Store.SetAgentRuntimeState(ctx(t), a.NamespaceID, a.ID, store.RuntimeRunning, at(64))
		wantErr(t, "SetAgentRuntimeState of a deleting agent", err, errkind.Conflict, errkind.CodeAgentDeleting)
		_, err = h.Store.MarkAgentDeleting(ctx(t), a.NamespaceID, ids.New(ids.Agent), "usr_first", at(62))
		wantErr(t, "MarkAgentDeleting unknown agent", err, errkind.NotFound, "")
	}},
	{"Agent/Delete", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a, _ := f.agentWithSetup()
		cfg, err := h.Store.GetConfiguration(ctx(t), a.NamespaceID, a.ConfigurationID)
		must(t, "GetConfiguration", err)
		keep := f.agent(cfg)
		rev := f.revision(a)
		keepRev := f.revision(keep)
		work := f.work(a, store.WorkAgentDelete)
		keepWork := f.work(keep, store.WorkRevisionDeploy)
		r := f.role()
		onAgent := store.AccessBinding{
			ID: ids.New(ids.Binding), NamespaceID: a.NamespaceID, SubjectID: "usr_1", RoleID: r.ID,
			ResourceKind: store.KindAgent, ResourceID: a.ID, CreatedAt: at(f.now()),
		}
		must(t, "CreateAccessBinding on the agent", h.Store.CreateAccessBinding(ctx(t), onAgent))
		onKeep := onAgent
		onKeep.ID, onKeep.ResourceID = ids.New(ids.Binding), keep.ID
		must(t, "CreateAccessBinding on the other agent", h.Store.CreateAccessBinding(ctx(t), onKeep))
		denyOnAgent := store.Restriction{
			ID: ids.New(ids.Restriction), NamespaceID: a.NamespaceID, SubjectID: "usr_1", Action: store.ActionDelete,
			ResourceKind: store.KindAgent, ResourceID: a.ID, CreatedAt: at(f.now()),
		}
		must(t, "CreateRestriction on the agent", h.Store.CreateRestriction(ctx(t), denyOnAgent))
		nsWide := f.binding("usr_1", r)

		must(t, "DeleteAgent", h.Store.DeleteAgent(ctx(t), a.NamespaceID, a.ID))

		gone := []struct {
			name string
			err  error
		}{
			{"agent", second(h.Store.GetAgent(ctx(t), a.NamespaceID, a.ID))},
			{"revision", second(h.Store.GetRevision(ctx(t), a.NamespaceID, a.ID, rev.ID))},
			{"workspace setup", second(h.Store.GetWorkspaceSetup(ctx(t), a.NamespaceID, a.ID))},
			{"work item", second(h.Store.GetWork(ctx(t), work.ID))},
			{"binding on the agent", second(h.Store.GetAccessBinding(ctx(t), onAgent.ID))},
			{"restriction on the agent", second(h.Store.GetRestriction(ctx(t), denyOnAgent.ID))},
		}
		for _, g := range gone {
			wantErr(t, g.name+" after DeleteAgent", g.err, errkind.NotFound, "")
		}
		kept := []struct {
			name string
			err  error
		}{
			{"other agent", second(h.Store.GetAgent(ctx(t), keep.NamespaceID, keep.ID))},
			{"other revision", second(h.Store.GetRevision(ctx(t), keep.NamespaceID, keep.ID, keepRev.ID))},
			{"other work item", second(h.Store.GetWork(ctx(t), keepWork.ID))},
			{"binding on the other agent", second(h.Store.GetAccessBinding(ctx(t), onKeep.ID))},
			{"installation-wide binding", second(h.Store.GetAccessBinding(ctx(t), nsWide.ID))},
		}
		for _, k := range kept {
			must(t, k.name+" after DeleteAgent", k.err)
		}
		wantErr(t, "DeleteAgent again", h.Store.DeleteAgent(ctx(t), a.NamespaceID, a.ID), errkind.NotFound, "")
	}},
	{"Agent/CreateWithSetup", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a, ws := f.agentWithSetup()
		got, err := h.Store.GetAgent(ctx(t), a.NamespaceID, a.ID)
		must(t, "GetAgent", err)
		check(t, "GetAgent", a, got)
		setup, err := h.Store.GetWorkspaceSetup(ctx(t), a.NamespaceID, a.ID)
		must(t, "GetWorkspaceSetup", err)
		check(t, "GetWorkspaceSetup", ws, setup)

		// Namespace and agent ids of the setup default to the Agent's.
		cfg := f.configuration(f.namespace())
		b := f.newAgent(cfg)
		implicit := store.WorkspaceSetup{ID: ids.New(ids.WorkspaceSetup), Files: map[string]string{"IDENTITY.md": "me"}}
		must(t, "CreateAgent with an implicit setup owner", h.Store.CreateAgent(ctx(t), b, &implicit))
		setup, err = h.Store.GetWorkspaceSetup(ctx(t), b.NamespaceID, b.ID)
		must(t, "GetWorkspaceSetup", err)
		want := implicit
		want.NamespaceID, want.AgentID = b.NamespaceID, b.ID
		check(t, "GetWorkspaceSetup of an implicit owner", want, setup)
	}},
	{"Agent/CreateWithBadSetupIsAtomic", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		cfg := f.configuration(f.namespace())
		tests := []struct {
			name   string
			modify func(ws *store.WorkspaceSetup)
			kind   errkind.Kind
		}{
			{"unknown file", func(ws *store.WorkspaceSetup) { ws.Files["MEMORY.md"] = "x" }, errkind.Invalid},
			{"no files", func(ws *store.WorkspaceSetup) { ws.Files = map[string]string{} }, errkind.Invalid},
			{"nil files", func(ws *store.WorkspaceSetup) { ws.Files = nil }, errkind.Invalid},
			{"file too large", func(ws *store.WorkspaceSetup) { ws.Files["SOUL.md"] = strings.Repeat("x", 16385) }, errkind.Invalid},
			{"NUL in a file", func(ws *store.WorkspaceSetup) { ws.Files["SOUL.md"] = "a\x00b" }, errkind.Invalid},
			{"invalid UTF-8", func(ws *store.WorkspaceSetup) { ws.Files["SOUL.md"] = "a\xffb" }, errkind.Invalid},
			{"uppercase defaults id", func(ws *store.WorkspaceSetup) { ws.DefaultsID = strings.ToUpper(defaultsID) }, errkind.Invalid},
			{"created completed", func(ws *store.WorkspaceSetup) { ws.Completed, ws.Files = true, nil }, errkind.Conflict},
			{"another agent's ids", func(ws *store.WorkspaceSetup) { ws.AgentID = ids.New(ids.Agent) }, errkind.Invalid},
		}
		for _, tt := range tests {
			a := f.newAgent(cfg)
			ws := pendingSetup(a)
			tt.modify(&ws)
			wantErr(t, "CreateAgent with setup "+tt.name, h.Store.CreateAgent(ctx(t), a, &ws), tt.kind, "")
			_, err := h.Store.GetAgent(ctx(t), a.NamespaceID, a.ID)
			wantErr(t, "GetAgent after a refused setup ("+tt.name+")", err, errkind.NotFound, "")
		}
		check(t, "ListAgents after refused creates", []store.Agent{}, allAgents(t, h.Store, cfg.NamespaceID))
	}},
	{"Agent/DuplicateNameWithSetupLeavesNothing", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		cfg := f.configuration(f.namespace())
		existing := f.agent(cfg)
		a := f.newAgent(cfg)
		a.Name = existing.Name
		ws := pendingSetup(a)
		wantErr(t, "CreateAgent with a taken name and a setup", h.Store.CreateAgent(ctx(t), a, &ws), errkind.Conflict, "")
		if n := rawCount(t, h, `SELECT count(*) FROM workspace_setups`); n != 0 {
			t.Errorf("workspace_setups has %d rows after a refused CreateAgent, want 0", n)
		}
	}},
}

var workspaceSetupCases = []testCase{
	{"WorkspaceSetup/GetScoped", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a, _ := f.agentWithSetup()
		other := f.agent()
		for _, tt := range []struct{ name, ns, agent string }{
			{"another namespace", other.NamespaceID, a.ID},
			{"another agent", a.NamespaceID, other.ID},
			{"unknown agent", a.NamespaceID, ids.New(ids.Agent)},
		} {
			_, err := h.Store.GetWorkspaceSetup(ctx(t), tt.ns, tt.agent)
			wantErr(t, "GetWorkspaceSetup through "+tt.name, err, errkind.NotFound, "")
		}
	}},
	{"WorkspaceSetup/Complete", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a, ws := f.agentWithSetup()
		sibling, siblingWS := f.agentWithSetup()

		for _, tt := range []struct{ name, ns, agent, id string }{
			{"wrong setup id", a.NamespaceID, a.ID, ids.New(ids.WorkspaceSetup)},
			{"another agent's setup id", a.NamespaceID, a.ID, siblingWS.ID},
			{"wrong namespace", sibling.NamespaceID, a.ID, ws.ID},
			{"unknown agent", a.NamespaceID, ids.New(ids.Agent), ws.ID},
		} {
			_, err := h.Store.CompleteWorkspaceSetup(ctx(t), tt.ns, tt.agent, tt.id)
			wantErr(t, "CompleteWorkspaceSetup with "+tt.name, err, errkind.NotFound, "")
		}

		want := store.WorkspaceSetup{ID: ws.ID, NamespaceID: a.NamespaceID, AgentID: a.ID, DefaultsID: defaultsID, Completed: true}
		got, err := h.Store.CompleteWorkspaceSetup(ctx(t), a.NamespaceID, a.ID, ws.ID)
		must(t, "CompleteWorkspaceSetup", err)
		check(t, "CompleteWorkspaceSetup result", want, got)
		got, err = h.Store.CompleteWorkspaceSetup(ctx(t), a.NamespaceID, a.ID, ws.ID)
		must(t, "CompleteWorkspaceSetup again", err)
		check(t, "CompleteWorkspaceSetup repeated", want, got)
		got, err = h.Store.GetWorkspaceSetup(ctx(t), a.NamespaceID, a.ID)
		must(t, "GetWorkspaceSetup", err)
		check(t, "GetWorkspaceSetup after completion", want, got)

		// The sibling's pending setup is untouched.
		got, err = h.Store.GetWorkspaceSetup(ctx(t), sibling.NamespaceID, sibling.ID)
		must(t, "GetWorkspaceSetup sibling", err)
		check(t, "sibling's setup", siblingWS, got)
	}},
	{"WorkspaceSetup/Delete", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a, _ := f.agentWithSetup()
		other, _ := f.agentWithSetup()
		deleted, err := h.Store.DeleteWorkspaceSetup(ctx(t), other.NamespaceID, a.ID)
		must(t, "DeleteWorkspaceSetup through another namespace", err)
		if deleted {
			t.Errorf("DeleteWorkspaceSetup through another namespace = true, want false")
		}
		deleted, err = h.Store.DeleteWorkspaceSetup(ctx(t), a.NamespaceID, a.ID)
		must(t, "DeleteWorkspaceSetup", err)
		if !deleted {
			t.Errorf("DeleteWorkspaceSetup = false, want true")
		}
		deleted, err = h.Store.DeleteWorkspaceSetup(ctx(t), a.NamespaceID, a.ID)
		must(t, "DeleteWorkspaceSetup again", err)
		if deleted {
			t.Errorf("second DeleteWorkspaceSetup = true, want false")
		}
		_, err = h.Store.GetWorkspaceSetup(ctx(t), a.NamespaceID, a.ID)
		wantErr(t, "GetWorkspaceSetup after delete", err, errkind.NotFound, "")
		_, err = h.Store.GetAgent(ctx(t), a.NamespaceID, a.ID)
		must(t, "GetAgent after its setup was deleted", err)
		_, err = h.Store.GetWorkspaceSetup(ctx(t), other.NamespaceID, other.ID)
		must(t, "GetWorkspaceSetup of another agent", err)
	}},
	{"WorkspaceSetup/DeletedWithAgent", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a, _ := f.agentWithSetup()
		b, _ := f.agentWithSetup()
		must(t, "delete agent (raw)", rawExec(t, h, `DELETE FROM agents WHERE namespace_id = ? AND id = ?`, a.NamespaceID, a.ID))
		_, err := h.Store.GetWorkspaceSetup(ctx(t), a.NamespaceID, a.ID)
		wantErr(t, "GetWorkspaceSetup after its agent was deleted", err, errkind.NotFound, "")
		_, err = h.Store.GetWorkspaceSetup(ctx(t), b.NamespaceID, b.ID)
		must(t, "GetWorkspaceSetup of the other agent", err)
	}},
	{"WorkspaceSetup/SecondSetupConflicts", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a, _ := f.agentWithSetup()
		again := pendingSetup(a)
		err := rawExec(t, h, `INSERT INTO workspace_setups (id, namespace_id, agent_id, files, completed) VALUES (?, ?, ?, ?, FALSE)`,
			again.ID, a.NamespaceID, a.ID, `{"AGENTS.md":"x"}`)
		wantRefused(t, h, "second setup for one agent", err, ruleUnique)
	}},
}
