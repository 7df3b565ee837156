package computetest

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/ids"
)

var cases = []testCase{
	{name: "Identity", run: func(t *testing.T, f *fixture) {
		id := f.d.ID()
		if id == "" {
			t.Error("ID() is empty")
		}
		if again := f.d.ID(); again != id {
			t.Errorf("ID() changed from %q to %q", id, again)
		}
		check(t, "Capabilities() called twice", f.caps, f.d.Capabilities())
	}},

	{name: "Namespace/EnsureTwice", run: func(t *testing.T, f *fixture) {
		must(t, "first EnsureNamespace", f.d.EnsureNamespace(f.ctx(), f.ns))
		must(t, "second EnsureNamespace", f.d.EnsureNamespace(f.ctx(), f.ns))
	}},

	{name: "Namespace/DeleteTwice", run: func(t *testing.T, f *fixture) {
		f.ensureNamespace()
		must(t, "first DeleteNamespace", f.d.DeleteNamespace(f.ctx(), f.ns))
		must(t, "second DeleteNamespace", f.d.DeleteNamespace(f.ctx(), f.ns))
	}},

	{name: "Namespace/DeleteNeverEnsured", run: func(t *testing.T, f *fixture) {
		must(t, "DeleteNamespace of a never-ensured namespace", f.d.DeleteNamespace(f.ctx(), f.ns))
	}},

	{name: "Revision/Lifecycle", running: true, run: func(t *testing.T, f *fixture) {
		f.ensureNamespace()
		rev := f.revision(1)
		// A driver that gives readiness notices (compute.ReadyNotifier)
		// must give one when a pending revision turns ready.
		notices := f.recordReadyNotices()
		first := f.prepareOnce(rev, compute.RevisionContext{})
		f.prepareReady(rev, compute.RevisionContext{})
		if notices != nil && !first.Ready {
			notices.awaitNotice(t, rev)
		}
		// The worker prepares again after a crash or a lost lease; a
		// ready revision must stay ready.
		if res := f.prepareOnce(rev, compute.RevisionContext{}); !res.Ready {
			t.Errorf("PrepareRevision of a ready revision = %+v, want Ready", res)
		}
		f.checkServing("after PrepareRevision", rev, false)
		must(t, "first ActivateRevision", f.d.ActivateRevision(f.ctx(), rev, compute.RevisionContext{}))
		must(t, "second ActivateRevision", f.d.ActivateRevision(f.ctx(), rev, compute.RevisionContext{}))
		f.checkServing("after ActivateRevision", rev, true)
		f.checkEndpoint(rev)
		must(t, "first StopRevision", f.d.StopRevision(f.ctx(), rev))
		must(t, "second StopRevision", f.d.StopRevision(f.ctx(), rev))
		f.checkServing("after StopRevision", rev, false)
		must(t, "first RetireRevision", f.d.RetireRevision(f.ctx(), rev))
		must(t, "second RetireRevision", f.d.RetireRevision(f.ctx(), rev))
		must(t, "first DeleteAgent", f.d.DeleteAgent(f.ctx(), f.agent))
		must(t, "second DeleteAgent", f.d.DeleteAgent(f.ctx(), f.agent))
	}},

	{name: "Revision/RetireBeforeReady", run: func(t *testing.T, f *fixture) {
		// A deployment may be abandoned while its runtime is still
		// coming up; cleanup must work from any state.
		f.ensureNamespace()
		rev := f.revision(1)
		f.prepareOnce(rev, compute.RevisionContext{})
		must(t, "StopRevision", f.d.StopRevision(f.ctx(), rev))
		must(t, "first RetireRevision", f.d.RetireRevision(f.ctx(), rev))
		must(t, "second RetireRevision", f.d.RetireRevision(f.ctx(), rev))
		must(t, "DeleteAgent", f.d.DeleteAgent(f.ctx(), f.agent))
	}},

	{name: "Revision/StopAndRetireUnknown", run: func(t *testing.T, f *fixture) {
		f.ensureNamespace()
		stopped, retired := f.revision(1), f.revision(2)
		for i := range 2 {
			must(t, fmt.Sprintf("StopRevision of an unknown revision (call %d)", i+1), f.d.StopRevision(f.ctx(), stopped))
			must(t, fmt.Sprintf("RetireRevision of an unknown revision (call %d)", i+1), f.d.RetireRevision(f.ctx(), retired))
		}
	}},

	{name: "Revision/RetireOlderKeepsNewer", running: true, run: func(t *testing.T, f *fixture) {
		f.ensureNamespace()
		older, newer := f.revision(1), f.revision(2)
		f.activate(older, compute.RevisionContext{})
		f.activate(newer, compute.RevisionContext{})
		f.checkServing("after activating the newer revision", older, false)
		f.checkServing("after activating the newer revision", newer, true)
		// Retire straight from running: the path that cleans up the most.
		must(t, "RetireRevision of the older revision", f.d.RetireRevision(f.ctx(), older))
		f.checkServing("after retiring the older revision", newer, true)
		f.checkEndpoint(newer)
		// PrepareRevision is idempotent, so it doubles as a last probe
		// (after Serving, since preparing may restart a stopped runtime):
		// the newer revision must still be ready.
		if res := f.prepareOnce(newer, compute.RevisionContext{}); !res.Ready {
			t.Errorf("PrepareRevision of the newer revision after retiring the older = %+v, want Ready", res)
		}
		must(t, "ActivateRevision of the newer revision again", f.d.ActivateRevision(f.ctx(), newer, compute.RevisionContext{}))
	}},

	{name: "Agent/DeleteUnknown", run: func(t *testing.T, f *fixture) {
		f.ensureNamespace()
		must(t, "first DeleteAgent of an unknown agent", f.d.DeleteAgent(f.ctx(), f.agent))
		must(t, "second DeleteAgent of an unknown agent", f.d.DeleteAgent(f.ctx(), f.agent))
	}},

	{name: "Endpoint", run: func(t *testing.T, f *fixture) {
		// Endpoint proves nothing about readiness, so one Prepare is
		// enough for drivers that only learn the address then.
		f.ensureNamespace()
		rev := f.revision(1)
		f.prepareOnce(rev, compute.RevisionContext{})
		f.checkEndpoint(rev)
	}},

	{name: "WorkspaceSetup/PrepareAccepted", setup: true, run: func(t *testing.T, f *fixture) {
		f.ensureNamespace()
		f.prepareOnce(f.revision(1), compute.RevisionContext{WorkspaceSetup: f.pendingSetup()})
	}},

	{name: "WorkspaceSetup/DeliverThenVerify", running: true, setup: true, run: func(t *testing.T, f *fixture) {
		f.ensureNamespace()
		pending := f.pendingSetup()
		want := pending.Files
		first := f.revision(1)
		// The worker delivers the pending setup to both verbs of the
		// first deployment, and again on every retry.
		f.activate(first, compute.RevisionContext{WorkspaceSetup: pending})
		f.checkFiles(first, want)
		f.checkNoSetupCopies(first, "after ActivateRevision")
		// A worker that crashed before recording the activation prepares
		// and activates again with the setup still pending: the contents
		// must not come back.
		if res := f.prepareOnce(first, compute.RevisionContext{WorkspaceSetup: pending}); !res.Ready {
			t.Errorf("PrepareRevision of the activated revision again = %+v, want Ready", res)
		}
		f.checkNoSetupCopies(first, "after a retried PrepareRevision")
		must(t, "ActivateRevision again", f.d.ActivateRevision(f.ctx(), first, compute.RevisionContext{WorkspaceSetup: pending}))
		f.checkNoSetupCopies(first, "after a retried ActivateRevision")

		// After activation the worker completes the record: later
		// revisions carry the identity only, and drivers verify the
		// marker instead of applying anything.
		completed := pending.WithoutFiles()
		completed.Completed = true
		second := f.revision(2)
		f.activate(second, compute.RevisionContext{WorkspaceSetup: &completed})
		f.checkServing("after activating with the completed setup", second, true)
		f.checkFiles(second, want)
	}},

	{name: "Concurrency/TwoAgents", running: true, pair: true, run: func(t *testing.T, f *fixture) {
		// The worker runs several loops over one driver, so two Agents'
		// verbs meet in one driver at once (and two workers' calls on one
		// Namespace). Each step runs for both Agents together.
		g := f.sibling()
		ensure := func(x *fixture) { must(x.r, "EnsureNamespace", x.d.EnsureNamespace(x.ctx(), x.ns)) }
		parallel(t, "EnsureNamespace", func(r reporter) { ensure(f.on(r)) }, func(r reporter) { ensure(g.on(r)) })
		revF, revG := f.revision(1), g.revision(1)
		activate := func(x *fixture, rev compute.Revision) {
			x.activate(rev, compute.RevisionContext{})
			x.checkEndpoint(rev)
		}
		parallel(t, "Activate", func(r reporter) { activate(f.on(r), revF) }, func(r reporter) { activate(g.on(r), revG) })
		f.checkServing("after activating both Agents at once", revF, true)
		g.checkServing("after activating both Agents at once", revG, true)
		// One Agent is torn down while the other's Endpoint is read (a
		// workspace file request): the teardown must not reach the Agent
		// next to it, which keeps serving without being prepared again
		// (a prepare would heal what the teardown broke).
		parallel(t, "TeardownBesideEndpoint", func(r reporter) {
			must(r, "RetireRevision", f.d.RetireRevision(f.ctx(), revF))
			must(r, "DeleteAgent", f.d.DeleteAgent(f.ctx(), f.agent))
		}, func(r reporter) {
			g.on(r).checkEndpoint(revG)
		})
		g.checkServing("after the other Agent's teardown", revG, true)
		g.checkEndpoint(revG)
		if res := g.prepareOnce(revG, compute.RevisionContext{}); !res.Ready {
			t.Errorf("PrepareRevision after the other Agent's teardown = %+v, want Ready", res)
		}
	}},

	{name: "Context/Cancelled", run: func(t *testing.T, f *fixture) {
		f.ensureNamespace()
		rev := f.revision(1)
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		rc := compute.RevisionContext{}
		if f.caps.WorkspaceSetup {
			rc.WorkspaceSetup = f.pendingSetup()
		}
		calls := []struct {
			name string
			call func() error
		}{
			{"EnsureNamespace", func() error { return f.d.EnsureNamespace(ctx, f.ns) }},
			{"PrepareRevision", func() error { _, err := f.d.PrepareRevision(ctx, rev, rc); return err }},
			{"ActivateRevision", func() error { return f.d.ActivateRevision(ctx, rev, rc) }},
			{"Endpoint", func() error { _, err := f.d.Endpoint(ctx, rev); return err }},
			{"StopRevision", func() error { return f.d.StopRevision(ctx, rev) }},
			{"RetireRevision", func() error { return f.d.RetireRevision(ctx, rev) }},
			{"DeleteAgent", func() error { return f.d.DeleteAgent(ctx, f.agent) }},
			{"DeleteNamespace", func() error { return f.d.DeleteNamespace(ctx, f.ns) }},
		}
		for _, c := range calls {
			checkCancelled(t, c.name, c.call)
		}
	}},
}

