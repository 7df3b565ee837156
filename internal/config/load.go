package config

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"

	"github.com/openclaw/occ/internal/secretfile"
)

// The config file option is not part of Config: it says where the other
// values come from.
const (
	FlagConfig = "config"
	EnvConfig  = "OCC_CONFIG"
)

// option is one configuration value and its three spellings. set parses
// the text form used by flags and environment variables; the config file
// is decoded by yaml.v3 into fileConfig instead, so that its errors carry
// line numbers.
type option struct {
	flag  string // without the leading dashes
	env   string
	yaml  string // dotted path in the config file
	typ   string // value type shown in --help
	def   string // default shown in --help; "" shows none
	usage string
	set   func(c *Config, raw string) error
}

// options is the one table of configuration values. docs/configuration.md
// must mention every flag, env and YAML name here (a test checks).
var options = []option{
	{
		flag: "data-dir", env: "OCC_DATA_DIR", yaml: "dataDir", typ: "path", def: "./" + DefaultDataDir,
		usage: "directory for local state: the embedded SQLite database and private files",
		set:   func(c *Config, s string) error { c.DataDir = s; return nil },
	},
	{
		flag: "listen", env: "OCC_LISTEN", yaml: "listen", typ: "host:port", def: DefaultListen,
		usage: "address of the HTTP listener",
		set:   func(c *Config, s string) error { c.Listen = s; return nil },
	},
	{
		flag: "database-url", env: "OCC_DATABASE_URL", yaml: "databaseURL", typ: "url",
		usage: "postgres://... for PostgreSQL; empty means the embedded SQLite database in the data dir",
		set:   func(c *Config, s string) error { c.DatabaseURL = s; return nil },
	},
	{
		flag: "database-url-file", env: "OCC_DATABASE_URL_FILE", yaml: "databaseURLFile", typ: "path",
		usage: "file holding the database URL alone (no line break), instead of --database-url",
		set:   func(c *Config, s string) error { c.DatabaseURLFile = s; return nil },
	},
	{
		flag: "database-max-connections", env: "OCC_DATABASE_MAX_CONNECTIONS", yaml: "databaseMaxConnections", typ: "int",
		def:   strconv.Itoa(DefaultDatabaseMaxConnections),
		usage: "most database connections this process keeps open; further queries wait for one",
		set:   func(c *Config, s string) error { return setInt(&c.DatabaseMaxConnections, s) },
	},
	{
		flag: "database-read-cache-items", env: "OCC_DATABASE_READ_CACHE_ITEMS", yaml: "databaseReadCacheItems", typ: "int",
		def:   strconv.Itoa(DefaultDatabaseReadCacheItems),
		usage: "items (Agents, Namespaces, audit events, grants) of API reads kept and served again while the database's snapshot is unchanged; 0 turns it off",
		set:   func(c *Config, s string) error { return setInt(&c.DatabaseReadCacheItems, s) },
	},
	{
		flag: "public-origin", env: "OCC_PUBLIC_ORIGIN", yaml: "publicOrigin", typ: "origin", def: "http://<listen>",
		usage: "scheme://host[:port] browsers use to reach OCC, without path or trailing slash",
		set:   func(c *Config, s string) error { c.PublicOrigin = s; return nil },
	},
	{
		flag: "trusted-proxies", env: "OCC_TRUSTED_PROXIES", yaml: "trustedProxies", typ: "cidrs",
		usage: "comma-separated CIDRs of reverse proxies allowed to send X-Forwarded-* headers",
		set:   func(c *Config, s string) error { c.TrustedProxies = splitList(s); return nil },
	},
	{
		flag: "session-ttl", env: "OCC_SESSION_TTL", yaml: "sessionTTL", typ: "duration", def: shortDuration(DefaultSessionTTL),
		usage: "lifetime of a browser session",
		set:   func(c *Config, s string) error { return setDuration(&c.SessionTTL, s) },
	},
	{
		flag: "session-idle-timeout", env: "OCC_SESSION_IDLE_TIMEOUT", yaml: "sessionIdleTimeout", typ: "duration", def: shortDuration(DefaultSessionIdleTimeout),
		usage: "a browser session unused for this long ends before its lifetime",
		set:   func(c *Config, s string) error { return setDuration(&c.SessionIdleTimeout, s) },
	},
	{
		flag: "max-requests-in-flight", env: "OCC_MAX_REQUESTS_IN_FLIGHT", yaml: "maxRequestsInFlight", typ: "int",
		def:   "2 × GOMAXPROCS on SQLite and on a PostgreSQL server on this host (at most --database-max-connections), --database-max-connections on one elsewhere",
		usage: "API reads (GET, HEAD) worked on at once; others wait their turn, first come first served; 0 means the default",
		set:   func(c *Config, s string) error { return setInt(&c.MaxRequestsInFlight, s) },
	},
	{
		flag: "password-hash-concurrency", env: "OCC_PASSWORD_HASH_CONCURRENCY", yaml: "passwordHashConcurrency", typ: "int", def: "GOMAXPROCS, at most 4",
		usage: "how many password hashes (64 MiB each) run at once; 0 means the default",
		set:   func(c *Config, s string) error { return setInt(&c.PasswordHashConcurrency, s) },
	},
	{
		flag: "sign-in-account-free-failures", env: "OCC_SIGN_IN_ACCOUNT_FREE_FAILURES", yaml: "signIn.account.freeFailures", typ: "int",
		def: strconv.Itoa(DefaultSignInAccount.FreeFailures), usage: "failed sign-ins per account (email as typed) that cost no delay",
		set: func(c *Config, s string) error { return setInt(&c.SignInAccount.FreeFailures, s) },
	},
	{
		flag: "sign-in-account-lock-failures", env: "OCC_SIGN_IN_ACCOUNT_LOCK_FAILURES", yaml: "signIn.account.lockFailures", typ: "int",
		def: strconv.Itoa(DefaultSignInAccount.LockFailures), usage: "failed sign-ins per account (email as typed) that lock it out",
		set: func(c *Config, s string) error { return setInt(&c.SignInAccount.LockFailures, s) },
	},
	{
		flag: "sign-in-account-base-delay", env: "OCC_SIGN_IN_ACCOUNT_BASE_DELAY", yaml: "signIn.account.baseDelay", typ: "duration",
		def: shortDuration(DefaultSignInAccount.BaseDelay), usage: "delay per account (email as typed) after the first failure past the free ones; doubled per further failure",
		set: func(c *Config, s string) error { return setDuration(&c.SignInAccount.BaseDelay, s) },
	},
	{
		flag: "sign-in-account-max-delay", env: "OCC_SIGN_IN_ACCOUNT_MAX_DELAY", yaml: "signIn.account.maxDelay", typ: "duration",
		def: shortDuration(DefaultSignInAccount.MaxDelay), usage: "longest sign-in delay per account (email as typed)",
		set: func(c *Config, s string) error { return setDuration(&c.SignInAccount.MaxDelay, s) },
	},
	{
		flag: "sign-in-account-lockout", env: "OCC_SIGN_IN_ACCOUNT_LOCKOUT", yaml: "signIn.account.lockout", typ: "duration",
		def: shortDuration(DefaultSignInAccount.Lockout), usage: "how long a sign-in lockout per account (email as typed) lasts",
		set: func(c *Config, s string) error { return setDuration(&c.SignInAccount.Lockout, s) },
	},
	{
		flag: "sign-in-account-window", env: "OCC_SIGN_IN_ACCOUNT_WINDOW", yaml: "signIn.account.window", typ: "duration",
		def: shortDuration(DefaultSignInAccount.Window), usage: "how long failed sign-ins per account (email as typed) are remembered after the last one",
		set: func(c *Config, s string) error { return setDuration(&c.SignInAccount.Window, s) },
	},
	{
		flag: "sign-in-address-free-failures", env: "OCC_SIGN_IN_ADDRESS_FREE_FAILURES", yaml: "signIn.address.freeFailures", typ: "int",
		def: strconv.Itoa(DefaultSignInAddress.FreeFailures), usage: "failed sign-ins per client address (IPv4, or IPv6 /64) that cost no delay",
		set: func(c *Config, s string) error { return setInt(&c.SignInAddress.FreeFailures, s) },
	},
	{
		flag: "sign-in-address-lock-failures", env: "OCC_SIGN_IN_ADDRESS_LOCK_FAILURES", yaml: "signIn.address.lockFailures", typ: "int",
		def: strconv.Itoa(DefaultSignInAddress.LockFailures), usage: "failed sign-ins per client address (IPv4, or IPv6 /64) that lock it out",
		set: func(c *Config, s string) error { return setInt(&c.SignInAddress.LockFailures, s) },
	},
	{
		flag: "sign-in-address-base-delay", env: "OCC_SIGN_IN_ADDRESS_BASE_DELAY", yaml: "signIn.address.baseDelay", typ: "duration",
		def: shortDuration(DefaultSignInAddress.BaseDelay), usage: "delay per client address (IPv4, or IPv6 /64) after the first failure past the free ones; doubled per further failure",
		set: func(c *Config, s string) error { return setDuration(&c.SignInAddress.BaseDelay, s) },
	},
	{
		flag: "sign-in-address-max-delay", env: "OCC_SIGN_IN_ADDRESS_MAX_DELAY", yaml: "signIn.address.maxDelay", typ: "duration",
		def: shortDuration(DefaultSignInAddress.MaxDelay), usage: "longest sign-in delay per client address (IPv4, or IPv6 /64)",
		set: func(c *Config, s string) error { return setDuration(&c.SignInAddress.MaxDelay, s) },
	},
	{
		flag: "sign-in-address-lockout", env: "OCC_SIGN_IN_ADDRESS_LOCKOUT", yaml: "signIn.address.lockout", typ: "duration",
		def: shortDuration(DefaultSignInAddress.Lockout), usage: "how long a sign-in lockout per client address (IPv4, or IPv6 /64) lasts",
		set: func(c *Config, s string) error { return setDuration(&c.SignInAddress.Lockout, s) },
	},
	{
		flag: "sign-in-address-window", env: "OCC_SIGN_IN_ADDRESS_WINDOW", yaml: "signIn.address.window", typ: "duration",
		def: shortDuration(DefaultSignInAddress.Window), usage: "how long failed sign-ins per client address (IPv4, or IPv6 /64) are remembered after the last one",
		set: func(c *Config, s string) error { return setDuration(&c.SignInAddress.Window, s) },
	},
	{
		flag: "tls-cert-file", env: "OCC_TLS_CERT_FILE", yaml: "tls.certFile", typ: "path",
		usage: "PEM certificate chain to serve HTTPS with (with --tls-key-file); re-read when it changes",
		set:   func(c *Config, s string) error { c.TLSCertFile = s; return nil },
	},
	{
		flag: "tls-key-file", env: "OCC_TLS_KEY_FILE", yaml: "tls.keyFile", typ: "path",
		usage: "PEM private key of --tls-cert-file; re-read when it changes",
		set:   func(c *Config, s string) error { c.TLSKeyFile = s; return nil },
	},
	{
		flag: "shutdown-timeout", env: "OCC_SHUTDOWN_TIMEOUT", yaml: "shutdownTimeout", typ: "duration", def: shortDuration(DefaultShutdownTimeout),
		usage: "how long in-flight requests may run after SIGTERM",
		set:   func(c *Config, s string) error { return setDuration(&c.ShutdownTimeout, s) },
	},
	{
		flag: "bootstrap-admin-email", env: "OCC_BOOTSTRAP_ADMIN_EMAIL", yaml: "bootstrapAdmin.email", typ: "email", def: DefaultBootstrapAdminEmail,
		usage: "email of the first administrator, created on first start",
		set:   func(c *Config, s string) error { c.BootstrapAdminEmail = s; return nil },
	},
	{
		flag: "bootstrap-admin-password-file", env: "OCC_BOOTSTRAP_ADMIN_PASSWORD_FILE", yaml: "bootstrapAdmin.passwordFile", typ: "path",
		usage: "file holding the first administrator's password; empty means generate one and print it once",
		set:   func(c *Config, s string) error { c.BootstrapAdminPasswordFile = s; return nil },
	},
	{
		flag: "log-level", env: "OCC_LOG_LEVEL", yaml: "log.level", typ: "level", def: DefaultLogLevel,
		usage: "debug, info, warn or error",
		set:   func(c *Config, s string) error { c.LogLevel = s; return nil },
	},
	{
		flag: "log-format", env: "OCC_LOG_FORMAT", yaml: "log.format", typ: "format", def: DefaultLogFormat,
		usage: "text or json",
		set:   func(c *Config, s string) error { c.LogFormat = s; return nil },
	},
	{
		// The default and the list of drivers in --help come from the
		// driver table RegisterFlags is given.
		flag: flagComputeDriver, env: "OCC_COMPUTE_DRIVER", yaml: "drivers.compute.driver", typ: "name",
		set: func(c *Config, s string) error { c.ComputeDriver = s; return nil },
	},
	{
		flag: "openclaw-runtime", env: "OCC_OPENCLAW_RUNTIME", yaml: "runtime.openclaw", typ: "path",
		usage: "directory with Node 24 and OpenClaw installed by scripts/install-runtime.sh; empty means its default location",
		set:   func(c *Config, s string) error { c.OpenClawRuntime = s; return nil },
	},
	{
		flag: "gateway-api-key-file", env: "OCC_GATEWAY_API_KEY_PATH", yaml: "gateway.apiKeyFile", typ: "path",
		usage: "service key file for routed gateway access, read for every operation",
		set:   func(c *Config, s string) error { c.GatewayAPIKeyFile = s; return nil },
	},
	{
		flag: "gateway-ca-file", env: "OCC_GATEWAY_CA_FILE", yaml: "gateway.caFile", typ: "path",
		usage: "PEM CA bundle added to the system roots for routed gateway TLS",
		set:   func(c *Config, s string) error { c.GatewayCAFile = s; return nil },
	},
	{
		flag: "gateway-pool", env: "OCC_GATEWAY_POOL", yaml: "gateway.pool.enabled", typ: "bool", def: "false",
		usage: "keep one open gateway connection per Agent and reuse it; the credential and CA are still read and compared for every operation",
		set:   func(c *Config, s string) error { return setBool(&c.GatewayPool, s) },
	},
	{
		flag: "gateway-pool-idle-timeout", env: "OCC_GATEWAY_POOL_IDLE_TIMEOUT", yaml: "gateway.pool.idleTimeout", typ: "duration",
		def:   shortDuration(DefaultGatewayPoolIdleTimeout),
		usage: "close a pooled gateway connection unused this long",
		set:   func(c *Config, s string) error { return setDuration(&c.GatewayPoolIdleTimeout, s) },
	},
	{
		flag: "gateway-pool-max-connections", env: "OCC_GATEWAY_POOL_MAX_CONNECTIONS", yaml: "gateway.pool.maxConnections", typ: "int",
		def:   strconv.Itoa(DefaultGatewayPoolMaxConnections),
		usage: "most pooled gateway connections kept open (1-4096)",
		set:   func(c *Config, s string) error { return setInt(&c.GatewayPoolMaxConnections, s) },
	},
	{
		flag: "workspace-file-timeout", env: "OCC_WORKSPACE_FILE_TIMEOUT", yaml: "workspaceFiles.timeout", typ: "duration",
		def:   shortDuration(DefaultWorkspaceFileTimeout),
		usage: "deadline of one workspace file read or write, including the native call",
		set:   func(c *Config, s string) error { return setDuration(&c.WorkspaceFileTimeout, s) },
	},
	{
		flag: "embedded-worker", env: "OCC_EMBEDDED_WORKER", yaml: "worker.embedded", typ: "bool", def: "true",
		usage: "occ server only: run the deployment worker in the server process; false when \"occ worker\" runs separately",
		set:   func(c *Config, s string) error { return setBool(&c.EmbeddedWorker, s) },
	},
	{
		flag: "worker-concurrency", env: "OCC_WORKER_CONCURRENCY", yaml: "worker.concurrency", typ: "int",
		def:   strconv.Itoa(DefaultWorkerConcurrency),
		usage: fmt.Sprintf("work items the deployment worker works on at once, 1-%d (one Agent's always one at a time)", MaxWorkerConcurrency),
		set:   func(c *Config, s string) error { return setInt(&c.WorkerConcurrency, s) },
	},
	{
		flag: "worker-health-listen", env: "OCC_WORKER_HEALTH_LISTEN", yaml: "worker.healthListen", typ: "host:port",
		usage: "occ worker only: address of a listener answering the probes /healthz and /readyz; empty means none",
		set:   func(c *Config, s string) error { c.WorkerHealthListen = s; return nil },
	},
	{
		flag: "metrics-listen", env: "OCC_METRICS_LISTEN", yaml: "metrics.listen", typ: "host:port",
		usage: "address of a separate listener for Prometheus metrics and pprof; empty means none",
		set:   func(c *Config, s string) error { c.MetricsListen = s; return nil },
	},
}

