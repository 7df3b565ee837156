package kube

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openclaw/occ/internal/compute"
)

// Pending reasons of PrepareRevision.
const (
	// PendingKubernetesAPIUnavailable: the API server did not answer (a
	// timeout, a refused connection, a 5xx); nothing is known to be wrong
	// with the revision.
	PendingKubernetesAPIUnavailable = "KUBERNETES_API_UNAVAILABLE"
	// PendingAgentGatewayUnavailable: the objects are applied and the
	// gateway Deployment is not available yet; Message says why.
	PendingAgentGatewayUnavailable = "AGENT_GATEWAY_UNAVAILABLE"
)

// Options tune a Driver.
type Options struct {
	// ID names the driver instance; default "kubernetes".
	ID string
	// CallTimeout bounds every API request; default 30 s. The caller's
	// context bounds the whole verb.
	CallTimeout time.Duration
	// SetupFailureLimit is how many times the workspace-setup init
	// container may fail before PrepareRevision fails the revision with
	// WORKSPACE_SETUP_FAILED; default 3. The runner is safe to retry, so a
	// passing failure (a slow volume, an evicted Pod) is retried first.
	SetupFailureLimit int32
	// Logger receives the driver's own notes; default slog.Default().
	Logger *slog.Logger
}

// Driver is the Kubernetes Compute driver. It is safe for concurrent use;
// all state is in the cluster.
type Driver struct {
	cfg Config
	c   client.Client
	o   Options
	// beforeWrite, set by tests only, runs in ReconcileNamespace between
	// the reads and the writes (to provoke a concurrent change).
	beforeWrite func()
	// tenantChecked holds the OCC Namespaces whose RoleBinding of
	// TenantAccess this driver found binding its role (repairTenantAccess):
	// a rename comes with a new driver (a new worker), so one check per
	// namespace and process is enough.
	tenantChecked sync.Map
}

var _ compute.Driver = (*Driver)(nil)

// New returns a driver that runs Agents through c, which must know the
// built-in types (Scheme has everything). cfg is validated (with defaults
// applied); New makes no API call, so a cluster that is down at start-up
// shows up as pending deployments, not as a failed start.
func New(cfg Config, c client.Client, opts Options) (*Driver, error) {
	if c == nil {
		return nil, errors.New("kube: New: the client is nil")
	}
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kube: invalid configuration: %w", err)
	}
	if opts.ID == "" {
		opts.ID = "kubernetes"
	}
	if opts.CallTimeout <= 0 {
		opts.CallTimeout = 30 * time.Second
	}
	if opts.SetupFailureLimit <= 0 {
		opts.SetupFailureLimit = 3
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	return &Driver{cfg: cfg, c: c, o: opts}, nil
}

// RESTConfig returns the client configuration cfg selects: the kubeconfig
// file (and context) when set, else the in-cluster service account.
func RESTConfig(cfg Config) (*rest.Config, error) {
	if cfg.Kubeconfig == "" {
		rc, err := rest.InClusterConfig()
		if err != nil {
			return nil, fmt.Errorf("kube: no kubeconfig configured and not running in a cluster: %w", err)
		}
		return rc, nil
	}
	rc, err := clientcmd.NewNonInteractiveDeferredLoadingClientConfig(
		&clientcmd.ClientConfigLoadingRules{ExplicitPath: cfg.Kubeconfig},
		&clientcmd.ConfigOverrides{CurrentContext: cfg.Context},
	).ClientConfig()
	if err != nil {
		return nil, fmt.Errorf("kube: kubeconfig %s: %w", cfg.Kubeconfig, err)
	}
	return rc, nil
}

// NewFromKubeconfig builds the client from cfg (RESTConfig) with Scheme and
// returns New's driver. It reads the kubeconfig but makes no API call.
func NewFromKubeconfig(cfg Config, opts Options) (*Driver, error) {
	cfg = cfg.WithDefaults()
	if err := cfg.Validate(); err != nil {
		return nil, fmt.Errorf("kube: invalid configuration: %w", err)
	}
	rc, err := RESTConfig(cfg)
	if err != nil {
		return nil, err
	}
	c, err := NewClient(rc)
	if err != nil {
		return nil, fmt.Errorf("kube: client for %s: %w", rc.Host, err)
	}
	return New(cfg, c, opts)
}

// ID implements compute.Driver.
func (d *Driver) ID() string { return d.o.ID }

// Capabilities implements compute.Driver: workspace setup always (an init
// container runs the shared runner), live files only with routing.
func (d *Driver) Capabilities() compute.Capabilities {
	return compute.Capabilities{WorkspaceSetup: true, LiveFiles: d.cfg.GatewayRouting != nil}
}

// Config returns the driver's configuration with defaults applied.
func (d *Driver) Config() Config { return d.cfg }

