package kube

import (
	"context"
	"crypto/x509"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"slices"
	"strings"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/openclaw/occ/internal/compute"
)

// This file is what the operator's routing commands (occ routing enable,
// occ doctor routing) read from the cluster with the operator's own
// kubeconfig: the OCC API holds no Kubernetes permission, so these reads
// never go through it. Everything here only reads.

// ReadConfigMapKey reads one key of a ConfigMap with the kubeconfig file
// (and context) given: how the routing commands find the driver
// configuration the Helm chart rendered (<release>-occ-config, key
// occ.yaml). It makes one API call.
func ReadConfigMapKey(ctx context.Context, kubeconfig, kubeContext, namespace, name, key string) ([]byte, error) {
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: kubeContext},
	).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kube: kubeconfig %s: %w", kubeconfig, err)
	}
	c, err := NewClient(rc)
	if err != nil {
		return nil, fmt.Errorf("kube: client for %s: %w", rc.Host, err)
	}
	cctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	var cm corev1.ConfigMap
	if err := c.Get(cctx, client.ObjectKey{Namespace: namespace, Name: name}, &cm); err != nil {
		return nil, fmt.Errorf("kube: read ConfigMap %s/%s: %w", namespace, name, err)
	}
	v, ok := cm.Data[key]
	if !ok {
		return nil, fmt.Errorf("kube: ConfigMap %s/%s has no key %s", namespace, name, key)
	}
	return []byte(v), nil
}

// NamespaceBackup is a tenant namespace and its NetworkPolicies as read,
// each the API server's JSON without managedFields: what a reconciliation
// may change, kept so an operator can restore it. It holds no Secret.
type NamespaceBackup struct {
	Namespace       json.RawMessage   `json:"namespace"`
	NetworkPolicies []json.RawMessage `json:"networkPolicies"`
}

// BackupNamespace reads the tenant namespace of namespaceID and every
// NetworkPolicy in it.
func (d *Driver) BackupNamespace(ctx context.Context, namespaceID string) (NamespaceBackup, error) {
	name := TenantNamespace(namespaceID)
	var ns corev1.Namespace
	found, err := d.getTyped(ctx, client.ObjectKey{Name: name}, &ns)
	if err != nil {
		return NamespaceBackup{}, err
	}
	if !found {
		return NamespaceBackup{}, fmt.Errorf("kube: the tenant namespace %s of %s does not exist", name, namespaceID)
	}
	var out NamespaceBackup
	ns.ManagedFields = nil
	ns.TypeMeta = metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"}
	if out.Namespace, err = json.Marshal(&ns); err != nil {
		return NamespaceBackup{}, err
	}
	var l networkingv1.NetworkPolicyList
	cctx, cancel := d.call(ctx)
	defer cancel()
	if err := d.c.List(cctx, &l, client.InNamespace(name)); err != nil {
		return NamespaceBackup{}, fmt.Errorf("kube: list NetworkPolicies of %s: %w", name, err)
	}
	out.NetworkPolicies = []json.RawMessage{}
	for i := range l.Items {
		p := &l.Items[i]
		p.ManagedFields = nil
		p.TypeMeta = metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"}
		b, err := json.Marshal(p)
		if err != nil {
			return NamespaceBackup{}, err
		}
		out.NetworkPolicies = append(out.NetworkPolicies, b)
	}
	return out, nil
}

// Check results.
const (
	CheckPassed  = "passed"
	CheckFailed  = "failed"
	CheckSkipped = "skipped"
)

// Check is one routing check: Name is stable (for --skip and automation),
// Object the Kubernetes object it looked at, Result passed or failed,
// Detail what it saw and Remedy, on a failure, what to do.
type Check struct {
	Name   string `json:"name"`
	Object string `json:"object"`
	Result string `json:"result"`
	Detail string `json:"detail"`
	Remedy string `json:"remedy,omitempty"`
}

func pass(name, obj, detail string) Check {
	return Check{Name: name, Object: obj, Result: CheckPassed, Detail: detail}
}

func fail(name, obj, detail, remedy string) Check {
	return Check{Name: name, Object: obj, Result: CheckFailed, Detail: detail, Remedy: remedy}
}

