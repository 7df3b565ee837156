// Package server assembles OCC's HTTP server: it opens the store, wraps it
// in the authorization layer, bootstraps the installation, builds the route
// table behind the admission middleware, and serves until its context ends,
// then shuts down gracefully.
package server

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/netip"
	"os"
	"runtime/debug"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/api"
	"github.com/openclaw/occ/internal/audit"
	"github.com/openclaw/occ/internal/authn"
	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/registry"
	"github.com/openclaw/occ/internal/config"
	"github.com/openclaw/occ/internal/console"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/httpx"
	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/telemetry"
	"github.com/openclaw/occ/internal/tlscert"
	"github.com/openclaw/occ/internal/worker"
)

// Options are the parts a Server is built from. Tests fill them directly;
// Run fills them from the configuration.
type Options struct {
	// Store is the unwrapped store; the server wraps it in authz itself and
	// hands only the wrapped form on.
	Store store.Store
	// Ping checks the database for /readyz; nil means always ready.
	Ping           func(context.Context) error
	PublicOrigin   string
	TrustedProxies []netip.Prefix
	SessionTTL     time.Duration
	// SessionIdleTimeout ends sessions unused this long (0: authn's
	// default).
	SessionIdleTimeout time.Duration
	// Throttle holds the sign-in counters; nil means one with the default
	// policies (authn.DefaultAccountPolicy, authn.DefaultAddressPolicy).
	Throttle *authn.Throttle
	Logger   *slog.Logger
	Now      func() time.Time
	// Driver is the Compute driver; nil means none is configured (the
	// unconfigured driver: deployments fail with COMPUTE_NOT_CONFIGURED).
	Driver compute.Driver
	// Worker tunes the deployment worker.
	Worker worker.Options
	// Files reaches running Agents' gateways for workspace file routes;
	// nil means those routes answer 503.
	Files agentgw.FileClient
	// GatewayKeyFile and GatewayCAFile serve routed endpoints.
	GatewayKeyFile string
	GatewayCAFile  string
	// FileTimeout bounds one workspace file operation (default 30 s).
	FileTimeout time.Duration
	// Metrics, when set, records HTTP requests, audit write failures and
	// (unless Worker.Observer is set) the worker's events. The gateway
	// client in Files reports to it only if it was built with it.
	Metrics *telemetry.Metrics
	// TracerProvider, when set, gives every request a server span; nil
	// means no request spans (domain spans follow the global provider).
	TracerProvider trace.TracerProvider
	// MaxRequestsInFlight bounds the API reads (GET, HEAD) worked on at
	// once, the others waiting their turn in arrival order for up to
	// DefaultRequestQueueWait (inflight.go); 0 means no bound. Run sets it
	// from --max-requests-in-flight or DefaultMaxRequestsInFlight.
	MaxRequestsInFlight int
}

// Server is an assembled OCC API.
type Server struct {
	opts    Options
	Worker  *worker.Worker
	Service *occ.Service
	Audit   *audit.Recorder
	Routes  []Route
	handler http.Handler
	drain   *drainer
}

