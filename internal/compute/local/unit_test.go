package local

import (
	"bytes"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/agentdir"
	"github.com/openclaw/occ/internal/testutil"
)

// These tests need no OpenClaw runtime: they stop before a gateway starts,
// or run a stand-in "node" that exits at once.

func TestRenderConfigMergesWhatOCCControls(t *testing.T) {
	td := newTestDriver(t, fakeRuntime(t), "", func(o *Options) { o.MaxLogBytes = 6 << 20 })
	ta := newTestAgent()
	doc := `{
		"gateway": {"auth": {"mode": "token", "rateLimit": {"maxAttempts": 3}}, "bind": "loopback", "port": 1},
		"agents": {"defaults": {"model": "openai/gpt-6-astra", "heartbeat": {"every": "30m", "target": "none"}}, "entries": {"main": {}}},
		"logging": {"level": "debug", "maxFileBytes": 4096},
		"tools": {"big": 12345678901234567890, "float": 1.50}
	}`
	rev := ta.revision(1, doc)
	orig := bytes.Clone(rev.Configuration)
	a := td.agent(ta.agent.ID)
	mustDo(t, "ensureLayout", a.ensureLayout(ta.ns.ID))
	out, err := td.renderConfig(a, rev, 19999)
	mustDo(t, "renderConfig", err)
	if !bytes.Equal(rev.Configuration, orig) {
		t.Error("renderConfig changed the revision's document")
	}
	if !bytes.Contains(out, []byte("12345678901234567890")) || !bytes.Contains(out, []byte("1.50")) {
		t.Errorf("numbers were not passed through exactly:\n%s", out)
	}
	var got map[string]any
	mustDo(t, "unmarshal", json.Unmarshal(out, &got))
	token, err := a.files().Token()
	mustDo(t, "readToken", err)
	checks := []struct {
		path string
		want any
	}{
		{"gateway.mode", "local"},
		{"gateway.bind", "loopback"},
		{"gateway.port", 19999.0},
		{"gateway.auth.mode", "token"},
		{"gateway.auth.token", token},
		{"gateway.auth.rateLimit.maxAttempts", 3.0},
		{"agents.defaults.workspace", a.path("workspace")},
		{"agents.defaults.model", "openai/gpt-6-astra"},
		{"agents.defaults.heartbeat.every", "0m"},
		{"agents.defaults.heartbeat.target", "none"},
		{"logging.file", a.path("logs", "openclaw.log")},
		{"logging.level", "debug"},
		{"logging.maxFileBytes", 4096.0}, // the document's smaller cap wins
	}
	for _, c := range checks {
		if v := lookup(got, c.path); v != c.want {
			t.Errorf("%s = %#v, want %#v", c.path, v, c.want)
		}
	}

	// Without a cap in the document, six native log files fit MaxLogBytes.
	out, err = td.renderConfig(a, ta.revision(2, ""), 19999)
	mustDo(t, "renderConfig", err)
	got = nil
	mustDo(t, "unmarshal", json.Unmarshal(out, &got))
	if v := lookup(got, "logging.maxFileBytes"); v != float64((6<<20)/6) {
		t.Errorf("logging.maxFileBytes = %v, want %d", v, (6<<20)/6)
	}
}

func lookup(m map[string]any, path string) any {
	var cur any = m
	for _, k := range strings.Split(path, ".") {
		obj, ok := cur.(map[string]any)
		if !ok {
			return nil
		}
		cur = obj[k]
	}
	return cur
}