// EnsureNamespace applies the tenant namespace, the RoleBinding of
// TenantAccess when configured, and the NetworkPolicies.
// A namespace of that name that is labelled for another OCC Namespace, or
// that is being deleted, is an error (retryable: deletion finishes).
// OCC's RoleBinding of another ClusterRole than TenantAccess names (the
// chart renamed it) is deleted and created anew, since its roleRef cannot
// change; a RoleBinding of that name that is not OCC's is an error.
func (d *Driver) EnsureNamespace(ctx context.Context, ns compute.Namespace) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	namespace, policies := RenderNamespace(d.cfg, ns)
	m, err := d.readOrCreate(ctx, gvkNamespace, namespace)
	if err != nil {
		return err
	}
	if m != nil {
		if got := m.Labels[LabelNamespace]; got != ns.ID {
			return fmt.Errorf("kube: namespace %s exists but belongs to %q, not %s; leaving it alone", namespace.Name, got, ns.ID)
		}
		if m.DeletionTimestamp != nil {
			return fmt.Errorf("kube: namespace %s is still being deleted; retry when it is gone", namespace.Name)
		}
		if err := d.apply(ctx, namespace, ""); err != nil {
			return err
		}
	}
	// Without this binding the driver can write nothing in the namespace
	// it just created (with TenantAccess, that is all its RBAC grants).
	if rb := RenderTenantAccess(d.cfg, ns); rb != nil {
		if err := d.ensureTenantAccess(ctx, rb, ns.ID, true); err != nil {
			return err
		}
	}
	for _, p := range policies {
		if err := d.apply(ctx, p, ""); err != nil {
			return err
		}
	}
	return nil
}

// DeleteNamespace deletes the tenant namespace (Kubernetes then removes
// what is left in it, in the background). Absence, and a deletion already
// under way, are success; a namespace labelled for another OCC Namespace
// is left alone with an error.
func (d *Driver) DeleteNamespace(ctx context.Context, ns compute.Namespace) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	name := TenantNamespace(ns.ID)
	for range maxDeleteAttempts {
		m, err := d.getMeta(ctx, gvkNamespace, "", name)
		if err != nil || m == nil || m.DeletionTimestamp != nil {
			return err
		}
		if got := m.Labels[LabelNamespace]; got != ns.ID || m.Labels[LabelManagedBy] != ManagedBy {
			return fmt.Errorf("kube: namespace %s is not managed by OCC for %s (label %s=%q); leaving it alone", name, ns.ID, LabelNamespace, got)
		}
		if err := d.deleteObserved(ctx, m); !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("kube: namespace %s changed on every attempt to delete it; will retry", name)
}

// PrepareRevision applies everything the revision needs and reports Ready
// once its gateway Deployment is available (like every verb on an Agent,
// it first replaces OCC's RoleBinding of TenantAccess when that binds
// another ClusterRole: repairTenantAccess):
//
//  1. the copies of runtime.imagePullSecrets in the tenant namespace,
//     refreshed from their sources on every call (ensureImagePullSecrets);
//  2. the native configuration (permanent CONFIGURATION_INVALID on
//     conflicts) as the revision's immutable ConfigMap;
//  3. the Agent's state PVC, created once and never changed;
//  4. the workspace-setup Secret, when rc has a setup;
//  5. the gateway Deployment, taken over for this revision unless a newer
//     revision owns it (then a permanent failure: this revision is stale).
//
// The Deployment's Recreate rollout stops the previous revision's Pod
// before this one starts (one gateway per Agent on a ReadWriteOnce
// volume); routing stays with the serving revision until ActivateRevision.
// While the API server cannot be reached the answer is Ready=false with
// KUBERNETES_API_UNAVAILABLE, not an error; a cancelled context is an
// error.
func (d *Driver) PrepareRevision(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) (compute.PrepareResult, error) {
	if err := ctx.Err(); err != nil {
		return compute.PrepareResult{}, err
	}
	objs, err := Render(d.cfg, rev, rc.WorkspaceSetup)
	if err != nil {
		return compute.PrepareResult{}, err
	}
	res, err := d.prepare(ctx, rev, rc.WorkspaceSetup, objs)
	return d.settle(ctx, res, err)
}

// apiUnavailableMessage is the public message of a transient API server
// failure: its Kubernetes status reason (a fixed word such as Timeout or
// ServiceUnavailable) when the server answered, else that it did not.
func apiUnavailableMessage(err error) string {
	if reason := apierrors.ReasonForError(err); reason != metav1.StatusReasonUnknown {
		return "The Kubernetes API server refused the request for now (" + string(reason) + "); it is retried."
	}
	return "The Kubernetes API server could not be reached; it is retried."
}

// settle turns an API server that cannot answer into a pending result.
func (d *Driver) settle(ctx context.Context, res compute.PrepareResult, err error) (compute.PrepareResult, error) {
	if err == nil {
		return res, nil
	}
	if ctx.Err() != nil {
		return compute.PrepareResult{}, err
	}
	if _, permanent := compute.AsPermanent(err); !permanent && transient(err) {
		// The message is public (the deployment's last attempt): it
		// names the class of failure only, never the error's text, which
		// holds the API server's address and may hold its reply.
		d.o.Logger.WarnContext(ctx, "kube: the API server did not answer; the deployment stays pending", "error", err)
		return compute.PrepareResult{Ready: false, PendingReason: PendingKubernetesAPIUnavailable, Message: apiUnavailableMessage(err)}, nil
	}
	return compute.PrepareResult{}, err
}