// setBool accepts true/false (any case), as in YAML and Kubernetes
// manifests; 1/0 and yes/no are refused so that a typo is not read as false.
func setBool(b *bool, s string) error {
	switch strings.ToLower(strings.TrimSpace(s)) {
	case "true":
		*b = true
	case "false":
		*b = false
	default:
		return fmt.Errorf("%q is not true or false", s)
	}
	return nil
}

// setInt parses a decimal integer.
func setInt(n *int, s string) error {
	v, err := strconv.Atoi(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a whole number", s)
	}
	*n = v
	return nil
}

// shortDuration prints 12h rather than time.Duration's 12h0m0s in --help.
func shortDuration(d time.Duration) string {
	s := d.String()
	if strings.HasSuffix(s, "m0s") {
		s = s[:len(s)-2]
	}
	if strings.HasSuffix(s, "h0m") {
		s = s[:len(s)-2]
	}
	return s
}

func setDuration(d *time.Duration, s string) error {
	v, err := time.ParseDuration(strings.TrimSpace(s))
	if err != nil {
		return fmt.Errorf("%q is not a duration like 90s, 15m or 12h", s)
	}
	*d = v
	return nil
}

// splitList reads "a, b,,c" as [a b c]: spaces after commas are common in
// env files, and an empty entry is never meant.
func splitList(s string) []string {
	var out []string
	for _, part := range strings.Split(s, ",") {
		if part = strings.TrimSpace(part); part != "" {
			out = append(out, part)
		}
	}
	return out
}

