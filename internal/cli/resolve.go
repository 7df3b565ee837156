package cli

import (
	"context"
	"fmt"
	"strings"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/client"
)

// Name resolution. Commands take an Agent, Namespace or Configuration as
// its id or its name. An argument with the kind's id prefix ("ns_",
// "agt_", "cfg_") is an id and is passed through unchanged (the server
// says whether it exists); anything else is a name, looked up with the
// kind's list route. Names are unique where they live, but a list holds
// only what the caller may read, so "unknown" can also mean "hidden".

// resolveNamespace returns the id of the Namespace named or identified by arg.
func resolveNamespace(ctx context.Context, c *client.Client, arg string) (string, error) {
	if strings.HasPrefix(arg, "ns_") {
		return arg, nil
	}
	list, err := c.ListNamespaces(ctx)
	if err != nil {
		return "", apiError(err)
	}
	return pick("Namespace", arg, list, func(n apitypes.Namespace) (string, string) { return n.Name, n.ID })
}

// resolveAgent returns the id of the Agent named or identified by arg in
// Namespace ns (an id).
func resolveAgent(ctx context.Context, c *client.Client, ns, arg string) (string, error) {
	if strings.HasPrefix(arg, "agt_") {
		return arg, nil
	}
	list, err := c.ListAgents(ctx, ns)
	if err != nil {
		return "", apiError(err)
	}
	return pick("Agent", arg, list, func(a apitypes.Agent) (string, string) { return a.Name, a.ID })
}

// resolveConfiguration returns the id of the Configuration named or
// identified by arg in Namespace ns (an id).
func resolveConfiguration(ctx context.Context, c *client.Client, ns, arg string) (string, error) {
	if strings.HasPrefix(arg, "cfg_") {
		return arg, nil
	}
	list, err := c.ListConfigurations(ctx, ns)
	if err != nil {
		return "", apiError(err)
	}
	return pick("Configuration", arg, list, func(x apitypes.Configuration) (string, string) { return x.Name, x.ID })
}

// pick finds the one item named name.
func pick[T any](kind, name string, items []T, key func(T) (name, id string)) (string, error) {
	var ids []string
	for _, it := range items {
		if n, id := key(it); n == name {
			ids = append(ids, id)
		}
	}
	switch len(ids) {
	case 0:
		return "", notFoundError("no %s named %q (or you may not read it)", kind, name)
	case 1:
		return ids[0], nil
	}
	return "", usageError(fmt.Errorf("the name %q matches %d %ss (%s): pass the id instead", name, len(ids), kind,
		strings.Join(ids, ", ")))
}
