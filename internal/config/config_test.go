package config

import (
	"bytes"
	"log/slog"
	"maps"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/spf13/pflag"
	"gopkg.in/yaml.v3"
)

// absDataDir is what Load turns a relative data dir into.
func absDataDir(t *testing.T, dir string) string {
	t.Helper()
	abs, err := filepath.Abs(dir)
	if err != nil {
		t.Fatalf("filepath.Abs(%q): %v", dir, err)
	}
	return abs
}

func parseFlags(t *testing.T, args ...string) *pflag.FlagSet {
	t.Helper()
	fs := pflag.NewFlagSet("occ server", pflag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	RegisterFlags(fs, testDrivers)
	if err := fs.Parse(args); err != nil {
		t.Fatalf("parsing flags %q: %v", args, err)
	}
	return fs
}

func writeConfig(t *testing.T, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), "occ.yaml")
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("writing config file: %v", err)
	}
	return path
}

func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// fullFile sets every key, each to a value that differs from the default.
const fullFile = `
dataDir: /var/lib/occ
listen: 0.0.0.0:9090
databaseURL: postgres://occ@db.internal:5432/occ
databaseMaxConnections: 30
databaseReadCacheItems: 500
publicOrigin: https://occ.example.com
trustedProxies: [10.0.0.0/8, "fd00::/8"]
sessionTTL: 8h
sessionIdleTimeout: 30m
passwordHashConcurrency: 2
maxRequestsInFlight: 6
signIn:
  account: {freeFailures: 4, lockFailures: 8, baseDelay: 2s, maxDelay: 1m, lockout: 1h, window: 2h}
  address: {freeFailures: 30, lockFailures: 90, baseDelay: 3s, maxDelay: 2m, lockout: 20m, window: 30m}
tls:
  certFile: /etc/occ/tls.crt
  keyFile: /etc/occ/tls.key
shutdownTimeout: 30s
bootstrapAdmin:
  email: ops@example.com
  passwordFile: /run/secrets/occ-admin
log:
  level: debug
  format: json
drivers:
  compute:
    driver: disabled
runtime:
  openclaw: /opt/occ/runtime
gateway:
  apiKeyFile: /etc/openclaw/gateway-api-key/key
  caFile: /etc/openclaw/gateway-ca/ca.crt
  pool:
    enabled: true
    idleTimeout: 2m
    maxConnections: 128
workspaceFiles:
  timeout: 10s
worker:
  embedded: false
  concurrency: 8
  healthListen: 0.0.0.0:8081
metrics:
  listen: 127.0.0.1:9464
`

func fullFileConfig() Config {
	return Config{
		DataDir:                 "/var/lib/occ",
		Listen:                  "0.0.0.0:9090",
		DatabaseURL:             "postgres://occ@db.internal:5432/occ",
		DatabaseMaxConnections:  30,
		DatabaseReadCacheItems:  500,
		PublicOrigin:            "https://occ.example.com",
		TrustedProxies:          []string{"10.0.0.0/8", "fd00::/8"},
		SessionTTL:              8 * time.Hour,
		SessionIdleTimeout:      30 * time.Minute,
		PasswordHashConcurrency: 2,
		MaxRequestsInFlight:     6,
		SignInAccount: SignInLimits{FreeFailures: 4, LockFailures: 8, BaseDelay: 2 * time.Second, MaxDelay: time.Minute,
			Lockout: time.Hour, Window: 2 * time.Hour},
		SignInAddress: SignInLimits{FreeFailures: 30, LockFailures: 90, BaseDelay: 3 * time.Second, MaxDelay: 2 * time.Minute,
			Lockout: 20 * time.Minute, Window: 30 * time.Minute},
		TLSCertFile:                "/etc/occ/tls.crt",
		TLSKeyFile:                 "/etc/occ/tls.key",
		ShutdownTimeout:            30 * time.Second,
		BootstrapAdminEmail:        "ops@example.com",
		BootstrapAdminPasswordFile: "/run/secrets/occ-admin",
		LogLevel:                   "debug",
		LogFormat:                  "json",
		ComputeDriver:              "disabled",
		OpenClawRuntime:            "/opt/occ/runtime",
		GatewayAPIKeyFile:          "/etc/openclaw/gateway-api-key/key",
		GatewayCAFile:              "/etc/openclaw/gateway-ca/ca.crt",
		GatewayPool:                true,
		GatewayPoolIdleTimeout:     2 * time.Minute,
		GatewayPoolMaxConnections:  128,
		WorkspaceFileTimeout:       10 * time.Second,
		EmbeddedWorker:             false,
		WorkerConcurrency:          8,
		WorkerHealthListen:         "0.0.0.0:8081",
		MetricsListen:              "127.0.0.1:9464",
	}
}