const flagComputeDriver = "compute-driver"

// RegisterFlags adds --config and one flag per option to fs. Every command
// that reads the configuration registers all of them, so one config file
// and one set of OCC_* variables serve every command. drivers is the
// Compute driver table; --help lists its drivers and its default.
func RegisterFlags(fs *pflag.FlagSet, drivers ComputeDrivers) {
	fs.Var(&textValue{typ: "path"}, FlagConfig, "YAML config file (env "+EnvConfig+")")
	for _, o := range options {
		if o.flag == flagComputeDriver {
			o.def, o.usage = drivers.Default(), drivers.usage()
		}
		v := &textValue{s: o.def, typ: o.typ, check: o.set}
		fs.Var(v, o.flag, o.usage+" (env "+o.env+")")
		if o.typ == "bool" {
			fs.Lookup(o.flag).NoOptDefVal = "true" // --embedded-worker alone means true
		}
	}
}

// textValue keeps a flag's text and parses it with its option's set
// function, so a malformed value is a usage error at parse time and flags
// and environment variables share one parser. Its initial text is only
// what --help shows as the default; Load reads flags that were set.
type textValue struct {
	s     string
	typ   string
	check func(*Config, string) error
}

func (v *textValue) String() string { return v.s }
func (v *textValue) Type() string   { return v.typ }
func (v *textValue) Set(s string) error {
	if v.check != nil {
		if err := v.check(&Config{}, s); err != nil {
			return err
		}
	}
	v.s = s
	return nil
}

