// Package authz owns authorization: the permission table (resource kinds
// and the actions each supports), the decision over a subject's access
// bindings and deny restrictions, and the Store wrapper through which every
// data access of a request or job passes.
//
// Visibility rule: a subject that may not read a resource gets NotFound for
// it, exactly as if it did not exist; a subject that may read it but not
// perform the action gets PermissionDenied. Denials are audited.
package authz
