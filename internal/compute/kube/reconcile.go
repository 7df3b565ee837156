package kube

import (
	"context"
	"encoding/json"
	"fmt"
	"maps"
	"slices"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openclaw/occ/internal/compute"
)

var _ compute.NamespaceReconciler = (*Driver)(nil)

// ownPolicies are the NetworkPolicies RenderNamespace makes.
var ownPolicies = []string{PolicyDefaultDeny, PolicyAllowDNS, PolicyGatewayIngress, PolicyModelEgress}

// PlanNamespace implements compute.NamespaceReconciler: it reads the tenant
// namespace, its RoleBinding and its NetworkPolicies, makes
// ReconcileNamespace's checks and answers what it would change. It writes
// nothing.
func (d *Driver) PlanNamespace(ctx context.Context, ns compute.Namespace) (compute.NamespacePlan, error) {
	p, err := d.plan(ctx, ns)
	if err != nil {
		return compute.NamespacePlan{}, err
	}
	return p.public(), nil
}

// ReconcileNamespace implements compute.NamespaceReconciler: the plan's
// checks, then each changed object written with server-side apply on the
// resourceVersion it was read at (an object changed or created since
// answers 409: a retryable error naming it, nothing overwritten). One of
// OCC's NetworkPolicies whose spec differs from the rendered one is
// updated whole instead, on that resourceVersion too (updatePolicy), so a
// rule another field manager added to it is removed, not kept. A
// RoleBinding whose roleRef differs is deleted on the UID and
// resourceVersion it was read at and created anew (replaceRoleBinding),
// since a roleRef cannot change. The namespace is written last, so its
// route-attachment label appears only once the ingress policy admits
// Envoy. It touches no Agent object.
func (d *Driver) ReconcileNamespace(ctx context.Context, ns compute.Namespace) (compute.NamespacePlan, error) {
	p, err := d.plan(ctx, ns)
	if err != nil {
		return compute.NamespacePlan{}, err
	}
	if d.beforeWrite != nil {
		d.beforeWrite()
	}
	// p.items[0] is the namespace: created first when absent (everything
	// else lives in it), else written last.
	writes := p.items
	if p.items[0].change.Action != compute.ActionCreate {
		writes = append(slices.Clone(p.items[1:]), p.items[0])
	}
	for _, it := range writes {
		if it.change.Action == compute.ActionUnchanged {
			continue
		}
		rv := it.change.ResourceVersion
		var err error
		rb, isRB := it.obj.(*rbacv1.RoleBinding)
		np, isNP := it.obj.(*networkingv1.NetworkPolicy)
		switch {
		case isRB && slices.Contains(it.change.Fields, "roleRef"):
			// A roleRef cannot change: the binding is replaced, on the UID
			// and resourceVersion it was read at.
			err = d.replaceRoleBinding(ctx, it.live.(*rbacv1.RoleBinding), rb, ns.ID)
		case isNP && slices.Contains(it.change.Fields, "spec"):
			err = d.updatePolicy(ctx, it.live.(*networkingv1.NetworkPolicy), np)
		default:
			err = d.applyExact(ctx, it.obj, rv)
		}
		if err != nil {
			if apierrors.IsConflict(err) || apierrors.IsAlreadyExists(err) {
				return compute.NamespacePlan{}, fmt.Errorf("kube: %s %s changed since it was read (resourceVersion %s); nothing of it was overwritten: review it and reconcile again: %w",
					it.change.Kind, objName(it.change), rv, err)
			}
			return compute.NamespacePlan{}, err
		}
	}
	return p.public(), nil
}

