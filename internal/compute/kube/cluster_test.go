package kube

// Tests against the real API server of the Kubernetes test environment
// (scripts/testenv/k8s.sh): kube-apiserver with the Gateway API, Envoy
// Gateway and cert-manager CRDs, kube-controller-manager, kube-scheduler,
// a kwok node and the real Envoy Gateway controller. kubeenv.Env skips
// them without the environment, or fails them under CI=true.

import (
	"fmt"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/openclaw/occ/internal/compute"
	kubeenv "github.com/openclaw/occ/internal/testenv/kube"
)

// TestApplyEveryObject applies every object the driver renders, and the
// Helm chart's routing objects it attaches to, with server-side apply
// (not a dry run), so the real built-in validation and the real CRD
// schemas (Gateway API v1.6.3, Envoy Gateway v1.9.1, cert-manager
// v1.21.2) judge them, and reads each back.
func TestApplyEveryObject(t *testing.T) {
	env := kubeenv.Env(t)
	ctx := testCtx(t, 2*time.Minute)
	in := newInstallation(t, env, "occt-unused", true) // applies the chart's routing objects
	d := newDriver(t, env, in.cfg)
	f := newFixture()
	namespace, policies := RenderNamespace(d.cfg, f.ns)
	t.Cleanup(func() {
		if err := d.DeleteNamespace(cleanupCtx(t), f.ns); err != nil {
			t.Errorf("cleanup: DeleteNamespace: %v", err)
		}
	})
	objs, err := Render(d.cfg, f.revision(1, `{"logging":{"level":"info"}}`), f.pendingSetup())
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	all := []client.Object{namespace}
	for _, p := range policies {
		all = append(all, p)
	}
	all = append(all, objs.ConfigMap, objs.StatePVC, objs.SetupSecret, objs.Deployment, objs.Service, objs.HTTPRoute)
	all = append(all, in.routing...)
	for _, obj := range all {
		if err := d.apply(ctx, obj, ""); err != nil {
			t.Fatalf("server-side apply: %v", err)
		}
		kind := obj.GetObjectKind().GroupVersionKind()
		m, err := d.getMeta(ctx, kind, obj.GetNamespace(), obj.GetName())
		if err != nil || m == nil {
			t.Fatalf("read back %s %s/%s: %v (found %t)", kind.Kind, obj.GetNamespace(), obj.GetName(), err, m != nil)
		}
		if !slices.ContainsFunc(m.ManagedFields, func(e metav1.ManagedFieldsEntry) bool {
			return e.Manager == FieldOwner && e.Operation == metav1.ManagedFieldsOperationApply
		}) {
			t.Errorf("%s %s: no server-side-apply field manager %q in %v", kind.Kind, obj.GetName(), FieldOwner, m.ManagedFields)
		}
	}

	// Applying again changes nothing: the rendering is stable and the
	// apply configuration holds no server-defaulted fields.
	for _, obj := range []client.Object{objs.Deployment, objs.HTTPRoute, objs.Service} {
		kind := obj.GetObjectKind().GroupVersionKind()
		before, _ := d.getMeta(ctx, kind, obj.GetNamespace(), obj.GetName())
		if err := d.apply(ctx, obj, ""); err != nil {
			t.Fatalf("second apply: %v", err)
		}
		after, _ := d.getMeta(ctx, kind, obj.GetNamespace(), obj.GetName())
		if before.Generation != after.Generation {
			t.Errorf("%s %s: the same apply raised the generation from %d to %d", kind.Kind, obj.GetName(), before.Generation, after.Generation)
		}
	}

	// The schemas are real: a route rule the Gateway API forbids is refused.
	bad := objs.HTTPRoute.DeepCopy()
	bad.Name = "invalid-rewrite"
	bad.Spec.Rules[0].Filters[0].URLRewrite.Path = &gwv1.HTTPPathModifier{Type: gwv1.PrefixMatchHTTPPathModifier}
	if err := d.apply(ctx, bad, ""); !apierrors.IsInvalid(err) {
		t.Errorf("applying an HTTPRoute with a prefix rewrite without a prefix: got %v, want Invalid", err)
	}

	// The immutable ConfigMap refuses a change.
	changed := objs.ConfigMap.DeepCopy()
	changed.Data[ConfigKey] = "{}"
	if err := d.apply(ctx, changed, ""); !apierrors.IsInvalid(err) {
		t.Errorf("changing the immutable ConfigMap: got %v, want Invalid", err)
	}

	// The restricted Pod Security Standard the namespace enforces admits
	// the gateway Pod template (a Pod with the template's spec).
	pod := &corev1.Pod{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "pod-security-probe", Namespace: namespace.Name, Labels: map[string]string{"probe": "1"}},
		Spec:       objs.Deployment.Spec.Template.Spec,
	}
	if err := env.Client.Create(ctx, pod, client.DryRunAll); err != nil {
		t.Errorf("a Pod with the gateway template's spec in a restricted namespace: %v", err)
	}
	// ... and the namespace really enforces it.
	pod.Spec.Containers[0].SecurityContext = &corev1.SecurityContext{Privileged: ptr.To(true)}
	if err := env.Client.Create(ctx, pod, client.DryRunAll); !apierrors.IsForbidden(err) {
		t.Errorf("a privileged Pod in the tenant namespace: %v, want Forbidden by Pod Security admission", err)
	}
}