// Names of the installation and per-Agent checks.
const (
	CheckGatewayAccepted        = "gateway-accepted"
	CheckGatewayProgrammed      = "gateway-programmed"
	CheckCertificateReady       = "certificate-ready"
	CheckCertificateHostname    = "certificate-hostname"
	CheckSecurityPolicyAccepted = "securitypolicy-accepted"
	CheckRouteAccepted          = "route-accepted"
	CheckNamespaceLabel         = "namespace-label"
	CheckIngressPolicy          = "ingress-policy"
)

var gvkCertificate = schema.GroupVersionKind{Group: "cert-manager.io", Version: "v1", Kind: "Certificate"}

// CheckInstallationRouting reads the installation's Gateway, its listener
// Certificate and TLS Secret (only the public tls.crt is parsed) and the
// SecurityPolicy, and says whether Envoy Gateway and cert-manager report
// them working for the driver's routed host. Without routing it answers
// one failed check.
func (d *Driver) CheckInstallationRouting(ctx context.Context) []Check {
	r := d.cfg.GatewayRouting
	if r == nil {
		return []Check{fail(CheckGatewayAccepted, "drivers.compute.kubernetes.gatewayRouting", "routing is not configured",
			"configure gatewayRouting in the chart values and the driver configuration, then run occ routing enable")}
	}
	host := r.Host()
	gwObj := "Gateway " + r.GatewayNamespace + "/" + r.GatewayName
	var out []Check
	var gw gwv1.Gateway
	found, err := d.getTyped(ctx, client.ObjectKey{Namespace: r.GatewayNamespace, Name: r.GatewayName}, &gw)
	switch {
	case err != nil:
		out = append(out, fail(CheckGatewayAccepted, gwObj, "cannot read it: "+err.Error(), "check the kubeconfig's permissions and the API server"))
	case !found:
		out = append(out, fail(CheckGatewayAccepted, gwObj, "not found",
			"install the chart with gatewayRouting.enabled and the same gatewayName; the names must be the driver configuration's"))
	default:
		out = append(out, condCheck(CheckGatewayAccepted, gwObj, gw.Status.Conditions, string(gwv1.GatewayConditionAccepted),
			"check the GatewayClass exists and is Envoy Gateway's (kubectl describe gateway)"))
		out = append(out, condCheck(CheckGatewayProgrammed, gwObj, gw.Status.Conditions, string(gwv1.GatewayConditionProgrammed),
			"check the Envoy proxy Pods in "+r.EnvoyNamespace+" run and their Service has an address"))
		var hostnames []string
		for _, l := range gw.Spec.Listeners {
			if l.Name == "https" && l.Hostname != nil {
				hostnames = append(hostnames, string(*l.Hostname))
			}
		}
		if !slices.Contains(hostnames, host) {
			out = append(out, fail(CheckCertificateHostname, gwObj, fmt.Sprintf("listener https hostname %v, the driver dials %s", hostnames, host),
				"set the same gatewayRouting.hostname (or none) in the chart values and the driver configuration"))
		}
	}

	certName := r.GatewayName + "-tls"
	certObj := "Certificate " + r.GatewayNamespace + "/" + certName
	cert := &unstructured.Unstructured{}
	cert.SetGroupVersionKind(gvkCertificate)
	found, err = d.getTyped(ctx, client.ObjectKey{Namespace: r.GatewayNamespace, Name: certName}, cert)
	switch {
	case err != nil:
		out = append(out, fail(CheckCertificateReady, certObj, "cannot read it: "+err.Error(), "check that cert-manager's CRDs are installed"))
	case !found:
		out = append(out, fail(CheckCertificateReady, certObj, "not found", "install the chart with gatewayRouting.enabled"))
	default:
		var st struct {
			Spec struct {
				DNSNames   []string `json:"dnsNames"`
				SecretName string   `json:"secretName"`
			} `json:"spec"`
			Status struct {
				Conditions []metav1.Condition `json:"conditions"`
			} `json:"status"`
		}
		if b, err := json.Marshal(cert.Object); err == nil {
			_ = json.Unmarshal(b, &st)
		}
		out = append(out, condCheck(CheckCertificateReady, certObj, st.Status.Conditions, "Ready",
			"kubectl describe certificate "+certName+": cert-manager must issue it (the issuer's status says why not)"))
		secret := st.Spec.SecretName
		if secret == "" {
			secret = certName
		}
		out = append(out, d.checkListenerSecret(ctx, r.GatewayNamespace, secret, host, st.Spec.DNSNames))
	}

	spName := r.GatewayName + "-api-key"
	spObj := "SecurityPolicy " + r.GatewayNamespace + "/" + spName
	var sp egv1a1.SecurityPolicy
	found, err = d.getTyped(ctx, client.ObjectKey{Namespace: r.GatewayNamespace, Name: spName}, &sp)
	switch {
	case err != nil:
		out = append(out, fail(CheckSecurityPolicyAccepted, spObj, "cannot read it: "+err.Error(), "check the kubeconfig's permissions"))
	case !found:
		out = append(out, fail(CheckSecurityPolicyAccepted, spObj, "not found", "install the chart with gatewayRouting.enabled"))
	default:
		var conds []metav1.Condition
		for _, a := range sp.Status.Ancestors {
			if string(a.AncestorRef.Name) == r.GatewayName {
				conds = a.Conditions
			}
		}
		out = append(out, condCheck(CheckSecurityPolicyAccepted, spObj, conds, string(gwv1.PolicyConditionAccepted),
			"kubectl describe securitypolicy "+spName+": the service-key Secret (key occ) must exist"))
	}
	return out
}

