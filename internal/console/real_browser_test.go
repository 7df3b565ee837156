package console_test

import (
	"context"
	"os"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute/local"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/worker"
)

// TestConsoleRealGateway is the Console on the embedded default for real:
// the local Compute driver running one real OpenClaw gateway
// (OCC_OPENCLAW_RUNTIME), the real gateway client, the worker in the
// background. In the browser: sign in, create a Namespace and a
// Configuration, create an Agent with four edited files (one empty),
// deploy it and watch it succeed, then read its files back in the editor,
// save one, reload it, discard a second change, and resolve a 412 that the
// real gateway's compare-and-swap answers after a write through the API.
// This package starts at most this one gateway.
func TestConsoleRealGateway(t *testing.T) {
	chromium(t)
	rt, err := gwtest.FindRuntime()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the OpenClaw runtime is required under CI: %v", err)
		}
		t.Skipf("no OpenClaw runtime: %v", err)
	}
	// The driver's gateways outlive the driver by design; a guarded
	// directory makes sure they die with this binary.
	root, err := gwtest.GuardedDir("occ-console-test-")
	if err != nil {
		t.Fatal(err)
	}
	d, err := local.New(local.Options{DataDir: root, Runtime: local.Runtime{Node: rt.Node, OpenClaw: rt.OpenClaw}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		_ = d.Shutdown(ctx)
	})
	s := newServer(t, server.Options{Driver: d, Files: agentgw.New(agentgw.Options{}), Worker: worker.Options{Poll: 100 * time.Millisecond}})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { defer close(done); _ = s.srv.Worker.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-done })

	b := newBrowser(t, s.URL)
	b.signIn(adminEmail, adminPassword)
	ns := b.createNamespace("real")
	b.createConfiguration(ns, "base")
	b.openCreateAgent(ns)
	files := map[string]string{
		"AGENTS.md":   "# Agents\nEdited in the Console for a real gateway.\n",
		"SOUL.md":     "",
		"IDENTITY.md": "name: Console Ünïcode\n",
		"USER.md":     "The user, typed in a browser.\n",
	}
	b.fillAgent("real-agent", files)
	agent := b.submitAgent(ns)
	b.deploy(4 * time.Minute)
	b.page("agent-deployed")

	for name, want := range files {
		b.openEditor(ns, agent, name)
		if got := b.value("#editor"); got != want {
			t.Errorf("%s on the real gateway = %q; want the submitted %q", name, got, want)
		}
	}
	b.editSaveReload(ns, agent, "USER.md", "Saved from the Console editor.\n")
	b.page("file-real")
	var got struct{ Content string }
	admin := s.signIn(adminEmail, adminPassword)
	filePath := "/namespaces/" + ns + "/agents/" + agent + "/workspace/files/USER.md"
	if code, _ := s.api("GET", filePath, nil, admin, nil, &got); code != 200 || got.Content != "Saved from the Console editor.\n" {
		t.Errorf("USER.md through the API = %d %q", code, got.Content)
	}

	// A 412 from the real gateway's compare-and-swap: someone writes
	// through the API after the page loaded; the page shows both versions
	// and saves the user's against the new hash.
	b.openEditor(ns, agent, "USER.md")
	if code, _ := s.api("PUT", filePath, map[string]string{"content": "theirs, through the API\n"}, admin, nil, nil); code != 200 {
		t.Fatalf("PUT through the API: %d", code)
	}
	b.setValue("#editor", "mine, from the Console\n")
	b.click("#save")
	b.waitJS(30*time.Second, `!document.querySelector("#conflict").hidden`, "the conflict view")
	if th, yo := b.value("#theirs"), b.value("#yours"); th != "theirs, through the API\n" || yo != "mine, from the Console\n" {
		t.Errorf("conflict view on the real gateway: theirs %q, yours %q", th, yo)
	}
	b.click("#take-yours")
	b.waitJS(30*time.Second, `document.querySelector("#status").textContent === "Saved."`, "saving mine against the new hash")
	if code, _ := s.api("GET", filePath, nil, admin, nil, &got); code != 200 || got.Content != "mine, from the Console\n" {
		t.Errorf("USER.md after resolving the conflict = %d %q; want the Console's version", code, got.Content)
	}
}
