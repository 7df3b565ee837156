package kubecfg

import (
	"fmt"
	"net/netip"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
	"k8s.io/apimachinery/pkg/util/validation"
)

// routed is a minimal valid configuration with routing.
func routed() Config {
	return Config{
		GatewayRouting: &GatewayRouting{GatewayName: "oce-agent-gateways", GatewayNamespace: "openclaw-system", EnvoyNamespace: "envoy-gateway-system"},
		Network:        Network{GatewayTrustedProxyCIDRs: []string{"10.244.0.0/16"}},
		Runtime:        Runtime{GatewayImage: "gw:1", OCCImage: "occ:1"},
	}
}

// direct is a minimal valid configuration without routing.
func direct() Config {
	return Config{
		Network: Network{GatewayClients: []string{"10.0.0.0/8"}},
		Runtime: Runtime{GatewayImage: "gw:1", OCCImage: "occ:1"},
	}
}

func TestValidate(t *testing.T) {
	tests := []struct {
		name   string
		base   func() Config
		change func(*Config)
		want   []string // each a whole line of the error; nil means valid
	}{
		{"routed minimal", routed, func(*Config) {}, nil},
		{"direct minimal", direct, func(*Config) {}, nil},
		{"routed with every option", routed, func(c *Config) {
			c.Kubeconfig, c.Context = "/etc/occ/kubeconfig", "prod"
			c.GatewayRouting.Hostname = "agents.internal.example.com"
			c.GatewayRouting.EndpointPort = 8443
			c.GatewayRouting.EnvoyHTTPSTargetPort = 10443
			c.Network.GatewayPort = 18789
			c.Network.GatewayTrustedProxyCIDRs = []string{"10.244.0.0/16", "fd00:10:244::/56", "::ffff:10.0.0.0/104"}
			c.Network.DNS = DNS{Namespace: "dns-system", PodLabels: map[string]string{"app.kubernetes.io/name": "coredns"}}
			c.Runtime.GatewayStorageClassName = "ebs.gp3"
			c.Runtime.GatewayStorageSize = "20Gi"
			c.Runtime.ImagePullPolicy = "Always"
			c.Resources = Resources{Requests: ResourceList{CPU: "1", Memory: "1Gi"}, Limits: ResourceList{CPU: "2", Memory: "2Gi"}}
		}, nil},
		{"tenant access", routed, func(c *Config) {
			c.TenantAccess = &TenantAccess{ClusterRole: "occ-tenant", ServiceAccountName: "occ-worker", ServiceAccountNamespace: "openclaw-system"}
		}, nil},
		{"tenant access with bad names", routed, func(c *Config) {
			c.TenantAccess = &TenantAccess{ClusterRole: "", ServiceAccountName: "Occ_Worker", ServiceAccountNamespace: "a.b"}
		}, []string{
			`tenantAccess.clusterRole "" is not a Kubernetes name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			`tenantAccess.serviceAccountName "Occ_Worker" is not a Kubernetes name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			`tenantAccess.serviceAccountNamespace "a.b" is not a Kubernetes name: must not contain dots`,
		}},
		{"two halves of IPv4 are fine alone", routed, func(c *Config) {
			c.Network.GatewayTrustedProxyCIDRs = []string{"0.0.0.0/1"}
		}, nil},

		// Routing requires proxy CIDRs and refuses gateway clients.
		{"routing without trusted CIDRs", routed, func(c *Config) { c.Network.GatewayTrustedProxyCIDRs = nil }, []string{
			"network.gatewayTrustedProxyCidrs is required with gatewayRouting: list the source CIDRs of the Envoy proxies (there is no default)",
		}},
		{"routing with gateway clients", routed, func(c *Config) { c.Network.GatewayClients = []string{"10.0.0.0/8"} }, []string{
			"network.gatewayClients must be absent with gatewayRouting: the Envoy proxies of the Gateway are the only peers",
		}},
		{"no routing without gateway clients", direct, func(c *Config) { c.Network.GatewayClients = nil }, []string{
			"network.gatewayClients is required without gatewayRouting: list the CIDRs that may reach the gateways",
		}},
		{"no routing with trusted CIDRs", direct, func(c *Config) { c.Network.GatewayTrustedProxyCIDRs = []string{"10.0.0.0/8"} }, []string{
			"network.gatewayTrustedProxyCidrs is only used with gatewayRouting; remove it or configure gatewayRouting",
		}},

		// No all-source range, in any spelling.
		{"IPv4 all sources", routed, func(c *Config) { c.Network.GatewayTrustedProxyCIDRs = []string{"10.0.0.0/8", "0.0.0.0/0"} }, []string{
			allSources("network.gatewayTrustedProxyCidrs", "[10.0.0.0/8 0.0.0.0/0]"),
		}},
		{"IPv6 all sources", routed, func(c *Config) { c.Network.GatewayTrustedProxyCIDRs = []string{"::/0"} }, []string{
			allSources("network.gatewayTrustedProxyCidrs", "[::/0]"),
		}},
		{"IPv4-mapped all sources", routed, func(c *Config) { c.Network.GatewayTrustedProxyCIDRs = []string{"::ffff:0:0/96"} }, []string{
			allSources("network.gatewayTrustedProxyCidrs", "[::ffff:0:0/96]"),
		}},
		{"IPv4-mapped all sources, dotted", routed, func(c *Config) { c.Network.GatewayTrustedProxyCIDRs = []string{"::ffff:0.0.0.0/96"} }, []string{
			allSources("network.gatewayTrustedProxyCidrs", "[::ffff:0.0.0.0/96]"),
		}},
		{"IPv6 range holding the mapped range", routed, func(c *Config) { c.Network.GatewayTrustedProxyCIDRs = []string{"::/64"} }, []string{
			allSources("network.gatewayTrustedProxyCidrs", "[::/64]"),
		}},
		{"halves that add up to everything", routed, func(c *Config) {
			c.Network.GatewayTrustedProxyCIDRs = []string{"0.0.0.0/1", "128.0.0.0/2", "192.0.0.0/2"}
		}, []string{
			allSources("network.gatewayTrustedProxyCidrs", "[0.0.0.0/1 128.0.0.0/2 192.0.0.0/2]"),
		}},
		{"mapped and plain halves", routed, func(c *Config) {
			c.Network.GatewayTrustedProxyCIDRs = []string{"::ffff:0:0/97", "128.0.0.0/1"}
		}, []string{
			allSources("network.gatewayTrustedProxyCidrs", "[::ffff:0:0/97 128.0.0.0/1]"),
		}},
		{"gateway clients all sources", direct, func(c *Config) { c.Network.GatewayClients = []string{"0.0.0.0/0"} }, []string{
			allSources("network.gatewayClients", "[0.0.0.0/0]"),
		}},
		{"model egress exceptions", routed, func(c *Config) {
			c.Network.ModelEgressExcept = []string{"203.0.113.10/32", "2001:db8::/64", "::ffff:198.51.100.0/120"}
		}, nil},
		{"model egress exceptions malformed or everything", routed, func(c *Config) {
			c.Network.ModelEgressExcept = []string{"203.0.113.10", "0.0.0.0/0", "::/0"}
		}, []string{
			`network.modelEgressExcept: "203.0.113.10" is not a CIDR (like 10.0.0.0/8 or 192.0.2.10/32)`,
			`network.modelEgressExcept: "0.0.0.0/0" leaves the model egress nothing; list the ranges to keep the gateways from`,
			`network.modelEgressExcept: "::/0" leaves the model egress nothing; list the ranges to keep the gateways from`,
		}},
		{"bare address", routed, func(c *Config) { c.Network.GatewayTrustedProxyCIDRs = []string{"10.0.0.1"} }, []string{
			`network.gatewayTrustedProxyCidrs: "10.0.0.1" is not a CIDR (like 10.0.0.0/8 or 192.0.2.10/32)`,
		}},
		{"host bits", routed, func(c *Config) { c.Network.GatewayTrustedProxyCIDRs = []string{"10.1.2.3/8"} }, []string{
			`network.gatewayTrustedProxyCidrs: "10.1.2.3/8" has host bits set; did you mean 10.0.0.0/8?`,
		}},

		// Names are Kubernetes names.
		{"routing names missing", routed, func(c *Config) { c.GatewayRouting = &GatewayRouting{} }, []string{
			"gatewayRouting.gatewayName is required",
			"gatewayRouting.gatewayNamespace is required",
			"gatewayRouting.envoyNamespace is required",
		}},
		{"routing names not DNS labels", routed, func(c *Config) {
			c.GatewayRouting.GatewayName = "Agent_Gateways"
			c.GatewayRouting.GatewayNamespace = "openclaw.system"
			c.GatewayRouting.EnvoyNamespace = strings.Repeat("e", 64)
		}, []string{
			`gatewayRouting.gatewayName "Agent_Gateways" is not a Kubernetes name (DNS-1123 label): a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
			`gatewayRouting.gatewayNamespace "openclaw.system" is not a Kubernetes name (DNS-1123 label): must not contain dots`,
			`gatewayRouting.envoyNamespace "` + strings.Repeat("e", 64) + `" is not a Kubernetes name (DNS-1123 label): must be no more than 63 characters`,
		}},
		{"routing names of 63 characters", routed, func(c *Config) {
			c.GatewayRouting.GatewayName = strings.Repeat("g", 63)
			c.GatewayRouting.GatewayNamespace = strings.Repeat("n", 63)
			c.GatewayRouting.EnvoyNamespace = strings.Repeat("e", 63)
		}, nil},
		{"hostname with port", routed, func(c *Config) { c.GatewayRouting.Hostname = "agents.example.com:443" }, []string{
			`gatewayRouting.hostname "agents.example.com:443" must be a DNS name without scheme, port or path`,
		}},
		{"hostname with path", routed, func(c *Config) { c.GatewayRouting.Hostname = "agents.example.com/x" }, []string{
			`gatewayRouting.hostname "agents.example.com/x" must be a DNS name without scheme, port or path`,
		}},
		{"hostname upper case", routed, func(c *Config) { c.GatewayRouting.Hostname = "Agents.example.com" }, []string{
			`gatewayRouting.hostname "Agents.example.com" is not a lower-case DNS name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
		}},
		{"ports at 65535", routed, func(c *Config) {
			c.GatewayRouting.EndpointPort = 65535
			c.GatewayRouting.EnvoyHTTPSTargetPort = 65535
			c.Network.GatewayPort = 65535
		}, nil},
		{"ports out of range", routed, func(c *Config) {
			c.GatewayRouting.EndpointPort = 70000
			c.GatewayRouting.EnvoyHTTPSTargetPort = -1
			c.Network.GatewayPort = 65536
		}, []string{
			"network.gatewayPort 65536 is not a port from 1 to 65535",
			"gatewayRouting.endpointPort 70000 is not a port from 1 to 65535",
			"gatewayRouting.envoyHttpsTargetPort -1 is not a port from 1 to 65535",
		}},
		{"runtime missing and malformed", routed, func(c *Config) {
			c.Runtime = Runtime{GatewayImage: "gw 1", OCCBinaryPath: "occ", ImagePullPolicy: "Sometimes",
				GatewayStorageClassName: "Fast_Disk", GatewayStorageSize: "ten"}
		}, []string{
			`runtime.gatewayImage "gw 1" must not contain white space`,
			"runtime.occImage is required",
			`runtime.occBinaryPath "occ" must be an absolute, clean path`,
			`runtime.imagePullPolicy "Sometimes" is not one of Always, IfNotPresent, Never`,
			`runtime.gatewayStorageClassName "Fast_Disk" is not a Kubernetes name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			`runtime.gatewayStorageSize "ten" is not a positive quantity like 10Gi`,
		}},
		{"resources", routed, func(c *Config) {
			c.Resources = Resources{Requests: ResourceList{CPU: "lots", Memory: "4Gi"}, Limits: ResourceList{Memory: "2Gi"}}
		}, []string{
			`resources.requests.cpu "lots" is not a positive quantity like 500m or 1Gi`,
			"resources.requests.memory 4Gi exceeds resources.limits.memory 2Gi",
		}},
		{"kubeconfig relative, context without it", direct, func(c *Config) { c.Kubeconfig = "kubeconfig" }, []string{
			`kubeconfig "kubeconfig" must be an absolute path`,
		}},
		{"context without kubeconfig", direct, func(c *Config) { c.Context = "prod" }, []string{
			`context "prod" needs kubeconfig: the in-cluster configuration has no contexts`,
		}},
		{"image pull secrets", routed, func(c *Config) {
			c.Runtime.ImagePullSecrets = []string{"registry-credentials", "mirror.example.com"}
			c.Runtime.ImagePullSecretsNamespace = "openclaw-system"
		}, nil},
		{"image pull secrets at their limits", routed, func(c *Config) {
			c.Runtime.ImagePullSecrets = nil
			for i := range MaxImagePullSecrets - 1 {
				c.Runtime.ImagePullSecrets = append(c.Runtime.ImagePullSecrets, fmt.Sprintf("pull-%d", i))
			}
			c.Runtime.ImagePullSecrets = append(c.Runtime.ImagePullSecrets, strings.Repeat("p", 242))
			c.Runtime.ImagePullSecretsNamespace = strings.Repeat("n", 63)
		}, nil},
		{"image pull secrets malformed, repeated, too long", routed, func(c *Config) {
			c.Runtime.ImagePullSecrets = []string{"Registry_Credentials", "regcred", "", "regcred", strings.Repeat("p", 243)}
			c.Runtime.ImagePullSecretsNamespace = "openclaw-system"
		}, []string{
			`runtime.imagePullSecrets[0] "Registry_Credentials" is not a Kubernetes name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			`runtime.imagePullSecrets[2] "" is not a Kubernetes name: a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')`,
			`runtime.imagePullSecrets[3] "regcred" repeats runtime.imagePullSecrets[1]`,
			`runtime.imagePullSecrets[4] "` + strings.Repeat("p", 243) + `" is longer than 242 characters: its copy image-pull-<name> in each tenant namespace must be a Kubernetes name`,
		}},
		{"too many image pull secrets", routed, func(c *Config) {
			c.Runtime.ImagePullSecrets = nil
			for i := range MaxImagePullSecrets + 1 {
				c.Runtime.ImagePullSecrets = append(c.Runtime.ImagePullSecrets, fmt.Sprintf("pull-%d", i))
			}
			c.Runtime.ImagePullSecretsNamespace = "openclaw-system"
		}, []string{
			"runtime.imagePullSecrets lists 17 Secrets; at most 16 are allowed",
		}},
		{"image pull secrets without their namespace", direct, func(c *Config) {
			c.Runtime.ImagePullSecrets = []string{"regcred"}
		}, []string{
			"runtime.imagePullSecretsNamespace is required with runtime.imagePullSecrets: name the namespace the Secrets are in",
		}},
		{"image pull secrets namespace without secrets", direct, func(c *Config) {
			c.Runtime.ImagePullSecretsNamespace = "openclaw-system"
		}, []string{
			"runtime.imagePullSecretsNamespace is only used with runtime.imagePullSecrets; remove it or list the Secrets",
		}},
		{"image pull secrets namespace not a DNS label", direct, func(c *Config) {
			c.Runtime.ImagePullSecrets = []string{"regcred"}
			c.Runtime.ImagePullSecretsNamespace = "openclaw.system"
		}, []string{
			`runtime.imagePullSecretsNamespace "openclaw.system" is not a Kubernetes name: must not contain dots`,
		}},
		{"DNS selectors", direct, func(c *Config) {
			c.Network.DNS = DNS{Namespace: "Kube-System", PodLabels: map[string]string{"k8s app": "kube-dns"}}
		}, []string{
			`network.dns.namespace "Kube-System" is not a Kubernetes name: a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')`,
			`network.dns.podLabels: "k8s app" is not a label key`,
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			c := tt.base()
			tt.change(&c)
			var got []string
			if err := c.Validate(); err != nil {
				got = strings.Split(err.Error(), "\n")
			}
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("Validate() mismatch (-want +got):\n%s", diff)
			}
		})
	}
}