// New builds the server's handler and domain service.
func New(o Options) *Server {
	if o.Logger == nil {
		o.Logger = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	if o.Now == nil {
		o.Now = time.Now
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = 12 * time.Hour
	}
	https := strings.HasPrefix(o.PublicOrigin, "https://")
	if o.Driver == nil {
		o.Driver = registry.Unconfigured()
	}
	if o.Worker.Logger == nil {
		o.Worker.Logger = o.Logger
	}
	if o.Worker.Now == nil {
		o.Worker.Now = o.Now
	}
	if o.Worker.Observer == nil && o.Metrics != nil {
		o.Worker.Observer = o.Metrics
		o.Metrics.ExpectDriver(o.Driver.ID())
	}

	var rec *audit.Recorder
	az := authz.Wrap(o.Store, func(ctx context.Context, s *authz.Subject, a store.Action, res authz.Resource, d authz.Decision) {
		rec.Denial(ctx, s, a, res, d)
	})
	rec = audit.NewRecorder(az, o.Now, httpx.RequestIDFrom, o.Logger)
	if o.Metrics != nil {
		rec.ObserveFailures(o.Metrics)
	}
	var files occ.FileAccess
	if o.Files != nil {
		files = occ.FileAccess{Client: o.Files, Driver: o.Driver, Timeout: o.FileTimeout,
			Routed: agentgw.RoutedAuth{KeyFile: o.GatewayKeyFile, CAFile: o.GatewayCAFile}}
	}
	svc := occ.New(occ.Options{Store: az, Audit: rec, Now: o.Now, DriverID: o.Driver.ID(), Files: files})
	sessions := authn.NewSessionsWith(az, authn.SessionOptions{
		Now: o.Now, TTL: o.SessionTTL, IdleTimeout: o.SessionIdleTimeout, PublicOriginHTTPS: https, Throttle: o.Throttle,
		OnThrottle: func(ctx context.Context, ev authn.ThrottleEvent) { auditThrottle(ctx, rec, o.Logger, ev) },
	})
	handlers := api.New(svc, sessions)
	routes := Routes(handlers, &Health{Ping: o.Ping})

	mux := httpx.NewMux()
	probes := map[string]http.Handler{}
	var uncounted []string
	for _, rt := range routes {
		if rt.ETag {
			// The workspace file routes wait on an Agent's gateway, not
			// on this process: they take no turn (inflight.go).
			uncounted = append(uncounted, rt.Method+" "+rt.Path)
		}
		h := rt.Handler
		switch rt.Auth {
		case Probe:
			pm := httpx.NewMux()
			pm.Handle(rt.Method+" "+rt.Path, h)
			probes[rt.Path] = telemetry.Route(pm)
			continue
		case Authenticated:
			h = requireSubject(h)
		}
		mux.Handle(rt.Method+" "+rt.Path, h)
	}
	// The web Console's pages are not API routes (they are not in Routes,
	// docs/api.md or the OpenAPI document; docs/console.md lists them): they
	// sit behind the same admission, and their script reads and writes only
	// through the routes above.
	console.New(az).Register(mux)
	adm := &admission{
		authn:          authn.NewAuthenticatorWith(az, o.Now, https, o.SessionIdleTimeout),
		audit:          rec,
		publicOrigin:   o.PublicOrigin,
		trustedProxies: o.TrustedProxies,
	}
	admitted := newInflight(o.MaxRequestsInFlight, DefaultRequestQueueWait, uncounted, o.Metrics, o.Logger).wrap(readScoped(adm.wrap(telemetry.Route(mux))))
	var h http.Handler = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if p, ok := probes[r.URL.Path]; ok {
			p.ServeHTTP(w, r)
			return
		}
		admitted.ServeHTTP(w, r)
	})
	dr := &drainer{}
	h = dr.wrap(h)
	h = httpx.Recover(h)
	h = httpx.SecurityHeaders(h)
	if https {
		h = hsts(h)
	}
	h = withBaseLogger(httpx.RequestID(h), o.Logger)
	h = telemetry.HTTP(o.Metrics, o.TracerProvider, h)
	wk := worker.New(az, o.Driver, o.Worker)
	if q, ok := o.Store.(workQueue); ok {
		// A deployment queued through this process starts at once instead
		// of at the worker's next poll (an occ worker process still polls).
		q.OnWorkQueued(wk.Wake)
	}
	return &Server{opts: o, Service: svc, Audit: rec, Routes: routes, handler: h, drain: dr, Worker: wk}
}

// workQueue is a store that tells when work was queued (sqlstore.Store).
type workQueue interface {
	OnWorkQueued(fn func())
}