func TestLoad(t *testing.T) {
	defaultWith := func(f func(*Config)) Config {
		c := Default()
		c.DataDir = absDataDir(t, DefaultDataDir)
		f(&c)
		return c
	}
	// Validate opens the TLS files: the file's pair must exist.
	cert, key := tlsPair(t)
	full := writeConfig(t, strings.NewReplacer("/etc/occ/tls.crt", cert, "/etc/occ/tls.key", key).Replace(fullFile))
	fullFileConfig := func() Config {
		c := fullFileConfig()
		c.TLSCertFile, c.TLSKeyFile = cert, key
		return c
	}
	partial := writeConfig(t, "listen: 127.0.0.1:7000\nlog:\n  level: warn\n")
	empty := writeConfig(t, "")
	commentsOnly := writeConfig(t, "# nothing set yet\n")

	tests := []struct {
		name  string
		args  []string
		env   map[string]string
		want  Config
		check func(*testing.T, Config) // for cases whose want depends on the test
	}{
		{
			name: "defaults",
			want: defaultWith(func(*Config) {}),
		},
		{
			name: "empty file keeps defaults",
			args: []string{"--config", empty},
			want: defaultWith(func(*Config) {}),
		},
		{
			name: "file of comments keeps defaults",
			env:  map[string]string{"OCC_CONFIG": commentsOnly},
			want: defaultWith(func(*Config) {}),
		},
		{
			name: "file sets every key",
			args: []string{"--config", full},
			want: fullFileConfig(),
		},
		{
			name: "file from OCC_CONFIG",
			env:  map[string]string{"OCC_CONFIG": full},
			want: fullFileConfig(),
		},
		{
			name: "--config wins over OCC_CONFIG",
			args: []string{"--config", partial},
			env:  map[string]string{"OCC_CONFIG": full},
			want: defaultWith(func(c *Config) {
				c.Listen = "127.0.0.1:7000"
				c.PublicOrigin = "http://127.0.0.1:7000"
				c.LogLevel = "warn"
			}),
		},
		{
			name: "partial file keeps other defaults and derives the origin from its listen",
			args: []string{"--config", partial},
			want: defaultWith(func(c *Config) {
				c.Listen = "127.0.0.1:7000"
				c.PublicOrigin = "http://127.0.0.1:7000"
				c.LogLevel = "warn"
			}),
		},
		{
			name: "env overrides file",
			args: []string{"--config", full},
			env: map[string]string{
				"OCC_LISTEN":          "127.0.0.1:9999",
				"OCC_SESSION_TTL":     "1h",
				"OCC_TRUSTED_PROXIES": "192.168.0.0/16, 172.16.0.0/12",
				"OCC_LOG_LEVEL":       "ERROR",
				"OCC_LOG_FORMAT":      "text",
			},
			want: func() Config {
				c := fullFileConfig()
				c.Listen = "127.0.0.1:9999"
				c.SessionTTL = time.Hour
				c.TrustedProxies = []string{"192.168.0.0/16", "172.16.0.0/12"}
				c.LogLevel = "error"
				c.LogFormat = "text"
				return c
			}(),
		},
		{
			name: "empty env var counts as unset",
			args: []string{"--config", full},
			env:  map[string]string{"OCC_LISTEN": "", "OCC_DATABASE_URL": ""},
			want: fullFileConfig(),
		},
		{
			name: "flag overrides env",
			args: []string{"--listen", "127.0.0.1:1234", "--session-ttl=30m", "--bootstrap-admin-email", "root@example.org"},
			env: map[string]string{
				"OCC_LISTEN":                "127.0.0.1:9999",
				"OCC_SESSION_TTL":           "1h",
				"OCC_BOOTSTRAP_ADMIN_EMAIL": "env@example.org",
				"OCC_SHUTDOWN_TIMEOUT":      "5s",
			},
			want: defaultWith(func(c *Config) {
				c.Listen = "127.0.0.1:1234"
				c.PublicOrigin = "http://127.0.0.1:1234"
				c.SessionTTL = 30 * time.Minute
				c.ShutdownTimeout = 5 * time.Second
				c.BootstrapAdminEmail = "root@example.org"
			}),
		},
		{
			name: "flag overrides env overrides file",
			args: []string{"--config", full, "--log-level", "info"},
			env:  map[string]string{"OCC_LOG_LEVEL": "warn"},
			want: func() Config {
				c := fullFileConfig()
				c.LogLevel = "info"
				return c
			}(),
		},
		{
			name: "empty flag clears a list set by env",
			args: []string{"--trusted-proxies="},
			env:  map[string]string{"OCC_TRUSTED_PROXIES": "10.0.0.0/8"},
			want: defaultWith(func(*Config) {}),
		},
		{
			name: "explicit public origin is kept when listen changes",
			args: []string{"--listen", "127.0.0.1:1234"},
			env:  map[string]string{"OCC_PUBLIC_ORIGIN": "https://occ.example.com"},
			want: defaultWith(func(c *Config) {
				c.Listen = "127.0.0.1:1234"
				c.PublicOrigin = "https://occ.example.com"
			}),
		},
		{
			name: "relative data dir is made absolute",
			env:  map[string]string{"OCC_DATA_DIR": "state/occ"},
			want: defaultWith(func(c *Config) { c.DataDir = absDataDir(t, "state/occ") }),
		},
		{
			name: "empty database URL means embedded",
			args: []string{"--config", full, "--database-url="},
			want: func() Config {
				c := fullFileConfig()
				c.DatabaseURL = ""
				return c
			}(),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := load(parseFlags(t, tt.args...), mapEnv(tt.env))
			if err != nil {
				t.Fatalf("load(%q, %v): %v", tt.args, tt.env, err)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("load(%q, %v) mismatch (-want +got):\n%s", tt.args, tt.env, diff)
			}
		})
	}
}

func TestLoadNilFlagsAndEnv(t *testing.T) {
	got, err := load(nil, nil)
	if err != nil {
		t.Fatalf("load(nil, nil): %v", err)
	}
	want := Default()
	want.DataDir = absDataDir(t, DefaultDataDir)
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("load(nil, nil) mismatch (-want +got):\n%s", diff)
	}
}

