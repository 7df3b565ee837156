package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/worker"
)

// newFormsServer starts an OCC server on the fake Compute driver with its
// worker, and a browser (not signed in); it returns the administrator's
// session cookie for calls through the API.
func newFormsServer(t *testing.T) (*occServer, *http.Cookie, *browser) {
	t.Helper()
	d := fake.New(fake.Options{Capabilities: compute.Capabilities{WorkspaceSetup: true, LiveFiles: true}})
	s := newServer(t, server.Options{Store: testdb.SQLite(t), Driver: d, Worker: worker.Options{Poll: 100 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.srv.Worker.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })
	return s, s.signIn(adminEmail, adminPassword), newBrowser(t, s.URL)
}

// endSession signs the page's session out behind its back, as an idle
// timeout would.
func (b *browser) endSession() {
	b.t.Helper()
	if !eval[bool](b, `fetch("/api/auth/sign-out", {method: "POST"}).then(r => r.ok)`) {
		b.t.Fatal("signing the page's session out")
	}
}

// signInElsewhere signs in without leaving the page, as another tab of
// the same browser would (the cookie is shared).
func (b *browser) signInElsewhere(email, password string) {
	b.t.Helper()
	cred, _ := json.Marshal(map[string]string{"email": email, "password": password})
	if !eval[bool](b, `fetch("/api/auth/sign-in/email", {method: "POST", headers: {"Content-Type": "application/json"}, body: `+fmt.Sprintf("%q", cred)+`}).then(r => r.ok)`) {
		b.t.Fatal("signing in from the page")
	}
}

// leaveAsks dispatches beforeunload and reports whether the page asks.
func (b *browser) leaveAsks() bool {
	b.t.Helper()
	return eval[bool](b, `(() => { const e = new Event("beforeunload", {cancelable: true}); window.dispatchEvent(e); return e.defaultPrevented; })()`)
}

// TestConsoleFormsKeepTextWhenSessionEnds: a form submitted after the
// session ended is refused at admission (401) and nothing is done; the page
// stays with the typed text and says to sign in again in another tab, after
// which the same form goes through. The create-Agent page asks before
// leaving (and before Sign out) while a file differs from its default.
func TestConsoleFormsKeepTextWhenSessionEnds(t *testing.T) {
	s, admin, b := newFormsServer(t)
	b.signIn(adminEmail, adminPassword)
	ns := b.createNamespace("forms")
	b.createConfiguration(ns, "base")

	b.openCreateAgent(ns)
	b.setValue("#agent-name", "keeper")
	if b.leaveAsks() {
		t.Error("leaving the create form with the default files asks")
	}
	files := map[string]string{"AGENTS.md": "typed agents\n", "USER.md": "typed user notes\n"}
	b.fillAgent("keeper", files)
	if !b.leaveAsks() {
		t.Error("leaving the create form with typed files does not ask")
	}

	// The session ends; the submit is refused, and the page keeps the text.
	b.endSession()
	b.click("#agent-create")
	b.waitJS(10*time.Second, `/session has ended/.test(document.querySelector("#alert").textContent)`, "the session-ended message on the create form")
	time.Sleep(500 * time.Millisecond) // a navigation, if one started, replaces the document by then
	if p := b.path(); p != "/console/namespaces/"+ns+"/agents/new" {
		t.Fatalf("after a 401 the create form left for %s", p)
	}
	if got := b.text("#alert"); !strings.Contains(got, "sign in again in another tab") {
		t.Errorf("session-ended message = %q; want it to say how to go on", got)
	}
	for name, want := range files {
		if got := b.value("#init-" + strings.ReplaceAll(name, ".", `\.`)); got != want {
			t.Errorf("%s after a 401 = %q; want the typed %q", name, got, want)
		}
	}

	// Signed in again in another tab: Sign out here asks first while the
	// text differs, and cancelled, changes nothing.
	b.signInElsewhere(adminEmail, adminPassword)
	b.click("#sign-out")
	b.waitJS(5*time.Second, `document.querySelector("#confirm").open`, "the question before signing out with typed text")
	b.click("#confirm-cancel")
	time.Sleep(300 * time.Millisecond)
	if p := b.path(); p != "/console/namespaces/"+ns+"/agents/new" || !eval[bool](b, `fetch("/api/auth/session").then(r => r.ok)`) {
		t.Errorf("a cancelled sign-out: page %s, or the session ended", p)
	}
	// The same form, submitted again, creates the Agent.
	agent := b.submitAgent(ns)
	var got map[string]any
	if code, e := s.api("GET", "/namespaces/"+ns+"/agents/"+agent, nil, admin, nil, &got); code != 200 {
		t.Errorf("the Agent created after signing in again: %d %s", code, e)
	}

	// The Configuration form: its document stays too.
	b.open("/console/namespaces/" + ns)
	b.waitJS(10*time.Second, `document.querySelectorAll("#configurations tbody tr td").length > 1`, "the Configurations")
	b.endSession()
	b.setValue("#cfg-name", "typed")
	b.setValue("#cfg-doc", `{"typed": "by hand"}`)
	b.click("#cfg-create")
	b.waitJS(10*time.Second, `/session has ended/.test(document.querySelector("#alert").textContent)`, "the session-ended message on the Configuration form")
	time.Sleep(500 * time.Millisecond)
	if p, doc := b.path(), b.value("#cfg-doc"); p != "/console/namespaces/"+ns || doc != `{"typed": "by hand"}` {
		t.Errorf("after a 401 on the Configuration form: page %s, document %q", p, doc)
	}

	// Identity and access: a role's permissions (a text area) stay.
	b.signInElsewhere(adminEmail, adminPassword)
	b.open("/console/iam")
	b.waitJS(10*time.Second, `document.querySelectorAll("#roles tbody tr").length >= 3`, "the roles")
	b.endSession()
	b.setValue("#role-name", "typed")
	b.setValue("#role-perms", "read agent\nread namespace")
	b.js(`document.querySelector("#role-form").requestSubmit()`)
	b.waitJS(10*time.Second, `/session has ended/.test(document.querySelector("#alert").textContent)`, "the session-ended message on the role form")
	time.Sleep(500 * time.Millisecond)
	if p, perms := b.path(), b.value("#role-perms"); p != "/console/iam" || perms != "read agent\nread namespace" {
		t.Errorf("after a 401 on the role form: page %s, permissions %q", p, perms)
	}
}

// TestConsoleSignInRefusals: only a wrong credential (401) gets the one
// message that never says whether an account exists; an untrusted origin
// (403), throttling (429, with its Retry-After) and server faults (5xx)
// show the server's message.
func TestConsoleSignInRefusals(t *testing.T) {
	s, _, b := newFormsServer(t)
	b.open("/console/sign-in")
	cases := []struct {
		name       string
		status     int
		retryAfter string
		body       string
		want       []string
	}{
		{"throttled", 429, "42", `{"error":{"code":"TOO_MANY_REQUESTS","message":"Too many sign-in attempts; try again later.","data":{"retryAfterSeconds":42}}}`,
			[]string{"Too many sign-in attempts; try again later.", "Try again in 42 seconds."}},
		{"origin not trusted", 403, "", `{"error":{"code":"FORBIDDEN","message":"The request's origin is not trusted."}}`,
			[]string{"The request's origin is not trusted.", "(FORBIDDEN)"}},
		{"overloaded", 503, "5", `{"error":{"code":"DEPENDENCY_UNAVAILABLE","message":"The service is busy; retry later."}}`,
			[]string{"The service is busy; retry later.", "Try again in 5 seconds."}},
		{"server fault", 500, "", `{"error":{"code":"INTERNAL","message":"Internal error."}}`,
			[]string{"Internal error.", "(INTERNAL)"}},
	}
	for _, c := range cases {
		s.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
			if r.URL.Path != "/api/auth/sign-in/email" {
				return false
			}
			w.Header().Set("Content-Type", "application/json")
			if c.retryAfter != "" {
				w.Header().Set("Retry-After", c.retryAfter)
			}
			w.WriteHeader(c.status)
			fmt.Fprint(w, c.body)
			return true
		})
		b.js(`document.querySelector("#alert").textContent = ""`)
		b.setValue("#email", adminEmail)
		b.setValue("#password", adminPassword)
		b.click("#sign-in")
		b.waitJS(10*time.Second, `document.querySelector("#alert").textContent !== ""`, "the refusal "+c.name)
		got := b.text("#alert")
		for _, w := range c.want {
			if !strings.Contains(got, w) {
				t.Errorf("sign-in %s (%d): the page says %q; want %q in it", c.name, c.status, got, w)
			}
		}
		if strings.Contains(got, "not correct") {
			t.Errorf("sign-in %s (%d): the page says %q, blaming the credentials", c.name, c.status, got)
		}
	}
	s.setIntercept(nil)
	// A wrong password (a real 401) still gets the one message.
	b.js(`document.querySelector("#alert").textContent = ""`)
	b.setValue("#email", adminEmail)
	b.setValue("#password", "wrong password")
	b.click("#sign-in")
	b.waitJS(10*time.Second, `document.querySelector("#alert").textContent !== ""`, "the refusal of a wrong password")
	if got := b.text("#alert"); got != "Sign-in failed: the email or password is not correct." {
		t.Errorf("sign-in with a wrong password: the page says %q", got)
	}
}

