package kube

import (
	"bytes"
	"encoding/json"
	"slices"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/setuprunner"
	"github.com/openclaw/occ/internal/workspace"
)

// Fixed ids and their hashes (printf %s <id> | sha256sum).
const (
	nsID        = "ns_00000000-0000-4000-8000-000000000000"
	agentID     = "agt_00000000-0000-4000-8000-000000000001"
	revID       = "rev_00000000-0000-4000-8000-000000000002"
	nsHash24    = "01984e6e2e0f1d6eaf935251"
	agentHash12 = "ae7ce1d120d7"
	revHash12   = "79a910c37317"
)

func unitConfig() Config {
	return Config{
		GatewayRouting: &GatewayRouting{GatewayName: "oce-agent-gateways", GatewayNamespace: "openclaw-system", EnvoyNamespace: "envoy-gateway-system"},
		Network:        Network{GatewayTrustedProxyCIDRs: []string{"10.244.0.0/16", "fd00:10:244::/56"}},
		Runtime:        Runtime{GatewayImage: "gw:1", OCCImage: "occ:1", GatewayStorageClassName: "fast"},
	}
}

func directConfig() Config {
	c := unitConfig()
	c.GatewayRouting = nil
	c.Network = Network{GatewayClients: []string{"10.1.0.0/16"}}
	return c
}

func unitRevision(config string) compute.Revision {
	return compute.Revision{
		ID: revID, NamespaceID: nsID, AgentID: agentID, AgentName: "a", Number: 7,
		ConfigurationID: "cfg_00000000-0000-4000-8000-000000000003", ConfigurationGeneration: 3,
		Configuration: json.RawMessage(config),
	}
}

func unitSetup() *compute.WorkspaceSetup {
	return &compute.WorkspaceSetup{
		ID: "wss_00000000-0000-4000-8000-000000000004", NamespaceID: nsID, AgentID: agentID,
		Files: map[string]string{"AGENTS.md": "SECRET-AGENTS-CONTENT\n", "SOUL.md": "", "IDENTITY.md": "who\n", "USER.md": "me\n"},
	}
}

func TestNames(t *testing.T) {
	tests := []struct{ name, got, want string }{
		{"TenantNamespace", TenantNamespace(nsID), "occ-" + nsHash24},
		{"GatewayName", GatewayName(agentID), "gateway-" + agentHash12},
		{"ConfigMapName", ConfigMapName(agentID, revID), "gateway-" + agentHash12 + "-rev-" + revHash12},
		{"StatePVCName", StatePVCName(agentID), "gateway-state-" + agentHash12},
		{"SetupSecretName", SetupSecretName(agentID), "workspace-setup-" + agentHash12},
		{"ImagePullSecretName", ImagePullSecretName("regcred"), "image-pull-regcred"},
		{"AgentPath", AgentPath(nsID, agentID), "/namespaces/" + nsID + "/agents/" + agentID},
	}
	for _, tt := range tests {
		if tt.got != tt.want {
			t.Errorf("%s = %q, want %q", tt.name, tt.got, tt.want)
		}
		if tt.name != "AgentPath" {
			if msgs := validation.IsDNS1123Label(tt.got); len(msgs) > 0 {
				t.Errorf("%s = %q is not a DNS-1123 label: %v", tt.name, tt.got, msgs)
			}
		}
	}
}

func TestEndpointURL(t *testing.T) {
	tests := []struct {
		name   string
		change func(*GatewayRouting)
		want   string
	}{
		{"derived host, default port", func(*GatewayRouting) {},
			"wss://occ-gateway-20ec97c41b82.envoy-gateway-system.svc/namespaces/" + nsID + "/agents/" + agentID},
		{"explicit port 443 is omitted", func(r *GatewayRouting) { r.EndpointPort = 443 },
			"wss://occ-gateway-20ec97c41b82.envoy-gateway-system.svc/namespaces/" + nsID + "/agents/" + agentID},
		{"other port is kept", func(r *GatewayRouting) { r.EndpointPort = 8443 },
			"wss://occ-gateway-20ec97c41b82.envoy-gateway-system.svc:8443/namespaces/" + nsID + "/agents/" + agentID},
		{"explicit hostname", func(r *GatewayRouting) { r.Hostname = "agents.example.com" },
			"wss://agents.example.com/namespaces/" + nsID + "/agents/" + agentID},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := unitConfig()
			tt.change(cfg.GatewayRouting)
			if got := EndpointURL(cfg, nsID, agentID); got != tt.want {
				t.Errorf("EndpointURL() = %q, want %q", got, tt.want)
			}
		})
	}
}

// decodeJSON parses a rendered document for comparison.
func decodeJSON(t *testing.T, b []byte) map[string]any {
	t.Helper()
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatalf("rendered configuration is not JSON: %v\n%s", err, b)
	}
	return m
}

// routedAuth is the gateway section RenderNativeConfig renders with
// unitConfig, as decoded JSON.
func routedGateway() map[string]any {
	return map[string]any{
		"mode": "local", "bind": "lan", "port": float64(8080),
		"trustedProxies":      []any{"10.244.0.0/16", "fd00:10:244::/56"},
		"allowRealIpFallback": true,
		"auth": map[string]any{
			"mode": "trusted-proxy",
			"trustedProxy": map[string]any{
				"userHeader": "x-occ-identity",
				"allowUsers": []any{"occ-workspace-files"},
			},
			"identityScopes": map[string]any{
				"occ-workspace-files": []any{"operator.admin", "operator.read", "operator.write"},
			},
		},
	}
}

