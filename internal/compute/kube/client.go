package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strconv"
	"sync"
	"syscall"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"github.com/go-logr/logr"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/sets"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/util/csaupgrade"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
)

// schemaGVK is short for the kinds below.
type schemaGVK = schema.GroupVersionKind

// Kinds the driver reads by metadata and deletes. Metadata reads work for
// any kind without registering its Go type, so the HTTPRoute CRD needs no
// scheme entry for the driver itself.
var (
	gvkNamespace  = corev1.SchemeGroupVersion.WithKind("Namespace")
	gvkConfigMap  = corev1.SchemeGroupVersion.WithKind("ConfigMap")
	gvkSecret     = corev1.SchemeGroupVersion.WithKind("Secret")
	gvkService    = corev1.SchemeGroupVersion.WithKind("Service")
	gvkPVC        = corev1.SchemeGroupVersion.WithKind("PersistentVolumeClaim")
	gvkDeployment = appsv1.SchemeGroupVersion.WithKind("Deployment")
	gvkHTTPRoute  = schema.GroupVersion{Group: gwv1.GroupVersion.Group, Version: gwv1.GroupVersion.Version}.WithKind("HTTPRoute")
)

// Scheme returns a scheme with the built-in types, Gateway API v1 and
// Envoy Gateway v1alpha1: what the driver applies, and the installation's
// routing objects (the Helm chart's Gateway, EnvoyProxy, SecurityPolicy)
// that its tests read.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{clientgoscheme.AddToScheme, gwv1.Install, egv1a1.AddToScheme} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("kube: building the scheme: %v", err))
		}
	}
	return s
}

// setLogger hands controller-runtime's logger to slog, once per process.
var setLogger sync.Once

// NewClient is client.New with Scheme. Before the first client it hands
// controller-runtime's logger to slog's default handler: a process that
// never sets one gets a stack trace on standard error ("log.SetLogger(...)
// was never called") the first time a client is built more than 30 s after
// it started, as a server building its driver late would.
func NewClient(rc *rest.Config) (client.Client, error) {
	setLogger.Do(func() { ctrllog.SetLogger(logr.FromSlogHandler(slog.Default().Handler())) })
	return client.New(rc, client.Options{Scheme: Scheme()})
}

// call bounds one API request by the driver's per-call timeout, so no
// request waits on a hung connection longer than that even when the
// caller's deadline is far away.
func (d *Driver) call(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, d.o.CallTimeout)
}