func TestConfigurationConflictsArePermanent(t *testing.T) {
	td := newTestDriver(t, fakeRuntime(t), "", nil)
	ta := newTestAgent()
	ws := agentDirOf(td.dir, ta.agent.ID) + "/workspace"
	const secret = "doc-secret-value-7f3a"
	refused := map[string]string{
		"auth mode password":      `{"gateway":{"auth":{"mode":"password"}}}`,
		"auth mode none":          `{"gateway":{"auth":{"mode":"none"}}}`,
		"auth mode trusted-proxy": `{"gateway":{"auth":{"mode":"trusted-proxy"}}}`,
		"auth token":              `{"gateway":{"auth":{"token":"` + secret + `"}}}`,
		"auth password":           `{"gateway":{"auth":{"password":"` + secret + `"}}}`,
		"auth trustedProxy":       `{"gateway":{"auth":{"trustedProxy":{"userHeader":"x"}}}}`,
		"auth not an object":      `{"gateway":{"auth":"` + secret + `"}}`,
		"bind lan":                `{"gateway":{"bind":"lan"}}`,
		"bind custom":             `{"gateway":{"bind":"custom","customBindHost":"0.0.0.0"}}`,
		"customBindHost alone":    `{"gateway":{"customBindHost":"0.0.0.0"}}`,
		"remote gateway":          `{"gateway":{"mode":"remote"}}`,
		"tailscale funnel":        `{"gateway":{"tailscale":{"mode":"funnel"}}}`,
		"gateway not an object":   `{"gateway":[]}`,
		"workspace elsewhere":     `{"agents":{"defaults":{"workspace":"/tmp/elsewhere"}}}`,
		"workspace relative":      `{"agents":{"defaults":{"workspace":"workspace"}}}`,
		"main workspace":          `{"agents":{"entries":{"main":{"workspace":"/tmp/elsewhere"}}}}`,
		"agents list":             `{"agents":{"list":[{"id":"main"}]}}`,
		"second agent":            `{"agents":{"entries":{"main":{},"other":{}}}}`,
		"entries without main":    `{"agents":{"entries":{"other":{}}}}`,
		"not json":                `{"gateway":`,
		"array":                   `[]`,
		"null":                    `null`,
		"trailing data":           `{} {}`,
	}
	for name, doc := range refused {
		t.Run(name, func(t *testing.T) {
			_, err := td.PrepareRevision(ctxT(t, 10*time.Second), ta.revision(1, doc), compute.RevisionContext{})
			p, ok := compute.AsPermanent(err)
			if !ok || p.Code != compute.CodeConfigurationInvalid {
				t.Fatalf("PrepareRevision = %v, want permanent %s", err, compute.CodeConfigurationInvalid)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error repeats a value of the document: %v", err)
			}
		})
	}
	// Nothing was started for the Agent.
	if _, _, ok := runningPID(td.dir, ta.agent.ID); ok {
		t.Error("a gateway runs after refused configurations")
	}
	entries, _ := os.ReadDir(filepath.Join(agentDirOf(td.dir, ta.agent.ID), "revisions"))
	if len(entries) != 0 {
		t.Errorf("refused revisions left %d rendered configurations", len(entries))
	}

	// What OCC sets anyway may be stated, with OCC's own values.
	a := td.agent(ta.agent.ID)
	for _, doc := range []string{
		`{"gateway":{"mode":"local","bind":"loopback","auth":{"mode":"token"},"tailscale":{"mode":"off"}}}`,
		`{"agents":{"defaults":{"workspace":"` + ws + `"},"entries":{"main":{"workspace":"` + ws + `/"}}}}`,
	} {
		if _, err := td.renderConfig(a, ta.revision(1, doc), 19999); err != nil {
			t.Errorf("renderConfig(%s): %v", doc, err)
		}
	}
}

