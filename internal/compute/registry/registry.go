// Package registry is the table of Compute drivers: for each driver name,
// its configuration section (how it is decoded and validated), its
// constructor and its documentation page. Configuration (through
// ConfigTable), the server (through Open) and the docs (a test checks
// docs/configuration.md against Entries) all read this one table; only
// one driver's own tools (the routing commands, the SSH token reader)
// name a driver besides.
//
// Adding a driver means a new package under internal/compute, one entry
// in entries below and its docs page. Lifecycle hooks only some drivers
// need (re-attaching after a restart, shutdown, close) are the optional
// interfaces of package compute, which the server discovers on the opened
// driver.
//
// The table is explicit, not filled by init functions of the driver
// packages: one file says which drivers a binary has.
package registry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/docker"
	"github.com/openclaw/occ/internal/compute/kube"
	"github.com/openclaw/occ/internal/compute/kube/kubecfg"
	"github.com/openclaw/occ/internal/compute/local"
	computessh "github.com/openclaw/occ/internal/compute/ssh"
	"github.com/openclaw/occ/internal/compute/unconfigured"
	"github.com/openclaw/occ/internal/config"
)

// Deps are what Open gives a driver's constructor besides its section.
type Deps struct {
	// Config is the validated process configuration (data dir, runtime
	// directory and the like).
	Config config.Config
	Logger *slog.Logger
}

// Entry is one driver of the table.
type Entry struct {
	// Name selects the driver (--compute-driver, drivers.compute.driver)
	// and names its section, drivers.compute.<Name>.
	Name string
	// Summary says in a few words what the driver does, for --help.
	Summary string
	// Doc is the driver's page under docs/, "" when the driver has none
	// (docs/configuration.md describes it).
	Doc string
	// SectionRequired says the driver cannot run without its section.
	SectionRequired bool
	// Section decodes and validates the driver's section, s; it is only
	// called with a section that is present. Its errors name keys by their
	// full dotted path (config.Section's Decode and Invalid do). What it
	// returns is Open's settings. Nil means the driver takes no section.
	Section func(s *config.Section) (any, error)
	// Open builds the driver. settings is what Section returned (nil when
	// the driver takes no section or it is absent). Open makes no call to
	// a remote backend: a backend that is down shows up as pending
	// deployments, not as a failed start.
	Open func(ctx context.Context, d Deps, settings any) (compute.Driver, error)
}

// entries is the table; the first entry is the default driver. The order
// is the order --help and messages list the drivers in.
var entries = []Entry{
	{
		Name:    "local",
		Summary: "a gateway process per Agent on this host",
		Doc:     "compute-local.md",
		Open:    openLocal,
	},
	{
		Name:            kubecfg.DriverName,
		Summary:         "configured in the file's drivers.compute.kubernetes",
		Doc:             "compute-kubernetes.md",
		SectionRequired: true,
		Section: func(s *config.Section) (any, error) {
			return kubecfg.FromSection(s)
		},
		Open: func(_ context.Context, d Deps, settings any) (compute.Driver, error) {
			drv, err := kube.NewFromKubeconfig(settings.(kubecfg.Config), kube.Options{Logger: d.Logger})
			if err != nil {
				return nil, err
			}
			return drv, nil
		},
	},
	{
		Name:    docker.DriverName,
		Summary: "a gateway container per Agent on this host's Docker engine, configured in drivers.compute.docker",
		Doc:     "compute-docker.md",
		Section: func(s *config.Section) (any, error) {
			return docker.FromSection(s)
		},
		Open: func(_ context.Context, d Deps, settings any) (compute.Driver, error) {
			// The section is optional: without one, the defaults (the
			// engine DOCKER_HOST or the local socket names).
			cfg, _ := settings.(docker.Config)
			drv, err := docker.New(docker.Options{Config: cfg, DataDir: d.Config.DataDir, Logger: d.Logger})
			if err != nil {
				return nil, err
			}
			return drv, nil
		},
	},
	{
		Name:            computessh.DriverName,
		Summary:         "a gateway per Agent on hosts reached over SSH, configured in drivers.compute.ssh",
		Doc:             "compute-ssh.md",
		SectionRequired: true,
		Section: func(s *config.Section) (any, error) {
			return computessh.FromSection(s)
		},
		Open: func(_ context.Context, d Deps, settings any) (compute.Driver, error) {
			drv, err := computessh.New(computessh.Options{Config: settings.(computessh.Config), Logger: d.Logger})
			if err != nil {
				return nil, err
			}
			return drv, nil
		},
	},
	{
		Name:    noneName,
		Summary: "deployments fail with " + unconfigured.Code,
		Open: func(context.Context, Deps, any) (compute.Driver, error) {
			return Unconfigured(), nil
		},
	},
}

