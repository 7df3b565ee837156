package occ

import (
	"context"
	"encoding/json"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/workspace"
)

// Audit actions for Agents.
const (
	ActionAgentCreate = "openclaw.agents.create"
	ActionAgentUpdate = "openclaw.agents.update"
	ActionAgentDeploy = "openclaw.agents.deploy"
	ActionAgentStop   = "openclaw.agents.stop"
	ActionAgentDelete = "openclaw.agents.delete"
)

// AgentInput is a request to create an Agent. InitialWorkspaceFiles is the
// raw JSON value of the field (nil when absent); it is validated here and
// staged privately, never stored on the Agent.
type AgentInput struct {
	Name                  string
	ConfigurationID       string
	InitialWorkspaceFiles json.RawMessage
	// WorkspaceDefaultsID is nil when the field was absent.
	WorkspaceDefaultsID *string
}

func resAgent(a store.Agent) store.AuditResource {
	return store.AuditResource{Kind: store.KindAgent, ID: a.ID, NamespaceID: a.NamespaceID}
}

// requireAccepting refuses new resources in a Namespace that is failed or
// being deleted, with 409 RESOURCE_CONFLICT as the reference does
// (NAMESPACE_NOT_READY is deploy's answer for a Namespace not ready yet).
func requireAccepting(ns store.Namespace) error {
	if ns.Status == store.NamespaceProvisioning || ns.Status == store.NamespaceReady {
		return nil
	}
	return errkind.New(errkind.Conflict, "The Namespace is not accepting new resources.")
}

// CreateAgent creates an active, stopped Agent with no revision. When
// initial workspace files are supplied (a non-empty map) they are staged in
// a private workspace setup record in the same transaction; they never
// appear in the Agent, any response, log line or audit record.
func (s *Service) CreateAgent(ctx context.Context, namespaceID string, in AgentInput) (store.Agent, error) {
	if err := validateName("/name", in.Name); err != nil {
		return store.Agent{}, err
	}
	if !ids.Valid(ids.Configuration, in.ConfigurationID) {
		return store.Agent{}, errkind.InvalidDetails("The configuration id is malformed.",
			errkind.Detail{Path: "/configurationId", Code: errkind.DetailInvalidFormat})
	}
	files, err := workspace.NormalizeInitialFilesJSON(in.InitialWorkspaceFiles)
	if err != nil {
		return store.Agent{}, err
	}
	defaultsID := ""
	if in.WorkspaceDefaultsID != nil {
		defaultsID = *in.WorkspaceDefaultsID
		if err := workspace.ValidateDefaultsID(defaultsID); err != nil {
			return store.Agent{}, err
		}
	}
	now := s.clock()
	a := store.Agent{ID: ids.New(ids.Agent), NamespaceID: namespaceID, Name: in.Name, ConfigurationID: in.ConfigurationID,
		Status: store.AgentActive, DesiredRuntimeState: store.RuntimeStopped, CreatedAt: now, UpdatedAt: now}
	var setup *store.WorkspaceSetup
	if len(files) > 0 {
		setup = &store.WorkspaceSetup{ID: ids.New(ids.WorkspaceSetup), NamespaceID: namespaceID, AgentID: a.ID,
			DefaultsID: defaultsID, Files: files}
	}
	err = s.store.InTx(ctx, func(tx store.Store) error {
		ns, err := tx.GetNamespace(ctx, namespaceID)
		if err != nil {
			return err
		}
		// Authorize the creation before revealing anything about the
		// configuration or the defaults.
		if err := authorize(ctx, tx, store.ActionCreate, authz.Resource{Kind: store.KindAgent, NamespaceID: namespaceID}); err != nil {
			return err
		}
		if err := requireAccepting(ns); err != nil {
			return err
		}
		if _, err := tx.GetConfiguration(ctx, namespaceID, in.ConfigurationID); err != nil {
			return err
		}
		if in.WorkspaceDefaultsID != nil {
			if err := workspace.CheckDefaultsID(defaultsID); err != nil {
				return err
			}
		}
		if err := tx.CreateAgent(ctx, a, setup); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionAgentCreate, resAgent(a),
			map[string]string{"name": a.Name, "configurationId": a.ConfigurationID})
	})
	return a, err
}

