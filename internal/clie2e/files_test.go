package clie2e_test

import (
	"encoding/json"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/testutil"
)

// editorScript is $EDITOR for `occ files edit`: on its first run (no
// mark file yet) it plays a colleague who saves the file with
// `occ files put` while the editor is open, which makes the edit's save
// answer 412; every run appends "mine" to the file being edited.
const editorScript = `#!/bin/sh
set -e
if [ ! -e "$MARK" ]; then
	: > "$MARK"
	printf 'theirs\n' | "$OCC" files put helper SOUL.md -f - >/dev/null
fi
printf 'mine\n' >> "$1"
`

// TestAgentFilesEndToEnd: create → deploy --wait → files get/put/edit
// (with a 412 in between) → audit list, on the local Compute driver with
// a real OpenClaw gateway, the only gateway this package starts.
func TestAgentFilesEndToEnd(t *testing.T) {
	rt, err := gwtest.FindRuntime()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the OpenClaw runtime is required under CI: %v", err)
		}
		t.Skipf("no OpenClaw runtime: %v", err)
	}
	s := startServer(t, "local", "--openclaw-runtime", rt.Dir)
	u := newUser(t)
	u.loginAdmin(s, "--namespace", "team-a")
	u.must("", "namespace", "create", "team-a")
	testutil.Eventually(t, time.Minute, func() bool {
		var ns struct{ Status string }
		r := u.must("", "namespace", "get", "team-a", "--output", "json")
		return json.Unmarshal([]byte(r.Stdout), &ns) == nil && ns.Status == "ready"
	}, "Namespace team-a to be ready")
	cfg := filepath.Join(u.home, "openclaw.json")
	persona := filepath.Join(u.home, "persona")
	if err := os.MkdirAll(persona, 0o700); err != nil {
		t.Fatal(err)
	}
	for path, content := range map[string]string{cfg: `{"agents":{"defaults":{}}}`, filepath.Join(persona, "SOUL.md"): "Be brief.\n"} {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	u.must("", "configuration", "create", "base", "-f", cfg)
	u.must("", "agent", "create", "helper", "--configuration", "base", "--files", persona)
	t.Cleanup(func() {
		// Tear the gateway down through OCC, so it does not outlive the
		// server (the guard would kill it at the binary's end anyway).
		u.t = t
		if r := u.run("", "agent", "delete", "helper"); r.Code != 0 {
			return
		}
		testutil.Eventually(t, 2*time.Minute, func() bool {
			return !strings.Contains(u.run("", "agent", "list").Stdout, "helper")
		}, "Agent helper to be deleted")
	})
	r := u.must("", "agent", "deploy", "helper", "--wait", "--timeout", "5m", "--interval", "500ms")
	if !strings.Contains(r.Stdout, "succeeded") || !strings.Contains(r.Stderr, ": succeeded") {
		t.Fatalf("deploy --wait: %s", r)
	}

	// get: the staged content, its hash on stderr.
	r = u.must("", "files", "get", "helper", "SOUL.md")
	if r.Stdout != "Be brief.\n" || !strings.Contains(r.Stderr, "SOUL.md hash "+sha256Hex("Be brief.\n")) {
		t.Fatalf("files get: %s", r)
	}
	// put with a stale hash: 412, exit 5, nothing written.
	newFile := filepath.Join(u.home, "new.md")
	if err := os.WriteFile(newFile, []byte("Be kind.\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	r = u.run("", "files", "put", "helper", "SOUL.md", "-f", newFile, "--if-match", sha256Hex("stale"))
	if r.Code != 5 || !strings.Contains(r.Stderr, "changed since you read it") {
		t.Errorf("put with a stale hash: %s; want exit 5", r)
	}
	r = u.must("", "files", "put", "helper", "SOUL.md", "-f", newFile, "--if-unchanged", "--output", "json")
	if !strings.Contains(r.Stdout, sha256Hex("Be kind.\n")) {
		t.Errorf("put --if-unchanged: %s", r)
	}
	if r := u.must("", "files", "get", "helper", "SOUL.md", "-o", filepath.Join(u.home, "got.md")); r.Stdout != "" {
		t.Errorf("get -o printed to stdout: %s", r)
	}
	if b, err := os.ReadFile(filepath.Join(u.home, "got.md")); err != nil || string(b) != "Be kind.\n" {
		t.Errorf("get -o wrote %q, %v", b, err)
	}

	// edit: a colleague saves while the editor is open; occ shows the
	// diff, we answer "o" (overwrite), and our version is saved over theirs.
	script := filepath.Join(u.home, "editor.sh")
	if err := os.WriteFile(script, []byte(editorScript), 0o700); err != nil {
		t.Fatal(err)
	}
	u.env = []string{"EDITOR=" + script, "OCC=" + os.Args[0], "MARK=" + filepath.Join(u.home, "mark1")}
	r = u.must("o\n", "files", "edit", "helper", "SOUL.md")
	for _, want := range []string{"changed on the server since you opened it", "-theirs", "+Be kind.", "+mine", "SOUL.md saved"} {
		if !strings.Contains(r.Stderr, want) {
			t.Errorf("files edit: stderr lacks %q\n%s", want, r)
		}
	}
	if r := u.must("", "files", "get", "helper", "SOUL.md"); r.Stdout != "Be kind.\nmine\n" {
		t.Errorf("after edit with overwrite: %q; want ours", r.Stdout)
	}
	// The same, answering nothing (end of input): abort, exit 5, our
	// version kept in a private file, theirs stays.
	u.env[2] = "MARK=" + filepath.Join(u.home, "mark2")
	r = u.run("", "files", "edit", "helper", "SOUL.md")
	if r.Code != 5 || !strings.Contains(r.Stderr, "aborted") || !strings.Contains(r.Stderr, "Your version is kept in ") {
		t.Errorf("files edit, aborted: %s; want exit 5", r)
	}
	kept := r.Stderr[strings.Index(r.Stderr, "kept in ")+len("kept in "):]
	kept = strings.TrimSuffix(strings.SplitN(kept, "\n", 2)[0], ".")
	if st, err := os.Stat(kept); err != nil || st.Mode().Perm() != 0o600 {
		t.Errorf("kept file %s: %v, %v; want mode 0600", kept, st, err)
	} else {
		_ = os.RemoveAll(filepath.Dir(kept))
	}
	if r := u.must("", "files", "get", "helper", "SOUL.md"); r.Stdout != "theirs\n" {
		t.Errorf("after an aborted edit: %q; want theirs", r.Stdout)
	}
	u.env = nil

	// audit: the writes, the 412s among them.
	r = u.must("", "audit", "list", "--action", "openclaw.agents.workspace.files.write", "--output", "json")
	var page struct {
		Items []struct{ Outcome, ReasonCode string }
	}
	if err := json.Unmarshal([]byte(r.Stdout), &page); err != nil {
		t.Fatal(err)
	}
	var ok, conflicts int
	for _, e := range page.Items {
		switch {
		case e.Outcome == "success":
			ok++
		case e.ReasonCode == "PRECONDITION_FAILED":
			conflicts++
		}
	}
	// Writes: put --if-unchanged, the colleague twice, the overwrite; 412s:
	// the stale put and the two edits' first saves.
	if ok != 4 || conflicts != 3 {
		t.Errorf("audit of file writes: %d successes, %d precondition failures; want 4 and 3\n%s", ok, conflicts, r.Stdout)
	}
}