// TestConsoleConfigurationDocumentAsTyped: the Configuration form sends
// the document as typed (the API keeps it byte for byte, compacted), not
// re-encoded by the browser: a large integer, a number's spelling and an
// escape survive, and duplicate keys reach the API, which refuses them,
// rather than being dropped silently.
func TestConsoleConfigurationDocumentAsTyped(t *testing.T) {
	s, admin, b := newFormsServer(t)
	b.signIn(adminEmail, adminPassword)
	ns := b.createNamespace("docs")
	b.open("/console/namespaces/" + ns)
	b.waitJS(10*time.Second, `document.querySelector("#configurations tbody tr td")`, "the Configurations")
	doc := "{\n  \"big\": 12345678901234567890,\n  \"ratio\": 1.50,\n  \"exp\": 1e2,\n  \"text\": \"caf\\u00e9\"\n}"
	b.setValue("#cfg-name", "exact")
	b.setValue("#cfg-doc", doc)
	b.click("#cfg-create")
	b.waitJS(10*time.Second, `[...document.querySelectorAll("#configurations tbody tr")].some(r => r.cells[0].textContent === "exact")`, "Configuration exact")
	var want bytes.Buffer
	if err := json.Compact(&want, []byte(doc)); err != nil {
		t.Fatal(err)
	}
	var list struct {
		Items []struct {
			Name     string
			Document json.RawMessage
		}
	}
	if code, e := s.api("GET", "/namespaces/"+ns+"/configurations", nil, admin, nil, &list); code != 200 {
		t.Fatalf("listing Configurations: %d %s", code, e)
	}
	names := map[string]string{}
	for _, c := range list.Items {
		names[c.Name] = string(c.Document)
	}
	if got := names["exact"]; got != want.String() {
		t.Errorf("Configuration exact's document = %s; want %s (as typed, compacted)", got, want.String())
	}

	b.setValue("#cfg-name", "dup")
	b.setValue("#cfg-doc", `{"a": 1, "a": 2}`)
	b.click("#cfg-create")
	b.waitJS(10*time.Second, `document.querySelector("#alert").textContent !== ""`, "the refusal of duplicate keys")
	s.api("GET", "/namespaces/"+ns+"/configurations", nil, admin, nil, &list)
	for _, c := range list.Items {
		if c.Name == "dup" {
			t.Errorf("a document with duplicate keys was created as %s; want the API's refusal", c.Document)
		}
	}
}

