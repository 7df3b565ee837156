package console_test

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/chromedp/chromedp"
)

var screenshots = flag.Bool("screenshots", false, "write PNG screenshots of the main pages to docs/console/")

// browser is one headless Chromium with one tab, driven over the DevTools
// protocol.
type browser struct {
	t    *testing.T
	ctx  context.Context // the tab; its first Run started the browser
	base string          // the OCC server's URL
	axe  string          // axe-core's source, "" when not installed
}

// chromium finds the browser: OCC_TEST_CHROMIUM, else /usr/bin/chromium.
// Without one the browser tests skip, except under CI=true, where they
// fail (scripts/test.sh installs it with scripts/testenv/chromium.sh).
func chromium(t *testing.T) string {
	t.Helper()
	p := os.Getenv("OCC_TEST_CHROMIUM")
	if p == "" {
		p = "/usr/bin/chromium"
	}
	if _, err := exec.LookPath(p); err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("Chromium is required under CI (scripts/testenv/chromium.sh): %v", err)
		}
		t.Skipf("no Chromium (%v); run scripts/testenv/chromium.sh", err)
	}
	return p
}

// axeSource reads axe-core from OCC_TEST_AXE (scripts/testenv/axe.sh prints
// the path). Missing, the accessibility checks are skipped, except under
// CI=true.
func axeSource(t *testing.T) string {
	t.Helper()
	p := os.Getenv("OCC_TEST_AXE")
	if p == "" {
		if os.Getenv("CI") == "true" {
			t.Fatal("OCC_TEST_AXE is required under CI (scripts/testenv/axe.sh)")
		}
		t.Log("OCC_TEST_AXE not set: accessibility checks skipped")
		return ""
	}
	b, err := os.ReadFile(p)
	if err != nil {
		t.Fatalf("reading axe-core: %v", err)
	}
	return string(b)
}

func newBrowser(t *testing.T, base string) *browser {
	t.Helper()
	bin := chromium(t)
	opts := []chromedp.ExecAllocatorOption{
		chromedp.ExecPath(bin), chromedp.Headless, chromedp.NoSandbox, chromedp.DisableGPU,
		chromedp.NoFirstRun, chromedp.NoDefaultBrowserCheck,
		chromedp.Flag("disable-quic", true), chromedp.Flag("disable-background-networking", true),
		chromedp.Flag("disable-component-update", true), chromedp.Flag("disable-sync", true),
		chromedp.Flag("disable-dev-shm-usage", true),
		chromedp.UserDataDir(t.TempDir()), chromedp.WindowSize(1280, 900),
	}
	actx, cancelAlloc := chromedp.NewExecAllocator(context.Background(), opts...)
	ctx, cancel := chromedp.NewContext(actx)
	t.Cleanup(func() { cancel(); cancelAlloc() })
	// The first Run starts the browser; it must not carry a timeout (the
	// timeout would end the browser), so it is bounded by a watchdog.
	done := make(chan error, 1)
	go func() { done <- chromedp.Do(ctx) }()
	select {
	case err := <-done:
		if err != nil {
			t.Fatalf("starting Chromium: %v", err)
		}
	case <-time.After(60 * time.Second):
		t.Fatal("Chromium did not start within 60 s")
	}
	return &browser{t: t, ctx: ctx, base: base, axe: axeSource(t)}
}

// step runs actions with a bound.
func (b *browser) step(what string, actions ...chromedp.Action[chromedp.Void]) {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	if err := chromedp.Do(ctx, actions...); err != nil {
		b.t.Fatalf("%s: %v", what, err)
	}
}

func (b *browser) open(path string) {
	b.t.Helper()
	b.step("open "+path, chromedp.Navigate(b.base+path))
	b.waitJS(10*time.Second, `document.readyState === "complete" && document.body.dataset.ready === "1"`, "page "+path+" ready")
}

// eval evaluates a JavaScript expression and decodes its result into T.
func eval[T any](b *browser, expr string) T {
	b.t.Helper()
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	v, err := chromedp.Run(ctx, chromedp.Evaluate[T](expr, chromedp.EvalAwaitPromise))
	if err != nil {
		b.t.Fatalf("evaluate %s: %v", expr, err)
	}
	return v
}

// js runs a statement for its effect.
func (b *browser) js(stmt string) {
	b.t.Helper()
	_ = eval[bool](b, "(() => { "+stmt+"; return true; })()")
}