func allSources(key, list string) string {
	return key + " " + list + " admits every source address (an all-source range such as 0.0.0.0/0, ::/0 or ::ffff:0:0/96, or ranges that together cover one); list the actual source ranges"
}

func TestWithDefaults(t *testing.T) {
	c := routed()
	got := c.WithDefaults()
	want := Config{
		GatewayRouting: &GatewayRouting{
			GatewayName: "oce-agent-gateways", GatewayNamespace: "openclaw-system", EnvoyNamespace: "envoy-gateway-system",
			EndpointPort: 443, EnvoyHTTPSTargetPort: 10443,
		},
		Network: Network{
			GatewayPort: 8080, GatewayTrustedProxyCIDRs: []string{"10.244.0.0/16"},
			DNS: DNS{Namespace: "kube-system", PodLabels: map[string]string{"k8s-app": "kube-dns"}},
		},
		Runtime: Runtime{
			GatewayImage: "gw:1", OCCImage: "occ:1", OCCBinaryPath: "/usr/local/bin/occ", Node: "node",
			OpenClawExecutable: "/app/openclaw.mjs", ImagePullPolicy: "IfNotPresent", GatewayStorageSize: "10Gi",
		},
		Resources: Resources{Requests: ResourceList{CPU: "250m", Memory: "1Gi"}, Limits: ResourceList{Memory: "2Gi"}},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("WithDefaults() mismatch (-want +got):\n%s", diff)
	}
	// The copy is independent of the original.
	got.GatewayRouting.GatewayName = "changed"
	got.Network.GatewayTrustedProxyCIDRs[0] = "192.0.2.0/24"
	if c.GatewayRouting.GatewayName != "oce-agent-gateways" || c.Network.GatewayTrustedProxyCIDRs[0] != "10.244.0.0/16" {
		t.Errorf("changing the result of WithDefaults changed the original: %+v", c)
	}
	c.Runtime.ImagePullSecrets = []string{"regcred"}
	c.WithDefaults().Runtime.ImagePullSecrets[0] = "changed"
	if c.Runtime.ImagePullSecrets[0] != "regcred" {
		t.Errorf("changing the result of WithDefaults changed the original's image pull Secrets: %v", c.Runtime.ImagePullSecrets)
	}
	c.Runtime.ImagePullSecrets = nil
	// An explicit budget is kept as written.
	c.Resources = Resources{Requests: ResourceList{CPU: "1"}}
	if diff := cmp.Diff(c.Resources, c.WithDefaults().Resources); diff != "" {
		t.Errorf("WithDefaults() changed an explicit budget (-want +got):\n%s", diff)
	}
}

