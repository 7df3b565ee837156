package kube_test

import (
	"bytes"
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/client/apiutil"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/openclaw/occ/internal/testenv/kube"
)

// egControllerName is the controller name Envoy Gateway's default configuration serves.
const egControllerName = "gateway.envoyproxy.io/gatewayclass-controller"

// fixture builds the objects of one agent behind an Envoy Gateway Gateway, fresh on every call (Create
// fills in server-side fields, and the egctl input must not carry them).
type fixture struct {
	ns, class string
}

func (f fixture) gatewayClass() *gwv1.GatewayClass {
	return &gwv1.GatewayClass{
		ObjectMeta: metav1.ObjectMeta{Name: f.class},
		Spec:       gwv1.GatewayClassSpec{ControllerName: egControllerName},
	}
}

func (f fixture) gateway() *gwv1.Gateway {
	return &gwv1.Gateway{
		ObjectMeta: metav1.ObjectMeta{Name: "agents-gw", Namespace: f.ns},
		Spec: gwv1.GatewaySpec{
			GatewayClassName: gwv1.ObjectName(f.class),
			Listeners:        []gwv1.Listener{{Name: "http", Protocol: gwv1.HTTPProtocolType, Port: 80}},
		},
	}
}

func (f fixture) service() *corev1.Service {
	return &corev1.Service{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-a", Namespace: f.ns},
		Spec: corev1.ServiceSpec{
			Selector: map[string]string{"app": "agent-a"},
			Ports:    []corev1.ServicePort{{Name: "http", Port: 8080, TargetPort: intstr.FromInt32(8080)}},
		},
	}
}

func (f fixture) secret() *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-a-keys", Namespace: f.ns},
		Type:       corev1.SecretTypeOpaque,
		StringData: map[string]string{"client-1": "key-123"},
	}
}

func (f fixture) httpRoute() *gwv1.HTTPRoute {
	return &gwv1.HTTPRoute{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-a", Namespace: f.ns},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{Name: "agents-gw"}}},
			Hostnames:       []gwv1.Hostname{"agent-a.example.test"},
			Rules: []gwv1.HTTPRouteRule{{
				Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{
					Type: ptr.To(gwv1.PathMatchPathPrefix), Value: ptr.To("/agents/a"),
				}}},
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{
					BackendObjectReference: gwv1.BackendObjectReference{Name: "agent-a", Port: ptr.To(gwv1.PortNumber(8080))},
				}}},
			}},
		},
	}
}

func (f fixture) securityPolicy() *egv1a1.SecurityPolicy {
	return &egv1a1.SecurityPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-a-apikey", Namespace: f.ns},
		Spec: egv1a1.SecurityPolicySpec{
			PolicyTargetReferences: egv1a1.PolicyTargetReferences{
				TargetRefs: []gwv1.LocalPolicyTargetReferenceWithSectionName{{
					LocalPolicyTargetReference: gwv1.LocalPolicyTargetReference{
						Group: gwv1.GroupName, Kind: "HTTPRoute", Name: "agent-a",
					},
				}},
			},
			APIKeyAuth: &egv1a1.APIKeyAuth{
				CredentialRefs: []gwv1.SecretObjectReference{{Name: "agent-a-keys"}},
				ExtractFrom:    []*egv1a1.ExtractFrom{{Headers: []string{"x-api-key"}}},
			},
		},
	}
}

func (f fixture) networkPolicy() *networkingv1.NetworkPolicy {
	return &networkingv1.NetworkPolicy{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-a", Namespace: f.ns},
		Spec: networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{"app": "agent-a"}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From: []networkingv1.NetworkPolicyPeer{{NamespaceSelector: &metav1.LabelSelector{
					MatchLabels: map[string]string{"kubernetes.io/metadata.name": "envoy-gateway-system"},
				}}},
				Ports: []networkingv1.NetworkPolicyPort{{Port: ptr.To(intstr.FromInt32(8080))}},
			}},
		},
	}
}

func (f fixture) deployment() *appsv1.Deployment {
	labels := map[string]string{"app": "agent-a"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "agent-a", Namespace: f.ns},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "agent",
					// kwok never pulls or runs it.
					Image: "registry.invalid/openclaw/agent:test",
					Ports: []corev1.ContainerPort{{ContainerPort: 8080}},
				}}},
			},
		},
	}
}

func (f fixture) issuer() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "cert-manager.io/v1",
		"kind":       "Issuer",
		"metadata":   map[string]any{"name": "selfsigned", "namespace": f.ns},
		"spec":       map[string]any{"selfSigned": map[string]any{}},
	}}
}

