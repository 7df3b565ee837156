package console_test

import (
	"context"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/testutil"
	"github.com/openclaw/occ/internal/worker"
)

// editorFixture is a running Agent on the fake Compute driver whose live
// files are a scripted gateway's (SOUL.md exists, the others do not),
// created and deployed through the API, and a browser signed in as the
// administrator.
type editorFixture struct {
	s         *occServer
	gw        *gwtest.FakeGateway
	b         *browser
	ns, agent string
}

func newEditorFixture(t *testing.T) *editorFixture {
	t.Helper()
	gw := gwtest.NewFakeGateway(t, gwtest.FakeOptions{Files: map[string]string{"SOUL.md": "original soul\n"}})
	d := &gatewayDriver{Driver: fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}}), target: gw.DirectTarget(t)}
	s := newServer(t, server.Options{Store: testdb.SQLite(t), Driver: d, Files: agentgw.New(agentgw.Options{}), FileTimeout: 3 * time.Second,
		Worker: worker.Options{Poll: 100 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.srv.Worker.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	admin := s.signIn(adminEmail, adminPassword)

	var ns struct{ ID, Status string }
	if code, e := s.api("POST", "/namespaces", map[string]string{"name": "editor"}, admin, nil, &ns); code != 201 {
		t.Fatalf("creating the Namespace: %d %s", code, e)
	}
	testutil.Eventually(t, 30*time.Second, func() bool {
		s.api("GET", "/namespaces/"+ns.ID, nil, admin, nil, &ns)
		return ns.Status == "ready"
	}, "Namespace %s ready", ns.ID)
	var cfg struct{ ID string }
	if code, e := s.api("POST", "/namespaces/"+ns.ID+"/configurations", map[string]any{"name": "base", "kind": "agent", "document": map[string]any{}}, admin, nil, &cfg); code != 201 {
		t.Fatalf("creating the Configuration: %d %s", code, e)
	}
	var ag struct {
		ID, Status, DesiredRuntimeState, ActiveRevisionID string
	}
	if code, e := s.api("POST", "/namespaces/"+ns.ID+"/agents", map[string]string{"name": "editor", "configurationId": cfg.ID}, admin, nil, &ag); code != 201 {
		t.Fatalf("creating the Agent: %d %s", code, e)
	}
	base := "/namespaces/" + ns.ID + "/agents/" + ag.ID
	if code, e := s.api("POST", base+"/deploy", nil, admin, nil, nil); code != 202 {
		t.Fatalf("deploying the Agent: %d %s", code, e)
	}
	testutil.Eventually(t, 60*time.Second, func() bool {
		s.api("GET", base, nil, admin, nil, &ag)
		return ag.Status == "active" && ag.DesiredRuntimeState == "running" && ag.ActiveRevisionID != ""
	}, "Agent %s running with an active revision", ag.ID)

	b := newBrowser(t, s.URL)
	b.signIn(adminEmail, adminPassword)
	return &editorFixture{s: s, gw: gw, b: b, ns: ns.ID, agent: ag.ID}
}

// TestEditorKeepYoursSavesTheEditorsText: after a 412 the conflict view's
// "Yours" is the editor's text, including what was typed while the save
// was out and after the conflict appeared, and Keep yours saves exactly
// that: edits made in the editor are never replaced by an older copy.
func TestEditorKeepYoursSavesTheEditorsText(t *testing.T) {
	f := newEditorFixture(t)
	b, gw := f.b, f.gw
	b.openEditor(f.ns, f.agent, "SOUL.md")
	gw.PutFile("SOUL.md", "theirs\n")

	// The save is held for a moment, and the text edited meanwhile.
	held := make(chan struct{})
	var once sync.Once
	f.s.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method == "PUT" && strings.HasSuffix(r.URL.Path, "/workspace/files/SOUL.md") {
			once.Do(func() { close(held) })
			time.Sleep(time.Second)
		}
		return false
	})
	b.setValue("#editor", "mine\n")
	b.click("#save")
	select {
	case <-held:
	case <-time.After(10 * time.Second):
		t.Fatal("the save did not reach the server")
	}
	f.s.setIntercept(nil)
	b.setValue("#editor", "typed while saving\n")
	b.waitJS(10*time.Second, `!document.querySelector("#conflict").hidden`, "the conflict view")
	if th, yo, ed := b.value("#theirs"), b.value("#yours"), b.value("#editor"); th != "theirs\n" || yo != "typed while saving\n" || ed != yo {
		t.Errorf("conflict view: theirs %q, yours %q, editor %q; want the current file beside the editor's text", th, yo, ed)
	}

	// Edited again after the conflict appeared (the hint invites it), then
	// Keep yours: the editor's text is saved, and shown as Yours first.
	b.setValue("#editor", "edited after the conflict\n")
	if got := b.value("#yours"); got != "edited after the conflict\n" {
		t.Errorf("Yours after editing = %q; want the editor's text", got)
	}
	b.click("#take-yours")
	b.waitJS(10*time.Second, `document.querySelector("#status").textContent === "Saved."`, "keeping mine")
	if got, _ := gw.File("SOUL.md"); got != "edited after the conflict\n" {
		t.Errorf("gateway SOUL.md = %q after Keep yours; want the editor's text %q", got, "edited after the conflict\n")
	}
	if got := b.value("#editor"); got != "edited after the conflict\n" {
		t.Errorf("editor after Keep yours = %q; want the text it held", got)
	}
}

