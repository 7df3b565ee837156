package chart

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/kube"
	"github.com/openclaw/occ/internal/ids"
	testkube "github.com/openclaw/occ/internal/testenv/kube"
)

// egControllerName is the controller name the test environment's Envoy
// Gateway serves.
const egControllerName = "gateway.envoyproxy.io/gatewayclass-controller"

// TestEgctlTranslate feeds the chart's routing objects (Gateway,
// EnvoyProxy, SecurityPolicy, as helm template renders them for seed 003's
// example), the Secrets cert-manager and the operator would provide, and
// one Agent's tenant Namespace, Service and HTTPRoute rendered by the
// driver from the configuration the chart renders, to the real Envoy
// Gateway translator (`egctl x translate`), and checks the Envoy
// configuration it produces: the API-key filter on the header OCC sends
// the key in, with the operator Secret's client, and on the Agent's route
// the exact path match, the rewrite to /, the identity and real-IP headers
// set and the forwarding, scope and credential headers removed.
func TestEgctlTranslate(t *testing.T) {
	env := testkube.Env(t)
	if env.Egctl == "" {
		t.Fatalf("no egctl: set %s (scripts/testenv/k8s.sh env does)", testkube.EnvEgctl)
	}
	ctx := testCtx(t, time.Minute)
	const class = "eg"
	out, err := render(t, []string{valuesFile("routing-auto-ca")}, "gatewayRouting.gatewayClassName="+class)
	if err != nil {
		t.Fatal(err)
	}
	chartObjs, err := testkube.Objects([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	_, kc := occConfig(t, objects(t, out), release+"-occ-config")
	r := kc.GatewayRouting

	// Only the Gateway API and Envoy Gateway kinds: egctl refuses the
	// cert-manager ones, and the rest (RBAC, Deployments) is not routing.
	var routing []*unstructured.Unstructured
	for _, u := range chartObjs {
		switch u.GroupVersionKind().Group {
		case gwv1.GroupName, "gateway.envoyproxy.io":
			u.SetNamespace(namespace) // helm sets it only at install time
			routing = append(routing, u)
		}
	}
	if got := kinds(routing); !cmp.Equal(got, []string{"EnvoyProxy", "Gateway", "SecurityPolicy"}) {
		t.Fatalf("the chart's routing kinds are %v, want EnvoyProxy, Gateway, SecurityPolicy", got)
	}
	for _, u := range routing {
		if u.GetKind() != "Gateway" {
			continue
		}
		// egctl's file loader keeps only the name of a Namespace (its
		// labels are dropped: resource/load.go), so the listener's
		// selector on the route-attachment label can never match here;
		// for the translation the listener admits routes from all
		// namespaces. The real controller's Accepted=True for a route of
		// a tenant namespace in TestDeployWithWorkerToken covers the
		// selector.
		listeners, _, _ := unstructured.NestedSlice(u.Object, "spec", "listeners")
		listeners[0].(map[string]any)["allowedRoutes"].(map[string]any)["namespaces"] = map[string]any{"from": "All"}
		if err := unstructured.SetNestedSlice(u.Object, listeners, "spec", "listeners"); err != nil {
			t.Fatal(err)
		}
	}

	// What the cluster holds besides the chart's objects: the operator's
	// GatewayClass and service-key Secret, and the listener certificate
	// cert-manager would have issued.
	key := serviceKey(t)
	ca := newTestCA(t, r.EnvoyServiceName()+"-root")
	gatewayClass := &gwv1.GatewayClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: "GatewayClass"},
		ObjectMeta: metav1.ObjectMeta{Name: class},
		Spec:       gwv1.GatewayClassSpec{ControllerName: egControllerName},
	}
	apiKey := serviceKeySecret(namespace, "occ-private-gateway-key", key)
	tlsSecret := ca.leafSecret(t, namespace, r.GatewayName+"-tls", r.Host())

	f := struct {
		ns    compute.Namespace
		agent compute.Agent
	}{ns: compute.Namespace{ID: ids.New(ids.Namespace), Name: "egctl"}}
	f.agent = compute.Agent{ID: ids.New(ids.Agent), NamespaceID: f.ns.ID, Name: "agent"}
	rev := compute.Revision{
		ID: ids.New(ids.Revision), NamespaceID: f.ns.ID, AgentID: f.agent.ID, AgentName: f.agent.Name, Number: 1,
		ConfigurationID: ids.New(ids.Configuration), ConfigurationGeneration: 1, Configuration: []byte(`{}`),
	}
	agentObjs, err := kube.Render(kc, rev, nil)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	tenant, _ := kube.RenderNamespace(kc, f.ns)

	input, err := kube.Manifest([]client.Object{gatewayClass, apiKey, tlsSecret, tenant, agentObjs.Service, agentObjs.HTTPRoute}...)
	if err != nil {
		t.Fatal(err)
	}
	for _, u := range routing {
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			t.Fatal(err)
		}
		input = append(append(input, "---\n"...), b...)
	}
	file := filepath.Join(t.TempDir(), "input.yaml")
	if err := os.WriteFile(file, input, 0o600); err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(ctx, env.Egctl, "x", "translate", "--from", "gateway-api", "--to", "xds",
		"-t", "all", "-o", "yaml", "--add-missing-resources", "-f", file)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	start := time.Now()
	xds, err := cmd.Output()
	if err != nil {
		t.Fatalf("egctl x translate: %v\n%s\ninput:\n%s", err, stderr.Bytes(), input)
	}
	t.Logf("egctl x translate took %v", time.Since(start).Round(time.Millisecond))
	got, err := parseTranslation(xds, kube.AgentPath(f.ns.ID, f.agent.ID))
	if err != nil {
		t.Fatalf("reading egctl's output: %v\ninput:\n%s\noutput:\n%s", err, input, xds)
	}
	want := translation{
		ListenerFilter: apiKeyFilter{
			Name: "envoy.filters.http.api_key_auth", Clients: []string{"occ"}, KeyHeaders: []string{agentgw.HeaderAPIKey}, HideCredentials: true,
		},
		Route: translatedRoute{
			Domains: []string{r.Host()},
			Path:    kube.AgentPath(f.ns.ID, f.agent.ID),
			Set: []string{
				"OVERWRITE_IF_EXISTS_OR_ADD x-occ-identity: occ-workspace-files",
				"OVERWRITE_IF_EXISTS_OR_ADD x-real-ip: %DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%",
			},
			Remove:       []string{"x-forwarded-for", "forwarded", "x-openclaw-scopes", "authorization", "cookie"},
			Rewrite:      "^/.*$ -> /",
			Upgrades:     []string{"websocket"},
			APIKeyClient: []string{"occ"},
			APIKeyHeader: []string{agentgw.HeaderAPIKey},
			HideKey:      true,
		},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("egctl x translate (-want +got):\n%s\ninput:\n%s\noutput:\n%s", diff, input, xds)
	}
	// The operator's key reaches Envoy's filter configuration (and only
	// there: the route never copies it into a header).
	if !bytes.Contains(xds, apiKey.Data["occ"]) {
		t.Errorf("egctl output does not carry the service key from the operator Secret")
	}
}