// Entries returns the table, default first.
func Entries() []Entry {
	return append([]Entry(nil), entries...)
}

// Lookup returns the entry called name; "" names the default driver.
func Lookup(name string) (Entry, bool) {
	if name == "" {
		return entries[0], true
	}
	for _, e := range entries {
		if e.Name == name {
			return e, true
		}
	}
	return Entry{}, false
}

// ConfigTable is the table as configuration sees it, for
// config.RegisterFlags, config.Load and Config.Validate.
func ConfigTable() config.ComputeDrivers {
	out := make(config.ComputeDrivers, len(entries))
	for i, e := range entries {
		out[i] = config.ComputeDriver{Name: e.Name, Summary: e.Summary}
		if e.Section != nil {
			out[i].Check = func(s *config.Section) error {
				_, err := e.settings(s)
				return err
			}
		}
	}
	return out
}

// settings decodes the entry's section; s is nil when the file has none.
func (e Entry) settings(s *config.Section) (any, error) {
	if s == nil {
		if e.SectionRequired {
			msg := fmt.Sprintf("compute driver %s needs the drivers.compute.%s section in the config file", e.Name, e.Name)
			if e.Doc != "" {
				msg += " (see docs/" + e.Doc + ")"
			}
			return nil, errors.New(msg)
		}
		return nil, nil
	}
	if e.Section == nil {
		return nil, fmt.Errorf("%s is set but compute driver %s takes no section", s.Key, e.Name)
	}
	return e.Section(s)
}

// Open builds the driver cfg selects from its section. cfg should have
// been validated with ConfigTable (config.Load does); Open checks the
// selection and decodes the section again anyway, so that a Config built
// in code cannot start a driver with an unchecked section.
//
// The driver may implement compute's optional lifecycle interfaces; the
// caller owns calling them (Recover before use, Shutdown or Close when it
// stops).
func Open(ctx context.Context, cfg config.Config, logger *slog.Logger) (compute.Driver, error) {
	e, ok := Lookup(cfg.ComputeDriver)
	if !ok {
		return nil, fmt.Errorf("compute driver %q is not one of %s", cfg.ComputeDriver, names())
	}
	for name, s := range cfg.ComputeSections {
		if name != e.Name && s != nil {
			return nil, fmt.Errorf("%s is set but the compute driver is %q", s.Key, e.Name)
		}
	}
	settings, err := e.settings(cfg.ComputeSections[e.Name])
	if err != nil {
		return nil, err
	}
	if logger == nil {
		logger = slog.Default()
	}
	return e.Open(ctx, Deps{Config: cfg, Logger: logger}, settings)
}

// Unconfigured is the driver of the "none" entry, which also stands in
// when no driver is given at all (server.Options without one): Namespaces
// become ready and every deployment fails with COMPUTE_NOT_CONFIGURED.
func Unconfigured() compute.Driver { return unconfigured.Driver{} }

// names lists the drivers for messages: "local, kubernetes, none".
func names() string {
	out := make([]string, len(entries))
	for i, e := range entries {
		out[i] = e.Name
	}
	return strings.Join(out, ", ")
}

// openLocal runs the local driver from the installed runtime; without one
// it says how to install it.
func openLocal(_ context.Context, d Deps, _ any) (compute.Driver, error) {
	dir := d.Config.OpenClawRuntime
	if dir == "" {
		dir = local.DefaultRuntimeDir()
	}
	rt, err := local.RuntimeFromDir(dir)
	if err != nil {
		return nil, fmt.Errorf("the OpenClaw runtime is not installed in %s (%v): run scripts/install-runtime.sh "+
			"(make run does), or point --openclaw-runtime / OCC_OPENCLAW_RUNTIME at an installed runtime, "+
			"or run with --compute-driver %s", dir, errors.Unwrap(err), noneName)
	}
	drv, err := local.New(local.Options{DataDir: d.Config.DataDir, Runtime: rt, Logger: d.Logger})
	if err != nil {
		return nil, err // not a nil *local.Driver in a non-nil interface
	}
	return drv, nil
}

// noneName is the entry that runs no Agents, which the local driver's
// error suggests.
const noneName = "none"