func (d *Driver) prepare(ctx context.Context, rev compute.Revision, setup *compute.WorkspaceSetup, objs *Objects) (compute.PrepareResult, error) {
	ns := objs.ConfigMap.Namespace
	nsMeta, err := d.getMeta(ctx, gvkNamespace, "", ns)
	switch {
	case err != nil:
		return compute.PrepareResult{}, err
	case nsMeta == nil:
		return compute.PrepareResult{}, fmt.Errorf("kube: namespace %s of %s does not exist; EnsureNamespace must run first", ns, rev.NamespaceID)
	case nsMeta.DeletionTimestamp != nil:
		return compute.PrepareResult{}, fmt.Errorf("kube: namespace %s of %s is being deleted", ns, rev.NamespaceID)
	}
	if err := d.repairTenantAccess(ctx, rev.NamespaceID); err != nil {
		return compute.PrepareResult{}, err
	}
	if err := d.ensureImagePullSecrets(ctx, rev.NamespaceID); err != nil {
		return compute.PrepareResult{}, err
	}
	if err := d.ensureConfigMap(ctx, rev, objs.ConfigMap); err != nil {
		return compute.PrepareResult{}, err
	}
	if err := d.ensurePVC(ctx, rev, objs.StatePVC); err != nil {
		return compute.PrepareResult{}, err
	}
	if objs.SetupSecret != nil {
		if err := d.ensureSetupSecret(ctx, rev, setup, objs.SetupSecret); err != nil {
			return compute.PrepareResult{}, err
		}
	}
	ref := refOf(rev)
	if err := d.claim(ctx, gvkDeployment, objs.Deployment, ref); err != nil {
		return compute.PrepareResult{}, err
	}
	return d.gatewayStatus(ctx, ref)
}

func refOf(rev compute.Revision) revisionRef {
	return revisionRef{ID: rev.ID, Number: rev.Number, NamespaceID: rev.NamespaceID, AgentID: rev.AgentID}
}

// ensureImagePullSecrets copies each of runtime.imagePullSecrets from its
// namespace into the tenant namespace of namespaceID (RenderImagePullSecret)
// with server-side apply. It runs on every PrepareRevision, so a rotated
// source reaches the tenant namespace with the next deployment; the apply
// of an unchanged copy changes nothing. The copies are the tenant
// namespace's, shared by its Agents: DeleteAgent leaves them, and
// DeleteNamespace removes them with the namespace. A copy whose source
// was dropped from the list stays until then: a running Deployment of
// another Agent may still list it.
//
// It fails closed, before any other object of the revision is applied: a
// source that does not exist, cannot be read or is not a registry
// credential is an error naming it and its namespace (retryable: the
// operator's fix lets the deployment proceed), and no gateway is deployed
// without its pull Secrets. A Secret of the copy's name that is not
// labelled as OCC's copy is left alone with an error. Errors never carry
// a byte of a Secret's data.
func (d *Driver) ensureImagePullSecrets(ctx context.Context, namespaceID string) error {
	rt := d.cfg.Runtime
	for _, name := range rt.ImagePullSecrets {
		var src corev1.Secret
		cctx, cancel := d.call(ctx)
		err := d.c.Get(cctx, client.ObjectKey{Namespace: rt.ImagePullSecretsNamespace, Name: name}, &src)
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			return fmt.Errorf("kube: image pull Secret %s/%s (runtime.imagePullSecrets) does not exist; no gateway is deployed without it: create it, or remove it from the list",
				rt.ImagePullSecretsNamespace, name)
		case err != nil:
			return fmt.Errorf("kube: read image pull Secret %s/%s (runtime.imagePullSecrets): %w", rt.ImagePullSecretsNamespace, name, err)
		}
		cp, err := RenderImagePullSecret(namespaceID, &src)
		if err != nil {
			return err
		}
		if err := d.applyImagePullSecret(ctx, cp); err != nil {
			return err
		}
	}
	return nil
}

