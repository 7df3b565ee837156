package server_test

import (
	"context"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/testutil"
	"github.com/openclaw/occ/internal/workspace"
)

// deployEnv is an env with the fake driver and a Namespace, a
// Configuration made ready by the worker.
type deployEnv struct {
	*env
	driver *fake.Driver
	ns     string
	cfg    string
	// files is the gateway client of real-gateway envs (newRealEnv): the
	// plain client, or the pooled one while its pool flag is set.
	files *switchFiles
}

func newDeployEnv(t *testing.T, st store.Store, caps compute.Capabilities) *deployEnv {
	t.Helper()
	d := fake.New(fake.Options{Capabilities: caps})
	e := newEnvWith(t, st, server.Options{Driver: d})
	de := &deployEnv{env: e, driver: d}
	var ns idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "deploy"}, e.admin, 201, &ns)
	de.ns = ns.ID
	de.runUntil(func() bool {
		var got struct{ Status string }
		e.must("GET", "/namespaces/"+ns.ID, nil, e.admin, 200, &got)
		return got.Status == "ready"
	})
	var c idOnly
	e.must("POST", "/namespaces/"+ns.ID+"/configurations",
		map[string]any{"name": "base", "kind": "agent", "document": map[string]any{"agents": map[string]any{}}}, e.admin, 201, &c)
	de.cfg = c.ID
	return de
}

// readyNamespace, for an env whose worker runs in the background on the
// real clock: creates the Namespace name, waits (30 s at most) until the
// worker made it ready, and creates the agent Configuration "c" with doc
// in it; de.ns and de.cfg name them.
func (de *deployEnv) readyNamespace(name string, doc map[string]any) {
	de.t.Helper()
	var ns idOnly
	de.must("POST", "/namespaces", map[string]string{"name": name}, de.admin, 201, &ns)
	de.ns = ns.ID
	testutil.Eventually(de.t, 30*time.Second, func() bool {
		var got struct{ Status string }
		de.must("GET", "/namespaces/"+ns.ID, nil, de.admin, 200, &got)
		return got.Status == "ready"
	}, "the Namespace %s ready", name)
	var c idOnly
	de.must("POST", "/namespaces/"+ns.ID+"/configurations", map[string]any{"name": "c", "kind": "agent", "document": doc}, de.admin, 201, &c)
	de.cfg = c.ID
}

// runUntil runs the worker one item at a time until cond holds, moving the
// test clock forward when nothing is claimable so that backoffs elapse.
// Bounded: at most 400 steps.
func (e *deployEnv) runUntil(cond func() bool) {
	e.t.Helper()
	for i := 0; i < 400; i++ {
		if cond() {
			return
		}
		did, err := e.srv.Worker.RunOnce(e.t.Context())
		if err != nil {
			e.t.Fatalf("worker: %v", err)
		}
		if !did {
			e.clock.Advance(time.Second)
		}
	}
	e.t.Fatal("condition not reached after 400 worker steps")
}

type deploymentView struct {
	ID       string `json:"id"`
	Status   string `json:"status"`
	Revision int64  `json:"revision"`
	Error    *struct {
		Code    string `json:"code"`
		Message string `json:"message"`
	} `json:"error"`
	Progress *struct {
		Attempts    int `json:"attempts"`
		LastAttempt *struct {
			Code string `json:"code"`
		} `json:"lastAttempt"`
		NextAttemptAt *time.Time `json:"nextAttemptAt"`
	} `json:"progress"`
}

func (e *deployEnv) createAgent(name string, files map[string]string) string {
	e.t.Helper()
	body := map[string]any{"name": name, "configurationId": e.cfg}
	if files != nil {
		body["initialWorkspaceFiles"] = files
		body["workspaceDefaultsId"] = workspace.DefaultsID
	}
	var a idOnly
	e.must("POST", "/namespaces/"+e.ns+"/agents", body, e.admin, 201, &a)
	return a.ID
}

func (e *deployEnv) deploy(agent string) string {
	e.t.Helper()
	var rev idOnly
	e.must("POST", "/namespaces/"+e.ns+"/agents/"+agent+"/deploy", nil, e.admin, 202, &rev)
	return rev.ID
}

func (e *deployEnv) deployment(agent, rev string) deploymentView {
	e.t.Helper()
	var d deploymentView
	e.must("GET", "/namespaces/"+e.ns+"/agents/"+agent+"/deployments/"+rev, nil, e.admin, 200, &d)
	return d
}