// updatePolicy writes want's spec over OCC's policy live, whole: a JSON
// merge patch from live as read to the rendered spec, which sets every
// field OCC does not render to null, with live's resourceVersion in it
// (MergeFromWithOptimisticLock: 409 Conflict when the policy changed
// since). Server-side apply removes only fields the occ manager owned, so
// a field another manager added that OCC never sets (an ingress: [{}] on
// default-deny, which admits every source to the gateway Pods) would
// survive an apply; the patch removes it. Labels and annotations of
// others are kept, OCC's set as rendered. A patch, not an update: the
// chart grants the driver patch on NetworkPolicies, not update.
func (d *Driver) updatePolicy(ctx context.Context, live, want *networkingv1.NetworkPolicy) error {
	u := live.DeepCopy()
	u.Spec = *want.Spec.DeepCopy()
	u.Labels = mergeMaps(live.Labels, want.Labels)
	u.Annotations = mergeMaps(live.Annotations, want.Annotations)
	cctx, cancel := d.call(ctx)
	defer cancel()
	patch := client.MergeFromWithOptions(live, client.MergeFromWithOptimisticLock{})
	if err := d.c.Patch(cctx, u, patch, client.FieldOwner(FieldOwner)); err != nil {
		return fmt.Errorf("kube: patch NetworkPolicy %s/%s: %w", u.Namespace, u.Name, err)
	}
	return nil
}

// mergeMaps is base with over's entries set.
func mergeMaps(base, over map[string]string) map[string]string {
	out := maps.Clone(base)
	if out == nil {
		out = map[string]string{}
	}
	maps.Copy(out, over)
	return out
}

// applyExact is apply, except that an object that did not exist when read
// is created with create semantics, so one created meanwhile is not
// adopted.
func (d *Driver) applyExact(ctx context.Context, obj client.Object, rv string) error {
	if rv != "" {
		return d.apply(ctx, obj, rv)
	}
	return d.create(ctx, obj)
}

func objName(c compute.ObjectChange) string {
	if c.Namespace == "" {
		return c.Name
	}
	return c.Namespace + "/" + c.Name
}

type planItem struct {
	obj    client.Object
	live   client.Object // as read; nil when absent
	change compute.ObjectChange
}

type nsPlan struct{ items []planItem }

func (p nsPlan) public() compute.NamespacePlan {
	out := compute.NamespacePlan{}
	for _, it := range p.items {
		out.Changes = append(out.Changes, it.change)
	}
	return out
}