// TestEverySpellingAgrees sets each option once by flag, once by env and
// once in the file, and expects the same Config each time: the options
// table, the file schema and the flag registration cannot drift apart.
func TestEverySpellingAgrees(t *testing.T) {
	urlFile := filepath.Join(t.TempDir(), "database-url")
	if err := os.WriteFile(urlFile, []byte("postgres://occ@127.0.0.1:5433/occ"), 0o600); err != nil {
		t.Fatal(err)
	}
	cert, key := tlsPair(t)
	// partner is set through the environment beside an option that is
	// valid only with it; each load below gets it.
	partner := map[string]map[string]string{
		"tls-cert-file": {"OCC_TLS_KEY_FILE": key},
		"tls-key-file":  {"OCC_TLS_CERT_FILE": cert},
	}
	values := map[string]string{
		"data-dir":                      "/srv/occ",
		"listen":                        "127.0.0.1:4242",
		"database-url":                  "postgres://occ@127.0.0.1:5432/occ",
		"database-url-file":             urlFile,
		"public-origin":                 "https://occ.example.com",
		"trusted-proxies":               "10.1.0.0/16",
		"session-ttl":                   "2h",
		"session-idle-timeout":          "20m",
		"password-hash-concurrency":     "3",
		"max-requests-in-flight":        "12",
		"database-max-connections":      "7",
		"database-read-cache-items":     "0",
		"worker-concurrency":            "9",
		"sign-in-account-free-failures": "5",
		"sign-in-account-lock-failures": "12",
		"sign-in-account-base-delay":    "2s",
		"sign-in-account-max-delay":     "1m",
		"sign-in-account-lockout":       "30m",
		"sign-in-account-window":        "1h",
		"sign-in-address-free-failures": "40",
		"sign-in-address-lock-failures": "100",
		"sign-in-address-base-delay":    "3s",
		"sign-in-address-max-delay":     "2m",
		"sign-in-address-lockout":       "45m",
		"sign-in-address-window":        "2h",
		"tls-cert-file":                 cert,
		"tls-key-file":                  key,
		"shutdown-timeout":              "3s",
		"bootstrap-admin-email":         "first@example.com",
		"bootstrap-admin-password-file": "/run/secrets/pw",
		"log-level":                     "debug",
		"log-format":                    "json",
		"compute-driver":                "disabled",
		"openclaw-runtime":              "/opt/occ/runtime",
		"gateway-api-key-file":          "/etc/occ/key",
		"gateway-ca-file":               "/etc/occ/ca.pem",
		"workspace-file-timeout":        "5s",
		"gateway-pool":                  "true",
		"gateway-pool-idle-timeout":     "90s",
		"gateway-pool-max-connections":  "4096",
		"embedded-worker":               "false",
		"metrics-listen":                "127.0.0.1:9464",
		"worker-health-listen":          "127.0.0.1:8081",
	}
	for _, o := range options {
		t.Run(o.flag, func(t *testing.T) {
			v, ok := values[o.flag]
			if !ok {
				t.Fatalf("no test value for option --%s; add one", o.flag)
			}
			args := []string{"--" + o.flag, v}
			if o.typ == "bool" {
				args = []string{"--" + o.flag + "=" + v} // pflag's rule for bool flags
			}
			env := func(m map[string]string) func(string) string {
				all := map[string]string{}
				maps.Copy(all, partner[o.flag])
				maps.Copy(all, m)
				return mapEnv(all)
			}
			byFlag, err := load(parseFlags(t, args...), env(nil))
			if err != nil {
				t.Fatalf("load(--%s %s): %v", o.flag, v, err)
			}
			byEnv, err := load(nil, env(map[string]string{o.env: v}))
			if err != nil {
				t.Fatalf("load(%s=%s): %v", o.env, v, err)
			}
			if base, _ := load(nil, nil); cmp.Equal(base, byFlag) {
				t.Errorf("--%s %s changed nothing; pick a test value that differs from the default", o.flag, v)
			}
			if diff := cmp.Diff(byFlag, byEnv); diff != "" {
				t.Errorf("flag --%s and env %s disagree (-flag +env):\n%s", o.flag, o.env, diff)
			}
			// Build the YAML for a dotted key: "log.level" -> "log:\n  level: v".
			keys := strings.Split(o.yaml, ".")
			var b strings.Builder
			for i, k := range keys {
				b.WriteString(strings.Repeat("  ", i) + k + ":")
				if i < len(keys)-1 {
					b.WriteString("\n")
				}
			}
			b.WriteString(" " + quoteYAML(o.flag, v) + "\n")
			byFile, err := load(nil, env(map[string]string{EnvConfig: writeConfig(t, b.String())}))
			if err != nil {
				t.Fatalf("load(file %q): %v", b.String(), err)
			}
			if diff := cmp.Diff(byFlag, byFile); diff != "" {
				t.Errorf("flag --%s and YAML key %s disagree (-flag +file):\n%s", o.flag, o.yaml, diff)
			}
		})
	}
}

func quoteYAML(flag, v string) string {
	switch flag {
	case "trusted-proxies":
		return "[" + v + "]"
	case "embedded-worker", "worker-concurrency", "password-hash-concurrency", "max-requests-in-flight", "database-max-connections", "database-read-cache-items", "gateway-pool", "gateway-pool-max-connections",
		"sign-in-account-free-failures", "sign-in-account-lock-failures",
		"sign-in-address-free-failures", "sign-in-address-lock-failures":
		return v // a YAML boolean or number, not a string
	}
	return `"` + v + `"`
}

