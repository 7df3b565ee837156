package chart

import (
	"context"
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"sigs.k8s.io/yaml"

	"github.com/openclaw/occ/internal/compute/kube/kubecfg"
	"github.com/openclaw/occ/internal/compute/registry"
	"github.com/openclaw/occ/internal/config"
	testkube "github.com/openclaw/occ/internal/testenv/kube"
)

var update = flag.Bool("update", false, "rewrite the golden files in testdata/golden from the chart")

// chartDir is the chart under test, from this package's directory.
const chartDir = "../../deploy/helm/occ"

// kubeVersion is the test API server's version; helm template's default
// (v1.20) is older than the chart's kubeVersion floor.
const kubeVersion = "1.37.2"

// release and namespace are seed 003's example installation.
const (
	release   = "oce"
	namespace = "openclaw-system"
)

// valueSets are the documented value sets, each with a golden render.
var valueSets = []string{"routing-off", "routing-auto-ca", "routing-issuer", "metrics", "private-registry"}

// helm runs the helm binary with args and returns its standard output; a
// failure carries standard error (testkube.RunHelm, which keeps helm away
// from the developer's HOME).
func helm(t *testing.T, args ...string) (string, error) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	return testkube.RunHelm(t, ctx, args...)
}

// render is helm template of the chart with the value files and --set
// arguments given.
func render(t *testing.T, files []string, sets ...string) (string, error) {
	t.Helper()
	return renderAs(t, release, namespace, files, sets...)
}

// renderAs is render for another release name and namespace.
func renderAs(t *testing.T, release, namespace string, files []string, sets ...string) (string, error) {
	t.Helper()
	args := []string{"template", release, chartDir, "--namespace", namespace, "--kube-version", kubeVersion}
	for _, f := range files {
		args = append(args, "--values", f)
	}
	for _, s := range sets {
		if j, ok := strings.CutPrefix(s, "json:"); ok {
			args = append(args, "--set-json", j)
		} else {
			args = append(args, "--set", s)
		}
	}
	return helm(t, args...)
}

func valuesFile(name string) string { return filepath.Join("testdata", name+".yaml") }

func TestLint(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs, func(t *testing.T) {
			out, err := helm(t, "lint", "--strict", chartDir, "--namespace", namespace, "--kube-version", kubeVersion, "--values", valuesFile(vs))
			if err != nil {
				t.Fatal(err)
			}
			if !strings.Contains(out, "1 chart(s) linted, 0 chart(s) failed") {
				t.Errorf("helm lint says:\n%s", out)
			}
		})
	}
}

// TestGolden compares helm template with the committed render of each
// value set; go test -run TestGolden -update rewrites them after a
// deliberate change (review the diff).
func TestGolden(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs, func(t *testing.T) {
			got, err := render(t, []string{valuesFile(vs)})
			if err != nil {
				t.Fatal(err)
			}
			path := filepath.Join("testdata", "golden", vs+".yaml")
			if *update {
				if err := os.WriteFile(path, []byte(got), 0o644); err != nil {
					t.Fatal(err)
				}
			}
			want, err := os.ReadFile(path)
			if err != nil {
				t.Fatalf("%v (go test ./internal/chart -run TestGolden -update writes it)", err)
			}
			if diff := cmp.Diff(string(want), got); diff != "" {
				t.Errorf("helm template with %s differs from %s (-want +got):\n%s", valuesFile(vs), path, diff)
			}
		})
	}
}

