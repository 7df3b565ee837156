package ssh

import (
	"errors"
	"fmt"
	"net"
	"path"
	"regexp"
	"strconv"
	"time"

	"github.com/openclaw/occ/internal/config"
)

// DriverName selects this driver (drivers.compute.driver) and names its
// section, drivers.compute.ssh.
const DriverName = "ssh"

// Defaults of Config.
const (
	DefaultUser           = "root"
	DefaultRuntimeUser    = "occ-agent"
	DefaultRoot           = "/var/lib/occ"
	DefaultPortLow        = 18800
	DefaultPortHigh       = 18999
	DefaultMaxSessions    = 8
	DefaultCapacity       = 10
	DefaultConnectTimeout = 10 * time.Second
	DefaultCommandTimeout = 2 * time.Minute
	DefaultReadyTimeout   = 90 * time.Second
	DefaultStopGrace      = 10 * time.Second
)

// Config is the drivers.compute.ssh section. Zero optional fields take
// their defaults in WithDefaults.
type Config struct {
	// KnownHostsFile pins every host's key (OpenSSH known_hosts format).
	// Required: a host whose key is missing or different is refused. Read
	// again at the next dial after it changes (knownHosts).
	KnownHostsFile string `yaml:"knownHostsFile" json:"knownHostsFile"`
	// IdentityFile is the private key occ logs in with (unencrypted,
	// OpenSSH or PEM format). Required.
	IdentityFile string `yaml:"identityFile" json:"identityFile"`
	// User is the login user on every host; it must be root (uid 0),
	// which runs commands as RuntimeUser with runuser. Default root.
	User string `yaml:"user" json:"user,omitempty"`
	// RuntimeUser is the non-root account that owns the Agent
	// directories and runs the gateways and `occ workspace-setup`.
	// Default occ-agent. It must exist on every host.
	RuntimeUser string `yaml:"runtimeUser" json:"runtimeUser,omitempty"`
	// Root is the driver's directory on each host (default /var/lib/occ).
	Root string `yaml:"root" json:"root,omitempty"`
	// RuntimeDir is where the OpenClaw runtime is installed on every host,
	// in the layout scripts/install-runtime.sh makes (node/... and
	// app/node_modules/openclaw/openclaw.mjs), readable by RuntimeUser.
	// Required.
	RuntimeDir string `yaml:"runtimeDir" json:"runtimeDir"`
	// PortLow and PortHigh bound the loopback ports handed to gateways
	// on each host (inclusive, at least 1024); default 18800-18999.
	PortLow  int `yaml:"portLow" json:"portLow,omitempty"`
	PortHigh int `yaml:"portHigh" json:"portHigh,omitempty"`
	// MaxSessions caps the concurrent command sessions occ opens to one
	// host (default 8); more wait for a free slot or their deadline.
	// Channels to gateways (file operations, readiness probes) have a
	// budget of their own (maxTunnels), which sshd's MaxSessions does not
	// count.
	MaxSessions int `yaml:"maxSessions" json:"maxSessions,omitempty"`
	// ConnectTimeout bounds dialing and the SSH handshake (default 10s);
	// CommandTimeout bounds one remote command when the caller's deadline
	// is later (default 2m), except `occ workspace-setup`, which has
	// setupRunnerTimeout (60 s) whatever this says; ReadyTimeout bounds one gateway start to
	// readiness (default 90s); StopGrace is SIGTERM to SIGKILL (10s).
	ConnectTimeout time.Duration `yaml:"connectTimeout" json:"connectTimeout,omitempty"`
	CommandTimeout time.Duration `yaml:"commandTimeout" json:"commandTimeout,omitempty"`
	ReadyTimeout   time.Duration `yaml:"readyTimeout" json:"readyTimeout,omitempty"`
	StopGrace      time.Duration `yaml:"stopGrace" json:"stopGrace,omitempty"`
	// Supervisor is auto (default: systemd when the host runs it, else
	// occ's own supervisor), systemd or occ.
	Supervisor string `yaml:"supervisor" json:"supervisor,omitempty"`
	// Hosts are the machines Agents are placed on. At least one.
	Hosts []Host `yaml:"hosts" json:"hosts"`
}

// Host is one machine of Config.Hosts.
type Host struct {
	// Name identifies the host in placement and logs; unique.
	Name string `yaml:"name" json:"name"`
	// Address is host:port of its sshd.
	Address string `yaml:"address" json:"address"`
	// Capacity is how many Agents it takes (default 10).
	Capacity int `yaml:"capacity" json:"capacity,omitempty"`
	// Root overrides Config.Root for this host.
	Root string `yaml:"root" json:"root,omitempty"`
	// Agents are Agent ids placed on this host explicitly (before
	// capacity is considered); an id may appear under one host only.
	Agents []string `yaml:"agents" json:"agents,omitempty"`
}

// Supervisor modes.
const (
	SupervisorAuto    = "auto"
	SupervisorSystemd = "systemd"
	SupervisorOCC     = "occ"
)

