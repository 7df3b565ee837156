package config

import (
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/mail"
	"net/netip"
	"net/url"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"time"

	"github.com/openclaw/occ/internal/dburl"
)

// Config is the resolved configuration of an occ process. Load builds one
// from flags, environment and the config file; tests may build one from
// Default and change fields. Either way, call Validate before use (Load
// does).
//
// The Go fields are flat; the YAML file groups some of them (log.level,
// bootstrapAdmin.email). The mapping lives in the options table in load.go
// and in docs/configuration.md.
type Config struct {
	// DataDir holds all local state of the embedded default: the SQLite
	// database and, later, per-Agent private files. Load makes it absolute.
	DataDir string
	// Listen is the host:port of the HTTP listener.
	Listen string
	// DatabaseURL selects the database: postgres:// or postgresql:// for
	// PostgreSQL, sqlite:///path or file:path for a SQLite file elsewhere.
	// Empty means the embedded SQLite database in DataDir. It may contain a
	// password, so it is never printed.
	DatabaseURL string
	// DatabaseURLFile names a file holding DatabaseURL alone, so the
	// URL and its password need not be in the environment or a command
	// line: Load reads it (a mounted Kubernetes Secret item included) into
	// DatabaseURL. Setting both is an error.
	DatabaseURLFile string
	// DatabaseMaxConnections caps the database connections this process
	// holds open (database/sql's pool). Requests beyond it wait for a
	// connection within their own deadline instead of opening more: on
	// PostgreSQL every replica's pool counts against the server's
	// max_connections (100 by default), and on SQLite each connection keeps
	// its own page cache.
	DatabaseMaxConnections int
	// DatabaseReadCacheItems sizes the store's read cache (sqlstore's
	// readcache.go), in items (an Agent, a Namespace, an audit event, a
	// grant); 0 turns it off. A cached result is served only while the
	// database's snapshot is unchanged, so it is never stale.
	DatabaseReadCacheItems int
	// PublicOrigin is the scheme://host[:port] that browsers use to reach
	// OCC. Session-cookie requests must carry exactly this Origin, so it
	// has no path and no trailing slash. Load derives it from Listen when
	// it is not set.
	PublicOrigin string
	// TrustedProxies are the CIDRs of reverse proxies whose X-Forwarded-*
	// headers are believed. Empty means forwarding headers are never
	// trusted.
	TrustedProxies []string
	// SessionTTL is how long a browser session lasts after sign-in
	// (absolute: use does not extend it).
	SessionTTL time.Duration
	// SessionIdleTimeout ends a session that has not been used for this
	// long, before SessionTTL.
	SessionIdleTimeout time.Duration
	// PasswordHashConcurrency is how many argon2id password hashes (64 MiB
	// each) may run at once; 0 means the default (GOMAXPROCS, at most 4).
	PasswordHashConcurrency int
	// MaxRequestsInFlight bounds the API reads (GET and HEAD) this process
	// works on at once; others wait their turn, first come first served
	// (see docs/configuration.md). 0 means the default: twice GOMAXPROCS
	// on SQLite and on a PostgreSQL server on this host (at most
	// DatabaseMaxConnections), DatabaseMaxConnections on one elsewhere.
	MaxRequestsInFlight int
	// SignInAccount and SignInAddress are the sign-in throttle's limits
	// per account (email as typed) and per client address; see
	// SignInLimits and docs/reliability.md.
	SignInAccount SignInLimits
	SignInAddress SignInLimits
	// TLSCertFile and TLSKeyFile, when both set, make the listener serve
	// HTTPS with this PEM certificate chain and key, re-read when the
	// files change. Validate refuses only one of them, and a file that
	// cannot be read.
	TLSCertFile string
	TLSKeyFile  string
	// ShutdownTimeout bounds the graceful shutdown after SIGTERM: in-flight
	// requests get this long to finish before connections are closed.
	ShutdownTimeout time.Duration
	// BootstrapAdminEmail is the email of the first administrator, created
	// on the first start against an empty database.
	BootstrapAdminEmail string
	// BootstrapAdminPasswordFile, when set, names a file holding that
	// administrator's initial password. When empty, the server generates a
	// password and prints it once.
	BootstrapAdminPasswordFile string
	// LogLevel is one of debug, info, warn, error.
	LogLevel string
	// LogFormat is text (human-readable) or json.
	LogFormat string
	// ComputeDriver names the Compute backend Agents run on, one of the
	// driver registry's names (see ComputeDrivers); empty selects the
	// registry's default driver.
	ComputeDriver string
	// ComputeSections are the drivers' sections of the config file,
	// drivers.compute.<name>, by driver name, undecoded: each driver
	// decodes and validates its own (ComputeDriver.Check), so that config
	// compiles no driver and none of their client libraries. Only the
	// selected driver may have one. They have no flags or environment
	// variables; a nested installation section is a file's job.
	ComputeSections map[string]*Section
	// OpenClawRuntime is the directory scripts/install-runtime.sh
	// installed Node 24 and OpenClaw into. Empty means the script's
	// default location.
	OpenClawRuntime string
	// GatewayAPIKeyFile is the service key file for routed gateway access
	// (Kubernetes): read for every operation, never logged.
	GatewayAPIKeyFile string
	// GatewayCAFile optionally adds CA certificates (PEM) to the system
	// roots for routed gateway TLS.
	GatewayCAFile string
	// GatewayPool turns on the optional pooled gateway connection per
	// Agent (agentgw.PoolOptions): the credential and CA are still read
	// and compared for every operation. Off by default.
	GatewayPool bool
	// GatewayPoolIdleTimeout closes a pooled connection unused this long.
	GatewayPoolIdleTimeout time.Duration
	// GatewayPoolMaxConnections caps the pooled connections.
	GatewayPoolMaxConnections int
	// WorkspaceFileTimeout bounds one workspace file read or write,
	// including admission and the native call.
	WorkspaceFileTimeout time.Duration
	// EmbeddedWorker makes "occ server" run the deployment worker in its
	// own process (the default). Production installations that run
	// "occ worker" separately turn it off on the API replicas.
	EmbeddedWorker bool
	// WorkerConcurrency is how many work items the deployment worker of
	// this process (occ server's or occ worker's) works on at once. Items
	// of one Agent still run one at a time.
	WorkerConcurrency int
	// WorkerHealthListen is the host:port on which "occ worker" answers
	// the probes /healthz (its loops are making progress) and /readyz
	// (they run and the database answers); empty (the default) serves
	// neither. "occ server" answers both on its API listener and ignores
	// it, so one configuration file can serve API and worker replicas.
	WorkerHealthListen string
	// MetricsListen is the host:port of the separate listener serving
	// Prometheus metrics and pprof; empty (the default) serves neither.
	// It is never the API listener: metrics and profiles are for the
	// operator's network, not for API clients.
	MetricsListen string
}