// TestSchemaRefusals walks every contradiction values.schema.json (and
// the chart's own checks) refuses, each from an otherwise valid value set,
// and the message that names it.
func TestSchemaRefusals(t *testing.T) {
	tests := []struct {
		name string
		base string
		sets []string
		want string // a substring of helm's error
	}{
		{"routing without apiKeySecretName", "routing-auto-ca", []string{"gatewayRouting.apiKeySecretName="}, "at '/gatewayRouting/apiKeySecretName': minLength: got 0, want 1"},
		{"routing without gatewayClassName", "routing-auto-ca", []string{"gatewayRouting.gatewayClassName="}, "at '/gatewayRouting/gatewayClassName': minLength: got 0, want 1"},
		{"routing without trusted proxy CIDRs", "routing-auto-ca", []string{"json:compute.gatewayTrustedProxyCidrs=[]"}, "at '/compute/gatewayTrustedProxyCidrs': minItems: got 0, want 1"},
		{"routing with gateway clients", "routing-auto-ca", []string{"compute.gatewayClients={10.0.0.0/8}"}, "at '/compute/gatewayClients': maxItems: got 1, want 0"},
		{"no routing and no gateway clients", "routing-off", []string{"json:compute.gatewayClients=[]"}, "at '/compute/gatewayClients': minItems: got 0, want 1"},
		{"caSecretName without caSecretKey", "routing-issuer", []string{"gatewayRouting.caSecretKey="}, "at '/gatewayRouting/caSecretKey': minLength: got 0, want 1"},
		{"caSecretKey without caSecretName", "routing-issuer", []string{"gatewayRouting.caSecretName="}, "at '/gatewayRouting/caSecretName': minLength: got 0, want 1"},
		{"CA bundle with the automatic CA", "routing-issuer", []string{"gatewayRouting.issuerRef.name="}, "at '/gatewayRouting/issuerRef/name': minLength: got 0, want 1"},
		{"hostname with a scheme", "routing-issuer", []string{"gatewayRouting.hostname=https://agents.example.com"}, "/gatewayRouting/hostname"},
		{"hostname with a port", "routing-issuer", []string{"gatewayRouting.hostname=agents.example.com:8443"}, "/gatewayRouting/hostname"},
		{"hostname with a path", "routing-issuer", []string{"gatewayRouting.hostname=agents.example.com/x"}, "/gatewayRouting/hostname"},
		{"issuer kind", "routing-issuer", []string{"gatewayRouting.issuerRef.kind=Vault"}, "/gatewayRouting/issuerRef/kind"},
		{"postgres without its Secret", "routing-off", []string{"database.existingSecret="}, "at '/database/existingSecret': minLength: got 0, want 1"},
		{"sqlite with two API replicas", "routing-off", []string{"database.mode=sqlite", "api.replicas=2"}, "at '/api/replicas': value must be 1"},
		{"unknown database mode", "routing-off", []string{"database.mode=mysql"}, "/database/mode"},
		{"unknown key", "routing-off", []string{"gatewayRouting.enable=true"}, "additional properties 'enable' not allowed"},
		{"port out of range", "routing-auto-ca", []string{"gatewayRouting.tenantGatewayPort=65536"}, "/gatewayRouting/tenantGatewayPort"},
		{"service key and TLS in one Secret", "routing-auto-ca", []string{"gatewayRouting.tlsSecretName=occ-private-gateway-key"}, `gatewayRouting.apiKeySecretName and gatewayRouting.tlsSecretName both name the Secret "occ-private-gateway-key"`},
		{"worker concurrency of zero", "routing-off", []string{"worker.concurrency=0"}, "at '/worker/concurrency': minimum: got 0, want 1"},
		{"worker concurrency past its cap", "routing-off", []string{"worker.concurrency=65"}, "at '/worker/concurrency': maximum: got 65, want 64"},
		{"metrics without scrapers", "metrics", []string{"json:networkPolicy.metricsIngressFrom=[]"}, "at '/networkPolicy/metricsIngressFrom': minItems: got 0, want 1"},
		{"ServiceMonitor without metrics", "routing-off", []string{"metrics.serviceMonitor.enabled=true"}, "at '/metrics/enabled': value must be true"},
		{"metrics on the API port", "metrics", []string{"metrics.port=8080"}, "metrics.port and api.port are both 8080"},
		{"metrics port out of range", "metrics", []string{"metrics.port=65536"}, "/metrics/port"},
		{"metrics on the worker's health port", "metrics", []string{"worker.healthPort=9464"}, "metrics.port and worker.healthPort are both 9464"},
		{"worker health port past its range", "routing-off", []string{"worker.healthPort=65536"}, "at '/worker/healthPort': maximum: got 65,536, want 65,535"},
		{"worker health port of zero", "routing-off", []string{"worker.healthPort=0"}, "at '/worker/healthPort': minimum: got 0, want 1"},
		{"scrape interval not a duration", "metrics", []string{"metrics.serviceMonitor.interval=30 seconds"}, "/metrics/serviceMonitor/interval"},
		{"unknown ServiceMonitor key", "metrics", []string{"metrics.serviceMonitor.namespace=monitoring"}, "additional properties 'namespace' not allowed"},
		{"CA bundle in the service key's Secret", "routing-issuer", []string{"gatewayRouting.caSecretName=occ-private-gateway-key"}, `gatewayRouting.apiKeySecretName and gatewayRouting.caSecretName both name the Secret "occ-private-gateway-key"`},
		{"image pull Secret twice", "private-registry", []string{"imagePullSecrets[1].name=registry-example-com"}, "at '/imagePullSecrets': items at 0 and 1 are equal"},
		{"seventeen image pull Secrets", "private-registry", []string{"json:imagePullSecrets=" + pullSecrets(17)}, "at '/imagePullSecrets': maxItems: got 17, want 16"},
		{"image pull Secret name too long for its copy", "private-registry", []string{"imagePullSecrets[0].name=" + strings.Repeat("p", 243)}, "at '/imagePullSecrets/0/name': maxLength: got 243, want 242"},
		{"image pull Secret not a name", "private-registry", []string{"imagePullSecrets[0].name=Registry_Credentials"}, "/imagePullSecrets/0/name"},
		{"image pull Secret is the database URL's", "private-registry", []string{"imagePullSecrets[1].name=occ-database"}, `imagePullSecrets[1] names "occ-database", which is also database.existingSecret`},
		{"image pull Secret is the service key's", "private-registry", []string{"imagePullSecrets[0].name=occ-private-gateway-key"}, `imagePullSecrets[0] names "occ-private-gateway-key", which is also gatewayRouting.apiKeySecretName`},
		{"image pull Secret is the listener certificate's", "private-registry", []string{"imagePullSecrets[0].name=oce-agent-gateways-tls"}, `imagePullSecrets[0] names "oce-agent-gateways-tls", which is also gatewayRouting.tlsSecretName`},
		{"maxUnavailable of zero", "routing-off", []string{"podDisruptionBudget.maxUnavailable=0"}, "at '/podDisruptionBudget/maxUnavailable': minimum: got 0, want 1"},
		{"maxUnavailable of 0%", "routing-off", []string{"podDisruptionBudget.maxUnavailable=0%"}, `'0%' does not match pattern`},
		{"maxUnavailable past 100%", "routing-off", []string{"podDisruptionBudget.maxUnavailable=101%"}, `'101%' does not match pattern`},
		{"maxUnavailable a fraction", "routing-off", []string{"json:podDisruptionBudget.maxUnavailable=1.5"}, "at '/podDisruptionBudget/maxUnavailable': got number, want integer"},
		{"minAvailable below one", "routing-off", []string{"podDisruptionBudget.minAvailable=-1"}, "at '/podDisruptionBudget/minAvailable': minimum: got -1, want 1"},
		{"minAvailable and maxUnavailable", "routing-off", []string{"podDisruptionBudget.enabled=true", "podDisruptionBudget.minAvailable=2"}, `podDisruptionBudget.maxUnavailable (1) and podDisruptionBudget.minAvailable (2) are both set`},
		{"neither minAvailable nor maxUnavailable", "routing-off", []string{"podDisruptionBudget.enabled=true", "podDisruptionBudget.maxUnavailable="}, "podDisruptionBudget sets neither maxUnavailable nor minAvailable"},
		{"unknown disruption budget key", "routing-off", []string{"podDisruptionBudget.maxUnavailible=1"}, "additional properties 'maxUnavailible' not allowed"},
		{"image pull Secret is the bootstrap password's", "private-registry", []string{"bootstrapAdmin.passwordSecretName=mirror-credentials"}, `imagePullSecrets[1] names "mirror-credentials", which is also bootstrapAdmin.passwordSecretName`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := render(t, []string{valuesFile(tt.base)}, tt.sets...)
			if err == nil {
				t.Fatalf("helm template with %v succeeded, want an error containing %q; it rendered %d bytes", tt.sets, tt.want, len(out))
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("helm template with %v: error does not contain %q:\n%v", tt.sets, tt.want, err)
			}
		})
	}
	// Each base set is valid: the refusals above are the --set changes'.
	for _, vs := range valueSets {
		if _, err := render(t, []string{valuesFile(vs)}); err != nil {
			t.Errorf("base value set %s: %v", vs, err)
		}
	}
}