func (e *deployEnv) finished(agent, rev string) func() bool {
	return func() bool {
		s := e.deployment(agent, rev).Status
		return s == "succeeded" || s == "failed"
	}
}

// setup reads the private setup record as the worker would.
func (e *deployEnv) setup(agent string) (store.WorkspaceSetup, error) {
	ctx := authz.WithSubject(context.Background(), authz.SystemSubject(authz.SystemWorker))
	return e.store.GetWorkspaceSetup(ctx, e.ns, agent)
}

var fourFiles = map[string]string{
	"AGENTS.md":   "# Agents\r\nkeep CRLF\r\n",
	"SOUL.md":     "",
	"IDENTITY.md": "name: €uro",
	"USER.md":     "user notes  ",
}

// TestWorkspaceSetupLifecycle: an activation failure is retried with the
// same pending bytes; success completes the setup in the activation
// transaction (files cleared, identity kept); a later deployment gets the
// identity only.
func TestWorkspaceSetupLifecycle(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		e := newDeployEnv(t, st, compute.Capabilities{WorkspaceSetup: true})
		agent := e.createAgent("lifecycle", fourFiles)
		rev := e.deploy(agent)
		e.driver.FailNext(fake.ActivateRevision, 1, errors.New("activation blew up"))

		// First attempt: prepare succeeds, activation fails, the work is
		// requeued with its progress visible.
		e.runUntil(func() bool {
			d := e.deployment(agent, rev)
			return d.Progress != nil && d.Progress.Attempts == 1 && d.Status == "queued"
		})
		d := e.deployment(agent, rev)
		if d.Progress.LastAttempt == nil || d.Progress.LastAttempt.Code != "ACTIVATION_FAILED" || d.Progress.NextAttemptAt == nil {
			t.Fatalf("progress after a failed activation = %+v; want lastAttempt ACTIVATION_FAILED and nextAttemptAt", d.Progress)
		}
		if s, err := e.setup(agent); err != nil || s.Completed || len(s.Files) != 4 {
			t.Fatalf("setup after failed activation = %+v, %v; want pending with 4 files", s, err)
		}

		e.runUntil(e.finished(agent, rev))
		if d := e.deployment(agent, rev); d.Status != "succeeded" {
			t.Fatalf("deployment = %+v, want succeeded", d)
		}
		delivered := e.driver.Delivered(agent)
		if len(delivered) < 4 {
			t.Fatalf("delivered %d setups, want at least 4 (prepare+activate twice)", len(delivered))
		}
		for i, s := range delivered {
			if s.Completed {
				t.Fatalf("delivery %d is completed; every attempt before activation must carry the pending setup", i)
			}
			if diff := cmp.Diff(fourFiles, s.Files); diff != "" {
				t.Fatalf("delivery %d files (-want +got):\n%s", i, diff)
			}
		}
		s, err := e.setup(agent)
		if err != nil || !s.Completed || s.Files != nil || s.ID != delivered[0].ID || s.DefaultsID != workspace.DefaultsID {
			t.Fatalf("setup after activation = %+v, %v; want completed, no files, identity kept", s, err)
		}
		var ag struct {
			ActiveRevisionID    string `json:"activeRevisionId"`
			DesiredRuntimeState string `json:"desiredRuntimeState"`
		}
		e.must("GET", "/namespaces/"+e.ns+"/agents/"+agent, nil, e.admin, 200, &ag)
		if ag.ActiveRevisionID != rev || ag.DesiredRuntimeState != "running" {
			t.Fatalf("agent = %+v, want active revision %s running", ag, rev)
		}

		// A later deployment receives the completed identity only.
		rev2 := e.deploy(agent)
		e.runUntil(e.finished(agent, rev2))
		all := e.driver.Delivered(agent)
		last := all[len(all)-1]
		want := compute.WorkspaceSetup{ID: s.ID, NamespaceID: e.ns, AgentID: agent, DefaultsID: workspace.DefaultsID, Completed: true}
		if diff := cmp.Diff(want, last); diff != "" {
			t.Fatalf("later delivery (-want +got):\n%s", diff)
		}
		if d := e.deployment(agent, rev2); d.Status != "succeeded" || d.Revision != 2 {
			t.Fatalf("second deployment = %+v", d)
		}
		if v := e.driver.Violations(); len(v) > 0 {
			t.Fatalf("driver contract violations: %v", v)
		}
	})
}

