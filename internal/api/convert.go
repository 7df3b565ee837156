package api

import (
	"time"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/store"
)

// This file is the one place where store records and domain values become
// wire types (package apitypes) and request members become domain input.
// Handlers name no store type: they pass what the domain returns through a
// function here and write the result, and respond accepts only
// apitypes.Data, so a storage record cannot reach a client by accident. A
// field added to a store record therefore stays private until it is added
// to the wire type and copied here.
//
// Slices keep their nil-ness (a nil Role.Permissions is null on the wire,
// as it always was); lists are never null (see list).

// list converts a collection with one element converter. A nil or empty
// collection is {"items": []}.
func list[S any, T apitypes.Data](v []S, conv func(S) T) apitypes.List[T] {
	out := make([]T, 0, len(v))
	for _, e := range v {
		out = append(out, conv(e))
	}
	return apitypes.List[T]{Items: out}
}

func toNamespace(n store.Namespace) apitypes.Namespace {
	return apitypes.Namespace{ID: n.ID, Name: n.Name, Status: apitypes.NamespaceStatus(n.Status),
		CreatedAt: n.CreatedAt, UpdatedAt: n.UpdatedAt}
}

func toConfiguration(c store.Configuration) apitypes.Configuration {
	return apitypes.Configuration{ID: c.ID, NamespaceID: c.NamespaceID, Name: c.Name, Kind: c.Kind,
		Document: c.Document, Generation: c.Generation, CreatedAt: c.CreatedAt, UpdatedAt: c.UpdatedAt}
}

func toAgent(a store.Agent) apitypes.Agent {
	return apitypes.Agent{ID: a.ID, NamespaceID: a.NamespaceID, Name: a.Name, ConfigurationID: a.ConfigurationID,
		Status: apitypes.AgentStatus(a.Status), DesiredRuntimeState: apitypes.RuntimeState(a.DesiredRuntimeState),
		ActiveRevisionID: a.ActiveRevisionID, CreatedAt: a.CreatedAt, UpdatedAt: a.UpdatedAt}
}

func toRevision(r store.Revision) apitypes.Revision {
	return apitypes.Revision{ID: r.ID, NamespaceID: r.NamespaceID, AgentID: r.AgentID, Number: r.Number,
		ConfigurationID: r.ConfigurationID, ConfigurationKind: r.ConfigurationKind,
		ConfigurationGeneration: r.ConfigurationGeneration, Configuration: r.Configuration,
		ComputeDriverID: r.ComputeDriverID, CreatedAt: r.CreatedAt}
}

func toDeployment(d occ.Deployment) apitypes.Deployment {
	out := apitypes.Deployment{ID: d.ID, NamespaceID: d.NamespaceID, AgentID: d.AgentID, Revision: d.Revision,
		Status: apitypes.DeploymentStatus(d.Status), CreatedAt: d.CreatedAt, UpdatedAt: d.UpdatedAt}
	if d.Error != nil {
		out.Error = &apitypes.DeploymentError{Code: d.Error.Code, Message: d.Error.Message}
	}
	if p := d.Progress; p != nil {
		out.Progress = &apitypes.DeploymentProgress{NextAttemptAt: p.NextAttemptAt, Attempts: p.Attempts}
		if a := p.LastAttempt; a != nil {
			out.Progress.LastAttempt = &apitypes.DeploymentAttempt{Code: a.Code, Message: a.Message, At: a.At}
		}
	}
	return out
}

func toReconciliation(rc occ.Reconciliation) apitypes.Reconciliation {
	d := toDeployment(occ.Deployment{Status: rc.Status, Error: rc.Error, Progress: rc.Progress})
	return apitypes.Reconciliation{ID: rc.ID, NamespaceID: rc.NamespaceID, Status: d.Status, Error: d.Error,
		Progress: d.Progress, CreatedAt: rc.CreatedAt, UpdatedAt: rc.UpdatedAt}
}

// toWorkspaceFile drops the hash: it travels in the ETag header.
func toWorkspaceFile(f occ.WorkspaceFile) apitypes.WorkspaceFile {
	return apitypes.WorkspaceFile{Name: f.Name, Content: f.Content}
}

// toWrittenFile drops the hash: it travels in the ETag header.
func toWrittenFile(f occ.WrittenFile) apitypes.WrittenFile {
	return apitypes.WrittenFile{Name: f.Name, Size: f.Size}
}

func toUser(u store.User) apitypes.User {
	return apitypes.User{ID: u.ID, Email: u.Email, CreatedAt: u.CreatedAt}
}

