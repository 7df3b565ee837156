package kube

import (
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"strconv"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/utils/ptr"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/workspace"
)

// Objects are everything one revision of an Agent needs in its tenant
// namespace. Render produces them; every field but SetupSecret and
// HTTPRoute is always set.
type Objects struct {
	// ConfigMap is the revision's immutable native configuration.
	ConfigMap *corev1.ConfigMap
	// StatePVC is the Agent's durable state (workspace, sessions); created
	// once, never updated.
	StatePVC *corev1.PersistentVolumeClaim
	// SetupSecret is the workspace-setup payload; nil without a setup.
	SetupSecret *corev1.Secret
	// Deployment runs the gateway (one replica, Recreate) with this
	// revision's configuration.
	Deployment *appsv1.Deployment
	// Service and HTTPRoute (nil without routing) make the revision the
	// serving one; ActivateRevision applies them.
	Service   *corev1.Service
	HTTPRoute *gwv1.HTTPRoute
}

// Render returns the objects of rev, with setup (nil when the Agent has no
// setup record). It is pure: the same inputs give the same objects. A
// Configuration that conflicts with what the driver controls is a
// permanent CONFIGURATION_INVALID.
func Render(cfg Config, rev compute.Revision, setup *compute.WorkspaceSetup) (*Objects, error) {
	cfg = cfg.WithDefaults()
	if rev.ID == "" || rev.AgentID == "" || rev.NamespaceID == "" {
		return nil, fmt.Errorf("kube: revision %q of agent %q in namespace %q: every id is required", rev.ID, rev.AgentID, rev.NamespaceID)
	}
	native, err := RenderNativeConfig(cfg, rev.Configuration)
	if err != nil {
		return nil, err
	}
	o := &Objects{
		ConfigMap:  renderConfigMap(cfg, rev, native),
		StatePVC:   renderStatePVC(cfg, rev),
		Deployment: renderDeployment(cfg, revisionRef{ID: rev.ID, Number: rev.Number, NamespaceID: rev.NamespaceID, AgentID: rev.AgentID}, setup != nil),
		Service:    renderService(cfg, rev),
		HTTPRoute:  renderHTTPRoute(cfg, rev),
	}
	if setup != nil {
		if o.SetupSecret, err = RenderSetupSecret(rev.NamespaceID, rev.AgentID, setup, false); err != nil {
			return nil, err
		}
	}
	return o, nil
}

// revisionRef is what a Deployment needs of a revision; the driver can
// rebuild it from an object's annotations to hand the gateway back to the
// serving revision.
type revisionRef struct {
	ID, NamespaceID, AgentID string
	Number                   int64
}

// agentLabels are the ownership labels of every Agent object.
func agentLabels(namespaceID, agentID string) map[string]string {
	return map[string]string{LabelManagedBy: ManagedBy, LabelNamespace: namespaceID, LabelAgent: agentID}
}

func agentAnnotations(namespaceID, agentID string) map[string]string {
	return map[string]string{AnnotationNamespaceID: namespaceID, AnnotationAgentID: agentID}
}

// ownerAnnotations mark an Agent-level object as owned by a revision.
func ownerAnnotations(r revisionRef) map[string]string {
	a := agentAnnotations(r.NamespaceID, r.AgentID)
	a[AnnotationAgentRevisionID] = r.ID
	a[AnnotationAgentRevision] = strconv.FormatInt(r.Number, 10)
	return a
}

// gatewaySelector selects the Agent's gateway Pods, whatever revision they
// run: the Deployment's (immutable) selector and the Service's.
func gatewaySelector(agentID string) map[string]string {
	return map[string]string{LabelAgent: agentID, LabelWorkloadRole: WorkloadRoleGateway}
}

