package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/testdb"
)

// failingAudit makes audit appends fail on demand: fail the outcome
// records, failAttempt the write-ahead "attempted" records.
type failingAudit struct {
	store.Store
	fail, failAttempt atomic.Bool
}

func (f *failingAudit) AppendAuditEvent(ctx context.Context, e store.AuditEvent) error {
	if e.Outcome == store.OutcomeAttempted && f.failAttempt.Load() || e.Outcome != store.OutcomeAttempted && f.fail.Load() {
		return errors.New("audit storage unavailable")
	}
	return f.Store.AppendAuditEvent(ctx, e)
}

type filesEnv struct {
	*deployEnv
	mem   *gwtest.MemFiles
	audit *failingAudit
	agent string
	base  string
}

func newFilesEnv(t *testing.T) *filesEnv {
	t.Helper()
	st := &failingAudit{Store: testdb.SQLite(t)}
	d := fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}})
	mem := gwtest.NewMemFiles()
	e := newEnvWith(t, st, server.Options{Driver: d, Files: mem})
	de := &deployEnv{env: e, driver: d}
	var ns idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "files"}, e.admin, 201, &ns)
	de.ns = ns.ID
	var c idOnly
	e.must("POST", "/namespaces/"+ns.ID+"/configurations", map[string]any{"name": "c", "kind": "agent", "document": map[string]any{}}, e.admin, 201, &c)
	de.cfg = c.ID
	de.runUntil(func() bool {
		var got struct{ Status string }
		e.must("GET", "/namespaces/"+ns.ID, nil, e.admin, 200, &got)
		return got.Status == "ready"
	})
	agent := de.createAgent("editor", nil)
	rev := de.deploy(agent)
	de.runUntil(de.finished(agent, rev))
	return &filesEnv{deployEnv: de, mem: mem, audit: st, agent: agent,
		base: "/namespaces/" + ns.ID + "/agents/" + agent + "/workspace/files/"}
}