// applyImagePullSecret applies cp over the copy in the tenant namespace,
// or creates it when absent (create: a Secret of that name made since the
// read is read and judged, never adopted). A Secret's type cannot change,
// so a copy of another type (the source was recreated with the other
// registry format) is deleted first, exactly the object read
// (deleteObserved), and created anew; a conflict there is an error the
// worker retries.
func (d *Driver) applyImagePullSecret(ctx context.Context, cp *corev1.Secret) error {
	for range maxDeleteAttempts {
		// The whole Secret is read, not only its metadata, for its type.
		var cur corev1.Secret
		found, err := d.getTyped(ctx, client.ObjectKeyFromObject(cp), &cur)
		if err != nil {
			return err
		}
		if !found {
			if err := d.create(ctx, cp); !apierrors.IsAlreadyExists(err) {
				return err
			}
			continue
		}
		l := cur.Labels
		if l[LabelManagedBy] != ManagedBy || l[LabelNamespace] != cp.Labels[LabelNamespace] || l[LabelImagePullSecret] != "true" {
			return fmt.Errorf("kube: Secret %s/%s exists but is not labelled as OCC's copy of image pull Secret %s (labels %s, %s, %s); leaving it alone",
				cp.Namespace, cp.Name, cp.Annotations[AnnotationImagePullSecretSource], LabelManagedBy, LabelNamespace, LabelImagePullSecret)
		}
		if cur.Type == cp.Type {
			return d.apply(ctx, cp, "")
		}
		m := &metav1.PartialObjectMetadata{ObjectMeta: cur.ObjectMeta}
		m.SetGroupVersionKind(gvkSecret)
		if err := d.deleteObserved(ctx, m); err != nil {
			return err
		}
	}
	return errKeptChanging("Secret", cp)
}

// errKeptChanging: an object kept appearing or changing between the read
// and the write on every attempt.
func errKeptChanging(kind string, obj client.Object) error {
	return fmt.Errorf("kube: %s %s/%s changed between the read and the write on every attempt; will retry", kind, obj.GetNamespace(), obj.GetName())
}

// ensureConfigMap creates the revision's ConfigMap. It is immutable: when
// one exists with other content (the installation's configuration changed,
// say the trusted CIDRs, between two attempts) it is replaced, deleting
// exactly the object read (UID precondition).
func (d *Driver) ensureConfigMap(ctx context.Context, rev compute.Revision, cm *corev1.ConfigMap) error {
	for range maxDeleteAttempts {
		var cur corev1.ConfigMap
		cctx, cancel := d.call(ctx)
		err := d.c.Get(cctx, client.ObjectKeyFromObject(cm), &cur)
		cancel()
		switch {
		case apierrors.IsNotFound(err):
			if err := d.create(ctx, cm); !apierrors.IsAlreadyExists(err) {
				return err
			}
			continue
		case err != nil:
			return fmt.Errorf("kube: read ConfigMap %s/%s: %w", cm.Namespace, cm.Name, err)
		}
		if err := checkAgent(&cur, rev.AgentID); err != nil {
			return err
		}
		if cur.DeletionTimestamp == nil && cur.Immutable != nil && *cur.Immutable && mapsEqual(cur.Data, cm.Data) {
			return nil
		}
		m := &metav1.PartialObjectMetadata{ObjectMeta: cur.ObjectMeta}
		m.SetGroupVersionKind(gvkConfigMap)
		if err := d.deleteObserved(ctx, m); err != nil && !apierrors.IsConflict(err) {
			return err
		}
	}
	return fmt.Errorf("kube: ConfigMap %s/%s could not be replaced; will retry", cm.Namespace, cm.Name)
}

func mapsEqual(a, b map[string]string) bool {
	if len(a) != len(b) {
		return false
	}
	for k, v := range a {
		if w, ok := b[k]; !ok || w != v {
			return false
		}
	}
	return true
}

// ensurePVC creates the Agent's state volume when it does not exist
// (readOrCreate: one that appears meanwhile is judged, never adopted). An
// existing one is never changed: it holds the workspace, and most of its
// spec is immutable anyway.
func (d *Driver) ensurePVC(ctx context.Context, rev compute.Revision, pvc *corev1.PersistentVolumeClaim) error {
	m, err := d.readOrCreate(ctx, gvkPVC, pvc)
	if err != nil || m == nil {
		return err
	}
	if err := checkAgent(m, rev.AgentID); err != nil {
		return err
	}
	if m.DeletionTimestamp != nil {
		return fmt.Errorf("kube: the state volume %s/%s of agent %s is being deleted", pvc.Namespace, pvc.Name, rev.AgentID)
	}
	return nil
}

// readOrCreate reads the metadata of obj's object and, when there is none,
// creates obj (create: never adopting one made since the read). It returns
// the metadata of an object that existed, for the caller to judge, or nil
// when it created obj. An object that appeared between the read and the
// create is read and returned.
func (d *Driver) readOrCreate(ctx context.Context, gvk schemaGVK, obj client.Object) (*metav1.PartialObjectMetadata, error) {
	for range maxDeleteAttempts {
		m, err := d.getMeta(ctx, gvk, obj.GetNamespace(), obj.GetName())
		if err != nil || m != nil {
			return m, err
		}
		if err := d.create(ctx, obj); !apierrors.IsAlreadyExists(err) {
			return nil, err
		}
	}
	return nil, errKeptChanging(gvk.Kind, obj)
}

