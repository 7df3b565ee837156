package console_test

import (
	"context"
	"fmt"
	"net/http"
	"net/http/httptest"
	"strings"
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
	b.setValue("#init-SOUL\\.md", soul)
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
	// Clicked twice at once: one save (the frame count below).
	b.js(`document.querySelector("#take-yours").click(); document.querySelector("#take-yours").click()`)
	b.waitJS(10*time.Second, `document.querySelector("#status").textContent === "Saved."`, "saving mine against the new hash")
	if got, _ := gw.File("SOUL.md"); got != "mine\n" {
		t.Errorf("gateway SOUL.md = %q after keeping mine", got)
	}
	// A second conflict, resolved by taking theirs.
	gw.PutFile("SOUL.md", "theirs again\n")
	b.setValue("#editor", "mine again\n")
	b.click("#save")
	b.waitJS(10*time.Second, `!document.querySelector("#conflict").hidden`, "the second conflict")
	b.click("#take-theirs")
	if got := b.value("#editor"); got != "theirs again\n" || !b.saveDisabled() {
		t.Errorf("after taking theirs: editor %q, save disabled %v", got, b.saveDisabled())
	}

	// UNKNOWN_OUTCOME: the gateway drops the connection after the write
	// (it applied it). Saving stays blocked until a reload, which says the
	// write was applied.
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
	b.waitJS(5*time.Second, `document.querySelector("#confirm").open`, "the question before discarding unsaved text")
	b.click("#confirm-ok")
	b.waitJS(10*time.Second, `/earlier save was applied/.test(document.querySelector("#status").textContent)`, "the resolution after reload")
	if n := gw.Frames("agents.files.set"); n != 6 {
		t.Errorf("gateway set frames = %d; want 6 (one by the API, five by the page; never replayed)", n)
	}
	// Leaving with unsaved changes asks: the page registers beforeunload.
	b.setValue("#editor", "unsaved\n")
	if !eval[bool](b, `(() => { const e = new Event("beforeunload", {cancelable: true}); window.dispatchEvent(e); return e.defaultPrevented; })()`) {
		t.Error("leaving with unsaved changes does not ask")
	}
	b.click("#discard")

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
	b.click("#audit-next")
	b.waitJS(10*time.Second, `/page 2/.test(document.querySelector("#status").textContent)`, "page 2")
	if b.text("#audit tbody tr td") == first {
		t.Error("the audit log's second page starts with the first page's event")
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