func TestRenderNativeConfig(t *testing.T) {
	workspaceDefaults := map[string]any{"defaults": map[string]any{"workspace": WorkspaceDir}}
	tests := []struct {
		name string
		cfg  Config
		in   string
		want map[string]any
	}{
		{
			name: "empty document gets the routed gateway",
			cfg:  unitConfig(), in: `{}`,
			want: map[string]any{"gateway": routedGateway(), "agents": workspaceDefaults},
		},
		{
			name: "no document at all is the empty document",
			cfg:  unitConfig(), in: ``,
			want: map[string]any{"gateway": routedGateway(), "agents": workspaceDefaults},
		},
		{
			name: "tenant settings pass through unchanged",
			cfg:  unitConfig(),
			in:   `{"logging":{"level":"debug","maxFileBytes":1048576},"agents":{"defaults":{"model":"x/y","heartbeat":{"every":"0m"}},"entries":{"main":{}}},"plugins":{"enabled":false},"gateway":{"controlUi":{"enabled":false}}}`,
			want: map[string]any{
				"logging": map[string]any{"level": "debug", "maxFileBytes": float64(1048576)},
				"agents": map[string]any{
					"defaults": map[string]any{"model": "x/y", "heartbeat": map[string]any{"every": "0m"}, "workspace": WorkspaceDir},
					"entries":  map[string]any{"main": map[string]any{}},
				},
				"plugins": map[string]any{"enabled": false},
				"gateway": func() map[string]any {
					g := routedGateway()
					g["controlUi"] = map[string]any{"enabled": false}
					return g
				}(),
			},
		},
		{
			name: "matching explicit settings are accepted",
			cfg:  unitConfig(),
			in: `{"gateway":{"mode":"local","bind":"lan","port":8080,"allowRealIpFallback":true,
				"trustedProxies":["fd00:10:244::/56","10.244.0.0/16"],
				"auth":{"mode":"trusted-proxy","trustedProxy":{"userHeader":"x-occ-identity","allowUsers":["occ-workspace-files"],"allowLoopback":false},
				"identityScopes":{"occ-workspace-files":["operator.write","operator.read","operator.admin"]}}},
				"agents":{"defaults":{"workspace":"/home/node/.openclaw/workspace"},"entries":{"main":{"workspace":"/home/node/.openclaw/workspace"}}}}`,
			want: map[string]any{
				"gateway": func() map[string]any {
					g := routedGateway()
					g["trustedProxies"] = []any{"10.244.0.0/16", "fd00:10:244::/56"}
					return g
				}(),
				"agents": map[string]any{
					"defaults": map[string]any{"workspace": WorkspaceDir},
					"entries":  map[string]any{"main": map[string]any{"workspace": WorkspaceDir}},
				},
			},
		},
		{
			name: "the env password reference is kept",
			cfg:  unitConfig(),
			in:   `{"gateway":{"auth":{"password":{"source":"env","provider":"default","id":"OPENCLAW_GATEWAY_PASSWORD"}}}}`,
			want: map[string]any{
				"gateway": func() map[string]any {
					g := routedGateway()
					g["auth"].(map[string]any)["password"] = map[string]any{"source": "env", "provider": "default", "id": "OPENCLAW_GATEWAY_PASSWORD"}
					return g
				}(),
				"agents": workspaceDefaults,
			},
		},
		{
			name: "without routing the tenant's authentication passes through",
			cfg:  directConfig(),
			in:   `{"gateway":{"auth":{"mode":"password","password":{"source":"env","provider":"default","id":"OPENCLAW_GATEWAY_PASSWORD"}}}}`,
			want: map[string]any{
				"gateway": map[string]any{
					"mode": "local", "bind": "lan", "port": float64(8080),
					"auth": map[string]any{"mode": "password", "password": map[string]any{"source": "env", "provider": "default", "id": "OPENCLAW_GATEWAY_PASSWORD"}},
				},
				"agents": workspaceDefaults,
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			out, err := RenderNativeConfig(tt.cfg, json.RawMessage(tt.in))
			if err != nil {
				t.Fatalf("RenderNativeConfig(%s): %v", tt.in, err)
			}
			if diff := cmp.Diff(tt.want, decodeJSON(t, out)); diff != "" {
				t.Errorf("RenderNativeConfig(%s) mismatch (-want +got):\n%s", tt.in, diff)
			}
		})
	}

	t.Run("numbers pass through exactly", func(t *testing.T) {
		out, err := RenderNativeConfig(unitConfig(), json.RawMessage(`{"x":{"big":12345678901234567890,"f":1.50}}`))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Contains(out, []byte("12345678901234567890")) || !bytes.Contains(out, []byte("1.50")) {
			t.Errorf("numbers changed:\n%s", out)
		}
	})
}

