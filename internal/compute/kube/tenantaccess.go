package kube

import (
	"context"
	"fmt"

	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openclaw/occ/internal/compute"
)

var gvkRoleBinding = rbacv1.SchemeGroupVersion.WithKind("RoleBinding")

// ensureTenantAccess makes rb, the RoleBinding of TenantAccess in the
// tenant namespace of the OCC Namespace nsID, bind the role it names. A
// RoleBinding's roleRef cannot change (the API server refuses the
// update), so one that binds another role, as after a chart upgrade
// renamed the tenant ClusterRole, is replaced (replaceRoleBinding), as
// kubectl auth reconcile does; one that is not OCC's is an error and
// stays. An absent binding, or one of the right role, is applied when
// apply is set and otherwise left as it is. A conflict means the binding
// changed or appeared since it was read: it is read and judged again.
func (d *Driver) ensureTenantAccess(ctx context.Context, rb *rbacv1.RoleBinding, nsID string, apply bool) error {
	for range maxDeleteAttempts {
		var live rbacv1.RoleBinding
		found, err := d.getTyped(ctx, client.ObjectKeyFromObject(rb), &live)
		if err != nil {
			return err
		}
		if !found || equality.Semantic.DeepEqual(live.RoleRef, rb.RoleRef) {
			if !apply {
				return nil
			}
			return d.apply(ctx, rb, "")
		}
		err = d.replaceRoleBinding(ctx, &live, rb, nsID)
		if !apierrors.IsConflict(err) && !apierrors.IsAlreadyExists(err) {
			return err
		}
	}
	return fmt.Errorf("kube: RoleBinding %s/%s changed on every attempt to replace it; will retry", rb.Namespace, rb.Name)
}

// repairTenantAccess replaces OCC's RoleBinding of TenantAccess in the
// tenant namespace of namespaceID when it binds another ClusterRole than
// the configuration names, and writes nothing otherwise (one read the
// first time for each namespace in this driver, none after it passed;
// none without TenantAccess). Every verb on an Agent runs it first: after
// the tenant ClusterRole was renamed the binding grants nothing, and the
// first work in the namespace restores the driver's permissions there.
func (d *Driver) repairTenantAccess(ctx context.Context, namespaceID string) error {
	rb := RenderTenantAccess(d.cfg, compute.Namespace{ID: namespaceID})
	if rb == nil {
		return nil
	}
	if _, ok := d.tenantChecked.Load(namespaceID); ok {
		return nil
	}
	if err := d.ensureTenantAccess(ctx, rb, namespaceID, false); err != nil {
		return err
	}
	d.tenantChecked.Store(namespaceID, struct{}{})
	return nil
}

// replaceRoleBinding replaces live, as read, with want when their roleRefs
// differ: it deletes live on the UID and resourceVersion it was read at,
// then creates want (never adopting one created meanwhile); either step
// answers 409 when the binding changed in between, and nothing else is
// deleted. live must carry OCC's labels and annotation for nsID
// (ownedObject), else it is left alone with an error. Until the create,
// the driver holds no tenant permissions in the namespace; a create that
// fails leaves no binding, and the next call creates it.
func (d *Driver) replaceRoleBinding(ctx context.Context, live, want *rbacv1.RoleBinding, nsID string) error {
	if !ownedObject(live, nsID) {
		return fmt.Errorf("kube: RoleBinding %s/%s binds %s %s, not %s, and is not labelled and annotated as OCC's for %s; leaving it alone",
			live.Namespace, live.Name, live.RoleRef.Kind, live.RoleRef.Name, want.RoleRef.Name, nsID)
	}
	m := &metav1.PartialObjectMetadata{ObjectMeta: live.ObjectMeta}
	m.SetGroupVersionKind(gvkRoleBinding)
	if err := d.deleteObserved(ctx, m); err != nil {
		return err
	}
	if err := d.applyExact(ctx, want, ""); err != nil {
		return err
	}
	d.o.Logger.InfoContext(ctx, "kube: tenant RoleBinding recreated for another role (a roleRef cannot change)",
		"namespace", live.Namespace, "name", live.Name, "old_role", live.RoleRef.Name, "role", want.RoleRef.Name)
	return nil
}