// SignInLimits are the limits of one sign-in throttle counter (account or
// client address). It mirrors authn.ThrottlePolicy field for field; config
// does not import authn so that it stays a leaf every command can load.
type SignInLimits struct {
	// FreeFailures is how many failures within Window cost nothing.
	FreeFailures int
	// LockFailures is the failure count within Window that locks the key;
	// it must exceed FreeFailures.
	LockFailures int
	// BaseDelay is the delay after failure FreeFailures+1; each further
	// failure doubles it, up to MaxDelay.
	BaseDelay, MaxDelay time.Duration
	// Lockout is how long a locked key stays locked.
	Lockout time.Duration
	// Window is how long failures are remembered after the last one (or
	// after a lockout ends).
	Window time.Duration
}

// Bounds of the sign-in limits. A count above MaxSignInFailures or a
// duration above MaxSignInDuration is refused as a typo: a throttle that
// never engages, or a lockout of weeks, is never what an operator means.
const (
	MaxSignInFailures = 1_000_000
	MaxSignInDuration = 7 * 24 * time.Hour
)

// Default sign-in limits; authn.DefaultAccountPolicy and
// authn.DefaultAddressPolicy are the same values (a test in
// internal/server checks).
var (
	DefaultSignInAccount = SignInLimits{FreeFailures: 3, LockFailures: 10, BaseDelay: time.Second, MaxDelay: 30 * time.Second,
		Lockout: 15 * time.Minute, Window: 15 * time.Minute}
	DefaultSignInAddress = SignInLimits{FreeFailures: 20, LockFailures: 50, BaseDelay: time.Second, MaxDelay: 30 * time.Second,
		Lockout: 15 * time.Minute, Window: 15 * time.Minute}
)