func TestRenderNativeConfigConflicts(t *testing.T) {
	tests := []struct {
		name string
		cfg  Config
		in   string
		want string // substring of the error
	}{
		{"not an object", unitConfig(), `[1]`, "the configuration is not a JSON object"},
		{"trailing data", unitConfig(), `{} {}`, "the configuration is not a JSON object"},
		{"another agent", unitConfig(), `{"agents":{"entries":{"main":{},"helper":{}}}}`, "only the native main agent is supported"},
		{"agents list", unitConfig(), `{"agents":{"list":[]}}`, "only the native main agent is supported"},
		{"remote mode", unitConfig(), `{"gateway":{"mode":"remote"}}`, `gateway.mode must be absent or "local"`},
		{"loopback bind", unitConfig(), `{"gateway":{"bind":"loopback"}}`, `gateway.bind must be absent or "lan"`},
		{"other port", unitConfig(), `{"gateway":{"port":9999}}`, "gateway.port must be absent or 8080"},
		{"custom bind host", unitConfig(), `{"gateway":{"customBindHost":"0.0.0.0"}}`, "gateway.customBindHost is not allowed"},
		{"tailscale", unitConfig(), `{"gateway":{"tailscale":{"mode":"funnel"}}}`, `gateway.tailscale.mode must be absent or "off"`},
		{"gateway not an object", unitConfig(), `{"gateway":"x"}`, "gateway must be an object"},
		{"token", unitConfig(), `{"gateway":{"auth":{"mode":"token","token":"s3cret-token-value"}}}`, "gateway.auth.token is not allowed"},
		{"token without routing", directConfig(), `{"gateway":{"auth":{"token":"s3cret-token-value"}}}`, "gateway.auth.token is not allowed"},
		{"literal password", unitConfig(), `{"gateway":{"auth":{"password":"s3cret-password-value"}}}`, "gateway.auth.password must be the SecretRef"},
		{"other env password", unitConfig(), `{"gateway":{"auth":{"password":{"source":"env","provider":"default","id":"OTHER"}}}}`, "gateway.auth.password must be the SecretRef"},
		{"auth mode", unitConfig(), `{"gateway":{"auth":{"mode":"none"}}}`, `gateway.auth.mode must be absent or "trusted-proxy"`},
		{"unsupported auth field", unitConfig(), `{"gateway":{"auth":{"rateLimit":{}}}}`, "gateway.auth.rateLimit is not supported with routing"},
		{"user header", unitConfig(), `{"gateway":{"auth":{"trustedProxy":{"userHeader":"x-user"}}}}`, `gateway.auth.trustedProxy.userHeader must be absent or "x-occ-identity"`},
		{"more users", unitConfig(), `{"gateway":{"auth":{"trustedProxy":{"allowUsers":["occ-workspace-files","mallory"]}}}}`, "gateway.auth.trustedProxy.allowUsers must be absent"},
		{"allow loopback", unitConfig(), `{"gateway":{"auth":{"trustedProxy":{"allowLoopback":true}}}}`, "gateway.auth.trustedProxy.allowLoopback must be absent or false"},
		{"required headers", unitConfig(), `{"gateway":{"auth":{"trustedProxy":{"requiredHeaders":["x-forwarded-for"]}}}}`, "gateway.auth.trustedProxy.requiredHeaders is not supported"},
		{"trusted proxy not an object", unitConfig(), `{"gateway":{"auth":{"trustedProxy":true}}}`, "gateway.auth.trustedProxy must be an object"},
		{"other scopes", unitConfig(), `{"gateway":{"auth":{"identityScopes":{"occ-workspace-files":["operator.read"]}}}}`, "gateway.auth.identityScopes must be absent"},
		{"another identity", unitConfig(), `{"gateway":{"auth":{"identityScopes":{"mallory":["operator.admin"]}}}}`, "gateway.auth.identityScopes must be absent"},
		{"other trusted proxies", unitConfig(), `{"gateway":{"trustedProxies":["0.0.0.0/0"]}}`, "gateway.trustedProxies must be absent or equal network.gatewayTrustedProxyCidrs"},
		{"no real-IP fallback", unitConfig(), `{"gateway":{"allowRealIpFallback":false}}`, "gateway.allowRealIpFallback must be absent or true"},
		{"other workspace", unitConfig(), `{"agents":{"defaults":{"workspace":"/tmp/ws"}}}`, `agents.defaults.workspace must be absent or "/home/node/.openclaw/workspace"`},
		{"main workspace", unitConfig(), `{"agents":{"entries":{"main":{"workspace":"/srv"}}}}`, `agents.entries.main.workspace must be absent`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := RenderNativeConfig(tt.cfg, json.RawMessage(tt.in))
			p, ok := compute.AsPermanent(err)
			if !ok || p.Code != compute.CodeConfigurationInvalid {
				t.Fatalf("RenderNativeConfig(%s) = %v, want a permanent %s", tt.in, err, compute.CodeConfigurationInvalid)
			}
			if !strings.Contains(err.Error(), tt.want) {
				t.Errorf("RenderNativeConfig(%s) error = %q, want it to contain %q", tt.in, err, tt.want)
			}
			if strings.Contains(err.Error(), "s3cret") {
				t.Errorf("RenderNativeConfig(%s) error quotes a secret value: %q", tt.in, err)
			}
		})
	}
}

