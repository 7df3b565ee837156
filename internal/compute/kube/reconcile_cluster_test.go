package kube

import (
	"context"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/ids"
	kubeenv "github.com/openclaw/occ/internal/testenv/kube"
	"github.com/openclaw/occ/internal/testutil"
)

// unroutedConfig is cfg as it was before routing was configured.
func unroutedConfig(cfg Config) Config {
	cfg.GatewayRouting = nil
	cfg.Network.GatewayTrustedProxyCIDRs = nil
	cfg.Network.GatewayClients = []string{"10.0.0.0/8"}
	return cfg
}

// versions reads the resourceVersion of the tenant namespace and of every
// object in it that a reconciliation could touch or must not.
func versions(t *testing.T, ctx context.Context, env *kubeenv.Cluster, tenant string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var ns corev1.Namespace
	if err := env.Client.Get(ctx, client.ObjectKey{Name: tenant}, &ns); err != nil {
		t.Fatal(err)
	}
	out["Namespace/"+tenant] = ns.ResourceVersion
	lists := map[string]client.ObjectList{
		"NetworkPolicy": &networkingv1.NetworkPolicyList{}, "PersistentVolumeClaim": &corev1.PersistentVolumeClaimList{},
		"ConfigMap": &corev1.ConfigMapList{}, "Service": &corev1.ServiceList{},
	}
	for kind, l := range lists {
		if err := env.Client.List(ctx, l, client.InNamespace(tenant)); err != nil {
			t.Fatal(err)
		}
		switch l := l.(type) {
		case *networkingv1.NetworkPolicyList:
			for _, o := range l.Items {
				out[kind+"/"+o.Name] = o.ResourceVersion
			}
		case *corev1.PersistentVolumeClaimList:
			for _, o := range l.Items {
				out[kind+"/"+o.Name] = o.ResourceVersion
			}
		case *corev1.ConfigMapList:
			for _, o := range l.Items {
				out[kind+"/"+o.Name] = o.ResourceVersion
			}
		case *corev1.ServiceList:
			for _, o := range l.Items {
				out[kind+"/"+o.Name] = o.ResourceVersion
			}
		}
	}
	return out
}