// validate reports every invalid limit of one scope; scope is "account"
// or "address", as the option names spell it.
func (l SignInLimits) validate(scope string) []error {
	var errs []error
	name := "sign-in " + scope + " "
	freeOK := l.FreeFailures >= 0 && l.FreeFailures <= MaxSignInFailures
	if !freeOK {
		errs = append(errs, fmt.Errorf("%sfree failures must be between 0 and %d, got %d", name, MaxSignInFailures, l.FreeFailures))
	}
	if l.LockFailures < 1 || l.LockFailures > MaxSignInFailures {
		errs = append(errs, fmt.Errorf("%slock failures must be between 1 and %d, got %d", name, MaxSignInFailures, l.LockFailures))
	} else if freeOK && l.LockFailures <= l.FreeFailures {
		errs = append(errs, fmt.Errorf("%slock failures (%d) must be more than free failures (%d)", name, l.LockFailures, l.FreeFailures))
	}
	for _, d := range []struct {
		what string
		v    time.Duration
	}{{"base delay", l.BaseDelay}, {"max delay", l.MaxDelay}, {"lockout", l.Lockout}, {"window", l.Window}} {
		if d.v < time.Second || d.v > MaxSignInDuration {
			errs = append(errs, fmt.Errorf("%s%s must be between 1s and %s, got %s", name, d.what, shortDuration(MaxSignInDuration), d.v))
		}
	}
	if l.MaxDelay < l.BaseDelay {
		errs = append(errs, fmt.Errorf("%smax delay (%s) must not be less than base delay (%s)", name, l.MaxDelay, l.BaseDelay))
	}
	return errs
}

// Defaults. The data directory is relative to the working directory until
// Load makes it absolute.
const (
	DefaultWorkspaceFileTimeout = 30 * time.Second
	// DefaultGatewayPoolIdleTimeout and DefaultGatewayPoolMaxConnections
	// mirror agentgw's pool defaults; MaxGatewayPoolMaxConnections bounds
	// the open connections (and, with the SSH driver, the channels) one
	// process may hold.
	DefaultGatewayPoolIdleTimeout    = 60 * time.Second
	DefaultGatewayPoolMaxConnections = 64
	MaxGatewayPoolMaxConnections     = 4096
	DefaultDataDir                   = ".occ"
	// DefaultDatabaseMaxConnections leaves room for four OCC processes
	// (API replicas and workers) under PostgreSQL's default
	// max_connections of 100; MaxDatabaseMaxConnections is a sanity bound.
	DefaultDatabaseMaxConnections = 20
	MaxDatabaseMaxConnections     = 1000
	// DefaultDatabaseReadCacheItems mirrors sqlstore.DefaultReadCacheItems
	// (about 6 MB when full); MaxDatabaseReadCacheItems is a sanity bound.
	DefaultDatabaseReadCacheItems = 20_000
	MaxDatabaseReadCacheItems     = 1_000_000
	// DefaultWorkerConcurrency lets a slow driver call (a stop waiting
	// for its process, an image pull) hold up at most one of four loops.
	// MaxWorkerConcurrency is a sanity bound. A loop holds a database
	// connection only while it calls the store, never during a driver
	// call, so loops beyond --database-max-connections wait for one at
	// those moments rather than fail.
	DefaultWorkerConcurrency  = 4
	MaxWorkerConcurrency      = 64
	DefaultListen             = "127.0.0.1:8080"
	DefaultSessionTTL         = 12 * time.Hour
	DefaultSessionIdleTimeout = 2 * time.Hour
	// MaxPasswordHashConcurrency mirrors authn.MaxHashConcurrency.
	MaxPasswordHashConcurrency = 64
	// MaxMaxRequestsInFlight is a sanity bound.
	MaxMaxRequestsInFlight     = 100_000
	DefaultShutdownTimeout     = 15 * time.Second
	DefaultBootstrapAdminEmail = "admin@localhost"
	DefaultLogLevel            = "info"
	DefaultLogFormat           = "text"
)

