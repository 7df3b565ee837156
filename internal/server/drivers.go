package server

import (
	"context"
	"fmt"
	"log/slog"
	"time"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/registry"
	"github.com/openclaw/occ/internal/config"
)

// driverShutdownTimeout bounds a driver's Shutdown when the server stops.
const driverShutdownTimeout = 30 * time.Second

// openDriver builds the configured Compute driver from the registry and
// runs its optional lifecycle hooks (package compute): a Recoverer
// re-attaches to what an earlier process left running before anything
// uses it. The returned stop function ends the driver when the server
// stops: Shutdown (with a deadline; the local driver stops the Agents'
// gateways gracefully, and they are started again from their durable
// state on the next start) or else Close. A crash of occ runs neither, and
// the next start's Recover re-attaches instead of starting duplicates.
func openDriver(ctx context.Context, cfg config.Config, logger *slog.Logger) (compute.Driver, func(), error) {
	d, err := registry.Open(ctx, cfg, logger)
	if err != nil {
		return nil, nil, err
	}
	stop, err := startDriver(ctx, d, logger)
	if err != nil {
		return nil, nil, err
	}
	return d, stop, nil
}

// startDriver runs the hooks d has before use and returns the function
// that ends it; see openDriver.
func startDriver(ctx context.Context, d compute.Driver, logger *slog.Logger) (func(), error) {
	if r, ok := d.(compute.Recoverer); ok {
		if err := r.Recover(ctx); err != nil {
			if c, ok := d.(compute.Closer); ok {
				c.Close()
			}
			return nil, fmt.Errorf("re-attach to running Agents: %w", err)
		}
	}
	return func() { stopDriver(d, logger) }, nil
}

func stopDriver(d compute.Driver, logger *slog.Logger) {
	switch h := d.(type) {
	case compute.Shutdowner:
		ctx, cancel := context.WithTimeout(context.Background(), driverShutdownTimeout)
		defer cancel()
		if err := h.Shutdown(ctx); err != nil {
			logger.Warn("stopping the Compute driver", "driver", d.ID(), "error", err)
		}
	case compute.Closer:
		h.Close()
	}
}