func TestRenderHTTPRoute(t *testing.T) {
	objs, err := Render(unitConfig(), unitRevision(`{}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	want := &gwv1.HTTPRoute{
		TypeMeta: metav1.TypeMeta{APIVersion: "gateway.networking.k8s.io/v1", Kind: "HTTPRoute"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "gateway-" + agentHash12, Namespace: "occ-" + nsHash24,
			Labels: map[string]string{
				"app.kubernetes.io/managed-by": "openclaw-enterprise", "openclaw.dev/namespace": nsID, "openclaw.dev/agent": agentID,
			},
			Annotations: map[string]string{
				"openclaw.dev/namespace-id": nsID, "openclaw.dev/agent-id": agentID,
				"openclaw.dev/agent-revision-id": revID, "openclaw.dev/agent-revision": "7",
			},
		},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{
				Group: ptr.To[gwv1.Group]("gateway.networking.k8s.io"), Kind: ptr.To[gwv1.Kind]("Gateway"),
				Namespace: ptr.To[gwv1.Namespace]("openclaw-system"), Name: "oce-agent-gateways",
				SectionName: ptr.To[gwv1.SectionName]("https"),
			}}},
			Hostnames: []gwv1.Hostname{"occ-gateway-20ec97c41b82.envoy-gateway-system.svc"},
			Rules: []gwv1.HTTPRouteRule{{
				Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{
					Type: ptr.To(gwv1.PathMatchExact), Value: ptr.To("/namespaces/" + nsID + "/agents/" + agentID),
				}}},
				Filters: []gwv1.HTTPRouteFilter{
					{Type: "URLRewrite", URLRewrite: &gwv1.HTTPURLRewriteFilter{Path: &gwv1.HTTPPathModifier{
						Type: "ReplaceFullPath", ReplaceFullPath: ptr.To("/"),
					}}},
					{Type: "RequestHeaderModifier", RequestHeaderModifier: &gwv1.HTTPHeaderFilter{
						Set: []gwv1.HTTPHeader{
							{Name: "x-occ-identity", Value: "occ-workspace-files"},
							{Name: "x-real-ip", Value: "%DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%"},
						},
						Remove: []string{"x-forwarded-for", "forwarded", "x-openclaw-scopes", "authorization", "cookie"},
					}},
				},
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
					Group: ptr.To[gwv1.Group](""), Kind: ptr.To[gwv1.Kind]("Service"), Name: gwv1.ObjectName("gateway-" + agentHash12),
					Port: ptr.To[gwv1.PortNumber](8080),
				}}}},
			}},
		},
	}
	if diff := cmp.Diff(want, objs.HTTPRoute); diff != "" {
		t.Errorf("HTTPRoute mismatch (-want +got):\n%s", diff)
	}

	direct, err := Render(directConfig(), unitRevision(`{}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	if direct.HTTPRoute != nil {
		t.Errorf("without routing Render returned an HTTPRoute")
	}
}

func TestRenderConfigMapAndPVC(t *testing.T) {
	objs, err := Render(unitConfig(), unitRevision(`{"logging":{"level":"info"}}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	cm := objs.ConfigMap
	if cm.Name != ConfigMapName(agentID, revID) || cm.Namespace != TenantNamespace(nsID) || !ptr.Deref(cm.Immutable, false) {
		t.Errorf("ConfigMap %s/%s immutable=%v, want %s/%s immutable", cm.Namespace, cm.Name, cm.Immutable, TenantNamespace(nsID), ConfigMapName(agentID, revID))
	}
	wantAnn := map[string]string{
		"openclaw.dev/namespace-id": nsID, "openclaw.dev/agent-id": agentID, "openclaw.dev/revision-id": revID,
		"openclaw.dev/configuration-id": "cfg_00000000-0000-4000-8000-000000000003", "openclaw.dev/configuration-kind": "agent",
		"openclaw.dev/configuration-generation": "3",
	}
	if diff := cmp.Diff(wantAnn, cm.Annotations); diff != "" {
		t.Errorf("ConfigMap annotations (-want +got):\n%s", diff)
	}
	if got := slices.Sorted(func(yield func(string) bool) {
		for k := range cm.Data {
			if !yield(k) {
				return
			}
		}
	}); !slices.Equal(got, []string{"openclaw.json"}) {
		t.Errorf("ConfigMap keys = %v, want [openclaw.json]", got)
	}
	if cm.Labels[LabelRevision] != revID {
		t.Errorf("ConfigMap revision label = %q", cm.Labels[LabelRevision])
	}

	pvc := objs.StatePVC
	if pvc.Name != "gateway-state-"+agentHash12 || ptr.Deref(pvc.Spec.StorageClassName, "") != "fast" ||
		pvc.Spec.Resources.Requests.Storage().String() != "10Gi" || !slices.Equal(pvc.Spec.AccessModes, []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce}) {
		t.Errorf("PVC = %s class %v size %s modes %v; want gateway-state-%s, fast, 10Gi, RWO",
			pvc.Name, pvc.Spec.StorageClassName, pvc.Spec.Resources.Requests.Storage(), pvc.Spec.AccessModes, agentHash12)
	}
	noClass := unitConfig()
	noClass.Runtime.GatewayStorageClassName = ""
	objs, _ = Render(noClass, unitRevision(`{}`), nil)
	if objs.StatePVC.Spec.StorageClassName != nil {
		t.Errorf("PVC without a configured class has class %q, want the cluster default (nil)", *objs.StatePVC.Spec.StorageClassName)
	}
}

func TestRenderDeployment(t *testing.T) {
	setup := unitSetup()
	objs, err := Render(unitConfig(), unitRevision(`{}`), setup)
	if err != nil {
		t.Fatal(err)
	}
	dep := objs.Deployment
	spec := dep.Spec.Template.Spec

	if ptr.Deref(dep.Spec.Replicas, 0) != 1 || dep.Spec.Strategy.Type != appsv1.RecreateDeploymentStrategyType {
		t.Errorf("replicas %v strategy %q, want 1 and Recreate", dep.Spec.Replicas, dep.Spec.Strategy.Type)
	}
	if diff := cmp.Diff(map[string]string{LabelAgent: agentID, LabelWorkloadRole: "gateway"}, dep.Spec.Selector.MatchLabels); diff != "" {
		t.Errorf("selector (-want +got):\n%s", diff)
	}
	if dep.Annotations[AnnotationAgentRevisionID] != revID || dep.Annotations[AnnotationAgentRevision] != "7" {
		t.Errorf("ownership annotations %v", dep.Annotations)
	}
	podLabels := dep.Spec.Template.Labels
	for k, v := range map[string]string{LabelWorkloadRole: "gateway", LabelNetworkProfile: "broad-egress-v1", LabelRevision: revID, LabelNamespace: nsID} {
		if podLabels[k] != v {
			t.Errorf("pod label %s = %q, want %q", k, podLabels[k], v)
		}
	}

	type container struct {
		Name    string
		Image   string
		Command []string
	}
	var got []container
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		got = append(got, container{c.Name, c.Image, c.Command})
	}
	want := []container{
		{"occ-binary", "occ:1", []string{"/usr/local/bin/occ", "install-self", "--to", "/opt/occ/bin/occ"}},
		{"workspace-setup", "gw:1", []string{"/opt/occ/bin/occ", "workspace-setup",
			"--payload", "/run/occ/workspace-setup/payload.json", "--workspace", "/home/node/.openclaw/workspace",
			"--node", "node", "--openclaw", "/app/openclaw.mjs", "--state-dir", "/home/node/.openclaw"}},
		{"gateway", "gw:1", []string{"/opt/occ/bin/occ", "workspace-setup", "--verify",
			"--payload", "/run/occ/workspace-setup/identity.json", "--workspace", "/home/node/.openclaw/workspace",
			"--exec", "--", "node", "/app/openclaw.mjs", "gateway", "run", "--port", "8080"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("containers (-want +got):\n%s", diff)
	}

	// OpenClaw writes below XDG_CACHE_HOME at start; with a read-only root
	// it must be on a volume every container mounts.
	for _, c := range append(slices.Clone(spec.InitContainers[1:]), spec.Containers...) {
		var cache string
		for _, e := range c.Env {
			if e.Name == "XDG_CACHE_HOME" {
				cache = e.Value
			}
		}
		onVolume := false
		for _, m := range c.VolumeMounts {
			onVolume = onVolume || (!m.ReadOnly && strings.HasPrefix(cache, m.MountPath+"/"))
		}
		if !onVolume {
			t.Errorf("container %s: XDG_CACHE_HOME %q is not on a writable volume", c.Name, cache)
		}
	}

	// The payload reaches the Pod only as a mounted file.
	for _, c := range append(slices.Clone(spec.InitContainers), spec.Containers...) {
		text := strings.Join(append(slices.Clone(c.Command), c.Args...), " ")
		for _, e := range c.Env {
			text += " " + e.Name + "=" + e.Value
			if e.ValueFrom != nil {
				t.Errorf("container %s env %s comes from a reference; nothing of the setup may reach env", c.Name, e.Name)
			}
		}
		if strings.Contains(text, "SECRET-AGENTS-CONTENT") || strings.Contains(text, setup.ID) {
			t.Errorf("container %s carries setup content or identity in its command or env: %s", c.Name, text)
		}
		if len(c.EnvFrom) > 0 {
			t.Errorf("container %s has envFrom", c.Name)
		}
		sc := c.SecurityContext
		if sc == nil || !ptr.Deref(sc.ReadOnlyRootFilesystem, false) || ptr.Deref(sc.AllowPrivilegeEscalation, true) {
			t.Errorf("container %s security context %+v", c.Name, sc)
		}
	}
	var setupVolume *corev1.SecretVolumeSource
	for _, v := range spec.Volumes {
		if v.Secret != nil {
			setupVolume = v.Secret
		}
	}
	if setupVolume == nil || setupVolume.SecretName != SetupSecretName(agentID) || ptr.Deref(setupVolume.DefaultMode, 0) != 0o440 {
		t.Errorf("setup Secret volume = %+v, want %s mode 0440", setupVolume, SetupSecretName(agentID))
	}
	if ptr.Deref(spec.AutomountServiceAccountToken, true) || ptr.Deref(spec.EnableServiceLinks, true) {
		t.Errorf("the gateway Pod gets a service account token or service links")
	}
	if res := spec.Containers[0].Resources; res.Requests.Memory().String() != "1Gi" || res.Limits.Memory().String() != "2Gi" {
		t.Errorf("gateway resources %v, want the default budget", res)
	}
	if res := spec.InitContainers[1].Resources; res.Limits.Memory().String() != "2Gi" {
		t.Errorf("workspace-setup resources %v, want the gateway's budget", res)
	}

	// Without a setup: no init containers, no verifier, no Secret.
	objs, err = Render(unitConfig(), unitRevision(`{}`), nil)
	if err != nil {
		t.Fatal(err)
	}
	spec = objs.Deployment.Spec.Template.Spec
	if len(spec.InitContainers) != 0 || objs.SetupSecret != nil {
		t.Errorf("without a setup: %d init containers, Secret %v", len(spec.InitContainers), objs.SetupSecret != nil)
	}
	if diff := cmp.Diff([]string{"node", "/app/openclaw.mjs", "gateway", "run", "--port", "8080"}, spec.Containers[0].Command); diff != "" {
		t.Errorf("gateway command without a setup (-want +got):\n%s", diff)
	}
}

// TestRenderImagePullSecretRefs: the gateway Pod lists the copies of
// runtime.imagePullSecrets in their order, and without any has no
// imagePullSecrets field at all (the apply configuration is unchanged).
func TestRenderImagePullSecretRefs(t *testing.T) {
	tests := []struct {
		name    string
		secrets []string
		want    []corev1.LocalObjectReference
	}{
		{"none", nil, nil},
		{"one", []string{"regcred"}, []corev1.LocalObjectReference{{Name: "image-pull-regcred"}}},
		{"two in their order", []string{"mirror.example.com", "regcred"}, []corev1.LocalObjectReference{
			{Name: "image-pull-mirror.example.com"}, {Name: "image-pull-regcred"},
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := unitConfig()
			cfg.Runtime.ImagePullSecrets = tt.secrets
			if len(tt.secrets) > 0 {
				cfg.Runtime.ImagePullSecretsNamespace = "openclaw-system"
			}
			for _, setup := range []*compute.WorkspaceSetup{nil, unitSetup()} {
				objs, err := Render(cfg, unitRevision(`{}`), setup)
				if err != nil {
					t.Fatal(err)
				}
				if diff := cmp.Diff(tt.want, objs.Deployment.Spec.Template.Spec.ImagePullSecrets); diff != "" {
					t.Errorf("Render(setup %t): imagePullSecrets (-want +got):\n%s", setup != nil, diff)
				}
				u, err := toApply(objs.Deployment)
				if err != nil {
					t.Fatal(err)
				}
				_, present := u.Object["spec"].(map[string]any)["template"].(map[string]any)["spec"].(map[string]any)["imagePullSecrets"]
				if present != (len(tt.secrets) > 0) {
					t.Errorf("Render(setup %t): the applied pod spec has imagePullSecrets %t, want %t", setup != nil, present, len(tt.secrets) > 0)
				}
			}
		})
	}
}

// TestRenderImagePullSecret: the copy has the source's type and data, the
// driver's name, labels and annotations, and nothing else of the source;
// a Secret that is not a registry credential is refused without a byte
// of its data in the error.
func TestRenderImagePullSecret(t *testing.T) {
	source := func(typ corev1.SecretType, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{
				Name: "regcred", Namespace: "openclaw-system", ResourceVersion: "42", UID: "0e2c0f5e-1111-4000-8000-000000000000",
				Labels: map[string]string{"team": "platform"},
				Annotations: map[string]string{
					"kubectl.kubernetes.io/last-applied-configuration": `{"data":{"x":"SECRET-PULL-CREDENTIAL"}}`,
				},
			},
			Immutable: ptr.To(true),
			Type:      typ,
			Data:      data,
		}
	}
	copyOf := func(typ corev1.SecretType, data map[string][]byte) *corev1.Secret {
		return &corev1.Secret{
			TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
			ObjectMeta: metav1.ObjectMeta{
				Name: "image-pull-regcred", Namespace: "occ-" + nsHash24,
				Labels: map[string]string{
					"app.kubernetes.io/managed-by": "openclaw-enterprise", "openclaw.dev/namespace": nsID,
					"openclaw.dev/image-pull-secret": "true",
				},
				Annotations: map[string]string{
					"openclaw.dev/namespace-id":             nsID,
					"openclaw.dev/image-pull-secret-source": "openclaw-system/regcred",
				},
			},
			Type: typ,
			Data: data,
		}
	}
	// Each call returns new bytes, so a test case that changes its copy
	// can compare the source with the data it was made of.
	dockerConfigJSON := func() map[string][]byte {
		return map[string][]byte{".dockerconfigjson": []byte(`{"auths":{"registry.example":{"auth":"SECRET-PULL-CREDENTIAL"}}}`)}
	}
	dockercfg := func() map[string][]byte {
		return map[string][]byte{".dockercfg": []byte(`{"registry.example":{"auth":"SECRET-PULL-CREDENTIAL"}}`)}
	}
	tests := []struct {
		name    string
		src     *corev1.Secret
		want    *corev1.Secret
		wantErr string
	}{
		{"dockerconfigjson", source(corev1.SecretTypeDockerConfigJson, dockerConfigJSON()), copyOf(corev1.SecretTypeDockerConfigJson, dockerConfigJSON()), ""},
		{"dockercfg", source(corev1.SecretTypeDockercfg, dockercfg()), copyOf(corev1.SecretTypeDockercfg, dockercfg()), ""},
		{"opaque", source(corev1.SecretTypeOpaque, dockerConfigJSON()), nil,
			`kube: image pull Secret openclaw-system/regcred (runtime.imagePullSecrets) is of type "Opaque"; only kubernetes.io/dockerconfigjson and kubernetes.io/dockercfg Secrets are copied to tenant namespaces`},
		{"tls", source(corev1.SecretTypeTLS, map[string][]byte{"tls.key": []byte("SECRET-PULL-CREDENTIAL")}), nil,
			`kube: image pull Secret openclaw-system/regcred (runtime.imagePullSecrets) is of type "kubernetes.io/tls"; only kubernetes.io/dockerconfigjson and kubernetes.io/dockercfg Secrets are copied to tenant namespaces`},
		{"service account token", source(corev1.SecretTypeServiceAccountToken, map[string][]byte{"token": []byte("SECRET-PULL-CREDENTIAL")}), nil,
			`kube: image pull Secret openclaw-system/regcred (runtime.imagePullSecrets) is of type "kubernetes.io/service-account-token"; only kubernetes.io/dockerconfigjson and kubernetes.io/dockercfg Secrets are copied to tenant namespaces`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := RenderImagePullSecret(nsID, tt.src)
			gotErr := ""
			if err != nil {
				gotErr = err.Error()
			}
			if gotErr != tt.wantErr {
				t.Errorf("RenderImagePullSecret error = %q, want %q", gotErr, tt.wantErr)
			}
			if strings.Contains(gotErr, "SECRET-PULL-CREDENTIAL") {
				t.Errorf("RenderImagePullSecret's error holds the Secret's data: %s", gotErr)
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("RenderImagePullSecret (-want +got):\n%s", diff)
			}
			if got != nil {
				// The copy owns its bytes: changing it leaves the source as read.
				for k := range got.Data {
					got.Data[k][0] = 'X'
				}
				if diff := cmp.Diff(tt.want.Data, tt.src.Data); diff != "" {
					t.Errorf("changing the copy changed the source (-want +got):\n%s", diff)
				}
			}
		})
	}
}

func TestRenderSetupSecret(t *testing.T) {
	setup := unitSetup()
	parse := func(b []byte) workspace.Setup {
		t.Helper()
		s, err := setuprunner.ParsePayload(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("the runner refuses the payload %s: %v", b, err)
		}
		return s
	}
	identity := workspace.Setup{ID: setup.ID, NamespaceID: nsID, AgentID: agentID, Completed: true}

	pending, err := RenderSetupSecret(nsID, agentID, setup, false)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(workspace.Setup{ID: setup.ID, NamespaceID: nsID, AgentID: agentID, Files: setup.Files}, parse(pending.Data[SetupPayloadKey])); diff != "" {
		t.Errorf("pending payload (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(identity, parse(pending.Data[SetupIdentityKey])); diff != "" {
		t.Errorf("identity (-want +got):\n%s", diff)
	}
	if pending.Name != "workspace-setup-"+agentHash12 || pending.Annotations[AnnotationWorkspaceSetupID] != setup.ID ||
		pending.Annotations[AnnotationWorkspaceSetupCompleted] != "false" {
		t.Errorf("Secret %s annotations %v", pending.Name, pending.Annotations)
	}

	for name, s := range map[string]*corev1.Secret{
		"forced completed": must(RenderSetupSecret(nsID, agentID, setup, true)),
		"completed setup":  must(RenderSetupSecret(nsID, agentID, &compute.WorkspaceSetup{ID: setup.ID, NamespaceID: nsID, AgentID: agentID, Completed: true}, false)),
	} {
		if diff := cmp.Diff(identity, parse(s.Data[SetupPayloadKey])); diff != "" {
			t.Errorf("%s: payload (-want +got):\n%s", name, diff)
		}
		if bytes.Contains(s.Data[SetupPayloadKey], []byte("SECRET-AGENTS-CONTENT")) {
			t.Errorf("%s: payload still holds file content", name)
		}
		if got := s.Annotations[AnnotationWorkspaceSetupCompleted]; got != "true" {
			t.Errorf("%s: annotation %s = %q, want true", name, AnnotationWorkspaceSetupCompleted, got)
		}
	}
}

func must[T any](v T, err error) T {
	if err != nil {
		panic(err)
	}
	return v
}

func TestRenderNamespace(t *testing.T) {
	ns := compute.Namespace{ID: nsID}
	namespace, policies := RenderNamespace(unitConfig(), ns)
	wantLabels := map[string]string{
		"app.kubernetes.io/managed-by": "openclaw-enterprise", "openclaw.dev/namespace": nsID,
		"openclaw-enterprise.io/gateway": "20ec97c41b82", "pod-security.kubernetes.io/enforce": "restricted",
	}
	if diff := cmp.Diff(wantLabels, namespace.Labels); diff != "" {
		t.Errorf("namespace labels (-want +got):\n%s", diff)
	}
	if namespace.Name != "occ-"+nsHash24 || namespace.Annotations[AnnotationNamespaceID] != nsID {
		t.Errorf("namespace %s annotations %v", namespace.Name, namespace.Annotations)
	}
	byName := map[string]networkingv1.NetworkPolicySpec{}
	for _, p := range policies {
		byName[p.Name] = p.Spec
	}
	tcp := corev1.ProtocolTCP
	wantIngress := networkingv1.NetworkPolicySpec{
		PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelWorkloadRole: "gateway"}},
		PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
		Ingress: []networkingv1.NetworkPolicyIngressRule{{
			From: []networkingv1.NetworkPolicyPeer{{
				NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": "envoy-gateway-system"}},
				PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
					"gateway.envoyproxy.io/owning-gateway-namespace": "openclaw-system",
					"gateway.envoyproxy.io/owning-gateway-name":      "oce-agent-gateways",
				}},
			}},
			Ports: []networkingv1.NetworkPolicyPort{{Protocol: &tcp, Port: ptr.To(intstr.FromInt32(8080))}},
		}},
	}
	if diff := cmp.Diff(wantIngress, byName[PolicyGatewayIngress]); diff != "" {
		t.Errorf("allow-gateway-ingress (-want +got):\n%s", diff)
	}
	if d := byName[PolicyDefaultDeny]; len(d.PodSelector.MatchLabels) != 0 || len(d.PolicyTypes) != 2 || len(d.Ingress)+len(d.Egress) != 0 {
		t.Errorf("default-deny = %+v, want all Pods, both directions, no rules", d)
	}
	if d := byName[PolicyAllowDNS]; len(d.Egress) != 1 || d.Egress[0].To[0].PodSelector.MatchLabels["k8s-app"] != "kube-dns" {
		t.Errorf("allow-dns = %+v", d)
	}
	if len(policies) != 4 {
		t.Errorf("%d policies, want 4", len(policies))
	}

	// Without routing: the gateway clients' CIDRs, no attachment label.
	namespace, policies = RenderNamespace(directConfig(), ns)
	if _, ok := namespace.Labels[LabelRouteAttachment]; ok {
		t.Errorf("namespace without routing has the route-attachment label")
	}
	for _, p := range policies {
		if p.Name == PolicyGatewayIngress {
			want := []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "10.1.0.0/16"}}}
			if diff := cmp.Diff(want, p.Spec.Ingress[0].From); diff != "" {
				t.Errorf("allow-gateway-ingress peers without routing (-want +got):\n%s", diff)
			}
		}
	}
}

func TestToApply(t *testing.T) {
	objs, err := Render(unitConfig(), unitRevision(`{}`), unitSetup())
	if err != nil {
		t.Fatal(err)
	}
	u, err := toApply(objs.Deployment)
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := u.Object["status"]; ok {
		t.Errorf("the apply configuration has a status")
	}
	if _, ok := u.Object["metadata"].(map[string]any)["creationTimestamp"]; ok {
		t.Errorf("the apply configuration has a creationTimestamp")
	}
	b, _ := json.Marshal(u.Object)
	if bytes.Contains(b, []byte(":null")) {
		t.Errorf("the apply configuration has null fields: %s", b)
	}
	if !bytes.Contains(b, []byte(`"emptyDir":{"sizeLimit":"256Mi"}`)) {
		t.Errorf("the emptyDir volume was lost: %s", b)
	}
	if _, err := toApply(&corev1.ConfigMap{}); err == nil {
		t.Errorf("toApply of an object without kind succeeded")
	}
}

func TestDeploymentReady(t *testing.T) {
	base := func() *appsv1.Deployment {
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Generation: 2, Annotations: map[string]string{AnnotationAgentRevisionID: revID}},
			Spec:       appsv1.DeploymentSpec{Replicas: ptr.To[int32](1)},
			Status:     appsv1.DeploymentStatus{ObservedGeneration: 2, Replicas: 1, UpdatedReplicas: 1, AvailableReplicas: 1, ReadyReplicas: 1},
		}
	}
	tests := []struct {
		name   string
		change func(*appsv1.Deployment)
		ready  bool
		msg    string
	}{
		{"available", func(*appsv1.Deployment) {}, true, ""},
		{"other revision", func(d *appsv1.Deployment) { d.Annotations[AnnotationAgentRevisionID] = "rev_other" }, false, `the gateway Deployment runs revision "rev_other"`},
		{"not observed", func(d *appsv1.Deployment) { d.Status.ObservedGeneration = 1 }, false, "the gateway Deployment's change is not observed yet"},
		{"stopped", func(d *appsv1.Deployment) { d.Spec.Replicas = ptr.To[int32](0) }, false, "the gateway is stopped"},
		{"old pod left", func(d *appsv1.Deployment) { d.Status.Replicas = 2 }, false, "waiting for the gateway: 1 of 1 replica available (1 updated, 2 in total)"},
		{"not available", func(d *appsv1.Deployment) { d.Status.AvailableReplicas = 0 }, false, "waiting for the gateway: 0 of 1 replica available (1 updated, 1 in total)"},
		{"deadline exceeded", func(d *appsv1.Deployment) {
			d.Status.Conditions = []appsv1.DeploymentCondition{{Type: appsv1.DeploymentProgressing, Status: corev1.ConditionFalse, Reason: "ProgressDeadlineExceeded"}}
		}, false, "the gateway Deployment is not progressing (ProgressDeadlineExceeded)"},
	}
	for _, tt := range tests {
		d := base()
		tt.change(d)
		ready, msg := deploymentReady(d, revID)
		if ready != tt.ready || msg != tt.msg {
			t.Errorf("%s: deploymentReady = %t, %q; want %t, %q", tt.name, ready, msg, tt.ready, tt.msg)
		}
	}
}

func TestDiagnosePods(t *testing.T) {
	failedSetup := func(restarts int32) corev1.Pod {
		return corev1.Pod{
			ObjectMeta: metav1.ObjectMeta{Name: "p"},
			Status: corev1.PodStatus{InitContainerStatuses: []corev1.ContainerStatus{{
				Name: "workspace-setup", RestartCount: restarts,
				State:                corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "CrashLoopBackOff"}},
				LastTerminationState: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 1}},
			}}},
		}
	}
	msg, err := diagnosePods([]corev1.Pod{failedSetup(1)}, 3)
	if err != nil || msg != "workspace setup of pod p failed; retrying; init container workspace-setup of pod p: CrashLoopBackOff" {
		t.Errorf("one failure: %q, %v", msg, err)
	}
	_, err = diagnosePods([]corev1.Pod{failedSetup(2)}, 3)
	if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeWorkspaceSetupFailed {
		t.Errorf("three failures: %v, want permanent %s", err, compute.CodeWorkspaceSetupFailed)
	}
	msg, err = diagnosePods([]corev1.Pod{{
		ObjectMeta: metav1.ObjectMeta{Name: "q"},
		Status: corev1.PodStatus{
			Conditions:        []corev1.PodCondition{{Type: corev1.PodScheduled, Status: corev1.ConditionFalse, Reason: "Unschedulable"}},
			ContainerStatuses: []corev1.ContainerStatus{{Name: "gateway", State: corev1.ContainerState{Waiting: &corev1.ContainerStateWaiting{Reason: "ImagePullBackOff"}}}},
		},
	}}, 3)
	if err != nil || msg != "pod q not scheduled (Unschedulable); container gateway of pod q: ImagePullBackOff" {
		t.Errorf("unschedulable: %q, %v", msg, err)
	}
}

func TestRenderTenantAccess(t *testing.T) {
	ns := compute.Namespace{ID: nsID}
	if rb := RenderTenantAccess(unitConfig(), ns); rb != nil {
		t.Fatalf("RenderTenantAccess without tenantAccess = %v, want nil", rb)
	}
	cfg := unitConfig()
	cfg.TenantAccess = &TenantAccess{ClusterRole: "occ-tenant", ServiceAccountName: "occ-worker", ServiceAccountNamespace: "openclaw-system"}
	rb := RenderTenantAccess(cfg, ns)
	want := &rbacv1.RoleBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: "rbac.authorization.k8s.io/v1", Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{
			Name: "occ-worker", Namespace: TenantNamespace(nsID),
			Labels:      map[string]string{"app.kubernetes.io/managed-by": "openclaw-enterprise", "openclaw.dev/namespace": nsID},
			Annotations: map[string]string{"openclaw.dev/namespace-id": nsID},
		},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: "occ-tenant"},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Name: "occ-worker", Namespace: "openclaw-system"}},
	}
	if diff := cmp.Diff(want, rb); diff != "" {
		t.Errorf("RenderTenantAccess (-want +got):\n%s", diff)
	}
}