// auditThrottle records a delay or lockout a failed sign-in imposed. It
// is written at once, outside any transaction (the sign-in has none); a
// failure to write it is logged and does not change the sign-in's answer
// (401), which the caller is owed either way.
func auditThrottle(ctx context.Context, rec *audit.Recorder, log *slog.Logger, ev authn.ThrottleEvent) {
	action, reason := "openclaw.auth.sign_in.throttle", "SIGN_IN_THROTTLED"
	if ev.Locked {
		action, reason = "openclaw.auth.sign_in.lockout", "SIGN_IN_LOCKED"
	}
	details := map[string]string{
		"throttleScope": ev.Scope,
		"failures":      strconv.Itoa(ev.Failures),
		"until":         ev.Until.UTC().Format(time.RFC3339Nano),
	}
	if ev.ClientAddr.IsValid() {
		details["clientAddress"] = ev.ClientAddr.String()
	}
	if ev.UserID != "" {
		details["subjectId"] = ev.UserID
	}
	err := rec.RecordAfter(ctx, store.AuditEvent{
		Kind: store.AuditAccess, Action: action, Outcome: store.OutcomeDenied, ReasonCode: reason, Details: details,
	})
	if err != nil {
		log.ErrorContext(ctx, "audit: could not record a sign-in throttle", "error", err, "action", action)
	}
}

// ThrottlePolicy converts configured sign-in limits into the throttle's
// policy (the two types mirror each other; config does not import authn).
func ThrottlePolicy(l config.SignInLimits) authn.ThrottlePolicy {
	return authn.ThrottlePolicy{Free: l.FreeFailures, Lock: l.LockFailures, BaseDelay: l.BaseDelay, MaxDelay: l.MaxDelay,
		Lockout: l.Lockout, Window: l.Window}
}

// Handler is the complete HTTP handler.
func (s *Server) Handler() http.Handler { return s.handler }

// Health answers liveness and readiness probes.
type Health struct {
	Ping func(context.Context) error
	// Loops, when set (occ worker's probes), is the deployment worker's
	// progress (worker.Worker.Health): both probes answer 503 while it is
	// an error. The API's probes leave it nil: an API replica serves
	// requests whatever its embedded worker does.
	Loops func() error
}

// Live answers 200 while the process serves HTTP (and, with Loops, while
// the worker's loops make progress).
func (h *Health) Live(w http.ResponseWriter, r *http.Request) {
	if !h.loopsOK(w, r) {
		return
	}
	httpx.Write(w, r, http.StatusOK, apitypes.Health{Status: "ok"})
}

// loopsOK answers 503 and reports false when Loops says the worker is not
// making progress.
func (h *Health) loopsOK(w http.ResponseWriter, r *http.Request) bool {
	if h.Loops == nil {
		return true
	}
	if err := h.Loops(); err != nil {
		httpx.WriteError(w, r, errkind.Wrap(errkind.Unavailable, "The deployment worker is not making progress.", err))
		return false
	}
	return true
}

// Ready answers 200 when the database answers within two seconds (and,
// with Loops, the worker's loops make progress).
func (h *Health) Ready(w http.ResponseWriter, r *http.Request) {
	if !h.loopsOK(w, r) {
		return
	}
	if h.Ping != nil {
		ctx, cancel := context.WithTimeout(r.Context(), 2*time.Second)
		defer cancel()
		if err := h.Ping(ctx); err != nil {
			httpx.WriteError(w, r, unavailable(err))
			return
		}
	}
	httpx.Write(w, r, http.StatusOK, apitypes.Health{Status: "ready"})
}

