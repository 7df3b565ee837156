package ssh

import (
	"context"
	"encoding/json"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/agentdir"
	"github.com/openclaw/occ/internal/ids"
)

// testConfig is the test sshd of scripts/testenv/sshd.sh (read from its
// SSH_TEST_* variables; package sshtest cannot be used from inside this
// package) with roots under the test's temp dir.
func testConfig(t *testing.T) Config {
	t.Helper()
	get := func(k string) string {
		v := os.Getenv(k)
		if v == "" {
			if os.Getenv("CI") == "true" {
				t.Fatalf("$%s is not set: run eval \"$(scripts/testenv/sshd.sh env)\"", k)
			}
			t.Skipf("$%s is not set", k)
		}
		return v
	}
	ru := os.Getenv("SSH_TEST_RUNTIME_USER")
	if ru == "" {
		ru = DefaultRuntimeUser
	}
	return Config{KnownHostsFile: get("SSH_TEST_KNOWN_HOSTS"), IdentityFile: get("SSH_TEST_KEY"), RuntimeUser: ru,
		Root: "/nonexistent", RuntimeDir: "/nonexistent", Hosts: []Host{{Name: "h1", Address: get("SSH_TEST_ADDR")}}}
}

func traversableDir(t *testing.T) string {
	t.Helper()
	dir := t.TempDir()
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	// t.TempDir's own parent (the test's directory under the system temp
	// dir) is 0700 too; nothing above it is touched.
	if parent := filepath.Dir(dir); filepath.Dir(parent) == filepath.Clean(os.TempDir()) {
		if err := os.Chmod(parent, 0o755); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

// TestPlacement, against the real sshd, without gateways: an Agent listed
// under a host goes there, others go to the host with free capacity, a
// full installation is a retryable refusal, and a driver configured
// differently later (hosts reordered, the pin gone, capacities changed)
// finds each Agent where its directory, the placement record, is.
func TestPlacement(t *testing.T) {
	base := testConfig(t)
	ns := ids.New(ids.Namespace)
	pinned, free, full := ids.New(ids.Agent), ids.New(ids.Agent), ids.New(ids.Agent)
	h1 := Host{Name: "h1", Address: base.Hosts[0].Address, Capacity: 1, Root: traversableDir(t)}
	h2 := Host{Name: "h2", Address: base.Hosts[0].Address, Capacity: 1, Root: traversableDir(t), Agents: []string{pinned}}
	cfg := base
	cfg.Hosts = []Host{h1, h2}
	d, err := New(Options{Config: cfg, Binary: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	place := func(d *Driver, agent string) (string, error) {
		a, err := d.lockAgent(ctx, agent)
		if err != nil {
			return "", err
		}
		defer a.unlock()
		h, err := d.locate(ctx, a, ns, agent, true)
		if err != nil {
			return "", err
		}
		info, _ := json.Marshal(map[string]string{"agentId": agent, "namespaceId": ns})
		// What PrepareRevision records first: the Agent's directory.
		_, err = h.run(ctx, "layout", shellCmd(scriptLayout, h.cfg.Root, ns, agentdir.Hash(agent), d.cfg.RuntimeUser, string(info)), nil)
		return h.cfg.Name, err
	}
	got := map[string]string{}
	for _, a := range []struct{ name, id string }{{"pinned", pinned}, {"free", free}} {
		h, err := place(d, a.id)
		if err != nil {
			t.Fatalf("placing %s: %v", a.name, err)
		}
		got[a.name] = h
	}
	_, err = place(d, full)
	if err == nil || !strings.Contains(err.Error(), "capacity") {
		t.Errorf("third Agent on two hosts of capacity 1: %v; want a capacity error", err)
	} else if _, permanent := compute.AsPermanent(err); permanent {
		t.Errorf("a full installation is retryable: %v", err)
	}
	want := map[string]string{"pinned": "h2", "free": "h1"}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("placement (-want +got):\n%s", diff)
	}
	for name, h := range map[string]Host{"pinned": h2, "free": h1} {
		id := map[string]string{"pinned": pinned, "free": free}[name]
		if _, err := os.Stat(filepath.Join(h.Root, "namespaces", ns, "agents", agentdir.Hash(id), "agent.json")); err != nil {
			t.Errorf("%s: no placement record on %s: %v", name, h.Name, err)
		}
	}

	// Another driver (a restarted occ, another replica) with the hosts
	// reordered, the pin removed and room everywhere.
	c2 := cfg
	c2.Hosts = []Host{h2, h1}
	c2.Hosts[0].Agents, c2.Hosts[0].Capacity, c2.Hosts[1].Capacity = nil, 5, 5
	d2, err := New(Options{Config: c2, Binary: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer d2.Close()
	got2 := map[string]string{}
	for name, id := range map[string]string{"pinned": pinned, "free": free} {
		h, err := place(d2, id)
		if err != nil {
			t.Fatal(err)
		}
		got2[name] = h
	}
	if diff := cmp.Diff(want, got2); diff != "" {
		t.Errorf("placement seen by a differently configured driver (-want +got):\n%s", diff)
	}

	// An Agent recorded on two hosts is refused, naming both.
	info, _ := json.Marshal(map[string]string{"agentId": free, "namespaceId": ns})
	h2d := d2.hosts[0]
	if _, err := h2d.run(ctx, "layout", shellCmd(scriptLayout, h2.Root, ns, agentdir.Hash(free), d.cfg.RuntimeUser, string(info)), nil); err != nil {
		t.Fatal(err)
	}
	d3, err := New(Options{Config: c2, Binary: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer d3.Close()
	_, err = place(d3, free)
	if p, ok := compute.AsPermanent(err); !ok || !strings.Contains(p.Error(), "h1") || !strings.Contains(p.Error(), "h2") {
		t.Errorf("an Agent on two hosts: %v; want a permanent error naming h1 and h2", err)
	}
}

// TestPlacementAndPortsAreRoots: against the real sshd, without gateways.
// What decides where an Agent is and which port it has is root's: the
// Agent's directory (in a root-owned parent) and root/ports, never a file
// inside the directory the runtime account owns. An Agent that deletes
// its agent.json is still found (else DeleteAgent would miss it and leave
// its gateway running), and a port written where an earlier occ kept it
// changes no Agent's port.
func TestPlacementAndPortsAreRoots(t *testing.T) {
	base := testConfig(t)
	ns := ids.New(ids.Namespace)
	first, second := ids.New(ids.Agent), ids.New(ids.Agent)
	h1 := Host{Name: "h1", Address: base.Hosts[0].Address, Capacity: 5, Root: traversableDir(t)}
	cfg := base
	cfg.Hosts = []Host{h1}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	newDriver := func() *Driver {
		d, err := New(Options{Config: cfg, Binary: os.Args[0]})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { d.Close() })
		return d
	}
	// portOf places the Agent (its directory, as PrepareRevision does
	// first) and returns its port.
	portOf := func(d *Driver, agent string) int {
		t.Helper()
		a, err := d.lockAgent(ctx, agent)
		if err != nil {
			t.Fatal(err)
		}
		defer a.unlock()
		h, err := d.locate(ctx, a, ns, agent, true)
		if err != nil {
			t.Fatal(err)
		}
		info, _ := json.Marshal(map[string]string{"agentId": agent, "namespaceId": ns})
		if _, err := h.run(ctx, "layout", shellCmd(scriptLayout, h.cfg.Root, ns, agentdir.Hash(agent), d.cfg.RuntimeUser, string(info)), nil); err != nil {
			t.Fatal(err)
		}
		p, err := d.port(ctx, a, h, h.agentDir(ns, agent), agent)
		if err != nil {
			t.Fatalf("port of %s: %v", agent, err)
		}
		return p
	}
	d := newDriver()
	p1 := portOf(d, first)
	firstDir := filepath.Join(h1.Root, "namespaces", ns, "agents", agentdir.Hash(first))
	// The runtime account deletes agent.json and writes another port
	// where an earlier occ kept it (which occ then read as the Agent's).
	if err := os.Remove(filepath.Join(firstDir, "agent.json")); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(firstDir, "port"), []byte(strconv.Itoa(p1+7)+"\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	p2 := portOf(d, second)
	if p2 == p1 || time.Since(start) > 30*time.Second {
		t.Errorf("second Agent's port %d after %v; want another than the first's %d, without waiting", p2, time.Since(start), p1)
	}
	d2 := newDriver() // a restarted occ: nothing cached
	if got := portOf(d2, first); got != p1 {
		t.Errorf("first Agent's port seen by a restarted occ = %d, want %d", got, p1)
	}
	a, err := d2.lockAgent(ctx, first)
	if err != nil {
		t.Fatal(err)
	}
	h, err := d2.locate(ctx, a, ns, first, false)
	a.unlock()
	if err != nil || h == nil {
		t.Errorf("an Agent without agent.json: locate = %v, %v; want its host", h, err)
	}
	fi, err := os.Lstat(filepath.Join(h1.Root, "ports", agentdir.Hash(first)))
	if err != nil {
		t.Fatal(err)
	}
	if st := fi.Sys().(*syscall.Stat_t); st.Uid != 0 || fi.Mode().Perm()&0o022 != 0 {
		t.Errorf("root/ports entry: uid %d mode %v; want root's, writable by root only", st.Uid, fi.Mode())
	}
}