// Default returns the configuration used when nothing is set: the embedded
// SQLite database under ./.occ, listening on loopback only.
func Default() Config {
	c := defaults()
	c.PublicOrigin = DefaultPublicOrigin(c.Listen)
	return c
}

// defaults is Default without the derived public origin: Load must tell
// "not set anywhere" (derive it from the final listen address) from "set".
func defaults() Config {
	return Config{
		DataDir:                DefaultDataDir,
		Listen:                 DefaultListen,
		SessionTTL:             DefaultSessionTTL,
		DatabaseMaxConnections: DefaultDatabaseMaxConnections,
		DatabaseReadCacheItems: DefaultDatabaseReadCacheItems,
		SessionIdleTimeout:     DefaultSessionIdleTimeout,
		SignInAccount:          DefaultSignInAccount,
		SignInAddress:          DefaultSignInAddress,
		ShutdownTimeout:        DefaultShutdownTimeout,
		BootstrapAdminEmail:    DefaultBootstrapAdminEmail,
		LogLevel:               DefaultLogLevel,
		LogFormat:              DefaultLogFormat,
		WorkspaceFileTimeout:   DefaultWorkspaceFileTimeout,
		EmbeddedWorker:         true,
		WorkerConcurrency:      DefaultWorkerConcurrency,

		GatewayPoolIdleTimeout:    DefaultGatewayPoolIdleTimeout,
		GatewayPoolMaxConnections: DefaultGatewayPoolMaxConnections,
	}
}

// DefaultPublicOrigin derives the origin a local browser uses for a listen
// address: http://127.0.0.1:8080 for 127.0.0.1:8080. An unspecified host
// (":8080", "0.0.0.0:8080", "[::]:8080") becomes localhost, which is right
// for a browser on the same machine; anything reached from elsewhere must
// set the public origin explicitly. It returns "" when listen is not
// host:port, and Validate reports the listen address instead.
func DefaultPublicOrigin(listen string) string {
	host, port, err := net.SplitHostPort(listen)
	if err != nil {
		return ""
	}
	if ip, err := netip.ParseAddr(host); host == "" || (err == nil && ip.IsUnspecified()) {
		host = "localhost"
	}
	return "http://" + net.JoinHostPort(host, port)
}

// Validate reports every invalid value at once, one per line, so that a
// misconfigured deployment is fixed in one round trip. drivers is the
// Compute driver table the driver selection and its section are checked
// against.
func (c *Config) Validate(drivers ComputeDrivers) error {
	return c.validate(drivers, false)
}

