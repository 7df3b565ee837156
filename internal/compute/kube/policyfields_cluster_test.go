package kube

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openclaw/occ/internal/compute"
	kubeenv "github.com/openclaw/occ/internal/testenv/kube"
)

// TestReconcileNamespaceRemovesForeignPolicyFields: fields another field
// manager added to OCC's own NetworkPolicies (a kubectl edit or patch)
// are not OCC's under server-side apply, so an apply alone keeps them;
// an ingress: [{}] on default-deny admits every source to the gateway
// Pods. ReconcileNamespace must bring each of the four policies back to
// exactly its rendered spec (keeping the other manager's annotation), and
// PlanNamespace must then have nothing left to change, also after OCC's
// next apply. (Rules added to a list OCC sets, allow-dns's egress, and a
// changed podSelector are OCC's under apply already: atomic fields.)
func TestReconcileNamespaceRemovesForeignPolicyFields(t *testing.T) {
	env := kubeenv.Env(t)
	ctx := testCtx(t, 3*time.Minute)
	// The chart grants the driver no update verb (rbac.yaml): get, list,
	// create, patch and delete.
	d, err := New(baseConfig(env.NewNamespace(t), "occt-unused"), noUpdateClient{env.Client}, Options{CallTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	// The rendered specs do not depend on the Namespace's id.
	_, rendered := RenderNamespace(d.cfg, newFixture().ns)
	want := map[string]networkingv1.NetworkPolicySpec{}
	for _, p := range rendered {
		want[p.Name] = p.Spec
	}

	for _, tc := range []struct {
		name, policy string
		// patch is a JSON merge patch another field manager sends.
		patch string
	}{
		{"default-deny gets an ingress rule from everywhere", PolicyDefaultDeny,
			`{"spec":{"ingress":[{}]}}`},
		{"default-deny gets an egress rule to everywhere", PolicyDefaultDeny,
			`{"spec":{"egress":[{}]}}`},
		{"default-deny selects only some Pods", PolicyDefaultDeny,
			`{"spec":{"podSelector":{"matchExpressions":[{"key":"example.com/x","operator":"Exists"}]}}}`},
		{"allow-dns gets a second egress rule to everywhere", PolicyAllowDNS,
			`{"spec":{"egress":[` + mustJSON(t, want[PolicyAllowDNS].Egress[0]) + `,{}]}}`},
		{"allow-dns gets an ingress rule and type", PolicyAllowDNS,
			`{"spec":{"policyTypes":["Egress","Ingress"],"ingress":[{}]}}`},
		{"allow-gateway-ingress gets a second rule from everywhere", PolicyGatewayIngress,
			`{"spec":{"ingress":[` + mustJSON(t, want[PolicyGatewayIngress].Ingress[0]) + `,{}]}}`},
		{"allow-gateway-ingress gets an egress rule", PolicyGatewayIngress,
			`{"spec":{"egress":[{}]}}`},
		{"allow-model-egress gets an ingress rule", PolicyModelEgress,
			`{"spec":{"ingress":[{}]}}`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A namespace per case, so that each starts from OCC's policies.
			f := newFixture()
			t.Cleanup(func() {
				if err := d.DeleteNamespace(cleanupCtx(t), f.ns); err != nil {
					t.Errorf("cleanup: DeleteNamespace: %v", err)
				}
			})
			if err := d.EnsureNamespace(ctx, f.ns); err != nil {
				t.Fatalf("EnsureNamespace: %v", err)
			}
			key := client.ObjectKey{Namespace: TenantNamespace(f.ns.ID), Name: tc.policy}
			p := &networkingv1.NetworkPolicy{}
			p.Namespace, p.Name = key.Namespace, key.Name
			patch := `{"metadata":{"annotations":{"example.com/reviewed":"true"}},` + tc.patch[1:]
			if err := env.Client.Patch(ctx, p, client.RawPatch("application/merge-patch+json", []byte(patch)), client.FieldOwner("kubectl-edit")); err != nil {
				t.Fatalf("foreign patch %s: %v", patch, err)
			}
			if equality.Semantic.DeepEqual(want[tc.policy], p.Spec) {
				t.Fatalf("the foreign patch %s changed nothing of %s's spec", tc.patch, tc.policy)
			}
			if _, err := d.ReconcileNamespace(ctx, f.ns); err != nil {
				t.Fatalf("ReconcileNamespace after %s: %v", tc.patch, err)
			}
			var got networkingv1.NetworkPolicy
			if err := env.Client.Get(ctx, key, &got); err != nil {
				t.Fatal(err)
			}
			if !equality.Semantic.DeepEqual(want[tc.policy], got.Spec) {
				t.Errorf("ReconcileNamespace after the foreign patch %s left %s's spec (-rendered +live):\n%s",
					tc.patch, tc.policy, cmp.Diff(want[tc.policy], got.Spec))
			}
			if got.Annotations["example.com/reviewed"] != "true" {
				t.Errorf("ReconcileNamespace dropped the other manager's annotation of %s: %v", tc.policy, got.Annotations)
			}
			// OCC's next apply (EnsureNamespace) agrees with the update.
			if err := d.EnsureNamespace(ctx, f.ns); err != nil {
				t.Fatalf("EnsureNamespace after ReconcileNamespace: %v", err)
			}
			plan, err := d.PlanNamespace(ctx, f.ns)
			if err != nil {
				t.Fatalf("PlanNamespace after ReconcileNamespace: %v", err)
			}
			for _, c := range plan.Changes {
				if c.Action != compute.ActionUnchanged {
					t.Errorf("PlanNamespace after ReconcileNamespace: %s %s: %s %v; want unchanged", c.Kind, c.Name, c.Action, c.Fields)
				}
			}
		})
	}
}

func mustJSON(t *testing.T, v any) string {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

// noUpdateClient refuses updates, as the chart's RBAC does.
type noUpdateClient struct{ client.Client }

func (noUpdateClient) Update(_ context.Context, obj client.Object, _ ...client.UpdateOption) error {
	return apierrors.NewForbidden(schema.GroupResource{Resource: fmt.Sprintf("%T", obj)}, obj.GetName(), errors.New("the chart grants no update"))
}