// TestSectionOfNamesEverySection walks the file schema from fileConfig and
// checks that sectionOf names every struct type in it with the dotted path
// of its YAML keys, so that an unknown key in any section, however deep,
// is reported as the key the user wrote.
func TestSectionOfNamesEverySection(t *testing.T) {
	want := map[string]string{}
	var walk func(reflect.Type, string)
	walk = func(typ reflect.Type, prefix string) {
		want[typ.String()] = prefix
		for f := range typ.Fields() {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				ft = ft.Elem()
			}
			name, _, _ := strings.Cut(f.Tag.Get("yaml"), ",")
			// A type that decodes itself (fileBool) is a value, not a section.
			if reflect.PointerTo(ft).Implements(reflect.TypeFor[yaml.Unmarshaler]()) {
				continue
			}
			if ft.Kind() == reflect.Struct && ft.PkgPath() == typ.PkgPath() && name != "" {
				walk(ft, prefix+name+".")
			}
		}
	}
	walk(reflect.TypeFor[fileConfig](), "")
	if diff := cmp.Diff(want, sectionOf); diff != "" {
		t.Errorf("sectionOf (-the schema's sections +the map):\n%s", diff)
	}
}

func TestLoadFileErrors(t *testing.T) {
	tests := []struct {
		name    string
		content string
		want    string // substring of the error
	}{
		{"unknown top-level key", "listen: 127.0.0.1:8080\ntrustedProxy: 10.0.0.0/8\n", `line 2: unknown key "trustedProxy"`},
		{"unknown nested key", "log:\n  level: info\n  lvl: debug\n", `line 3: unknown key "log.lvl"`},
		{"unknown key in other section", "bootstrapAdmin:\n  password: hunter2\n", `line 2: unknown key "bootstrapAdmin.password"`},
		{"unknown key two levels down", "gateway:\n  pool:\n    idle: 1s\n", `line 3: unknown key "gateway.pool.idle"`},
		{"section two levels down must be a mapping", "gateway:\n  pool: on\n", "line 2: cannot unmarshal !!str `on` into a mapping"},
		{"snake case is not accepted", "data_dir: /tmp/x\n", `line 1: unknown key "data_dir"`},
		{"two unknown keys both named", "a: 1\nb: 2\n", `line 1: unknown key "a"; line 2: unknown key "b"`},
		{"repeated key", "listen: a:1\nlisten: b:2\n", `line 2: mapping key "listen" already defined at line 1`},
		{"two documents", "listen: 127.0.0.1:1\n---\nlisten: 127.0.0.1:2\n", "line 2: a second YAML document"},
		{"bad duration", "sessionTTL: soon\n", "line 1: cannot unmarshal !!str `soon` into time.Duration"},
		{"number is not a duration", "shutdownTimeout: 30\n", "line 1: cannot unmarshal !!int `30` into time.Duration"},
		{"section must be a mapping", "log: debug\n", "line 1: cannot unmarshal !!str `debug` into a mapping"},
		{"top level must be a mapping", "- listen\n", "line 1: cannot unmarshal !!seq into a mapping"},
		{"syntax error", "listen: [\n", "line 1"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := writeConfig(t, tt.content)
			_, err := load(parseFlags(t, "--config", path), nil)
			if err == nil {
				t.Fatalf("load(file %q) succeeded, want error containing %q", tt.content, tt.want)
			}
			if !strings.Contains(err.Error(), tt.want) || !strings.Contains(err.Error(), path) {
				t.Errorf("load(file %q) error = %q, want it to name %s and contain %q", tt.content, err, path, tt.want)
			}
		})
	}

	t.Run("missing file", func(t *testing.T) {
		path := filepath.Join(t.TempDir(), "absent.yaml")
		_, err := load(nil, mapEnv(map[string]string{EnvConfig: path}))
		if err == nil || !strings.Contains(err.Error(), "no such file") {
			t.Errorf("load(OCC_CONFIG=%s) error = %v, want no such file", path, err)
		}
	})
}