// TestConsoleAuditPagingWhileLoading: while Apply filters is loading, Next
// page is off (its cursor belongs to the page being replaced), and a reply
// that a later Apply superseded does not fill the table.
func TestConsoleAuditPagingWhileLoading(t *testing.T) {
	s, admin, b := newFormsServer(t)
	for i := range 12 {
		if code, e := s.api("POST", "/namespaces", map[string]string{"name": fmt.Sprintf("audit-%02d", i)}, admin, nil, nil); code != 201 {
			t.Fatalf("creating a Namespace: %d %s", code, e)
		}
	}
	b.signIn(adminEmail, adminPassword)
	b.open("/console/audit")
	b.waitJS(10*time.Second, `document.querySelectorAll("#audit tbody tr").length > 1`, "audit events")
	b.js(`document.querySelector("#f-limit").value = "10"`)
	b.click("#audit-apply")
	b.waitJS(10*time.Second, `!document.querySelector("#audit-next").disabled`, "a next page")

	// The reads of one filter are slow; the page's requests are recorded.
	const slow = "openclaw.namespaces.create"
	var (
		mu   sync.Mutex
		seen []string
	)
	s.setIntercept(func(w http.ResponseWriter, r *http.Request) bool {
		if r.URL.Path == "/audit-events" {
			mu.Lock()
			seen = append(seen, r.URL.RawQuery)
			mu.Unlock()
			if r.URL.Query().Get("action") == slow {
				time.Sleep(1500 * time.Millisecond)
			}
		}
		return false
	})
	// Apply a slow filter and click Next page at once; then apply another
	// filter, which answers first.
	b.setValue("#f-action", slow)
	b.js(`document.querySelector("#audit-apply").click(); document.querySelector("#audit-next").click()`)
	b.setValue("#f-action", "openclaw.configurations.create")
	b.click("#audit-apply")
	time.Sleep(2500 * time.Millisecond) // the slow replies arrive
	b.waitJS(10*time.Second, `/^\d+ events\.$/.test(document.querySelector("#status").textContent)`, "the filtered page")
	s.setIntercept(nil)
	mu.Lock()
	defer mu.Unlock()
	for _, q := range seen {
		if strings.Contains(q, "cursor=") {
			t.Errorf("the page read /audit-events?%s while new filters were loading: the old page's cursor with the new filters", q)
		}
	}
	if got := b.text("#status"); got != "0 events." {
		t.Errorf("status = %q; want the last filter's reply (no Configuration was created: 0 events)", got)
	}
	if got := b.text("#audit tbody tr td"); got != "No events match." {
		t.Errorf("first cell = %q; a superseded reply filled the table", got)
	}
}