// ensureSetupSecret applies the rendered setup Secret, except over one
// that an activation already reduced to the completed identity of the same
// setup: that one is re-applied as it is. An activation scrubs the Secret
// only after PrepareRevision reported Ready (the setup ran and its marker
// is on the volume), so the worker's retry after a crash between the
// driver's activation and the activation transaction, or a stale worker
// whose lease ran out, must not bring the file contents back. The apply is
// conditional on the resourceVersion read, so a scrub that lands between
// the read and the apply wins (409 Conflict, retried by the worker).
func (d *Driver) ensureSetupSecret(ctx context.Context, rev compute.Revision, setup *compute.WorkspaceSetup, secret *corev1.Secret) error {
	m, err := d.readOrCreate(ctx, gvkSecret, secret)
	if err != nil || m == nil {
		return err
	}
	if err := checkAgent(m, rev.AgentID); err != nil {
		return err
	}
	if m.Annotations[AnnotationWorkspaceSetupID] == setup.ID && m.Annotations[AnnotationWorkspaceSetupCompleted] == "true" {
		if secret, err = RenderSetupSecret(rev.NamespaceID, rev.AgentID, setup, true); err != nil {
			return err
		}
	}
	return d.apply(ctx, secret, m.ResourceVersion)
}

// applyAgentObject applies an Agent-level object that no revision owns
// (the setup Secret), refusing to touch a same-named object of another
// Agent.
func (d *Driver) applyAgentObject(ctx context.Context, gvk schemaGVK, obj client.Object, agentID string) error {
	m, err := d.readOrCreate(ctx, gvk, obj)
	if err != nil || m == nil {
		return err
	}
	if err := checkAgent(m, agentID); err != nil {
		return err
	}
	return d.apply(ctx, obj, "")
}

// errNewerOwner says a newer revision owns an object: the revision at
// hand is stale, and retrying cannot change that.
func errNewerOwner(kind, name string, owner, rev revisionRef) error {
	return compute.Permanent(compute.CodeRuntimeFailed, fmt.Errorf(
		"kube: %s %s belongs to revision #%d (%s), newer than #%d (%s); this revision can no longer run", kind, name, owner.Number, owner.ID, rev.Number, rev.ID))
}

// claim applies obj, an Agent-level object that revisions share (the
// Deployment, the Service, the HTTPRoute), on behalf of rev: created when
// absent (readOrCreate: one that appears meanwhile is judged, never
// adopted), taken over from rev itself or an older revision (conditional on
// the resourceVersion read, so a concurrent change is a conflict rather
// than a lost update: the object is read and judged again), refused when a
// newer revision owns it.
func (d *Driver) claim(ctx context.Context, gvk schemaGVK, obj client.Object, rev revisionRef) error {
	for range maxDeleteAttempts {
		m, err := d.readOrCreate(ctx, gvk, obj)
		if err != nil || m == nil {
			return err
		}
		if err := checkAgent(m, rev.AgentID); err != nil {
			return err
		}
		if o, ok := ownerOf(m); ok && o.ID != rev.ID && o.Number >= rev.Number {
			return errNewerOwner(gvk.Kind, obj.GetNamespace()+"/"+obj.GetName(), o, rev)
		}
		// Fields still owned by an update entry (a create whose move
		// failed, a scale to zero) would survive an apply that leaves
		// them out. The move is conditional on the resourceVersion read,
		// like the apply.
		rv, err := d.ownAsApplied(ctx, m, false)
		if err == nil {
			err = d.apply(ctx, obj, rv)
		}
		// A conflict: the object changed since the read (a Deployment's
		// status moves while it rolls out); it is read and judged again.
		if !apierrors.IsConflict(err) {
			return err
		}
	}
	return errKeptChanging(gvk.Kind, obj)
}

// gatewayStatus reads the Deployment and says whether rev's gateway is
// available; when it is not, the Pods explain why, and a workspace setup
// that failed SetupFailureLimit times fails the revision.
func (d *Driver) gatewayStatus(ctx context.Context, rev revisionRef) (compute.PrepareResult, error) {
	ns, name := TenantNamespace(rev.NamespaceID), GatewayName(rev.AgentID)
	var dep appsv1.Deployment
	cctx, cancel := d.call(ctx)
	err := d.c.Get(cctx, client.ObjectKey{Namespace: ns, Name: name}, &dep)
	cancel()
	if err != nil {
		return compute.PrepareResult{}, fmt.Errorf("kube: read Deployment %s/%s: %w", ns, name, err)
	}
	ready, msg := deploymentReady(&dep, rev.ID)
	if ready {
		return compute.PrepareResult{Ready: true}, nil
	}
	var pods corev1.PodList
	cctx, cancel = d.call(ctx)
	err = d.c.List(cctx, &pods, client.InNamespace(ns), client.MatchingLabels{LabelAgent: rev.AgentID, LabelRevision: rev.ID})
	cancel()
	if err != nil {
		return compute.PrepareResult{}, fmt.Errorf("kube: list Pods of %s/%s: %w", ns, name, err)
	}
	detail, perr := diagnosePods(pods.Items, d.o.SetupFailureLimit)
	if perr != nil {
		return compute.PrepareResult{}, perr
	}
	if detail != "" {
		msg += ": " + detail
	}
	return compute.PrepareResult{Ready: false, PendingReason: PendingAgentGatewayUnavailable, Message: msg}, nil
}