// Load resolves the configuration: defaults, then the config file, then
// environment variables, then flags that were set on the command line; it
// derives the public origin from the listen address when none is set,
// makes the data dir absolute and validates the result.
//
// flags may be nil (no flags); env is os.Getenv in production and a map
// lookup in tests. An empty environment variable counts as unset, the
// usual convention for OCC_* variables in unit files and compose files.
// drivers is the Compute driver table (the registry's): the file's driver
// sections and the selected driver are checked against it.
func Load(flags *pflag.FlagSet, env func(string) string, drivers ComputeDrivers) (Config, error) {
	if env == nil {
		env = func(string) string { return "" }
	}
	c := defaults()

	path := env(EnvConfig)
	if f := changed(flags, FlagConfig); f != nil {
		path = f.Value.String()
	}
	if path != "" {
		if err := loadFile(path, &c, drivers); err != nil {
			return Config{}, err
		}
	}

	for _, o := range options {
		if raw := env(o.env); raw != "" {
			if err := o.set(&c, raw); err != nil {
				return Config{}, fmt.Errorf("%s: %w", o.env, err)
			}
		}
	}
	for _, o := range options {
		if f := changed(flags, o.flag); f != nil {
			if err := o.set(&c, f.Value.String()); err != nil {
				return Config{}, fmt.Errorf("--%s: %w", o.flag, err)
			}
		}
	}

	// Case is forgiven here, not in Validate, so that a Config built in
	// code is held to the canonical spelling the rest of OCC compares with.
	c.LogLevel = strings.ToLower(c.LogLevel)
	c.LogFormat = strings.ToLower(c.LogFormat)
	originDerived := c.PublicOrigin == ""
	if originDerived {
		c.PublicOrigin = DefaultPublicOrigin(c.Listen)
	}
	if c.DatabaseURLFile != "" {
		if c.DatabaseURL != "" {
			return Config{}, errors.New("databaseURL and databaseURLFile are both set: set one")
		}
		u, err := readDatabaseURLFile(c.DatabaseURLFile)
		if err != nil {
			return Config{}, err
		}
		c.DatabaseURL = u
	}
	if strings.TrimSpace(c.DataDir) != "" {
		abs, err := filepath.Abs(c.DataDir)
		if err != nil {
			return Config{}, fmt.Errorf("data dir %q: %w", c.DataDir, err)
		}
		c.DataDir = abs
	}
	if err := c.validate(drivers, originDerived); err != nil {
		return Config{}, err
	}
	return c, nil
}

