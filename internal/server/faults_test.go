package server_test

import (
	"context"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/config"
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

// newFaultEnv is the API with the real gateway client (wrapped by wrap,
// when set) reaching a scripted fake gateway, and the file operation
// deadline timeout (0: the server's default).
func newFaultEnv(t *testing.T, timeout time.Duration, wrap func(agentgw.FileClient) agentgw.FileClient) *faultEnv {
	t.Helper()
	gw := gwtest.NewFakeGateway(t, gwtest.FakeOptions{Files: map[string]string{"SOUL.md": "original"}})
	d := &fakeGatewayDriver{Driver: fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}}), target: gw.DirectTarget(t)}
	st := &failingAudit{Store: testdb.SQLite(t)}
	var files agentgw.FileClient = agentgw.New(agentgw.Options{})
	if wrap != nil {
		files = wrap(files)
	}
	e := newEnvWith(t, st, server.Options{Driver: d, Files: files, FileTimeout: timeout})
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
	fe := newFaultEnv(t, 2*time.Second, nil)

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
	fe := newFaultEnv(t, 30*time.Second, nil)
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

// deadlineSpy is a FileClient that records, for every call, when it came
// and the deadline of its context, and passes it on.
type deadlineSpy struct {
	agentgw.FileClient
	mu    sync.Mutex
	calls []spiedCall
}

type spiedCall struct {
	at, deadline time.Time
	hasDeadline  bool
}

func (s *deadlineSpy) record(ctx context.Context) {
	c := spiedCall{at: time.Now()}
	c.deadline, c.hasDeadline = ctx.Deadline()
	s.mu.Lock()
	defer s.mu.Unlock()
	s.calls = append(s.calls, c)
}

// last is the latest call; the test fails when there was none.
func (s *deadlineSpy) last(t *testing.T) spiedCall {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.calls) == 0 {
		t.Fatal("the gateway client was not called")
	}
	return s.calls[len(s.calls)-1]
}

func (s *deadlineSpy) Get(ctx context.Context, t agentgw.Target, name string) (agentgw.File, error) {
	s.record(ctx)
	return s.FileClient.Get(ctx, t, name)
}

func (s *deadlineSpy) SetAdmitted(ctx context.Context, t agentgw.Target, name, content, expectedHash string, admit agentgw.Admit) (agentgw.File, error) {
	s.record(ctx)
	return s.FileClient.SetAdmitted(ctx, t, name, content, expectedHash, admit)
}

// TestFileOperationDeadline: the context the gateway client gets for a
// file GET or PUT ends exactly the file-operation deadline after the
// operation started: 30 s when the server is given none and with occ
// server's configured default, else the given one. The start lies between
// the moment the request is handed to the handler and the moment the
// client is called, so the test measures no speed: it checks that
// deadline - timeout falls in that window. A gateway that answers within
// the deadline gives 200; one that has not answered when it passes gives
// the spec's expiry answers, GET 503 DEPENDENCY_UNAVAILABLE and, since
// the set frame was sent, PUT 503 UNKNOWN_OUTCOME, audited as such.
func TestFileOperationDeadline(t *testing.T) {
	// answers are the GET's and the PUT's: status and error code.
	type answers struct{ Get, Put string }
	ok := answers{Get: "200", Put: "200"}
	tests := []struct {
		name    string
		timeout time.Duration // server.Options.FileTimeout
		hang    bool          // the gateway never answers get and set
		want    time.Duration // the deadline after the start
		answers answers
	}{
		{name: "no timeout given", want: 30 * time.Second, answers: ok},
		{name: "occ server's default", timeout: config.DefaultWorkspaceFileTimeout, want: 30 * time.Second, answers: ok},
		{name: "shortened, the gateway answers", timeout: 500 * time.Millisecond, want: 500 * time.Millisecond, answers: ok},
		{name: "shortened, the gateway never answers", timeout: 500 * time.Millisecond, hang: true, want: 500 * time.Millisecond,
			answers: answers{Get: "503 DEPENDENCY_UNAVAILABLE", Put: "503 UNKNOWN_OUTCOME"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			spy := &deadlineSpy{}
			fe := newFaultEnv(t, tt.timeout, func(c agentgw.FileClient) agentgw.FileClient { spy.FileClient = c; return spy })
			if tt.hang {
				fe.gw.SetFault("agents.files.get", gwtest.FaultHang)
				fe.gw.SetFault("agents.files.set", gwtest.FaultHang)
			}
			// checkDeadline checks the latest call's deadline against
			// the window [start, call] shifted by want.
			checkDeadline := func(op string, start time.Time) {
				t.Helper()
				c := spy.last(t)
				if !c.hasDeadline {
					t.Errorf("%s: the gateway client's context has no deadline", op)
					return
				}
				if c.deadline.Before(start.Add(tt.want)) || c.deadline.After(c.at.Add(tt.want)) {
					t.Errorf("%s: deadline %v after the request and %v after the client call; want %v after a moment between them",
						op, c.deadline.Sub(start), c.deadline.Sub(c.at), tt.want)
				}
			}
			answer := func(code int, e envelope) string {
				if e.Error == nil {
					return strconv.Itoa(code)
				}
				return strconv.Itoa(code) + " " + e.Error.Code
			}

			var got answers
			start := time.Now()
			code, env, _ := fe.do("GET", fe.base+"SOUL.md", nil, fe.admin)
			checkDeadline("GET", start)
			got.Get = answer(code, env)
			start = time.Now()
			rec, env := fe.put("SOUL.md", `{"content":"within the deadline"}`, nil)
			checkDeadline("PUT", start)
			got.Put = answer(rec.Code, env)
			if diff := cmp.Diff(tt.answers, got); diff != "" {
				t.Errorf("answers (-want +got):\n%s", diff)
			}
			if tt.hang {
				if events := fe.outcomeEvents(); len(events) != 1 || events[0].ReasonCode != "UNKNOWN_OUTCOME" {
					t.Errorf("audit of the PUT = %+v; want one failure UNKNOWN_OUTCOME", events)
				}
			}
		})
	}
}