// waitJS waits until a boolean expression holds; on a timeout it reports
// the page's path, status and alert lines.
func (b *browser) waitJS(d time.Duration, expr, what string) {
	b.t.Helper()
	deadline := time.Now().Add(d)
	for {
		ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
		ok, err := chromedp.Run(ctx, chromedp.Evaluate[bool]("!!("+expr+")"))
		cancel()
		if err == nil && ok {
			return
		}
		if time.Now().After(deadline) {
			ctx, cancel := context.WithTimeout(b.ctx, 5*time.Second)
			state, _ := chromedp.Run(ctx, chromedp.Evaluate[string](
				`location.pathname + " status=" + JSON.stringify((document.querySelector("#status")||{}).textContent) + " alert=" + JSON.stringify((document.querySelector("#alert")||{}).textContent)`))
			cancel()
			b.t.Fatalf("timed out after %v waiting for %s (%s); last error %v; page %s", d, what, expr, err, state)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// text is an element's textContent ("" when absent).
func (b *browser) text(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`(document.querySelector(%q)||{}).textContent||""`, sel))
}

// type sets a control's value as typing would (an input event follows).
func (b *browser) setValue(sel, value string) {
	b.t.Helper()
	v, _ := json.Marshal(value)
	b.js(fmt.Sprintf(`const e = document.querySelector(%q); e.value = %s; e.dispatchEvent(new Event("input", {bubbles: true}))`, sel, v))
}

func (b *browser) click(sel string) {
	b.t.Helper()
	b.js(fmt.Sprintf(`document.querySelector(%q).click()`, sel))
}

func (b *browser) value(sel string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`document.querySelector(%q).value`, sel))
}

func (b *browser) path() string {
	b.t.Helper()
	return eval[string](b, `location.pathname`)
}

// noBrowserStorage: the Console keeps nothing in browser storage.
func (b *browser) noBrowserStorage() {
	b.t.Helper()
	if n := eval[int](b, `localStorage.length + sessionStorage.length`); n != 0 {
		b.t.Errorf("%s: browser storage holds %d items; want none", b.path(), n)
	}
}

// checkAccessibility injects axe-core and fails on critical or serious
// violations.
func (b *browser) checkAccessibility(name string) {
	b.t.Helper()
	if b.axe == "" {
		return
	}
	src, _ := json.Marshal(b.axe)
	// Evaluated through the DevTools protocol, which the page's CSP does
	// not govern; the page itself never loads axe.
	_ = eval[bool](b, `(() => { if (!window.axe) { (0, eval)(`+string(src)+`); } return true; })()`)
	out := eval[string](b, `axe.run(document, {resultTypes: ["violations"]}).then(r => JSON.stringify(
		r.violations.filter(v => v.impact === "critical" || v.impact === "serious")
		 .map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.slice(0, 5).map(n => n.target.join(" "))}))))`)
	if out != "[]" {
		b.t.Errorf("accessibility (axe-core) on %s: critical or serious violations: %s", name, out)
	}
}

// screenshot writes docs/console/<name>.png when -screenshots is set.
func (b *browser) screenshot(name string) {
	b.t.Helper()
	if !*screenshots {
		return
	}
	ctx, cancel := context.WithTimeout(b.ctx, 30*time.Second)
	defer cancel()
	png, err := chromedp.Run(ctx, chromedp.FullScreenshot(100))
	if err != nil {
		b.t.Fatalf("screenshot %s: %v", name, err)
	}
	dir := filepath.Join("..", "..", "docs", "console")
	if err := os.MkdirAll(dir, 0o755); err != nil {
		b.t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, name+".png"), png, 0o644); err != nil {
		b.t.Fatal(err)
	}
}

// page checks one rendered page: accessibility, no browser storage, and
// the screenshot.
func (b *browser) page(name string) {
	b.t.Helper()
	b.checkAccessibility(name)
	b.noBrowserStorage()
	b.screenshot(name)
}

// --- flows shared by the fake-gateway and the real-gateway tests ---

func (b *browser) signIn(email, password string) {
	b.t.Helper()
	b.open("/console/")
	b.waitJS(10*time.Second, `location.pathname === "/console/sign-in"`, "the redirect to sign-in")
	b.setValue("#email", email)
	b.setValue("#password", password)
	b.click("#sign-in")
	b.waitJS(10*time.Second, `location.pathname === "/console/namespaces"`, "signed in as "+email)
}

func (b *browser) signOut() {
	b.t.Helper()
	b.click("#sign-out")
	b.waitJS(10*time.Second, `location.pathname === "/console/sign-in"`, "signed out")
}

// createNamespace creates one through the page and returns its id once
// it is ready.
func (b *browser) createNamespace(name string) string {
	b.t.Helper()
	b.open("/console/namespaces")
	b.setValue("#ns-name", name)
	b.click("#ns-create")
	row := fmt.Sprintf(`[...document.querySelectorAll("#namespaces tbody tr")].find(r => r.cells[0].textContent === %q && r.cells[1].textContent === "ready")`, name)
	b.waitJS(60*time.Second, row, "Namespace "+name+" ready")
	return eval[string](b, "("+row+").cells[2].textContent")
}