// apply server-side applies obj (a typed object with TypeMeta set) with
// the field manager FieldOwner, forcing ownership of the fields it sets:
// OCC is the source of truth for them, and a conflicting manual edit is
// overwritten, not merged. A non-empty resourceVersion makes the apply
// conditional on the object being unchanged since it was read (the
// server answers 409 Conflict otherwise), which is how ownership decisions
// made on a read stay valid.
func (d *Driver) apply(ctx context.Context, obj client.Object, resourceVersion string) error {
	u, err := toApply(obj)
	if err != nil {
		return err
	}
	if resourceVersion != "" {
		u.SetResourceVersion(resourceVersion)
	}
	ctx, cancel := d.call(ctx)
	defer cancel()
	if err := d.c.Apply(ctx, client.ApplyConfigurationFromUnstructured(u), client.FieldOwner(FieldOwner), client.ForceOwnership); err != nil {
		return fmt.Errorf("kube: apply %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	return nil
}

// create makes obj (a typed object with TypeMeta set), which did not exist
// when it was read, with a plain create and the field manager FieldOwner.
// Unlike an apply, which creates or takes over, it answers AlreadyExists
// when an object of that name appeared since the read (someone else's,
// perhaps): the caller reads again and judges what it finds, so a
// same-named object made in between is never adopted.
//
// A create records OCC's fields under an update entry, and server-side
// apply never removes fields an update entry owns: a later apply that
// leaves a field out (the next revision's Deployment without the
// workspace-setup init container) would keep it. ownAsApplied therefore
// moves them to OCC's apply entry right after. When that fails the object
// stays (it is OCC's) and the error is retryable; claim moves them on its
// next write. The moved entry still lists the maps the create made (the
// "." entries), which an apply does not, so the first apply after it would
// rewrite the managed fields of an unchanged object: obj is applied once
// more, on the resourceVersion of the move, so that later applies of the
// same object write nothing. A conflict there (a controller wrote the
// status meanwhile) leaves that to the next apply.
func (d *Driver) create(ctx context.Context, obj client.Object) error {
	u, err := toApply(obj)
	if err != nil {
		return err
	}
	cctx, cancel := d.call(ctx)
	err = d.c.Create(cctx, u, client.FieldOwner(FieldOwner))
	cancel()
	if err != nil {
		return fmt.Errorf("kube: create %s %s/%s: %w", u.GetKind(), u.GetNamespace(), u.GetName(), err)
	}
	rv, err := d.ownAsApplied(ctx, u, true)
	if err != nil {
		return err
	}
	if err := d.apply(ctx, obj, rv); err != nil && !apierrors.IsConflict(err) {
		return err
	}
	return nil
}

// ownAsApplied moves the fields of obj (as read, or as created) that
// FieldOwner owns under update entries into its apply entry: client-go's
// csaupgrade patch, which replaces the managed fields on obj's
// resourceVersion (409 Conflict when the object changed since) and leaves
// every other manager's entries as they are. Nothing is written when
// there is nothing to move. It returns the resourceVersion of the object
// after the move (obj's when nothing moved). With reread, a conflict (a controller
// writing the status of a Deployment just created) reads the metadata
// again and retries, as long as it is the same object (UID); without, the
// conflict is returned, for a caller whose next write depends on what it
// judged at the read.
func (d *Driver) ownAsApplied(ctx context.Context, obj client.Object, reread bool) (string, error) {
	gvk := obj.GetObjectKind().GroupVersionKind()
	ns, name, uid := obj.GetNamespace(), obj.GetName(), obj.GetUID()
	for range maxDeleteAttempts {
		patch, err := csaupgrade.UpgradeManagedFieldsPatch(obj, sets.New(FieldOwner), FieldOwner)
		if err != nil {
			return "", fmt.Errorf("kube: field ownership of %s %s/%s: %w", gvk.Kind, ns, name, err)
		}
		if patch == nil {
			return obj.GetResourceVersion(), nil
		}
		cctx, cancel := d.call(ctx)
		err = d.c.Patch(cctx, obj, client.RawPatch(types.JSONPatchType, patch))
		cancel()
		obj.GetObjectKind().SetGroupVersionKind(gvk)
		switch {
		case err == nil:
			return obj.GetResourceVersion(), nil
		case !apierrors.IsConflict(err) || !reread:
			return "", fmt.Errorf("kube: move the field ownership of %s %s/%s to server-side apply: %w", gvk.Kind, ns, name, err)
		}
		m, err := d.getMeta(ctx, gvk, ns, name)
		if err != nil {
			return "", err
		}
		if m == nil || m.UID != uid {
			return "", fmt.Errorf("kube: %s %s/%s was deleted or replaced right after OCC created it; will retry", gvk.Kind, ns, name)
		}
		obj = m
	}
	return "", fmt.Errorf("kube: %s %s/%s changed on every attempt to move its field ownership to server-side apply; will retry", gvk.Kind, ns, name)
}

// toApply converts a typed object into the apply configuration it means:
// only the fields it sets. The typed-to-map conversion writes zero values
// of fields without omitempty (creationTimestamp: null, status: {});
// applying those would claim fields OCC does not manage, so nulls and the
// status are dropped. Empty objects stay (emptyDir: {} means something).
func toApply(obj client.Object) (*unstructured.Unstructured, error) {
	if obj.GetObjectKind().GroupVersionKind().Kind == "" {
		return nil, fmt.Errorf("kube: %T %s has no apiVersion/kind", obj, obj.GetName())
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(obj)
	if err != nil {
		return nil, fmt.Errorf("kube: convert %T %s: %w", obj, obj.GetName(), err)
	}
	delete(m, "status")
	pruneNulls(m)
	return &unstructured.Unstructured{Object: m}, nil
}

func pruneNulls(v any) {
	switch t := v.(type) {
	case map[string]any:
		for k, e := range t {
			if e == nil {
				delete(t, k)
				continue
			}
			pruneNulls(e)
		}
	case []any:
		for _, e := range t {
			pruneNulls(e)
		}
	}
}

// getMeta reads an object's metadata; (nil, nil) when it does not exist.
func (d *Driver) getMeta(ctx context.Context, gvk schema.GroupVersionKind, namespace, name string) (*metav1.PartialObjectMetadata, error) {
	m := &metav1.PartialObjectMetadata{}
	m.SetGroupVersionKind(gvk)
	ctx, cancel := d.call(ctx)
	defer cancel()
	err := d.c.Get(ctx, client.ObjectKey{Namespace: namespace, Name: name}, m)
	switch {
	case apierrors.IsNotFound(err):
		return nil, nil
	case meta.IsNoMatchError(err) && gvk == gvkHTTPRoute && d.cfg.GatewayRouting == nil:
		// Without routing the Gateway API is optional; with routing a
		// missing CRD is an error that someone must fix.
		return nil, nil
	case err != nil:
		return nil, fmt.Errorf("kube: read %s %s/%s: %w", gvk.Kind, namespace, name, err)
	}
	m.SetGroupVersionKind(gvk)
	return m, nil
}

// listMeta lists the metadata of every object of kind gvk in namespace
// with the given labels.
func (d *Driver) listMeta(ctx context.Context, gvk schema.GroupVersionKind, namespace string, labels map[string]string) ([]metav1.PartialObjectMetadata, error) {
	list := &metav1.PartialObjectMetadataList{}
	list.SetGroupVersionKind(gvk.GroupVersion().WithKind(gvk.Kind + "List"))
	ctx, cancel := d.call(ctx)
	defer cancel()
	if err := d.c.List(ctx, list, client.InNamespace(namespace), client.MatchingLabels(labels)); err != nil {
		if apierrors.IsNotFound(err) {
			return nil, nil
		}
		return nil, fmt.Errorf("kube: list %s in %s: %w", gvk.Kind, namespace, err)
	}
	for i := range list.Items {
		list.Items[i].SetGroupVersionKind(gvk)
	}
	return list.Items, nil
}

// deleteObserved deletes the object m was read from, and only that one:
// the UID precondition refuses a same-named object created since, and the
// resourceVersion precondition refuses one changed since (its ownership
// may have moved). Both answer 409 Conflict; the object stays. Absence is
// success.
func (d *Driver) deleteObserved(ctx context.Context, m *metav1.PartialObjectMetadata) error {
	uid, rv := m.UID, m.ResourceVersion
	ctx, cancel := d.call(ctx)
	defer cancel()
	err := d.c.Delete(ctx, m, client.Preconditions{UID: &uid, ResourceVersion: &rv},
		client.PropagationPolicy(metav1.DeletePropagationBackground))
	if err != nil && !apierrors.IsNotFound(err) {
		return fmt.Errorf("kube: delete %s %s/%s: %w", m.Kind, m.Namespace, m.Name, err)
	}
	return nil
}

// maxDeleteAttempts bounds re-reads when an object keeps changing between
// the read and the conditional delete (a Deployment's status moves while
// it rolls out).
const maxDeleteAttempts = 5

// deleteIf deletes the named object when it belongs to agentID and cond
// accepts it, with deleteObserved's preconditions; a conflict means the
// object changed since it was read, so it is read and judged again.
// Absence, and an object already being deleted, are success. An object of
// that name that belongs to another Agent is an error and stays.
func (d *Driver) deleteIf(ctx context.Context, gvk schema.GroupVersionKind, namespace, name, agentID string, cond func(*metav1.PartialObjectMetadata) bool) error {
	for range maxDeleteAttempts {
		m, err := d.getMeta(ctx, gvk, namespace, name)
		if err != nil || m == nil || m.DeletionTimestamp != nil {
			return err
		}
		if err := checkAgent(m, agentID); err != nil {
			return err
		}
		if cond != nil && !cond(m) {
			return nil
		}
		err = d.deleteObserved(ctx, m)
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("kube: %s %s/%s changed on every attempt to delete it; will retry", gvk.Kind, namespace, name)
}

// checkAgent refuses to act on an object of a derived name that is not
// labelled as the Agent's: a hash collision, or someone else's object.
func checkAgent(m metav1.Object, agentID string) error {
	if got := m.GetLabels()[LabelAgent]; got != agentID || m.GetLabels()[LabelManagedBy] != ManagedBy {
		return fmt.Errorf("kube: %s/%s exists but is not managed by OCC for agent %s (label %s=%q); leaving it alone",
			m.GetNamespace(), m.GetName(), agentID, LabelAgent, got)
	}
	return nil
}

// ownerOf returns the revision that owns an Agent-level object, from its
// annotations. An unparsable number reads as 0: any revision may take the
// object over, which is what a hand-edited object deserves.
func ownerOf(m metav1.Object) (revisionRef, bool) {
	a := m.GetAnnotations()
	id := a[AnnotationAgentRevisionID]
	if id == "" {
		return revisionRef{}, false
	}
	n, _ := strconv.ParseInt(a[AnnotationAgentRevision], 10, 64)
	return revisionRef{ID: id, Number: n, NamespaceID: a[AnnotationNamespaceID], AgentID: a[AnnotationAgentID]}, true
}

// ownedBy accepts objects whose owner annotation names revisionID.
func ownedBy(revisionID string) func(*metav1.PartialObjectMetadata) bool {
	return func(m *metav1.PartialObjectMetadata) bool {
		o, ok := ownerOf(m)
		return ok && o.ID == revisionID
	}
}

// transient reports errors that say the API server could not be reached
// or could not answer now; anything else (Forbidden, Invalid, a missing
// CRD) needs someone to act.
func transient(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsServerTimeout(err) || apierrors.IsTimeout(err) || apierrors.IsTooManyRequests(err) ||
		apierrors.IsServiceUnavailable(err) || apierrors.IsInternalError(err) || apierrors.IsUnexpectedServerError(err) {
		return true
	}
	if meta.IsNoMatchError(err) {
		return false
	}
	var ne net.Error
	var ue *url.Error
	return errors.Is(err, context.DeadlineExceeded) || errors.Is(err, syscall.ECONNREFUSED) ||
		errors.Is(err, syscall.ECONNRESET) || errors.As(err, &ne) || errors.As(err, &ue)
}