// checkListenerSecret parses the public certificate of the listener's TLS
// Secret: it must cover host and be valid now. The private key is never
// read into anything but the API object.
func (d *Driver) checkListenerSecret(ctx context.Context, namespace, name, host string, dnsNames []string) Check {
	obj := "Secret " + namespace + "/" + name + " (tls.crt)"
	var s corev1.Secret
	found, err := d.getTyped(ctx, client.ObjectKey{Namespace: namespace, Name: name}, &s)
	switch {
	case err != nil:
		return fail(CheckCertificateHostname, obj, "cannot read it: "+err.Error(), "the operator needs get on Secrets of "+namespace)
	case !found:
		return fail(CheckCertificateHostname, obj, "not found (the certificate was never issued)", "see the Certificate's status")
	}
	block, _ := pem.Decode(s.Data[corev1.TLSCertKey])
	if block == nil {
		return fail(CheckCertificateHostname, obj, "tls.crt holds no PEM certificate", "delete the Secret so cert-manager issues it again")
	}
	c, err := x509.ParseCertificate(block.Bytes)
	if err != nil {
		return fail(CheckCertificateHostname, obj, "tls.crt does not parse", "delete the Secret so cert-manager issues it again")
	}
	if err := c.VerifyHostname(host); err != nil {
		return fail(CheckCertificateHostname, obj, fmt.Sprintf("the certificate names %v, not %s", c.DNSNames, host),
			"the Certificate's dnsNames must hold the routed host; set the same hostname in chart and driver")
	}
	if now := time.Now(); now.After(c.NotAfter) || now.Before(c.NotBefore) {
		return fail(CheckCertificateHostname, obj, "the certificate is not valid now (until "+c.NotAfter.UTC().Format(time.RFC3339)+")",
			"renew it: cmctl renew or delete the Secret")
	}
	detail := fmt.Sprintf("covers %s, valid until %s", host, c.NotAfter.UTC().Format(time.RFC3339))
	if len(dnsNames) > 0 && !slices.Contains(dnsNames, host) {
		return fail(CheckCertificateHostname, obj, fmt.Sprintf("the Certificate asks for %v, not %s", dnsNames, host),
			"set the same hostname in chart and driver")
	}
	return pass(CheckCertificateHostname, obj, detail)
}

