package registry

import (
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/kube/kubecfg"
	"github.com/openclaw/occ/internal/compute/unconfigured"
	"github.com/openclaw/occ/internal/config"
)

func writeFile(t *testing.T, name, content string) string {
	t.Helper()
	path := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatalf("writing %s: %v", name, err)
	}
	return path
}

func mapEnv(m map[string]string) func(string) string {
	return func(k string) string { return m[k] }
}

// load is config.Load with the registry's table and only a config file
// and environment variables.
func load(t *testing.T, file string, env map[string]string) (config.Config, error) {
	t.Helper()
	e := map[string]string{"OCC_DATA_DIR": t.TempDir()}
	if file != "" {
		e[config.EnvConfig] = writeFile(t, "occ.yaml", file)
	}
	for k, v := range env {
		e[k] = v
	}
	return config.Load(nil, mapEnv(e), ConfigTable())
}

func ctx(t *testing.T) context.Context {
	t.Helper()
	c, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	t.Cleanup(cancel)
	return c
}

func TestTable(t *testing.T) {
	var got []string
	for _, e := range Entries() {
		got = append(got, e.Name)
		if e.Open == nil || e.Summary == "" {
			t.Errorf("entry %q has no Open or no Summary", e.Name)
		}
		if e.SectionRequired && e.Section == nil {
			t.Errorf("entry %q requires a section it cannot decode", e.Name)
		}
		if l, ok := Lookup(e.Name); !ok || l.Name != e.Name {
			t.Errorf("Lookup(%q) = %q, %v", e.Name, l.Name, ok)
		}
	}
	// The order is the default first, then what --help and messages list.
	if diff := cmp.Diff([]string{"local", "kubernetes", "ssh", "none"}, got); diff != "" {
		t.Errorf("entries mismatch (-want +got):\n%s", diff)
	}
	if d, ok := Lookup(""); !ok || d.Name != "local" {
		t.Errorf(`Lookup("") = %q, %v; want the default, local`, d.Name, ok)
	}
	if _, ok := Lookup("docker"); ok {
		t.Error(`Lookup("docker") found an entry`)
	}
	cfg := ConfigTable()
	if len(cfg) != len(got) || cfg.Default() != "local" {
		t.Errorf("ConfigTable() = %d entries, default %q", len(cfg), cfg.Default())
	}
	for _, d := range cfg {
		e, _ := Lookup(d.Name)
		if (d.Check != nil) != (e.Section != nil) {
			t.Errorf("ConfigTable entry %q: Check set %v, Section set %v", d.Name, d.Check != nil, e.Section != nil)
		}
	}
}

// kubernetesFile selects the Kubernetes driver with routing and sets a few
// optional values; the rest must come out as kubecfg's defaults.
const kubernetesFile = `
drivers:
  compute:
    driver: kubernetes
    kubernetes:
      kubeconfig: /etc/occ/kubeconfig
      gatewayRouting:
        gatewayName: oce-agent-gateways
        gatewayNamespace: openclaw-system
        envoyNamespace: envoy-gateway-system
        endpointPort: 8443
      network:
        gatewayPort: 8080
        gatewayTrustedProxyCidrs: ["10.244.0.0/16"]
        dns:
          namespace: kube-system
      runtime:
        gatewayImage: registry.example/openclaw/gateway:2026.9.6
        occImage: registry.example/occ:1.0.0
        gatewayStorageClassName: fast-rwo
      resources:
        requests: {cpu: 500m, memory: 1Gi}
        limits: {memory: 3Gi}
`