// setupContents are the four files of the pending setup: byte-exact text
// with CRLF, trailing spaces, non-ASCII and no final newline, and one empty
// file (empty files are valid and must be created). setupMarkers are
// pieces of them that survive any encoding a driver may use for a copy
// (JSON, YAML), which checkNoSetupCopies looks for.
var setupContents = map[string]string{
	"AGENTS.md":   "# Agents\r\n\r\nRule one.  \r\n",
	"SOUL.md":     "Calm, curious \u00e9\u4e16 \u2028 and exact.",
	"IDENTITY.md": "",
	"USER.md":     "name: conformance-setup-marker\n\n\n",
}

var setupMarkers = []string{"Rule one.", "conformance-setup-marker"}

// pendingSetup returns a fresh pending setup of the fixture's Agent. Its
// DefaultsID is empty so that no driver compares it with stock templates.
func (f *fixture) pendingSetup() *compute.WorkspaceSetup {
	files := make(map[string]string, len(setupContents))
	for k, v := range setupContents {
		files[k] = v
	}
	return &compute.WorkspaceSetup{
		ID: ids.New(ids.WorkspaceSetup), NamespaceID: f.ns.ID, AgentID: f.agent.ID, Files: files,
	}
}

// checkFiles compares the durable workspace with want through
// Inspect.WorkspaceFile, when the harness has it.
func (f *fixture) checkFiles(rev compute.Revision, want map[string]string) {
	f.t.Helper()
	read := f.h.Inspect.WorkspaceFile
	if read == nil {
		return
	}
	got := map[string]string{}
	for name := range want {
		if content, ok := read(f.t, f.d, rev, name); ok {
			got[name] = content
		}
	}
	check(f.t, fmt.Sprintf("workspace files after revision #%d", rev.Number), want, got)
}