func renderConfigMap(cfg Config, rev compute.Revision, native []byte) *corev1.ConfigMap {
	labels := agentLabels(rev.NamespaceID, rev.AgentID)
	labels[LabelRevision] = rev.ID
	ann := agentAnnotations(rev.NamespaceID, rev.AgentID)
	ann[AnnotationRevisionID] = rev.ID
	ann[AnnotationConfigurationID] = rev.ConfigurationID
	ann[AnnotationConfigurationKind] = "agent"
	ann[AnnotationConfigurationGeneration] = strconv.FormatInt(rev.ConfigurationGeneration, 10)
	return &corev1.ConfigMap{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{
			Name: ConfigMapName(rev.AgentID, rev.ID), Namespace: TenantNamespace(rev.NamespaceID),
			Labels: labels, Annotations: ann,
		},
		Immutable: ptr.To(true),
		Data:      map[string]string{ConfigKey: string(native)},
	}
}

func renderStatePVC(cfg Config, rev compute.Revision) *corev1.PersistentVolumeClaim {
	pvc := &corev1.PersistentVolumeClaim{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PersistentVolumeClaim"},
		ObjectMeta: metav1.ObjectMeta{
			Name: StatePVCName(rev.AgentID), Namespace: TenantNamespace(rev.NamespaceID),
			Labels: agentLabels(rev.NamespaceID, rev.AgentID), Annotations: agentAnnotations(rev.NamespaceID, rev.AgentID),
		},
		Spec: corev1.PersistentVolumeClaimSpec{
			AccessModes: []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
			Resources: corev1.VolumeResourceRequirements{Requests: corev1.ResourceList{
				corev1.ResourceStorage: resource.MustParse(cfg.Runtime.GatewayStorageSize),
			}},
		},
	}
	if sc := cfg.Runtime.GatewayStorageClassName; sc != "" {
		pvc.Spec.StorageClassName = ptr.To(sc)
	}
	return pvc
}

// RenderSetupSecret returns the Agent's workspace-setup Secret. Its
// payload reaches the runner only as a mounted file (never args or env):
// payload.json is the pending setup with its files, or, once completed (or
// when completed is forced, at activation), only the identity; identity.json
// is always the completed identity, which the verifier checks on every
// gateway start. The annotation AnnotationWorkspaceSetupCompleted says
// which of the two payloads it holds, so the driver can tell from the
// metadata alone.
func RenderSetupSecret(namespaceID, agentID string, setup *compute.WorkspaceSetup, completed bool) (*corev1.Secret, error) {
	identity := workspace.Setup{
		ID: setup.ID, NamespaceID: setup.NamespaceID, AgentID: setup.AgentID, DefaultsID: setup.DefaultsID, Completed: true,
	}
	payload := identity
	if !setup.Completed && !completed {
		payload.Completed = false
		payload.Files = setup.Files
	}
	p, err := json.Marshal(payload)
	if err != nil {
		return nil, fmt.Errorf("kube: encode the workspace setup payload: %w", err)
	}
	id, err := json.Marshal(identity)
	if err != nil {
		return nil, fmt.Errorf("kube: encode the workspace setup identity: %w", err)
	}
	ann := agentAnnotations(namespaceID, agentID)
	ann[AnnotationWorkspaceSetupID] = setup.ID
	ann[AnnotationWorkspaceSetupCompleted] = strconv.FormatBool(payload.Completed)
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: SetupSecretName(agentID), Namespace: TenantNamespace(namespaceID),
			Labels: agentLabels(namespaceID, agentID), Annotations: ann,
		},
		Type: corev1.SecretTypeOpaque,
		Data: map[string][]byte{SetupPayloadKey: p, SetupIdentityKey: id},
	}, nil
}