// TestKubernetesSection: the kubernetes entry decodes its section with
// kubecfg's defaults applied.
func TestKubernetesSection(t *testing.T) {
	cfg, err := load(t, kubernetesFile, nil)
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	if cfg.ComputeDriver != "kubernetes" {
		t.Errorf("ComputeDriver = %q, want kubernetes", cfg.ComputeDriver)
	}
	e, _ := Lookup("kubernetes")
	got, err := e.settings(cfg.ComputeSections["kubernetes"])
	if err != nil {
		t.Fatalf("decoding the section: %v", err)
	}
	want := kubecfg.Config{
		Kubeconfig: "/etc/occ/kubeconfig",
		GatewayRouting: &kubecfg.GatewayRouting{
			GatewayName: "oce-agent-gateways", GatewayNamespace: "openclaw-system", EnvoyNamespace: "envoy-gateway-system",
			EndpointPort: 8443, EnvoyHTTPSTargetPort: kubecfg.DefaultEnvoyHTTPSTargetPort,
		},
		Network: kubecfg.Network{
			GatewayPort:              8080,
			GatewayTrustedProxyCIDRs: []string{"10.244.0.0/16"},
			DNS:                      kubecfg.DNS{Namespace: "kube-system", PodLabels: kubecfg.DefaultDNSPodLabels()},
		},
		Runtime: kubecfg.Runtime{
			GatewayImage: "registry.example/openclaw/gateway:2026.9.6", OCCImage: "registry.example/occ:1.0.0",
			OCCBinaryPath: kubecfg.DefaultOCCBinaryPath, Node: kubecfg.DefaultNode,
			OpenClawExecutable: kubecfg.DefaultOpenClawExecutable, ImagePullPolicy: kubecfg.DefaultImagePullPolicy,
			GatewayStorageClassName: "fast-rwo", GatewayStorageSize: kubecfg.DefaultGatewayStorageSize,
		},
		Resources: kubecfg.Resources{
			Requests: kubecfg.ResourceList{CPU: "500m", Memory: "1Gi"},
			Limits:   kubecfg.ResourceList{Memory: "3Gi"},
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("kubernetes settings mismatch (-want +got):\n%s", diff)
	}
}

// kubernetesMinimal is the smallest valid kubernetes section; cases break
// one thing.
const kubernetesMinimal = `drivers:
  compute:
    driver: kubernetes
    kubernetes:
      network:
        gatewayClients: ["10.0.0.0/8"]
      runtime:
        gatewayImage: gw:1
        occImage: occ:1
`

// TestLoadErrors: configuration checks the selection and the sections
// through the table, with the messages (and line numbers) operators see.
func TestLoadErrors(t *testing.T) {
	valid := kubernetesMinimal
	tests := []struct {
		name string
		file string
		env  map[string]string
		want string // substring of the error
	}{
		{
			name: "unknown key in the section",
			file: strings.Replace(valid, "      network:", "      netwrk: {}\n      network:", 1),
			want: `line 5: unknown key "drivers.compute.kubernetes.netwrk"`,
		},
		{
			name: "unknown key in a nested section",
			file: strings.Replace(valid, "        gatewayClients:", "        gatewayClient: [\"10.0.0.0/8\"]\n        gatewayClients:", 1),
			want: `line 6: unknown key "drivers.compute.kubernetes.network.gatewayClient"`,
		},
		{
			name: "routing key misspelt",
			file: valid + "      gatewayRouting:\n        gatewayname: x\n",
			want: `line 11: unknown key "drivers.compute.kubernetes.gatewayRouting.gatewayname"`,
		},
		{
			name: "resource list key misspelt",
			file: valid + "      resources:\n        limits: {memry: 1Gi}\n",
			want: `line 11: unknown key "drivers.compute.kubernetes.resources.limits.memry"`,
		},
		{
			name: "section must be a mapping",
			file: valid + "      resources: x\n",
			want: "line 10: cannot unmarshal !!str `x` into a mapping",
		},
		{
			name: "driver kubernetes without the section",
			file: "drivers:\n  compute:\n    driver: kubernetes\n",
			want: "compute driver kubernetes needs the drivers.compute.kubernetes section in the config file (see docs/compute-kubernetes.md)",
		},
		{
			name: "driver kubernetes by env without the section",
			env:  map[string]string{"OCC_COMPUTE_DRIVER": "kubernetes"},
			want: "compute driver kubernetes needs the drivers.compute.kubernetes section",
		},
		{
			name: "section with another driver",
			file: strings.Replace(valid, "driver: kubernetes", "driver: local", 1),
			want: `drivers.compute.kubernetes is set but the compute driver is "local"; select driver kubernetes or remove the section`,
		},
		{
			name: "section with the default driver",
			file: strings.Replace(valid, "    driver: kubernetes\n", "", 1),
			want: `drivers.compute.kubernetes is set but the compute driver is "local"`,
		},
		{
			name: "section with the driver overridden by env",
			file: valid,
			env:  map[string]string{"OCC_COMPUTE_DRIVER": "none"},
			want: `drivers.compute.kubernetes is set but the compute driver is "none"`,
		},
		{
			name: "a section for the local driver",
			file: "drivers:\n  compute:\n    local: {port: 1}\n",
			want: `line 3: unknown key "drivers.compute.local"`,
		},
		{
			name: "unknown driver",
			env:  map[string]string{"OCC_COMPUTE_DRIVER": "docker"},
			want: `compute driver "docker" is not one of local, kubernetes, ssh, none`,
		},
		{
			name: "validation errors are prefixed with the section",
			file: strings.Replace(valid, `["10.0.0.0/8"]`, `["0.0.0.0/0"]`, 1),
			want: "drivers.compute.kubernetes.network.gatewayClients [0.0.0.0/0] admits every source address",
		},
		{
			name: "routing without trusted proxies",
			file: strings.Replace(valid, "      network:\n        gatewayClients: [\"10.0.0.0/8\"]\n",
				"      gatewayRouting: {gatewayName: gw, gatewayNamespace: occ, envoyNamespace: envoy}\n", 1),
			want: "drivers.compute.kubernetes.network.gatewayTrustedProxyCidrs is required with gatewayRouting",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := load(t, tt.file, tt.env)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load(file %q, env %v) error = %v, want it to contain %q", tt.file, tt.env, err, tt.want)
			}
		})
	}

	for _, file := range []string{"", valid, "drivers:\n  compute:\n    driver: none\n"} {
		if _, err := load(t, file, nil); err != nil {
			t.Errorf("Load(file %q): %v", file, err)
		}
	}
}

