package store

import "github.com/openclaw/occ/internal/compute"

// ForDriver is the one conversion of a stored revision into what a Compute
// driver is given (drivers never import the store). It lives here, beside
// the record it reads, because both the worker (deploy, stop, retire) and
// the domain (asking a driver for an Agent's gateway endpoint) need it and
// neither may import the other: the domain is under the API handlers, which
// must not depend on the worker. compute imports no OCC package, so this
// edge adds nothing else to the store's dependencies.
func (r Revision) ForDriver(agentName string) compute.Revision {
	return compute.Revision{ID: r.ID, NamespaceID: r.NamespaceID, AgentID: r.AgentID, AgentName: agentName,
		Number: r.Number, ConfigurationID: r.ConfigurationID, ConfigurationGeneration: r.ConfigurationGeneration,
		Configuration: r.Configuration}
}
