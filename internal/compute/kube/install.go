package kube

import (
	"bytes"
	"errors"
	"fmt"
	"strings"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"
)

// HeaderAPIKey carries OCC's service key to Envoy.
const HeaderAPIKey = "x-api-key"

// InstallationOptions are the chart-level inputs of RenderInstallation
// that the Compute configuration does not hold.
type InstallationOptions struct {
	// GatewayClassName names an existing Envoy Gateway GatewayClass.
	// Required.
	GatewayClassName string
	// APIKeySecretName names the Opaque Secret in the Gateway's namespace
	// whose key "occ" holds the service key (each key of the Secret is one
	// accepted client). Required.
	APIKeySecretName string
	// TLSSecretName names the listener's certificate Secret
	// (kubernetes.io/tls, issued by cert-manager for Host in the chart);
	// default <gatewayName>-tls.
	TLSSecretName string
}

// Installation is the installation-level routing the Helm chart renders
// (gateway-routing.yaml): the Envoy proxy parameters, the shared private
// Gateway and its API-key SecurityPolicy. The cert-manager Issuers and
// Certificates and the Envoy data-plane NetworkPolicy are the chart's
// alone: they are not Gateway API objects and egctl cannot translate them.
type Installation struct {
	// EnvoyProxy gives the proxy a ClusterIP Service with the stable name
	// occ-gateway-<routeLabel>, so the derived hostname resolves to it.
	EnvoyProxy *egv1a1.EnvoyProxy
	// Gateway has one listener, "https" on 443 for Host, terminating TLS,
	// admitting HTTPRoutes only from namespaces labelled
	// openclaw-enterprise.io/gateway=<routeLabel>.
	Gateway *gwv1.Gateway
	// SecurityPolicy <gatewayName>-api-key requires the service key in
	// x-api-key on every route of the Gateway and strips it (sanitize).
	SecurityPolicy *egv1a1.SecurityPolicy
}

// Objects returns the installation's objects in apply order.
func (i *Installation) Objects() []client.Object {
	return []client.Object{i.EnvoyProxy, i.Gateway, i.SecurityPolicy}
}