// RenderImagePullSecret returns the copy of src, one of
// runtime.imagePullSecrets as read from its namespace, for the tenant
// namespace of namespaceID: the same type and data under
// ImagePullSecretName, with the driver's labels. Nothing else of src is
// copied: not its labels or annotations (kubectl's
// last-applied-configuration annotation holds the data in clear), and
// not immutable (the copy follows a rotated source). A Secret of another
// type than kubernetes.io/dockerconfigjson or kubernetes.io/dockercfg is
// refused: the kubelet would ignore it as a pull Secret, and copying an
// arbitrary Secret into every tenant namespace would hand it to whoever
// may read Secrets there. The error names the Secret and its type, never
// its data.
func RenderImagePullSecret(namespaceID string, src *corev1.Secret) (*corev1.Secret, error) {
	switch src.Type {
	case corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg:
	default:
		return nil, fmt.Errorf("kube: image pull Secret %s/%s (runtime.imagePullSecrets) is of type %q; only %s and %s Secrets are copied to tenant namespaces",
			src.Namespace, src.Name, src.Type, corev1.SecretTypeDockerConfigJson, corev1.SecretTypeDockercfg)
	}
	data := make(map[string][]byte, len(src.Data))
	for k, v := range src.Data {
		data[k] = slices.Clone(v)
	}
	return &corev1.Secret{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{
			Name: ImagePullSecretName(src.Name), Namespace: TenantNamespace(namespaceID),
			Labels: map[string]string{LabelManagedBy: ManagedBy, LabelNamespace: namespaceID, LabelImagePullSecret: "true"},
			Annotations: map[string]string{
				AnnotationNamespaceID:           namespaceID,
				AnnotationImagePullSecretSource: src.Namespace + "/" + src.Name,
			},
		},
		Type: src.Type,
		Data: data,
	}, nil
}

// imagePullSecretRefs are the gateway Pod's imagePullSecrets: the copies
// of rt.ImagePullSecrets, in their order; nil without any, so the field
// is not set at all.
func imagePullSecretRefs(rt Runtime) []corev1.LocalObjectReference {
	var refs []corev1.LocalObjectReference
	for _, name := range rt.ImagePullSecrets {
		refs = append(refs, corev1.LocalObjectReference{Name: ImagePullSecretName(name)})
	}
	return refs
}

// Volume names of the gateway Pod.
const (
	volConfig = "config"
	volState  = "state"
	volOCC    = "occ-bin"
	volTmp    = "tmp"
	volSetup  = "workspace-setup"
)