// readDatabaseURLFile reads the database URL from path, an absolute path
// that may be a mounted Kubernetes Secret item (a symlink into ..data),
// with the rule of every secret file (secretfile.CheckSecret): printable
// ASCII, no space, no line break, at most 4 KiB. Errors name the file,
// never its content.
func readDatabaseURLFile(path string) (string, error) {
	b, err := secretfile.ReadMountedSecret(path)
	if err != nil {
		return "", fmt.Errorf("databaseURLFile %s: %w", path, err)
	}
	return string(b), nil
}

func changed(fs *pflag.FlagSet, name string) *pflag.Flag {
	if fs == nil {
		return nil
	}
	if f := fs.Lookup(name); f != nil && f.Changed {
		return f
	}
	return nil
}

// fileConfig is the schema of the YAML file. Its field names and nesting
// must match the yaml column of options.
type fileConfig struct {
	DataDir         string             `yaml:"dataDir"`
	Listen          string             `yaml:"listen"`
	DatabaseURL     string             `yaml:"databaseURL"`
	DatabaseURLFile string             `yaml:"databaseURLFile"`
	DatabaseMaxConn int                `yaml:"databaseMaxConnections"`
	DatabaseCache   int                `yaml:"databaseReadCacheItems"`
	PublicOrigin    string             `yaml:"publicOrigin"`
	TrustedProxies  []string           `yaml:"trustedProxies"`
	SessionTTL      time.Duration      `yaml:"sessionTTL"`
	SessionIdle     time.Duration      `yaml:"sessionIdleTimeout"`
	HashConcurrency int                `yaml:"passwordHashConcurrency"`
	MaxInFlight     int                `yaml:"maxRequestsInFlight"`
	SignIn          fileSignIn         `yaml:"signIn"`
	TLS             fileTLS            `yaml:"tls"`
	ShutdownTimeout time.Duration      `yaml:"shutdownTimeout"`
	BootstrapAdmin  fileBootstrapAdmin `yaml:"bootstrapAdmin"`
	Log             fileLog            `yaml:"log"`
	Drivers         fileDrivers        `yaml:"drivers"`
	Runtime         fileRuntime        `yaml:"runtime"`
	Gateway         fileGateway        `yaml:"gateway"`
	WorkspaceFiles  fileWorkspaceFiles `yaml:"workspaceFiles"`
	Worker          fileWorker         `yaml:"worker"`
	Metrics         fileMetrics        `yaml:"metrics"`
}