// Run serves the API on cfg.Listen until ctx ends, then shuts down
// gracefully within cfg.ShutdownTimeout. It opens and migrates the
// configured database first. The first start on an empty database
// bootstraps the installation and prints the generated administrator
// password to standard output (the operator's terminal), once.
//
// What can fail for a reason of this host, the TLS pair and the API and
// metrics listen addresses, is loaded and bound before the database is
// opened: a start that fails there has migrated nothing and created no
// administrator, whose one-time password would otherwise scroll past
// above the error and never be shown again. The API listener accepts
// connections from then on but serves them only once start-up is done
// (they wait in the kernel's backlog).
func Run(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	TuneGC(logger)
	authn.SetHashing(cfg.PasswordHashConcurrency, 0)
	var (
		certs *tlscert.Reloader
		err   error
	)
	if cfg.TLSCertFile != "" || cfg.TLSKeyFile != "" {
		if certs, err = tlscert.New(tlscert.Options{CertFile: cfg.TLSCertFile, KeyFile: cfg.TLSKeyFile, Logger: logger}); err != nil {
			return err
		}
		if !strings.HasPrefix(cfg.PublicOrigin, "https://") {
			logger.Warn("TLS is on but the public origin is not https: session cookies are not marked Secure and HSTS is off; set --public-origin https://...",
				"publicOrigin", cfg.PublicOrigin)
		}
	}
	ln, err := net.Listen("tcp", cfg.Listen)
	if err != nil {
		return fmt.Errorf("listen on %s: %w", cfg.Listen, err)
	}
	// Serve closes ln; this covers the returns before it. A second Close
	// is harmless.
	defer ln.Close()
	logger, obs, err := observe(ctx, cfg, logger)
	if err != nil {
		return err
	}
	st, err := sqlstore.Open(ctx, cfg.DatabaseURL, cfg.DataDir)
	if err != nil {
		obs.close(logger)
		return err
	}
	defer st.Close()
	// Deferred after st.Close, so it runs first: no scrape queries a
	// closed store.
	defer obs.close(logger)
	st.SetMaxConnections(cfg.DatabaseMaxConnections)
	st.SetReadCacheItems(cfg.DatabaseReadCacheItems)
	if err := st.Migrate(ctx); err != nil {
		return fmt.Errorf("migrate database: %w", err)
	}
	ping := st.DB().PingContext
	// The warning comes before the database's series: a scrape that
	// shows them has the warning logged before it.
	warnExposedFiles(st, logger)
	obs.watchStore(st)
	driver, stopDriver, err := openDriver(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer stopDriver()
	var proxies []netip.Prefix
	for _, c := range cfg.TrustedProxies {
		p, err := netip.ParsePrefix(c)
		if err != nil {
			return fmt.Errorf("trusted proxy %q: %w", c, err)
		}
		proxies = append(proxies, p)
	}
	files := agentgw.New(agentgw.Options{Logger: logger, Observer: obs.gatewayObserver(), Pool: agentgw.PoolOptions{
		Enabled: cfg.GatewayPool, IdleTimeout: cfg.GatewayPoolIdleTimeout, MaxConnections: cfg.GatewayPoolMaxConnections}})
	defer files.Close()
	inFlight := cfg.MaxRequestsInFlight
	if inFlight == 0 {
		inFlight = DefaultMaxRequestsInFlight(st.Engine(), st.OnThisHost(), cfg.DatabaseMaxConnections)
	}
	logger.Info("request turns", "maxRequestsInFlight", inFlight, "queueWait", DefaultRequestQueueWait, "databaseOnThisHost", st.OnThisHost())
	srv := New(Options{Store: st, Ping: ping, PublicOrigin: cfg.PublicOrigin, TrustedProxies: proxies,
		MaxRequestsInFlight: inFlight,
		SessionTTL:          cfg.SessionTTL, SessionIdleTimeout: cfg.SessionIdleTimeout, Logger: logger, Driver: driver,
		Throttle: authn.NewThrottle(ThrottlePolicy(cfg.SignInAccount), ThrottlePolicy(cfg.SignInAddress), 0),
		Metrics:  obs.metrics, TracerProvider: obs.tracer,
		Files: files,
		// Every loop of the embedded worker shares the one driver.
		Worker:         worker.Options{Concurrency: cfg.WorkerConcurrency},
		GatewayKeyFile: cfg.GatewayAPIKeyFile, GatewayCAFile: cfg.GatewayCAFile, FileTimeout: cfg.WorkspaceFileTimeout})
	created, err := srv.Service.Bootstrap(ctx, occ.BootstrapInput{
		AdminEmail: cfg.BootstrapAdminEmail, PasswordFile: cfg.BootstrapAdminPasswordFile, Out: os.Stdout,
	})
	if err != nil {
		return err
	}
	if created {
		logger.Info("installation bootstrapped") // the administrator's address is not logged
	}
	// Start-up ran one or two argon2 hashes of 64 MiB each (the sign-in
	// dummy hash, the bootstrap password) that are garbage now. An idle
	// server allocates too little to trigger a collection, so without this
	// it kept that memory resident indefinitely (measured: 173 MB idle
	// instead of under 50 MB; docs/performance.md).
	debug.FreeOSMemory()

	// Handlers run on a context of their own: the signal that cancels ctx
	// starts a graceful drain, in which they finish; they are cancelled
	// only if the drain runs out of time (stopServing).
	hctx, cancelHandlers := context.WithCancel(context.WithoutCancel(ctx))
	defer cancelHandlers()
	hs := &http.Server{
		Handler:           srv.Handler(),
		ReadHeaderTimeout: 10 * time.Second,
		ReadTimeout:       60 * time.Second,
		IdleTimeout:       120 * time.Second,
		MaxHeaderBytes:    64 << 10,
		ErrorLog:          slog.NewLogLogger(logger.Handler(), slog.LevelWarn),
		BaseContext:       func(net.Listener) context.Context { return hctx },
	}
	if certs != nil {
		hs.TLSConfig = &tls.Config{MinVersion: tls.VersionTLS12, GetCertificate: certs.GetCertificate}
	}
	logger.Info("occ server listening", "address", ln.Addr().String(), "publicOrigin", cfg.PublicOrigin, "tls", certs != nil)
	errc := make(chan error, 1)
	go func() {
		if certs != nil {
			errc <- hs.ServeTLS(ln, "", "")
			return
		}
		errc <- hs.Serve(ln)
	}()
	if cfg.EmbeddedWorker {
		wctx, stopWorker := context.WithCancel(context.WithoutCancel(ctx))
		workerDone := make(chan struct{})
		go func() {
			defer close(workerDone)
			_ = srv.Worker.Run(wctx)
		}()
		defer func() {
			stopWorker()
			<-workerDone
		}()
	} else {
		// Deployments wait in the queue until an "occ worker" claims them.
		logger.Info("embedded worker off: deployments run only when an occ worker is running")
	}
	releaseStartupPages(logger)
	select {
	case err := <-errc:
		return fmt.Errorf("serve: %w", err)
	case <-ctx.Done():
	}
	logger.Info("shutting down", "timeout", cfg.ShutdownTimeout.String())
	if err := stopServing(hs, srv.drain, cancelHandlers, cfg.ShutdownTimeout, abandonGrace); err != nil {
		return err
	}
	if err := <-errc; err != nil && !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	logger.Info("stopped")
	return nil
}

// abandonGrace is how long stopServing waits for handlers it cancelled:
// longer than what a cancelled request may still write on contexts of its
// own, one after the other (a workspace file write's outcome record, then
// the denials it queued, each step within audit.AfterTimeout), so that no
// record is cut off by the store closing.
const abandonGrace = 2*audit.AfterTimeout + time.Second

// stopServing drains hs: new requests answer 503 (readiness too, so load
// balancers stop sending) while in-flight ones finish, then the listener
// and idle connections close, all within timeout. Requests still running
// then are cancelled (cancelHandlers ends the contexts hs gave them), their
// connections closed, and waited for up to grace more, so that the
// teardown after Run (worker, gateway pool, driver, store) does not pull
// what they use from under them. It returns Shutdown's error, if any.
func stopServing(hs *http.Server, d *drainer, cancelHandlers context.CancelFunc, timeout, grace time.Duration) error {
	sctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	d.start()
	d.wait(sctx)
	err := hs.Shutdown(sctx)
	if err == nil {
		return nil
	}
	cancelHandlers()
	_ = hs.Close()
	gctx, gcancel := context.WithTimeout(context.Background(), grace)
	defer gcancel()
	d.wait(gctx)
	return fmt.Errorf("graceful shutdown: %w", err)
}

// warnExposedFiles logs a warning for each SQLite database file that
// other users may read or write (sqlstore.ExposedFiles). It warns rather
// than refuses to start: the operator may have given a group access on
// purpose (a backup account), and refusing would stop an installation
// whose database predates the 0600 default. A file it cannot examine is
// warned about too; starting goes on.
func warnExposedFiles(st *sqlstore.Store, logger *slog.Logger) {
	files, err := st.ExposedFiles()
	if err != nil {
		logger.Warn("could not check the database files' permissions", "error", err)
		return
	}
	for _, f := range files {
		logger.Warn("database file is accessible to other users: it holds password and key hashes and staged files; run chmod 600 on it",
			"path", f.Path, "mode", fmt.Sprintf("%04o", uint32(f.Mode)))
	}
}

// RunWorker runs only the deployment worker against the configured
// database until ctx ends, for deployments that split API and worker
// replicas. It does not migrate: run "occ migrate" (or an "occ server")
// first.
func RunWorker(ctx context.Context, cfg config.Config, logger *slog.Logger) error {
	TuneGC(logger)
	st, err := sqlstore.Open(ctx, cfg.DatabaseURL, cfg.DataDir)
	if err != nil {
		return err
	}
	defer st.Close()
	st.SetMaxConnections(cfg.DatabaseMaxConnections)
	// No read cache: it keeps what API requests read, and a worker serves
	// none; its deployments commit, so its own reads would all miss and
	// each pay the snapshot check.
	st.SetReadCacheItems(0)
	logger, obs, err := observe(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer obs.close(logger)
	// The warning comes before the database's series: a scrape that
	// shows them has the warning logged before it.
	warnExposedFiles(st, logger)
	obs.watchStore(st)
	driver, stopDriver, err := openDriver(ctx, cfg, logger)
	if err != nil {
		return err
	}
	defer stopDriver()
	srv := New(Options{Store: st, PublicOrigin: cfg.PublicOrigin, Logger: logger, Driver: driver, Metrics: obs.metrics,
		Worker: worker.Options{Concurrency: cfg.WorkerConcurrency}})
	if cfg.WorkerHealthListen != "" {
		// A listen error stops occ worker at start: a configured probe
		// address that cannot be bound would otherwise fail every probe.
		probes := WorkerProbes(&Health{Ping: st.DB().PingContext, Loops: srv.Worker.Health}, logger)
		ln, err := telemetry.Serve("worker health", cfg.WorkerHealthListen, probes, logger)
		if err != nil {
			return err
		}
		defer closeListener(ln, "worker health", logger)
	}
	logger.Info("occ worker running", "driver", srv.opts.Driver.ID(), "concurrency", cfg.WorkerConcurrency)
	releaseStartupPages(logger)
	return srv.Worker.Run(ctx)
}

// WorkerProbes is occ worker's probe handler: GET /healthz (h.Live) and
// GET /readyz (h.Ready), with request ids, logger and JSON replies as on
// the API listener; any other path answers 404.
func WorkerProbes(h *Health, logger *slog.Logger) http.Handler {
	mux := httpx.NewMux()
	mux.HandleFunc("GET /healthz", h.Live)
	mux.HandleFunc("GET /readyz", h.Ready)
	return withBaseLogger(httpx.RequestID(httpx.Recover(mux)), logger)
}

// withBaseLogger puts base in each request's context for next, whose
// httpx.RequestID derives the request's logger from it. The request's
// span ids go on it here, so that lines logged without a context carry
// them too (telemetry.LogHandler adds them only to lines logged with one).
func withBaseLogger(next http.Handler, base *slog.Logger) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := base
		if attrs := telemetry.LogAttrs(r.Context()); attrs != nil {
			l = l.With(attrs...)
		}
		next.ServeHTTP(w, r.WithContext(httpx.WithLogger(r.Context(), l)))
	})
}