// renderDeployment returns the gateway Deployment of revision r. With a
// setup, init containers copy occ from the OCC image into an emptyDir
// (`occ install-self`) and run `occ workspace-setup` in the gateway image
// (applies a pending setup once, checks the marker of a completed one),
// and the gateway container starts as `occ workspace-setup --verify
// --exec -- <gateway>`, which replaces itself with the gateway only when
// the marker matches, so a workspace whose marker is missing or differs
// never serves. Neither image needs a shell or cp. The Pod pulls both
// images with the copies of runtime.imagePullSecrets, which
// PrepareRevision makes before it applies the Deployment.
func renderDeployment(cfg Config, r revisionRef, withSetup bool) *appsv1.Deployment {
	ns := TenantNamespace(r.NamespaceID)
	rt := cfg.Runtime
	port := int32(cfg.Network.GatewayPort)
	pull := corev1.PullPolicy(rt.ImagePullPolicy)

	podLabels := agentLabels(r.NamespaceID, r.AgentID)
	podLabels[LabelWorkloadRole] = WorkloadRoleGateway
	podLabels[LabelNetworkProfile] = NetworkProfileBroad
	podLabels[LabelRevision] = r.ID
	depLabels := agentLabels(r.NamespaceID, r.AgentID)
	depLabels[LabelWorkloadRole] = WorkloadRoleGateway
	podAnn := agentAnnotations(r.NamespaceID, r.AgentID)
	podAnn[AnnotationRevisionID] = r.ID

	stateMounts := []corev1.VolumeMount{
		{Name: volState, MountPath: StateDir, SubPath: "state"},
		{Name: volState, MountPath: WorkspaceDir, SubPath: "workspace"},
		{Name: volTmp, MountPath: "/tmp"},
	}
	env := []corev1.EnvVar{
		{Name: "HOME", Value: HomeDir},
		{Name: "TMPDIR", Value: "/tmp"},
		// The root file system is read-only and HOME is not a volume, so
		// ~/.cache cannot be created there: OpenClaw stages its state
		// database's snapshots (and caches compiled plugins) under
		// XDG_CACHE_HOME, and a gateway without one exits at start
		// ("Unable to create fallback OpenClaw temp dir"). The emptyDir
		// at /tmp holds it; a cache need not survive the Pod.
		{Name: "XDG_CACHE_HOME", Value: "/tmp/.cache"},
		{Name: "OPENCLAW_STATE_DIR", Value: StateDir},
		{Name: "OPENCLAW_CONFIG_PATH", Value: ConfigPath},
		{Name: "OPENCLAW_WORKSPACE_DIR", Value: WorkspaceDir},
		{Name: "OPENCLAW_NO_AUTO_UPDATE", Value: "1"},
		{Name: "OPENCLAW_DISABLE_BONJOUR", Value: "1"},
	}
	gatewayCmd := []string{rt.Node, rt.OpenClawExecutable, "gateway", "run", "--port", strconv.Itoa(int(port))}

	volumes := []corev1.Volume{
		{Name: volConfig, VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
			LocalObjectReference: corev1.LocalObjectReference{Name: ConfigMapName(r.AgentID, r.ID)},
			Items:                []corev1.KeyToPath{{Key: ConfigKey, Path: ConfigKey}},
			DefaultMode:          ptr.To[int32](0o440),
		}}},
		{Name: volState, VolumeSource: corev1.VolumeSource{PersistentVolumeClaim: &corev1.PersistentVolumeClaimVolumeSource{
			ClaimName: StatePVCName(r.AgentID),
		}}},
		{Name: volTmp, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{SizeLimit: ptr.To(resource.MustParse("1Gi"))}}},
	}
	gateway := corev1.Container{
		Name:            "gateway",
		Image:           rt.GatewayImage,
		ImagePullPolicy: pull,
		Command:         gatewayCmd,
		Env:             env,
		Ports:           []corev1.ContainerPort{{Name: "gateway", ContainerPort: port, Protocol: corev1.ProtocolTCP}},
		Resources:       resources(cfg.Resources),
		// Startup takes 9-16 s on two vCPUs and more under load; the
		// startup probe allows two minutes before liveness applies.
		StartupProbe:   httpProbe("/healthz", 2, 60),
		ReadinessProbe: httpProbe("/readyz", 5, 3),
		LivenessProbe:  httpProbe("/healthz", 10, 6),
		VolumeMounts: append([]corev1.VolumeMount{
			{Name: volConfig, MountPath: ConfigPath, SubPath: ConfigKey, ReadOnly: true},
		}, stateMounts...),
		SecurityContext: containerSecurity(),
	}
	var initContainers []corev1.Container
	if withSetup {
		volumes = append(volumes,
			corev1.Volume{Name: volOCC, VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{
				SizeLimit: ptr.To(resource.MustParse("256Mi")),
			}}},
			corev1.Volume{Name: volSetup, VolumeSource: corev1.VolumeSource{Secret: &corev1.SecretVolumeSource{
				SecretName:  SetupSecretName(r.AgentID),
				DefaultMode: ptr.To[int32](0o440),
			}}},
		)
		occMount := corev1.VolumeMount{Name: volOCC, MountPath: occBinDir, ReadOnly: true}
		setupMount := corev1.VolumeMount{Name: volSetup, MountPath: setupDir, ReadOnly: true}
		initContainers = []corev1.Container{
			{
				Name:            "occ-binary",
				Image:           rt.OCCImage,
				ImagePullPolicy: pull,
				Command:         []string{rt.OCCBinaryPath, "install-self", "--to", occBin},
				VolumeMounts:    []corev1.VolumeMount{{Name: volOCC, MountPath: occBinDir}},
				Resources: corev1.ResourceRequirements{
					Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("10m"), corev1.ResourceMemory: resource.MustParse("32Mi")},
					Limits:   corev1.ResourceList{corev1.ResourceMemory: resource.MustParse("128Mi")},
				},
				SecurityContext: containerSecurity(),
			},
			{
				Name:            "workspace-setup",
				Image:           rt.GatewayImage,
				ImagePullPolicy: pull,
				Command: []string{occBin, "workspace-setup",
					"--payload", setupDir + "/" + SetupPayloadKey,
					"--workspace", WorkspaceDir,
					"--node", rt.Node,
					"--openclaw", rt.OpenClawExecutable,
					"--state-dir", StateDir,
				},
				Env: env,
				// It loads the native CLI: the gateway's budget.
				Resources:       resources(cfg.Resources),
				VolumeMounts:    append([]corev1.VolumeMount{occMount, setupMount}, stateMounts...),
				SecurityContext: containerSecurity(),
			},
		}
		gateway.Command = append([]string{occBin, "workspace-setup", "--verify",
			"--payload", setupDir + "/" + SetupIdentityKey,
			"--workspace", WorkspaceDir,
			"--exec", "--"}, gatewayCmd...)
		gateway.VolumeMounts = append(gateway.VolumeMounts, occMount, setupMount)
	}

	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Name: GatewayName(r.AgentID), Namespace: ns, Labels: depLabels, Annotations: ownerAnnotations(r),
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: ptr.To[int32](1),
			Selector: &metav1.LabelSelector{MatchLabels: gatewaySelector(r.AgentID)},
			// One gateway per Agent on one ReadWriteOnce volume: the old
			// Pod must be gone before the new one mounts it.
			Strategy:             appsv1.DeploymentStrategy{Type: appsv1.RecreateDeploymentStrategyType},
			RevisionHistoryLimit: ptr.To[int32](2),
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: podLabels, Annotations: podAnn},
				Spec: corev1.PodSpec{
					AutomountServiceAccountToken:  ptr.To(false),
					EnableServiceLinks:            ptr.To(false),
					TerminationGracePeriodSeconds: ptr.To[int64](30),
					SecurityContext: &corev1.PodSecurityContext{
						RunAsNonRoot:        ptr.To(true),
						RunAsUser:           ptr.To[int64](1000),
						RunAsGroup:          ptr.To[int64](1000),
						FSGroup:             ptr.To[int64](1000),
						FSGroupChangePolicy: ptr.To(corev1.FSGroupChangeOnRootMismatch),
						SeccompProfile:      &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
					},
					ImagePullSecrets: imagePullSecretRefs(rt),
					InitContainers:   initContainers,
					Containers:       []corev1.Container{gateway},
					Volumes:          volumes,
				},
			},
		},
	}
}