// TestDeployLifecycle drives one Agent through the driver on the real
// cluster: the namespace, a deployment that reaches Ready on kwok, the
// route that the real Envoy Gateway accepts, a second revision taking
// over, retirement of the first (the newer route and Deployment stay), an
// abandoned third revision handing the gateway back, a delete refused by a
// stale UID, and DeleteAgent leaving nothing behind.
func TestDeployLifecycle(t *testing.T) {
	env := kubeenv.Env(t)
	ctx := testCtx(t, 5*time.Minute)
	sc := env.NewStorage(t, 1)
	in := newInstallation(t, env, sc, true)
	d := newDriver(t, env, in.cfg)
	f := newFixture()
	tenant := TenantNamespace(f.ns.ID)
	name := GatewayName(f.agent.ID)
	t.Cleanup(func() {
		if err := d.DeleteNamespace(cleanupCtx(t), f.ns); err != nil {
			t.Errorf("cleanup: DeleteNamespace: %v", err)
		}
	})

	if err := d.EnsureNamespace(ctx, f.ns); err != nil {
		t.Fatalf("EnsureNamespace: %v", err)
	}
	var ns corev1.Namespace
	if err := env.Client.Get(ctx, client.ObjectKey{Name: tenant}, &ns); err != nil {
		t.Fatal(err)
	}
	if got, want := ns.Labels[LabelRouteAttachment], in.cfg.GatewayRouting.RouteLabel(); got != want {
		t.Errorf("tenant namespace label %s = %q, want %q", LabelRouteAttachment, got, want)
	}
	var policies networkingv1.NetworkPolicyList
	if err := env.Client.List(ctx, &policies, client.InNamespace(tenant)); err != nil {
		t.Fatal(err)
	}
	var policyNames []string
	for _, p := range policies.Items {
		policyNames = append(policyNames, p.Name)
	}
	slices.Sort(policyNames)
	if diff := cmp.Diff([]string{PolicyAllowDNS, PolicyGatewayIngress, PolicyModelEgress, PolicyDefaultDeny}, policyNames); diff != "" {
		t.Errorf("NetworkPolicies in %s (-want +got):\n%s", tenant, diff)
	}
	// The model egress leaves out the configured ranges, as the real API
	// server stored them.
	var egress networkingv1.NetworkPolicy
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: PolicyModelEgress}, &egress); err != nil {
		t.Fatal(err)
	}
	var except []string
	for _, rule := range egress.Spec.Egress {
		for _, peer := range rule.To {
			if peer.IPBlock != nil {
				except = append(except, peer.IPBlock.Except...)
			}
		}
	}
	for _, want := range in.cfg.Network.ModelEgressExcept {
		if !slices.Contains(except, want) {
			t.Errorf("%s leaves out %v; want %s among them", PolicyModelEgress, except, want)
		}
	}

	setup := f.pendingSetup()
	rc := compute.RevisionContext{WorkspaceSetup: setup}
	rev1 := f.revision(1, `{}`)
	var route gwv1.HTTPRoute
	t.Run("first revision reaches Ready and Envoy Gateway accepts its route", func(t *testing.T) {
		prepareReady(t, ctx, d, rev1, rc)
		if err := d.ActivateRevision(ctx, rev1, rc); err != nil {
			t.Fatalf("ActivateRevision: %v", err)
		}
		start := time.Now()
		var last []metav1.Condition
		kubeenv.WaitFor(t, ctx, func() (bool, error) {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: name}, &route); err != nil {
				return false, err
			}
			last = routeConditions(&route)
			return conditionsTrue(last, string(gwv1.RouteConditionAccepted), string(gwv1.RouteConditionResolvedRefs)), nil
		})
		t.Logf("HTTPRoute Accepted and ResolvedRefs after %v: %v", time.Since(start).Round(time.Millisecond), last)
		ep, err := d.Endpoint(ctx, rev1)
		if err != nil {
			t.Fatal(err)
		}
		want := compute.Endpoint{URL: "wss://" + in.cfg.GatewayRouting.Host() + AgentPath(f.ns.ID, f.agent.ID), Transport: compute.Routed}
		if diff := cmp.Diff(want, ep); diff != "" {
			t.Errorf("Endpoint (-want +got):\n%s", diff)
		}
		if ok, err := d.Serving(ctx, rev1); err != nil || !ok {
			t.Errorf("Serving(#1) = %t, %v; want true", ok, err)
		}
		// Activation replaced the delivered files by the identity.
		var secret corev1.Secret
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: SetupSecretName(f.agent.ID)}, &secret); err != nil {
			t.Fatal(err)
		}
		if strings.Contains(string(secret.Data[SetupPayloadKey]), "files") || !strings.Contains(string(secret.Data[SetupPayloadKey]), `"completed":true`) {
			t.Errorf("after activation the setup payload still holds files or is not completed: %s", secret.Data[SetupPayloadKey])
		}
	})

	completed := setup.WithoutFiles()
	completed.Completed = true
	rc2 := compute.RevisionContext{WorkspaceSetup: &completed}
	rev2 := f.revision(2, `{"logging":{"level":"debug"}}`)
	t.Run("retiring the older revision leaves the newer one's route and Deployment", func(t *testing.T) {
		prepareReady(t, ctx, d, rev2, rc2)
		if err := d.ActivateRevision(ctx, rev2, rc2); err != nil {
			t.Fatalf("ActivateRevision(#2): %v", err)
		}
		if ok, _ := d.Serving(ctx, rev1); ok {
			t.Errorf("revision #1 still serving after #2 was activated")
		}
		if err := d.StopRevision(ctx, rev1); err != nil {
			t.Fatalf("StopRevision(#1): %v", err)
		}
		if err := d.RetireRevision(ctx, rev1); err != nil {
			t.Fatalf("RetireRevision(#1): %v", err)
		}
		for _, gvk := range []schemaGVK{gvkHTTPRoute, gvkService, gvkDeployment} {
			m, err := d.getMeta(ctx, gvk, tenant, name)
			if err != nil || m == nil {
				t.Fatalf("%s %s after retiring #1: %v (exists %t)", gvk.Kind, name, err, m != nil)
			}
			if got := m.Annotations[AnnotationAgentRevisionID]; got != rev2.ID {
				t.Errorf("%s owned by %q after retiring #1, want #2 %s", gvk.Kind, got, rev2.ID)
			}
		}
		if m, _ := d.getMeta(ctx, gvkConfigMap, tenant, ConfigMapName(f.agent.ID, rev1.ID)); m != nil {
			t.Errorf("ConfigMap of retired #1 still exists")
		}
		if ok, err := d.Serving(ctx, rev2); err != nil || !ok {
			t.Errorf("Serving(#2) after retiring #1 = %t, %v; want true", ok, err)
		}
		// A stale revision can no longer take the gateway back.
		_, err := d.PrepareRevision(ctx, rev1, rc)
		if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeRuntimeFailed {
			t.Errorf("PrepareRevision(#1) after #2 took over: %v, want permanent %s", err, compute.CodeRuntimeFailed)
		}
	})

	t.Run("retiring an abandoned newer revision hands the gateway back", func(t *testing.T) {
		rev3 := f.revision(3, `{}`)
		if _, err := d.PrepareRevision(ctx, rev3, rc2); err != nil {
			t.Fatalf("PrepareRevision(#3): %v", err)
		}
		if m, _ := d.getMeta(ctx, gvkDeployment, tenant, name); m == nil || m.Annotations[AnnotationAgentRevisionID] != rev3.ID {
			t.Fatalf("the Deployment does not run #3 after preparing it")
		}
		if err := d.RetireRevision(ctx, rev3); err != nil {
			t.Fatalf("RetireRevision(#3): %v", err)
		}
		prepareReady(t, ctx, d, rev2, rc2) // ready again without a new apply of #2's template being needed
		if ok, err := d.Serving(ctx, rev2); err != nil || !ok {
			t.Errorf("Serving(#2) after retiring the abandoned #3 = %t, %v; want true", ok, err)
		}
	})

	t.Run("a delete with a stale UID is refused", func(t *testing.T) {
		m, err := d.getMeta(ctx, gvkHTTPRoute, tenant, name)
		if err != nil || m == nil {
			t.Fatalf("read the route: %v", err)
		}
		stale := m.DeepCopy()
		stale.UID = types.UID("00000000-0000-4000-8000-000000000000")
		err = d.deleteObserved(ctx, stale)
		if !apierrors.IsConflict(err) {
			t.Fatalf("delete with a stale UID: %v, want Conflict", err)
		}
		t.Logf("refused as it should be: %v", err)
		stale = m.DeepCopy()
		stale.ResourceVersion = "1"
		if err := d.deleteObserved(ctx, stale); !apierrors.IsConflict(err) {
			t.Fatalf("delete with a stale resourceVersion: %v, want Conflict", err)
		}
		if after, _ := d.getMeta(ctx, gvkHTTPRoute, tenant, name); after == nil || after.UID != m.UID {
			t.Fatalf("the route is gone or replaced after refused deletes")
		}
	})

	t.Run("DeleteAgent leaves no object behind", func(t *testing.T) {
		if err := d.RetireRevision(ctx, rev2); err != nil {
			t.Fatalf("RetireRevision(#2): %v", err)
		}
		if err := d.DeleteAgent(ctx, f.agent); err != nil {
			t.Fatalf("DeleteAgent: %v", err)
		}
		selector := client.MatchingLabels{LabelAgent: f.agent.ID}
		lists := map[string]client.ObjectList{
			"Deployment": &appsv1.DeploymentList{}, "ReplicaSet": &appsv1.ReplicaSetList{}, "Pod": &corev1.PodList{},
			"Service": &corev1.ServiceList{}, "ConfigMap": &corev1.ConfigMapList{}, "Secret": &corev1.SecretList{},
			"PersistentVolumeClaim": &corev1.PersistentVolumeClaimList{}, "HTTPRoute": &gwv1.HTTPRouteList{},
		}
		start := time.Now()
		var left []string
		kubeenv.WaitFor(t, ctx, func() (bool, error) {
			left = nil
			for kind, list := range lists {
				if err := env.Client.List(ctx, list, client.InNamespace(tenant), selector); err != nil {
					return false, err
				}
				items, err := meta.ExtractList(list)
				if err != nil {
					return false, err
				}
				if n := len(items); n > 0 {
					left = append(left, fmt.Sprintf("%d %s", n, kind))
				}
			}
			return len(left) == 0, nil
		})
		t.Logf("no object of the Agent left after %v", time.Since(start).Round(time.Millisecond))
		if err := d.DeleteAgent(ctx, f.agent); err != nil {
			t.Errorf("second DeleteAgent: %v", err)
		}
	})

	t.Run("DeleteNamespace", func(t *testing.T) {
		if err := d.DeleteNamespace(ctx, f.ns); err != nil {
			t.Fatalf("DeleteNamespace: %v", err)
		}
		kubeenv.WaitFor(t, ctx, func() (bool, error) {
			m, err := d.getMeta(ctx, gvkNamespace, "", tenant)
			return m == nil, err
		})
	})
}