// kubeconfig is a kubeconfig file for a cluster that does not exist:
// opening the driver reads it but makes no API call.
const kubeconfig = `apiVersion: v1
kind: Config
clusters:
- name: c
  cluster: {server: "https://127.0.0.1:1"}
users:
- name: u
  user: {token: not-a-secret}
contexts:
- name: x
  context: {cluster: c, user: u}
current-context: x
`

func TestOpen(t *testing.T) {
	kc := writeFile(t, "kubeconfig", kubeconfig)
	kubeFile := strings.Replace(kubernetesMinimal, "    kubernetes:\n", "    kubernetes:\n      kubeconfig: "+kc+"\n", 1)
	noRuntime := filepath.Join(t.TempDir(), "no-runtime")

	tests := []struct {
		name   string
		file   string
		env    map[string]string
		change func(*config.Config) // a Config built in code, past Load
		wantID string
		want   string // substring of the error
	}{
		{name: "none", env: map[string]string{"OCC_COMPUTE_DRIVER": "none"}, wantID: unconfigured.Driver{}.ID()},
		{name: "kubernetes", file: kubeFile, wantID: "kubernetes"},
		{
			name: "kubernetes with a kubeconfig that is not there",
			file: strings.Replace(kubeFile, kc, kc+".absent", 1),
			want: "kube: kubeconfig " + kc + ".absent",
		},
		{
			name: "local without the runtime",
			env:  map[string]string{"OCC_OPENCLAW_RUNTIME": noRuntime},
			want: "the OpenClaw runtime is not installed in " + noRuntime + " (",
		},
		{
			name: "local without the runtime says how to install it",
			env:  map[string]string{"OCC_OPENCLAW_RUNTIME": noRuntime},
			want: "): run scripts/install-runtime.sh (make run does), or point --openclaw-runtime / OCC_OPENCLAW_RUNTIME at an installed runtime, or run with --compute-driver none",
		},
		{
			name:   "unknown driver in a Config built in code",
			change: func(c *config.Config) { c.ComputeDriver = "docker" },
			want:   `compute driver "docker" is not one of local, kubernetes, ssh, none`,
		},
		{
			name: "kubernetes section missing in a Config built in code",
			change: func(c *config.Config) {
				c.ComputeDriver = "kubernetes"
				c.ComputeSections = nil
			},
			want: "compute driver kubernetes needs the drivers.compute.kubernetes section",
		},
		{
			name: "section of another driver in a Config built in code",
			file: kubeFile,
			change: func(c *config.Config) {
				c.ComputeDriver = "none"
			},
			want: `drivers.compute.kubernetes is set but the compute driver is "none"`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg, err := load(t, tt.file, tt.env)
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if tt.change != nil {
				tt.change(&cfg)
			}
			d, err := Open(ctx(t), cfg, nil)
			if tt.want != "" {
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Fatalf("Open error = %v, want it to contain %q", err, tt.want)
				}
				if d != nil {
					t.Errorf("Open returned a driver (%T) with its error", d)
				}
				return
			}
			if err != nil {
				t.Fatalf("Open: %v", err)
			}
			if d.ID() != tt.wantID {
				t.Errorf("Open: driver %q, want %q", d.ID(), tt.wantID)
			}
		})
	}
}