// deploymentReady says whether dep runs revisionID and has its one replica
// available, with no Pod of another template left; otherwise why not.
func deploymentReady(dep *appsv1.Deployment, revisionID string) (bool, string) {
	owner, _ := ownerOf(dep)
	switch {
	case owner.ID != revisionID:
		return false, fmt.Sprintf("the gateway Deployment runs revision %q", owner.ID)
	case dep.Status.ObservedGeneration < dep.Generation:
		return false, "the gateway Deployment's change is not observed yet"
	case dep.Spec.Replicas != nil && *dep.Spec.Replicas == 0:
		return false, "the gateway is stopped"
	}
	for _, c := range dep.Status.Conditions {
		if c.Type == appsv1.DeploymentProgressing && c.Status == corev1.ConditionFalse {
			return false, fmt.Sprintf("the gateway Deployment is not progressing (%s)", c.Reason)
		}
	}
	if dep.Status.UpdatedReplicas < 1 || dep.Status.AvailableReplicas < 1 || dep.Status.Replicas != dep.Status.UpdatedReplicas {
		return false, fmt.Sprintf("waiting for the gateway: %d of 1 replica available (%d updated, %d in total)",
			dep.Status.AvailableReplicas, dep.Status.UpdatedReplicas, dep.Status.Replicas)
	}
	return true, ""
}

// diagnosePods explains why a revision's Pods are not available, in
// terms that carry no content, and fails the revision permanently when its
// workspace setup has failed limit times.
func diagnosePods(pods []corev1.Pod, limit int32) (string, error) {
	var notes []string
	for _, p := range pods {
		if p.DeletionTimestamp != nil {
			continue
		}
		for _, c := range p.Status.Conditions {
			if c.Type == corev1.PodScheduled && c.Status == corev1.ConditionFalse {
				notes = append(notes, fmt.Sprintf("pod %s not scheduled (%s)", p.Name, c.Reason))
			}
		}
		for _, s := range p.Status.InitContainerStatuses {
			failed := (s.State.Terminated != nil && s.State.Terminated.ExitCode != 0) ||
				(s.LastTerminationState.Terminated != nil && s.LastTerminationState.Terminated.ExitCode != 0)
			if s.Name == "workspace-setup" && failed {
				if s.RestartCount+1 >= limit {
					return "", compute.Permanent(compute.CodeWorkspaceSetupFailed, fmt.Errorf(
						"kube: workspace setup of pod %s failed %d times", p.Name, s.RestartCount+1))
				}
				notes = append(notes, fmt.Sprintf("workspace setup of pod %s failed; retrying", p.Name))
			}
			if w := s.State.Waiting; w != nil && w.Reason != "" && w.Reason != "PodInitializing" {
				notes = append(notes, fmt.Sprintf("init container %s of pod %s: %s", s.Name, p.Name, w.Reason))
			}
		}
		for _, s := range p.Status.ContainerStatuses {
			if w := s.State.Waiting; w != nil && w.Reason != "" && w.Reason != "ContainerCreating" && w.Reason != "PodInitializing" {
				notes = append(notes, fmt.Sprintf("container %s of pod %s: %s", s.Name, p.Name, w.Reason))
			}
		}
	}
	return strings.Join(notes, "; "), nil
}

// ActivateRevision makes a prepared revision the serving one: the Service
// and (with routing) the HTTPRoute are applied with this revision's
// ownership annotations. The Deployment must already run this revision. A
// newer revision's routing is never taken (permanent failure: this
// revision is stale).
//
// With a pending workspace setup, the setup Secret's payload is first
// replaced by the completed identity, whatever the gateway's state at this
// moment: the worker activates only after PrepareRevision reported Ready,
// so the setup init container has run and its marker is on the volume, and
// a Pod started later (a restart, a replacement) only verifies it. The
// file contents so leave the cluster before the worker records the
// activation; an error here is retried (the worker prepares and activates
// again), and ensureSetupSecret keeps a retried PrepareRevision from
// delivering them again.
func (d *Driver) ActivateRevision(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	objs, err := Render(d.cfg, rev, rc.WorkspaceSetup)
	if err != nil {
		return err
	}
	if err := d.repairTenantAccess(ctx, rev.NamespaceID); err != nil {
		return err
	}
	ref := refOf(rev)
	dep, err := d.getMeta(ctx, gvkDeployment, objs.Deployment.Namespace, objs.Deployment.Name)
	if err != nil {
		return err
	}
	if dep == nil {
		return fmt.Errorf("kube: revision #%d (%s) is not prepared: the gateway Deployment does not exist", rev.Number, rev.ID)
	}
	if err := checkAgent(dep, rev.AgentID); err != nil {
		return err
	}
	if o, _ := ownerOf(dep); o.ID != rev.ID {
		if o.Number >= rev.Number {
			return errNewerOwner("Deployment", dep.Namespace+"/"+dep.Name, o, ref)
		}
		return fmt.Errorf("kube: revision #%d (%s) is not prepared: the gateway Deployment runs revision #%d", rev.Number, rev.ID, o.Number)
	}
	if s := rc.WorkspaceSetup; s != nil && !s.Completed {
		secret, err := RenderSetupSecret(rev.NamespaceID, rev.AgentID, s, true)
		if err != nil {
			return err
		}
		if err := d.applyAgentObject(ctx, gvkSecret, secret, rev.AgentID); err != nil {
			return err
		}
	}
	if err := d.claim(ctx, gvkService, objs.Service, ref); err != nil {
		return err
	}
	if objs.HTTPRoute != nil {
		if err := d.claim(ctx, gvkHTTPRoute, objs.HTTPRoute, ref); err != nil {
			return err
		}
	}
	return nil
}