// fileBool is an on/off option of the file. yaml.v3 decodes YAML 1.1's
// y/n, yes/no and on/off into a Go bool for compatibility, but the flags
// and environment variables (setBool) and the docs know only true and
// false: "embedded: no" must not mean false in a file where
// OCC_EMBEDDED_WORKER=no is refused. key is the option's dotted key, for
// the error; decodeFile sets it along with the value the file may
// override. It decodes itself, so it is no section of the file.
type fileBool struct {
	key string
	v   bool
}

// UnmarshalYAML accepts the YAML 1.2 booleans only: true and false (also
// True, TRUE, False, FALSE), unquoted. Its error is a *yaml.TypeError, so
// that it is reported together with the file's other type errors.
func (b *fileBool) UnmarshalYAML(n *yaml.Node) error {
	if n.Kind == yaml.ScalarNode && n.ShortTag() == "!!bool" {
		switch strings.ToLower(n.Value) {
		case "true":
			b.v = true
			return nil
		case "false":
			b.v = false
			return nil
		}
	}
	return &yaml.TypeError{Errors: []string{fmt.Sprintf("line %d: %s must be true or false, not %s", n.Line, b.key, describeNode(n))}}
}

type fileMetrics struct {
	Listen string `yaml:"listen"`
}

type fileWorker struct {
	Embedded     fileBool `yaml:"embedded"`
	Concurrency  int      `yaml:"concurrency"`
	HealthListen string   `yaml:"healthListen"`
}

type fileDrivers struct {
	// Compute holds driver (the selected driver's name) and one section
	// per driver, whose schema belongs to the driver: decodeCompute takes
	// it apart.
	Compute yaml.Node `yaml:"compute"`
}

type fileRuntime struct {
	OpenClaw string `yaml:"openclaw"`
}

type fileGateway struct {
	APIKeyFile string          `yaml:"apiKeyFile"`
	CAFile     string          `yaml:"caFile"`
	Pool       fileGatewayPool `yaml:"pool"`
}

type fileGatewayPool struct {
	Enabled        fileBool      `yaml:"enabled"`
	IdleTimeout    time.Duration `yaml:"idleTimeout"`
	MaxConnections int           `yaml:"maxConnections"`
}

type fileWorkspaceFiles struct {
	Timeout time.Duration `yaml:"timeout"`
}

type fileBootstrapAdmin struct {
	Email        string `yaml:"email"`
	PasswordFile string `yaml:"passwordFile"`
}

type fileSignIn struct {
	Account fileSignInLimits  `yaml:"account"`
	Address fileSignInAddress `yaml:"address"`
}

// fileSignInAddress is fileSignInLimits under its own name, so that an
// unknown key's message names its section (sectionOf).
type fileSignInAddress fileSignInLimits

type fileSignInLimits struct {
	FreeFailures int           `yaml:"freeFailures"`
	LockFailures int           `yaml:"lockFailures"`
	BaseDelay    time.Duration `yaml:"baseDelay"`
	MaxDelay     time.Duration `yaml:"maxDelay"`
	Lockout      time.Duration `yaml:"lockout"`
	Window       time.Duration `yaml:"window"`
}

// fileLimits and limits convert between the two spellings of the same
// fields (the file's carries YAML tags).
func fileLimits(l SignInLimits) fileSignInLimits { return fileSignInLimits(l) }

func (f fileSignInLimits) limits() SignInLimits { return SignInLimits(f) }

type fileTLS struct {
	CertFile string `yaml:"certFile"`
	KeyFile  string `yaml:"keyFile"`
}

type fileLog struct {
	Level  string `yaml:"level"`
	Format string `yaml:"format"`
}

// sectionOf names the file section each schema type decodes, to turn
// yaml.v3's "field x not found in type config.fileLog" into the key a user
// wrote: "log.x".
var sectionOf = map[string]string{
	"config.fileConfig":         "",
	"config.fileBootstrapAdmin": "bootstrapAdmin.",
	"config.fileLog":            "log.",
	"config.fileDrivers":        "drivers.",
	"config.fileRuntime":        "runtime.",
	"config.fileGateway":        "gateway.",
	"config.fileGatewayPool":    "gateway.pool.",
	"config.fileWorkspaceFiles": "workspaceFiles.",
	"config.fileWorker":         "worker.",
	"config.fileMetrics":        "metrics.",
	"config.fileTLS":            "tls.",
	"config.fileSignIn":         "signIn.",
	"config.fileSignInLimits":   "signIn.account.",
	"config.fileSignInAddress":  "signIn.address.",
}