// put sends a raw PUT so tests control the body bytes and headers.
func (fe *filesEnv) put(name, body string, headers map[string]string) (*httptest.ResponseRecorder, envelope) {
	r := httptest.NewRequest("PUT", fe.base+name, strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	r.Header.Set("Origin", testOrigin)
	r.AddCookie(fe.admin.cookie)
	for k, v := range headers {
		r.Header.Set(k, v)
	}
	rec := httptest.NewRecorder()
	serve(fe.t, fe.srv.Handler(), rec, r)
	var env envelope
	_ = jsonUnmarshal(rec.Body.Bytes(), &env)
	return rec, env
}

type fileEvent struct {
	ID         string            `json:"id"`
	AttemptID  string            `json:"attemptId"`
	Outcome    string            `json:"outcome"`
	ReasonCode string            `json:"reasonCode"`
	Details    map[string]string `json:"details"`
}

func (fe *filesEnv) fileEvents(query string) []fileEvent {
	var page struct {
		Items []fileEvent `json:"items"`
	}
	fe.must("GET", "/audit-events?action=openclaw.agents.workspace.files.write&limit=200"+query, nil, fe.admin, 200, &page)
	return page.Items
}

// outcomeEvents are the file write records other than the write-ahead
// attempts, newest first.
func (fe *filesEnv) outcomeEvents() []fileEvent {
	var out []fileEvent
	for _, ev := range fe.fileEvents("") {
		if ev.Outcome != "attempted" {
			out = append(out, ev)
		}
	}
	return out
}

// writeRow is one file write as its audit records tell it: the write-ahead
// attempt and the outcome that names it ("-" when there is none).
type writeRow struct{ At, Outcome, Reason, File string }

// writeRows pairs every attempted record with its outcome record, oldest
// first (the test clock gives every PUT its own second), and fails on an
// outcome record that names no attempt.
func writeRows(t *testing.T, evs []fileEvent, times map[string]string) []writeRow {
	t.Helper()
	outcomes := map[string]fileEvent{}
	for _, ev := range evs {
		if ev.Outcome != "attempted" {
			if ev.AttemptID == "" {
				t.Errorf("outcome record %s names no attempt", ev.ID)
			}
			outcomes[ev.AttemptID] = ev
		}
	}
	var rows []writeRow
	for i := len(evs) - 1; i >= 0; i-- {
		ev := evs[i]
		if ev.Outcome != "attempted" {
			continue
		}
		if len(ev.Details) != 1 {
			t.Errorf("attempt %s details = %v, want only the file name", ev.ID, ev.Details)
		}
		r := writeRow{At: times[ev.ID], Outcome: "-", File: ev.Details["workspaceFileName"]}
		if o, ok := outcomes[ev.ID]; ok {
			r.Outcome, r.Reason = o.Outcome, o.ReasonCode
			delete(outcomes, ev.ID)
		}
		rows = append(rows, r)
	}
	for id := range outcomes {
		t.Errorf("outcome record names %s, which is not an attempt of this list", id)
	}
	return rows
}

func TestWorkspaceFilesAPI(t *testing.T) {
	fe := newFilesEnv(t)
	long := strings.Repeat("a", 16384)

	// Missing file, then a write, then a read with its ETag.
	if code, env, _ := fe.do("GET", fe.base+"SOUL.md", nil, fe.admin); code != 404 || env.Error.Message != "The requested workspace file was not found." {
		t.Fatalf("missing file: %d %+v", code, env.Error)
	}
	rec, _ := fe.put("SOUL.md", `{"content":"first"}`, nil)
	if rec.Code != 200 || rec.Header().Get("ETag") != `"`+digest.Of("first")+`"` {
		t.Fatalf("PUT: %d etag %q body %s", rec.Code, rec.Header().Get("ETag"), rec.Body.String())
	}
	var got struct {
		Name    string `json:"name"`
		Content string `json:"content"`
		Size    int    `json:"size"`
	}
	_, _, grec := fe.do("GET", fe.base+"SOUL.md", nil, fe.admin)
	fe.must("GET", fe.base+"SOUL.md", nil, fe.admin, 200, &got)
	if got.Name != "SOUL.md" || got.Content != "first" || grec.Header().Get("ETag") != `"`+digest.Of("first")+`"` {
		t.Fatalf("GET = %+v etag %q", got, grec.Header().Get("ETag"))
	}

	tests := []struct {
		name, file, body string
		headers          map[string]string
		want             int
		code             string
		detail           string
	}{
		{"size is UTF-8 bytes", "USER.md", `{"content":"€uro"}`, nil, 200, "", ""},
		{"16 KiB content", "USER.md", `{"content":"` + long + `"}`, nil, 200, "", ""},
		{"16 KiB + 1", "USER.md", `{"content":"` + long + `a"}`, nil, 400, "INVALID_REQUEST", "/content:TOO_LONG"},
		{"NUL", "USER.md", `{"content":"a\u0000b"}`, nil, 400, "INVALID_REQUEST", "/content:INVALID_VALUE"},
		{"lone surrogate escape", "USER.md", `{"content":"a\ud800b"}`, nil, 400, "INVALID_REQUEST", "/content:INVALID_VALUE"},
		{"unknown file name", "TOOLS.md", `{"content":"x"}`, nil, 400, "INVALID_REQUEST", "/path/name:INVALID_VALUE"},
		{"extra field", "USER.md", `{"content":"x","mode":1}`, nil, 400, "INVALID_REQUEST", "/mode:UNKNOWN_FIELD"},
		{"content not a string", "USER.md", `{"content":1}`, nil, 400, "INVALID_REQUEST", "/content:INVALID_TYPE"},
		{"body over 48 KiB", "USER.md", `{"content":"` + strings.Repeat("\\n", 24*1024) + `"}`, nil, 413, "PAYLOAD_TOO_LARGE", ""},
		{"body of exactly 48 KiB", "USER.md", padJSON(t, `{"content":"x"}`, 48<<10), nil, 200, "", ""},
		{"body of 48 KiB + 1", "USER.md", padJSON(t, `{"content":"x"}`, 48<<10+1), nil, 413, "PAYLOAD_TOO_LARGE", ""},
		{"CAS with the current hash", "SOUL.md", `{"content":"second"}`, map[string]string{"If-Match": `"` + digest.Of("first") + `"`}, 200, "", ""},
		{"CAS with a stale hash", "SOUL.md", `{"content":"third"}`, map[string]string{"If-Match": `"` + digest.Of("first") + `"`}, 412, "PRECONDITION_FAILED", ""},
		{"weak If-Match", "SOUL.md", `{"content":"x"}`, map[string]string{"If-Match": `W/"` + digest.Of("second") + `"`}, 400, "INVALID_REQUEST", "/header/If-Match:INVALID_FORMAT"},
		{"If-Match *", "SOUL.md", `{"content":"x"}`, map[string]string{"If-Match": `*`}, 400, "INVALID_REQUEST", "/header/If-Match:INVALID_FORMAT"},
		{"cross-site session write", "SOUL.md", `{"content":"x"}`, map[string]string{"Sec-Fetch-Site": "cross-site"}, 403, "FORBIDDEN", ""},
		{"wrong origin", "SOUL.md", `{"content":"x"}`, map[string]string{"Origin": "http://evil.test"}, 403, "FORBIDDEN", ""},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			rec, env := fe.put(tc.file, tc.body, tc.headers)
			g := struct {
				Status       int
				Code, Detail string
			}{Status: rec.Code}
			if env.Error != nil {
				g.Code = env.Error.Code
				if tc.detail != "" && len(env.Error.Details) > 0 {
					g.Detail = env.Error.Details[0].Path + ":" + env.Error.Details[0].Code
				}
			}
			w := struct {
				Status       int
				Code, Detail string
			}{tc.want, tc.code, tc.detail}
			if diff := cmp.Diff(w, g); diff != "" {
				t.Errorf("(-want +got):\n%s\nbody: %.300s", diff, rec.Body.String())
			}
		})
	}
	// The 412 carries the current hash.
	rec, _ = fe.put("SOUL.md", `{"content":"x"}`, map[string]string{"If-Match": `"` + digest.Of("stale") + `"`})
	if !strings.Contains(rec.Body.String(), digest.Of("second")) {
		t.Errorf("412 body does not carry the current hash: %s", rec.Body.String())
	}
	// A compare-and-swap on a missing file is a 412 without a current hash.
	rec, _ = fe.put("AGENTS.md", `{"content":"x"}`, map[string]string{"If-Match": `"` + digest.Of("stale") + `"`})
	if rec.Code != 412 || strings.Contains(rec.Body.String(), "currentHash") {
		t.Errorf("CAS on a missing file: %d %s, want 412 without currentHash", rec.Code, rec.Body.String())
	}
	var sized struct {
		Size int `json:"size"`
	}
	fe.must("PUT", fe.base+"IDENTITY.md", map[string]string{"content": "€"}, fe.admin, 200, &sized)
	if sized.Size != 3 {
		t.Errorf("size of € = %d, want 3 (UTF-8 bytes)", sized.Size)
	}
}