func TestPortsAreUniqueStableAndFree(t *testing.T) {
	// A port in the range that something else holds is skipped.
	busy, err := net.Listen("tcp4", "127.0.0.1:0")
	mustDo(t, "listen", err)
	defer busy.Close()
	bp := busy.Addr().(*net.TCPAddr).Port
	if bp+3 > 65535 {
		t.Skip("ephemeral port too high for the test range")
	}
	rng := [2]int{bp, bp + 3}
	dataDir := newDataDir(t)
	td := newTestDriver(t, fakeRuntime(t), dataDir, func(o *Options) { o.PortRange = rng })
	var got []int
	var agents []*agent
	for range 3 {
		ta := newTestAgent()
		a := td.agent(ta.agent.ID)
		mustDo(t, "ensureLayout", a.ensureLayout(ta.ns.ID))
		p, err := td.ensurePort(a)
		if err != nil {
			// Another test process may hold a port of this tiny range.
			t.Skipf("ensurePort: %v", err)
		}
		got = append(got, p)
		agents = append(agents, a)
	}
	seen := map[int]bool{}
	for _, p := range got {
		if p == bp || p < rng[0] || p > rng[1] || seen[p] {
			t.Fatalf("ports %v: want distinct, in %v, not the busy %d", got, rng, bp)
		}
		seen[p] = true
	}
	// The range is full now.
	extra := td.agent(newTestAgent().agent.ID)
	mustDo(t, "ensureLayout", extra.ensureLayout("ns"))
	if _, err := td.ensurePort(extra); !errors.Is(err, errNoPort) {
		t.Errorf("ensurePort with a full range = %v, want errNoPort", err)
	}

	// A new driver over the same DataDir (an occ restart) keeps them.
	td.Close()
	td2 := newTestDriver(t, fakeRuntime(t), dataDir, func(o *Options) { o.PortRange = rng })
	for i, old := range agents {
		a := td2.agent(old.id)
		p, err := td2.ensurePort(a)
		mustDo(t, "ensurePort after restart", err)
		if p != got[i] {
			t.Errorf("agent %d: port %d after restart, want %d", i, p, got[i])
		}
		b, _ := os.ReadFile(filepath.Join(a.dir, "port"))
		if strings.TrimSpace(string(b)) != strconv.Itoa(p) {
			t.Errorf("port file %q, want %d", b, p)
		}
	}

	// Deleting an Agent frees its port for the next one.
	mustDo(t, "DeleteAgent", td2.DeleteAgent(ctxT(t, 10*time.Second), compute.Agent{ID: agents[0].id}))
	next := td2.agent(newTestAgent().agent.ID)
	mustDo(t, "ensureLayout", next.ensureLayout("ns"))
	if p, err := td2.ensurePort(next); err != nil || p != got[0] {
		t.Errorf("port after DeleteAgent = %d, %v; want the freed %d", p, err, got[0])
	}
}

func TestCapLog(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "gateway.log")
	// The gateway's descriptor: O_APPEND, opened once.
	w, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND|os.O_CREATE, 0o600)
	mustDo(t, "open", err)
	defer w.Close()
	line := strings.Repeat("x", 99) + "\n"
	for range 30 {
		w.WriteString(line)
	}
	capLog(path, 4000) // 3000 bytes > 2000: rotate
	arch, err := os.ReadFile(path + ".1")
	mustDo(t, "read archive", err)
	if len(arch) > 2000 || len(arch)%100 != 0 || len(arch) == 0 {
		t.Errorf("archive holds %d bytes, want whole lines within 2000", len(arch))
	}
	if fi, _ := os.Stat(path); fi.Size() != 0 {
		t.Errorf("log holds %d bytes after the cap, want 0", fi.Size())
	}
	if fi, _ := os.Stat(path + ".1"); fi.Mode().Perm() != 0o600 {
		t.Errorf("archive mode %v, want 0600", fi.Mode().Perm())
	}
	w.WriteString("after\n") // lands at offset 0, not after a hole
	if b, _ := os.ReadFile(path); string(b) != "after\n" {
		t.Errorf("log after the cap = %q", b)
	}
	capLog(path, 4000) // under the cap: nothing happens
	if b, _ := os.ReadFile(path); string(b) != "after\n" {
		t.Errorf("log under the cap changed: %q", b)
	}
}

// standIn is a runtime whose "node" is a shell script: enough to exercise
// supervision without a gateway.
func standIn(t *testing.T, script string) Runtime {
	t.Helper()
	rt := fakeRuntime(t)
	mustDo(t, "write stand-in", os.WriteFile(rt.Node, []byte("#!/bin/sh\n"+script+"\n"), 0o755))
	return rt
}