// TestEnvironment proves the Kubernetes test environment: the API server stores and validates the
// CRD-backed objects OCC will create, the real Envoy Gateway controller reconciles them, egctl
// translates them into the xDS that enforces API keys, and kwok's node runs Deployments to Ready.
func TestEnvironment(t *testing.T) {
	c := kube.Env(t)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	f := fixture{ns: c.NewNamespace(t), class: kube.RandomName("occt-eg")}

	create := func(obj client.Object) {
		t.Helper()
		if err := c.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
	// The Deployment first: its rollout runs while the rest is created.
	create(f.deployment())
	class := f.gatewayClass()
	create(class)
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := c.Client.Delete(ctx, class); err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("delete GatewayClass %s: %v", class.Name, err)
		}
	})
	for _, obj := range []client.Object{
		f.gateway(), f.service(), f.secret(), f.httpRoute(), f.securityPolicy(), f.networkPolicy(), f.issuer(),
	} {
		create(obj)
	}

	t.Run("schema validation", func(t *testing.T) {
		bad := f.securityPolicy()
		bad.Name = "no-extract-from"
		bad.Spec.APIKeyAuth.ExtractFrom = nil
		err := c.Client.Create(ctx, bad)
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "extractFrom") {
			t.Fatalf("a SecurityPolicy without apiKeyAuth.extractFrom: got error %v, want Invalid naming extractFrom", err)
		}
		t.Logf("rejected as it should be: %v", err)
	})

	t.Run("Envoy Gateway accepts the route", func(t *testing.T) {
		var route gwv1.HTTPRoute
		var last []metav1.Condition
		kube.WaitFor(t, ctx, func() (bool, error) {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(f.httpRoute()), &route); err != nil {
				return false, err
			}
			for _, p := range route.Status.Parents {
				if p.ControllerName != egControllerName {
					continue
				}
				last = p.Conditions
				if meta.IsStatusConditionTrue(p.Conditions, string(gwv1.RouteConditionAccepted)) &&
					meta.IsStatusConditionTrue(p.Conditions, string(gwv1.RouteConditionResolvedRefs)) {
					return true, nil
				}
			}
			return false, nil
		})
		t.Logf("HTTPRoute conditions: %s", conditions(last))

		var sp egv1a1.SecurityPolicy
		kube.WaitFor(t, ctx, func() (bool, error) {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(f.securityPolicy()), &sp); err != nil {
				return false, err
			}
			for _, a := range sp.Status.Ancestors {
				if meta.IsStatusConditionTrue(a.Conditions, string(gwv1.PolicyConditionAccepted)) {
					return true, nil
				}
			}
			return false, nil
		})
	})

	t.Run("egctl translates the API key policy", func(t *testing.T) {
		if c.Egctl == "" {
			t.Fatalf("no egctl: set %s (scripts/testenv/k8s.sh env does)", kube.EnvEgctl)
		}
		var in bytes.Buffer
		for _, obj := range []client.Object{
			f.gatewayClass(), f.gateway(), f.service(), f.secret(), f.httpRoute(), f.securityPolicy(),
		} {
			in.WriteString("---\n")
			in.Write(render(t, c.Client, obj))
		}
		file := filepath.Join(t.TempDir(), "input.yaml")
		if err := os.WriteFile(file, in.Bytes(), 0o600); err != nil {
			t.Fatal(err)
		}
		cmd := exec.CommandContext(ctx, c.Egctl, "x", "translate", "--from", "gateway-api", "--to", "xds",
			"-t", "all", "-o", "yaml", "--add-missing-resources", "-f", file)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		out, err := cmd.Output()
		if err != nil {
			t.Fatalf("egctl x translate: %v\n%s\ninput:\n%s", err, stderr.Bytes(), in.Bytes())
		}
		xds := string(out)
		// The listener gets the api_key_auth filter, the route turns it on with the header as key source.
		for _, want := range []string{
			"name: envoy.filters.http.api_key_auth",
			"type.googleapis.com/envoy.extensions.filters.http.api_key_auth.v3.ApiKeyAuthPerRoute",
			"- header: x-api-key",
		} {
			if !strings.Contains(xds, want) {
				t.Errorf("egctl output lacks %q; input:\n%s\noutput:\n%s", want, in.Bytes(), xds)
			}
		}
	})

	t.Run("the Deployment becomes ready on the kwok node", func(t *testing.T) {
		var d appsv1.Deployment
		kube.WaitFor(t, ctx, func() (bool, error) {
			if err := c.Client.Get(ctx, client.ObjectKeyFromObject(f.deployment()), &d); err != nil {
				return false, err
			}
			return d.Status.ObservedGeneration == d.Generation && d.Status.ReadyReplicas == 1 &&
				d.Status.AvailableReplicas == 1, nil
		})
		var pods corev1.PodList
		if err := c.Client.List(ctx, &pods, client.InNamespace(f.ns), client.MatchingLabels{"app": "agent-a"}); err != nil {
			t.Fatal(err)
		}
		if len(pods.Items) != 1 || pods.Items[0].Status.Phase != corev1.PodRunning || pods.Items[0].Spec.NodeName == "" {
			t.Fatalf("want one Running pod on a node, got %+v", pods.Items)
		}
		t.Logf("pod %s Running on %s with IP %s", pods.Items[0].Name, pods.Items[0].Spec.NodeName, pods.Items[0].Status.PodIP)
	})
}

// render marshals obj as YAML with its apiVersion and kind, as a manifest for egctl. It leaves out
// status and the null creationTimestamp of a fresh object: egctl validates its input against the CRD
// schemas, and `status: {parents: null}` is not a valid HTTPRoute.
func render(t *testing.T, c client.Client, obj client.Object) []byte {
	t.Helper()
	gvk, err := apiutil.GVKForObject(obj, c.Scheme())
	if err != nil {
		t.Fatal(err)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		t.Fatal(err)
	}
	u := &unstructured.Unstructured{Object: m}
	u.SetGroupVersionKind(gvk)
	delete(u.Object, "status")
	unstructured.RemoveNestedField(u.Object, "metadata", "creationTimestamp")
	b, err := yaml.Marshal(u.Object)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func conditions(cs []metav1.Condition) string {
	var b strings.Builder
	for i, c := range cs {
		if i > 0 {
			b.WriteString(", ")
		}
		b.WriteString(c.Type + "=" + string(c.Status))
		if c.Reason != "" {
			b.WriteString(" (" + c.Reason + ")")
		}
	}
	return b.String()
}