func TestHost(t *testing.T) {
	tests := []struct {
		name    string
		routing GatewayRouting
		label   string
		host    string
	}{
		{
			name:    "derived",
			routing: GatewayRouting{GatewayName: "oce-agent-gateways", GatewayNamespace: "openclaw-system", EnvoyNamespace: "envoy-gateway-system"},
			label:   HashHex("openclaw-system/oce-agent-gateways", 12),
			host:    "occ-gateway-" + HashHex("openclaw-system/oce-agent-gateways", 12) + ".envoy-gateway-system.svc",
		},
		{
			name:    "explicit hostname wins",
			routing: GatewayRouting{GatewayName: "gw", GatewayNamespace: "occ", EnvoyNamespace: "envoy", Hostname: "agents.example.com"},
			label:   HashHex("occ/gw", 12),
			host:    "agents.example.com",
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if got := tt.routing.RouteLabel(); got != tt.label {
				t.Errorf("RouteLabel() = %q, want %q", got, tt.label)
			}
			if got := tt.routing.Host(); got != tt.host {
				t.Errorf("Host() = %q, want %q", got, tt.host)
			}
		})
	}
	// A fixed vector, computed independently with
	// printf %s openclaw-system/oce-agent-gateways | sha256sum.
	if got, want := HashHex("openclaw-system/oce-agent-gateways", 12), "20ec97c41b82"; got != want {
		t.Errorf("HashHex(openclaw-system/oce-agent-gateways, 12) = %q, want %q", got, want)
	}
}

