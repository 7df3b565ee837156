package apitypes

import (
	"encoding/json"
	"time"
)

// NamespaceStatus is a Namespace's lifecycle state.
type NamespaceStatus string

// The Namespace states.
const (
	NamespaceProvisioning NamespaceStatus = "provisioning" // the driver is preparing it; Agents cannot deploy yet
	NamespaceReady        NamespaceStatus = "ready"        // usable
	NamespaceFailed       NamespaceStatus = "failed"       // provisioning failed permanently
	NamespaceDeleting     NamespaceStatus = "deleting"     // being torn down; it disappears when done
)

// Namespace groups Agents and Configurations and is the unit of
// Namespace-scoped access.
type Namespace struct {
	// ID is the Namespace's identifier ("ns_…").
	ID string `json:"id"`
	// Name is unique in the installation.
	Name string `json:"name"`
	// Status is the lifecycle state.
	Status NamespaceStatus `json:"status"`
	// CreatedAt is when the Namespace was created.
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is when the Namespace last changed.
	UpdatedAt time.Time `json:"updatedAt"`
}

func (Namespace) isData() {}

// CreateNamespaceRequest is the body of POST /namespaces.
type CreateNamespaceRequest struct {
	// Name must be unique in the installation.
	Name string `json:"name"`
}

// ConfigurationKindAgent is the only Configuration kind.
const ConfigurationKindAgent = "agent"

// Configuration is a native OpenClaw JSON document owned by a Namespace,
// which Agents reference.
type Configuration struct {
	// ID is the Configuration's identifier ("cfg_…").
	ID string `json:"id"`
	// NamespaceID is the owning Namespace.
	NamespaceID string `json:"namespaceId"`
	// Name is unique in the Namespace.
	Name string `json:"name"`
	// Kind is always ConfigurationKindAgent.
	Kind string `json:"kind"`
	// Document is the native OpenClaw configuration, byte for byte as
	// stored.
	Document json.RawMessage `json:"document"`
	// Generation starts at 1 and grows by one on every update.
	Generation int64 `json:"generation"`
	// CreatedAt is when the Configuration was created.
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is when the Configuration last changed.
	UpdatedAt time.Time `json:"updatedAt"`
}

func (Configuration) isData() {}

// CreateConfigurationRequest is the body of POST
// /namespaces/{ns}/configurations.
type CreateConfigurationRequest struct {
	// Name must be unique in the Namespace.
	Name string `json:"name"`
	// Kind must be ConfigurationKindAgent.
	Kind string `json:"kind"`
	// Document is the native OpenClaw configuration (a JSON object).
	Document json.RawMessage `json:"document"`
}

// PatchConfigurationRequest is the body of PATCH
// /namespaces/{ns}/configurations/{cfg}. Absent members are left as they
// are; a change to Document increments the generation.
type PatchConfigurationRequest struct {
	// Name, when present, renames the Configuration.
	Name *string `json:"name,omitempty"`
	// Document, when present, replaces the native document.
	Document json.RawMessage `json:"document,omitempty"`
}

// Reconciliation is one request to bring a ready Namespace's backend
// objects (for Kubernetes: the tenant namespace's route-attachment label,
// its RoleBinding and NetworkPolicies) in line with the current
// installation configuration. The worker carries it out; its status reads
// like a deployment's.
type Reconciliation struct {
	// ID identifies the reconciliation ("wrk_…").
	ID string `json:"id"`
	// NamespaceID is the reconciled Namespace.
	NamespaceID string `json:"namespaceId"`
	// Status is where it stands: queued, running, succeeded or failed.
	Status DeploymentStatus `json:"status"`
	// Error is why a failed reconciliation failed (for example
	// NAMESPACE_NOT_OWNED, GATEWAY_SELECTOR_CHANGED or
	// PERMISSIVE_NETWORK_POLICY, with a message naming the object); null
	// otherwise.
	Error *DeploymentError `json:"error"`
	// Progress is set while it is queued or running (a concurrent change
	// of an object shows here as the last attempt); null otherwise.
	Progress *DeploymentProgress `json:"progress"`
	// CreatedAt is when it was requested.
	CreatedAt time.Time `json:"createdAt"`
	// UpdatedAt is when its state last changed.
	UpdatedAt time.Time `json:"updatedAt"`
}

func (Reconciliation) isData() {}
