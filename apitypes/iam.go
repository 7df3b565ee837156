package apitypes

import "time"

// Action is a permission verb. No action implies another.
type Action string

// The actions.
const (
	ActionCreate     Action = "create"     // create a resource of the kind
	ActionRead       Action = "read"       // read it
	ActionUpdate     Action = "update"     // change it
	ActionDelete     Action = "delete"     // delete it
	ActionDeploy     Action = "deploy"     // deploy an Agent
	ActionOperate    Action = "operate"    // stop an Agent, write its workspace files
	ActionAdminister Action = "administer" // manage identities and access
	ActionReadLogs   Action = "read_logs"  // read an Agent's logs
)

// ResourceKind names a kind of resource that permissions, bindings,
// restrictions and audit events talk about.
type ResourceKind string

// The resource kinds.
const (
	KindInstallation   ResourceKind = "installation"    // the installation itself
	KindNamespace      ResourceKind = "namespace"       // a Namespace
	KindConfiguration  ResourceKind = "configuration"   // a Configuration
	KindServiceAccount ResourceKind = "service_account" // a service principal
	KindAgent          ResourceKind = "agent"           // an Agent
	KindAgentRevision  ResourceKind = "agent_revision"  // an Agent's revision or deployment
	KindAuditEvent     ResourceKind = "audit_event"     // an audit event
	KindRole           ResourceKind = "role"            // a Role
	KindAccessBinding  ResourceKind = "access_binding"  // an access binding
	KindRestriction    ResourceKind = "restriction"     // a restriction
	KindAPIKey         ResourceKind = "api_key"         // a service API key
	KindUser           ResourceKind = "user"            // a user
)

// User is a human principal that signs in with email and password.
type User struct {
	// ID is the user's identifier ("usr_…").
	ID string `json:"id"`
	// Email is the sign-in address, unique in the installation.
	Email string `json:"email"`
	// CreatedAt is when the user was created.
	CreatedAt time.Time `json:"createdAt"`
}

func (User) isData() {}

// CreateUserRequest is the body of POST /iam/users.
type CreateUserRequest struct {
	// Email is the sign-in address.
	Email string `json:"email"`
	// Password is the initial password; only its hash is kept.
	Password string `json:"password"`
}

// ServicePrincipal is a non-human identity that authenticates with API
// keys.
type ServicePrincipal struct {
	// ID is the principal's identifier ("sa_…").
	ID string `json:"id"`
	// Name is unique in its scope.
	Name string `json:"name"`
	// NamespaceID, when present, limits the principal to one Namespace.
	NamespaceID string `json:"namespaceId,omitempty"`
	// AgentID, when present, marks a principal owned by that Agent; it
	// cannot use the API.
	AgentID string `json:"agentId,omitempty"`
	// CreatedAt is when the principal was created.
	CreatedAt time.Time `json:"createdAt"`
}

func (ServicePrincipal) isData() {}

// CreateServicePrincipalRequest is the body of POST /iam/service-principals.
type CreateServicePrincipalRequest struct {
	// Name of the principal.
	Name string `json:"name"`
	// NamespaceID, when set, limits the principal to one Namespace.
	NamespaceID string `json:"namespaceId,omitempty"`
}

// Permission grants one action on one kind of resource.
type Permission struct {
	// Action is the granted verb.
	Action Action `json:"action"`
	// ResourceKind is the kind it applies to.
	ResourceKind ResourceKind `json:"resourceKind"`
}

// Role is a named set of permissions. A Namespace role can only be bound
// inside its Namespace. Built-in roles cannot be deleted.
type Role struct {
	// ID is the role's identifier ("role_…").
	ID string `json:"id"`
	// NamespaceID, when present, makes this a Namespace role.
	NamespaceID string `json:"namespaceId,omitempty"`
	// Name is unique in its scope.
	Name string `json:"name"`
	// Permissions are what a binding of the role grants.
	Permissions []Permission `json:"permissions"`
	// Builtin marks the roles OCC creates itself.
	Builtin bool `json:"builtin"`
	// CreatedAt is when the role was created.
	CreatedAt time.Time `json:"createdAt"`
}

