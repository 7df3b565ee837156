package ssh_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/user"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/ssh/sshtest"
	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/workspace"
)

// TestHostLifecycle deploys an Agent with its four initial files on the
// real sshd and checks, on the host: the bytes, owners and modes; no
// token or content in any process's command line or environment; live
// reads and compare-and-swap writes through the SSH connection; a user's
// edit that survives a redeploy; a divergent marker that blocks the next
// start while the running revision keeps serving; a dead gateway that
// fails fast; and retire and delete leaving nothing behind.
func TestHostLifecycle(t *testing.T) {
	cfg := sshtest.Config(t)
	acquireGateway(t)
	d := newDriver(t, cfg)
	ctx, cancel := context.WithTimeout(context.Background(), 8*time.Minute)
	defer cancel()
	ns, agentID := ids.New(ids.Namespace), ids.New(ids.Agent)
	marker := "SSH-CONTENT-7f3a"
	files := map[string]string{
		"AGENTS.md":   "# Agents " + marker + "\r\nCRLF kept\r\n",
		"SOUL.md":     "",
		"IDENTITY.md": "name: Ünïcode " + marker,
		"USER.md":     "user  " + marker + "  \n",
	}
	setup := &compute.WorkspaceSetup{ID: "ws_" + ids.New(ids.Agent), NamespaceID: ns, AgentID: agentID, DefaultsID: workspace.DefaultsID, Files: files}
	rev1 := newRevision(ns, agentID, 1)
	dir := filepath.Join(cfg.Root, "namespaces", ns, "agents", hash12(agentID))
	ws := filepath.Join(dir, "state", "workspace")
	t.Cleanup(func() {
		if t.Failed() {
			dumpLogs(t, cfg.Root)
		}
		_ = d.DeleteAgent(context.Background(), compute.Agent{ID: agentID, NamespaceID: ns})
	})

	activate(t, ctx, d, rev1, compute.RevisionContext{WorkspaceSetup: setup})
	for name, want := range files {
		if got, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(got) != want {
			t.Errorf("workspace %s = %q, %v; want %q", name, got, err, want)
		}
	}

	// Owners and modes.
	ru, err := user.Lookup(cfg.RuntimeUser)
	if err != nil {
		t.Fatal(err)
	}
	uid, _ := strconv.Atoi(ru.Uid)
	for _, p := range []string{dir, filepath.Join(dir, "home"), filepath.Join(dir, "state"), ws, filepath.Join(dir, "revisions")} {
		wantMode(t, p, 0o700|os.ModeDir, uid)
	}
	wantMode(t, filepath.Join(dir, "revisions", hash12(rev1.ID), "openclaw.json"), 0o600, uid)
	tokenFile := filepath.Join(cfg.Root, "tokens", hash12(agentID))
	wantMode(t, tokenFile, 0o600, 0)
	token, err := os.ReadFile(tokenFile)
	if err != nil || len(token) != 64 {
		t.Fatalf("token file: %q, %v", token, err)
	}

	// No process on the host shows the token or any file content.
	if leaks := procLeaks(t, string(token), marker); len(leaks) > 0 {
		t.Errorf("secrets or content visible in: %v", leaks)
	}

	// Live files through the SSH connection.
	gw := agentgw.New(agentgw.Options{})
	ep, err := d.Endpoint(ctx, rev1)
	if err != nil {
		t.Fatal(err)
	}
	target, err := agentgw.TargetFor(ep, agentgw.RoutedAuth{})
	if err != nil {
		t.Fatal(err)
	}
	f, err := gw.Get(ctx, target, "AGENTS.md")
	if err != nil || f.Content != files["AGENTS.md"] {
		t.Fatalf("Get AGENTS.md = %+v, %v", f, err)
	}
	edited := "edited through OCC over SSH\n"
	if _, err := gw.Set(ctx, target, "USER.md", edited, digest.Of(files["USER.md"])); err != nil {
		t.Fatalf("Set USER.md with the current hash: %v", err)
	}
	if _, err := gw.Set(ctx, target, "USER.md", "stale", digest.Of(files["USER.md"])); agentgw.KindOf(err) != agentgw.Conflict {
		t.Errorf("Set USER.md with a stale hash: %v; want Conflict", err)
	}
	if got, _ := os.ReadFile(filepath.Join(ws, "USER.md")); string(got) != edited {
		t.Errorf("USER.md on disk = %q after Set", got)
	}

	// Redeploy with the completed identity: the edit stays.
	completed := &compute.WorkspaceSetup{ID: setup.ID, NamespaceID: ns, AgentID: agentID, DefaultsID: setup.DefaultsID, Completed: true}
	rev2 := newRevision(ns, agentID, 2)
	activate(t, ctx, d, rev2, compute.RevisionContext{WorkspaceSetup: completed})
	if got, _ := os.ReadFile(filepath.Join(ws, "USER.md")); string(got) != edited {
		t.Errorf("USER.md after redeploy = %q; want the edit %q", got, edited)
	}
	if err := d.RetireRevision(ctx, rev1); err != nil {
		t.Fatal(err)
	}

	// occ restarts: a new driver re-attaches to the running supervisor
	// (same pid, ready at once) instead of starting another gateway.
	supervisorPID := func() string {
		b, _ := os.ReadFile(filepath.Join(dir, "supervisor.pid"))
		return strings.Fields(string(b) + " ")[0]
	}
	before := supervisorPID()
	d.Close()
	d = newDriver(t, cfg)
	if err := d.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	if res, err := d.PrepareRevision(ctx, rev2, compute.RevisionContext{WorkspaceSetup: completed}); err != nil || !res.Ready {
		t.Errorf("PrepareRevision after a restart = %+v, %v; want Ready from the running gateway", res, err)
	}
	if after := supervisorPID(); after != before {
		t.Errorf("supervisor pid %s after a restart, was %s: a second gateway was started", after, before)
	}
	if _, err := os.Stat(filepath.Join(dir, "revisions", hash12(rev1.ID))); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("retired revision's directory: %v", err)
	}

	// A divergent marker blocks the next start; revision 2 keeps serving.
	mk := filepath.Join(ws, workspace.MarkerName)
	goodMarker, err := os.ReadFile(mk)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(mk, []byte(`{"id":"someone-else","namespaceId":"x","agentId":"y"}`), 0o600); err != nil {
		t.Fatal(err)
	}
	rev3 := newRevision(ns, agentID, 3)
	_, err = d.PrepareRevision(ctx, rev3, compute.RevisionContext{WorkspaceSetup: completed})
	if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeWorkspaceSetupFailed {
		t.Errorf("PrepareRevision over a divergent marker = %v; want permanent %s", err, compute.CodeWorkspaceSetupFailed)
	}
	if !isServing(dir, rev2) {
		t.Error("revision 2 stopped serving after a refused revision 3")
	}
	if err := d.RetireRevision(ctx, rev3); err != nil {
		t.Fatal(err)
	}
	// Restored from "backup": the marker matches again.
	if err := os.WriteFile(mk, goodMarker, 0o600); err != nil {
		t.Fatal(err)
	}

	// A dead gateway: the file operation fails fast, as unavailable.
	pidText, _ := os.ReadFile(filepath.Join(dir, "supervisor.pid"))
	pid, _ := strconv.Atoi(strings.Fields(string(pidText))[0])
	if err := syscall.Kill(-pid, syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	time.Sleep(200 * time.Millisecond)
	start := time.Now()
	_, err = gw.Get(ctx, target, "AGENTS.md")
	if agentgw.KindOf(err) != agentgw.Unavailable || time.Since(start) > 5*time.Second {
		t.Errorf("Get from a dead gateway = %v after %s; want Unavailable within 5 s", err, time.Since(start))
	}

	// Recover (occ starting) starts the serving revision again, after
	// the verifier.
	if err := d.Recover(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		res, err := d.PrepareRevision(ctx, rev2, compute.RevisionContext{WorkspaceSetup: completed})
		if err != nil {
			t.Fatalf("PrepareRevision after Recover: %v", err)
		}
		if res.Ready {
			break
		}
		time.Sleep(time.Second)
	}
	if supervisorPID() == strconv.Itoa(pid) {
		t.Error("Recover did not start a new supervisor")
	}
	if f, err := gw.Get(ctx, target, "USER.md"); err != nil || f.Content != edited {
		t.Errorf("Get USER.md after Recover = %+v, %v", f, err)
	}

	// Stop, retire, delete: nothing left.
	for _, step := range []func() error{
		func() error { return d.StopRevision(ctx, rev2) },
		func() error { return d.RetireRevision(ctx, rev2) },
		func() error { return d.DeleteAgent(ctx, compute.Agent{ID: agentID, NamespaceID: ns}) },
	} {
		if err := step(); err != nil {
			t.Fatal(err)
		}
	}
	for _, p := range []string{dir, tokenFile} {
		if _, err := os.Stat(p); !errors.Is(err, os.ErrNotExist) {
			t.Errorf("%s after delete: %v", p, err)
		}
	}
	if procs := processesUnder(t, dir); len(procs) > 0 {
		t.Errorf("processes left under the Agent's directory: %v", procs)
	}
}