func TestGatewayThatNeverStartsFailsPermanently(t *testing.T) {
	td := newTestDriver(t, standIn(t, "echo boom >&2; exit 1"), "", nil)
	ta := newTestAgent()
	rev := ta.revision(1, "")
	start := time.Now()
	// Five starts with 1+2+4+8 s of backoff in between.
	if code := waitPermanent(t, td, rev, compute.RevisionContext{}, time.Minute); code != compute.CodeRuntimeFailed {
		t.Fatalf("code %s, want %s", code, compute.CodeRuntimeFailed)
	}
	t.Logf("gave up after %s", time.Since(start).Round(time.Millisecond))
	log, _ := os.ReadFile(filepath.Join(agentDirOf(td.dir, ta.agent.ID), "gateway.log"))
	if n := strings.Count(string(log), "boom"); n != maxFailedStarts {
		t.Errorf("gateway.log shows %d starts, want %d:\n%s", n, maxFailedStarts, log)
	}
	// It stays failed: preparing again does not start it again.
	_, err := td.PrepareRevision(ctxT(t, 5*time.Second), rev, compute.RevisionContext{})
	if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeRuntimeFailed {
		t.Errorf("PrepareRevision again = %v, want the same permanent failure", err)
	}
}

func TestConfigurationRefusedByTheGateway(t *testing.T) {
	// Exit status 78 is the gateway's "configuration refused": one retry,
	// then CONFIGURATION_INVALID.
	td := newTestDriver(t, standIn(t, "exit 78"), "", nil)
	ta := newTestAgent()
	if code := waitPermanent(t, td, ta.revision(1, ""), compute.RevisionContext{}, 30*time.Second); code != compute.CodeConfigurationInvalid {
		t.Fatalf("code %s, want %s", code, compute.CodeConfigurationInvalid)
	}
}

func TestGatewayEnvironmentIsBuiltFromScratch(t *testing.T) {
	t.Setenv("OCC_TEST_SECRET_IN_PARENT", "parent-secret")
	// The stand-in dumps its environment and arguments, then waits.
	rt := standIn(t, `env > "$PWD/env.txt"; echo "$@" > "$PWD/args.txt"; exec sleep 30`)
	td := newTestDriver(t, rt, "", func(o *Options) { o.StopGrace = time.Second })
	ta := newTestAgent()
	rev := ta.revision(1, "")
	_, err := td.PrepareRevision(ctxT(t, 10*time.Second), rev, compute.RevisionContext{})
	mustDo(t, "PrepareRevision", err)
	dir := agentDirOf(td.dir, ta.agent.ID)
	testutil.Eventually(t, 10*time.Second, func() bool {
		b, _ := os.ReadFile(filepath.Join(dir, "args.txt"))
		return len(b) > 0
	}, "the stand-in's environment dump")
	envb, _ := os.ReadFile(filepath.Join(dir, "env.txt"))
	env := map[string]string{}
	for _, kv := range strings.Split(strings.TrimSpace(string(envb)), "\n") {
		k, v, _ := strings.Cut(kv, "=")
		env[k] = v
	}
	want := map[string]string{
		"HOME":                      filepath.Join(dir, "home"),
		"OPENCLAW_STATE_DIR":        filepath.Join(dir, "state"),
		"OPENCLAW_CONFIG_PATH":      filepath.Join(dir, "revisions", agentdir.Hash(rev.ID), "openclaw.json"),
		"OPENCLAW_SKIP_CHANNELS":    "1",
		"OPENCLAW_DISABLE_BONJOUR":  "1",
		"OPENCLAW_NO_AUTO_UPDATE":   "1",
		"OPENCLAW_OFFLINE":          "1",
		"OPENCLAW_NO_RESPAWN":       "1",
		"TMPDIR":                    filepath.Join(dir, "tmp"),
		"OCC_TEST_SECRET_IN_PARENT": "",
		"OPENCLAW_GATEWAY_TOKEN":    "",
	}
	for k, v := range want {
		if env[k] != v {
			t.Errorf("gateway env %s = %q, want %q", k, env[k], v)
		}
	}
	if !strings.HasPrefix(env["PATH"], filepath.Dir(rt.Node)+":") {
		t.Errorf("gateway PATH %q does not start with the node directory", env["PATH"])
	}
	args, _ := os.ReadFile(filepath.Join(dir, "args.txt"))
	port, _ := os.ReadFile(filepath.Join(dir, "port"))
	if got, want := strings.TrimSpace(string(args)), rt.OpenClaw+" gateway run --port "+strings.TrimSpace(string(port)); got != want {
		t.Errorf("gateway arguments %q, want %q", got, want)
	}
	tok, _ := os.ReadFile(filepath.Join(dir, "token"))
	if len(tok) != 64 || bytes.Contains(envb, tok) || bytes.Contains(args, tok) {
		t.Error("the token is malformed or reached the gateway's arguments or environment")
	}
	// Modes: private directory, token and configuration.
	for p, want := range map[string]os.FileMode{
		dir:                               0o700,
		filepath.Join(dir, "token"):       0o600,
		filepath.Join(dir, "workspace"):   0o700,
		filepath.Join(dir, "gateway.log"): 0o600,
		filepath.Join(dir, "pid"):         0o600,
		filepath.Join(dir, "revisions", agentdir.Hash(rev.ID), "openclaw.json"): 0o600,
	} {
		fi, err := os.Stat(p)
		if err != nil || fi.Mode().Perm() != want {
			t.Errorf("%s: mode %v (%v), want %v", p, fi.Mode().Perm(), err, want)
		}
	}
}

