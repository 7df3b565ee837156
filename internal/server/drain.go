package server

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/httpx"
)

// drainer implements the first phase of a graceful shutdown: once started,
// every new request (except the liveness probe) answers 503 with
// Retry-After and "Connection: close", while requests already in flight
// run to completion. Run then waits for the in-flight count to reach zero
// (or the shutdown timeout) before http.Server.Shutdown closes the
// listener; Shutdown itself waits for any request that slipped in between
// the flag and the count, so none is cut off early.
type drainer struct {
	draining atomic.Bool
	inFlight atomic.Int64
}

var errShuttingDown = errkind.WithRetryAfter(errkind.Unavailable, "The server is shutting down.", time.Second)

func (d *drainer) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if d.draining.Load() && r.URL.Path != "/healthz" {
			w.Header().Set("Connection", "close")
			httpx.WriteError(w, r, errShuttingDown)
			return
		}
		d.inFlight.Add(1)
		defer d.inFlight.Add(-1)
		next.ServeHTTP(w, r)
	})
}

func (d *drainer) start() { d.draining.Store(true) }

// wait returns when no request is in flight or ctx ends. It polls: the
// drain lasts at most the shutdown timeout and polling every 10 ms costs
// nothing next to it.
func (d *drainer) wait(ctx context.Context) {
	t := time.NewTicker(10 * time.Millisecond)
	defer t.Stop()
	for d.inFlight.Load() > 0 {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// hsts adds Strict-Transport-Security to every reply of an https public
// origin: browsers then refuse plain http to it for a year. No
// includeSubDomains: OCC does not own its parent domain's other hosts.
func hsts(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Strict-Transport-Security", "max-age=31536000")
		next.ServeHTTP(w, r)
	})
}