func activate(t *testing.T, ctx context.Context, d compute.Driver, rev compute.Revision, rc compute.RevisionContext) {
	t.Helper()
	for {
		res, err := d.PrepareRevision(ctx, rev, rc)
		if _, permanent := compute.AsPermanent(err); permanent || ctx.Err() != nil {
			t.Fatalf("PrepareRevision(#%d): %v", rev.Number, err)
		}
		if err == nil && res.Ready {
			break
		}
		time.Sleep(time.Second)
	}
	if err := d.ActivateRevision(ctx, rev, rc); err != nil {
		t.Fatalf("ActivateRevision(#%d): %v", rev.Number, err)
	}
}

func wantMode(t *testing.T, p string, mode os.FileMode, uid int) {
	t.Helper()
	fi, err := os.Lstat(p)
	if err != nil {
		t.Errorf("%s: %v", p, err)
		return
	}
	st := fi.Sys().(*syscall.Stat_t)
	if fi.Mode() != mode || int(st.Uid) != uid {
		t.Errorf("%s: mode %v uid %d; want %v uid %d", p, fi.Mode(), st.Uid, mode, uid)
	}
}

// procLeaks lists processes whose command line or environment holds a
// needle.
func procLeaks(t *testing.T, needles ...string) []string {
	t.Helper()
	entries, err := os.ReadDir("/proc")
	if err != nil {
		t.Fatal(err)
	}
	var leaks []string
	scanned := 0
	for _, e := range entries {
		if e.Name()[0] < '0' || e.Name()[0] > '9' {
			continue
		}
		for _, f := range []string{"cmdline", "environ"} {
			b, err := os.ReadFile(filepath.Join("/proc", e.Name(), f))
			if err != nil {
				continue
			}
			scanned++
			for _, n := range needles {
				if strings.Contains(string(b), n) {
					leaks = append(leaks, fmt.Sprintf("pid %s %s", e.Name(), f))
				}
			}
		}
	}
	if scanned < 10 {
		t.Fatalf("read only %d /proc entries; the scan proves nothing", scanned)
	}
	return leaks
}

// processesUnder lists processes whose working directory is under dir.
func processesUnder(t *testing.T, dir string) []string {
	entries, _ := os.ReadDir("/proc")
	var out []string
	for _, e := range entries {
		cwd, err := os.Readlink(filepath.Join("/proc", e.Name(), "cwd"))
		if err == nil && (cwd == dir || strings.HasPrefix(cwd, dir+"/")) {
			out = append(out, e.Name())
		}
	}
	return out
}