func (b *browser) createConfiguration(ns, name string) {
	b.t.Helper()
	b.open("/console/namespaces/" + ns)
	b.setValue("#cfg-name", name)
	b.click("#cfg-create")
	b.waitJS(10*time.Second, fmt.Sprintf(`[...document.querySelectorAll("#configurations tbody tr")].some(r => r.cells[0].textContent === %q)`, name), "Configuration "+name)
}

// openCreateAgent opens the create form and waits for the defaults.
func (b *browser) openCreateAgent(ns string) {
	b.t.Helper()
	b.open("/console/namespaces/" + ns + "/agents/new")
	b.waitJS(10*time.Second, `document.querySelector("#defaults-id").value.length === 64 && document.querySelector("#agent-cfg").options.length > 0`, "the create form's defaults")
}

// fillAgent types the name and the four files.
func (b *browser) fillAgent(name string, files map[string]string) {
	b.t.Helper()
	b.setValue("#agent-name", name)
	for f, content := range files {
		b.setValue("#init-"+strings.ReplaceAll(f, ".", `\.`), content)
	}
}

// submitAgent submits the form and returns the new Agent's id.
func (b *browser) submitAgent(ns string) string {
	b.t.Helper()
	b.click("#agent-create")
	prefix := "/console/namespaces/" + ns + "/agents/agt_"
	b.waitJS(15*time.Second, fmt.Sprintf(`location.pathname.startsWith(%q)`, prefix), "the new Agent's page")
	return strings.TrimPrefix(b.path(), "/console/namespaces/"+ns+"/agents/")
}

// deploy double-clicks Deploy and watches the page report success.
func (b *browser) deploy(d time.Duration) {
	b.t.Helper()
	b.waitJS(10*time.Second, `!document.querySelector("#deploy").disabled && document.querySelector("#agent-facts dd")`, "the Agent page")
	// Clicked twice at once: Deploy is off while its request is out, so
	// one deployment (one revision) follows.
	b.js(`const d = document.querySelector("#deploy"); d.click(); d.click()`)
	b.waitJS(10*time.Second, `/Revision \d+: (queued|running|succeeded)/.test(document.querySelector("#deployment").textContent)`, "the deployment's progress")
	b.waitJS(d, `/succeeded|failed/.test(document.querySelector("#deployment").textContent)`, "the deployment to end")
	if got := b.text("#deployment"); !strings.Contains(got, "succeeded") {
		b.t.Fatalf("deployment: %q; want succeeded", got)
	}
	b.waitJS(10*time.Second, `!document.querySelector("#files").hidden`, "the file links after activation")
}

func filePage(ns, agent, name string) string {
	return "/console/namespaces/" + ns + "/agents/" + agent + "/files/" + name
}

// openEditor opens a file's editor and waits for it to load.
func (b *browser) openEditor(ns, agent, name string) {
	b.t.Helper()
	b.open(filePage(ns, agent, name))
	b.waitJS(15*time.Second, `!document.querySelector("#editor").disabled && /Loaded|does not exist/.test(document.querySelector("#status").textContent)`, "the editor of "+name)
}

func (b *browser) saveDisabled() bool {
	b.t.Helper()
	return eval[bool](b, `document.querySelector("#save").disabled`)
}

// editSaveReload: Save is off while unchanged, saves a change with
// If-Match, and a reload shows it; a second change is discarded.
func (b *browser) editSaveReload(ns, agent, name, content string) {
	b.t.Helper()
	b.openEditor(ns, agent, name)
	if !b.saveDisabled() {
		b.t.Errorf("%s: Save enabled before any change", name)
	}
	b.setValue("#editor", content)
	b.waitJS(5*time.Second, `!document.querySelector("#save").disabled`, "Save enabled after a change")
	b.click("#save")
	b.waitJS(15*time.Second, `document.querySelector("#status").textContent === "Saved."`, "the save")
	b.openEditor(ns, agent, name)
	if got := b.value("#editor"); got != content {
		b.t.Errorf("%s after reload = %q; want the saved %q", name, got, content)
	}
	// A second change, discarded.
	b.setValue("#editor", content+" and a change to discard")
	b.waitJS(5*time.Second, `!document.querySelector("#discard").disabled`, "Discard enabled")
	b.click("#discard")
	if got := b.value("#editor"); got != content {
		b.t.Errorf("%s after discard = %q; want %q", name, got, content)
	}
	if !b.saveDisabled() {
		b.t.Errorf("%s: Save enabled after discarding", name)
	}
}

// focused reports whether the element sel has the focus.
func (b *browser) focused(sel string) bool {
	b.t.Helper()
	return eval[bool](b, fmt.Sprintf(`document.activeElement === document.querySelector(%q)`, sel))
}

// lastRequest is the URL of the page's latest finished request whose URL
// contains part ("" when none), from the Resource Timing entries.
func (b *browser) lastRequest(part string) string {
	b.t.Helper()
	return eval[string](b, fmt.Sprintf(`performance.getEntriesByType("resource").map(e => e.name).filter(n => n.includes(%q)).pop() || ""`, part))
}