// checkNoSetupCopies requires that nothing Inspect.SetupCopies returns
// holds a setup file's content, when the harness has it.
func (f *fixture) checkNoSetupCopies(rev compute.Revision, when string) {
	f.t.Helper()
	read := f.h.Inspect.SetupCopies
	if read == nil {
		return
	}
	for where, content := range read(f.t, f.d, rev) {
		for _, m := range setupMarkers {
			if strings.Contains(string(content), m) {
				f.t.Errorf("%s: %s still holds setup file content (%q)", when, where, m)
			}
		}
	}
}

// checkCancelled runs call, which uses a cancelled context, and requires a
// prompt, retryable error: a cancelled call has done nothing wrong, so it
// must not fail the work permanently.
func checkCancelled(t *testing.T, name string, call func() error) {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- call() }()
	timer := time.NewTimer(promptBound)
	defer timer.Stop()
	select {
	case err := <-done:
		if err == nil {
			t.Errorf("%s with a cancelled context succeeded, want an error", name)
		} else if p, ok := compute.AsPermanent(err); ok {
			t.Errorf("%s with a cancelled context failed permanently (%s): %v", name, p.Code, err)
		}
	case <-timer.C:
		t.Errorf("%s with a cancelled context did not return within %s", name, promptBound)
	}
}

// endpointProblem says what is wrong with an endpoint, or "".
func endpointProblem(ep compute.Endpoint) string {
	u, err := url.Parse(ep.URL)
	switch {
	case err != nil:
		return fmt.Sprintf("URL does not parse: %v", err)
	case u.Scheme != "ws" && u.Scheme != "wss":
		return fmt.Sprintf("URL scheme %q, want ws or wss", u.Scheme)
	case u.Host == "":
		return "URL has no host"
	case ep.Transport != compute.Direct && ep.Transport != compute.Routed:
		return fmt.Sprintf("unknown Transport %q", ep.Transport)
	case ep.Transport == compute.Routed && u.Scheme != "wss":
		return "a Routed endpoint must use wss://"
	}
	return ""
}