// closeListener shuts ln down within five seconds; an error is logged, as
// there is nothing left to fail.
func closeListener(ln *telemetry.Listener, name string, logger *slog.Logger) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := ln.Close(ctx); err != nil {
		logger.Warn(name+" listener shutdown", "error", err)
	}
}

// observability is what observe set up for one process.
type observability struct {
	metrics  *telemetry.Metrics // nil: no metrics listener configured
	listener *telemetry.Listener
	tracer   trace.TracerProvider // nil: tracing off
	shutdown func(context.Context) error
}

// observe sets up the process's observability from cfg and the OTEL_*
// environment: the metrics listener (when cfg.MetricsListen is set), the
// tracer provider, and a logger that adds trace ids to lines logged with a
// traced context. It needs no database, so Run binds the metrics address
// before it migrates anything; watchStore adds the database's collectors
// once the store is open (scrapes before then have no database series).
func observe(ctx context.Context, cfg config.Config, logger *slog.Logger) (*slog.Logger, *observability, error) {
	logger = slog.New(telemetry.LogHandler(logger.Handler(), httpx.RequestIDFrom))
	o := &observability{shutdown: func(context.Context) error { return nil }}
	tp, shutdown, err := telemetry.SetupTracing(ctx, os.Getenv, logger)
	if err != nil {
		return nil, nil, err
	}
	o.tracer, o.shutdown = tp, shutdown
	if tp != nil {
		sqlstore.SetTracerProvider(tp)
	}
	if cfg.MetricsListen != "" {
		o.metrics = telemetry.NewMetrics()
		ln, err := telemetry.Listen(cfg.MetricsListen, o.metrics, logger)
		if err != nil {
			o.close(logger)
			return nil, nil, err
		}
		o.listener = ln
	}
	return logger, o, nil
}