func TestLoadEnvAndFlagErrors(t *testing.T) {
	_, err := load(nil, mapEnv(map[string]string{"OCC_SESSION_TTL": "12"}))
	if want := `OCC_SESSION_TTL: "12" is not a duration`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("load(OCC_SESSION_TTL=12) error = %v, want %q", err, want)
	}

	fs := pflag.NewFlagSet("occ server", pflag.ContinueOnError)
	fs.SetOutput(&bytes.Buffer{})
	RegisterFlags(fs, testDrivers)
	err = fs.Parse([]string{"--shutdown-timeout", "later"})
	if want := `"later" is not a duration`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("parsing --shutdown-timeout later: error = %v, want %q", err, want)
	}

	_, err = load(nil, mapEnv(map[string]string{"OCC_EMBEDDED_WORKER": "no"}))
	if want := `OCC_EMBEDDED_WORKER: "no" is not true or false`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("load(OCC_EMBEDDED_WORKER=no) error = %v, want %q", err, want)
	}
	for _, tt := range []struct {
		args []string
		want bool
	}{{nil, true}, {[]string{"--embedded-worker"}, true}, {[]string{"--embedded-worker=false"}, false}, {[]string{"--embedded-worker=TRUE"}, true}} {
		c, err := load(parseFlags(t, tt.args...), nil)
		if err != nil || c.EmbeddedWorker != tt.want {
			t.Errorf("load(%q) = EmbeddedWorker %v, %v; want %v", tt.args, c.EmbeddedWorker, err, tt.want)
		}
	}

	// Validation runs on the merged result, whatever the source.
	_, err = load(parseFlags(t, "--listen", "8080"), nil)
	if want := `listen address "8080" is not host:port`; err == nil || !strings.Contains(err.Error(), want) {
		t.Errorf("load(--listen 8080) error = %v, want %q", err, want)
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		change func(*Config)
		want   string // "" means valid; otherwise the whole error text
	}{
		{"default", func(*Config) {}, ""},
		{"all interfaces", func(c *Config) { c.Listen = ":8080" }, ""},
		{"IPv6 listen", func(c *Config) { c.Listen = "[::1]:8080" }, ""},
		{"ephemeral port", func(c *Config) { c.Listen = "127.0.0.1:0" }, ""},
		{"https origin with port", func(c *Config) { c.PublicOrigin = "https://occ.example.com:8443" }, ""},
		{"IPv6 origin", func(c *Config) { c.PublicOrigin = "http://[::1]:8080" }, ""},
		{"trusted proxies", func(c *Config) { c.TrustedProxies = []string{"10.0.0.0/8", "192.0.2.10/32", "fd00::/8"} }, ""},
		{"postgres URL", func(c *Config) { c.DatabaseURL = "postgres://occ:secret@127.0.0.1:5432/occ?sslmode=disable" }, ""},

		{"metrics listener", func(c *Config) { c.MetricsListen = "127.0.0.1:9464" }, ""},
		{"database pool at its cap", func(c *Config) { c.DatabaseMaxConnections = MaxDatabaseMaxConnections }, ""},
		{"database pool one past its cap", func(c *Config) { c.DatabaseMaxConnections = MaxDatabaseMaxConnections + 1 }, "database max connections must be between 1 and 1000, got 1001"},
		{"database pool of one connection", func(c *Config) { c.DatabaseMaxConnections = 1 }, ""},
		{"read cache at its cap", func(c *Config) { c.DatabaseReadCacheItems = MaxDatabaseReadCacheItems }, ""},
		{"read cache one past its cap", func(c *Config) { c.DatabaseReadCacheItems = MaxDatabaseReadCacheItems + 1 },
			"database read cache items must be between 0 (off) and 1000000, got 1000001"},
		{"read cache off", func(c *Config) { c.DatabaseReadCacheItems = 0 }, ""},
		{"read cache below off", func(c *Config) { c.DatabaseReadCacheItems = -1 }, "database read cache items must be between 0 (off) and 1000000, got -1"},
		{"database pool without connections", func(c *Config) { c.DatabaseMaxConnections = 0 }, "database max connections must be between 1 and 1000, got 0"},
		{"worker concurrency at its cap", func(c *Config) { c.WorkerConcurrency = MaxWorkerConcurrency }, ""},
		{"worker concurrency one past its cap", func(c *Config) { c.WorkerConcurrency = MaxWorkerConcurrency + 1 }, "worker concurrency must be between 1 and 64, got 65"},
		{"worker of one loop", func(c *Config) { c.WorkerConcurrency = 1 }, ""},
		{"worker without loops", func(c *Config) { c.WorkerConcurrency = 0 }, "worker concurrency must be between 1 and 64, got 0"},
		{"gateway pool at its cap", func(c *Config) { c.GatewayPool, c.GatewayPoolMaxConnections = true, MaxGatewayPoolMaxConnections }, ""},
		{"gateway pool one past its cap", func(c *Config) { c.GatewayPoolMaxConnections = MaxGatewayPoolMaxConnections + 1 }, "gateway pool max connections must be between 1 and 4096, got 4097"},
		{"gateway pool at one connection", func(c *Config) { c.GatewayPoolMaxConnections = 1 }, ""},
		{"gateway pool without connections", func(c *Config) { c.GatewayPoolMaxConnections = 0 }, "gateway pool max connections must be between 1 and 4096, got 0"},
		{"password hash concurrency at its cap", func(c *Config) { c.PasswordHashConcurrency = MaxPasswordHashConcurrency }, ""},
		{"password hash concurrency one past its cap", func(c *Config) { c.PasswordHashConcurrency = MaxPasswordHashConcurrency + 1 },
			"password hash concurrency must be between 0 (default) and 64, got 65"},
		{"password hash concurrency negative", func(c *Config) { c.PasswordHashConcurrency = -1 },
			"password hash concurrency must be between 0 (default) and 64, got -1"},
		{"requests in flight at its cap", func(c *Config) { c.MaxRequestsInFlight = MaxMaxRequestsInFlight }, ""},
		{"requests in flight one past its cap", func(c *Config) { c.MaxRequestsInFlight = MaxMaxRequestsInFlight + 1 },
			"max requests in flight must be between 0 (default) and 100000, got 100001"},
		{"requests in flight negative", func(c *Config) { c.MaxRequestsInFlight = -1 },
			"max requests in flight must be between 0 (default) and 100000, got -1"},
		{"requests in flight at one", func(c *Config) { c.MaxRequestsInFlight = 1 }, ""},
		{"gateway pool idle timeout", func(c *Config) { c.GatewayPoolIdleTimeout = 0 }, "gateway pool idle timeout must be positive, got 0s"},
		{"metrics listener without port", func(c *Config) { c.MetricsListen = "localhost" }, `metrics listen address "localhost" is not host:port (like 127.0.0.1:8080)`},
		{"metrics listener on the API address", func(c *Config) { c.MetricsListen = c.Listen }, `metrics listen address "127.0.0.1:8080" must differ from the API listen address`},
		{"metrics listener on the API port, every address", func(c *Config) { c.MetricsListen = ":8080" }, `metrics listen address ":8080" must differ from the API listen address`},
		{"metrics listener on the API port, the wildcard", func(c *Config) { c.Listen, c.MetricsListen = "0.0.0.0:8080", "127.0.0.1:8080" }, `metrics listen address "127.0.0.1:8080" must differ from the API listen address`},
		{"worker health listener", func(c *Config) { c.WorkerHealthListen = "0.0.0.0:8081" }, ""},
		// occ server ignores it, so one file can serve API and worker Pods.
		{"worker health listener on the API address", func(c *Config) { c.WorkerHealthListen = c.Listen }, ""},
		{"worker health listener without port", func(c *Config) { c.WorkerHealthListen = "localhost" },
			`worker health listen address "localhost" is not host:port (like 127.0.0.1:8080)`},
		{"worker health listener on the metrics address", func(c *Config) { c.MetricsListen, c.WorkerHealthListen = "127.0.0.1:9464", "127.0.0.1:9464" },
			`worker health listen address "127.0.0.1:9464" must differ from the metrics listen address`},
		{"empty data dir", func(c *Config) { c.DataDir = " " }, "data dir must not be empty"},
		{"listen without port", func(c *Config) { c.Listen = "localhost" }, `listen address "localhost" is not host:port (like 127.0.0.1:8080)`},
		{"listen port name", func(c *Config) { c.Listen = "127.0.0.1:http" }, `listen address "127.0.0.1:http": port "http" is not a number from 0 to 65535`},
		{"listen port too big", func(c *Config) { c.Listen = "127.0.0.1:70000" }, `listen address "127.0.0.1:70000": port "70000" is not a number from 0 to 65535`},
		{"SQLite URL", func(c *Config) { c.DatabaseURL = "sqlite:///var/lib/occ/occ.db" }, ""},
		{"SQLite file URL", func(c *Config) { c.DatabaseURL = "file:occ.db" }, ""},
		{"database URL without scheme not echoed", func(c *Config) { c.DatabaseURL = "occ:s3cret@db" }, "database URL must start with postgres://, postgresql://, sqlite: or file: (the value is not shown because it may contain a password)"},
		{"database URL scheme", func(c *Config) { c.DatabaseURL = "mysql://occ:s3cret@db/occ" }, "database URL must start with postgres://, postgresql://, sqlite: or file: (the value is not shown because it may contain a password)"},
		{"empty origin", func(c *Config) { c.PublicOrigin = "" }, "public origin must not be empty"},
		{"origin scheme", func(c *Config) { c.PublicOrigin = "ftp://occ.example.com" }, `public origin "ftp://occ.example.com" must start with http:// or https://`},
		{"origin without scheme", func(c *Config) { c.PublicOrigin = "occ.example.com" }, `public origin "occ.example.com" must start with http:// or https://`},
		{"origin not absolute", func(c *Config) { c.PublicOrigin = "http:occ" }, `public origin "http:occ" must be absolute, like https://occ.example.com`},
		{"origin trailing slash", func(c *Config) { c.PublicOrigin = "https://occ.example.com/" }, `public origin "https://occ.example.com/" must not end with a slash`},
		{"origin path", func(c *Config) { c.PublicOrigin = "https://occ.example.com/occ" }, `public origin "https://occ.example.com/occ" must not contain a path`},
		{"origin query", func(c *Config) { c.PublicOrigin = "https://occ.example.com?x=1" }, `public origin "https://occ.example.com?x=1" must not contain a query`},
		{"origin empty query", func(c *Config) { c.PublicOrigin = "https://occ.example.com?" }, `public origin "https://occ.example.com?" must not contain a query`},
		{"origin fragment", func(c *Config) { c.PublicOrigin = "https://occ.example.com#top" }, `public origin "https://occ.example.com#top" must not contain a fragment`},
		{"origin user info", func(c *Config) { c.PublicOrigin = "https://me@occ.example.com" }, `public origin "https://me@occ.example.com" must not contain a user name or password`},
		{"origin default port", func(c *Config) { c.PublicOrigin = "https://occ.example.com:443" }, `public origin "https://occ.example.com:443" must omit the default port :443 (browsers send https://occ.example.com)`},
		{"origin empty port", func(c *Config) { c.PublicOrigin = "https://occ.example.com:" }, `public origin "https://occ.example.com:" has an empty port`},
		{"origin upper case", func(c *Config) { c.PublicOrigin = "HTTPS://OCC.example.com" }, `public origin "HTTPS://OCC.example.com" must be written as "https://occ.example.com"`},
		{"proxy not CIDR", func(c *Config) { c.TrustedProxies = []string{"10.0.0.1"} }, `trusted proxy "10.0.0.1" is not a CIDR (like 10.0.0.0/8 or 192.0.2.10/32)`},
		{"proxy host bits", func(c *Config) { c.TrustedProxies = []string{"10.1.2.3/8"} }, `trusted proxy "10.1.2.3/8" has host bits set; did you mean 10.0.0.0/8?`},
		{"proxy everything v4", func(c *Config) { c.TrustedProxies = []string{"0.0.0.0/0"} }, `trusted proxy "0.0.0.0/0" would trust every address; list the proxies' own ranges`},
		{"proxy everything v6", func(c *Config) { c.TrustedProxies = []string{"::/0"} }, `trusted proxy "::/0" would trust every address; list the proxies' own ranges`},
		{"zero session TTL", func(c *Config) { c.SessionTTL = 0 }, "session TTL must be positive, got 0s"},
		// The file deadline: the reference's minimum is 1 ms, and 0 is refused.
		{"workspace file timeout of 1ms", func(c *Config) { c.WorkspaceFileTimeout = time.Millisecond }, ""},
		{"zero workspace file timeout", func(c *Config) { c.WorkspaceFileTimeout = 0 }, "workspace file timeout must be positive, got 0s"},
		{"negative shutdown timeout", func(c *Config) { c.ShutdownTimeout = -time.Second }, "shutdown timeout must be positive, got -1s"},
		{"email without at", func(c *Config) { c.BootstrapAdminEmail = "admin" }, `bootstrap admin email "admin" is not an email address like admin@example.com`},
		{"email with name", func(c *Config) { c.BootstrapAdminEmail = "Admin <admin@example.com>" }, `bootstrap admin email "Admin <admin@example.com>" is not an email address like admin@example.com`},
		{"empty email", func(c *Config) { c.BootstrapAdminEmail = "" }, `bootstrap admin email "" is not an email address like admin@example.com`},
		{"log level", func(c *Config) { c.LogLevel = "verbose" }, `log level "verbose" is not one of debug, info, warn, error`},
		{"log level case", func(c *Config) { c.LogLevel = "INFO" }, `log level "INFO" is not one of debug, info, warn, error`},
		{"log format", func(c *Config) { c.LogFormat = "logfmt" }, `log format "logfmt" is not one of text, json`},

		// Sign-in limits: at each bound and one past it.
		{"sign-in free failures 0", func(c *Config) { c.SignInAccount.FreeFailures = 0 }, ""},
		{"sign-in free failures -1", func(c *Config) { c.SignInAccount.FreeFailures = -1 }, "sign-in account free failures must be between 0 and 1000000, got -1"},
		{"sign-in lock failures at the maximum", func(c *Config) { c.SignInAddress.LockFailures = MaxSignInFailures }, ""},
		{"sign-in lock failures past the maximum", func(c *Config) { c.SignInAddress.LockFailures = MaxSignInFailures + 1 },
			"sign-in address lock failures must be between 1 and 1000000, got 1000001"},
		{"sign-in free failures at the maximum", func(c *Config) {
			c.SignInAddress.FreeFailures, c.SignInAddress.LockFailures = MaxSignInFailures-1, MaxSignInFailures
		}, ""},
		{"sign-in free failures past the maximum", func(c *Config) { c.SignInAddress.FreeFailures = MaxSignInFailures + 1 },
			"sign-in address free failures must be between 0 and 1000000, got 1000001"},
		{"sign-in lock failures 1", func(c *Config) { c.SignInAccount.FreeFailures, c.SignInAccount.LockFailures = 0, 1 }, ""},
		{"sign-in lock failures 0", func(c *Config) { c.SignInAccount.FreeFailures, c.SignInAccount.LockFailures = 0, 0 },
			"sign-in account lock failures must be between 1 and 1000000, got 0"},
		{"sign-in lock one past free", func(c *Config) { c.SignInAccount.LockFailures = c.SignInAccount.FreeFailures + 1 }, ""},
		{"sign-in lock equal to free", func(c *Config) { c.SignInAccount.LockFailures = c.SignInAccount.FreeFailures },
			"sign-in account lock failures (3) must be more than free failures (3)"},
		{"sign-in durations at 1s", func(c *Config) {
			c.SignInAccount = SignInLimits{FreeFailures: 1, LockFailures: 2, BaseDelay: time.Second, MaxDelay: time.Second, Lockout: time.Second, Window: time.Second}
		}, ""},
		{"sign-in durations under 1s", func(c *Config) {
			c.SignInAccount = SignInLimits{FreeFailures: 1, LockFailures: 2, BaseDelay: 999 * time.Millisecond, MaxDelay: time.Second, Lockout: 0, Window: -time.Second}
		}, "sign-in account base delay must be between 1s and 168h, got 999ms\nsign-in account lockout must be between 1s and 168h, got 0s\nsign-in account window must be between 1s and 168h, got -1s"},
		{"sign-in durations at the maximum", func(c *Config) {
			c.SignInAddress = SignInLimits{FreeFailures: 1, LockFailures: 2, BaseDelay: MaxSignInDuration, MaxDelay: MaxSignInDuration, Lockout: MaxSignInDuration, Window: MaxSignInDuration}
		}, ""},
		{"sign-in durations past the maximum", func(c *Config) {
			c.SignInAddress.MaxDelay, c.SignInAddress.Lockout = MaxSignInDuration+time.Second, MaxSignInDuration+time.Nanosecond
		}, "sign-in address max delay must be between 1s and 168h, got 168h0m1s\nsign-in address lockout must be between 1s and 168h, got 168h0m0.000000001s"},
		{"sign-in max delay below base delay", func(c *Config) { c.SignInAccount.MaxDelay = c.SignInAccount.BaseDelay - time.Second + time.Second/2 },
			"sign-in account max delay must be between 1s and 168h, got 500ms\nsign-in account max delay (500ms) must not be less than base delay (1s)"},
		{"sign-in max delay equal to base delay", func(c *Config) { c.SignInAccount.MaxDelay = c.SignInAccount.BaseDelay }, ""},
		{"every problem reported", func(c *Config) {
			c.Listen = "x"
			c.SessionTTL = 0
			c.LogFormat = "xml"
		}, "listen address \"x\" is not host:port (like 127.0.0.1:8080)\nsession TTL must be positive, got 0s\nlog format \"xml\" is not one of text, json"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := Default()
			tt.change(&c)
			err := c.Validate(testDrivers)
			got := ""
			if err != nil {
				got = err.Error()
			}
			if got != tt.want {
				t.Errorf("Validate() of %+v:\n got  %q\n want %q", c, got, tt.want)
			}
		})
	}
}