// GetAgent returns an Agent the caller may read. Read on the exact Agent
// is enough: its Namespace is implied by the path.
func (s *Service) GetAgent(ctx context.Context, namespaceID, id string) (store.Agent, error) {
	return s.store.GetAgent(ctx, namespaceID, id)
}

// ListAgents returns exactly the Agents of a Namespace the caller may read
// (the authorizing store answers 404 when it may read neither the
// Namespace nor any of its Agents, or the Namespace does not exist), one
// page at a time.
func (s *Service) ListAgents(ctx context.Context, namespaceID string, q PageQuery) (Page[store.Agent], error) {
	return paged(q, func(p store.PageRequest) (store.Page[store.Agent], error) {
		return s.store.ListAgents(ctx, namespaceID, p)
	})
}

// AgentPatch changes an Agent. The reference requires configurationId on
// every PATCH; the name may change too.
type AgentPatch struct {
	ConfigurationID string
	Name            *string
}

// UpdateAgent changes an active Agent's configuration (and name). It does
// not deploy anything.
func (s *Service) UpdateAgent(ctx context.Context, namespaceID, id string, p AgentPatch) (store.Agent, error) {
	if !ids.Valid(ids.Configuration, p.ConfigurationID) {
		return store.Agent{}, errkind.InvalidDetails("The configuration id is malformed.",
			errkind.Detail{Path: "/configurationId", Code: errkind.DetailInvalidFormat})
	}
	if p.Name != nil {
		if err := validateName("/name", *p.Name); err != nil {
			return store.Agent{}, err
		}
	}
	var out store.Agent
	err := s.store.InTx(ctx, func(tx store.Store) error {
		sc, err := visibleAgentFor(ctx, tx, store.ActionUpdate, namespaceID, id)
		if err != nil {
			return err
		}
		a := sc.Agent
		if a.Status != store.AgentActive {
			return errAgentDeleting()
		}
		if _, err := tx.GetConfiguration(ctx, namespaceID, p.ConfigurationID); err != nil {
			return err
		}
		a.ConfigurationID = p.ConfigurationID
		if p.Name != nil {
			a.Name = *p.Name
		}
		a.UpdatedAt = s.clock()
		if out, err = tx.UpdateAgent(ctx, a); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionAgentUpdate, resAgent(out),
			map[string]string{"name": out.Name, "configurationId": out.ConfigurationID})
	})
	return out, err
}

func errAgentDeleting() error {
	return errkind.WithCode(errkind.Conflict, errkind.CodeAgentDeleting, "The Agent is being deleted.")
}

// Deploy snapshots the Agent's configuration into a new immutable revision,
// asks for the Agent to run, and queues the deployment. The revision id is
// the deployment id. The Namespace must be ready; the caller needs deploy
// on the Agent and read on its Configuration, nothing on the Namespace.
func (s *Service) Deploy(ctx context.Context, namespaceID, id string) (store.Revision, error) {
	var rev store.Revision
	err := s.store.InTx(ctx, func(tx store.Store) error {
		sc, err := visibleAgentFor(ctx, tx, store.ActionDeploy, namespaceID, id)
		if err != nil {
			return err
		}
		a := sc.Agent
		if a.Status != store.AgentActive {
			return errAgentDeleting()
		}
		if sc.Namespace.Status != store.NamespaceReady {
			return errkind.WithCode(errkind.Conflict, errkind.CodeNamespaceNotReady, "The Namespace is not ready for deployments.")
		}
		cfg, err := tx.GetConfiguration(ctx, namespaceID, a.ConfigurationID)
		if err != nil {
			return err
		}
		now := s.clock()
		rev, err = tx.CreateRevision(ctx, store.Revision{
			ID: ids.New(ids.Revision), NamespaceID: namespaceID, AgentID: id,
			ConfigurationID: cfg.ID, ConfigurationKind: cfg.Kind, ConfigurationGeneration: cfg.Generation,
			Configuration: cfg.Document, ComputeDriverID: s.driverID, CreatedBy: actorID(ctx), CreatedAt: now,
		})
		if err != nil {
			return err
		}
		if _, err := tx.SetAgentRuntimeState(ctx, namespaceID, id, store.RuntimeRunning, now); err != nil {
			return err
		}
		if _, err := enqueue(ctx, tx, store.WorkItem{Kind: store.WorkRevisionDeploy, IdempotencyKey: DeploymentWorkKey(rev.ID), NamespaceID: namespaceID, AgentID: id, RevisionID: rev.ID}, now); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionAgentDeploy, resAgent(a), map[string]string{"revisionId": rev.ID})
	})
	return rev, err
}

