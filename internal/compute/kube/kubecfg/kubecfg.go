// Package kubecfg is the installation configuration of the Kubernetes
// Compute driver: the `drivers.compute.kubernetes` section of occ's YAML
// file, its defaults, its validation and the names derived from it.
//
// It is a leaf package: the driver registry (internal/compute/registry)
// decodes and validates the section at start-up with FromSection, and
// internal/compute/kube runs the driver from it; both import this package,
// which imports only config, yaml and two small apimachinery packages
// (quantities and DNS name rules), so there is one definition and one
// validation and no import cycle. Package kube re-exports the types.
package kubecfg

import (
	"crypto/sha256"
	"encoding/hex"
	"errors"
	"fmt"
	"math/big"
	"net/netip"
	"path"
	"regexp"
	"slices"
	"strings"

	"k8s.io/apimachinery/pkg/api/resource"
	"k8s.io/apimachinery/pkg/util/validation"
)

// Config is the Kubernetes Compute driver's installation configuration.
// The zero value of every optional field means its default; call
// WithDefaults before reading one.
type Config struct {
	// Kubeconfig is the path of a kubeconfig file; empty means the
	// in-cluster configuration (the Pod's service account).
	Kubeconfig string `yaml:"kubeconfig" json:"kubeconfig,omitempty"`
	// Context selects a context of Kubeconfig; empty means its current one.
	Context string `yaml:"context" json:"context,omitempty"`
	// GatewayRouting, when set, routes OCC's workspace-file traffic to each
	// Agent's gateway through the installation's private Envoy Gateway
	// (Capabilities.LiveFiles). Without it no endpoint is offered and the
	// gateways are reachable only from Network.GatewayClients.
	GatewayRouting *GatewayRouting `yaml:"gatewayRouting" json:"gatewayRouting,omitempty"`
	Network        Network         `yaml:"network" json:"network"`
	Runtime        Runtime         `yaml:"runtime" json:"runtime"`
	// Resources is the gateway container's budget; the workspace-setup init
	// container gets the same one (it runs the native CLI).
	Resources Resources `yaml:"resources" json:"resources"`
	// TenantAccess, when set, makes every tenant namespace grant the
	// driver's own ServiceAccount its namespaced permissions through a
	// RoleBinding the driver applies right after the namespace, so the
	// worker holds write access only in namespaces it created (the Helm
	// chart sets it; docs/install-kubernetes.md, "RBAC").
	TenantAccess *TenantAccess `yaml:"tenantAccess" json:"tenantAccess,omitempty"`
}

// TenantAccess names the ClusterRole that holds the driver's namespaced
// permissions and the ServiceAccount the driver runs as.
type TenantAccess struct {
	// ClusterRole is bound, in each tenant namespace, to the
	// ServiceAccount. The driver's identity needs the "bind" verb on it.
	ClusterRole string `yaml:"clusterRole" json:"clusterRole"`
	// ServiceAccountName and ServiceAccountNamespace name the worker's
	// ServiceAccount.
	ServiceAccountName      string `yaml:"serviceAccountName" json:"serviceAccountName"`
	ServiceAccountNamespace string `yaml:"serviceAccountNamespace" json:"serviceAccountNamespace"`
}

// GatewayRouting names the installation's shared private Gateway, which
// the Helm chart creates (deploy/helm/occ, gateway-routing.yaml) with the
// names RouteLabel, EnvoyServiceName and Host derive.
type GatewayRouting struct {
	// GatewayName and GatewayNamespace name the Gateway resource the
	// per-Agent HTTPRoutes attach to (listener "https").
	GatewayName      string `yaml:"gatewayName" json:"gatewayName"`
	GatewayNamespace string `yaml:"gatewayNamespace" json:"gatewayNamespace"`
	// EnvoyNamespace is where Envoy Gateway runs the proxy Pods; the
	// tenant NetworkPolicy admits gateway ingress only from there.
	EnvoyNamespace string `yaml:"envoyNamespace" json:"envoyNamespace"`
	// Hostname is the routed host; empty derives
	// occ-gateway-<RouteLabel>.<EnvoyNamespace>.svc (see Host).
	Hostname string `yaml:"hostname" json:"hostname,omitempty"`
	// EndpointPort is the HTTPS port OCC dials; default 443.
	EndpointPort int `yaml:"endpointPort" json:"endpointPort,omitempty"`
	// EnvoyHTTPSTargetPort is the Envoy container port behind the 443
	// listener; default 10443 (Envoy Gateway adds 10000 to privileged
	// listener ports). NetworkPolicies of the chart use it.
	EnvoyHTTPSTargetPort int `yaml:"envoyHttpsTargetPort" json:"envoyHttpsTargetPort,omitempty"`
}