// validate is Validate; originDerived says that Load derived the public
// origin from the listen address (none was set), so that an origin the
// operator never wrote is reported as a problem of --listen.
func (c *Config) validate(drivers ComputeDrivers, originDerived bool) error {
	var errs []error
	add := func(err error) {
		if err != nil {
			errs = append(errs, err)
		}
	}
	if strings.TrimSpace(c.DataDir) == "" {
		add(errors.New("data dir must not be empty"))
	}
	listenErr := validateListen(c.Listen)
	add(listenErr)
	add(validateDatabaseURL(c.DatabaseURL))
	// Load derives an empty origin from the listen address; when that is
	// what failed, the listen error alone names the cause.
	if c.PublicOrigin != "" || listenErr == nil {
		if err := validatePublicOrigin(c.PublicOrigin); err != nil && originDerived {
			// A valid listen address need not give a valid origin: port 0
			// (picked when bound), upper case (LOCALHOST:8080), the
			// scheme's default port.
			add(fmt.Errorf("listen address %q: the public origin derived from it is not usable (%v); "+
				"set --public-origin to the scheme://host[:port] browsers use to reach OCC", c.Listen, err))
		} else {
			add(err)
		}
	}
	for _, p := range c.TrustedProxies {
		add(validateTrustedProxy(p))
	}
	if c.SessionTTL <= 0 {
		add(fmt.Errorf("session TTL must be positive, got %s", c.SessionTTL))
	}
	if c.ShutdownTimeout <= 0 {
		add(fmt.Errorf("shutdown timeout must be positive, got %s", c.ShutdownTimeout))
	}
	if c.SessionIdleTimeout <= 0 {
		add(fmt.Errorf("session idle timeout must be positive, got %s", c.SessionIdleTimeout))
	}
	if c.DatabaseMaxConnections < 1 || c.DatabaseMaxConnections > MaxDatabaseMaxConnections {
		add(fmt.Errorf("database max connections must be between 1 and %d, got %d", MaxDatabaseMaxConnections, c.DatabaseMaxConnections))
	}
	if c.WorkerConcurrency < 1 || c.WorkerConcurrency > MaxWorkerConcurrency {
		add(fmt.Errorf("worker concurrency must be between 1 and %d, got %d", MaxWorkerConcurrency, c.WorkerConcurrency))
	}
	if c.DatabaseReadCacheItems < 0 || c.DatabaseReadCacheItems > MaxDatabaseReadCacheItems {
		add(fmt.Errorf("database read cache items must be between 0 (off) and %d, got %d", MaxDatabaseReadCacheItems, c.DatabaseReadCacheItems))
	}
	if c.MaxRequestsInFlight < 0 || c.MaxRequestsInFlight > MaxMaxRequestsInFlight {
		add(fmt.Errorf("max requests in flight must be between 0 (default) and %d, got %d", MaxMaxRequestsInFlight, c.MaxRequestsInFlight))
	}
	if c.PasswordHashConcurrency < 0 || c.PasswordHashConcurrency > MaxPasswordHashConcurrency {
		add(fmt.Errorf("password hash concurrency must be between 0 (default) and %d, got %d", MaxPasswordHashConcurrency, c.PasswordHashConcurrency))
	}
	errs = append(errs, c.SignInAccount.validate("account")...)
	errs = append(errs, c.SignInAddress.validate("address")...)
	add(validateEmail(c.BootstrapAdminEmail))
	switch c.LogLevel {
	case "debug", "info", "warn", "error":
	default:
		add(fmt.Errorf("log level %q is not one of debug, info, warn, error", c.LogLevel))
	}
	switch c.LogFormat {
	case "text", "json":
	default:
		add(fmt.Errorf("log format %q is not one of text, json", c.LogFormat))
	}
	errs = append(errs, c.computeErrors(drivers)...)
	if c.MetricsListen != "" {
		if err := validateListen(c.MetricsListen); err != nil {
			add(fmt.Errorf("metrics %w", err))
		} else if sameListener(c.MetricsListen, c.Listen) {
			add(fmt.Errorf("metrics listen address %q must differ from the API listen address", c.MetricsListen))
		}
	}
	if c.WorkerHealthListen != "" {
		if err := validateListen(c.WorkerHealthListen); err != nil {
			add(fmt.Errorf("worker health %w", err))
		} else if sameListener(c.WorkerHealthListen, c.MetricsListen) {
			add(fmt.Errorf("worker health listen address %q must differ from the metrics listen address", c.WorkerHealthListen))
		}
	}
	if c.GatewayPoolIdleTimeout <= 0 {
		add(fmt.Errorf("gateway pool idle timeout must be positive, got %s", c.GatewayPoolIdleTimeout))
	}
	if c.GatewayPoolMaxConnections < 1 || c.GatewayPoolMaxConnections > MaxGatewayPoolMaxConnections {
		add(fmt.Errorf("gateway pool max connections must be between 1 and %d, got %d", MaxGatewayPoolMaxConnections, c.GatewayPoolMaxConnections))
	}
	if c.WorkspaceFileTimeout <= 0 {
		add(fmt.Errorf("workspace file timeout must be positive, got %s", c.WorkspaceFileTimeout))
	}
	for _, f := range []struct{ name, path string }{
		{"OpenClaw runtime", c.OpenClawRuntime}, {"gateway API key file", c.GatewayAPIKeyFile}, {"gateway CA file", c.GatewayCAFile},
		{"TLS certificate file", c.TLSCertFile}, {"TLS key file", c.TLSKeyFile},
	} {
		if f.path != "" && !filepath.IsAbs(f.path) {
			add(fmt.Errorf("%s %q must be an absolute path", f.name, f.path))
		}
	}
	errs = append(errs, c.tlsErrors()...)
	return errors.Join(errs...)
}