func httpProbe(path string, period, failures int32) *corev1.Probe {
	return &corev1.Probe{
		ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{
			Path: path, Port: intstr.FromString("gateway"), Scheme: corev1.URISchemeHTTP,
		}},
		PeriodSeconds:    period,
		FailureThreshold: failures,
		TimeoutSeconds:   2,
	}
}

// containerSecurity meets the "restricted" Pod Security Standard, which
// the tenant namespaces enforce.
func containerSecurity() *corev1.SecurityContext {
	return &corev1.SecurityContext{
		AllowPrivilegeEscalation: ptr.To(false),
		ReadOnlyRootFilesystem:   ptr.To(true),
		RunAsNonRoot:             ptr.To(true),
		Capabilities:             &corev1.Capabilities{Drop: []corev1.Capability{"ALL"}},
		SeccompProfile:           &corev1.SeccompProfile{Type: corev1.SeccompProfileTypeRuntimeDefault},
	}
}

// resources converts a validated budget; unset values stay unset.
func resources(r Resources) corev1.ResourceRequirements {
	list := func(l ResourceList) corev1.ResourceList {
		out := corev1.ResourceList{}
		if l.CPU != "" {
			out[corev1.ResourceCPU] = resource.MustParse(l.CPU)
		}
		if l.Memory != "" {
			out[corev1.ResourceMemory] = resource.MustParse(l.Memory)
		}
		if len(out) == 0 {
			return nil
		}
		return out
	}
	return corev1.ResourceRequirements{Requests: list(r.Requests), Limits: list(r.Limits)}
}