func toServicePrincipal(sp store.ServicePrincipal) apitypes.ServicePrincipal {
	return apitypes.ServicePrincipal{ID: sp.ID, Name: sp.Name, NamespaceID: sp.NamespaceID, AgentID: sp.AgentID,
		CreatedAt: sp.CreatedAt}
}

// toSessionInfos lists sessions without their token hashes, marking the
// one whose id is current.
func toSessionInfos(v []store.Session, idleEnd func(store.Session) time.Time, current string) apitypes.List[apitypes.SessionInfo] {
	return list(v, func(se store.Session) apitypes.SessionInfo {
		return apitypes.SessionInfo{ID: se.ID, CreatedAt: se.CreatedAt, LastUsedAt: se.LastUsedAt, ExpiresAt: se.ExpiresAt,
			IdleExpiresAt: idleEnd(se), Current: current != "" && se.ID == current}
	})
}

// toServiceKey is the only conversion that carries a secret: the issued
// key, which the issuer sees this once.
func toServiceKey(k occ.IssuedKey) apitypes.ServiceKey {
	return apitypes.ServiceKey{ID: k.ID, ServicePrincipalID: k.ServicePrincipalID, NamespaceID: k.NamespaceID,
		Name: k.Name, CreatedBy: k.CreatedBy, ExpiresAt: k.ExpiresAt, RevokedAt: k.RevokedAt, CreatedAt: k.CreatedAt,
		Key: k.Key}
}

func toRole(r store.Role) apitypes.Role {
	var perms []apitypes.Permission
	if r.Permissions != nil {
		perms = make([]apitypes.Permission, 0, len(r.Permissions))
		for _, p := range r.Permissions {
			perms = append(perms, apitypes.Permission{Action: apitypes.Action(p.Action),
				ResourceKind: apitypes.ResourceKind(p.ResourceKind)})
		}
	}
	return apitypes.Role{ID: r.ID, NamespaceID: r.NamespaceID, Name: r.Name, Permissions: perms, Builtin: r.Builtin,
		CreatedAt: r.CreatedAt}
}

func toAccessBinding(b store.AccessBinding) apitypes.AccessBinding {
	return apitypes.AccessBinding{ID: b.ID, NamespaceID: b.NamespaceID, SubjectID: b.SubjectID, RoleID: b.RoleID,
		ResourceKind: apitypes.ResourceKind(b.ResourceKind), ResourceID: b.ResourceID, CreatedAt: b.CreatedAt}
}

func toRestriction(r store.Restriction) apitypes.Restriction {
	return apitypes.Restriction{ID: r.ID, NamespaceID: r.NamespaceID, SubjectID: r.SubjectID,
		Action: apitypes.Action(r.Action), ResourceKind: apitypes.ResourceKind(r.ResourceKind),
		ResourceID: r.ResourceID, Effect: r.Effect, CreatedAt: r.CreatedAt}
}

func toAuditPage(p occ.AuditPage) apitypes.AuditPage {
	out := apitypes.AuditPage{Items: make([]apitypes.AuditEvent, 0, len(p.Items)), NextCursor: p.NextCursor}
	for _, e := range p.Items {
		out.Items = append(out.Items, apitypes.AuditEvent{ID: e.ID, OccurredAt: e.OccurredAt, Kind: e.Kind,
			ActorID: e.ActorID, Credential: e.Credential, RequestID: e.RequestID, Action: e.Action,
			Resource: apitypes.AuditResource{Kind: apitypes.ResourceKind(e.Resource.Kind), ID: e.Resource.ID,
				NamespaceID: e.Resource.NamespaceID},
			Outcome: e.Outcome, ReasonCode: e.ReasonCode, Details: e.Details,
			AttemptID: e.AttemptID})
	}
	return out
}

// Request members that the domain takes as store values.

func fromPermissions(v []apitypes.Permission) []store.Permission {
	if v == nil {
		return nil
	}
	out := make([]store.Permission, 0, len(v))
	for _, p := range v {
		out = append(out, store.Permission{Action: store.Action(p.Action), ResourceKind: store.ResourceKind(p.ResourceKind)})
	}
	return out
}

func fromAction(a apitypes.Action) store.Action { return store.Action(a) }

func fromResourceKind(k apitypes.ResourceKind) store.ResourceKind { return store.ResourceKind(k) }

// filter is the store filter of GET /audit-events' query parameters.
func (q auditQuery) filter() store.AuditFilter {
	return store.AuditFilter{NamespaceID: q.namespaceID, ResourceKind: store.ResourceKind(q.resourceKind),
		ResourceID: q.resourceID, ActorID: q.actorID, Action: q.action, Kind: q.kind, Outcome: q.outcome,
		Since: q.since, Until: q.until, WithoutOutcome: q.withoutOutcome}
}