// tlsErrors reports a half TLS pair and a TLS file that cannot be read,
// naming the flag. "occ server" would find either only when it loads the
// pair; checking here makes it a configuration error (exit 2) before any
// command opens the database. It opens the files only to see that they can
// be read; the server parses them (internal/tlscert).
func (c *Config) tlsErrors() []error {
	var errs []error
	switch {
	case c.TLSCertFile != "" && c.TLSKeyFile == "":
		errs = append(errs, errors.New("TLS certificate file (--tls-cert-file) is set but the TLS key file (--tls-key-file) is not: set both to serve HTTPS, or neither"))
	case c.TLSCertFile == "" && c.TLSKeyFile != "":
		errs = append(errs, errors.New("TLS key file (--tls-key-file) is set but the TLS certificate file (--tls-cert-file) is not: set both to serve HTTPS, or neither"))
	}
	for _, f := range []struct{ name, flag, path string }{
		{"TLS certificate file", "tls-cert-file", c.TLSCertFile}, {"TLS key file", "tls-key-file", c.TLSKeyFile},
	} {
		if f.path == "" || !filepath.IsAbs(f.path) {
			continue // unset, or reported above
		}
		if err := readable(f.path); err != nil {
			errs = append(errs, fmt.Errorf("%s %q (--%s) cannot be read: %v", f.name, f.path, f.flag, err))
		}
	}
	return errs
}

// readable reports why path cannot be opened for reading as a file, in
// words without the path (the caller names it).
func readable(path string) error {
	f, err := os.Open(path)
	if err != nil {
		var pe *os.PathError
		if errors.As(err, &pe) {
			return pe.Err
		}
		return err
	}
	defer f.Close()
	fi, err := f.Stat()
	if err != nil {
		return err
	}
	if fi.IsDir() {
		return errors.New("it is a directory")
	}
	return nil
}

// unjoin returns the errors errors.Join combined, or err alone.
func unjoin(err error) []error {
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		return j.Unwrap()
	}
	return []error{err}
}

func validateListen(s string) error {
	host, port, err := net.SplitHostPort(s)
	if err != nil {
		return fmt.Errorf("listen address %q is not host:port (like 127.0.0.1:8080)", s)
	}
	// A service name ("http") would be accepted by net.Listen, but the
	// derived public origin and the docs need a number.
	if n, err := strconv.ParseUint(port, 10, 16); err != nil || port != strconv.FormatUint(n, 10) {
		return fmt.Errorf("listen address %q: port %q is not a number from 0 to 65535", s, port)
	}
	if strings.ContainsAny(host, " /") {
		return fmt.Errorf("listen address %q: host %q is not a host name or IP address", s, host)
	}
	return nil
}

