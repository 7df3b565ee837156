package server

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"time"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/kube"
	"github.com/openclaw/occ/internal/compute/local"
	"github.com/openclaw/occ/internal/compute/unconfigured"
	"github.com/openclaw/occ/internal/config"
)

// DefaultRuntimeDir is where scripts/install-runtime.sh installs Node and
// OpenClaw when OCC_RUNTIME_DIR is not set.
func DefaultRuntimeDir() string {
	home, err := os.UserHomeDir()
	if err != nil {
		return ""
	}
	return filepath.Join(home, ".cache", "occ", "runtime", "openclaw-2026.9.6-node-24.22.3")
}

// openDriver builds the configured Compute driver. The returned stop
// function ends it when the server stops: for the local driver that stops
// the Agents' gateways gracefully (they are started again, from their
// durable state, on the next start); a crash of occ leaves them running and
// the next start re-attaches to them instead of starting duplicates.
func openDriver(ctx context.Context, cfg config.Config, logger *slog.Logger) (compute.Driver, func(), error) {
	switch cfg.ComputeDriver {
	case "none":
		return unconfigured.Driver{}, func() {}, nil
	case "", "local":
		dir := cfg.OpenClawRuntime
		if dir == "" {
			dir = DefaultRuntimeDir()
		}
		rt, err := local.RuntimeFromDir(dir)
		if err != nil {
			return nil, nil, fmt.Errorf("the OpenClaw runtime is not installed in %s (%v): run scripts/install-runtime.sh "+
				"(make run does), or point --openclaw-runtime / OCC_OPENCLAW_RUNTIME at an installed runtime, "+
				"or run with --compute-driver none", dir, errors.Unwrap(err))
		}
		d, err := local.New(local.Options{DataDir: cfg.DataDir, Runtime: rt, Logger: logger})
		if err != nil {
			return nil, nil, err
		}
		if err := d.Recover(ctx); err != nil {
			d.Close()
			return nil, nil, fmt.Errorf("re-attach to running Agents: %w", err)
		}
		return d, func() {
			sctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := d.Shutdown(sctx); err != nil {
				logger.Warn("stopping Agent gateways", "error", err)
			}
		}, nil
	case "kubernetes":
		if cfg.Kubernetes == nil {
			return nil, nil, errors.New("compute driver kubernetes needs the drivers.compute.kubernetes section of the config file")
		}
		d, err := kube.NewFromKubeconfig(*cfg.Kubernetes, kube.Options{Logger: logger})
		if err != nil {
			return nil, nil, err
		}
		return d, func() {}, nil
	}
	return nil, nil, fmt.Errorf("unknown compute driver %q", cfg.ComputeDriver)
}