func TestDefaultPublicOrigin(t *testing.T) {
	tests := map[string]string{
		"127.0.0.1:8080": "http://127.0.0.1:8080",
		":8080":          "http://localhost:8080",
		"0.0.0.0:80":     "http://localhost:80",
		"[::]:8080":      "http://localhost:8080",
		"[::1]:8080":     "http://[::1]:8080",
		"occ.local:9000": "http://occ.local:9000",
		"no-port":        "",
	}
	for listen, want := range tests {
		if got := DefaultPublicOrigin(listen); got != want {
			t.Errorf("DefaultPublicOrigin(%q) = %q, want %q", listen, got, want)
		}
	}
}

func TestLogValueRedactsDatabasePassword(t *testing.T) {
	c := Default()
	c.DatabaseURL = "postgres://occ:s3cret@db:5432/occ?password=also-secret"
	var buf bytes.Buffer
	slog.New(slog.NewTextHandler(&buf, nil)).Info("config", "config", c)
	if strings.Contains(buf.String(), "s3cret") || strings.Contains(buf.String(), "also-secret") {
		t.Errorf("logged config leaks the database password: %s", buf.String())
	}
	if !strings.Contains(buf.String(), "db:5432") {
		t.Errorf("logged config lost the database host: %s", buf.String())
	}
}

