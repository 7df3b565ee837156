package kube

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openclaw/occ/internal/compute"
	kubeenv "github.com/openclaw/occ/internal/testenv/kube"
)

// TestTenantAccessRoleRenamed: the tenant ClusterRole is renamed (a chart
// upgrade past its 55-character names does that) while the tenant
// namespace's RoleBinding occ-worker still binds the old one, and a
// roleRef cannot change. EnsureNamespace, ReconcileNamespace and every
// verb on an Agent delete OCC's binding on the UID and resourceVersion
// they read and create it for the new role; a binding changed in between,
// or one that is not OCC's, is left as it is.
func TestTenantAccessRoleRenamed(t *testing.T) {
	env := kubeenv.Env(t)
	ctx := testCtx(t, 2*time.Minute)
	withRole := func(role string) *Driver {
		cfg := baseConfig("unused", "")
		cfg.GatewayRouting = nil
		cfg.Network = Network{GatewayClients: []string{"10.0.0.0/8"}}
		cfg.TenantAccess = &TenantAccess{ClusterRole: role, ServiceAccountName: "occ-worker", ServiceAccountNamespace: "occt-release"}
		return newDriver(t, env, cfg)
	}
	old := withRole(kubeenv.RandomName("occt-old-tenant"))
	f := newFixture()
	t.Cleanup(func() {
		if err := old.DeleteNamespace(cleanupCtx(t), f.ns); err != nil {
			t.Errorf("cleanup: DeleteNamespace: %v", err)
		}
	})
	if err := old.EnsureNamespace(ctx, f.ns); err != nil {
		t.Fatalf("EnsureNamespace: %v", err)
	}
	key := client.ObjectKey{Namespace: TenantNamespace(f.ns.ID), Name: TenantAccessBinding}
	read := func(t *testing.T) *rbacv1.RoleBinding {
		t.Helper()
		var rb rbacv1.RoleBinding
		if err := env.Client.Get(ctx, key, &rb); err != nil {
			t.Fatalf("read the RoleBinding: %v", err)
		}
		return &rb
	}
	// isRendered: rb is what d renders, labels, annotation and all.
	isRendered := func(t *testing.T, d *Driver, rb *rbacv1.RoleBinding) {
		t.Helper()
		want := RenderTenantAccess(d.cfg, f.ns)
		got := want.DeepCopy()
		got.Labels, got.Annotations, got.RoleRef, got.Subjects = rb.Labels, rb.Annotations, rb.RoleRef, rb.Subjects
		if diff := cmp.Diff(want, got, cmpopts.EquateEmpty()); diff != "" {
			t.Errorf("RoleBinding %s (-want +got):\n%s", key, diff)
		}
	}
	unchanged := func(t *testing.T, before *rbacv1.RoleBinding) {
		t.Helper()
		after := read(t)
		if after.UID != before.UID || after.ResourceVersion != before.ResourceVersion || after.RoleRef != before.RoleRef {
			t.Errorf("RoleBinding %s changed: UID %s, resourceVersion %s, role %s; was %s, %s, %s",
				key, after.UID, after.ResourceVersion, after.RoleRef.Name, before.UID, before.ResourceVersion, before.RoleRef.Name)
		}
	}

	t.Run("EnsureNamespace recreates OCC's binding for the new role", func(t *testing.T) {
		before := read(t)
		d := withRole(kubeenv.RandomName("occt-new-tenant"))
		if err := d.EnsureNamespace(ctx, f.ns); err != nil {
			t.Fatalf("EnsureNamespace after the role was renamed: %v", err)
		}
		after := read(t)
		isRendered(t, d, after)
		if after.UID == before.UID {
			t.Errorf("RoleBinding %s kept its UID %s: not recreated", key, after.UID)
		}
		// Once it binds the role, EnsureNamespace leaves it in place.
		if err := d.EnsureNamespace(ctx, f.ns); err != nil {
			t.Fatalf("EnsureNamespace again: %v", err)
		}
		if again := read(t); again.UID != after.UID {
			t.Errorf("a second EnsureNamespace recreated RoleBinding %s again", key)
		}
	})

	t.Run("each verb on an Agent recreates it first", func(t *testing.T) {
		rev := f.revision(1, `{}`)
		verbs := []struct {
			name string
			call func(d *Driver) error
		}{
			{"PrepareRevision", func(d *Driver) error {
				_, err := d.PrepareRevision(ctx, rev, compute.RevisionContext{})
				return err
			}},
			{"ActivateRevision", func(d *Driver) error { return d.ActivateRevision(ctx, rev, compute.RevisionContext{}) }},
			{"StopRevision", func(d *Driver) error { return d.StopRevision(ctx, rev) }},
			{"RetireRevision", func(d *Driver) error { return d.RetireRevision(ctx, rev) }},
			{"DeleteAgent", func(d *Driver) error { return d.DeleteAgent(ctx, f.agent) }},
		}
		for _, v := range verbs {
			before := read(t)
			d := withRole(kubeenv.RandomName("occt-tenant"))
			if err := v.call(d); err != nil {
				t.Fatalf("%s after the role was renamed: %v", v.name, err)
			}
			after := read(t)
			isRendered(t, d, after)
			if after.UID == before.UID {
				t.Errorf("%s: RoleBinding %s kept its UID %s: not recreated", v.name, key, after.UID)
			}
			// Of the right role, it is only read. (A second prepare may
			// meet the Deployment controller's status write: a conflict,
			// which the worker retries, and so does the test.)
			err := v.call(d)
			for i := 0; i < 5 && apierrors.IsConflict(err); i++ {
				err = v.call(d)
			}
			if err != nil {
				t.Fatalf("%s again: %v", v.name, err)
			}
			unchanged(t, after)
		}
	})

	t.Run("ReconcileNamespace plans and makes the same replacement", func(t *testing.T) {
		before := read(t)
		d := withRole(kubeenv.RandomName("occt-third-tenant"))
		plan, err := d.PlanNamespace(ctx, f.ns)
		if err != nil {
			t.Fatalf("PlanNamespace: %v", err)
		}
		i := slices.IndexFunc(plan.Changes, func(c compute.ObjectChange) bool { return c.Kind == "RoleBinding" })
		if i < 0 || plan.Changes[i].Action != compute.ActionUpdate || !slices.Contains(plan.Changes[i].Fields, "roleRef") {
			t.Fatalf("plan = %+v, want the RoleBinding updated in roleRef", plan.Changes)
		}
		unchanged(t, before)
		if _, err := d.ReconcileNamespace(ctx, f.ns); err != nil {
			t.Fatalf("ReconcileNamespace after the role was renamed: %v", err)
		}
		after := read(t)
		isRendered(t, d, after)
		if after.UID == before.UID {
			t.Errorf("RoleBinding %s kept its UID %s: not recreated", key, after.UID)
		}
		if plan, err := d.PlanNamespace(ctx, f.ns); err != nil || plan.Changed() {
			t.Errorf("PlanNamespace after the reconciliation = %+v, %v; want nothing to change", plan, err)
		}
	})

	t.Run("a binding changed since it was read is not deleted", func(t *testing.T) {
		d := withRole(kubeenv.RandomName("occt-fourth-tenant"))
		var before *rbacv1.RoleBinding
		d.beforeWrite = func() {
			rb := read(t)
			rb.Annotations["example.com/reviewed"] = "true"
			if err := env.Client.Update(ctx, rb); err != nil {
				t.Error(err)
			}
			before = rb
		}
		_, err := d.ReconcileNamespace(ctx, f.ns)
		if _, permanent := compute.AsPermanent(err); err == nil || permanent || !strings.Contains(err.Error(), "changed since it was read") {
			t.Fatalf("ReconcileNamespace with a concurrent change = %v, want a retryable conflict", err)
		}
		t.Logf("conflict: %v", err)
		unchanged(t, before)
	})

	t.Run("a binding that is not OCC's is left alone", func(t *testing.T) {
		rb := read(t)
		delete(rb.Annotations, AnnotationNamespaceID)
		if err := env.Client.Update(ctx, rb); err != nil {
			t.Fatal(err)
		}
		before := read(t)
		d := withRole(kubeenv.RandomName("occt-fifth-tenant"))
		err := d.EnsureNamespace(ctx, f.ns)
		if err == nil || !strings.Contains(err.Error(), "leaving it alone") {
			t.Fatalf("EnsureNamespace with a foreign RoleBinding of another role = %v, want an error that leaves it alone", err)
		}
		t.Logf("refused: %v", err)
		unchanged(t, before)
		if _, err := d.PrepareRevision(ctx, f.revision(2, `{}`), compute.RevisionContext{}); err == nil || !strings.Contains(err.Error(), "leaving it alone") {
			t.Fatalf("PrepareRevision with a foreign RoleBinding of another role = %v, want an error that leaves it alone", err)
		}
		unchanged(t, before)
		_, err = d.ReconcileNamespace(ctx, f.ns)
		if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeNamespaceNotOwned {
			t.Fatalf("ReconcileNamespace with a foreign RoleBinding = %v, want a refusal %s", err, compute.CodeNamespaceNotOwned)
		}
		unchanged(t, before)
	})
}