// TestOpenLocal opens the default driver on the real runtime: it has the
// lifecycle hooks the server looks for, and opening it starts nothing.
func TestOpenLocal(t *testing.T) {
	rt, err := gwtest.FindRuntime()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("the OpenClaw runtime is required under CI=true: %v", err)
		}
		t.Skipf("no OpenClaw runtime (set OCC_OPENCLAW_RUNTIME or run scripts/install-runtime.sh): %v", err)
	}
	cfg, err := load(t, "", map[string]string{"OCC_OPENCLAW_RUNTIME": rt.Dir})
	if err != nil {
		t.Fatalf("Load: %v", err)
	}
	d, err := Open(ctx(t), cfg, nil)
	if err != nil {
		t.Fatalf("Open: %v", err)
	}
	if d.ID() != "local" {
		t.Errorf("default driver %q, want local", d.ID())
	}
	_, recovers := d.(compute.Recoverer)
	_, shuts := d.(compute.Shutdowner)
	c, closes := d.(compute.Closer)
	if !recovers || !shuts || !closes {
		t.Errorf("local driver: Recoverer %v, Shutdowner %v, Closer %v; want all", recovers, shuts, closes)
	}
	if closes {
		c.Close()
	}
	if _, err := os.Stat(filepath.Join(cfg.DataDir, "agents")); err != nil {
		t.Errorf("the local driver's agents directory under the data dir: %v", err)
	}
}

// TestDocsListEveryDriver keeps docs/configuration.md in step with the
// table: its "Compute drivers" table has one row per driver, in the
// registry's order, marks the default and links each driver's page, which
// exists.
func TestDocsListEveryDriver(t *testing.T) {
	docs := filepath.Join("..", "..", "..", "docs")
	data, err := os.ReadFile(filepath.Join(docs, "configuration.md"))
	if err != nil {
		t.Fatalf("reading docs/configuration.md: %v", err)
	}
	_, section, ok := strings.Cut(string(data), "\n## Compute drivers\n")
	if !ok {
		t.Fatal(`docs/configuration.md has no "## Compute drivers" section`)
	}
	section, _, _ = strings.Cut(section, "\n## ")
	rowRE := regexp.MustCompile("^\\| `([^`]+)`( \\(the default\\))? \\|")
	var names []string
	rows := map[string]string{}
	for _, line := range strings.Split(section, "\n") {
		if m := rowRE.FindStringSubmatch(line); m != nil {
			names = append(names, m[1])
			rows[m[1]] = line
			if isDefault := m[2] != ""; isDefault != (m[1] == ConfigTable().Default()) {
				t.Errorf("docs/configuration.md marks %q as the default: %v; the registry's default is %q", m[1], isDefault, ConfigTable().Default())
			}
		}
	}
	var want []string
	for _, e := range Entries() {
		want = append(want, e.Name)
		if e.Doc == "" {
			continue
		}
		if _, err := os.Stat(filepath.Join(docs, e.Doc)); err != nil {
			t.Errorf("driver %q: its page: %v", e.Name, err)
		}
		if row, ok := rows[e.Name]; ok && !strings.Contains(row, "("+e.Doc+")") {
			t.Errorf("docs/configuration.md's row for driver %q does not link its page %s", e.Name, e.Doc)
		}
	}
	if diff := cmp.Diff(want, names); diff != "" {
		t.Errorf("docs/configuration.md's Compute drivers table does not list the registry's drivers (-registry +docs):\n%s", diff)
	}
	if !strings.Contains(string(data), "| `--compute-driver` | `OCC_COMPUTE_DRIVER` | `drivers.compute.driver` | `"+ConfigTable().Default()+"` |") {
		t.Errorf("docs/configuration.md's --compute-driver row does not show the default %q", ConfigTable().Default())
	}
}