func TestTrustedProxyPrefixes(t *testing.T) {
	c := Default()
	c.TrustedProxies = []string{"10.0.0.0/8", "fd00::/8"}
	got, err := c.TrustedProxyPrefixes()
	if err != nil {
		t.Fatalf("TrustedProxyPrefixes(): %v", err)
	}
	var gotS []string
	for _, p := range got {
		gotS = append(gotS, p.String())
	}
	if diff := cmp.Diff(c.TrustedProxies, gotS); diff != "" {
		t.Errorf("TrustedProxyPrefixes() mismatch (-want +got):\n%s", diff)
	}
}

// TestDocsNameEveryOption keeps docs/configuration.md complete: every
// flag, environment variable and YAML key must appear in it.
func TestDocsNameEveryOption(t *testing.T) {
	data, err := os.ReadFile(filepath.Join("..", "..", "docs", "configuration.md"))
	if err != nil {
		t.Fatalf("reading docs/configuration.md: %v", err)
	}
	doc := string(data)
	names := []string{"--" + FlagConfig, EnvConfig}
	for _, o := range options {
		names = append(names, "--"+o.flag, o.env, "`"+o.yaml+"`")
	}
	for _, n := range names {
		if !strings.Contains(doc, n) {
			t.Errorf("docs/configuration.md does not mention %s", n)
		}
	}
}

