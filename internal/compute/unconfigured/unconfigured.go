// Package unconfigured is the Compute driver used when no backend is
// configured: Namespaces become ready (they need nothing from a backend),
// and every deployment fails permanently with COMPUTE_NOT_CONFIGURED
// instead of pretending to run anything.
package unconfigured

import (
	"context"
	"errors"

	"github.com/openclaw/occ/internal/compute"
)

// Code is the failure code of every deployment.
const Code = "COMPUTE_NOT_CONFIGURED"

var errNone = errors.New("no Compute driver is configured")

// Driver is the unconfigured driver.
type Driver struct{}

var _ compute.Driver = Driver{}

func (Driver) ID() string                                               { return "unconfigured" }
func (Driver) Capabilities() compute.Capabilities                       { return compute.Capabilities{} }
func (Driver) EnsureNamespace(context.Context, compute.Namespace) error { return nil }
func (Driver) DeleteNamespace(context.Context, compute.Namespace) error { return nil }
func (Driver) PrepareRevision(context.Context, compute.Revision, compute.RevisionContext) (compute.PrepareResult, error) {
	return compute.PrepareResult{}, compute.Permanent(Code, errNone)
}
func (Driver) ActivateRevision(context.Context, compute.Revision, compute.RevisionContext) error {
	return compute.Permanent(Code, errNone)
}
func (Driver) StopRevision(context.Context, compute.Revision) error   { return nil }
func (Driver) RetireRevision(context.Context, compute.Revision) error { return nil }
func (Driver) DeleteAgent(context.Context, compute.Agent) error       { return nil }
func (Driver) Endpoint(context.Context, compute.Revision) (compute.Endpoint, error) {
	return compute.Endpoint{}, compute.ErrNoEndpoint
}
