package console_test

import (
	"context"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/worker"
)

// gatewayDriver is the fake Compute driver whose Endpoint is a scripted
// fake gateway (as in internal/server's faults_test.go), so the real
// gateway client and API run against faults a real gateway cannot be made
// to produce, such as a connection lost right after the write.
type gatewayDriver struct {
	*fake.Driver
	target agentgw.Target
}

func (d *gatewayDriver) Endpoint(ctx context.Context, rev compute.Revision) (compute.Endpoint, error) {
	return compute.Endpoint{URL: d.target.URL, Transport: compute.Direct, TokenFile: d.target.TokenFile}, nil
}

// TestConsoleInBrowser drives every Console page in headless Chromium
// against a real OCC server with the fake driver and a scripted gateway:
// sign-in, Namespaces, Configurations, the create form's checks (NUL, a
// stale defaults identity), deploy, the editor (save, reload, discard, a
// 412 provoked through the API and resolved in the page, an unknown
// outcome and its resolution), a viewer's read-only pages, the audit log,
// IAM with a key shown once, delete with confirmation, and a cross-site
// form post refused. axe-core checks every page.
func TestConsoleInBrowser(t *testing.T) {
	gw := gwtest.NewFakeGateway(t, gwtest.FakeOptions{Files: map[string]string{"SOUL.md": "original soul\n"}})
	d := &gatewayDriver{Driver: fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}}), target: gw.DirectTarget(t)}
	st := testdb.SQLite(t)
	s := newServer(t, server.Options{Store: st, Driver: d, Files: agentgw.New(agentgw.Options{}), FileTimeout: 3 * time.Second,
		Worker: worker.Options{Poll: 100 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.srv.Worker.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	admin := s.signIn(adminEmail, adminPassword)

	b := newBrowser(t, s.URL)

	// Sign-in: one message whether or not the account exists.
	b.open("/console/sign-in")
	b.page("sign-in")
	var refusals []string
	for _, email := range []string{adminEmail, "nobody@example.com"} {
		b.setValue("#email", email)
		b.setValue("#password", "wrong password")
		b.click("#sign-in")
		b.waitJS(10*time.Second, `document.querySelector("#alert").textContent !== ""`, "the refusal")
		refusals = append(refusals, b.text("#alert"))
		b.js(`document.querySelector("#alert").textContent = ""`)
	}
	if refusals[0] != refusals[1] || !strings.Contains(refusals[0], "not correct") {
		t.Errorf("sign-in refusals = %q; want one message for a wrong password and an unknown account", refusals)
	}
	b.signIn(adminEmail, adminPassword)

	ns := b.createNamespace("web")
	b.page("namespaces")
	b.createConfiguration(ns, "base")
	b.page("agents")

	// The create form: defaults filled, counters, NUL refused before
	// submitting, a stale defaults identity keeps the typed text.
	b.openCreateAgent(ns)
	if got := b.text("#count-AGENTS\\.md"); !strings.Contains(got, "/ 16,384 bytes") {
		t.Errorf("AGENTS.md counter = %q", got)
	}
	// The browser's own check of the content limit: 16,384 bytes (in
	// 2-byte characters here) pass, one byte more is flagged.
	soul := b.value("#init-SOUL\\.md")
	b.setValue("#init-SOUL\\.md", strings.Repeat("é", 8192))
	if got := b.text("#count-SOUL\\.md"); got != "16,384 / 16,384 bytes" {
		t.Errorf("SOUL.md counter at the limit = %q", got)
	}
	b.setValue("#init-SOUL\\.md", strings.Repeat("é", 8192)+"x")
	if got := b.text("#count-SOUL\\.md"); got != "16,385 / 16,384 bytes: is longer than 16,384 bytes" {
		t.Errorf("SOUL.md counter one byte past the limit = %q", got)
	}
	// The counters are not live regions (they would speak on every
	// keystroke); crossing the limit is announced once, either way.
	if eval[bool](b, `[...document.querySelectorAll(".count")].some(e => e.hasAttribute("aria-live"))`) {
		t.Error("a byte counter of the create form is an aria-live region")
	}
	if got := b.text("#count-live"); got != "SOUL.md is longer than 16,384 bytes." {
		t.Errorf("the announcement past the limit = %q", got)
	}
	b.setValue("#init-SOUL\\.md", soul)
	if got := b.text("#count-live"); got != "SOUL.md is within the limit again." {
		t.Errorf("the announcement back under the limit = %q", got)
	}
	b.page("agent-new")
	files := map[string]string{
		"AGENTS.md":   "# Agents, edited in the Console\n",
		"SOUL.md":     "",
		"IDENTITY.md": "name: Ünïcode\r\nline two",
		"USER.md":     "user notes\n",
	}
	b.fillAgent("writer", files)
	b.setValue("#init-USER\\.md", "bad \u0000 byte")
	b.click("#agent-create")
	b.waitJS(5*time.Second, `/NUL/.test(document.querySelector("#alert").textContent)`, "the NUL refusal")
	b.setValue("#init-USER\\.md", files["USER.md"])
	good := b.value("#defaults-id")
	b.js(`document.querySelector("#defaults-id").value = "` + strings.Repeat("0", 64) + `"`)
	b.click("#agent-create")
	b.waitJS(10*time.Second, `/defaults changed: reload/.test(document.querySelector("#alert").textContent)`, "the stale defaults message")
	for name, want := range files {
		want = strings.ReplaceAll(want, "\r\n", "\n")
		if got := b.value("#init-" + strings.ReplaceAll(name, ".", `\.`)); got != want {
			t.Errorf("after a stale defaults id %s = %q; want the typed %q", name, got, want)
		}
	}
	b.js(`document.querySelector("#defaults-id").value = "` + good + `"`)
	agent := b.submitAgent(ns)

	b.deploy(60 * time.Second)
	b.waitJS(10*time.Second, `document.querySelector("#revisions tbody tr td").textContent === "1" && document.querySelector("#revisions tbody tr").cells[4].textContent === "succeeded"`, "revision 1 succeeded in the revisions table")
	// deploy clicked Deploy twice at once: one request, one revision.
	var revs struct{ Items []struct{ ID string } }
	if code, _ := s.api("GET", "/namespaces/"+ns+"/agents/"+agent+"/revisions", nil, admin, nil, &revs); code != 200 || len(revs.Items) != 1 {
		t.Errorf("revisions after a double click on Deploy: %d, %d revisions; want 1", code, len(revs.Items))
	}
	b.page("agent")
	// The delivered setup holds the four files as typed, with LF newlines.
	var delivered map[string]string
	for _, c := range d.Calls() {
		if c.Setup != nil && c.AgentID == agent {
			delivered = c.Setup.Files
		}
	}
	want := map[string]string{}
	for k, v := range files {
		want[k] = strings.ReplaceAll(v, "\r\n", "\n")
	}
	if diff := cmp.Diff(want, delivered); diff != "" {
		t.Errorf("workspace setup delivered (-want +got):\n%s", diff)
	}

	// The editor: save, reload, discard.
	b.editSaveReload(ns, agent, "SOUL.md", "a new soul\n")
	if got, _ := gw.File("SOUL.md"); got != "a new soul\n" {
		t.Errorf("gateway SOUL.md = %q after the save", got)
	}
	b.page("file")

	// The editor's counter is not a live region; crossing the limit is
	// announced once.
	if eval[bool](b, `document.querySelector("#file-count").hasAttribute("aria-live")`) {
		t.Error("the editor's byte counter is an aria-live region")
	}
	b.setValue("#editor", strings.Repeat("x", 16385))
	b.setValue("#editor", strings.Repeat("x", 16386))
	if got := b.text("#count-live"); got != "SOUL.md is longer than 16,384 bytes." {
		t.Errorf("the editor's announcement past the limit = %q", got)
	}
	b.setValue("#editor", "short\n")
	if got := b.text("#count-live"); got != "SOUL.md is within the limit again." {
		t.Errorf("the editor's announcement back under the limit = %q", got)
	}
	b.click("#discard")

	// A file with CR and CRLF line endings is not "edited" by loading it
	// (the textarea shows LF): Save and Discard stay off and leaving does
	// not ask; a hint says that saving writes LF, which a save does.
	gw.PutFile("AGENTS.md", "one\r\ntwo\rthree\n")
	b.openEditor(ns, agent, "AGENTS.md")
	if !b.saveDisabled() || !eval[bool](b, `document.querySelector("#discard").disabled`) {
		t.Error("an unedited CRLF file: Save or Discard enabled")
	}
	if eval[bool](b, `(() => { const e = new Event("beforeunload", {cancelable: true}); window.dispatchEvent(e); return e.defaultPrevented; })()`) {
		t.Error("leaving an unedited CRLF file asks")
	}
	if !eval[bool](b, `!document.querySelector("#file-eol").hidden`) || !strings.Contains(b.text("#file-eol"), "saving writes LF") {
		t.Errorf("no hint that saving converts CR/CRLF to LF: %q", b.text("#file-eol"))
	}
	b.setValue("#editor", b.value("#editor")+"four\n")
	b.click("#save")
	b.waitJS(10*time.Second, `document.querySelector("#status").textContent === "Saved."`, "saving the CRLF file")
	if got, _ := gw.File("AGENTS.md"); got != "one\ntwo\nthree\nfour\n" {
		t.Errorf("gateway AGENTS.md = %q after the save; want LF line endings", got)
	}
	if !eval[bool](b, `document.querySelector("#file-eol").hidden`) {
		t.Error("the CR/CRLF hint stays after saving LF line endings")
	}

	// A file missing at load has no hash to compare with: before writing,
	// the page reads it again. Created meanwhile, it shows the conflict
	// (nothing overwritten); still missing, the save creates it.
	if _, ok := gw.File("USER.md"); ok {
		t.Fatal("USER.md exists on the fake gateway; this check needs a missing file")
	}
	b.openEditor(ns, agent, "USER.md")
	if got := b.text("#status"); !strings.Contains(got, "does not exist") {
		t.Errorf("USER.md status = %q; want it missing", got)
	}
	gw.PutFile("USER.md", "created meanwhile\n")
	b.setValue("#editor", "mine, a new file\n")
	b.click("#save")
	b.waitJS(10*time.Second, `!document.querySelector("#conflict").hidden`, "the conflict with a file created meanwhile")
	if th, yo := b.value("#theirs"), b.value("#yours"); th != "created meanwhile\n" || yo != "mine, a new file\n" {
		t.Errorf("conflict view for a created file: theirs %q, yours %q", th, yo)
	}
	if got, _ := gw.File("USER.md"); got != "created meanwhile\n" {
		t.Errorf("gateway USER.md = %q; a save without a hash overwrote a file created meanwhile", got)
	}
	b.click("#take-yours")
	b.waitJS(10*time.Second, `document.querySelector("#status").textContent === "Saved."`, "keeping mine over the created file")
	if got, _ := gw.File("USER.md"); got != "mine, a new file\n" {
		t.Errorf("gateway USER.md = %q after keeping mine", got)
	}
	b.openEditor(ns, agent, "IDENTITY.md")
	b.setValue("#editor", "a created identity\n")
	b.click("#save")
	b.waitJS(10*time.Second, `document.querySelector("#status").textContent === "Saved."`, "creating IDENTITY.md")
	if got, _ := gw.File("IDENTITY.md"); got != "a created identity\n" {
		t.Errorf("gateway IDENTITY.md = %q after creating it", got)
	}

	// 412: someone writes through the API after the page loaded.
	b.openEditor(ns, agent, "SOUL.md")
	if code, _ := s.api("PUT", "/namespaces/"+ns+"/agents/"+agent+"/workspace/files/SOUL.md", map[string]string{"content": "theirs\n"}, admin, nil, nil); code != 200 {
		t.Fatalf("PUT through the API: %d", code)
	}
	b.setValue("#editor", "mine\n")
	b.click("#save")
	b.waitJS(10*time.Second, `!document.querySelector("#conflict").hidden`, "the conflict view")
	if th, yo := b.value("#theirs"), b.value("#yours"); th != "theirs\n" || yo != "mine\n" {
		t.Errorf("conflict view: theirs %q, yours %q", th, yo)
	}
	b.page("file-conflict")
	// Clicked twice at once: one save (the frame count below). The focus
	// was on the button; it goes to the editor, not to <body>.
	b.js(`const y = document.querySelector("#take-yours"); y.focus(); y.click(); y.click()`)
	b.waitJS(10*time.Second, `document.querySelector("#status").textContent === "Saved."`, "saving mine against the new hash")
	if got, _ := gw.File("SOUL.md"); got != "mine\n" {
		t.Errorf("gateway SOUL.md = %q after keeping mine", got)
	}
	if !b.focused("#editor") {
		t.Errorf("after Keep yours the focus is on %s; want the editor", eval[string](b, `document.activeElement.tagName + "#" + document.activeElement.id`))
	}
	// A second conflict, resolved by taking theirs.
	gw.PutFile("SOUL.md", "theirs again\n")
	b.setValue("#editor", "mine again\n")
	b.click("#save")
	b.waitJS(10*time.Second, `!document.querySelector("#conflict").hidden`, "the second conflict")
	b.js(`const t = document.querySelector("#take-theirs"); t.focus(); t.click()`)
	if got := b.value("#editor"); got != "theirs again\n" || !b.saveDisabled() {
		t.Errorf("after taking theirs: editor %q, save disabled %v", got, b.saveDisabled())
	}
	time.Sleep(200 * time.Millisecond) // a hidden element's focus is dropped at the next rendering
	if !b.focused("#editor") {
		t.Errorf("after Take theirs the focus is on %s; want the editor", eval[string](b, `document.activeElement.tagName + "#" + document.activeElement.id`))
	}

	// UNKNOWN_OUTCOME: the gateway drops the connection after the write
	// (it applied it). Saving stays blocked until a reload, which says the
	// write was applied; the text edited since is kept beside the file.
	gw.SetFault("agents.files.set", gwtest.FaultClose)
	b.setValue("#editor", "maybe\n")
	b.click("#save")
	b.waitJS(15*time.Second, `/outcome of the save is unknown/.test(document.querySelector("#alert").textContent)`, "the unknown outcome")
	b.setValue("#editor", "maybe, edited further\n")
	if !b.saveDisabled() {
		t.Error("Save enabled after an unknown outcome, before a reload")
	}
	gw.SetFault("agents.files.set", gwtest.FaultNone)
	b.click("#reload")
	b.waitJS(10*time.Second, `/earlier save was applied/.test(document.querySelector("#status").textContent)`, "the resolution after reload")
	if eval[bool](b, `document.querySelector("#confirm").open`) {
		t.Error("the reload after an unknown outcome asks to discard the text it keeps")
	}
	if th, yo, ed := b.value("#theirs"), b.value("#yours"), b.value("#editor"); th != "maybe\n" || yo != "maybe, edited further\n" || ed != yo {
		t.Errorf("after an applied unknown outcome: theirs %q, yours %q, editor %q; want the file and the text edited since", th, yo, ed)
	}
	b.click("#take-theirs")
	// Leaving with unsaved changes asks: the page registers beforeunload.
	b.setValue("#editor", "unsaved\n")
	if !eval[bool](b, `(() => { const e = new Event("beforeunload", {cancelable: true}); window.dispatchEvent(e); return e.defaultPrevented; })()`) {
		t.Error("leaving with unsaved changes does not ask")
	}
	b.click("#discard")

	// A save that hangs until OCC's deadline: Reload is off while it is
	// out, the outcome is unknown (not applied: the fake applies nothing
	// when it hangs), and the reload keeps the text: it is shown beside
	// the current file and saved again only on Keep yours.
	b.openEditor(ns, agent, "USER.md")
	hint := b.text("#file-hint")
	gw.SetFault("agents.files.set", gwtest.FaultHang)
	b.setValue("#editor", "sent while it hung\n")
	b.click("#save")
	b.waitJS(5*time.Second, `document.querySelector("#status").textContent === "Saving…"`, "the save in flight")
	if !eval[bool](b, `document.querySelector("#reload").disabled`) {
		t.Error("Reload enabled while a save is in flight")
	}
	b.waitJS(15*time.Second, `/outcome of the save is unknown/.test(document.querySelector("#alert").textContent)`, "the unknown outcome of the hung save")
	if got := b.text("#file-hint"); !strings.Contains(got, "blocked until you reload") {
		t.Errorf("hint after an unknown outcome = %q", got)
	}
	gw.SetFault("agents.files.set", gwtest.FaultNone)
	b.click("#reload")
	b.waitJS(10*time.Second, `/earlier save was not applied/.test(document.querySelector("#status").textContent)`, "the resolution of the hung save")
	if eval[bool](b, `document.querySelector("#confirm").open`) {
		t.Error("the reload after an unknown outcome asks to discard the text it keeps")
	}
	if th, yo, ed := b.value("#theirs"), b.value("#yours"), b.value("#editor"); !eval[bool](b, `!document.querySelector("#conflict").hidden`) ||
		th != "mine, a new file\n" || yo != "sent while it hung\n" || ed != yo {
		t.Errorf("after an unknown outcome not applied: theirs %q, yours %q, editor %q; want the file beside the text sent", th, yo, ed)
	}
	if got := b.text("#file-hint"); got != hint {
		t.Errorf("hint after the unknown outcome was settled = %q; want %q", got, hint)
	}
	if got, _ := gw.File("USER.md"); got != "mine, a new file\n" {
		t.Errorf("gateway USER.md = %q after settling; the page must not resend by itself", got)
	}
	b.click("#take-yours")
	b.waitJS(10*time.Second, `document.querySelector("#status").textContent === "Saved."`, "keeping the text of the unknown outcome")
	if got, _ := gw.File("USER.md"); got != "sent while it hung\n" {
		t.Errorf("gateway USER.md = %q after keeping mine", got)
	}
	if n := gw.Frames("agents.files.set"); n != 11 {
		t.Errorf("gateway set frames = %d; want 11 (one by the API, ten by the page; never replayed)", n)
	}

	// A 401 on save (the session ended): admission refused it, nothing
	// was written; the page says so, not "unknown outcome", and goes to
	// sign-in. What the page says before it leaves is posted (keepalive)
	// to a path the test's server hook records.
	b.openEditor(ns, agent, "USER.md")
	var (
		probeMu sync.Mutex
		probes  []string
	)
	s.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path != "/test-probe" {
			return false
		}
		body, _ := io.ReadAll(r.Body)
		probeMu.Lock()
		probes = append(probes, string(body))
		probeMu.Unlock()
		w.WriteHeader(204)
		return true
	})
	b.js(`const a = document.querySelector("#alert"); new MutationObserver(() => { fetch("/test-probe", {method: "POST", body: a.textContent, keepalive: true}) }).observe(a, {childList: true, characterData: true, subtree: true})`)
	if !eval[bool](b, `fetch("/api/auth/sign-out", {method: "POST"}).then(r => r.ok)`) {
		t.Fatal("signing the page's session out")
	}
	b.setValue("#editor", "after the session ended\n")
	b.click("#save")
	b.waitJS(10*time.Second, `location.pathname === "/console/sign-in"`, "sign-in after a 401 on save")
	time.Sleep(500 * time.Millisecond) // the last probes land
	s.setIntercept(nil)
	probeMu.Lock()
	said := strings.Join(probes, " | ")
	probeMu.Unlock()
	if !strings.Contains(said, "session has ended, so nothing was written") || strings.Contains(said, "unknown") {
		t.Errorf("the page said %q on a 401 save; want that nothing was written", said)
	}
	if got, _ := gw.File("USER.md"); got != "sent while it hung\n" {
		t.Errorf("gateway USER.md = %q after a 401", got)
	}
	b.signIn(adminEmail, adminPassword)

	// The audit log: filters and pagination.
	b.open("/console/audit")
	b.waitJS(10*time.Second, `document.querySelectorAll("#audit tbody tr").length > 1`, "audit events")
	b.page("audit")
	b.setValue("#f-action", "openclaw.agents.workspace.files.write")
	b.click("#audit-apply")
	b.waitJS(10*time.Second, `[...document.querySelectorAll("#audit tbody tr")].every(r => r.cells[2].textContent === "openclaw.agents.workspace.files.write")`, "the filtered audit log")
	b.setValue("#f-action", "")
	b.js(`document.querySelector("#f-limit").value = "10"`)
	b.click("#audit-apply")
	b.waitJS(10*time.Second, `!document.querySelector("#audit-next").disabled`, "a next page")
	first := b.text("#audit tbody tr td")
	// An action typed but not applied: Next page keeps the shown filters.
	b.setValue("#f-action", "no.such.action")
	b.click("#audit-next")
	b.waitJS(10*time.Second, `/page 2/.test(document.querySelector("#status").textContent)`, "page 2")
	if got := b.text("#audit tbody tr td"); got == first || got == "No events match." {
		t.Errorf("the audit log's second page starts with %q (the first page's %q)", got, first)
	}
	if u := b.lastRequest("/audit-events"); strings.Contains(u, "action=") || !strings.Contains(u, "limit=10") {
		t.Errorf("Next page read %s; want the shown page's filters", u)
	}
	// since, until and withoutOutcome, as the API has them.
	b.setValue("#f-action", "")
	b.js(`document.querySelector("#f-withoutOutcome").checked = true`)
	b.click("#audit-apply")
	b.waitJS(10*time.Second, `/^\d+ events\.$/.test(document.querySelector("#status").textContent)`, "the attempts without an outcome")
	if u := b.lastRequest("/audit-events"); !strings.Contains(u, "withoutOutcome=true") {
		t.Errorf("withoutOutcome: the page read %s", u)
	}
	if !eval[bool](b, `[...document.querySelectorAll("#audit tbody tr")].every(r => r.cells.length === 1 || r.cells[5].textContent === "attempted")`) {
		t.Error("withoutOutcome lists events other than attempts")
	}
	b.js(`document.querySelector("#f-withoutOutcome").checked = false`)
	for _, f := range []struct{ id, value string }{{"#f-since", "2999-01-01T00:00:00"}, {"#f-until", "2000-01-01T00:00:00"}} {
		b.setValue(f.id, f.value)
		b.js(`document.querySelector("#status").textContent = ""`)
		b.click("#audit-apply")
		b.waitJS(10*time.Second, `document.querySelector("#status").textContent === "0 events."`, "no events "+f.id)
		if u := b.lastRequest("/audit-events"); !strings.Contains(u, strings.TrimPrefix(f.id, "#f-")+"=") {
			t.Errorf("%s: the page read %s", f.id, u)
		}
		b.setValue(f.id, "")
	}

	// Sign-out that fails (the connection dropped, then a 500) stays on
	// the page and says so.
	b.open("/console/namespaces")
	for _, fail := range []func(http.ResponseWriter){
		func(w http.ResponseWriter) {
			if c, _, err := http.NewResponseController(w).Hijack(); err == nil {
				c.Close()
			}
		},
		func(w http.ResponseWriter) {
			w.Header().Set("Content-Type", "application/json")
			w.WriteHeader(500)
			fmt.Fprint(w, `{"error":{"code":"INTERNAL","message":"Broken."}}`)
		},
	} {
		s.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != "/api/auth/sign-out" {
				return false
			}
			fail(w)
			return true
		})
		b.js(`document.querySelector("#alert").textContent = ""`)
		b.click("#sign-out")
		b.waitJS(10*time.Second, `/Sign-out failed/.test(document.querySelector("#alert").textContent)`, "the failed sign-out")
		time.Sleep(300 * time.Millisecond)
		if p := b.path(); p != "/console/namespaces" {
			t.Errorf("a failed sign-out left the page for %s", p)
		}
	}
	s.setIntercept(nil)

	// The Namespaces page follows a transitional Namespace every second
	// without taking the focus from a row: it rebuilds the table only when
	// something changed, and then gives the focus to the same control.
	var stuck struct{ ID string }
	if code, _ := s.api("POST", "/namespaces", map[string]string{"name": "stuck"}, admin, nil, &stuck); code != 201 {
		t.Fatalf("creating Namespace stuck: %d", code)
	}
	for deadline := time.Now().Add(30 * time.Second); ; {
		var n struct{ Status string }
		s.api("GET", "/namespaces/"+stuck.ID, nil, admin, nil, &n)
		if n.Status == "ready" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("Namespace stuck: %q, not ready", n.Status)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := st.UpdateNamespaceStatus(context.Background(), stuck.ID, store.NamespaceProvisioning, time.Now()); err != nil {
		t.Fatal(err)
	}
	b.open("/console/namespaces")
	nsButton := func(name string) string {
		return fmt.Sprintf(`document.querySelector("#namespaces button[aria-label='Delete Namespace %s']")`, name)
	}
	b.waitJS(10*time.Second, `[...document.querySelectorAll("#namespaces tbody tr")].some(r => r.cells[0].textContent === "stuck" && r.cells[1].textContent === "provisioning")`, "Namespace stuck provisioning")
	b.js(nsButton("web") + `.focus()`)
	time.Sleep(2500 * time.Millisecond) // two or three polls
	if !eval[bool](b, `document.activeElement === `+nsButton("web")) {
		t.Errorf("the Namespaces page's polling took the focus from a row's button (now on %s)", eval[string](b, `document.activeElement.tagName`))
	}
	if err := st.UpdateNamespaceStatus(context.Background(), stuck.ID, store.NamespaceReady, time.Now()); err != nil {
		t.Fatal(err)
	}
	b.waitJS(10*time.Second, `[...document.querySelectorAll("#namespaces tbody tr")].some(r => r.cells[0].textContent === "stuck" && r.cells[1].textContent === "ready")`, "Namespace stuck ready in the page")
	if !eval[bool](b, `document.activeElement === `+nsButton("web")) {
		t.Errorf("after the table changed the focus is on %s; want the same row's button", eval[string](b, `document.activeElement.tagName`))
	}
	// Delete a row: the focus stays on its button while it is deleting,
	// then moves to the next row's (here the row before: it was the last).
	b.js(nsButton("stuck") + `.focus(); ` + nsButton("stuck") + `.click()`)
	b.waitJS(5*time.Second, `document.querySelector("#confirm").open`, "the confirmation dialog")
	b.click("#confirm-ok")
	b.waitJS(30*time.Second, `![...document.querySelectorAll("#namespaces tbody tr")].some(r => r.cells[0].textContent === "stuck")`, "Namespace stuck gone from the page")
	if !eval[bool](b, `document.activeElement === `+nsButton("web")) {
		t.Errorf("after deleting a row the focus is on %s; want the next row's button", eval[string](b, `document.activeElement.tagName`))
	}

	// The Namespaces page by page: 100 more Namespaces (written to the
	// store directly, created after every earlier one) fill a second page.
	for i := range 100 {
		now := time.Now()
		if err := st.CreateNamespace(context.Background(), store.Namespace{ID: ids.New(ids.Namespace), Name: fmt.Sprintf("bulk-%03d", i),
			Status: store.NamespaceReady, CreatedAt: now, UpdatedAt: now}); err != nil {
			t.Fatal(err)
		}
	}
	b.open("/console/namespaces")
	b.waitJS(10*time.Second, `document.querySelectorAll("#namespaces tbody tr").length === 100 && !document.querySelector("#ns-next").disabled`,
		"a full first page of Namespaces and a next page")
	firstNS := b.text("#namespaces tbody tr td")
	b.click("#ns-next")
	b.waitJS(10*time.Second, `document.querySelector("#ns-next").disabled && /^bulk-/.test(document.querySelector("#namespaces tbody tr td").textContent)`,
		"the last page of Namespaces")
	if got := b.text("#namespaces tbody tr:last-child td"); got != "bulk-099" {
		t.Errorf("the last Namespace on the last page = %q; want bulk-099", got)
	}
	b.click("#ns-first")
	b.waitJS(10*time.Second, `!document.querySelector("#ns-next").disabled`, "the first page again")
	if got := b.text("#namespaces tbody tr td"); got != firstNS {
		t.Errorf("First page starts with %q; want %q", got, firstNS)
	}

	// IAM: a service principal and a key shown once, never stored.
	b.open("/console/iam")
	b.waitJS(10*time.Second, `document.querySelectorAll("#roles tbody tr").length >= 3`, "the roles")
	b.setValue("#sp-name", "robot")
	b.js(`document.querySelector("#sp-form").requestSubmit()`)
	b.waitJS(10*time.Second, `[...document.querySelectorAll("#sps tbody tr")].some(r => r.cells[0].textContent === "robot")`, "the service principal")
	sp := eval[string](b, `[...document.querySelectorAll("#sps tbody tr")].find(r => r.cells[0].textContent === "robot").cells[1].textContent`)
	b.setValue("#key-sp", sp)
	b.setValue("#key-name", "ci")
	b.js(`document.querySelector("#key-form").requestSubmit()`)
	b.waitJS(10*time.Second, `!document.querySelector("#key-once").hidden && document.querySelector("#key-value").value.length > 20`, "the key shown once")
	b.page("iam")
	b.open("/console/iam")
	b.waitJS(10*time.Second, `document.querySelector("#key-once").hidden && document.querySelector("#key-value").value === ""`, "the key gone after a reload")

	// A form the page's script has no handler for (as every form is
	// before the page's first reads have loaded) does not go out as a
	// native POST: the page stays where it is.
	b.js(`const f = document.createElement("form"); f.method = "post"; f.id = "stray"; document.querySelector("main").append(f); f.requestSubmit()`)
	time.Sleep(500 * time.Millisecond) // a navigation, if one started, replaces the document by then
	if !eval[bool](b, `location.pathname === "/console/iam" && document.querySelector("#stray") !== null`) {
		t.Error("a form submitted before its handler was attached left the page")
	}

	// A viewer sees read-only pages.
	var u struct{ ID string }
	s.api("POST", "/iam/users", map[string]string{"email": "viewer@example.com", "password": adminPassword}, admin, nil, &u)
	s.api("POST", "/iam/access-bindings", map[string]string{"subjectId": u.ID, "roleId": authz.RoleViewerID}, admin, nil, nil)
	b.signOut()
	b.signIn("viewer@example.com", adminPassword)
	b.waitJS(10*time.Second, `document.querySelector("#ns-name").disabled && document.querySelector("#ns-create").disabled`, "the viewer's read-only create form")
	b.page("viewer-namespaces")
	b.open("/console/namespaces/" + ns + "/agents/" + agent)
	b.waitJS(10*time.Second, `document.querySelector("#agent-facts dd")`, "the Agent page")
	if !eval[bool](b, `["#deploy", "#stop", "#delete"].every(s => document.querySelector(s).disabled)`) {
		t.Error("a viewer's Deploy, Stop or Delete is enabled")
	}
	b.page("viewer-agent")
	b.openEditor(ns, agent, "SOUL.md")
	b.setValue("#editor", "viewer edit\n")
	if !b.saveDisabled() || !eval[bool](b, `document.querySelector("#editor").readOnly`) {
		t.Error("a viewer can edit or save a file")
	}
	b.open("/console/iam")
	b.waitJS(10*time.Second, `/Read-only/.test(document.querySelector("#alert").textContent)`, "IAM read-only for a viewer")
	b.waitJS(10*time.Second, `document.querySelectorAll("#sps button").length > 0`, "the service principals a viewer may read, with their Delete buttons")
	if !eval[bool](b, `Array.from(document.querySelectorAll("main button")).filter(x => x.textContent === "Delete").every(x => x.disabled)`) {
		t.Error("a viewer's Delete buttons on the identity and access page are enabled")
	}
	b.signOut()

	// Delete with confirmation.
	b.signIn(adminEmail, adminPassword)
	b.open("/console/namespaces/" + ns + "/agents/" + agent)
	b.waitJS(10*time.Second, `document.querySelector("#agent-facts dd")`, "the Agent page")
	b.click("#delete")
	b.waitJS(5*time.Second, `document.querySelector("#confirm").open`, "the confirmation dialog")
	b.checkAccessibility("confirm-dialog")
	b.click("#confirm-ok")
	b.waitJS(10*time.Second, fmt.Sprintf(`location.pathname === %q`, "/console/namespaces/"+ns), "back on the Agents page")

	// A cross-site form post is refused by admission and changes nothing.
	evil := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "text/html")
		fmt.Fprintf(w, `<!doctype html><form method="post" action="%s/namespaces" enctype="text/plain">`+
			`<input name='{"name":"evil","x":"' value='"}'></form><script>document.forms[0].submit()</script>`, s.URL)
	}))
	t.Cleanup(evil.Close)
	b.step("open the cross-site page", chromedp.Navigate(strings.Replace(evil.URL, "127.0.0.1", "localhost", 1)))
	b.waitJS(10*time.Second, `location.pathname === "/namespaces" && /FORBIDDEN/.test(document.body.textContent)`, "the refused cross-site post")
	var list struct{ Items []struct{ Name string } }
	s.api("GET", "/namespaces", nil, admin, nil, &list)
	for _, n := range list.Items {
		if n.Name == "evil" {
			t.Error("the cross-site form post created a Namespace")
		}
	}
}