var notFoundRE = regexp.MustCompile(`field (\S+) not found in type (\S+)`)

// DecodeFile decodes the content of a config file as --config reads it,
// over the defaults, without the environment, flags or Validate: for the
// routing commands, which need only the Compute driver's section of the
// file the server runs with (the Helm chart's ConfigMap or a copy).
func DecodeFile(data []byte, drivers ComputeDrivers) (Config, error) {
	c := defaults()
	if err := decodeFile(data, &c, drivers); err != nil {
		return Config{}, fmt.Errorf("config file: %w", err)
	}
	return c, nil
}

// loadFile decodes the file over c, so that keys the file leaves out keep
// the values c already has.
func loadFile(path string, c *Config, drivers ComputeDrivers) error {
	data, err := os.ReadFile(path)
	if err != nil {
		return fmt.Errorf("config file: %w", err)
	}
	if err := decodeFile(data, c, drivers); err != nil {
		return fmt.Errorf("config file %s: %w", path, err)
	}
	return nil
}

func decodeFile(data []byte, c *Config, drivers ComputeDrivers) error {
	fc := fileConfig{
		DataDir:         c.DataDir,
		Listen:          c.Listen,
		DatabaseURL:     c.DatabaseURL,
		DatabaseURLFile: c.DatabaseURLFile,
		DatabaseMaxConn: c.DatabaseMaxConnections,
		DatabaseCache:   c.DatabaseReadCacheItems,
		PublicOrigin:    c.PublicOrigin,
		TrustedProxies:  c.TrustedProxies,
		SessionTTL:      c.SessionTTL,
		SessionIdle:     c.SessionIdleTimeout,
		HashConcurrency: c.PasswordHashConcurrency,
		MaxInFlight:     c.MaxRequestsInFlight,
		SignIn:          fileSignIn{Account: fileLimits(c.SignInAccount), Address: fileSignInAddress(fileLimits(c.SignInAddress))},
		TLS:             fileTLS{CertFile: c.TLSCertFile, KeyFile: c.TLSKeyFile},
		ShutdownTimeout: c.ShutdownTimeout,
		BootstrapAdmin:  fileBootstrapAdmin{Email: c.BootstrapAdminEmail, PasswordFile: c.BootstrapAdminPasswordFile},
		Log:             fileLog{Level: c.LogLevel, Format: c.LogFormat},
		Runtime:         fileRuntime{OpenClaw: c.OpenClawRuntime},
		Gateway: fileGateway{APIKeyFile: c.GatewayAPIKeyFile, CAFile: c.GatewayCAFile,
			Pool: fileGatewayPool{Enabled: fileBool{key: "gateway.pool.enabled", v: c.GatewayPool}, IdleTimeout: c.GatewayPoolIdleTimeout,
				MaxConnections: c.GatewayPoolMaxConnections}},
		WorkspaceFiles: fileWorkspaceFiles{Timeout: c.WorkspaceFileTimeout},
		Worker: fileWorker{Embedded: fileBool{key: "worker.embedded", v: c.EmbeddedWorker}, Concurrency: c.WorkerConcurrency,
			HealthListen: c.WorkerHealthListen},
		Metrics: fileMetrics{Listen: c.MetricsListen},
	}
	dec := yaml.NewDecoder(bytes.NewReader(data))
	dec.KnownFields(true)
	var msgs []string
	if err := dec.Decode(&fc); err != nil && !errors.Is(err, io.EOF) {
		var te *yaml.TypeError
		if !errors.As(err, &te) {
			return errors.New(describeYAMLError(err))
		}
		msgs = append(msgs, describeYAMLError(err))
	}
	driver, sections, computeMsgs := decodeCompute(&fc.Drivers.Compute, drivers)
	if len(computeMsgs) > 0 {
		msgs = append(msgs, computeMsgs...)
		slices.SortStableFunc(msgs, func(a, b string) int { return lineOf(a) - lineOf(b) })
	}
	if len(msgs) > 0 {
		return errors.New(strings.Join(msgs, "; "))
	}
	// A second document would be ignored by Decode; a file that looks
	// like it configures something it does not is refused instead.
	var extra yaml.Node
	if err := dec.Decode(&extra); !errors.Is(err, io.EOF) {
		if err != nil {
			return errors.New(describeYAMLError(err))
		}
		return fmt.Errorf("line %d: a second YAML document; the file must hold exactly one", extra.Line)
	}
	if driver != "" {
		c.ComputeDriver = driver
	}
	if sections != nil {
		c.ComputeSections = sections
	}
	*c = Config{
		DataDir:                    fc.DataDir,
		Listen:                     fc.Listen,
		DatabaseURL:                fc.DatabaseURL,
		DatabaseURLFile:            fc.DatabaseURLFile,
		DatabaseMaxConnections:     fc.DatabaseMaxConn,
		DatabaseReadCacheItems:     fc.DatabaseCache,
		PublicOrigin:               fc.PublicOrigin,
		TrustedProxies:             fc.TrustedProxies,
		SessionTTL:                 fc.SessionTTL,
		SessionIdleTimeout:         fc.SessionIdle,
		PasswordHashConcurrency:    fc.HashConcurrency,
		MaxRequestsInFlight:        fc.MaxInFlight,
		SignInAccount:              fc.SignIn.Account.limits(),
		SignInAddress:              fileSignInLimits(fc.SignIn.Address).limits(),
		TLSCertFile:                fc.TLS.CertFile,
		TLSKeyFile:                 fc.TLS.KeyFile,
		ShutdownTimeout:            fc.ShutdownTimeout,
		BootstrapAdminEmail:        fc.BootstrapAdmin.Email,
		BootstrapAdminPasswordFile: fc.BootstrapAdmin.PasswordFile,
		LogLevel:                   fc.Log.Level,
		LogFormat:                  fc.Log.Format,
		ComputeDriver:              c.ComputeDriver,
		ComputeSections:            c.ComputeSections,
		OpenClawRuntime:            fc.Runtime.OpenClaw,
		GatewayAPIKeyFile:          fc.Gateway.APIKeyFile,
		GatewayCAFile:              fc.Gateway.CAFile,
		GatewayPool:                fc.Gateway.Pool.Enabled.v,
		GatewayPoolIdleTimeout:     fc.Gateway.Pool.IdleTimeout,
		GatewayPoolMaxConnections:  fc.Gateway.Pool.MaxConnections,
		WorkspaceFileTimeout:       fc.WorkspaceFiles.Timeout,
		EmbeddedWorker:             fc.Worker.Embedded.v,
		WorkerConcurrency:          fc.Worker.Concurrency,
		WorkerHealthListen:         fc.Worker.HealthListen,
		MetricsListen:              fc.Metrics.Listen,
	}
	return nil
}

