package ssh

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/agentdir"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/testutil"
)

// perRevisionGatewayJS is a stand-in for openclaw.mjs whose behaviour
// depends on the number of the revision it runs (read from the
// revision's directory, next to OPENCLAW_CONFIG_PATH): #1 answers
// /readyz with 200, #2 exits 1 at once (a crash loop), #3 exits 78 (the
// gateway's "configuration refused"), any other runs without ever
// listening.
const perRevisionGatewayJS = `import http from "node:http";
import fs from "node:fs";
import path from "node:path";
const port = Number(process.argv[process.argv.indexOf("--port") + 1]);
const n = fs.readFileSync(path.join(path.dirname(process.env.OPENCLAW_CONFIG_PATH), "revision"), "utf8").trim().split(" ")[1];
if (n === "1") {
	http.createServer((req, res) => { res.writeHead(req.url === "/readyz" ? 200 : 404); res.end(); }).listen(port, "127.0.0.1");
} else if (n === "2") {
	process.exit(1);
} else if (n === "3") {
	process.exit(78);
} else {
	setInterval(() => {}, 1 << 30);
}
`

// TestFailedRevisionRestoresServing, against the real sshd with occ's own
// supervisor (run.sh) and stand-in gateways: revision 1 serves; a later
// revision whose gateway crash-loops, refuses its configuration or is
// never ready fails for good, which preparing it had stopped revision
// 1's gateway for (one gateway per Agent). The failed revision's gateway
// must be stopped and revision 1's must run and serve again, without any
// call for it. When that restore fails (here run.sh cannot be written),
// PrepareRevision answers a retryable error and the serving gateway is
// still down; the next attempt restores it and answers the failure again
// (it does not start the failed revision anew).
func TestFailedRevisionRestoresServing(t *testing.T) {
	cfg := testConfig(t)
	// A binary that is never run (no setup identity) but is uploaded and
	// checksummed like occ.
	bin := filepath.Join(t.TempDir(), "occ")
	if err := os.WriteFile(bin, []byte("#!/bin/sh\nexit 1\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	root, err := gwtest.GuardedDir("occ-ssh-restore-")
	if err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(root, 0o755); err != nil {
		t.Fatal(err)
	}
	cfg.Root, cfg.RuntimeDir, cfg.Supervisor = root, stubRuntime(t, perRevisionGatewayJS), SupervisorOCC
	cfg.ReadyTimeout, cfg.StopGrace = 90*time.Second, time.Second
	// Away from the default range, which gateways of other tests and
	// servers on this machine use.
	cfg.PortLow, cfg.PortHigh = 19650, 19699
	d, err := New(Options{Config: cfg, Binary: bin})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	clock := testutil.NewClock(time.Time{})
	d.now = clock.Now
	ctx, cancel := context.WithTimeout(testutil.Context(t), 5*time.Minute)
	defer cancel()

	nsID, agentID := ids.New(ids.Namespace), ids.New(ids.Agent)
	revision := func(n int64) compute.Revision {
		return compute.Revision{ID: ids.New(ids.Revision), NamespaceID: nsID, AgentID: agentID, Number: n, Configuration: []byte(`{}`)}
	}
	t.Cleanup(func() {
		_ = d.DeleteAgent(context.Background(), compute.Agent{ID: agentID, NamespaceID: nsID})
	})
	dir := filepath.Join(root, "namespaces", nsID, "agents", agentdir.Hash(agentID))
	prepare := func(rev compute.Revision) (compute.PrepareResult, error) {
		return d.PrepareRevision(ctx, rev, compute.RevisionContext{})
	}
	// untilDone polls PrepareRevision like the worker until it answers
	// anything but pending.
	untilDone := func(t *testing.T, rev compute.Revision) (compute.PrepareResult, error) {
		t.Helper()
		var res compute.PrepareResult
		var err error
		testutil.Eventually(t, 2*time.Minute, func() bool {
			res, err = prepare(rev)
			return err != nil || res.Ready
		}, "PrepareRevision(#%d) to end pending", rev.Number)
		return res, err
	}

	rev1 := revision(1)
	if res, err := untilDone(t, rev1); err != nil || !res.Ready {
		t.Fatalf("PrepareRevision(#1) = %+v, %v; want Ready", res, err)
	}
	if err := d.ActivateRevision(ctx, rev1, compute.RevisionContext{}); err != nil {
		t.Fatal(err)
	}

	// check: revision 1's gateway runs and answers, and no process runs
	// failed's configuration.
	check := func(t *testing.T, failed compute.Revision) {
		t.Helper()
		if !runsRevisionOn(dir, rev1) {
			t.Errorf("the serving revision's supervisor does not run after #%d failed", failed.Number)
		}
		a := d.agent(agentID)
		// Its own listener (owned: the port is shared with whatever else
		// runs on this machine), answering /readyz.
		testutil.Eventually(t, time.Minute, func() bool {
			st, err := d.status(ctx, a.host, nsID, agentID, a.port)
			return err == nil && st.rev == agentdir.Hash(rev1.ID) && st.alive && st.owned && d.readyz(ctx, a.host, a.port)
		}, "the serving revision's gateway to answer /readyz on its port after #%d failed", failed.Number)
		if pids := runningConfig(dir, failed); len(pids) > 0 {
			t.Errorf("processes %v still run the failed revision #%d", pids, failed.Number)
		}
	}
	wantPermanent := func(t *testing.T, err error, code, text string) {
		t.Helper()
		p, ok := compute.AsPermanent(err)
		if !ok || p.Code != code || !strings.Contains(err.Error(), text) {
			t.Fatalf("PrepareRevision = %v; want permanent %s (%q)", err, code, text)
		}
	}

	t.Run("CrashLoop", func(t *testing.T) {
		rev := revision(2)
		_, err := untilDone(t, rev)
		wantPermanent(t, err, compute.CodeRuntimeFailed, "kept exiting")
		check(t, rev)
	})

	t.Run("NeverReady", func(t *testing.T) {
		rev := revision(4)
		if res, err := prepare(rev); err != nil || res.Ready {
			t.Fatalf("PrepareRevision(#4) = %+v, %v; want pending", res, err)
		}
		clock.Advance(2 * time.Minute)
		_, err := untilDone(t, rev)
		wantPermanent(t, err, compute.CodeRuntimeFailed, "not ready within")
		check(t, rev)
	})

	t.Run("RestoreFailsThenRetried", func(t *testing.T) {
		rev := revision(3)
		if res, err := prepare(rev); err != nil || res.Ready {
			t.Fatalf("PrepareRevision(#3) = %+v, %v; want pending", res, err)
		}
		// A host fault from now on: the supervisor script cannot be
		// written, so no gateway can be started (scriptStart).
		blocker := filepath.Join(dir, "run.sh.tmp")
		if err := os.Mkdir(blocker, 0o700); err != nil {
			t.Fatal(err)
		}
		_, err := untilDone(t, rev)
		if _, permanent := compute.AsPermanent(err); permanent || err == nil {
			t.Fatalf("PrepareRevision(#3) with the restore failing = %v; want a retryable error", err)
		}
		t.Logf("PrepareRevision(#3) with the restore failing = %v", err)
		if runsRevisionOn(dir, rev1) {
			t.Error("the serving revision runs although its start could not be made")
		}
		if err := os.Remove(blocker); err != nil {
			t.Fatal(err)
		}
		_, err = prepare(rev)
		wantPermanent(t, err, compute.CodeConfigurationInvalid, "refused the configuration")
		check(t, rev)
	})
}

// runsRevisionOn: run.sh's pid file names rev and its process lives.
func runsRevisionOn(dir string, rev compute.Revision) bool {
	b, err := os.ReadFile(filepath.Join(dir, "supervisor.pid"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(b))
	if len(f) != 2 || f[1] != agentdir.Hash(rev.ID) {
		return false
	}
	_, err = os.Stat("/proc/" + f[0])
	return err == nil
}

// runningConfig lists the processes under dir whose OPENCLAW_CONFIG_PATH
// is rev's configuration.
func runningConfig(dir string, rev compute.Revision) []string {
	want := "OPENCLAW_CONFIG_PATH=" + filepath.Join(dir, "revisions", agentdir.Hash(rev.ID), "openclaw.json")
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err != nil || (cwd != dir && !strings.HasPrefix(cwd, dir+"/")) {
			continue
		}
		env, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "environ"))
		for _, kv := range strings.Split(string(env), "\x00") {
			if kv == want {
				out = append(out, e.Name())
			}
		}
	}
	return out
}