// pullSecrets is a JSON list of n imagePullSecrets entries.
func pullSecrets(n int) string {
	var items []string
	for i := range n {
		items = append(items, fmt.Sprintf(`{"name":"pull-%d"}`, i))
	}
	return "[" + strings.Join(items, ",") + "]"
}

// object is the part of a rendered object the tests read.
type object struct {
	Kind     string         `json:"kind"`
	Metadata objectMeta     `json:"metadata"`
	Spec     map[string]any `json:"spec"`
	Data     map[string]string
}

type objectMeta struct {
	Name      string            `json:"name"`
	Namespace string            `json:"namespace"`
	Labels    map[string]string `json:"labels"`
}

// objects splits a render into its objects, by kind/name.
func objects(t *testing.T, manifest string) map[string]object {
	t.Helper()
	out := map[string]object{}
	for _, doc := range strings.Split(manifest, "\n---\n") {
		var o struct {
			object
			Data map[string]string `json:"data"`
		}
		if err := yaml.Unmarshal([]byte(doc), &o); err != nil {
			t.Fatalf("rendered YAML: %v\n%s", err, doc)
		}
		if o.Kind == "" {
			continue
		}
		o.object.Data = o.Data
		out[o.Kind+"/"+o.Metadata.Name] = o.object
	}
	return out
}