// sameListener reports whether two valid listen addresses would take one
// socket: the same port (not 0, which picks a free one) on the same host,
// or on hosts of which one is a wildcard ("", 0.0.0.0, ::), which binds
// every address. Two distinct specific hosts may share a port.
func sameListener(a, b string) bool {
	ha, pa, _ := net.SplitHostPort(a)
	hb, pb, _ := net.SplitHostPort(b)
	if pa != pb || pa == "0" {
		return false
	}
	wild := func(h string) bool { return h == "" || h == "0.0.0.0" || h == "::" }
	return ha == hb || wild(ha) || wild(hb)
}

// validateDatabaseURL checks the scheme, the part that decides which
// store is used, and that a PostgreSQL URL reads one way only
// (dburl.Parse), so that it can be logged without its password; the store
// parses the rest and says what is wrong with it without leaking the
// password. The value is never quoted back here: it may carry a password,
// even in a malformed "user:pass@host" without a scheme.
func validateDatabaseURL(s string) error {
	if s == "" {
		return nil
	}
	lower := strings.ToLower(s)
	if strings.HasPrefix(lower, "postgres://") || strings.HasPrefix(lower, "postgresql://") {
		if _, ok := dburl.Parse(s); !ok {
			return errors.New("database URL cannot be read unambiguously (the value is not shown because it may contain a password): " +
				"percent-encode each /, ?, # and @ in its user name and password (as %2F, %3F, %23 and %40)")
		}
		return nil
	}
	for _, prefix := range []string{"sqlite:", "file:"} {
		if strings.HasPrefix(lower, prefix) {
			return nil
		}
	}
	return errors.New("database URL must start with postgres://, postgresql://, sqlite: or file: (the value is not shown because it may contain a password)")
}

func validatePublicOrigin(s string) error {
	if s == "" {
		return errors.New("public origin must not be empty")
	}
	u, err := url.Parse(s)
	if err != nil {
		return fmt.Errorf("public origin %q is not a URL: %v", s, errors.Unwrap(err))
	}
	switch {
	case u.Scheme != "http" && u.Scheme != "https":
		return fmt.Errorf("public origin %q must start with http:// or https://", s)
	case u.Opaque != "" || u.Host == "":
		return fmt.Errorf("public origin %q must be absolute, like https://occ.example.com", s)
	case u.User != nil:
		return fmt.Errorf("public origin %q must not contain a user name or password", s)
	case u.Path == "/":
		return fmt.Errorf("public origin %q must not end with a slash", s)
	case u.Path != "" || u.RawPath != "":
		return fmt.Errorf("public origin %q must not contain a path", s)
	case u.RawQuery != "" || u.ForceQuery:
		return fmt.Errorf("public origin %q must not contain a query", s)
	case u.Fragment != "" || strings.Contains(s, "#"):
		return fmt.Errorf("public origin %q must not contain a fragment", s)
	case strings.HasSuffix(u.Host, ":"):
		return fmt.Errorf("public origin %q has an empty port", s)
	}
	if p := u.Port(); p != "" {
		if n, err := strconv.ParseUint(p, 10, 16); err != nil || n == 0 {
			return fmt.Errorf("public origin %q: port %q is not a number from 1 to 65535", s, p)
		}
		// Browsers omit the default port from the Origin header, so an
		// origin written with it would never match a real request.
		if (u.Scheme == "http" && p == "80") || (u.Scheme == "https" && p == "443") {
			return fmt.Errorf("public origin %q must omit the default port :%s (browsers send %s://%s)", s, p, u.Scheme, u.Hostname())
		}
	}
	// Origins are compared byte for byte with the browser's Origin header,
	// which is lower case.
	if canonical := u.Scheme + "://" + strings.ToLower(u.Host); s != canonical {
		return fmt.Errorf("public origin %q must be written as %q", s, canonical)
	}
	return nil
}