// StopRevision removes the revision's inbound routing (its HTTPRoute and
// Service, only while it owns them) and stops its execution: when it owns
// the Deployment, the Deployment is handed back to the serving revision if
// another one serves (an abandoned deployment falls back), else scaled to
// zero. Durable state stays. Objects of other revisions are not touched.
func (d *Driver) StopRevision(ctx context.Context, rev compute.Revision) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.repairTenantAccess(ctx, rev.NamespaceID); err != nil {
		return err
	}
	if err := d.removeRouting(ctx, rev); err != nil {
		return err
	}
	return d.releaseDeployment(ctx, rev, false)
}

// RetireRevision does what StopRevision does, deletes the Deployment
// instead of scaling it when no other revision serves, and deletes the
// revision's ConfigMap. Every delete carries UID and resourceVersion
// preconditions on the object whose ownership was checked.
func (d *Driver) RetireRevision(ctx context.Context, rev compute.Revision) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.repairTenantAccess(ctx, rev.NamespaceID); err != nil {
		return err
	}
	if err := d.removeRouting(ctx, rev); err != nil {
		return err
	}
	if err := d.releaseDeployment(ctx, rev, true); err != nil {
		return err
	}
	return d.deleteIf(ctx, gvkConfigMap, TenantNamespace(rev.NamespaceID), ConfigMapName(rev.AgentID, rev.ID), rev.AgentID,
		func(m *metav1.PartialObjectMetadata) bool { return m.Labels[LabelRevision] == rev.ID })
}

// removeRouting deletes the HTTPRoute and the Service while rev owns them.
func (d *Driver) removeRouting(ctx context.Context, rev compute.Revision) error {
	// The route goes even when routing was switched off since it was
	// made: a stale route would still lead to the gateway.
	ns, name := TenantNamespace(rev.NamespaceID), GatewayName(rev.AgentID)
	if err := d.deleteIf(ctx, gvkHTTPRoute, ns, name, rev.AgentID, ownedBy(rev.ID)); err != nil {
		return err
	}
	return d.deleteIf(ctx, gvkService, ns, name, rev.AgentID, ownedBy(rev.ID))
}

// releaseDeployment stops rev's gateway when rev owns the Deployment: hand
// it back to the revision that serves (owner of the Service) when that is
// another, still prepared revision (its ConfigMap exists), else delete it
// (retire) or scale it to zero (stop). Each write is conditional on the
// resourceVersion the ownership was read at.
func (d *Driver) releaseDeployment(ctx context.Context, rev compute.Revision, retire bool) error {
	ns, name := TenantNamespace(rev.NamespaceID), GatewayName(rev.AgentID)
	for range maxDeleteAttempts {
		dep, err := d.getMeta(ctx, gvkDeployment, ns, name)
		if err != nil || dep == nil || dep.DeletionTimestamp != nil {
			return err
		}
		if err := checkAgent(dep, rev.AgentID); err != nil {
			return err
		}
		if !ownedBy(rev.ID)(dep) {
			return nil
		}
		serving, err := d.servingRevision(ctx, rev)
		if err != nil {
			return err
		}
		switch {
		case serving != nil:
			// The template lists the copies of the current
			// runtime.imagePullSecrets; the serving revision's prepare
			// made them unless the list changed since. A copy that
			// cannot be made must not keep the revision from stopping,
			// so the hand-back goes ahead (the Pod pulls without it).
			if err := d.ensureImagePullSecrets(ctx, rev.NamespaceID); err != nil {
				d.o.Logger.Warn("kube: image pull Secrets not copied before handing the gateway back",
					"agent", rev.AgentID, "error", err)
			}
			withSetup, err := d.hasSetupSecret(ctx, rev)
			if err != nil {
				return err
			}
			err = d.apply(ctx, renderDeployment(d.cfg, *serving, withSetup), dep.ResourceVersion)
			if err == nil {
				d.o.Logger.Info("kube: gateway handed back to the serving revision",
					"agent", rev.AgentID, "from", rev.ID, "to", serving.ID)
			}
			if !apierrors.IsConflict(err) {
				return err
			}
		case retire:
			if err := d.deleteObserved(ctx, dep); !apierrors.IsConflict(err) {
				return err
			}
		default:
			patch := fmt.Appendf(nil, `{"metadata":{"resourceVersion":%q},"spec":{"replicas":0}}`, dep.ResourceVersion)
			cctx, cancel := d.call(ctx)
			err := d.c.Patch(cctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name}},
				client.RawPatch(types.MergePatchType, patch), client.FieldOwner(FieldOwner))
			cancel()
			if apierrors.IsNotFound(err) {
				return nil
			}
			if !apierrors.IsConflict(err) {
				if err != nil {
					return fmt.Errorf("kube: scale Deployment %s/%s to zero: %w", ns, name, err)
				}
				return nil
			}
		}
	}
	return fmt.Errorf("kube: Deployment %s/%s changed on every attempt; will retry", ns, name)
}

