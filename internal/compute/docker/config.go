package docker

import (
	"errors"
	"fmt"
	"net/url"
	"strings"

	"github.com/openclaw/occ/internal/config"
)

// DriverName selects this driver (drivers.compute.driver) and names its
// section, drivers.compute.docker.
const DriverName = "docker"

// Defaults of Config.
const (
	DefaultGatewayImage = "openclaw/occ-gateway:local"
	DefaultOCCImage     = "openclaw/occ:local"
	DefaultPortLow      = 19000
	DefaultPortHigh     = 19199
	// The gateway takes about 1 GB resident; native setup about 300 MB.
	DefaultMemoryMiB = 2048
	DefaultTmpMiB    = 256
)

// Config is the drivers.compute.docker section of the config file. The
// zero value of every field means its default (WithDefaults).
type Config struct {
	// Host is the Docker daemon's unix socket (unix:///path); empty
	// means DOCKER_HOST, else unix:///var/run/docker.sock. It must be the
	// daemon of occ's own host (the gateways listen on this host's
	// loopback), reached through its socket: see checkDaemonHost.
	Host string `yaml:"host" json:"host,omitempty"`
	// GatewayImage holds Node and OpenClaw (/usr/local/bin/node,
	// /app/openclaw.mjs) and the user node (1000); scripts/images.sh
	// builds it.
	GatewayImage string `yaml:"gatewayImage" json:"gatewayImage"`
	// OCCImage holds occ at /usr/local/bin/occ; it is copied into a
	// volume for the setup runner and the verifier.
	OCCImage string `yaml:"occImage" json:"occImage"`
	// Ports is the inclusive range of loopback ports handed to Agents.
	Ports PortRange `yaml:"ports" json:"ports"`
	// MemoryMiB limits each gateway and setup container's memory.
	MemoryMiB int `yaml:"memoryMiB" json:"memoryMiB"`
	// TmpMiB bounds each gateway container's tmpfs at /tmp.
	TmpMiB int `yaml:"tmpMiB" json:"tmpMiB"`
}

// PortRange is an inclusive port range.
type PortRange struct {
	Low  int `yaml:"low" json:"low"`
	High int `yaml:"high" json:"high"`
}

// WithDefaults fills the zero fields.
func (c Config) WithDefaults() Config {
	if c.GatewayImage == "" {
		c.GatewayImage = DefaultGatewayImage
	}
	if c.OCCImage == "" {
		c.OCCImage = DefaultOCCImage
	}
	if c.Ports == (PortRange{}) {
		c.Ports = PortRange{DefaultPortLow, DefaultPortHigh}
	}
	if c.MemoryMiB == 0 {
		c.MemoryMiB = DefaultMemoryMiB
	}
	if c.TmpMiB == 0 {
		c.TmpMiB = DefaultTmpMiB
	}
	return c
}

// Validate checks a defaulted Config; messages name keys relative to the
// section, joined.
func (c Config) Validate() error {
	var errs []error
	if c.Host != "" {
		if err := checkDaemonHost(c.Host); err != nil {
			errs = append(errs, fmt.Errorf("host %w", err))
		}
	}
	for _, img := range []struct{ key, v string }{{"gatewayImage", c.GatewayImage}, {"occImage", c.OCCImage}} {
		if strings.ContainsAny(img.v, " \t\n") || img.v == "" {
			errs = append(errs, fmt.Errorf("%s %q is not an image reference", img.key, img.v))
		}
	}
	if lo, hi := c.Ports.Low, c.Ports.High; lo < 1024 || hi > 65535 || lo > hi {
		errs = append(errs, fmt.Errorf("ports %d-%d must lie within 1024-65535, low first", lo, hi))
	}
	if c.MemoryMiB < 512 || c.MemoryMiB > 1<<20 {
		errs = append(errs, fmt.Errorf("memoryMiB %d must be between 512 and 1048576", c.MemoryMiB))
	}
	if c.TmpMiB < 16 || c.TmpMiB > 1<<16 {
		errs = append(errs, fmt.Errorf("tmpMiB %d must be between 16 and 65536", c.TmpMiB))
	}
	return errors.Join(errs...)
}

// checkDaemonHost accepts only a unix socket: the daemon must be this
// host's (the gateways listen on its loopback), and not a TCP address,
// loopback included: the gateway containers share the host's network, so
// any of them could reach a daemon on a loopback port and, through it,
// root on the host. New applies it to the address the client resolved,
// which DOCKER_HOST may have set.
func checkDaemonHost(h string) error {
	u, err := url.Parse(h)
	switch {
	case err != nil:
		return fmt.Errorf("%q does not parse: %v", h, err)
	case u.Scheme == "tcp":
		return fmt.Errorf("%q is a TCP address: the gateway containers share this host's network and could reach the daemon there; use its unix socket (unix:///var/run/docker.sock)", h)
	case u.Scheme != "unix" || u.Path == "":
		return fmt.Errorf("%q must be the daemon's unix socket, unix:///path", h)
	}
	return nil
}

// FromSection decodes the drivers.compute.docker section strictly,
// applies the defaults and validates it; errors name the full key.
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