// WithDefaults fills zero optional fields.
func (c Config) WithDefaults() Config {
	def := func(s *string, v string) {
		if *s == "" {
			*s = v
		}
	}
	def(&c.User, DefaultUser)
	def(&c.RuntimeUser, DefaultRuntimeUser)
	def(&c.Root, DefaultRoot)
	def(&c.Supervisor, SupervisorAuto)
	if c.PortLow == 0 && c.PortHigh == 0 {
		c.PortLow, c.PortHigh = DefaultPortLow, DefaultPortHigh
	}
	if c.MaxSessions == 0 {
		c.MaxSessions = DefaultMaxSessions
	}
	durs := []struct {
		d *time.Duration
		v time.Duration
	}{{&c.ConnectTimeout, DefaultConnectTimeout}, {&c.CommandTimeout, DefaultCommandTimeout},
		{&c.ReadyTimeout, DefaultReadyTimeout}, {&c.StopGrace, DefaultStopGrace}}
	for _, x := range durs {
		if *x.d == 0 {
			*x.d = x.v
		}
	}
	hosts := make([]Host, len(c.Hosts))
	for i, h := range c.Hosts {
		if h.Capacity == 0 {
			h.Capacity = DefaultCapacity
		}
		if h.Root == "" {
			h.Root = c.Root
		}
		hosts[i] = h
	}
	c.Hosts = hosts
	return c
}

var (
	// safePath is what a remote path may hold: it is passed to a shell
	// (quoted) and into unit files, so only plain characters.
	safePath = regexp.MustCompile(`^/[A-Za-z0-9_./@+-]*$`)
	userRE   = regexp.MustCompile(`^[a-z_][a-z0-9_-]{0,31}$`)
	nameRE   = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9_.-]{0,62}$`)
)

// Validate reports every problem, one joined error each, naming keys
// relative to the section.
func (c Config) Validate() error {
	var errs []error
	bad := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }
	for _, f := range []struct{ key, v string }{{"knownHostsFile", c.KnownHostsFile}, {"identityFile", c.IdentityFile}} {
		if f.v == "" {
			bad("%s is required", f.key)
		} else if !path.IsAbs(f.v) {
			bad("%s must be an absolute path", f.key)
		}
	}
	if c.User != "root" {
		bad("user must be root: the driver runs commands as runtimeUser with runuser")
	}
	if !userRE.MatchString(c.RuntimeUser) || c.RuntimeUser == "root" {
		bad("runtimeUser must be a non-root user name")
	}
	checkRemote := func(key, p string, required bool) {
		switch {
		case p == "" && required:
			bad("%s is required", key)
		case p == "":
		case !safePath.MatchString(p) || path.Clean(p) != p || p == "/":
			bad("%s must be a clean absolute path of letters, digits and _./@+- other than /", key)
		}
	}
	checkRemote("root", c.Root, true)
	checkRemote("runtimeDir", c.RuntimeDir, true)
	if c.PortLow < 1024 || c.PortHigh > 65535 || c.PortLow > c.PortHigh {
		bad("portLow and portHigh must satisfy 1024 <= portLow <= portHigh <= 65535")
	}
	if c.MaxSessions < 1 || c.MaxSessions > 64 {
		bad("maxSessions must be between 1 and 64")
	}
	for _, d := range []struct {
		key string
		v   time.Duration
	}{{"connectTimeout", c.ConnectTimeout}, {"commandTimeout", c.CommandTimeout}, {"readyTimeout", c.ReadyTimeout}, {"stopGrace", c.StopGrace}} {
		if d.v < 0 || d.v > time.Hour {
			bad("%s must be between 0 and 1h", d.key)
		}
	}
	switch c.Supervisor {
	case SupervisorAuto, SupervisorSystemd, SupervisorOCC, "":
	default:
		bad("supervisor must be auto, systemd or occ")
	}
	if len(c.Hosts) == 0 {
		bad("hosts must list at least one host")
	}
	names, pinned := map[string]bool{}, map[string]string{}
	for i, h := range c.Hosts {
		at := "hosts[" + strconv.Itoa(i) + "]"
		if !nameRE.MatchString(h.Name) {
			bad("%s.name must be 1-63 letters, digits and _.- starting with a letter or digit", at)
		} else if names[h.Name] {
			bad("%s.name %q is used twice", at, h.Name)
		}
		names[h.Name] = true
		if hp, port, err := net.SplitHostPort(h.Address); err != nil || hp == "" || port == "" {
			bad("%s.address must be host:port", at)
		}
		if h.Capacity < 0 {
			bad("%s.capacity must not be negative", at)
		}
		checkRemote(at+".root", h.Root, false)
		for _, a := range h.Agents {
			if other, ok := pinned[a]; ok {
				bad("%s.agents: agent %s is already placed on host %s", at, a, other)
			}
			pinned[a] = h.Name
		}
	}
	return errors.Join(errs...)
}

// FromSection decodes drivers.compute.ssh strictly, applies the defaults
// and validates it; errors name full keys.
func FromSection(s *config.Section) (Config, error) {
	var c Config
	if err := s.Decode(&c); err != nil {
		return Config{}, err
	}
	c = c.WithDefaults()
	if err := s.Invalid(c.Validate()); err != nil {
		return Config{}, err
	}
	return c, nil
}
