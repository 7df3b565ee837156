package kube

import (
	"github.com/openclaw/occ/internal/compute/kube/kubecfg"
)

// The installation configuration. The types live in the leaf package
// kubecfg, which the driver registry also imports (see its doc); these
// aliases make kube.Config the driver's configuration type.
type (
	// Config is the driver's installation configuration
	// (drivers.compute.kubernetes). Validate and WithDefaults are its
	// methods.
	Config         = kubecfg.Config
	GatewayRouting = kubecfg.GatewayRouting
	Network        = kubecfg.Network
	DNS            = kubecfg.DNS
	Runtime        = kubecfg.Runtime
	Resources      = kubecfg.Resources
	ResourceList   = kubecfg.ResourceList
	TenantAccess   = kubecfg.TenantAccess
)

// Labels and annotations. Labels carry raw ids (selectable); names carry
// hashes (ids do not fit DNS names). The values are the reference
// implementation's, so operator runbooks written for it (the repair
// procedure of the routing guide checks managed-by and the namespace
// annotation) keep working.
const (
	LabelManagedBy       = "app.kubernetes.io/managed-by"
	ManagedBy            = "openclaw-enterprise"
	LabelNamespace       = "openclaw.dev/namespace"
	LabelAgent           = "openclaw.dev/agent"
	LabelRevision        = "openclaw.dev/revision"
	LabelWorkloadRole    = "openclaw.dev/workload-role"
	WorkloadRoleGateway  = "gateway"
	LabelNetworkProfile  = "openclaw.dev/network-profile"
	NetworkProfileBroad  = "broad-egress-v1"
	LabelRouteAttachment = "openclaw-enterprise.io/gateway"

	AnnotationNamespaceID             = "openclaw.dev/namespace-id"
	AnnotationAgentID                 = "openclaw.dev/agent-id"
	AnnotationRevisionID              = "openclaw.dev/revision-id"
	AnnotationConfigurationID         = "openclaw.dev/configuration-id"
	AnnotationConfigurationKind       = "openclaw.dev/configuration-kind"
	AnnotationConfigurationGeneration = "openclaw.dev/configuration-generation"
	AnnotationWorkspaceSetupID        = "openclaw.dev/workspace-setup-id"
	// AnnotationWorkspaceSetupCompleted is "true" on a setup Secret whose
	// payload is the completed identity (no file contents), else "false".
	AnnotationWorkspaceSetupCompleted = "openclaw.dev/workspace-setup-completed"
	// AnnotationAgentRevisionID and AnnotationAgentRevision (its number)
	// mark which revision owns an Agent-level object that revisions share:
	// the Deployment (the revision whose template it runs), the Service
	// and the HTTPRoute (the revision that serves). Stop and retire act on
	// such an object only while the annotation names their revision, and
	// delete with UID and resourceVersion preconditions, so a newer
	// revision's object is never removed.
	AnnotationAgentRevisionID = "openclaw.dev/agent-revision-id"
	AnnotationAgentRevision   = "openclaw.dev/agent-revision"

	// LabelImagePullSecret ("true") marks the driver's copy of one of
	// runtime.imagePullSecrets in a tenant namespace, and
	// AnnotationImagePullSecretSource names its source, <namespace>/<name>.
	// The copies belong to the tenant namespace, not to an Agent.
	LabelImagePullSecret            = "openclaw.dev/image-pull-secret"
	AnnotationImagePullSecretSource = "openclaw.dev/image-pull-secret-source"

	// Envoy Gateway's labels on the proxy Pods of a Gateway.
	LabelOwningGatewayNamespace = "gateway.envoyproxy.io/owning-gateway-namespace"
	LabelOwningGatewayName      = "gateway.envoyproxy.io/owning-gateway-name"
)

// FieldOwner is the one server-side-apply field manager of every write.
const FieldOwner = "occ"