func TestListenerOwnership(t *testing.T) {
	l, err := net.Listen("tcp4", "127.0.0.1:0")
	mustDo(t, "listen", err)
	defer l.Close()
	port := l.Addr().(*net.TCPAddr).Port
	if owned, checked := listenerOwned(os.Getpid(), port); !owned || !checked {
		t.Errorf("listenerOwned(self) = %t, %t; want true, true", owned, checked)
	}
	if owned, _ := listenerOwned(1, port); owned {
		t.Error("listenerOwned(pid 1) = true for our listener")
	}
	if !isGatewayCmdline([]string{"openclaw-gateway"}, Runtime{}) ||
		!isGatewayCmdline([]string{"/n/node", "/x/openclaw.mjs", "gateway", "run"}, Runtime{OpenClaw: "/x/openclaw.mjs"}) ||
		isGatewayCmdline([]string{"/n/node", "/x/dist/process/spawn-broker/worker.js"}, Runtime{OpenClaw: "/x/openclaw.mjs"}) {
		t.Error("isGatewayCmdline misclassifies")
	}
}

// TestForeignListenerAfterTheGatewayStopsAnswering: a gateway that was
// ready closes its listener (the stand-in is this test binary, whose
// process lives on), its health probes fail and Ready turns off; then
// another process binds the port and answers /readyz 200. That must not
// turn Ready on again: after a failed probe the owner of the listener is
// checked again, as before the first success.
func TestForeignListenerAfterTheGatewayStopsAnswering(t *testing.T) {
	self, err := os.Executable()
	mustDo(t, "find the test binary", err)
	rt := standIn(t, envStandInGateway+"=1 exec '"+strings.ReplaceAll(self, "'", `'\''`)+`' "$@"`)
	td := newTestDriver(t, rt, "", func(o *Options) { o.StopGrace = time.Second })
	ta := newTestAgent()
	rev := ta.revision(1, "")
	prepared := func() compute.PrepareResult {
		res, err := td.PrepareRevision(ctxT(t, 10*time.Second), rev, compute.RevisionContext{})
		mustDo(t, "PrepareRevision", err)
		return res
	}
	testutil.Eventually(t, 30*time.Second, func() bool { return prepared().Ready }, "the stand-in gateway to be ready")
	ep, err := td.Endpoint(ctxT(t, 10*time.Second), rev)
	mustDo(t, "Endpoint", err)
	host := strings.TrimSuffix(strings.TrimPrefix(ep.URL, "ws://"), "/")

	mustDo(t, "ask the stand-in to close its listener",
		os.WriteFile(filepath.Join(agentDirOf(td.dir, ta.agent.ID), "close-listener"), nil, 0o600))
	// Three failed health probes, 5 s apart, turn Ready off.
	testutil.Eventually(t, 30*time.Second, func() bool { return !prepared().Ready }, "Ready to turn off")
	l, err := net.Listen("tcp4", host)
	mustDo(t, "listen on the agent's port", err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {}), ReadHeaderTimeout: 5 * time.Second}
	go srv.Serve(l)
	defer srv.Close()
	// Three more health probes' time: each finds /readyz answering, from
	// a listener that is not the gateway's.
	for range 12 {
		time.Sleep(time.Second)
		if prepared().Ready {
			t.Fatal("a foreign listener on the port of a gateway that stopped answering made the revision ready again")
		}
	}
}