func renderService(cfg Config, rev compute.Revision) *corev1.Service {
	port := int32(cfg.Network.GatewayPort)
	return &corev1.Service{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Service"},
		ObjectMeta: metav1.ObjectMeta{
			Name: GatewayName(rev.AgentID), Namespace: TenantNamespace(rev.NamespaceID),
			Labels:      agentLabels(rev.NamespaceID, rev.AgentID),
			Annotations: ownerAnnotations(revisionRef{ID: rev.ID, Number: rev.Number, NamespaceID: rev.NamespaceID, AgentID: rev.AgentID}),
		},
		Spec: corev1.ServiceSpec{
			Type:     corev1.ServiceTypeClusterIP,
			Selector: gatewaySelector(rev.AgentID),
			Ports: []corev1.ServicePort{{
				Name: "gateway", Protocol: corev1.ProtocolTCP, Port: port, TargetPort: intstr.FromInt32(port),
			}},
		},
	}
}

// renderHTTPRoute returns the Agent's route on the shared private host, or
// nil without routing. One rule: the exact Agent path, rewritten to / (the
// native gateway serves its WebSocket there), with the identity header
// overwritten, X-Real-IP set from Envoy's direct peer, and forwarding,
// scope and credential headers removed; the service key itself is checked
// and stripped by the installation's SecurityPolicy before the route runs.
func renderHTTPRoute(cfg Config, rev compute.Revision) *gwv1.HTTPRoute {
	r := cfg.GatewayRouting
	if r == nil {
		return nil
	}
	removed := RemovedRequestHeaders()
	return &gwv1.HTTPRoute{
		TypeMeta: metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: "HTTPRoute"},
		ObjectMeta: metav1.ObjectMeta{
			Name: GatewayName(rev.AgentID), Namespace: TenantNamespace(rev.NamespaceID),
			Labels:      agentLabels(rev.NamespaceID, rev.AgentID),
			Annotations: ownerAnnotations(revisionRef{ID: rev.ID, Number: rev.Number, NamespaceID: rev.NamespaceID, AgentID: rev.AgentID}),
		},
		Spec: gwv1.HTTPRouteSpec{
			CommonRouteSpec: gwv1.CommonRouteSpec{ParentRefs: []gwv1.ParentReference{{
				Group:       ptr.To(gwv1.Group(gwv1.GroupName)),
				Kind:        ptr.To(gwv1.Kind("Gateway")),
				Namespace:   ptr.To(gwv1.Namespace(r.GatewayNamespace)),
				Name:        gwv1.ObjectName(r.GatewayName),
				SectionName: ptr.To(gwv1.SectionName("https")),
			}}},
			Hostnames: []gwv1.Hostname{gwv1.Hostname(r.Host())},
			Rules: []gwv1.HTTPRouteRule{{
				Matches: []gwv1.HTTPRouteMatch{{Path: &gwv1.HTTPPathMatch{
					Type: ptr.To(gwv1.PathMatchExact), Value: ptr.To(AgentPath(rev.NamespaceID, rev.AgentID)),
				}}},
				Filters: []gwv1.HTTPRouteFilter{
					{
						Type: gwv1.HTTPRouteFilterURLRewrite,
						URLRewrite: &gwv1.HTTPURLRewriteFilter{Path: &gwv1.HTTPPathModifier{
							Type: gwv1.FullPathHTTPPathModifier, ReplaceFullPath: ptr.To("/"),
						}},
					},
					{
						Type: gwv1.HTTPRouteFilterRequestHeaderModifier,
						RequestHeaderModifier: &gwv1.HTTPHeaderFilter{
							Set: []gwv1.HTTPHeader{
								{Name: IdentityHeader, Value: Identity},
								{Name: "x-real-ip", Value: RealIPValue},
							},
							Remove: removed,
						},
					},
				},
				BackendRefs: []gwv1.HTTPBackendRef{{BackendRef: gwv1.BackendRef{BackendObjectReference: gwv1.BackendObjectReference{
					Group: ptr.To(gwv1.Group("")),
					Kind:  ptr.To(gwv1.Kind("Service")),
					Name:  gwv1.ObjectName(GatewayName(rev.AgentID)),
					Port:  ptr.To(gwv1.PortNumber(cfg.Network.GatewayPort)),
				}}}},
			}},
		},
	}
}

