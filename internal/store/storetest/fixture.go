package storetest

import (
	"crypto/sha256"
	"encoding/json"
	"fmt"
	"testing"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// fixture creates valid records through the Store and returns them as the
// store must read them back (UTC, microseconds). Its clock ticks one minute
// per record, so creation order is time order.
type fixture struct {
	t    *testing.T
	s    store.Store
	tick int
}

func newFixture(t *testing.T, h Harness) *fixture { return &fixture{t: t, s: h.Store} }

// now returns the next instant.
func (f *fixture) now() int {
	f.tick++
	return f.tick
}

func (f *fixture) namespace() store.Namespace {
	f.t.Helper()
	n := f.now()
	ns := store.Namespace{
		ID: ids.New(ids.Namespace), Name: fmt.Sprintf("ns-%d", n), Status: store.NamespaceReady,
		CreatedAt: at(n), UpdatedAt: at(n),
	}
	must(f.t, "CreateNamespace", f.s.CreateNamespace(ctx(f.t), ns))
	ns.CreatedAt, ns.UpdatedAt = stored(ns.CreatedAt), stored(ns.UpdatedAt)
	return ns
}

// sampleDocument is a Configuration document whose exact bytes (key order,
// spacing, escapes) the store must keep.
const sampleDocument = `{"zeta": 1,  "alpha": {"b": [1, 2.50, "x\u00e9"], "a": null},
 "model": "openai/gpt"}`

func (f *fixture) configuration(ns store.Namespace) store.Configuration {
	f.t.Helper()
	n := f.now()
	c := store.Configuration{
		ID: ids.New(ids.Configuration), NamespaceID: ns.ID, Name: fmt.Sprintf("cfg-%d", n),
		Kind: store.ConfigurationKindAgent, Document: json.RawMessage(sampleDocument), Generation: 1,
		CreatedAt: at(n), UpdatedAt: at(n),
	}
	must(f.t, "CreateConfiguration", f.s.CreateConfiguration(ctx(f.t), c))
	c.CreatedAt, c.UpdatedAt = stored(c.CreatedAt), stored(c.UpdatedAt)
	return c
}

// newAgent returns an Agent value (not yet stored) using cfg.
func (f *fixture) newAgent(cfg store.Configuration) store.Agent {
	n := f.now()
	return store.Agent{
		ID: ids.New(ids.Agent), NamespaceID: cfg.NamespaceID, Name: fmt.Sprintf("agent-%d", n),
		ConfigurationID: cfg.ID, Status: store.AgentActive, DesiredRuntimeState: store.RuntimeStopped,
		CreatedAt: at(n), UpdatedAt: at(n),
	}
}

// agent stores an Agent with its own Namespace and Configuration unless
// cfg is given.
func (f *fixture) agent(cfg ...store.Configuration) store.Agent {
	f.t.Helper()
	var c store.Configuration
	if len(cfg) > 0 {
		c = cfg[0]
	} else {
		c = f.configuration(f.namespace())
	}
	a := f.newAgent(c)
	must(f.t, "CreateAgent", f.s.CreateAgent(ctx(f.t), a, nil))
	return storedAgent(a)
}

func storedAgent(a store.Agent) store.Agent {
	a.CreatedAt, a.UpdatedAt = stored(a.CreatedAt), stored(a.UpdatedAt)
	return a
}

// defaultsID is a valid workspace defaults id (64 lowercase hex).
var defaultsID = fmt.Sprintf("%x", sha256.Sum256([]byte("occ workspace defaults")))

func pendingSetup(a store.Agent) store.WorkspaceSetup {
	return store.WorkspaceSetup{
		ID: ids.New(ids.WorkspaceSetup), NamespaceID: a.NamespaceID, AgentID: a.ID, DefaultsID: defaultsID,
		Files: map[string]string{
			"AGENTS.md": "# Agents\r\n\tkeep CRLF and tabs\n",
			"SOUL.md":   "",
			"USER.md":   "naïve ✓ 𝄞",
		},
	}
}

// agentWithSetup stores a new Agent together with a pending setup.
func (f *fixture) agentWithSetup() (store.Agent, store.WorkspaceSetup) {
	f.t.Helper()
	a := f.newAgent(f.configuration(f.namespace()))
	ws := pendingSetup(a)
	must(f.t, "CreateAgent with setup", f.s.CreateAgent(ctx(f.t), a, &ws))
	return storedAgent(a), ws
}

func (f *fixture) user() store.User {
	f.t.Helper()
	n := f.now()
	u := store.User{
		ID: ids.New(ids.User), Email: fmt.Sprintf("User%d@Example.com", n),
		PasswordHash: "$argon2id$v=19$m=65536,t=3,p=4$c2FsdA$aGFzaA", CreatedAt: at(n),
	}
	must(f.t, "CreateUser", f.s.CreateUser(ctx(f.t), u))
	u.CreatedAt = stored(u.CreatedAt)
	return u
}

// hash32 is a 32-byte value standing in for a SHA-256 token or secret hash.
func hash32(s string) []byte {
	h := sha256.Sum256([]byte(s))
	return h[:]
}

func (f *fixture) principal() store.ServicePrincipal {
	f.t.Helper()
	n := f.now()
	sp := store.ServicePrincipal{ID: ids.New(ids.ServicePrincipal), Name: fmt.Sprintf("sp-%d", n), CreatedAt: at(n)}
	must(f.t, "CreateServicePrincipal", f.s.CreateServicePrincipal(ctx(f.t), sp))
	sp.CreatedAt = stored(sp.CreatedAt)
	return sp
}

func (f *fixture) role(perms ...store.Permission) store.Role {
	f.t.Helper()
	n := f.now()
	r := store.Role{ID: ids.New(ids.Role), Name: fmt.Sprintf("role-%d", n), Permissions: perms, CreatedAt: at(n)}
	if r.Permissions == nil {
		r.Permissions = []store.Permission{}
	}
	must(f.t, "CreateRole", f.s.CreateRole(ctx(f.t), r))
	r.CreatedAt = stored(r.CreatedAt)
	return r
}

func (f *fixture) binding(subjectID string, r store.Role) store.AccessBinding {
	f.t.Helper()
	n := f.now()
	b := store.AccessBinding{ID: ids.New(ids.Binding), SubjectID: subjectID, RoleID: r.ID, CreatedAt: at(n)}
	must(f.t, "CreateAccessBinding", f.s.CreateAccessBinding(ctx(f.t), b))
	b.CreatedAt = stored(b.CreatedAt)
	return b
}

func (f *fixture) restriction(subjectID string) store.Restriction {
	f.t.Helper()
	n := f.now()
	r := store.Restriction{
		ID: ids.New(ids.Restriction), SubjectID: subjectID, Action: store.ActionDelete,
		ResourceKind: store.KindAgent, Effect: "deny", CreatedAt: at(n),
	}
	must(f.t, "CreateRestriction", f.s.CreateRestriction(ctx(f.t), r))
	r.CreatedAt = stored(r.CreatedAt)
	return r
}

// second returns the error of a two-result call, for checks that only care
// whether a record exists.
func second[T any](_ T, err error) error { return err }

// newRevision returns a Revision value for a (not yet stored).
func (f *fixture) newRevision(a store.Agent) store.Revision {
	return store.Revision{
		ID: ids.New(ids.Revision), NamespaceID: a.NamespaceID, AgentID: a.ID,
		ConfigurationID: a.ConfigurationID, ConfigurationKind: store.ConfigurationKindAgent, ConfigurationGeneration: 1,
		Configuration: json.RawMessage(sampleDocument), ComputeDriverID: "test-driver", CreatedBy: "usr_deployer",
		CreatedAt: at(f.now()),
	}
}

func (f *fixture) revision(a store.Agent) store.Revision {
	f.t.Helper()
	r, err := f.s.CreateRevision(ctx(f.t), f.newRevision(a))
	must(f.t, "CreateRevision", err)
	return r
}

// newWork returns a queued WorkItem for a, due now (not yet stored).
func (f *fixture) newWork(a store.Agent, kind string) store.WorkItem {
	n := f.now()
	return store.WorkItem{
		ID: ids.New(ids.WorkItem), Kind: kind, IdempotencyKey: fmt.Sprintf("%s:%s:%d", a.ID, kind, n),
		NamespaceID: a.NamespaceID, AgentID: a.ID, ActorID: "usr_actor", State: store.WorkQueued,
		AvailableAt: at(n), CreatedAt: at(n), UpdatedAt: at(n),
	}
}

func (f *fixture) work(a store.Agent, kind string) store.WorkItem {
	f.t.Helper()
	w, err := f.s.EnqueueWork(ctx(f.t), f.newWork(a, kind))
	must(f.t, "EnqueueWork", err)
	return w
}