// Paths inside the gateway Pod. The workspace and state live on the
// Agent's PVC (sub-paths "workspace" and "state"); the configuration is
// the revision's ConfigMap.
const (
	HomeDir      = "/home/node"
	StateDir     = "/home/node/.openclaw"
	WorkspaceDir = "/home/node/.openclaw/workspace"
	ConfigDir    = "/etc/openclaw"
	ConfigPath   = ConfigDir + "/" + ConfigKey
	ConfigKey    = "openclaw.json"
	// occBinDir is the emptyDir the first init container copies occ into.
	occBinDir = "/opt/occ/bin"
	occBin    = occBinDir + "/occ"
	// setupDir is where the workspace-setup Secret is mounted, read only.
	setupDir = "/run/occ/workspace-setup"
	// SetupPayloadKey holds the runner's payload: the pending setup with
	// its files until activation, the completed identity afterwards.
	SetupPayloadKey = "payload.json"
	// SetupIdentityKey holds the completed identity the verifier checks
	// the marker against on every gateway start.
	SetupIdentityKey = "identity.json"
)

// Routing identity: what the HTTPRoute writes into the identity header and
// what the native trusted-proxy configuration grants.
const (
	IdentityHeader = "x-occ-identity"
	Identity       = "occ-workspace-files"
	// RealIPValue is Envoy's direct downstream address, the only client
	// address the route vouches for.
	RealIPValue = "%DOWNSTREAM_DIRECT_REMOTE_ADDRESS_WITHOUT_PORT%"
)

// IdentityScopes are granted to Identity. They are listed explicitly: a
// proxy-injected scope cap matches by literal membership, and
// operator.admin does not imply operator.read there (openclaw-gateway.md
// §4.2).
func IdentityScopes() []string { return []string{"operator.admin", "operator.read", "operator.write"} }

// RemovedRequestHeaders are stripped by the route: forwarding headers (the
// gateway would believe them), the scope cap, and credentials meant for
// someone else.
func RemovedRequestHeaders() []string {
	return []string{"x-forwarded-for", "forwarded", "x-openclaw-scopes", "authorization", "cookie"}
}

// Names. Every name is derived from ids through SHA-256 so that it is a
// valid DNS label of fixed length whatever the id looks like.

// TenantNamespace is the Kubernetes namespace of an OCC Namespace:
// occ-<first 24 hex of sha256(namespaceId)>.
func TenantNamespace(namespaceID string) string { return "occ-" + kubecfg.HashHex(namespaceID, 24) }

// AgentHash is the first 12 hex digits of sha256(agentId).
func AgentHash(agentID string) string { return kubecfg.HashHex(agentID, 12) }

// RevisionHash is the first 12 hex digits of sha256(revisionId).
func RevisionHash(revisionID string) string { return kubecfg.HashHex(revisionID, 12) }

// GatewayName names the Agent's Deployment, Service and HTTPRoute:
// gateway-<agentHash>.
func GatewayName(agentID string) string { return "gateway-" + AgentHash(agentID) }

// ConfigMapName names a revision's native configuration:
// gateway-<agentHash>-rev-<revisionHash>.
func ConfigMapName(agentID, revisionID string) string {
	return GatewayName(agentID) + "-rev-" + RevisionHash(revisionID)
}

// StatePVCName names the Agent's durable state: gateway-state-<agentHash>.
func StatePVCName(agentID string) string { return "gateway-state-" + AgentHash(agentID) }

// SetupSecretName names the Agent's workspace-setup Secret:
// workspace-setup-<agentHash>.
func SetupSecretName(agentID string) string { return "workspace-setup-" + AgentHash(agentID) }

// ImagePullSecretName names the copy of the image pull Secret source (one
// of runtime.imagePullSecrets) in every tenant namespace:
// image-pull-<source>.
func ImagePullSecretName(source string) string { return kubecfg.ImagePullSecretCopyName(source) }

// Tenant NetworkPolicy names.
const (
	PolicyDefaultDeny    = "default-deny"
	PolicyAllowDNS       = "allow-dns"
	PolicyGatewayIngress = "allow-gateway-ingress"
	PolicyModelEgress    = "allow-model-egress"
)

// AgentPath is the routed path of an Agent, /namespaces/<ns>/agents/<agent>.
func AgentPath(namespaceID, agentID string) string {
	return "/namespaces/" + namespaceID + "/agents/" + agentID
}