// Network is what the tenant NetworkPolicies and the native proxy trust are
// made of.
type Network struct {
	// GatewayPort is the native gateway's port in its Pod and the Service
	// port the route targets; default 8080. It must equal the chart's
	// tenantGatewayPort.
	GatewayPort int `yaml:"gatewayPort" json:"gatewayPort,omitempty"`
	// GatewayTrustedProxyCIDRs are the source ranges of Envoy's
	// connections, rendered as the native gateway.trustedProxies. Required
	// with routing; no default, no all-source range.
	GatewayTrustedProxyCIDRs []string `yaml:"gatewayTrustedProxyCidrs" json:"gatewayTrustedProxyCidrs,omitempty"`
	// GatewayClients are the CIDRs admitted to the gateways when routing is
	// off (required then, refused with routing: the route is the only
	// peer).
	GatewayClients []string `yaml:"gatewayClients" json:"gatewayClients,omitempty"`
	// ModelEgressExcept are CIDRs the gateways' model egress (TCP 443 to
	// any address outside the private ranges, which it always leaves out)
	// must not reach either: the Kubernetes API server's public addresses
	// on a managed cluster, whose kubernetes.default Service forwards to
	// them, or anything else public the gateways have no business with.
	// Optional; a range that leaves the rule nothing (/0) is refused.
	ModelEgressExcept []string `yaml:"modelEgressExcept" json:"modelEgressExcept,omitempty"`
	// DNS says where cluster DNS runs, for the allow-dns NetworkPolicy.
	DNS DNS `yaml:"dns" json:"dns"`
}

// DNS locates the cluster DNS Pods.
type DNS struct {
	// Namespace defaults to kube-system.
	Namespace string `yaml:"namespace" json:"namespace,omitempty"`
	// PodLabels default to k8s-app: kube-dns.
	PodLabels map[string]string `yaml:"podLabels" json:"podLabels,omitempty"`
}

// Runtime is what the gateway Pods run.
type Runtime struct {
	// GatewayImage is the OpenClaw gateway image (Node and
	// OpenClawExecutable). Required.
	GatewayImage string `yaml:"gatewayImage" json:"gatewayImage"`
	// OCCImage is the image holding the occ binary at OCCBinaryPath, copied
	// by the first init container into a shared emptyDir, so
	// `occ workspace-setup` runs inside the gateway image. Required. The
	// copy is made by occ itself (`occ install-self`), so the image needs
	// nothing but occ: no shell, no cp.
	OCCImage string `yaml:"occImage" json:"occImage"`
	// OCCBinaryPath defaults to /usr/local/bin/occ.
	OCCBinaryPath string `yaml:"occBinaryPath" json:"occBinaryPath,omitempty"`
	// Node and OpenClawExecutable locate the runtime inside GatewayImage;
	// defaults "node" (looked up in PATH) and /app/openclaw.mjs.
	Node               string `yaml:"node" json:"node,omitempty"`
	OpenClawExecutable string `yaml:"openclawExecutable" json:"openclawExecutable,omitempty"`
	// ImagePullPolicy is Always, IfNotPresent (default) or Never.
	ImagePullPolicy string `yaml:"imagePullPolicy" json:"imagePullPolicy,omitempty"`
	// GatewayStorageClassName is the StorageClass of each Agent's state
	// PVC; empty uses the cluster default.
	GatewayStorageClassName string `yaml:"gatewayStorageClassName" json:"gatewayStorageClassName,omitempty"`
	// GatewayStorageSize defaults to 10Gi.
	GatewayStorageSize string `yaml:"gatewayStorageSize" json:"gatewayStorageSize,omitempty"`
	// ImagePullSecrets name registry credentials for GatewayImage and
	// OCCImage: Secrets of type kubernetes.io/dockerconfigjson or
	// kubernetes.io/dockercfg in ImagePullSecretsNamespace. A Pod can only
	// use pull Secrets of its own namespace, so the driver copies each
	// into the tenant namespace (as ImagePullSecretCopyName) every time it
	// prepares a revision, and the gateway Pods list the copies. Optional;
	// at most MaxImagePullSecrets.
	ImagePullSecrets []string `yaml:"imagePullSecrets" json:"imagePullSecrets,omitempty"`
	// ImagePullSecretsNamespace is where the ImagePullSecrets live (the
	// Helm chart sets its release namespace); required with them.
	ImagePullSecretsNamespace string `yaml:"imagePullSecretsNamespace" json:"imagePullSecretsNamespace,omitempty"`
}

