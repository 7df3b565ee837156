package ssh

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/openclaw/occ/internal/config"
)

func section(t testing.TB, text string) *config.Section {
	t.Helper()
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		t.Fatal(err)
	}
	if len(doc.Content) == 0 {
		return &config.Section{Key: "drivers.compute.ssh", Node: yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}}
	}
	return &config.Section{Key: "drivers.compute.ssh", Node: *doc.Content[0]}
}

const minimal = `
knownHostsFile: /etc/occ/known_hosts
identityFile: /etc/occ/id_ed25519
runtimeDir: /opt/occ/runtime
hosts:
  - name: h1
    address: 127.0.0.1:22
`

func TestFromSection(t *testing.T) {
	c, err := FromSection(section(t, minimal))
	if err != nil {
		t.Fatal(err)
	}
	want := Config{
		KnownHostsFile: "/etc/occ/known_hosts", IdentityFile: "/etc/occ/id_ed25519", User: "root",
		RuntimeUser: "occ-agent", Root: "/var/lib/occ", RuntimeDir: "/opt/occ/runtime",
		PortLow: 18800, PortHigh: 18999, MaxSessions: 8, ConnectTimeout: DefaultConnectTimeout,
		CommandTimeout: DefaultCommandTimeout, ReadyTimeout: DefaultReadyTimeout, StopGrace: DefaultStopGrace,
		Supervisor: "auto",
		Hosts:      []Host{{Name: "h1", Address: "127.0.0.1:22", Capacity: 10, Root: "/var/lib/occ"}},
	}
	if d := cmp.Diff(want, c); d != "" {
		t.Errorf("FromSection (-want +got):\n%s", d)
	}
}

func TestFromSectionErrors(t *testing.T) {
	for _, tc := range []struct {
		name, extra, want string // want "" = valid
	}{
		{"unknown key", "colour: red\n", `unknown key "drivers.compute.ssh.colour"`},
		{"portLow at the limit", "portLow: 1024\nportHigh: 1024\n", ""},
		{"portLow past the limit", "portLow: 1023\nportHigh: 2000\n", "drivers.compute.ssh.portLow and portHigh"},
		{"portHigh at the limit", "portLow: 2000\nportHigh: 65535\n", ""},
		{"portHigh past the limit", "portLow: 2000\nportHigh: 65536\n", "drivers.compute.ssh.portLow and portHigh"},
		{"maxSessions at the limit", "maxSessions: 64\n", ""},
		{"maxSessions past the limit", "maxSessions: 65\n", "maxSessions must be between 1 and 64"},
		{"maxSessions negative", "maxSessions: -1\n", "maxSessions must be between 1 and 64"},
		{"user not root", "user: admin\n", "user must be root"},
		{"runtime user root", "runtimeUser: root\n", "runtimeUser must be a non-root user name"},
		{"root with a space", "root: /var/lib/o cc\n", "drivers.compute.ssh.root must be a clean absolute path"},
		{"root not clean", "root: /var/lib/occ/\n", "drivers.compute.ssh.root must be a clean absolute path"},
		{"root slash", "root: /\n", "drivers.compute.ssh.root must be"},
		{"supervisor", "supervisor: runit\n", "supervisor must be auto, systemd or occ"},
		{"duration", "commandTimeout: 2h\n", "commandTimeout must be between 0 and 1h"},
		{"duration at the limit", "commandTimeout: 1h\n", ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromSection(section(t, minimal+tc.extra))
			switch {
			case tc.want == "" && err != nil:
				t.Errorf("error %v, want none", err)
			case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
	for _, tc := range []struct{ name, text, want string }{
		{"empty", "", "knownHostsFile is required"},
		{"relative key", strings.Replace(minimal, "/etc/occ/id_ed25519", "id_ed25519", 1), "identityFile must be an absolute path"},
		{"no runtime", strings.Replace(minimal, "runtimeDir: /opt/occ/runtime\n", "", 1), "runtimeDir is required"},
		{"no hosts", strings.Split(minimal, "hosts:")[0], "hosts must list at least one host"},
		{"bad address", strings.Replace(minimal, "127.0.0.1:22", "127.0.0.1", 1), "hosts[0].address must be host:port"},
		{"twice", minimal + "  - name: h1\n    address: 127.0.0.1:23\n", `hosts[1].name "h1" is used twice`},
		{"pinned twice", strings.Replace(minimal, "address: 127.0.0.1:22\n", "address: 127.0.0.1:22\n    agents: [ag_1]\n", 1) +
			"  - name: h2\n    address: 127.0.0.1:23\n    agents: [ag_1]\n", "agent ag_1 is already placed on host h1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			_, err := FromSection(section(t, tc.text))
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("error %v, want it to contain %q", err, tc.want)
			}
		})
	}
}

// FuzzFromSection: any section either fails or yields a configuration
// whose remote paths and names are safe to hand to a shell quoted.
func FuzzFromSection(f *testing.F) {
	f.Add(minimal)
	f.Add(minimal + "root: /srv/occ\nportLow: 2000\nportHigh: 2001\n")
	f.Fuzz(func(t *testing.T, text string) {
		var doc yaml.Node
		if yaml.Unmarshal([]byte(text), &doc) != nil || len(doc.Content) == 0 || doc.Content[0].Kind != yaml.MappingNode {
			return
		}
		c, err := FromSection(&config.Section{Key: "drivers.compute.ssh", Node: *doc.Content[0]})
		if err != nil {
			return
		}
		for _, p := range append([]string{c.Root, c.RuntimeDir}, hostRoots(c)...) {
			if !safePath.MatchString(p) {
				t.Fatalf("accepted remote path %q", p)
			}
		}
		if c.PortLow < 1024 || c.PortHigh > 65535 || c.User != "root" || c.RuntimeUser == "root" {
			t.Fatalf("accepted %+v", c)
		}
	})
}

func hostRoots(c Config) []string {
	var out []string
	for _, h := range c.Hosts {
		out = append(out, h.Root)
	}
	return out
}

func TestShellQuote(t *testing.T) {
	for in, want := range map[string]string{
		"":       "''",
		"a b":    "'a b'",
		"it's":   `'it'\''s'`,
		"$(x)`y": "'$(x)`y'",
	} {
		if got := shq(in); got != want {
			t.Errorf("shq(%q) = %s, want %s", in, got, want)
		}
	}
}