// decodeCompute takes the drivers.compute mapping apart: driver is the
// selected driver's name ("" when the file does not set it) and sections
// are the drivers' sections, kept undecoded for the drivers to check
// (nil when the file has none). A key that is neither driver nor the name
// of a driver that takes a section is an unknown key, as anywhere else in
// the file.
func decodeCompute(n *yaml.Node, drivers ComputeDrivers) (driver string, sections map[string]*Section, msgs []string) {
	if n.Kind == 0 || n.ShortTag() == "!!null" {
		return "", nil, nil // absent or empty
	}
	for n.Kind == yaml.AliasNode && n.Alias != nil {
		n = n.Alias
	}
	if n.Kind != yaml.MappingNode {
		return "", nil, []string{fmt.Sprintf("line %d: cannot unmarshal %s into a mapping", n.Line, describeNode(n))}
	}
	seen := map[string]int{}
	for i := 0; i+1 < len(n.Content); i += 2 {
		k, v := n.Content[i], n.Content[i+1]
		if line, dup := seen[k.Value]; dup {
			msgs = append(msgs, fmt.Sprintf("line %d: mapping key %q already defined at line %d", k.Line, k.Value, line))
			continue
		}
		seen[k.Value] = k.Line
		if k.Value == "driver" {
			if err := v.Decode(&driver); err != nil {
				msgs = append(msgs, describeYAMLError(err))
			}
			continue
		}
		if d, ok := drivers.Lookup(k.Value); !ok || k.Value == "" || d.Check == nil {
			msgs = append(msgs, fmt.Sprintf("line %d: unknown key %q", k.Line, computeKey+k.Value))
			continue
		}
		if v.ShortTag() == "!!null" {
			continue // "name:" with nothing under it is no section, as before
		}
		if sections == nil {
			sections = map[string]*Section{}
		}
		sections[k.Value] = &Section{Key: computeKey + k.Value, Node: *v}
	}
	return driver, sections, msgs
}

// describeNode is how yaml.v3 names a value in "cannot unmarshal" errors:
// the tag, and a scalar's text.
func describeNode(n *yaml.Node) string {
	if n.Kind == yaml.ScalarNode {
		return n.ShortTag() + " `" + n.Value + "`"
	}
	return n.ShortTag()
}

// describeYAMLError rewrites yaml.v3's messages in the user's terms: one
// "line N: ..." per problem, joined with "; ", and unknown fields named by
// their dotted key instead of a Go type.
func describeYAMLError(err error) string {
	var te *yaml.TypeError
	if !errors.As(err, &te) {
		return strings.TrimPrefix(err.Error(), "yaml: ")
	}
	msgs := make([]string, 0, len(te.Errors))
	for _, m := range te.Errors {
		if sm := notFoundRE.FindStringSubmatch(m); sm != nil {
			if section, ok := sectionOf[sm[2]]; ok {
				m = strings.Replace(m, sm[0], fmt.Sprintf("unknown key %q", section+sm[1]), 1)
			}
		}
		for typ := range sectionOf {
			m = strings.Replace(m, "into "+typ, "into a mapping", 1)
		}
		msgs = append(msgs, m)
	}
	return strings.Join(msgs, "; ")
}