// MaxImagePullSecrets bounds runtime.imagePullSecrets: each is read and
// applied on every PrepareRevision, and a registry needs one or two.
const MaxImagePullSecrets = 16

// imagePullSecretCopyPrefix starts the name of every copy of an image pull
// Secret in a tenant namespace. No other object the driver names starts
// with it, so a copy cannot collide with the driver's own Secrets.
const imagePullSecretCopyPrefix = "image-pull-"

// maxImagePullSecretName is the longest source name whose copy's name
// (imagePullSecretCopyPrefix + name) is still a Secret name (253).
const maxImagePullSecretName = validation.DNS1123SubdomainMaxLength - len(imagePullSecretCopyPrefix)

// ImagePullSecretCopyName is the name of the copy of the image pull Secret
// source in each tenant namespace: image-pull-<source>. It keeps the
// source's name readable (an operator debugging a pull sees which
// credentials a Pod uses); only names, not namespaces, go into it, so a
// copy is the same object whatever ImagePullSecretsNamespace says.
func ImagePullSecretCopyName(source string) string { return imagePullSecretCopyPrefix + source }

// Resources are Kubernetes quantities ("500m", "1Gi"); an empty value is
// not set.
type Resources struct {
	Requests ResourceList `yaml:"requests" json:"requests"`
	Limits   ResourceList `yaml:"limits" json:"limits"`
}

// ResourceList is CPU and memory.
type ResourceList struct {
	CPU    string `yaml:"cpu" json:"cpu,omitempty"`
	Memory string `yaml:"memory" json:"memory,omitempty"`
}

// Defaults. The gateway needs about 1 GB resident (openclaw-gateway.md §7).
const (
	DefaultGatewayPort          = 8080
	DefaultEndpointPort         = 443
	DefaultEnvoyHTTPSTargetPort = 10443
	DefaultDNSNamespace         = "kube-system"
	DefaultOCCBinaryPath        = "/usr/local/bin/occ"
	DefaultNode                 = "node"
	DefaultOpenClawExecutable   = "/app/openclaw.mjs"
	DefaultImagePullPolicy      = "IfNotPresent"
	DefaultGatewayStorageSize   = "10Gi"
	DefaultCPURequest           = "250m"
	DefaultMemoryRequest        = "1Gi"
	DefaultMemoryLimit          = "2Gi"
)

// DefaultDNSPodLabels are the labels of CoreDNS in most distributions.
func DefaultDNSPodLabels() map[string]string { return map[string]string{"k8s-app": "kube-dns"} }

// WithDefaults returns a copy of c with every unset optional value set to
// its default. It copies the slices and maps it keeps, so the result can be
// changed without touching c.
func (c Config) WithDefaults() Config {
	if c.TenantAccess != nil {
		ta := *c.TenantAccess
		c.TenantAccess = &ta
	}
	if c.GatewayRouting != nil {
		r := *c.GatewayRouting
		if r.EndpointPort == 0 {
			r.EndpointPort = DefaultEndpointPort
		}
		if r.EnvoyHTTPSTargetPort == 0 {
			r.EnvoyHTTPSTargetPort = DefaultEnvoyHTTPSTargetPort
		}
		c.GatewayRouting = &r
	}
	n := &c.Network
	if n.GatewayPort == 0 {
		n.GatewayPort = DefaultGatewayPort
	}
	n.GatewayTrustedProxyCIDRs = slices.Clone(n.GatewayTrustedProxyCIDRs)
	n.GatewayClients = slices.Clone(n.GatewayClients)
	if n.DNS.Namespace == "" {
		n.DNS.Namespace = DefaultDNSNamespace
	}
	if len(n.DNS.PodLabels) == 0 {
		n.DNS.PodLabels = DefaultDNSPodLabels()
	} else {
		labels := make(map[string]string, len(n.DNS.PodLabels))
		for k, v := range n.DNS.PodLabels {
			labels[k] = v
		}
		n.DNS.PodLabels = labels
	}
	rt := &c.Runtime
	rt.ImagePullSecrets = slices.Clone(rt.ImagePullSecrets)
	setDefault(&rt.OCCBinaryPath, DefaultOCCBinaryPath)
	setDefault(&rt.Node, DefaultNode)
	setDefault(&rt.OpenClawExecutable, DefaultOpenClawExecutable)
	setDefault(&rt.ImagePullPolicy, DefaultImagePullPolicy)
	setDefault(&rt.GatewayStorageSize, DefaultGatewayStorageSize)
	// A budget the operator wrote is kept as a whole: defaults fill only
	// a section left completely empty, so an explicit "requests.cpu"
	// alone does not silently gain a memory limit.
	if c.Resources == (Resources{}) {
		c.Resources = Resources{
			Requests: ResourceList{CPU: DefaultCPURequest, Memory: DefaultMemoryRequest},
			Limits:   ResourceList{Memory: DefaultMemoryLimit},
		}
	}
	return c
}