// occConfig loads the configuration file the chart renders the way occ
// does (strictly, with the driver table) and returns the Kubernetes
// driver's configuration from it.
func occConfig(t *testing.T, objs map[string]object, configMap string) (config.Config, kubecfg.Config) {
	t.Helper()
	cm, ok := objs["ConfigMap/"+configMap]
	if !ok {
		t.Fatalf("no ConfigMap %s in the render", configMap)
	}
	path := filepath.Join(t.TempDir(), "occ.yaml")
	if err := os.WriteFile(path, []byte(cm.Data["occ.yaml"]), 0o600); err != nil {
		t.Fatal(err)
	}
	env := map[string]string{config.EnvConfig: path}
	cfg, err := config.Load(nil, func(k string) string { return env[k] }, registry.ConfigTable())
	if err != nil {
		t.Fatalf("occ refuses the configuration the chart renders: %v\n%s", err, cm.Data["occ.yaml"])
	}
	kc, err := kubecfg.FromSection(cfg.ComputeSections[kubecfg.DriverName])
	if err != nil {
		t.Fatalf("the driver refuses the configuration the chart renders: %v", err)
	}
	return cfg, kc
}

// TestWorkerConcurrency: worker.concurrency reaches the configuration
// file occ loads, at its default, its limit and in between.
func TestWorkerConcurrency(t *testing.T) {
	for _, tt := range []struct {
		sets []string
		want int
	}{{nil, config.DefaultWorkerConcurrency}, {[]string{"worker.concurrency=1"}, 1}, {[]string{"worker.concurrency=64"}, 64}} {
		out, err := render(t, []string{valuesFile("routing-off")}, tt.sets...)
		if err != nil {
			t.Fatal(err)
		}
		if cfg, _ := occConfig(t, objects(t, out), release+"-occ-config"); cfg.WorkerConcurrency != tt.want {
			t.Errorf("helm template with %v: worker concurrency %d, want %d", tt.sets, cfg.WorkerConcurrency, tt.want)
		}
	}
}