// RenderInstallation renders the installation-level routing objects from
// the same configuration the driver uses, so that the names, hostname and
// route label agree by construction. cfg must have gatewayRouting.
func RenderInstallation(cfg Config, o InstallationOptions) (*Installation, error) {
	cfg = cfg.WithDefaults()
	r := cfg.GatewayRouting
	if r == nil {
		return nil, errors.New("kube: RenderInstallation needs gatewayRouting in the configuration")
	}
	if o.TLSSecretName == "" {
		o.TLSSecretName = r.GatewayName + "-tls"
	}
	var errs []error
	for _, f := range []struct{ name, v string }{
		{"GatewayClassName", o.GatewayClassName}, {"APIKeySecretName", o.APIKeySecretName}, {"TLSSecretName", o.TLSSecretName},
	} {
		if msgs := validation.IsDNS1123Subdomain(f.v); len(msgs) > 0 {
			errs = append(errs, fmt.Errorf("kube: InstallationOptions.%s %q: %s", f.name, f.v, strings.Join(msgs, "; ")))
		}
	}
	if o.APIKeySecretName == o.TLSSecretName {
		errs = append(errs, errors.New("kube: the service-key Secret and the listener's TLS Secret must differ"))
	}
	if err := errors.Join(errs...); err != nil {
		return nil, err
	}

	labels := map[string]string{LabelManagedBy: ManagedBy}
	proxyName := r.EnvoyServiceName()
	ep := &egv1a1.EnvoyProxy{
		TypeMeta:   metav1.TypeMeta{APIVersion: egv1a1.GroupVersion.String(), Kind: egv1a1.KindEnvoyProxy},
		ObjectMeta: metav1.ObjectMeta{Name: proxyName, Namespace: r.GatewayNamespace, Labels: labels},
		Spec: egv1a1.EnvoyProxySpec{Provider: &egv1a1.EnvoyProxyProvider{
			Type: egv1a1.EnvoyProxyProviderTypeKubernetes,
			Kubernetes: &egv1a1.EnvoyProxyKubernetesProvider{EnvoyService: &egv1a1.KubernetesServiceSpec{
				Name: ptr.To(proxyName),
				Type: ptr.To(egv1a1.ServiceTypeClusterIP),
			}},
		}},
	}
	gw := &gwv1.Gateway{
		TypeMeta:   metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: "Gateway"},
		ObjectMeta: metav1.ObjectMeta{Name: r.GatewayName, Namespace: r.GatewayNamespace, Labels: labels},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: gwv1.ObjectName(o.GatewayClassName),
			Infrastructure: &gwv1.GatewayInfrastructure{ParametersRef: &gwv1.LocalParametersReference{
				Group: gwv1.Group(egv1a1.GroupName), Kind: gwv1.Kind(egv1a1.KindEnvoyProxy), Name: proxyName,
			}},
			Listeners: []gwv1.Listener{{
				Name:     "https",
				Hostname: ptr.To(gwv1.Hostname(r.Host())),
				Port:     443,
				Protocol: gwv1.HTTPSProtocolType,
				TLS: &gwv1.ListenerTLSConfig{
					Mode: ptr.To(gwv1.TLSModeTerminate),
					CertificateRefs: []gwv1.SecretObjectReference{{
						Group: ptr.To(gwv1.Group("")), Kind: ptr.To(gwv1.Kind("Secret")), Name: gwv1.ObjectName(o.TLSSecretName),
					}},
				},
				AllowedRoutes: &gwv1.AllowedRoutes{
					Namespaces: &gwv1.RouteNamespaces{
						From:     ptr.To(gwv1.NamespacesFromSelector),
						Selector: &metav1.LabelSelector{MatchLabels: map[string]string{LabelRouteAttachment: r.RouteLabel()}},
					},
					Kinds: []gwv1.RouteGroupKind{{Group: ptr.To(gwv1.Group(gwv1.GroupName)), Kind: "HTTPRoute"}},
				},
			}},
		},
	}
	sp := &egv1a1.SecurityPolicy{
		TypeMeta:   metav1.TypeMeta{APIVersion: egv1a1.GroupVersion.String(), Kind: egv1a1.KindSecurityPolicy},
		ObjectMeta: metav1.ObjectMeta{Name: r.GatewayName + "-api-key", Namespace: r.GatewayNamespace, Labels: labels},
		Spec: egv1a1.SecurityPolicySpec{
			PolicyTargetReferences: egv1a1.PolicyTargetReferences{TargetRefs: []gwv1.LocalPolicyTargetReferenceWithSectionName{{
				LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{
					Group: gwv1.GroupName, Kind: "Gateway", Name: gwv1.ObjectName(r.GatewayName),
				},
			}}},
			APIKeyAuth: &egv1a1.APIKeyAuth{
				CredentialRefs: []gwv1.SecretObjectReference{{
					Group: ptr.To(gwv1.Group("")), Kind: ptr.To(gwv1.Kind("Secret")), Name: gwv1.ObjectName(o.APIKeySecretName),
				}},
				ExtractFrom: []*egv1a1.ExtractFrom{{Headers: []string{HeaderAPIKey}}},
				Sanitize:    ptr.To(true),
			},
		},
	}
	return &Installation{EnvoyProxy: ep, Gateway: gw, SecurityPolicy: sp}, nil
}

// Manifest renders objects (with TypeMeta set, as every Render function
// sets it) as one multi-document YAML stream holding what the driver
// would apply: no status, no server-set or null fields. It is the input
// format of kubectl apply and egctl x translate.
func Manifest(objs ...client.Object) ([]byte, error) {
	var buf bytes.Buffer
	for _, obj := range objs {
		u, err := toApply(obj)
		if err != nil {
			return nil, err
		}
		b, err := yaml.Marshal(u.Object)
		if err != nil {
			return nil, fmt.Errorf("kube: YAML of %s %s: %w", u.GetKind(), u.GetName(), err)
		}
		buf.WriteString("---\n")
		buf.Write(b)
	}
	return buf.Bytes(), nil
}