// TestReconcileNamespaceEnablesRouting: a Namespace and Agent made while
// routing was off; routing configured; PlanNamespace changes nothing;
// each refusal changes nothing; a concurrent change is not overwritten;
// ReconcileNamespace adds the label and the Envoy-only policy; the Agent's
// next revision gets an HTTPRoute Envoy Gateway accepts, on the same PVC.
func TestReconcileNamespaceEnablesRouting(t *testing.T) {
	env := kubeenv.Env(t)
	ctx := testCtx(t, 5*time.Minute)
	sc := env.NewStorage(t, 1)
	in := newInstallation(t, env, sc, true)
	off := newDriver(t, env, unroutedConfig(in.cfg))
	on := newDriver(t, env, in.cfg)
	f := newFixture()
	tenant := TenantNamespace(f.ns.ID)
	t.Cleanup(func() {
		if err := on.DeleteNamespace(cleanupCtx(t), f.ns); err != nil {
			t.Errorf("cleanup: DeleteNamespace: %v", err)
		}
	})
	if err := off.EnsureNamespace(ctx, f.ns); err != nil {
		t.Fatalf("EnsureNamespace without routing: %v", err)
	}
	rev1 := f.revision(1, `{}`)
	prepareReady(t, ctx, off, rev1, compute.RevisionContext{})
	if err := off.ActivateRevision(ctx, rev1, compute.RevisionContext{}); err != nil {
		t.Fatalf("ActivateRevision without routing: %v", err)
	}
	var pvc corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: StatePVCName(f.agent.ID)}, &pvc); err != nil {
		t.Fatal(err)
	}

	before := versions(t, ctx, env, tenant)
	plan, err := on.PlanNamespace(ctx, f.ns)
	if err != nil {
		t.Fatalf("PlanNamespace: %v", err)
	}
	got := map[string]string{}
	for _, c := range plan.Changes {
		got[c.Kind+"/"+c.Name] = c.Action
	}
	want := map[string]string{"Namespace/" + tenant: compute.ActionUpdate, "NetworkPolicy/" + PolicyGatewayIngress: compute.ActionUpdate,
		"NetworkPolicy/" + PolicyDefaultDeny: compute.ActionUnchanged, "NetworkPolicy/" + PolicyAllowDNS: compute.ActionUnchanged,
		"NetworkPolicy/" + PolicyModelEgress: compute.ActionUnchanged}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("plan (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(before, versions(t, ctx, env, tenant)); diff != "" {
		t.Fatalf("PlanNamespace changed objects (resourceVersions -before +after):\n%s", diff)
	}

	refuse := func(t *testing.T, ns compute.Namespace, code string) {
		t.Helper()
		before := versions(t, ctx, env, TenantNamespace(ns.ID))
		_, err := on.ReconcileNamespace(ctx, ns)
		p, ok := compute.AsPermanent(err)
		if !ok || p.Code != code || p.Public == "" {
			t.Fatalf("ReconcileNamespace = %v, want a refusal %s with a public message", err, code)
		}
		t.Logf("refused: %s", p.Public)
		if diff := cmp.Diff(before, versions(t, ctx, env, TenantNamespace(ns.ID))); diff != "" {
			t.Errorf("a refused reconciliation changed objects (-before +after):\n%s", diff)
		}
	}
	t.Run("an extra permissive NetworkPolicy is refused by name", func(t *testing.T) {
		extra := &networkingv1.NetworkPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: "allow-office", Namespace: tenant},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelWorkloadRole: WorkloadRoleGateway}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16"}}}}},
			},
		}
		if err := env.Client.Create(ctx, extra); err != nil {
			t.Fatal(err)
		}
		refuse(t, f.ns, compute.CodePermissivePolicy)
		if err := env.Client.Delete(ctx, extra); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a changed gateway Pod selector is refused", func(t *testing.T) {
		var p networkingv1.NetworkPolicy
		key := client.ObjectKey{Namespace: tenant, Name: PolicyGatewayIngress}
		if err := env.Client.Get(ctx, key, &p); err != nil {
			t.Fatal(err)
		}
		orig := p.Spec.PodSelector
		p.Spec.PodSelector = metav1.LabelSelector{}
		if err := env.Client.Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
		refuse(t, f.ns, compute.CodeGatewaySelectorChanged)
		p.Spec.PodSelector = orig
		if err := env.Client.Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a policy without OCC's annotation is refused", func(t *testing.T) {
		var p networkingv1.NetworkPolicy
		key := client.ObjectKey{Namespace: tenant, Name: PolicyDefaultDeny}
		if err := env.Client.Get(ctx, key, &p); err != nil {
			t.Fatal(err)
		}
		orig := p.Annotations[AnnotationNamespaceID]
		delete(p.Annotations, AnnotationNamespaceID)
		if err := env.Client.Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
		refuse(t, f.ns, compute.CodeNamespaceNotOwned)
		if err := env.Client.Get(ctx, key, &p); err != nil {
			t.Fatal(err)
		}
		if p.Annotations == nil {
			p.Annotations = map[string]string{}
		}
		p.Annotations[AnnotationNamespaceID] = orig
		if err := env.Client.Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a foreign namespace is refused", func(t *testing.T) {
		foreign := compute.Namespace{ID: ids.New(ids.Namespace), Name: "foreign"}
		ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: TenantNamespace(foreign.ID), Labels: map[string]string{LabelNamespace: foreign.ID}}}
		if err := env.Client.Create(ctx, ns); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteCluster(t, env, ns) })
		// The controller manager publishes kube-root-ca.crt into every new
		// namespace on its own schedule; wait for it, or it may appear
		// between refuse's two snapshots (seen once in CI).
		rootCA := client.ObjectKey{Namespace: ns.Name, Name: "kube-root-ca.crt"}
		testutil.Eventually(t, 30*time.Second, func() bool {
			return env.Client.Get(ctx, rootCA, &corev1.ConfigMap{}) == nil
		}, "kube-root-ca.crt in %s", ns.Name)
		refuse(t, foreign, compute.CodeNamespaceNotOwned)
	})
	t.Run("a concurrent change is not overwritten", func(t *testing.T) {
		conc := newDriver(t, env, in.cfg)
		conc.beforeWrite = func() {
			var p networkingv1.NetworkPolicy
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: PolicyGatewayIngress}, &p); err != nil {
				t.Error(err)
				return
			}
			if p.Annotations == nil {
				p.Annotations = map[string]string{}
			}
			p.Annotations["example.com/reviewed"] = "true"
			if err := env.Client.Update(ctx, &p); err != nil {
				t.Error(err)
			}
		}
		_, err := conc.ReconcileNamespace(ctx, f.ns)
		if _, permanent := compute.AsPermanent(err); err == nil || permanent {
			t.Fatalf("ReconcileNamespace with a concurrent change = %v, want a retryable error", err)
		}
		t.Logf("conflict: %v", err)
		var ns corev1.Namespace
		if err := env.Client.Get(ctx, client.ObjectKey{Name: tenant}, &ns); err != nil {
			t.Fatal(err)
		}
		if _, ok := ns.Labels[LabelRouteAttachment]; ok {
			t.Errorf("the namespace got the route label although the policy write conflicted")
		}
		var p networkingv1.NetworkPolicy
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: PolicyGatewayIngress}, &p); err != nil {
			t.Fatal(err)
		}
		if p.Spec.Ingress[0].From[0].IPBlock == nil {
			t.Errorf("the conflicting write replaced the policy's ingress")
		}
	})

	if _, err := on.ReconcileNamespace(ctx, f.ns); err != nil {
		t.Fatalf("ReconcileNamespace: %v", err)
	}
	var ns corev1.Namespace
	if err := env.Client.Get(ctx, client.ObjectKey{Name: tenant}, &ns); err != nil {
		t.Fatal(err)
	}
	if got, want := ns.Labels[LabelRouteAttachment], in.cfg.GatewayRouting.RouteLabel(); got != want {
		t.Errorf("route label = %q, want %q", got, want)
	}
	var p networkingv1.NetworkPolicy
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: PolicyGatewayIngress}, &p); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]networkingv1.NetworkPolicyPeer{*RenderNamespaceEnvoyPeer(in.cfg)}, p.Spec.Ingress[0].From); diff != "" {
		t.Errorf("allow-gateway-ingress peers (-want +got):\n%s", diff)
	}
	if p.Annotations["example.com/reviewed"] != "true" {
		t.Errorf("the reconciliation dropped another manager's annotation")
	}
	if plan, err := on.PlanNamespace(ctx, f.ns); err != nil || plan.Changed() {
		t.Errorf("PlanNamespace after the reconciliation = %+v, %v; want nothing to change", plan, err)
	}

	rev2 := f.revision(2, `{}`)
	prepareReady(t, ctx, on, rev2, compute.RevisionContext{})
	if err := on.ActivateRevision(ctx, rev2, compute.RevisionContext{}); err != nil {
		t.Fatalf("ActivateRevision with routing: %v", err)
	}
	var route gwv1.HTTPRoute
	kubeenv.WaitFor(t, ctx, func() (bool, error) {
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: GatewayName(f.agent.ID)}, &route); err != nil {
			return false, client.IgnoreNotFound(err)
		}
		return conditionsTrue(routeConditions(&route), "Accepted", "ResolvedRefs"), nil
	})
	var pvc2 corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: StatePVCName(f.agent.ID)}, &pvc2); err != nil {
		t.Fatal(err)
	}
	if pvc2.UID != pvc.UID {
		t.Errorf("the Agent's PVC was replaced: UID %s, was %s", pvc2.UID, pvc.UID)
	}
}
