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
	// Host is the Docker daemon's address (unix:///path or tcp://...);
	// empty means DOCKER_HOST, else the local socket
	// unix:///var/run/docker.sock. It must be the daemon of occ's own
	// host: the gateways listen on this host's loopback.
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
		u, err := url.Parse(c.Host)
		switch {
		case err != nil:
			errs = append(errs, fmt.Errorf("host %q does not parse: %v", c.Host, err))
		case u.Scheme != "unix" && u.Scheme != "tcp":
			errs = append(errs, fmt.Errorf("host %q must be unix:///path or tcp://host:port", c.Host))
		case u.Scheme == "tcp" && !loopbackHost(u.Hostname()):
			errs = append(errs, fmt.Errorf("host %q must be this host's daemon (a unix socket or a loopback address): the gateways listen on occ's loopback", c.Host))
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

func loopbackHost(h string) bool {
	return h == "localhost" || h == "127.0.0.1" || h == "::1"
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