// EndpointURL is the routed URL of an Agent:
// wss://<host>[:endpointPort]/namespaces/<ns>/agents/<agent>, the port
// omitted when it is 443. cfg must have routing.
func EndpointURL(cfg Config, namespaceID, agentID string) string {
	cfg = cfg.WithDefaults()
	r := cfg.GatewayRouting
	host := r.Host()
	if r.EndpointPort != 443 {
		host += ":" + strconv.Itoa(r.EndpointPort)
	}
	u := url.URL{Scheme: "wss", Host: host, Path: AgentPath(namespaceID, agentID)}
	return u.String()
}

// RenderNamespace returns the tenant Namespace of an OCC Namespace and its
// NetworkPolicies:
//   - default-deny: no ingress, no egress for any Pod;
//   - allow-dns: egress to the cluster DNS Pods on port 53;
//   - allow-gateway-ingress: the gateway Pods accept connections on the
//     gateway port only from the Envoy proxy Pods of the installation's
//     Gateway (with routing) or from network.gatewayClients (without);
//   - allow-model-egress: gateway Pods may reach TCP 443 outside private
//     ranges (model providers), nothing else.
//
// The Namespace carries the route-attachment label the Gateway's listener
// selects, and enforces the "restricted" Pod Security Standard.
func RenderNamespace(cfg Config, ns compute.Namespace) (*corev1.Namespace, []*networkingv1.NetworkPolicy) {
	cfg = cfg.WithDefaults()
	name := TenantNamespace(ns.ID)
	labels := func() map[string]string {
		return map[string]string{LabelManagedBy: ManagedBy, LabelNamespace: ns.ID}
	}
	ann := func() map[string]string { return map[string]string{AnnotationNamespaceID: ns.ID} }
	nsLabels := labels()
	nsLabels["pod-security.kubernetes.io/enforce"] = "restricted"
	if r := cfg.GatewayRouting; r != nil {
		nsLabels[LabelRouteAttachment] = r.RouteLabel()
	}
	namespace := &corev1.Namespace{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Namespace"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: nsLabels, Annotations: ann()},
	}
	policy := func(n string, spec networkingv1.NetworkPolicySpec) *networkingv1.NetworkPolicy {
		return &networkingv1.NetworkPolicy{
			TypeMeta:   metav1.TypeMeta{APIVersion: "networking.k8s.io/v1", Kind: "NetworkPolicy"},
			ObjectMeta: metav1.ObjectMeta{Name: n, Namespace: name, Labels: labels(), Annotations: ann()},
			Spec:       spec,
		}
	}
	tcp, udp := corev1.ProtocolTCP, corev1.ProtocolUDP
	port := func(proto corev1.Protocol, p int) networkingv1.NetworkPolicyPort {
		return networkingv1.NetworkPolicyPort{Protocol: ptr.To(proto), Port: ptr.To(intstr.FromInt32(int32(p)))}
	}
	gatewayPods := metav1.LabelSelector{MatchLabels: map[string]string{LabelWorkloadRole: WorkloadRoleGateway}}

	var ingressFrom []networkingv1.NetworkPolicyPeer
	if r := cfg.GatewayRouting; r != nil {
		ingressFrom = []networkingv1.NetworkPolicyPeer{{
			NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": r.EnvoyNamespace}},
			PodSelector: &metav1.LabelSelector{MatchLabels: map[string]string{
				LabelOwningGatewayNamespace: r.GatewayNamespace,
				LabelOwningGatewayName:      r.GatewayName,
			}},
		}}
	} else {
		for _, c := range cfg.Network.GatewayClients {
			ingressFrom = append(ingressFrom, networkingv1.NetworkPolicyPeer{IPBlock: &networkingv1.IPBlock{CIDR: c}})
		}
	}
	except4, except6 := cfg.Network.ModelEgressExceptions()
	policies := []*networkingv1.NetworkPolicy{
		policy(PolicyDefaultDeny, networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress, networkingv1.PolicyTypeEgress},
		}),
		policy(PolicyAllowDNS, networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{{
					NamespaceSelector: &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": cfg.Network.DNS.Namespace}},
					PodSelector:       &metav1.LabelSelector{MatchLabels: cfg.Network.DNS.PodLabels},
				}},
				Ports: []networkingv1.NetworkPolicyPort{port(udp, 53), port(tcp, 53)},
			}},
		}),
		policy(PolicyGatewayIngress, networkingv1.NetworkPolicySpec{
			PodSelector: gatewayPods,
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
			Ingress: []networkingv1.NetworkPolicyIngressRule{{
				From:  ingressFrom,
				Ports: []networkingv1.NetworkPolicyPort{port(tcp, cfg.Network.GatewayPort)},
			}},
		}),
		policy(PolicyModelEgress, networkingv1.NetworkPolicySpec{
			PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{LabelNetworkProfile: NetworkProfileBroad}},
			PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeEgress},
			Egress: []networkingv1.NetworkPolicyEgressRule{{
				To: []networkingv1.NetworkPolicyPeer{
					{IPBlock: &networkingv1.IPBlock{CIDR: "0.0.0.0/0", Except: except4}},
					{IPBlock: &networkingv1.IPBlock{CIDR: "::/0", Except: except6}},
				},
				Ports: []networkingv1.NetworkPolicyPort{port(tcp, 443)},
			}},
		}),
	}
	return namespace, policies
}