// DeploymentWorkKey is the idempotency key of a revision's deployment work.
func DeploymentWorkKey(revisionID string) string { return revisionID + ":reconcile" }

func actorID(ctx context.Context) string {
	if s := authz.SubjectFrom(ctx); s != nil {
		return s.ID
	}
	return ""
}

// Stop asks for the Agent's runtime to stop and queues the stop.
func (s *Service) Stop(ctx context.Context, namespaceID, id string) (store.Agent, error) {
	var out store.Agent
	err := s.store.InTx(ctx, func(tx store.Store) error {
		sc, err := visibleAgentFor(ctx, tx, store.ActionOperate, namespaceID, id)
		if err != nil {
			return err
		}
		a := sc.Agent
		if a.Status != store.AgentActive {
			return errAgentDeleting()
		}
		now := s.clock()
		if out, err = tx.SetAgentRuntimeState(ctx, namespaceID, id, store.RuntimeStopped, now); err != nil {
			return err
		}
		if _, err := enqueue(ctx, tx, store.WorkItem{Kind: store.WorkAgentStop, IdempotencyKey: id + ":stop:" + ids.New(""), NamespaceID: namespaceID, AgentID: id}, now); err != nil {
			return err
		}
		return s.audit.Mutation(ctx, tx, ActionAgentStop, resAgent(a), nil)
	})
	return out, err
}

// DeleteAgent starts the Agent's teardown: status deleting, desired
// stopped, queued deployments cancelled, teardown queued. An Agent that
// never activated a revision has its pending initial files erased at once,
// without waiting for the worker. Repeating the call is idempotent while
// the teardown is queued or running; one given up is queued again
// (queueDelete).
func (s *Service) DeleteAgent(ctx context.Context, namespaceID, id string) (store.Agent, error) {
	var out store.Agent
	err := s.store.InTx(ctx, func(tx store.Store) error {
		sc, err := visibleAgentFor(ctx, tx, store.ActionDelete, namespaceID, id)
		if err != nil {
			return err
		}
		a := sc.Agent
		now := s.clock()
		if out, err = tx.MarkAgentDeleting(ctx, namespaceID, id, actorID(ctx), now); err != nil {
			return err
		}
		if a.Status != store.AgentDeleting {
			if _, err := tx.CancelAgentWork(ctx, namespaceID, id, []string{store.WorkRevisionDeploy, store.WorkAgentStop}, now); err != nil {
				return err
			}
			if a.ActiveRevisionID == "" {
				if _, err := tx.DeleteWorkspaceSetup(ctx, namespaceID, id); err != nil {
					return err
				}
			}
		}
		queued, err := queueDelete(ctx, tx, store.WorkItem{Kind: store.WorkAgentDelete, IdempotencyKey: id + ":delete", NamespaceID: namespaceID, AgentID: id}, now)
		if err != nil {
			return err
		}
		if !queued {
			return nil // already deleting, its teardown queued or running: nothing more to audit
		}
		return s.audit.Mutation(ctx, tx, ActionAgentDelete, resAgent(a), map[string]string{"name": a.Name})
	})
	return out, err
}

// visibleAgentFor is GetAgentFor for an operation whose answer shows the
// Agent (PATCH, deploy, stop and delete answer with the Agent or its new
// revision): besides action the caller needs read on the Agent, and one
// that may not read it gets 404, exactly as if it did not exist
// (docs/authorization.md), before anything changes. A file write needs
// only operate: its answer is the hash of what the caller sent.
func visibleAgentFor(ctx context.Context, tx store.Store, action store.Action, namespaceID, id string) (store.AgentScope, error) {
	sc, err := tx.GetAgentFor(ctx, action, namespaceID, id)
	if err != nil {
		return store.AgentScope{}, err
	}
	if err := authorize(ctx, tx, store.ActionRead, authz.Resource{Kind: store.KindAgent, NamespaceID: namespaceID, ID: id}); err != nil {
		return store.AgentScope{}, err
	}
	return sc, nil
}
