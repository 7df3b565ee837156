package server_test

import (
	"context"
	"net/http"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/testutil"
)

// fakeGatewayDriver is the fake Compute driver whose Endpoint points at a
// scripted fake gateway, so the real agentgw client and the whole API run
// against faults a real gateway cannot be made to produce.
type fakeGatewayDriver struct {
	*fake.Driver
	target agentgw.Target
}

func (d *fakeGatewayDriver) Endpoint(ctx context.Context, rev compute.Revision) (compute.Endpoint, error) {
	return compute.Endpoint{URL: d.target.URL, Transport: compute.Direct, TokenFile: d.target.TokenFile}, nil
}

type faultEnv struct {
	*filesEnv
	gw *gwtest.FakeGateway
}

func newFaultEnv(t *testing.T, timeout time.Duration) *faultEnv {
	t.Helper()
	gw := gwtest.NewFakeGateway(t, gwtest.FakeOptions{Files: map[string]string{"SOUL.md": "original"}})
	d := &fakeGatewayDriver{Driver: fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}}), target: gw.DirectTarget(t)}
	st := &failingAudit{Store: testdb.SQLite(t)}
	e := newEnvWith(t, st, server.Options{Driver: d, Files: agentgw.New(agentgw.Options{}), FileTimeout: timeout})
	de := &deployEnv{env: e, driver: d.Driver}
	var ns idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "faults"}, e.admin, 201, &ns)
	de.ns = ns.ID
	var c idOnly
	e.must("POST", "/namespaces/"+ns.ID+"/configurations", map[string]any{"name": "c", "kind": "agent", "document": map[string]any{}}, e.admin, 201, &c)
	de.cfg = c.ID
	de.runUntil(func() bool {
		var got struct{ Status string }
		e.must("GET", "/namespaces/"+ns.ID, nil, e.admin, 200, &got)
		return got.Status == "ready"
	})
	agent := de.createAgent("faulty", nil)
	rev := de.deploy(agent)
	de.runUntil(de.finished(agent, rev))
	return &faultEnv{filesEnv: &filesEnv{deployEnv: de, audit: st, agent: agent,
		base: "/namespaces/" + ns.ID + "/agents/" + agent + "/workspace/files/"}, gw: gw}
}

// TestGatewayFaultsThroughAPI drives the real client and API against the
// scripted gateway: a connection lost right after the set frame is an
// unknown outcome, audited once and never replayed; an answered error is a
// plain 503; a gateway slower than the deadline ends the call.
func TestGatewayFaultsThroughAPI(t *testing.T) {
	fe := newFaultEnv(t, 2*time.Second)

	fe.gw.SetFault("agents.files.set", gwtest.FaultClose)
	rec, env := fe.put("SOUL.md", `{"content":"maybe"}`, nil)
	if rec.Code != 503 || env.Error.Code != "UNKNOWN_OUTCOME" {
		t.Fatalf("set, then connection closed: %d %+v; want 503 UNKNOWN_OUTCOME", rec.Code, env.Error)
	}
	if n := fe.gw.Frames("agents.files.set"); n != 1 {
		t.Fatalf("the gateway received %d set frames; want exactly 1 (never replayed)", n)
	}
	events := fe.outcomeEvents()
	if len(events) != 1 || events[0].Outcome != "failure" || events[0].ReasonCode != "UNKNOWN_OUTCOME" {
		t.Fatalf("audit after unknown outcome = %+v; want one failure/UNKNOWN_OUTCOME", events)
	}
	if rows := writeRows(t, fe.fileEvents(""), nil); len(rows) != 1 || rows[0].Outcome != "failure" || rows[0].Reason != "UNKNOWN_OUTCOME" {
		t.Fatalf("file write records = %+v; want one attempt and the outcome naming it", rows)
	}
	// The client resolves the unknown outcome by reading and comparing.
	fe.gw.SetFault("agents.files.set", gwtest.FaultNone)
	var got struct {
		Content string `json:"content"`
	}
	fe.must("GET", fe.base+"SOUL.md", nil, fe.admin, 200, &got)
	if got.Content != "maybe" {
		t.Fatalf("after the lost acknowledgement the file is %q; the fake applied the write", got.Content)
	}

	fe.gw.SetFault("agents.files.set", gwtest.FaultError)
	fe.clock.Advance(time.Second) // distinct audit timestamps
	rec, env = fe.put("SOUL.md", `{"content":"refused"}`, nil)
	if rec.Code != 503 || env.Error.Code != "DEPENDENCY_UNAVAILABLE" {
		t.Fatalf("answered error: %d %+v; want 503 DEPENDENCY_UNAVAILABLE", rec.Code, env.Error)
	}

	fe.gw.SetFault("agents.files.get", gwtest.FaultHang)
	start := time.Now()
	code, env2, _ := fe.do("GET", fe.base+"SOUL.md", nil, fe.admin)
	if code != 503 || env2.Error.Code != "DEPENDENCY_UNAVAILABLE" {
		t.Fatalf("slow gateway read: %d %+v; want 503 DEPENDENCY_UNAVAILABLE", code, env2.Error)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("slow gateway read took %v; the 2 s deadline did not end it", d)
	}
	fe.gw.SetFault("agents.files.set", gwtest.FaultHang)
	fe.clock.Advance(time.Second)
	rec, env = fe.put("SOUL.md", `{"content":"late"}`, nil)
	if rec.Code != 503 || env.Error.Code != "UNKNOWN_OUTCOME" {
		t.Fatalf("slow gateway write: %d %+v; want 503 UNKNOWN_OUTCOME", rec.Code, env.Error)
	}
	events = fe.outcomeEvents()
	if len(events) != 3 || events[0].ReasonCode != "UNKNOWN_OUTCOME" || events[1].ReasonCode != "DEPENDENCY_UNAVAILABLE" {
		t.Fatalf("audit events = %+v; want UNKNOWN_OUTCOME, DEPENDENCY_UNAVAILABLE, UNKNOWN_OUTCOME (newest first)", events)
	}
}

