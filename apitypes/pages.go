package apitypes

// Page sizes of the paged lists (the limit query parameter): a request
// without a limit gets the default, and none gets more than the maximum.
// They are part of the API's contract (the OpenAPI document states them).
const (
	// DefaultPageSize is the page size of the lists of Namespaces, Agents,
	// Configurations, revisions, service principals, roles, access
	// bindings and restrictions when the request gives no limit.
	DefaultPageSize = 100
	// MaxPageSize is the largest limit those lists accept.
	MaxPageSize = 500
	// DefaultAuditPageSize is the audit log's page size without a limit.
	DefaultAuditPageSize = 50
	// MaxAuditPageSize is the largest limit the audit log accepts.
	MaxAuditPageSize = 200
)