// TestWorkspaceSetupUnsupported: a driver without workspace setup fails the
// deployment permanently before prepare, and the pending record stays.
func TestWorkspaceSetupUnsupported(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		e := newDeployEnv(t, st, compute.Capabilities{})
		agent := e.createAgent("nosetup", fourFiles)
		rev := e.deploy(agent)
		e.runUntil(e.finished(agent, rev))
		d := e.deployment(agent, rev)
		if d.Status != "failed" || d.Error == nil || d.Error.Code != "WORKSPACE_SETUP_UNSUPPORTED" {
			t.Fatalf("deployment = %+v, want failed WORKSPACE_SETUP_UNSUPPORTED", d)
		}
		for _, c := range e.driver.Calls() {
			if c.AgentID == agent {
				t.Fatalf("driver saw %s for the agent; nothing may reach the driver", c.Method)
			}
		}
		if s, err := e.setup(agent); err != nil || s.Completed || len(s.Files) != 4 {
			t.Fatalf("setup = %+v, %v; want still pending", s, err)
		}
		var ag struct {
			ActiveRevisionID string `json:"activeRevisionId"`
		}
		e.must("GET", "/namespaces/"+e.ns+"/agents/"+agent, nil, e.admin, 200, &ag)
		if ag.ActiveRevisionID != "" {
			t.Fatalf("agent has active revision %s; want none", ag.ActiveRevisionID)
		}
		// An Agent without files deploys fine on the same driver.
		plain := e.createAgent("plain", nil)
		rev2 := e.deploy(plain)
		e.runUntil(e.finished(plain, rev2))
		if d := e.deployment(plain, rev2); d.Status != "succeeded" {
			t.Fatalf("deployment without setup = %+v, want succeeded", d)
		}
	})
}

// TestDeleteUndeployedAgent: deleting an Agent that never ran erases its
// pending bytes at once, before any worker runs; the worker then removes it.
func TestDeleteUndeployedAgent(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		e := newDeployEnv(t, st, compute.Capabilities{WorkspaceSetup: true})
		marker := "UNDEPLOYED-MARKER-3b8e"
		agent := e.createAgent("short-lived", map[string]string{"AGENTS.md": "agents " + marker, "SOUL.md": marker})
		if got := sqliteFilesWith(t, st, marker); st.Engine() == sqlstore.EngineSQLite && len(got) == 0 {
			t.Fatal("the staged marker is in no data directory file before the delete; the search would prove nothing")
		}
		var del struct {
			Status string `json:"status"`
		}
		e.must("DELETE", "/namespaces/"+e.ns+"/agents/"+agent, nil, e.admin, 202, &del)
		if del.Status != "deleting" {
			t.Fatalf("delete answered status %q, want deleting", del.Status)
		}
		if _, err := e.setup(agent); !errkind.Is(err, errkind.NotFound) {
			t.Fatalf("setup right after delete: err = %v, want NotFound", err)
		}
		if got := sqliteFilesWith(t, st, marker); len(got) != 0 {
			t.Fatalf("after the delete the staged marker is in data directory files %v; want none", got)
		}
		// While deleting, changes are refused.
		if code, env, _ := e.do("POST", "/namespaces/"+e.ns+"/agents/"+agent+"/deploy", nil, e.admin); code != 409 || env.Error.Code != "AGENT_DELETING" {
			t.Fatalf("deploy while deleting: %d %+v, want 409 AGENT_DELETING", code, env.Error)
		}
		e.must("DELETE", "/namespaces/"+e.ns+"/agents/"+agent, nil, e.admin, 202, nil) // idempotent
		e.runUntil(func() bool {
			code, _, _ := e.do("GET", "/namespaces/"+e.ns+"/agents/"+agent, nil, e.admin)
			return code == 404
		})
		if !e.driver.Deleted(agent) {
			t.Fatal("driver was not asked to delete the agent's runtime")
		}
	})
}