func setDefault(s *string, def string) {
	if *s == "" {
		*s = def
	}
}

// Validate reports every invalid value at once. It validates c with
// defaults applied, so it may be called on what the YAML file held.
// Field names in messages are the YAML keys under
// drivers.compute.kubernetes.
func (c Config) Validate() error {
	c = c.WithDefaults()
	var errs []error
	add := func(format string, args ...any) { errs = append(errs, fmt.Errorf(format, args...)) }

	if c.Kubeconfig != "" && !path.IsAbs(c.Kubeconfig) {
		add("kubeconfig %q must be an absolute path", c.Kubeconfig)
	}
	if c.Context != "" && c.Kubeconfig == "" {
		add("context %q needs kubeconfig: the in-cluster configuration has no contexts", c.Context)
	}

	n := c.Network
	checkPort := func(name string, p int) {
		if p < 1 || p > 65535 {
			add("%s %d is not a port from 1 to 65535", name, p)
		}
	}
	checkPort("network.gatewayPort", n.GatewayPort)

	if r := c.GatewayRouting; r != nil {
		for _, f := range []struct{ key, v string }{
			{"gatewayRouting.gatewayName", r.GatewayName},
			{"gatewayRouting.gatewayNamespace", r.GatewayNamespace},
			{"gatewayRouting.envoyNamespace", r.EnvoyNamespace},
		} {
			if f.v == "" {
				add("%s is required", f.key)
			} else if msgs := validation.IsDNS1123Label(f.v); len(msgs) > 0 {
				add("%s %q is not a Kubernetes name (DNS-1123 label): %s", f.key, f.v, strings.Join(msgs, "; "))
			}
		}
		if r.Hostname != "" {
			if err := checkHostname(r.Hostname); err != nil {
				add("gatewayRouting.hostname %q %v", r.Hostname, err)
			}
		}
		checkPort("gatewayRouting.endpointPort", r.EndpointPort)
		checkPort("gatewayRouting.envoyHttpsTargetPort", r.EnvoyHTTPSTargetPort)
		if len(n.GatewayTrustedProxyCIDRs) == 0 {
			add("network.gatewayTrustedProxyCidrs is required with gatewayRouting: list the source CIDRs of the Envoy proxies (there is no default)")
		}
		if len(n.GatewayClients) > 0 {
			add("network.gatewayClients must be absent with gatewayRouting: the Envoy proxies of the Gateway are the only peers")
		}
	} else {
		if len(n.GatewayClients) == 0 {
			add("network.gatewayClients is required without gatewayRouting: list the CIDRs that may reach the gateways")
		}
		if len(n.GatewayTrustedProxyCIDRs) > 0 {
			add("network.gatewayTrustedProxyCidrs is only used with gatewayRouting; remove it or configure gatewayRouting")
		}
	}
	for _, list := range []struct {
		key  string
		vals []string
	}{
		{"network.gatewayTrustedProxyCidrs", n.GatewayTrustedProxyCIDRs},
		{"network.gatewayClients", n.GatewayClients},
	} {
		prefixes := make([]netip.Prefix, 0, len(list.vals))
		ok := true
		for _, s := range list.vals {
			p, err := ParseCIDR(s)
			if err != nil {
				add("%s: %v", list.key, err)
				ok = false
				continue
			}
			prefixes = append(prefixes, p)
		}
		if ok && len(prefixes) > 0 && CoversAllSources(prefixes) {
			add("%s %v admits every source address (an all-source range such as 0.0.0.0/0, ::/0 or ::ffff:0:0/96, or ranges that together cover one); list the actual source ranges", list.key, list.vals)
		}
	}

	for _, s := range n.ModelEgressExcept {
		p, err := ParseCIDR(s)
		switch {
		case err != nil:
			add("network.modelEgressExcept: %v", err)
		case p.Bits() == 0:
			add("network.modelEgressExcept: %q leaves the model egress nothing; list the ranges to keep the gateways from", s)
		}
	}

	if msgs := validation.IsDNS1123Label(n.DNS.Namespace); len(msgs) > 0 {
		add("network.dns.namespace %q is not a Kubernetes name: %s", n.DNS.Namespace, strings.Join(msgs, "; "))
	}
	for k, v := range n.DNS.PodLabels {
		if !labelKeyRE.MatchString(k) || len(k) > 253 {
			add("network.dns.podLabels: %q is not a label key", k)
		}
		if len(v) > 63 || !labelValueRE.MatchString(v) {
			add("network.dns.podLabels[%q]: %q is not a label value", k, v)
		}
	}

	if ta := c.TenantAccess; ta != nil {
		if msgs := validation.IsDNS1123Subdomain(ta.ClusterRole); len(msgs) > 0 {
			add("tenantAccess.clusterRole %q is not a Kubernetes name: %s", ta.ClusterRole, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsDNS1123Subdomain(ta.ServiceAccountName); len(msgs) > 0 {
			add("tenantAccess.serviceAccountName %q is not a Kubernetes name: %s", ta.ServiceAccountName, strings.Join(msgs, "; "))
		}
		if msgs := validation.IsDNS1123Label(ta.ServiceAccountNamespace); len(msgs) > 0 {
			add("tenantAccess.serviceAccountNamespace %q is not a Kubernetes name: %s", ta.ServiceAccountNamespace, strings.Join(msgs, "; "))
		}
	}

	rt := c.Runtime
	for _, f := range []struct{ key, v string }{
		{"runtime.gatewayImage", rt.GatewayImage}, {"runtime.occImage", rt.OCCImage},
	} {
		switch {
		case f.v == "":
			add("%s is required", f.key)
		case strings.ContainsAny(f.v, " \t\r\n"):
			add("%s %q must not contain white space", f.key, f.v)
		}
	}
	for _, f := range []struct{ key, v string }{
		{"runtime.occBinaryPath", rt.OCCBinaryPath}, {"runtime.openclawExecutable", rt.OpenClawExecutable},
	} {
		if !path.IsAbs(f.v) || path.Clean(f.v) != f.v {
			add("%s %q must be an absolute, clean path", f.key, f.v)
		}
	}
	if strings.ContainsAny(rt.Node, " \t\r\n") || rt.Node == "" {
		add("runtime.node %q must be a command name or path without white space", rt.Node)
	}
	switch rt.ImagePullPolicy {
	case "Always", "IfNotPresent", "Never":
	default:
		add("runtime.imagePullPolicy %q is not one of Always, IfNotPresent, Never", rt.ImagePullPolicy)
	}
	if s := rt.GatewayStorageClassName; s != "" {
		if msgs := validation.IsDNS1123Subdomain(s); len(msgs) > 0 {
			add("runtime.gatewayStorageClassName %q is not a Kubernetes name: %s", s, strings.Join(msgs, "; "))
		}
	}
	if q, err := resource.ParseQuantity(rt.GatewayStorageSize); err != nil || q.Sign() <= 0 {
		add("runtime.gatewayStorageSize %q is not a positive quantity like 10Gi", rt.GatewayStorageSize)
	}
	if n := len(rt.ImagePullSecrets); n > MaxImagePullSecrets {
		add("runtime.imagePullSecrets lists %d Secrets; at most %d are allowed", n, MaxImagePullSecrets)
	}
	seen := make(map[string]int, len(rt.ImagePullSecrets))
	for i, name := range rt.ImagePullSecrets {
		switch msgs := validation.IsDNS1123Subdomain(name); {
		case len(msgs) > 0:
			add("runtime.imagePullSecrets[%d] %q is not a Kubernetes name: %s", i, name, strings.Join(msgs, "; "))
		case len(name) > maxImagePullSecretName:
			add("runtime.imagePullSecrets[%d] %q is longer than %d characters: its copy %s<name> in each tenant namespace must be a Kubernetes name", i, name, maxImagePullSecretName, imagePullSecretCopyPrefix)
		}
		if j, dup := seen[name]; dup {
			add("runtime.imagePullSecrets[%d] %q repeats runtime.imagePullSecrets[%d]", i, name, j)
		} else {
			seen[name] = i
		}
	}
	switch ns := rt.ImagePullSecretsNamespace; {
	case ns == "" && len(rt.ImagePullSecrets) > 0:
		add("runtime.imagePullSecretsNamespace is required with runtime.imagePullSecrets: name the namespace the Secrets are in")
	case ns != "" && len(rt.ImagePullSecrets) == 0:
		add("runtime.imagePullSecretsNamespace is only used with runtime.imagePullSecrets; remove it or list the Secrets")
	case ns != "":
		if msgs := validation.IsDNS1123Label(ns); len(msgs) > 0 {
			add("runtime.imagePullSecretsNamespace %q is not a Kubernetes name: %s", ns, strings.Join(msgs, "; "))
		}
	}

	for _, f := range []struct{ key, v string }{
		{"resources.requests.cpu", c.Resources.Requests.CPU},
		{"resources.requests.memory", c.Resources.Requests.Memory},
		{"resources.limits.cpu", c.Resources.Limits.CPU},
		{"resources.limits.memory", c.Resources.Limits.Memory},
	} {
		if f.v == "" {
			continue
		}
		if q, err := resource.ParseQuantity(f.v); err != nil || q.Sign() <= 0 {
			add("%s %q is not a positive quantity like 500m or 1Gi", f.key, f.v)
		}
	}
	for _, pair := range []struct{ key, req, lim string }{
		{"cpu", c.Resources.Requests.CPU, c.Resources.Limits.CPU},
		{"memory", c.Resources.Requests.Memory, c.Resources.Limits.Memory},
	} {
		req, err1 := resource.ParseQuantity(pair.req)
		lim, err2 := resource.ParseQuantity(pair.lim)
		if err1 == nil && err2 == nil && req.Cmp(lim) > 0 {
			add("resources.requests.%s %s exceeds resources.limits.%s %s", pair.key, pair.req, pair.key, pair.lim)
		}
	}
	return errors.Join(errs...)
}

// Label key and value syntax (Kubernetes qualified names).
var (
	labelKeyRE   = regexp.MustCompile(`^([a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*/)?[A-Za-z0-9]([-A-Za-z0-9_.]{0,61}[A-Za-z0-9])?$`)
	labelValueRE = regexp.MustCompile(`^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$`)
)

// checkHostname accepts a lower-case DNS name: no port, path, scheme,
// trailing dot or wildcard, each label at most 63 characters.
func checkHostname(h string) error {
	if strings.ContainsAny(h, ":/@?#* ") {
		return errors.New("must be a DNS name without scheme, port or path")
	}
	if msgs := validation.IsDNS1123Subdomain(h); len(msgs) > 0 {
		return fmt.Errorf("is not a lower-case DNS name: %s", strings.Join(msgs, "; "))
	}
	for _, label := range strings.Split(h, ".") {
		if len(label) > 63 {
			return fmt.Errorf("has a label longer than 63 characters")
		}
	}
	return nil
}

// ModelEgressExceptions returns the ranges the model egress rule leaves out of
// 0.0.0.0/0 and ::/0: the private ranges, then n.ModelEgressExcept by
// family. It assumes a validated Network (unparsable entries are skipped).
func (n Network) ModelEgressExceptions() (v4, v6 []string) {
	v4 = []string{"10.0.0.0/8", "100.64.0.0/10", "172.16.0.0/12", "192.168.0.0/16", "169.254.0.0/16"}
	v6 = []string{"fc00::/7", "fe80::/10"}
	for _, s := range n.ModelEgressExcept {
		p, err := ParseCIDR(s)
		switch {
		case err != nil:
		case p.Addr().Is4():
			v4 = append(v4, p.String())
		default:
			v6 = append(v6, p.String())
		}
	}
	return v4, v6
}

// ParseCIDR parses one network range. A bare address is refused (write
// /32 or /128 for one host), and so are host bits, which usually mean a
// typo. An IPv4-mapped IPv6 range (::ffff:10.0.0.0/104) is returned as the
// IPv4 range it means.
func ParseCIDR(s string) (netip.Prefix, error) {
	p, err := netip.ParsePrefix(s)
	if err != nil {
		return netip.Prefix{}, fmt.Errorf("%q is not a CIDR (like 10.0.0.0/8 or 192.0.2.10/32)", s)
	}
	if p.Addr().Zone() != "" {
		return netip.Prefix{}, fmt.Errorf("%q has a zone; write the range without it", s)
	}
	if m := p.Masked(); m != p {
		return netip.Prefix{}, fmt.Errorf("%q has host bits set; did you mean %s?", s, m)
	}
	return unmap(p), nil
}

// mappedV4 is ::ffff:0:0/96, the IPv4-mapped IPv6 range: a gateway that
// listens on an IPv6 socket sees every IPv4 client inside it.
var mappedV4 = netip.MustParsePrefix("::ffff:0:0/96")

// unmap turns a range inside ::ffff:0:0/96 into the IPv4 range it maps.
func unmap(p netip.Prefix) netip.Prefix {
	if p.Addr().Is4In6() && p.Bits() >= 96 {
		return netip.PrefixFrom(p.Addr().Unmap(), p.Bits()-96)
	}
	return p
}

// CoversAllSources reports whether the union of prefixes admits every IPv4
// or every IPv6 source: 0.0.0.0/0 and ::/0 themselves, the IPv4-mapped
// ::ffff:0:0/96 (and any IPv6 range containing it, such as ::/64), and
// sets of narrower ranges that add up to a whole family (0.0.0.0/1 with
// 128.0.0.0/1).
func CoversAllSources(prefixes []netip.Prefix) bool {
	var v4, v6 []netip.Prefix
	for _, p := range prefixes {
		p = unmap(p.Masked())
		switch {
		case p.Addr().Is4():
			v4 = append(v4, p)
		case p.Bits() <= mappedV4.Bits() && p.Contains(mappedV4.Addr()):
			// Holds all of ::ffff:0:0/96, i.e. every IPv4 client.
			v4 = append(v4, netip.MustParsePrefix("0.0.0.0/0"))
			v6 = append(v6, p)
		default:
			v6 = append(v6, p)
		}
	}
	return covers(v4, 32) || covers(v6, 128)
}

// covers reports whether the prefixes of one family (bits wide) cover the
// whole address space: drop every prefix contained in another, then the
// rest are disjoint and their sizes must add up to 2^bits.
func covers(ps []netip.Prefix, bits int) bool {
	if len(ps) == 0 {
		return false
	}
	slices.SortFunc(ps, func(a, b netip.Prefix) int { return a.Bits() - b.Bits() })
	var kept []netip.Prefix
	for _, p := range ps {
		inside := false
		for _, k := range kept {
			if k.Contains(p.Addr()) {
				inside = true // k is at least as wide as p (sorted by length)
				break
			}
		}
		if !inside {
			kept = append(kept, p)
		}
	}
	sum := new(big.Int)
	for _, k := range kept {
		sum.Add(sum, new(big.Int).Lsh(big.NewInt(1), uint(bits-k.Bits())))
	}
	return sum.Cmp(new(big.Int).Lsh(big.NewInt(1), uint(bits))) == 0
}

// RouteLabel is the first 12 hex digits of sha256("<gatewayNamespace>/<gatewayName>"):
// the value of the tenant Namespace label the Gateway's listener admits
// routes from, and part of the Envoy Service's name. The Helm chart
// derives the same value from the same inputs.
func (r GatewayRouting) RouteLabel() string {
	return HashHex(r.GatewayNamespace+"/"+r.GatewayName, 12)
}

// EnvoyServiceName is the Envoy proxy Service of the Gateway,
// occ-gateway-<RouteLabel>.
func (r GatewayRouting) EnvoyServiceName() string { return "occ-gateway-" + r.RouteLabel() }

// Host is the routed hostname: Hostname when set, else the Envoy
// Service's cluster name occ-gateway-<RouteLabel>.<EnvoyNamespace>.svc,
// which Pod DNS search resolves without a cluster suffix.
func (r GatewayRouting) Host() string {
	if r.Hostname != "" {
		return r.Hostname
	}
	return r.EnvoyServiceName() + "." + r.EnvoyNamespace + ".svc"
}

// HashHex returns the first n hex digits of sha256(s).
func HashHex(s string, n int) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:n]
}