// TestForeignListenerIsNotReady: something else answering /readyz 200 on
// the Agent's port does not make the revision ready.
func TestForeignListenerIsNotReady(t *testing.T) {
	td := newTestDriver(t, standIn(t, "exec sleep 60"), "", func(o *Options) { o.StopGrace = time.Second })
	ta := newTestAgent()
	rev := ta.revision(1, "")
	res, err := td.PrepareRevision(ctxT(t, 10*time.Second), rev, compute.RevisionContext{})
	mustDo(t, "PrepareRevision", err)
	if res.Ready || res.PendingReason != PendingReason {
		t.Fatalf("first PrepareRevision = %+v, want pending %s", res, PendingReason)
	}
	ep, err := td.Endpoint(ctxT(t, 10*time.Second), rev)
	mustDo(t, "Endpoint", err)
	host := strings.TrimSuffix(strings.TrimPrefix(ep.URL, "ws://"), "/")
	l, err := net.Listen("tcp4", host)
	mustDo(t, "listen on the agent's port", err)
	srv := &http.Server{Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusOK) })}
	go srv.Serve(l)
	defer srv.Close()
	for range 8 {
		time.Sleep(250 * time.Millisecond)
		res, err := td.PrepareRevision(ctxT(t, 10*time.Second), rev, compute.RevisionContext{})
		mustDo(t, "PrepareRevision", err)
		if res.Ready {
			t.Fatal("a foreign listener on the Agent's port made the revision ready")
		}
	}
}

// TestSpawnFailureIsPublicWithoutPaths: a gateway that cannot even be
// started (here its node binary is not executable) leaves the revision
// pending with a message that goes to the API as the deployment's last
// attempt: it says what happened without the error's text, which names
// host paths; the log has that.
func TestSpawnFailureIsPublicWithoutPaths(t *testing.T) {
	rt := standIn(t, "exec sleep 60")
	mustDo(t, "make node not executable", os.Chmod(rt.Node, 0o600))
	td := newTestDriver(t, rt, "", func(o *Options) { o.StopGrace = time.Second })
	ta := newTestAgent()
	rev := ta.revision(1, "")
	var res compute.PrepareResult
	testutil.Eventually(t, 10*time.Second, func() bool {
		var err error
		res, err = td.PrepareRevision(ctxT(t, 10*time.Second), rev, compute.RevisionContext{})
		mustDo(t, "PrepareRevision", err)
		return strings.Contains(res.Message, "exited")
	}, "the failed start reported")
	if res.Ready || !strings.Contains(res.Message, "could not be started") || strings.Contains(res.Message, rt.Node) ||
		strings.Contains(res.Message, td.dir) {
		t.Errorf("PrepareRevision = %+v; want pending, saying the gateway could not be started, naming no path", res)
	}
}