// TestNamesAgree proves that the hostname, route label, Envoy Service and
// Gateway the chart renders are the ones the driver derives from the
// configuration the chart renders, for the defaults and for custom
// release, namespace, Gateway and hostname.
func TestNamesAgree(t *testing.T) {
	tests := []struct {
		name               string
		release, namespace string
		file               string
		sets               []string
		wantHost           string // "" means the derived occ-gateway-<label>.<envoyNs>.svc
	}{
		{"seed defaults", release, namespace, "routing-auto-ca", nil, ""},
		{"other release and namespace", "prod", "occ-system", "routing-auto-ca", nil, ""},
		{"custom Gateway name and Envoy namespace", release, namespace, "routing-auto-ca", []string{"gatewayRouting.gatewayName=private-agents", "gatewayRouting.envoyNamespace=eg-system"}, ""},
		{"custom hostname with an issuer", release, namespace, "routing-issuer", nil, "agents.internal.example.com"},
		// Labels that YAML reads as numbers unless quoted: sha256 of
		// "occ-61/occ-agent-gateways" starts 186059360333 (an integer),
		// of "occ-e833/occ-agent-gateways" 55559487e280 (a float).
		{"route label of digits only", "occ", "occ-61", "routing-auto-ca", nil, ""},
		{"route label of digits and an e", "occ", "occ-e833", "routing-auto-ca", nil, ""},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := renderAs(t, tt.release, tt.namespace, []string{valuesFile(tt.file)}, tt.sets...)
			if err != nil {
				t.Fatal(err)
			}
			objs := objects(t, out)
			fullname := tt.release + "-occ"
			if strings.Contains(tt.release, "occ") {
				fullname = tt.release
			}
			_, kc := occConfig(t, objs, fullname+"-config")
			r := kc.GatewayRouting
			if r == nil {
				t.Fatal("the rendered configuration has no gatewayRouting")
			}
			if r.GatewayNamespace != tt.namespace {
				t.Errorf("gatewayRouting.gatewayNamespace = %q, want the release namespace %q", r.GatewayNamespace, tt.namespace)
			}
			gw, ok := objs["Gateway/"+r.GatewayName]
			if !ok {
				t.Fatalf("the configuration names Gateway %q, the chart renders none of that name", r.GatewayName)
			}
			if tt.wantHost != "" && r.Host() != tt.wantHost {
				t.Errorf("driver host %q, want %q", r.Host(), tt.wantHost)
			}
			if want := "occ-gateway-" + kubecfg.HashHex(tt.namespace+"/"+r.GatewayName, 12) + "." + r.EnvoyNamespace + ".svc"; tt.wantHost == "" && r.Host() != want {
				t.Errorf("driver host %q, want %q", r.Host(), want)
			}
			listener := gw.Spec["listeners"].([]any)[0].(map[string]any)
			selector := listener["allowedRoutes"].(map[string]any)["namespaces"].(map[string]any)["selector"].(map[string]any)["matchLabels"].(map[string]any)
			got := map[string]any{
				"listener hostname": listener["hostname"],
				"route label":       selector["openclaw-enterprise.io/gateway"],
				"EnvoyProxy":        objs["EnvoyProxy/"+r.EnvoyServiceName()].Metadata.Name,
				"certificate":       objs["Certificate/"+r.GatewayName+"-tls"].Spec["dnsNames"],
			}
			want := map[string]any{
				"listener hostname": r.Host(),
				"route label":       r.RouteLabel(),
				"EnvoyProxy":        r.EnvoyServiceName(),
				"certificate":       []any{r.Host()},
			}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("chart and driver disagree (-driver +chart):\n%s", diff)
			}
		})
	}
}

// TestConfigAccepted renders each value set and loads the configuration
// file as occ would, so a chart change that occ refuses fails here rather
// than in a crash-looping Pod.
func TestConfigAccepted(t *testing.T) {
	for _, vs := range valueSets {
		t.Run(vs, func(t *testing.T) {
			out, err := render(t, []string{valuesFile(vs)})
			if err != nil {
				t.Fatal(err)
			}
			cfg, kc := occConfig(t, objects(t, out), release+"-occ-config")
			if cfg.ComputeDriver != kubecfg.DriverName {
				t.Errorf("compute driver %q, want kubernetes", cfg.ComputeDriver)
			}
			if kc.TenantAccess == nil || kc.TenantAccess.ServiceAccountName != release+"-occ-worker" {
				t.Errorf("tenantAccess = %+v, want the worker's ServiceAccount", kc.TenantAccess)
			}
		})
	}
}