// watchStore adds the database pool, queue depth and read cache
// collectors to the metrics, when they are on.
func (o *observability) watchStore(st *sqlstore.Store) {
	if o.metrics == nil {
		return
	}
	o.metrics.RegisterDB(st.DB())
	o.metrics.RegisterQueueDepth(st.QueueDepth, string(store.WorkQueued), string(store.WorkRunning))
	o.metrics.RegisterReadCache(func() (uint64, uint64, bool) {
		s, ok := st.ReadCacheStats()
		return s.Hits, s.Misses, ok
	})
}

// gatewayObserver is the gateway client's observer: nil (not a nil
// *Metrics in an interface) when metrics are off.
func (o *observability) gatewayObserver() agentgw.Observer {
	if o.metrics == nil {
		return nil
	}
	return o.metrics
}

// close stops the metrics listener and flushes pending spans, each within
// five seconds; errors are logged, as there is nothing left to fail.
func (o *observability) close(logger *slog.Logger) {
	if o.listener != nil {
		closeListener(o.listener, "metrics", logger)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := o.shutdown(ctx); err != nil {
		logger.Warn("trace exporter shutdown", "error", err)
	}
}

// readScoped gives each admitted request a read scope
// (sqlstore.WithReadScope), after its turn: the store's cached reads
// (the session lookup, then the Agent or page it authorizes) ask the
// database for its snapshot once per request instead of once per read.
// Without a read cache the scope is never used.
func readScoped(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		next.ServeHTTP(w, r.WithContext(sqlstore.WithReadScope(r.Context())))
	})
}