// CheckAgentRouting checks one Agent: its HTTPRoute is Accepted with
// ResolvedRefs by the installation's Gateway, its tenant namespace carries
// the route-attachment label, and allow-gateway-ingress admits only the
// Envoy peer with no other policy admitting more (PlanNamespace's checks:
// nothing left to reconcile).
func (d *Driver) CheckAgentRouting(ctx context.Context, namespaceID, agentID string) []Check {
	r := d.cfg.GatewayRouting
	if r == nil {
		return nil
	}
	tenant := TenantNamespace(namespaceID)
	var out []Check
	routeObj := "HTTPRoute " + tenant + "/" + GatewayName(agentID)
	var route gwv1.HTTPRoute
	found, err := d.getTyped(ctx, client.ObjectKey{Namespace: tenant, Name: GatewayName(agentID)}, &route)
	switch {
	case err != nil:
		out = append(out, fail(CheckRouteAccepted, routeObj, "cannot read it: "+err.Error(), "check the kubeconfig's permissions"))
	case !found:
		out = append(out, fail(CheckRouteAccepted, routeObj, "not found",
			"redeploy the Agent after routing is configured (occ routing enable does)"))
	default:
		var conds []metav1.Condition
		for _, p := range route.Status.Parents {
			if string(p.ParentRef.Name) == r.GatewayName {
				conds = p.Conditions
			}
		}
		a := condCheck(CheckRouteAccepted, routeObj, conds, string(gwv1.RouteConditionAccepted),
			"the tenant namespace needs the label "+LabelRouteAttachment+"="+r.RouteLabel()+" (occ routing enable)")
		if a.Result == CheckPassed {
			if rr := condCheck(CheckRouteAccepted, routeObj, conds, string(gwv1.RouteConditionResolvedRefs),
				"the Agent's Service "+tenant+"/"+GatewayName(agentID)+" must exist on the gateway port"); rr.Result != CheckPassed {
				a = rr
			} else {
				a.Detail = "Accepted and ResolvedRefs"
			}
		}
		out = append(out, a)
	}

	nsObj := "Namespace " + tenant
	var ns corev1.Namespace
	found, err = d.getTyped(ctx, client.ObjectKey{Name: tenant}, &ns)
	switch {
	case err != nil:
		out = append(out, fail(CheckNamespaceLabel, nsObj, "cannot read it: "+err.Error(), "check the kubeconfig's permissions"))
	case !found:
		out = append(out, fail(CheckNamespaceLabel, nsObj, "not found", "the Namespace was never provisioned; see occ namespace get"))
	case ns.Labels[LabelRouteAttachment] != r.RouteLabel():
		out = append(out, fail(CheckNamespaceLabel, nsObj, fmt.Sprintf("label %s=%q, want %q", LabelRouteAttachment, ns.Labels[LabelRouteAttachment], r.RouteLabel()),
			"occ routing enable --namespace "+namespaceID))
	default:
		out = append(out, pass(CheckNamespaceLabel, nsObj, LabelRouteAttachment+"="+r.RouteLabel()))
	}

	polObj := "NetworkPolicy " + tenant + "/" + PolicyGatewayIngress
	plan, err := d.PlanNamespace(ctx, compute.Namespace{ID: namespaceID})
	if p, ok := compute.AsPermanent(err); ok {
		out = append(out, fail(CheckIngressPolicy, polObj, p.Public, "fix or remove the object it names, then occ routing enable"))
		return out
	}
	if err != nil {
		out = append(out, fail(CheckIngressPolicy, polObj, "cannot read it: "+err.Error(), "check the kubeconfig's permissions"))
		return out
	}
	var pending []string
	for _, c := range plan.Changes {
		if c.Kind == "NetworkPolicy" && c.Action != compute.ActionUnchanged {
			pending = append(pending, c.Name+" ("+c.Action+")")
		}
	}
	if len(pending) > 0 {
		out = append(out, fail(CheckIngressPolicy, polObj, "not in line with the routing: "+strings.Join(pending, ", "),
			"occ routing enable --namespace "+namespaceID))
		return out
	}
	var pol networkingv1.NetworkPolicy
	if _, err := d.getTyped(ctx, client.ObjectKey{Namespace: tenant, Name: PolicyGatewayIngress}, &pol); err != nil {
		out = append(out, fail(CheckIngressPolicy, polObj, "cannot read it: "+err.Error(), "check the kubeconfig's permissions"))
		return out
	}
	envoy := RenderNamespaceEnvoyPeer(d.cfg)
	if len(pol.Spec.Ingress) != 1 || len(pol.Spec.Ingress[0].From) != 1 || envoy == nil || !equality.Semantic.DeepEqual(pol.Spec.Ingress[0].From[0], *envoy) {
		out = append(out, fail(CheckIngressPolicy, polObj, "admits peers other than the Envoy proxies", "occ routing enable --namespace "+namespaceID))
		return out
	}
	out = append(out, pass(CheckIngressPolicy, polObj, "admits only the Envoy proxies of "+r.GatewayNamespace+"/"+r.GatewayName))
	return out
}

// condCheck passes when condition typ is True.
func condCheck(name, obj string, conds []metav1.Condition, typ, remedy string) Check {
	c := meta.FindStatusCondition(conds, typ)
	switch {
	case c == nil:
		return fail(name, obj, typ+" not reported yet", remedy)
	case c.Status != metav1.ConditionTrue:
		return fail(name, obj, fmt.Sprintf("%s=%s (%s: %s)", typ, c.Status, c.Reason, truncate(c.Message, 160)), remedy)
	}
	return pass(name, obj, typ)
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "…"
}