// kinds lists the objects' kinds, sorted.
func kinds(objs []*unstructured.Unstructured) []string {
	var out []string
	for _, u := range objs {
		out = append(out, u.GetKind())
	}
	slices.Sort(out)
	return out
}

// translation is what TestEgctlTranslate checks of egctl's xDS: the
// HTTPS listener's API-key filter and the Agent's route.
type translation struct {
	ListenerFilter apiKeyFilter
	Route          translatedRoute
}

type apiKeyFilter struct {
	Name            string
	Clients         []string
	KeyHeaders      []string
	HideCredentials bool
}

type translatedRoute struct {
	Domains      []string
	Path         string
	Set          []string // "<appendAction> <key>: <value>"
	Remove       []string
	Rewrite      string // "<regex> -> <substitution>"
	Upgrades     []string
	APIKeyClient []string
	APIKeyHeader []string
	HideKey      bool
}

// The parts of Envoy's config dump that translation reads; encoding/json
// matches the camelCase keys case-insensitively.
type (
	egctlOutput struct {
		XDS map[string]struct {
			Configs []json.RawMessage `json:"configs"`
		} `json:"xds"`
	}
	typed struct {
		Type string `json:"@type"`
	}
	apiKeyConfig struct {
		Credentials []struct{ Client string }
		Forwarding  struct{ HideCredentials bool }
		KeySources  []struct{ Header string }
	}
	listenersDump struct {
		DynamicListeners []struct {
			ActiveState struct {
				Listener struct {
					Name         string
					FilterChains []struct {
						Filters []struct {
							TypedConfig struct {
								HTTPFilters []struct {
									Name        string
									TypedConfig apiKeyConfig
								} `json:"httpFilters"`
							}
						}
					}
				}
			}
		}
	}
	routesDump struct {
		DynamicRouteConfigs []struct {
			RouteConfig struct {
				VirtualHosts []struct {
					Domains []string
					Routes  []struct {
						Match               struct{ Path string }
						RequestHeadersToAdd []struct {
							AppendAction string
							Header       struct{ Key, Value string }
						}
						RequestHeadersToRemove []string
						Route                  struct {
							RegexRewrite struct {
								Pattern      struct{ Regex string }
								Substitution string
							}
							UpgradeConfigs []struct{ UpgradeType string }
						}
						TypedPerFilterConfig map[string]apiKeyConfig
					}
				}
			}
		}
	}
)