// TestEditorUnknownOutcomeThenMissingFile: a save of a new file answers
// 503 UNKNOWN_OUTCOME, and the reload finds no file. The save was not
// applied so far but may still be, so creating the file (a write without
// If-Match) is not done blindly: Keep yours and Save ask first, naming the
// risk; cancelled, nothing is written; confirmed, the file is created.
func TestEditorUnknownOutcomeThenMissingFile(t *testing.T) {
	f := newEditorFixture(t)
	b, gw := f.b, f.gw
	if _, ok := gw.File("USER.md"); ok {
		t.Fatal("USER.md exists on the fake gateway; this test needs a missing file")
	}
	b.openEditor(f.ns, f.agent, "USER.md")
	if got := b.text("#status"); !strings.Contains(got, "does not exist") {
		t.Fatalf("USER.md status = %q; want it missing", got)
	}
	f.s.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.Method != "PUT" || !strings.HasSuffix(r.URL.Path, "/workspace/files/USER.md") {
			return false
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(503)
		fmt.Fprint(w, `{"error":{"code":"UNKNOWN_OUTCOME","message":"The write may or may not have been applied."}}`)
		return true
	})
	b.setValue("#editor", "sent, outcome unknown\n")
	b.click("#save")
	b.waitJS(10*time.Second, `/outcome of the save is unknown/.test(document.querySelector("#alert").textContent)`, "the unknown outcome")
	f.s.setIntercept(nil)
	b.click("#reload")
	b.waitJS(10*time.Second, `!document.querySelector("#conflict").hidden && !document.querySelector("#take-yours").disabled`, "the reload that finds no file")
	if got := b.text("#file-hint"); !strings.Contains(got, "saving asks first") {
		t.Errorf("hint after a reload found no file following an unknown outcome = %q; want that saving asks first", got)
	}

	b.click("#take-yours")
	b.waitJS(10*time.Second, `document.querySelector("#confirm").open || document.querySelector("#status").textContent === "Saved."`, "a question or a save")
	if !eval[bool](b, `document.querySelector("#confirm").open`) {
		got, _ := gw.File("USER.md")
		t.Fatalf("Keep yours after an unknown outcome and a missing file wrote without asking (gateway USER.md = %q)", got)
	}
	if got := b.text("#confirm-text"); !strings.Contains(got, "unknown outcome") {
		t.Errorf("the question = %q; want it to name the unknown outcome", got)
	}
	b.click("#confirm-cancel")
	b.waitJS(5*time.Second, `document.querySelector("#status").textContent === "Not saved: nothing was written."`, "the cancelled creation")
	if got, ok := gw.File("USER.md"); ok {
		t.Errorf("gateway USER.md = %q after cancelling; want no file", got)
	}

	// Save asks the same; confirmed, it creates the file.
	b.click("#save")
	b.waitJS(5*time.Second, `document.querySelector("#confirm").open`, "the question before Save creates the file")
	b.click("#confirm-ok")
	b.waitJS(10*time.Second, `document.querySelector("#status").textContent === "Saved."`, "the confirmed creation")
	if got, _ := gw.File("USER.md"); got != "sent, outcome unknown\n" {
		t.Errorf("gateway USER.md = %q after confirming; want the editor's text", got)
	}
	// Created: the next save is a compare-and-swap again and asks nothing.
	b.setValue("#editor", "second\n")
	b.click("#save")
	b.waitJS(10*time.Second, `document.querySelector("#status").textContent === "Saved." && document.querySelector("#editor").value === "second\n" && document.querySelector("#save").disabled`, "a plain save")
	if eval[bool](b, `document.querySelector("#confirm").open`) {
		t.Error("a save of an existing file asks")
	}
	if got, _ := gw.File("USER.md"); got != "second\n" {
		t.Errorf("gateway USER.md = %q after the plain save", got)
	}
}