func TestWorkspaceFileOutcomesAreAudited(t *testing.T) {
	fe := newFilesEnv(t)
	step := func(name string, next func() (agentgw.File, error), failAudit bool, wantStatus int, wantCode string) {
		t.Helper()
		fe.clock.Advance(time.Second) // distinct audit timestamps, so the order is defined
		fe.mem.FailNext(next)
		fe.audit.fail.Store(failAudit)
		rec, env := fe.put("AGENTS.md", `{"content":"SECRET-CONTENT-91"}`, nil)
		fe.audit.fail.Store(false)
		code := ""
		if env.Error != nil {
			code = env.Error.Code
		}
		if rec.Code != wantStatus || code != wantCode {
			t.Errorf("%s: %d %s, want %d %s", name, rec.Code, code, wantStatus, wantCode)
		}
	}
	step("success", nil, false, 200, "")
	step("unknown outcome", func() (agentgw.File, error) {
		return agentgw.File{}, &agentgw.Error{Kind: agentgw.OutcomeUnknown, Reason: "connection_lost_after_send"}
	}, false, 503, "UNKNOWN_OUTCOME")
	step("answered error", func() (agentgw.File, error) {
		return agentgw.File{}, &agentgw.Error{Kind: agentgw.Unavailable, Reason: "answered_error"}
	}, false, 503, "DEPENDENCY_UNAVAILABLE")
	step("success whose audit fails", nil, true, 503, "UNKNOWN_OUTCOME")
	step("unknown outcome whose audit fails", func() (agentgw.File, error) {
		return agentgw.File{}, &agentgw.Error{Kind: agentgw.OutcomeUnknown, Reason: "deadline"}
	}, true, 503, "UNKNOWN_OUTCOME")
	step("failure whose audit fails", func() (agentgw.File, error) {
		return agentgw.File{}, &agentgw.Error{Kind: agentgw.Unavailable, Reason: "answered_error"}
	}, true, 503, "DEPENDENCY_UNAVAILABLE")

	// A write whose attempt cannot be recorded is never sent.
	setsBefore := fe.mem.Sets()
	fe.clock.Advance(time.Second)
	fe.audit.failAttempt.Store(true)
	rec, env := fe.put("AGENTS.md", `{"content":"SECRET-CONTENT-91"}`, nil)
	fe.audit.failAttempt.Store(false)
	if rec.Code != 503 || env.Error == nil || env.Error.Code != "DEPENDENCY_UNAVAILABLE" || fe.mem.Sets() != setsBefore {
		t.Errorf("unrecordable attempt: %d %+v, %d set calls after it (want 503 DEPENDENCY_UNAVAILABLE, none sent)",
			rec.Code, env.Error, fe.mem.Sets()-setsBefore)
	}

	// Reads are not audited.
	fe.must("GET", fe.base+"AGENTS.md", nil, fe.admin, 200, nil)

	var page0 struct {
		Items []struct {
			ID         string    `json:"id"`
			OccurredAt time.Time `json:"occurredAt"`
		} `json:"items"`
	}
	fe.must("GET", "/audit-events?action=openclaw.agents.workspace.files.write&limit=200", nil, fe.admin, 200, &page0)
	times := map[string]string{}
	var first time.Time
	for i := len(page0.Items) - 1; i >= 0; i-- {
		if first.IsZero() {
			first = page0.Items[i].OccurredAt
		}
		times[page0.Items[i].ID] = page0.Items[i].OccurredAt.Sub(first).String()
	}
	got := writeRows(t, fe.fileEvents(""), times)
	want := []writeRow{ // oldest first; an attempt whose outcome could not be recorded stays without one
		{"0s", "success", "", "AGENTS.md"},
		{"1s", "failure", "UNKNOWN_OUTCOME", "AGENTS.md"},
		{"2s", "failure", "DEPENDENCY_UNAVAILABLE", "AGENTS.md"},
		{"3s", "-", "", "AGENTS.md"},
		{"4s", "-", "", "AGENTS.md"},
		{"5s", "-", "", "AGENTS.md"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("file write audit records (-want +got):\n%s", diff)
	}
	// withoutOutcome=true finds exactly the three unresolved attempts.
	pending := fe.fileEvents("&withoutOutcome=true")
	if len(pending) != 3 {
		t.Fatalf("withoutOutcome=true: %d events, want 3", len(pending))
	}
	if diff := cmp.Diff([]string{"3s", "4s", "5s"}, []string{times[pending[2].ID], times[pending[1].ID], times[pending[0].ID]}); diff != "" {
		t.Errorf("withoutOutcome=true (-want +got):\n%s", diff)
	}
	fe.must("GET", "/audit-events?withoutOutcome=maybe", nil, fe.admin, 400, nil)
	// No audit record holds the content (GET replies do, by design, so the
	// audit list is searched on its own), and neither does any PUT reply.
	var page struct {
		Items []map[string]any `json:"items"`
	}
	fe.must("GET", "/audit-events?limit=200", nil, fe.admin, 200, &page)
	if len(page.Items) == 0 {
		t.Fatal("the audit list is empty; the search would prove nothing")
	}
	for _, it := range page.Items {
		if strings.Contains(toJSON(it), "SECRET-CONTENT-91") {
			t.Fatal("an audit record holds file content")
		}
	}
	rec, _ = fe.put("AGENTS.md", `{"content":"SECRET-CONTENT-91"}`, nil)
	if strings.Contains(rec.Body.String(), "SECRET-CONTENT-91") {
		t.Fatal("a PUT reply echoes the file content")
	}
	// Each PUT reached the gateway client exactly once: never replayed.
	if fe.mem.Sets() != 7 {
		t.Errorf("gateway saw %d set calls for 7 PUTs; OCC must never retry a write", fe.mem.Sets())
	}
}

func TestWorkspaceFileAgentStates(t *testing.T) {
	fe := newFilesEnv(t)
	// No active revision: 503.
	other := fe.createAgent("undeployed", nil)
	if code, env, _ := fe.do("GET", "/namespaces/"+fe.ns+"/agents/"+other+"/workspace/files/SOUL.md", nil, fe.admin); code != 503 || env.Error.Code != "DEPENDENCY_UNAVAILABLE" {
		t.Errorf("no active revision: %d %+v", code, env.Error)
	}
	// Stopped: reads work, writes 409 RESOURCE_CONFLICT.
	fe.must("POST", "/namespaces/"+fe.ns+"/agents/"+fe.agent+"/stop", nil, fe.admin, 202, nil)
	if rec, env := fe.put("SOUL.md", `{"content":"x"}`, nil); rec.Code != 409 || env.Error.Code != "RESOURCE_CONFLICT" {
		t.Errorf("write while stopped: %d %+v", rec.Code, env.Error)
	}
	if code, _, _ := fe.do("GET", fe.base+"SOUL.md", nil, fe.admin); code != 404 {
		t.Errorf("read while stopped: %d, want 404 (missing file, still readable)", code)
	}
	// Deleting: writes 409 AGENT_DELETING.
	fe.must("DELETE", "/namespaces/"+fe.ns+"/agents/"+fe.agent, nil, fe.admin, 202, nil)
	if rec, env := fe.put("SOUL.md", `{"content":"x"}`, nil); rec.Code != 409 || env.Error.Code != "AGENT_DELETING" {
		t.Errorf("write while deleting: %d %+v", rec.Code, env.Error)
	}
	_ = http.StatusOK
}

func toJSON(v any) string {
	b, _ := jsonMarshal(v)
	return string(b)
}
