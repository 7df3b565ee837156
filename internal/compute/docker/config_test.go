package docker

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"gopkg.in/yaml.v3"

	"github.com/openclaw/occ/internal/config"
)

// section parses text as the drivers.compute.docker section.
func section(t testing.TB, text string) (*config.Section, error) {
	var doc yaml.Node
	if err := yaml.Unmarshal([]byte(text), &doc); err != nil {
		return nil, err
	}
	s := &config.Section{Key: "drivers.compute.docker"}
	if len(doc.Content) > 0 {
		s.Node = *doc.Content[0]
	} else {
		s.Node = yaml.Node{Kind: yaml.MappingNode, Tag: "!!map"}
	}
	return s, nil
}

func TestFromSection(t *testing.T) {
	defaults := Config{GatewayImage: DefaultGatewayImage, OCCImage: DefaultOCCImage,
		Ports: PortRange{DefaultPortLow, DefaultPortHigh}, MemoryMiB: DefaultMemoryMiB, TmpMiB: DefaultTmpMiB}
	with := func(f func(*Config)) Config { c := defaults; f(&c); return c }
	for _, tc := range []struct {
		name, text string
		want       Config
		wantErr    string
	}{
		{"empty", "{}", defaults, ""},
		{"unix host", "host: unix:///run/docker.sock", with(func(c *Config) { c.Host = "unix:///run/docker.sock" }), ""},
		{"loopback tcp", "host: tcp://127.0.0.1:2375", Config{}, "drivers.compute.docker.host \"tcp://127.0.0.1:2375\" is a TCP address: the gateway containers share this host's network"},
		{"remote tcp", "host: tcp://10.0.0.5:2375", Config{}, "drivers.compute.docker.host \"tcp://10.0.0.5:2375\" is a TCP address"},
		{"http host", "host: http://localhost", Config{}, "must be the daemon's unix socket, unix:///path"},
		{"ssh host", "host: ssh://me@example.com", Config{}, "must be the daemon's unix socket, unix:///path"},
		{"unix without a path", "host: unix://", Config{}, "must be the daemon's unix socket, unix:///path"},
		{"ports at the limits", "ports: {low: 1024, high: 65535}", with(func(c *Config) { c.Ports = PortRange{1024, 65535} }), ""},
		{"port below", "ports: {low: 1023, high: 2000}", Config{}, "ports 1023-2000 must lie within 1024-65535"},
		{"port above", "ports: {low: 2000, high: 65536}", Config{}, "ports 2000-65536 must lie within 1024-65535"},
		{"ports reversed", "ports: {low: 3000, high: 2000}", Config{}, "low first"},
		{"memory at the limit", "memoryMiB: 512", with(func(c *Config) { c.MemoryMiB = 512 }), ""},
		{"memory below", "memoryMiB: 511", Config{}, "memoryMiB 511 must be between 512 and 1048576"},
		{"memory at the top", "memoryMiB: 1048576", with(func(c *Config) { c.MemoryMiB = 1048576 }), ""},
		{"memory above", "memoryMiB: 1048577", Config{}, "memoryMiB 1048577 must be between"},
		{"tmp at the limits", "tmpMiB: 16", with(func(c *Config) { c.TmpMiB = 16 }), ""},
		{"tmp below", "tmpMiB: 15", Config{}, "tmpMiB 15 must be between 16 and 65536"},
		{"tmp at the top", "tmpMiB: 65536", with(func(c *Config) { c.TmpMiB = 65536 }), ""},
		{"tmp above", "tmpMiB: 65537", Config{}, "tmpMiB 65537 must be between"},
		{"image with a space", "gatewayImage: 'a b'", Config{}, "drivers.compute.docker.gatewayImage \"a b\" is not an image reference"},
		{"unknown key", "memory: 5", Config{}, `unknown key "drivers.compute.docker.memory"`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s, err := section(t, tc.text)
			if err != nil {
				t.Fatal(err)
			}
			got, err := FromSection(s)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("FromSection(%q) = %v, want an error containing %q", tc.text, err, tc.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if d := cmp.Diff(tc.want, got); d != "" {
				t.Errorf("FromSection(%q) mismatch (-want +got):\n%s", tc.text, d)
			}
		})
	}
}

// FuzzFromSection: any section text either fails with a message or yields
// a Config that validates and that New accepts.
func FuzzFromSection(f *testing.F) {
	for _, seed := range []string{"{}", "host: tcp://[::1]:1\nports: {low: 1024, high: 1024}\n", "memoryMiB: -1", "ports: [1, 2]"} {
		f.Add(seed)
	}
	f.Fuzz(func(t *testing.T, text string) {
		s, err := section(t, text)
		if err != nil {
			return
		}
		c, err := FromSection(s)
		if err != nil {
			if err.Error() == "" {
				t.Errorf("FromSection(%q) failed with an empty message", text)
			}
			return
		}
		if err := c.Validate(); err != nil {
			t.Errorf("FromSection(%q) accepted %+v, which does not validate: %v", text, c, err)
		}
	})
}

// TestNewChecksTheResolvedDaemon: a daemon address that comes from
// DOCKER_HOST (no host configured) passes the same check as a configured
// one: a TCP address is refused, a unix socket accepted (New makes no call
// to the daemon).
func TestNewChecksTheResolvedDaemon(t *testing.T) {
	for _, tc := range []struct{ env, wantErr string }{
		{"tcp://127.0.0.1:2375", `docker: the daemon address (host, else DOCKER_HOST) "tcp://127.0.0.1:2375" is a TCP address`},
		{"tcp://10.0.0.5:2376", `"tcp://10.0.0.5:2376" is a TCP address`},
		{"unix:///run/user/1000/docker.sock", ""},
	} {
		t.Run(tc.env, func(t *testing.T) {
			t.Setenv("DOCKER_HOST", tc.env)
			d, err := New(Options{DataDir: t.TempDir()})
			if tc.wantErr == "" {
				if err != nil {
					t.Fatalf("New with DOCKER_HOST=%s: %v", tc.env, err)
				}
				d.c.Close()
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Errorf("New with DOCKER_HOST=%s = %v, want an error containing %q", tc.env, err, tc.wantErr)
			}
		})
	}
}
