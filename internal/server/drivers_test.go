package server

import (
	"context"
	"errors"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/registry"
)

// calls records the lifecycle hooks a test driver saw, in order.
type calls []string

// closing is a driver with only the Closer hook.
type closing struct {
	compute.Driver
	log *calls
}

func (d closing) Close() { *d.log = append(*d.log, "close") }

// recovering has every hook; Recover fails with err when set.
type recovering struct {
	closing
	err error
}

func (d recovering) Recover(context.Context) error {
	*d.log = append(*d.log, "recover")
	return d.err
}

func (d recovering) Shutdown(ctx context.Context) error {
	// The server bounds Shutdown itself.
	if _, ok := ctx.Deadline(); !ok {
		*d.log = append(*d.log, "shutdown without a deadline")
		return nil
	}
	*d.log = append(*d.log, "shutdown")
	return nil
}

// TestDriverLifecycle: the server finds a driver's optional hooks by type
// assertion and calls each at its moment.
func TestDriverLifecycle(t *testing.T) {
	base := registry.Unconfigured()
	tests := []struct {
		name      string
		driver    func(*calls) compute.Driver
		wantErr   string
		wantStart []string // hooks called by startDriver
		wantStop  []string // hooks called by the stop function
	}{
		{
			name:   "no hooks",
			driver: func(*calls) compute.Driver { return base },
		},
		{
			name:     "closer only is closed",
			driver:   func(c *calls) compute.Driver { return closing{base, c} },
			wantStop: []string{"close"},
		},
		{
			name:      "recovered first, shut down (not closed) at the end",
			driver:    func(c *calls) compute.Driver { return recovering{closing{base, c}, nil} },
			wantStart: []string{"recover"},
			wantStop:  []string{"shutdown"},
		},
		{
			name: "failed recovery closes and stops the start",
			driver: func(c *calls) compute.Driver {
				return recovering{closing{base, c}, errors.New("agents dir unreadable")}
			},
			wantErr:   "re-attach to running Agents: agents dir unreadable",
			wantStart: []string{"recover", "close"},
		},
	}
	logger := slog.New(slog.NewTextHandler(io.Discard, nil))
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var log calls
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			stop, err := startDriver(ctx, tt.driver(&log), logger)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("startDriver error = %v, want %q", err, tt.wantErr)
				}
			} else if err != nil {
				t.Fatalf("startDriver: %v", err)
			}
			if diff := cmp.Diff(tt.wantStart, []string(log)); diff != "" {
				t.Errorf("hooks at start (-want +got):\n%s", diff)
			}
			if err != nil {
				return
			}
			log = nil
			stop()
			if diff := cmp.Diff(tt.wantStop, []string(log)); diff != "" {
				t.Errorf("hooks at stop (-want +got):\n%s", diff)
			}
		})
	}
}