// plan reads and judges. Refusals are permanent with a public message
// naming the object; read failures are retryable.
func (d *Driver) plan(ctx context.Context, ns compute.Namespace) (nsPlan, error) {
	if err := ctx.Err(); err != nil {
		return nsPlan{}, err
	}
	want, policies := RenderNamespace(d.cfg, ns)
	name := want.Name
	var p nsPlan

	var live corev1.Namespace
	found, err := d.getTyped(ctx, client.ObjectKey{Name: name}, &live)
	if err != nil {
		return nsPlan{}, err
	}
	if found {
		if err := ownedNamespace(&live, ns.ID); err != nil {
			return nsPlan{}, err
		}
		if live.DeletionTimestamp != nil {
			return nsPlan{}, fmt.Errorf("kube: namespace %s is being deleted", name)
		}
	}
	var nsFields []string
	if found {
		nsFields = append(diffMap("metadata.labels", live.Labels, want.Labels), diffMap("metadata.annotations", live.Annotations, want.Annotations)...)
	}
	p.items = append(p.items, item(want, foundPtr(found, &live), nsFields))

	if rb := RenderTenantAccess(d.cfg, ns); rb != nil {
		var cur rbacv1.RoleBinding
		ok := false
		if found {
			if ok, err = d.getTyped(ctx, client.ObjectKeyFromObject(rb), &cur); err != nil {
				return nsPlan{}, err
			}
		}
		var fields []string
		if ok {
			if !ownedObject(&cur, ns.ID) {
				return nsPlan{}, compute.Refusal(compute.CodeNamespaceNotOwned, fmt.Sprintf(
					"RoleBinding %s/%s is not labelled and annotated as OCC's for %s; it was left alone, nothing was changed.", name, rb.Name, ns.ID))
			}
			fields = diffMap("metadata.labels", cur.Labels, rb.Labels)
			if !equality.Semantic.DeepEqual(cur.RoleRef, rb.RoleRef) {
				fields = append(fields, "roleRef")
			}
			if !equality.Semantic.DeepEqual(cur.Subjects, rb.Subjects) {
				fields = append(fields, "subjects")
			}
		}
		p.items = append(p.items, item(rb, foundPtr(ok, &cur), fields))
	}

	var list networkingv1.NetworkPolicyList
	if found {
		cctx, cancel := d.call(ctx)
		err := d.c.List(cctx, &list, client.InNamespace(name))
		cancel()
		if err != nil {
			return nsPlan{}, fmt.Errorf("kube: list NetworkPolicies in %s: %w", name, err)
		}
	}
	byName := map[string]*networkingv1.NetworkPolicy{}
	for i := range list.Items {
		byName[list.Items[i].Name] = &list.Items[i]
	}
	for _, lp := range list.Items {
		if slices.Contains(ownPolicies, lp.Name) {
			continue
		}
		if why := admitsGateways(&lp, d.cfg); why != "" {
			return nsPlan{}, compute.Refusal(compute.CodePermissivePolicy, fmt.Sprintf(
				"NetworkPolicy %s/%s %s; NetworkPolicies add up, so it would still admit callers that are not Envoy. Remove or narrow it, then reconcile again; nothing was changed.", name, lp.Name, why))
		}
	}
	for _, want := range policies {
		cur, ok := byName[want.Name]
		var fields []string
		if ok {
			if !ownedObject(cur, ns.ID) {
				return nsPlan{}, compute.Refusal(compute.CodeNamespaceNotOwned, fmt.Sprintf(
					"NetworkPolicy %s/%s is not labelled and annotated as OCC's for %s; it was left alone, nothing was changed.", name, want.Name, ns.ID))
			}
			if want.Name == PolicyGatewayIngress && !equality.Semantic.DeepEqual(cur.Spec.PodSelector, want.Spec.PodSelector) {
				return nsPlan{}, compute.Refusal(compute.CodeGatewaySelectorChanged, fmt.Sprintf(
					"NetworkPolicy %s/%s selects Pods other than %s=%s (its podSelector was changed); restore it, then reconcile again; nothing was changed.", name, want.Name, LabelWorkloadRole, WorkloadRoleGateway))
			}
			fields = diffMap("metadata.labels", cur.Labels, want.Labels)
			if !equality.Semantic.DeepEqual(cur.Spec, want.Spec) {
				fields = append(fields, "spec")
			}
		}
		p.items = append(p.items, item(want, foundPtr(ok, cur), fields))
	}
	return p, nil
}

func foundPtr[T client.Object](ok bool, o T) client.Object {
	if !ok {
		return nil
	}
	return o
}

// item describes one object: create when live is nil, update when fields
// differ, else unchanged.
func item(want, live client.Object, fields []string) planItem {
	gvk := want.GetObjectKind().GroupVersionKind()
	c := compute.ObjectChange{Kind: gvk.Kind, Namespace: want.GetNamespace(), Name: want.GetName(), Action: compute.ActionUnchanged, Fields: fields}
	if u, err := toApply(want); err == nil {
		c.Desired, _ = json.Marshal(u.Object)
	}
	switch {
	case live == nil:
		c.Action = compute.ActionCreate
	default:
		c.ResourceVersion = live.GetResourceVersion()
		live.GetObjectKind().SetGroupVersionKind(gvk)
		live.SetManagedFields(nil)
		c.Live, _ = json.Marshal(live)
		if len(fields) > 0 {
			c.Action = compute.ActionUpdate
		}
	}
	return planItem{obj: want, live: live, change: c}
}

// diffMap lists the keys of want whose value in live differs (extra keys
// in live are kept by the apply and not listed).
func diffMap(prefix string, live, want map[string]string) []string {
	var out []string
	for _, k := range slices.Sorted(maps.Keys(want)) {
		if v, ok := live[k]; !ok || v != want[k] {
			out = append(out, prefix+"."+k)
		}
	}
	return out
}