// TestValuesDocumented checks that docs/install-kubernetes.md has a row
// for every value of values.yaml, by its full dotted key, in the Values
// table: a row | `key` | under that table's header and delimiter rows.
// Every table of the document must have its header and delimiter rows, so
// a paragraph between two rows, which leaves the rows after it rendered
// as text, fails.
func TestValuesDocumented(t *testing.T) {
	raw, err := os.ReadFile(filepath.Join(chartDir, "values.yaml"))
	if err != nil {
		t.Fatal(err)
	}
	var values map[string]any
	if err := yaml.Unmarshal(raw, &values); err != nil {
		t.Fatal(err)
	}
	doc, err := os.ReadFile("../../docs/install-kubernetes.md")
	if err != nil {
		t.Fatal(err)
	}
	var keys []string
	var walk func(prefix string, v any)
	walk = func(prefix string, v any) {
		m, ok := v.(map[string]any)
		// A map value that is a free-form map (labels, selectors) or
		// resources is one value; its own keys are not chart options.
		if !ok || len(m) == 0 || leafMaps[prefix] {
			keys = append(keys, prefix)
			return
		}
		for k, sub := range m {
			key := k
			if prefix != "" {
				key = prefix + "." + k
			}
			walk(key, sub)
		}
	}
	walk("", values)
	if len(keys) < 40 {
		t.Fatalf("found only %d keys in values.yaml; the walk is broken", len(keys))
	}
	isKey := map[string]bool{}
	for _, k := range keys {
		isKey[k] = true
	}
	documented := map[string]bool{}
	for _, tbl := range markdownTables(string(doc)) {
		if !tbl.headed {
			// Markdown renders such rows as one paragraph of text.
			t.Errorf("docs/install-kubernetes.md:%d: table rows without a header and delimiter row before them (a paragraph between rows of one table?): %s", tbl.line, tbl.header)
			continue
		}
		for i, row := range tbl.rows {
			key, ok := strings.CutPrefix(row, "| `")
			if !ok {
				continue
			}
			key, _, ok = strings.Cut(key, "` |")
			if !ok || !isKey[key] {
				continue
			}
			if tbl.header != valuesHeader {
				t.Errorf("docs/install-kubernetes.md:%d: value `%s` is a row of a table headed %q, not of the Values table (%q)", tbl.line+2+i, key, tbl.header, valuesHeader)
				continue
			}
			documented[key] = true
		}
	}
	var missing []string
	for _, k := range keys {
		if !documented[k] {
			missing = append(missing, k)
		}
	}
	slices.Sort(missing)
	if len(missing) > 0 {
		t.Errorf("docs/install-kubernetes.md has no row | `key` | of the Values table (%s) for these values: %s", valuesHeader, strings.Join(missing, ", "))
	}
}

// valuesHeader is the header row of the Values table of
// docs/install-kubernetes.md.
const valuesHeader = "| Value | Default | Meaning |"

// mdTable is one run of consecutive lines of a Markdown document that
// start with "|", outside code blocks.
type mdTable struct {
	line   int    // the first line's number, from 1
	header string // the first line
	headed bool   // the second line is a delimiter row, so the first is a header
	rows   []string
}

var mdDelimiterRow = regexp.MustCompile(`^\|(\s*:?-+:?\s*\|)+$`)

// markdownTables splits doc into its tables. A run of "|" lines that a
// non-table line interrupts starts again as a table of its own, which
// needs its own header and delimiter rows.
func markdownTables(doc string) []mdTable {
	var tables []mdTable
	var cur *mdTable
	fence := false
	for i, line := range strings.Split(doc, "\n") {
		trimmed := strings.TrimSpace(line)
		if strings.HasPrefix(trimmed, "```") {
			fence = !fence
		}
		if fence || !strings.HasPrefix(trimmed, "|") {
			cur = nil
			continue
		}
		if cur == nil {
			tables = append(tables, mdTable{line: i + 1, header: trimmed})
			cur = &tables[len(tables)-1]
			continue
		}
		if len(cur.rows) == 0 && !cur.headed && mdDelimiterRow.MatchString(trimmed) {
			cur.headed = true
			continue
		}
		cur.rows = append(cur.rows, trimmed)
	}
	return tables
}

// leafMaps are the values whose content is free-form.
var leafMaps = map[string]bool{
	"api.resources": true, "worker.resources": true, "compute.gatewayResources": true,
	"api.nodeSelector": true, "worker.nodeSelector": true, "api.affinity": true, "worker.affinity": true,
	"compute.dns.podLabels": true, "gatewayRouting.envoyGatewayPodLabels": true,
	"metrics.serviceMonitor.labels": true,
}