// TenantAccessBinding is the name of the RoleBinding that grants the
// driver its permissions in a tenant namespace.
const TenantAccessBinding = "occ-worker"

// RenderTenantAccess returns the RoleBinding that binds
// cfg.TenantAccess.ClusterRole to the driver's ServiceAccount in the
// tenant namespace of ns, or nil without TenantAccess. The driver applies
// it right after the namespace: until then it holds no permission there,
// which is the point (it creates it with the "bind" verb on that one
// ClusterRole).
func RenderTenantAccess(cfg Config, ns compute.Namespace) *rbacv1.RoleBinding {
	ta := cfg.TenantAccess
	if ta == nil {
		return nil
	}
	return &rbacv1.RoleBinding{
		TypeMeta: metav1.TypeMeta{APIVersion: rbacv1.SchemeGroupVersion.String(), Kind: "RoleBinding"},
		ObjectMeta: metav1.ObjectMeta{
			Name: TenantAccessBinding, Namespace: TenantNamespace(ns.ID),
			Labels:      map[string]string{LabelManagedBy: ManagedBy, LabelNamespace: ns.ID},
			Annotations: map[string]string{AnnotationNamespaceID: ns.ID},
		},
		RoleRef: rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: ta.ClusterRole},
		Subjects: []rbacv1.Subject{{
			Kind: rbacv1.ServiceAccountKind, Name: ta.ServiceAccountName, Namespace: ta.ServiceAccountNamespace,
		}},
	}
}