func TestShortDuration(t *testing.T) {
	for d, want := range map[time.Duration]string{
		12 * time.Hour:          "12h",
		90 * time.Minute:        "1h30m",
		5 * time.Minute:         "5m",
		10 * time.Second:        "10s",
		1500 * time.Millisecond: "1.5s",
	} {
		if got := shortDuration(d); got != want {
			t.Errorf("shortDuration(%v) = %q, want %q", d, got, want)
		}
	}
}

// FuzzConfigFile feeds arbitrary bytes to the file decoder: it must never
// panic, and whatever it accepts must be a Config that Load could go on to
// validate without crashing.
func FuzzConfigFile(f *testing.F) {
	for _, seed := range []string{
		fullFile,
		"",
		"log:\n  lvl: debug\n",
		"listen: a:1\n---\nlisten: b:2\n",
		"sessionTTL: 30\n",
		"trustedProxies: {a: b}\n",
		"bootstrapAdmin: [x]\n",
		"&a [*a]\n",
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		c := defaults()
		if err := decodeFile(data, &c, testDrivers); err != nil {
			if err.Error() == "" {
				t.Errorf("decodeFile(%q) returned an empty error", data)
			}
			return
		}
		_ = c.Validate(testDrivers)
	})
}

// TestDatabaseURLFile: the URL is read from the file, under the rule of
// every secret file (one token of printable ASCII: a trailing newline is
// refused, not trimmed); setting both spellings, an empty file, one with a
// line break, a relative path or a missing file is an error that names
// the file and never quotes what it holds.
func TestDatabaseURLFile(t *testing.T) {
	dir := t.TempDir()
	write := func(name, content string) string {
		p := filepath.Join(dir, name)
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
		return p
	}
	const secret = "s3cret-pw"
	good := write("good", "postgres://occ:"+secret+"@db:5432/occ?sslmode=disable")
	tests := []struct {
		name    string
		env     map[string]string
		wantURL string
		wantErr string
	}{
		{"the URL alone", map[string]string{"OCC_DATABASE_URL_FILE": good}, "postgres://occ:" + secret + "@db:5432/occ?sslmode=disable", ""},
		{"both set", map[string]string{"OCC_DATABASE_URL_FILE": good, "OCC_DATABASE_URL": "postgres://x@db/occ"}, "", "databaseURL and databaseURLFile are both set: set one"},
		{"empty", map[string]string{"OCC_DATABASE_URL_FILE": write("empty", "")}, "", "databaseURLFile " + filepath.Join(dir, "empty") + ": file is empty"},
		{"trailing newline", map[string]string{"OCC_DATABASE_URL_FILE": write("newline", "postgres://occ:"+secret+"@db/occ\n")}, "", "databaseURLFile " + filepath.Join(dir, "newline") + ": content must be printable ASCII"},
		{"relative path", map[string]string{"OCC_DATABASE_URL_FILE": "db-url"}, "", "databaseURLFile db-url: path is not absolute"},
		{"missing", map[string]string{"OCC_DATABASE_URL_FILE": filepath.Join(dir, "missing")}, "", "databaseURLFile " + filepath.Join(dir, "missing") + ": "},
		{"a URL the store refuses", map[string]string{"OCC_DATABASE_URL_FILE": write("mysql", "mysql://occ:"+secret+"@db/occ")}, "", "database URL must start with postgres://"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			c, err := load(nil, mapEnv(tc.env))
			if tc.wantErr == "" {
				if err != nil || c.DatabaseURL != tc.wantURL {
					t.Fatalf("load = %q, %v; want %q", c.DatabaseURL, err, tc.wantURL)
				}
				return
			}
			if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
				t.Fatalf("load error = %v; want one containing %q", err, tc.wantErr)
			}
			if strings.Contains(err.Error(), secret) {
				t.Errorf("the error quotes the file's content: %v", err)
			}
		})
	}
}