func validateTrustedProxy(s string) error {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return fmt.Errorf("trusted proxy %q is not a CIDR (like 10.0.0.0/8 or 192.0.2.10/32)", s)
	}
	if p.Bits() == 0 {
		// Trusting every source lets any client forge its address.
		return fmt.Errorf("trusted proxy %q would trust every address; list the proxies' own ranges", s)
	}
	if m := p.Masked(); m != p {
		return fmt.Errorf("trusted proxy %q has host bits set; did you mean %s?", s, m)
	}
	return nil
}

func validateEmail(s string) error {
	a, err := mail.ParseAddress(s)
	// ParseAddress also accepts "Name <a@b>"; the bootstrap admin's email
	// must be the bare address.
	if err != nil || a.Name != "" || a.Address != s || len(s) > 254 {
		return fmt.Errorf("bootstrap admin email %q is not an email address like admin@example.com", s)
	}
	return nil
}

// TrustedProxyPrefixes returns TrustedProxies parsed. Call it on a
// validated Config; an entry that does not parse is an error.
func (c Config) TrustedProxyPrefixes() ([]netip.Prefix, error) {
	out := make([]netip.Prefix, 0, len(c.TrustedProxies))
	for _, s := range c.TrustedProxies {
		p, err := netip.ParsePrefix(s)
		if err != nil {
			return nil, fmt.Errorf("trusted proxy %q: %w", s, err)
		}
		out = append(out, p)
	}
	return out, nil
}

// LogValue lets a Config be logged at start-up without leaking the
// database password.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("dataDir", c.DataDir),
		slog.String("listen", c.Listen),
		slog.String("database", c.RedactedDatabaseURL()),
		slog.String("publicOrigin", c.PublicOrigin),
		slog.Any("trustedProxies", c.TrustedProxies),
		slog.Duration("sessionTTL", c.SessionTTL),
		slog.Duration("sessionIdleTimeout", c.SessionIdleTimeout),
		slog.Int("databaseMaxConnections", c.DatabaseMaxConnections),
		slog.Int("databaseReadCacheItems", c.DatabaseReadCacheItems),
		slog.Int("passwordHashConcurrency", c.PasswordHashConcurrency),
		slog.Int("maxRequestsInFlight", c.MaxRequestsInFlight),
		slog.Any("signInAccount", c.SignInAccount),
		slog.Any("signInAddress", c.SignInAddress),
		slog.String("tlsCertFile", c.TLSCertFile),
		slog.Duration("shutdownTimeout", c.ShutdownTimeout),
		slog.String("bootstrapAdminEmail", c.BootstrapAdminEmail),
		slog.String("bootstrapAdminPasswordFile", c.BootstrapAdminPasswordFile),
		slog.String("logLevel", c.LogLevel),
		slog.String("logFormat", c.LogFormat),
		slog.Bool("embeddedWorker", c.EmbeddedWorker),
		slog.Int("workerConcurrency", c.WorkerConcurrency),
		slog.Bool("gatewayPool", c.GatewayPool),
	)
}

// RedactedDatabaseURL describes the database for logs and messages:
// "embedded SQLite in <data dir>", or the URL without its password and
// query, or only its scheme ("postgres://(not shown)") when it cannot be
// read unambiguously (dburl.Parse).
func (c Config) RedactedDatabaseURL() string {
	s := c.DatabaseURL
	if s == "" {
		return "embedded SQLite in " + c.DataDir
	}
	u, ok := dburl.Parse(s)
	if !ok {
		lower := strings.ToLower(s)
		for _, scheme := range []string{"postgres", "postgresql", "sqlite", "file"} {
			if strings.HasPrefix(lower, scheme+":") {
				return scheme + "://(not shown)"
			}
		}
		return "(not shown)"
	}
	// Passwords can also hide in the query (password=...); drop it whole.
	u.RawQuery = ""
	return u.Redacted()
}