func TestCoversAllSources(t *testing.T) {
	tests := []struct {
		in   []string
		want bool
	}{
		{[]string{"0.0.0.0/0"}, true},
		{[]string{"::/0"}, true},
		{[]string{"::ffff:0:0/96"}, true},
		{[]string{"::/1"}, true}, // holds ::ffff:0:0/96
		{[]string{"0.0.0.0/1", "128.0.0.0/1"}, true},
		{[]string{"0.0.0.0/1", "0.0.0.0/2", "128.0.0.0/1"}, true},
		{[]string{"::/1", "8000::/1"}, true},
		{[]string{"0.0.0.0/1"}, false},
		{[]string{"0.0.0.0/1", "0.0.0.0/2", "64.0.0.0/2"}, false},
		{[]string{"8000::/1"}, false},
		{[]string{"10.0.0.0/8", "fd00::/8"}, false},
		{[]string{"::ffff:10.0.0.0/104"}, false},
	}
	for _, tt := range tests {
		var ps []netip.Prefix
		for _, s := range tt.in {
			ps = append(ps, netip.MustParsePrefix(s))
		}
		if got := CoversAllSources(ps); got != tt.want {
			t.Errorf("CoversAllSources(%v) = %t, want %t", tt.in, got, tt.want)
		}
	}
}