func (Role) isData() {}

// CreateRoleRequest is the body of POST /iam/roles.
type CreateRoleRequest struct {
	// Name must be unique in its scope.
	Name string `json:"name"`
	// NamespaceID, when set, makes a Namespace role.
	NamespaceID string `json:"namespaceId,omitempty"`
	// Permissions are what a binding of the role grants.
	Permissions []Permission `json:"permissions"`
}

// AccessBinding grants a Role to a subject installation-wide (no
// NamespaceID, no resource), in one Namespace (NamespaceID only), or on one
// exact resource (ResourceKind and ResourceID, with its NamespaceID).
type AccessBinding struct {
	// ID is the binding's identifier ("bnd_…").
	ID string `json:"id"`
	// NamespaceID scopes the binding to one Namespace; absent for an
	// installation-wide binding.
	NamespaceID string `json:"namespaceId,omitempty"`
	// SubjectID is the user or service principal granted the role.
	SubjectID string `json:"subjectId"`
	// RoleID is the granted role.
	RoleID string `json:"roleId"`
	// ResourceKind, with ResourceID, scopes the binding to one exact
	// resource; absent otherwise.
	ResourceKind ResourceKind `json:"resourceKind,omitempty"`
	// ResourceID is the exact resource; absent unless ResourceKind is set.
	ResourceID string `json:"resourceId,omitempty"`
	// CreatedAt is when the binding was created.
	CreatedAt time.Time `json:"createdAt"`
}

func (AccessBinding) isData() {}

// CreateAccessBindingRequest is the body of POST /iam/access-bindings.
type CreateAccessBindingRequest struct {
	// SubjectID is the user or service principal to grant the role to.
	SubjectID string `json:"subjectId"`
	// RoleID is the role to grant.
	RoleID string `json:"roleId"`
	// NamespaceID, when set, scopes the binding to one Namespace.
	NamespaceID string `json:"namespaceId,omitempty"`
	// ResourceKind, when set with ResourceID, scopes the binding to one
	// exact resource of that Namespace.
	ResourceKind ResourceKind `json:"resourceKind,omitempty"`
	// ResourceID is the exact resource.
	ResourceID string `json:"resourceId,omitempty"`
}

// EffectDeny is the only restriction effect.
const EffectDeny = "deny"

// Restriction denies one action on a kind of resource to a subject, with
// the same scoping as AccessBinding. A matching restriction always wins
// over any grant.
type Restriction struct {
	// ID is the restriction's identifier ("rst_…").
	ID string `json:"id"`
	// NamespaceID scopes the restriction to one Namespace; absent for an
	// installation-wide one.
	NamespaceID string `json:"namespaceId,omitempty"`
	// SubjectID is the restricted user or service principal.
	SubjectID string `json:"subjectId"`
	// Action is the denied verb.
	Action Action `json:"action"`
	// ResourceKind is the kind the denial applies to.
	ResourceKind ResourceKind `json:"resourceKind"`
	// ResourceID, when present, limits the denial to one exact resource.
	ResourceID string `json:"resourceId,omitempty"`
	// Effect is always EffectDeny.
	Effect string `json:"effect"`
	// CreatedAt is when the restriction was created.
	CreatedAt time.Time `json:"createdAt"`
}

func (Restriction) isData() {}

// CreateRestrictionRequest is the body of POST /iam/restrictions.
type CreateRestrictionRequest struct {
	// SubjectID is the user or service principal to restrict.
	SubjectID string `json:"subjectId"`
	// Action is the verb to deny.
	Action Action `json:"action"`
	// ResourceKind is the kind the denial applies to.
	ResourceKind ResourceKind `json:"resourceKind"`
	// NamespaceID, when set, scopes the restriction to one Namespace.
	NamespaceID string `json:"namespaceId,omitempty"`
	// ResourceID, when set, limits the denial to one exact resource.
	ResourceID string `json:"resourceId,omitempty"`
}