// ownedObject reports whether o carries OCC's marks for the Namespace id:
// the managed-by and Namespace labels and the Namespace annotation. The
// tenant namespace, its RoleBinding and OCC's NetworkPolicies must all
// have them before OCC changes them; anything else is left alone.
func ownedObject(o metav1.Object, id string) bool {
	return o.GetLabels()[LabelManagedBy] == ManagedBy && o.GetLabels()[LabelNamespace] == id &&
		o.GetAnnotations()[AnnotationNamespaceID] == id
}

// ownedNamespace refuses a tenant namespace that is not OCC's for id: the
// managed-by and Namespace labels and the Namespace annotation must all say
// so (the seed's ownership check).
func ownedNamespace(ns *corev1.Namespace, id string) error {
	if !ownedObject(ns, id) {
		return compute.Refusal(compute.CodeNamespaceNotOwned, fmt.Sprintf(
			"Kubernetes namespace %s is not OCC's for %s (labels %s, %s and annotation %s must name it); it was left alone, nothing was changed.",
			ns.Name, id, LabelManagedBy, LabelNamespace, AnnotationNamespaceID))
	}
	return nil
}

// admitsGateways says why a policy that is not OCC's would admit callers
// to the gateway Pods, or "" when it does not: it must select them (an
// empty selector, or one the gateway Pod labels could satisfy) and have
// an ingress rule with a peer other than the installation's Envoy proxies.
func admitsGateways(p *networkingv1.NetworkPolicy, cfg Config) string {
	ingress := len(p.Spec.Ingress) > 0 && (len(p.Spec.PolicyTypes) == 0 || slices.Contains(p.Spec.PolicyTypes, networkingv1.PolicyTypeIngress))
	if !ingress || !mayMatchGateways(p.Spec.PodSelector.MatchLabels) {
		return ""
	}
	envoy := RenderNamespaceEnvoyPeer(cfg)
	for _, r := range p.Spec.Ingress {
		if len(r.From) == 0 {
			return "admits every source to the gateway Pods"
		}
		for _, f := range r.From {
			if envoy == nil || !equality.Semantic.DeepEqual(f, *envoy) {
				return "admits sources other than the Envoy proxies to the gateway Pods"
			}
		}
	}
	return ""
}

// mayMatchGateways: a label selector that some gateway Pod's labels could
// satisfy (the labels renderDeployment gives them; the per-Agent ones take
// any value). matchExpressions are not looked at, which errs on the side
// of matching.
func mayMatchGateways(sel map[string]string) bool {
	fixed := map[string]string{LabelWorkloadRole: WorkloadRoleGateway, LabelManagedBy: ManagedBy, LabelNetworkProfile: NetworkProfileBroad}
	for k, v := range sel {
		switch want, ok := fixed[k]; {
		case ok && want != v:
			return false
		case !ok && k != LabelNamespace && k != LabelAgent && k != LabelRevision:
			return false
		}
	}
	return true
}

// RenderNamespaceEnvoyPeer is the ingress peer allow-gateway-ingress admits
// with routing, or nil without.
func RenderNamespaceEnvoyPeer(cfg Config) *networkingv1.NetworkPolicyPeer {
	_, policies := RenderNamespace(cfg, compute.Namespace{ID: "x"})
	for _, p := range policies {
		if p.Name == PolicyGatewayIngress && cfg.GatewayRouting != nil && len(p.Spec.Ingress) == 1 && len(p.Spec.Ingress[0].From) == 1 {
			return &p.Spec.Ingress[0].From[0]
		}
	}
	return nil
}

// getTyped reads obj; false when it does not exist.
func (d *Driver) getTyped(ctx context.Context, key client.ObjectKey, obj client.Object) (bool, error) {
	cctx, cancel := d.call(ctx)
	defer cancel()
	err := d.c.Get(cctx, key, obj)
	switch {
	case apierrors.IsNotFound(err):
		return false, nil
	case err != nil:
		return false, fmt.Errorf("kube: read %T %s: %w", obj, key, err)
	}
	return true, nil
}