// TestClientDisconnectEndsTheCall: a client that goes away mid-request ends
// the native call (the request context is cancelled), and the write is
// audited as an unknown outcome.
func TestClientDisconnectEndsTheCall(t *testing.T) {
	fe := newFaultEnv(t, 30*time.Second)
	arrived := make(chan struct{}, 1)
	fe.gw.SetFault("agents.files.set", gwtest.FaultHang)
	srv := httpTestServer(t, fe.srv.Handler())
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	// What the audit held when the set frame reached the gateway: the
	// write-ahead attempt must already be committed by then.
	var atArrival []store.AuditEvent
	var atArrivalErr error
	go func() {
		// Cancel once the set frame reached the gateway.
		pctx, pcancel := context.WithTimeout(ctx, 5*time.Second)
		defer pcancel()
		if testutil.Poll(pctx, func() (bool, error) { return fe.gw.Frames("agents.files.set") > 0, nil }) == nil {
			atArrival, atArrivalErr = fe.audit.Store.ListAuditEvents(context.Background(),
				store.AuditFilter{Action: "openclaw.agents.workspace.files.write", WithoutOutcome: true}, nil, 10)
			arrived <- struct{}{}
			cancel()
		}
	}()
	req, _ := http.NewRequestWithContext(ctx, "PUT", srv.URL+fe.base+"SOUL.md", strings.NewReader(`{"content":"abandoned"}`))
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", testOrigin)
	req.AddCookie(fe.admin.cookie)
	start := time.Now()
	_, err := http.DefaultClient.Do(req)
	if err == nil {
		t.Fatal("the request succeeded; want it cancelled")
	}
	select {
	case <-arrived:
	case <-time.After(5 * time.Second):
		t.Fatal("the set frame never reached the gateway")
	}
	if atArrivalErr != nil || len(atArrival) != 1 || atArrival[0].Outcome != store.OutcomeAttempted ||
		atArrival[0].Details["workspaceFileName"] != "SOUL.md" {
		t.Fatalf("attempts without outcome when the set frame arrived = %+v (%v); want the one attempt", atArrival, atArrivalErr)
	}
	// The server side finishes promptly and records the unknown outcome.
	var events []fileEvent
	testutil.Eventually(t, 5*time.Second, func() bool {
		events = fe.outcomeEvents()
		return len(events) > 0
	}, "the abandoned call's audit event")
	if len(events) != 1 || events[0].ReasonCode != "UNKNOWN_OUTCOME" || events[0].AttemptID != atArrival[0].ID {
		t.Fatalf("audit after disconnect = %+v; want one UNKNOWN_OUTCOME naming attempt %s", events, atArrival[0].ID)
	}
	if d := time.Since(start); d > 10*time.Second {
		t.Fatalf("the abandoned call took %v to end; the 30 s deadline was not what ended it", d)
	}
	if n := fe.gw.Frames("agents.files.set"); n != 1 {
		t.Fatalf("the gateway received %d set frames; want 1", n)
	}
}