// servingRevision returns the revision that owns the Agent's Service when
// it is another revision than rev whose ConfigMap still exists, else nil.
func (d *Driver) servingRevision(ctx context.Context, rev compute.Revision) (*revisionRef, error) {
	ns := TenantNamespace(rev.NamespaceID)
	svc, err := d.getMeta(ctx, gvkService, ns, GatewayName(rev.AgentID))
	if err != nil || svc == nil || svc.DeletionTimestamp != nil {
		return nil, err
	}
	o, ok := ownerOf(svc)
	if !ok || o.ID == rev.ID || checkAgent(svc, rev.AgentID) != nil {
		return nil, nil
	}
	cm, err := d.getMeta(ctx, gvkConfigMap, ns, ConfigMapName(rev.AgentID, o.ID))
	if err != nil || cm == nil || cm.DeletionTimestamp != nil {
		return nil, err
	}
	o.NamespaceID, o.AgentID = rev.NamespaceID, rev.AgentID
	return &o, nil
}

func (d *Driver) hasSetupSecret(ctx context.Context, rev compute.Revision) (bool, error) {
	m, err := d.getMeta(ctx, gvkSecret, TenantNamespace(rev.NamespaceID), SetupSecretName(rev.AgentID))
	return m != nil && m.DeletionTimestamp == nil, err
}

// DeleteAgent removes everything of the Agent in its tenant namespace:
// HTTPRoute, Service, Deployment (its Pods follow in the background),
// every ConfigMap and Secret labelled with the Agent, and the state PVC.
// It is called after every revision was retired, so it does not check
// ownership annotations, only that each object is the Agent's. Absence is
// success.
func (d *Driver) DeleteAgent(ctx context.Context, a compute.Agent) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	if err := d.repairTenantAccess(ctx, a.NamespaceID); err != nil {
		return err
	}
	ns, name := TenantNamespace(a.NamespaceID), GatewayName(a.ID)
	for _, gvk := range []schemaGVK{gvkHTTPRoute, gvkService, gvkDeployment} {
		if err := d.deleteIf(ctx, gvk, ns, name, a.ID, nil); err != nil {
			return err
		}
	}
	labels := map[string]string{LabelAgent: a.ID, LabelManagedBy: ManagedBy}
	for _, gvk := range []schemaGVK{gvkConfigMap, gvkSecret} {
		items, err := d.listMeta(ctx, gvk, ns, labels)
		if err != nil {
			return err
		}
		for _, m := range items {
			if err := d.deleteIf(ctx, gvk, ns, m.Name, a.ID, nil); err != nil {
				return err
			}
		}
	}
	return d.deleteIf(ctx, gvkPVC, ns, StatePVCName(a.ID), a.ID, nil)
}

// Endpoint returns the Agent's routed URL (no API call, no readiness
// check), or ErrNoEndpoint without routing.
func (d *Driver) Endpoint(ctx context.Context, rev compute.Revision) (compute.Endpoint, error) {
	if err := ctx.Err(); err != nil {
		return compute.Endpoint{}, err
	}
	if d.cfg.GatewayRouting == nil {
		return compute.Endpoint{}, fmt.Errorf("kube: %w: gatewayRouting is not configured", compute.ErrNoEndpoint)
	}
	return compute.Endpoint{URL: EndpointURL(d.cfg, rev.NamespaceID, rev.AgentID), Transport: compute.Routed}, nil
}

// Serving reports whether rev is its Agent's serving revision and its
// gateway is available: the Service (and route) name it and the
// Deployment runs it with one replica available.
func (d *Driver) Serving(ctx context.Context, rev compute.Revision) (bool, error) {
	ns, name := TenantNamespace(rev.NamespaceID), GatewayName(rev.AgentID)
	gvks := []schemaGVK{gvkService}
	if d.cfg.GatewayRouting != nil {
		gvks = append(gvks, gvkHTTPRoute)
	}
	for _, gvk := range gvks {
		m, err := d.getMeta(ctx, gvk, ns, name)
		if err != nil || m == nil || !ownedBy(rev.ID)(m) {
			return false, err
		}
	}
	res, err := d.gatewayStatus(ctx, refOf(rev))
	if err != nil {
		if apierrors.IsNotFound(err) {
			return false, nil
		}
		return false, err
	}
	return res.Ready, nil
}