// parseTranslation finds, in egctl's YAML, the API-key filter of the HTTPS
// listener and the route whose exact path is path.
func parseTranslation(out []byte, path string) (translation, error) {
	var doc egctlOutput
	if err := yaml.Unmarshal(out, &doc); err != nil {
		return translation{}, err
	}
	var tr translation
	foundRoute := false
	for _, gw := range doc.XDS {
		for _, raw := range gw.Configs {
			var t typed
			if err := json.Unmarshal(raw, &t); err != nil {
				return translation{}, err
			}
			switch t.Type {
			case "type.googleapis.com/envoy.admin.v3.ListenersConfigDump":
				var ld listenersDump
				if err := json.Unmarshal(raw, &ld); err != nil {
					return translation{}, err
				}
				for _, l := range ld.DynamicListeners {
					if !strings.HasSuffix(l.ActiveState.Listener.Name, "/https") {
						continue
					}
					for _, fc := range l.ActiveState.Listener.FilterChains {
						for _, f := range fc.Filters {
							for _, hf := range f.TypedConfig.HTTPFilters {
								if hf.Name == "envoy.filters.http.api_key_auth" {
									tr.ListenerFilter = apiKeyFilter{Name: hf.Name, HideCredentials: hf.TypedConfig.Forwarding.HideCredentials}
									for _, c := range hf.TypedConfig.Credentials {
										tr.ListenerFilter.Clients = append(tr.ListenerFilter.Clients, c.Client)
									}
									for _, k := range hf.TypedConfig.KeySources {
										tr.ListenerFilter.KeyHeaders = append(tr.ListenerFilter.KeyHeaders, k.Header)
									}
								}
							}
						}
					}
				}
			case "type.googleapis.com/envoy.admin.v3.RoutesConfigDump":
				var rd routesDump
				if err := json.Unmarshal(raw, &rd); err != nil {
					return translation{}, err
				}
				for _, rc := range rd.DynamicRouteConfigs {
					for _, vh := range rc.RouteConfig.VirtualHosts {
						for _, r := range vh.Routes {
							if r.Match.Path != path {
								continue
							}
							if foundRoute {
								return translation{}, fmt.Errorf("two routes match %s", path)
							}
							foundRoute = true
							got := translatedRoute{Domains: vh.Domains, Path: r.Match.Path, Remove: r.RequestHeadersToRemove,
								Rewrite: r.Route.RegexRewrite.Pattern.Regex + " -> " + r.Route.RegexRewrite.Substitution}
							for _, h := range r.RequestHeadersToAdd {
								got.Set = append(got.Set, h.AppendAction+" "+h.Header.Key+": "+h.Header.Value)
							}
							for _, u := range r.Route.UpgradeConfigs {
								got.Upgrades = append(got.Upgrades, u.UpgradeType)
							}
							if k, ok := r.TypedPerFilterConfig["envoy.filters.http.api_key_auth"]; ok {
								got.HideKey = k.Forwarding.HideCredentials
								for _, c := range k.Credentials {
									got.APIKeyClient = append(got.APIKeyClient, c.Client)
								}
								for _, s := range k.KeySources {
									got.APIKeyHeader = append(got.APIKeyHeader, s.Header)
								}
							}
							tr.Route = got
						}
					}
				}
			}
		}
	}
	if !foundRoute {
		return tr, fmt.Errorf("no route matches the exact path %s", path)
	}
	return tr, nil
}
