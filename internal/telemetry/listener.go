package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"time"
)

// Listener is a listener of its own beside the API's: the metrics
// listener (/metrics and /debug/pprof/), or occ worker's probes.
type Listener struct {
	ln  net.Listener
	srv *http.Server
	err chan error
}

// Listen starts serving m's handler on addr. A listen error is returned at
// once (a configured metrics address that cannot be bound stops the
// process at start, rather than leaving it unmonitored).
func Listen(addr string, m *Metrics, logger *slog.Logger) (*Listener, error) {
	return Serve("metrics", addr, m.Handler(), logger)
}

// Serve starts serving h on addr, as Listen does; name ("metrics",
// "worker health") starts its error and its log line.
func Serve(name, addr string, h http.Handler, logger *slog.Logger) (*Listener, error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("%s listen on %s: %w", name, addr, err)
	}
	l := &Listener{ln: ln, err: make(chan error, 1), srv: &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 10 * time.Second,
		// No WriteTimeout: /debug/pprof/profile and /trace stream for as
		// many seconds as asked.
		IdleTimeout:    120 * time.Second,
		MaxHeaderBytes: 16 << 10,
		ErrorLog:       slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
	}}
	go func() { l.err <- l.srv.Serve(ln) }()
	logger.Info(name+" listening", "address", ln.Addr().String())
	return l, nil
}

// Addr is the bound address (useful with port 0).
func (l *Listener) Addr() string { return l.ln.Addr().String() }

// Close shuts the listener down within ctx, then closes what is left.
func (l *Listener) Close(ctx context.Context) error {
	err := l.srv.Shutdown(ctx)
	if err != nil {
		_ = l.srv.Close()
	}
	if serr := <-l.err; serr != nil && !errors.Is(serr, http.ErrServerClosed) {
		return serr
	}
	return err
}
