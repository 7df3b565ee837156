package occ

import (
	"context"
	"time"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// Deployment states, as apitypes.DeploymentStatus reports them.
const (
	DeploymentQueued    = "queued"    // waiting; no live worker claim
	DeploymentRunning   = "running"   // a worker holds a live claim
	DeploymentSucceeded = "succeeded" // activated
	DeploymentFailed    = "failed"    // ended without activating
)

// DeploymentError is why a deployment failed.
type DeploymentError struct {
	Code    string
	Message string
}

// DeploymentProgress says what the last unfinished attempt saw and when the
// next one is due.
type DeploymentProgress struct {
	LastAttempt   *store.WorkAttempt
	NextAttemptAt *time.Time
	Attempts      int
}

// Deployment is the status of one revision's deployment. Its wire form is
// apitypes.Deployment.
type Deployment struct {
	ID          string
	NamespaceID string
	AgentID     string
	Revision    int64
	Status      string
	Error       *DeploymentError
	Progress    *DeploymentProgress
	CreatedAt   time.Time
	UpdatedAt   time.Time
}

// GetDeployment reports a deployment's status from its work item. The
// caller needs read on the Agent and on its revisions, both of which a
// binding on the exact Agent covers; nothing on the Namespace.
func (s *Service) GetDeployment(ctx context.Context, namespaceID, agentID, revisionID string) (Deployment, error) {
	if _, err := s.store.GetAgent(ctx, namespaceID, agentID); err != nil {
		return Deployment{}, err
	}
	rev, err := s.store.GetRevision(ctx, namespaceID, agentID, revisionID)
	if err != nil {
		return Deployment{}, err
	}
	w, err := s.store.GetWorkByKey(ctx, DeploymentWorkKey(rev.ID))
	if err != nil {
		if errkind.Is(err, errkind.NotFound) {
			return Deployment{}, errkind.New(errkind.NotFound, "The requested resource was not found.")
		}
		return Deployment{}, err
	}
	return deploymentFrom(rev, w, s.clock()), nil
}

func deploymentFrom(rev store.Revision, w store.WorkItem, now time.Time) Deployment {
	d := Deployment{ID: rev.ID, NamespaceID: rev.NamespaceID, AgentID: rev.AgentID, Revision: rev.Number,
		CreatedAt: rev.CreatedAt, UpdatedAt: w.UpdatedAt}
	switch w.State {
	case store.WorkSucceeded:
		d.Status = DeploymentSucceeded
	case store.WorkFailedPermanent, store.WorkCancelled:
		d.Status = DeploymentFailed
		d.Error = &DeploymentError{Code: w.ReasonCode, Message: w.LastError}
		if d.Error.Code == "" {
			d.Error.Code = "CANCELLED"
		}
	case store.WorkRunning:
		if w.LeaseExpiresAt.After(now) {
			d.Status = DeploymentRunning
		} else {
			d.Status = DeploymentQueued
		}
	default:
		d.Status = DeploymentQueued
	}
	if d.Status == DeploymentQueued || d.Status == DeploymentRunning {
		p := &DeploymentProgress{LastAttempt: w.LastAttempt, Attempts: w.Attempts}
		if d.Status == DeploymentQueued && w.Attempts > 0 {
			at := w.AvailableAt
			p.NextAttemptAt = &at
		}
		d.Progress = p
	}
	return d
}

// ListRevisions returns one page of the Agent's revisions the caller may
// read, by number.
func (s *Service) ListRevisions(ctx context.Context, namespaceID, agentID string, q PageQuery) (Page[store.Revision], error) {
	if _, err := s.store.GetAgent(ctx, namespaceID, agentID); err != nil {
		return Page[store.Revision]{}, err
	}
	return paged(q, func(p store.PageRequest) (store.Page[store.Revision], error) {
		return s.store.ListRevisions(ctx, namespaceID, agentID, p)
	})
}