// TestDeployErrors covers the lifecycle refusals of deploy and create.
func TestDeployErrors(t *testing.T) {
	e := newDeployEnv(t, testdb.SQLite(t), compute.Capabilities{WorkspaceSetup: true})
	var ns2 idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "not-ready"}, e.admin, 201, &ns2)
	var c2 idOnly
	e.must("POST", "/namespaces/"+ns2.ID+"/configurations", map[string]any{"name": "c", "kind": "agent", "document": map[string]any{}}, e.admin, 201, &c2)
	var a2 idOnly
	e.must("POST", "/namespaces/"+ns2.ID+"/agents", map[string]any{"name": "early", "configurationId": c2.ID}, e.admin, 201, &a2)
	if code, env, _ := e.do("POST", "/namespaces/"+ns2.ID+"/agents/"+a2.ID+"/deploy", nil, e.admin); code != 409 || env.Error.Code != "NAMESPACE_NOT_READY" {
		t.Fatalf("deploy in a provisioning namespace: %d %+v", code, env.Error)
	}
	tests := []struct {
		name string
		body map[string]any
		want int
		code string
	}{
		{"configuration of another namespace", map[string]any{"name": "x1", "configurationId": c2.ID}, 404, "NOT_FOUND"},
		{"stale defaults id", map[string]any{"name": "x2", "configurationId": e.cfg, "initialWorkspaceFiles": map[string]string{"SOUL.md": "s"},
			"workspaceDefaultsId": "0000000000000000000000000000000000000000000000000000000000000000"}, 409, "RESOURCE_CONFLICT"},
		{"malformed defaults id", map[string]any{"name": "x3", "configurationId": e.cfg, "workspaceDefaultsId": "ABC"}, 400, "INVALID_REQUEST"},
		{"unknown file name", map[string]any{"name": "x4", "configurationId": e.cfg, "initialWorkspaceFiles": map[string]string{"TOOLS.md": "t"}}, 400, "INVALID_REQUEST"},
		{"file with NUL", map[string]any{"name": "x5", "configurationId": e.cfg, "initialWorkspaceFiles": map[string]string{"SOUL.md": "a\x00b"}}, 400, "INVALID_REQUEST"},
		{"file over 16 KiB", map[string]any{"name": "x6", "configurationId": e.cfg, "initialWorkspaceFiles": map[string]string{"SOUL.md": stringOf('a', 16385)}}, 400, "INVALID_REQUEST"},
		{"files not an object", map[string]any{"name": "x7", "configurationId": e.cfg, "initialWorkspaceFiles": []string{"a"}}, 400, "INVALID_REQUEST"},
		{"empty map means no setup", map[string]any{"name": "x8", "configurationId": e.cfg, "initialWorkspaceFiles": map[string]string{}}, 201, ""},
		{"file at 16 KiB", map[string]any{"name": "x9", "configurationId": e.cfg, "initialWorkspaceFiles": map[string]string{"SOUL.md": stringOf('a', 16384)}}, 201, ""},
		{"name taken", map[string]any{"name": "x8", "configurationId": e.cfg}, 409, "RESOURCE_CONFLICT"},
		{"empty defaults id", map[string]any{"name": "x10", "configurationId": e.cfg, "workspaceDefaultsId": ""}, 400, "INVALID_REQUEST"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			code, env, _ := e.do("POST", "/namespaces/"+e.ns+"/agents", tc.body, e.admin)
			got := ""
			if env.Error != nil {
				got = env.Error.Code
			}
			if code != tc.want || got != tc.code {
				t.Fatalf("status %d code %q, want %d %q (%+v)", code, got, tc.want, tc.code, env.Error)
			}
		})
	}
	// A Namespace being deleted accepts no new Agent: 409 RESOURCE_CONFLICT,
	// as in the reference (NAMESPACE_NOT_READY is deploy's answer).
	var gone idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "going"}, e.admin, 201, &gone)
	e.must("DELETE", "/namespaces/"+gone.ID, nil, e.admin, 202, nil)
	if code, env, _ := e.do("POST", "/namespaces/"+gone.ID+"/agents", map[string]any{"name": "late", "configurationId": e.cfg}, e.admin); code != 409 || env.Error.Code != "RESOURCE_CONFLICT" {
		t.Fatalf("create in a deleting namespace: %d %+v, want 409 RESOURCE_CONFLICT", code, env.Error)
	}
	// The Agent response never carries the files.
	var raw json.RawMessage
	e.must("GET", "/namespaces/"+e.ns+"/agents", nil, e.admin, 200, &raw)
	if bytesContains(raw, "initialWorkspaceFiles") || bytesContains(raw, "aaaaaaaa") {
		t.Fatalf("agent list leaks staged files: %.300s", raw)
	}
}

func stringOf(c byte, n int) string {
	b := make([]byte, n)
	for i := range b {
		b[i] = c
	}
	return string(b)
}

func bytesContains(b []byte, s string) bool { return strings.Contains(string(b), s) }