// TestModelEgressExceptions: the private ranges always, then the
// configured ranges by family (an IPv4-mapped range as the IPv4 one).
func TestModelEgressExceptions(t *testing.T) {
	n := Network{ModelEgressExcept: []string{"203.0.113.10/32", "2001:db8::/64", "::ffff:198.51.100.0/120"}}
	v4, v6 := n.ModelEgressExceptions()
	want4 := []string{"10.0.0.0/8", "100.64.0.0/10", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16", "203.0.113.10/32", "198.51.100.0/24"}
	want6 := []string{"fc00::/7", "fe80::/10", "2001:db8::/64"}
	if diff := cmp.Diff(want4, v4); diff != "" {
		t.Errorf("IPv4 (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(want6, v6); diff != "" {
		t.Errorf("IPv6 (-want +got):\n%s", diff)
	}
}

// TestImagePullSecretCopyName: the copy keeps the source's name after a
// fixed prefix, and the longest name Validate accepts still gives a
// Secret name.
func TestImagePullSecretCopyName(t *testing.T) {
	if got, want := ImagePullSecretCopyName("regcred"), "image-pull-regcred"; got != want {
		t.Errorf("ImagePullSecretCopyName(regcred) = %q, want %q", got, want)
	}
	longest := strings.Repeat("p", maxImagePullSecretName)
	if msgs := validation.IsDNS1123Subdomain(ImagePullSecretCopyName(longest)); len(msgs) > 0 {
		t.Errorf("the copy of a %d-character name is not a Secret name: %v", len(longest), msgs)
	}
	if msgs := validation.IsDNS1123Subdomain(ImagePullSecretCopyName(longest + "p")); len(msgs) == 0 {
		t.Errorf("the copy of a %d-character name is a Secret name; maxImagePullSecretName is too small", len(longest)+1)
	}
}
