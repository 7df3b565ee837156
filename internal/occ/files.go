package occ

import (
	"context"
	"errors"
	"time"

	"go.opentelemetry.io/otel"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/audit"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/workspace"
)

// ActionWorkspaceFileWrite is the audit action of a workspace file write.
const ActionWorkspaceFileWrite = "openclaw.agents.workspace.files.write"

// Reason codes of workspace file write audit records.
const (
	ReasonUnknownOutcome        = "UNKNOWN_OUTCOME"
	ReasonDependencyUnavailable = "DEPENDENCY_UNAVAILABLE"
	ReasonFileMissing           = "FILE_MISSING"
	ReasonPreconditionFailed    = "PRECONDITION_FAILED"
)

// FileAccess is how the Service reaches running Agents' gateways; it is
// part of the Service's Options. Without it (nil Client or Driver)
// workspace file routes answer 503.
type FileAccess struct {
	Client agentgw.FileClient
	Driver compute.Driver
	// Routed authenticates to routed endpoints; without its KeyFile a
	// routed endpoint is unavailable.
	Routed agentgw.RoutedAuth
	// Timeout bounds one operation from admission to the native answer
	// (default 30 s). The request context's cancellation (a client that
	// disconnects) ends it too.
	Timeout time.Duration
}

// tracer starts the domain spans of workspace file operations (the global
// provider's, a no-op until tracing is set up). They carry no attributes:
// their parent, the request's span, names the route, and neither the
// content nor the file's hash ever goes on a span.
var tracer = otel.Tracer("github.com/openclaw/occ/internal/occ")

func (s *Service) fileDeadline(ctx context.Context) (context.Context, context.CancelFunc) {
	d := s.files.Timeout
	if d <= 0 {
		d = 30 * time.Second
	}
	return context.WithTimeout(ctx, d)
}

// WorkspaceFile is a file read from an Agent's gateway; Hash is the
// SHA-256 (hex) of Content. Its wire form is apitypes.WorkspaceFile, with
// the hash in the ETag header.
type WorkspaceFile struct {
	Name    string
	Content string
	Hash    string
}

// WrittenFile is the result of a write: Size is the content's length in
// bytes, Hash its SHA-256 (hex). Its wire form is apitypes.WrittenFile.
type WrittenFile struct {
	Name string
	Size int
	Hash string
}

var (
	errFilesUnavailable = errkind.New(errkind.Unavailable, "Workspace file access is not available for this Agent.")
	errFileNotFound     = errkind.New(errkind.NotFound, "The requested workspace file was not found.")
	errGatewayFailed    = errkind.New(errkind.Unavailable, "The Agent's gateway did not complete the operation.")
	errUnknownOutcome   = errkind.New(errkind.OutcomeUnknown,
		"The write may or may not have been applied. Read the file and compare its hash before retrying.")
)

func invalidName() error {
	return errkind.InvalidDetails("The file name must be AGENTS.md, SOUL.md, IDENTITY.md or USER.md.",
		errkind.Detail{Path: "/path/name", Code: errkind.DetailInvalidValue})
}

// activeTarget selects the exact Agent's active revision and resolves the
// gateway to talk to. The caller needs action (read for a read, operate
// for a write) on that exact Agent and nothing else: not its Namespace
// (implied by the path), not its revisions (they belong to it). Order
// (reference: getAuthorizedActiveAgentRevision): authorize (404 hidden /
// 403 visible), then for operate the Agent must be active (409
// AGENT_DELETING) and want to run (409 RESOURCE_CONFLICT); an Agent with
// no active revision, or whose revision row is gone, is 503.
func (s *Service) activeTarget(ctx context.Context, namespaceID, agentID string, action store.Action) (agentgw.Target, error) {
	if s.files.Client == nil || s.files.Driver == nil {
		return agentgw.Target{}, errFilesUnavailable
	}
	sc, err := s.store.GetAgentFor(ctx, action, namespaceID, agentID)
	if err != nil {
		return agentgw.Target{}, err
	}
	a := sc.Agent
	if action != store.ActionRead {
		if a.Status != store.AgentActive {
			return agentgw.Target{}, errAgentDeleting()
		}
		if a.DesiredRuntimeState != store.RuntimeRunning {
			return agentgw.Target{}, errkind.New(errkind.Conflict, "The Agent's files are not writable while it is stopped or stopping.")
		}
	}
	if a.ActiveRevisionID == "" {
		return agentgw.Target{}, errkind.New(errkind.Unavailable, "The Agent has no active revision yet.")
	}
	if sc.ActiveRevision == nil {
		return agentgw.Target{}, errkind.New(errkind.Unavailable, "The Agent's active revision is not available.")
	}
	ep, err := s.files.Driver.Endpoint(ctx, sc.ActiveRevision.ForDriver(a.Name))
	if err != nil {
		return agentgw.Target{}, errkind.Wrap(errkind.Unavailable, "The Agent's gateway cannot be reached through its Compute driver.", err)
	}
	t, err := agentgw.TargetFor(ep, s.files.Routed)
	switch {
	case errors.Is(err, agentgw.ErrRoutedNotConfigured):
		return agentgw.Target{}, errkind.Wrap(errkind.Unavailable, "Routed gateway access is not configured (no service key file).", err)
	case err != nil:
		return agentgw.Target{}, errkind.Wrap(errkind.Unavailable, errFilesUnavailable.Message, err)
	}
	return t, nil
}

// GetWorkspaceFile reads one of the four files from the Agent's running
// gateway. Reads are not audited (denials are, by the authorization layer).
func (s *Service) GetWorkspaceFile(ctx context.Context, namespaceID, agentID, name string) (WorkspaceFile, error) {
	ctx, span := tracer.Start(ctx, "occ.GetWorkspaceFile")
	defer span.End()
	if s.files.Client == nil || s.files.Driver == nil {
		return WorkspaceFile{}, errFilesUnavailable
	}
	if !workspace.ValidName(name) {
		return WorkspaceFile{}, invalidName()
	}
	ctx, cancel := s.fileDeadline(ctx)
	defer cancel()
	t, err := s.activeTarget(ctx, namespaceID, agentID, store.ActionRead)
	if err != nil {
		return WorkspaceFile{}, err
	}
	f, err := s.files.Client.Get(ctx, t, name)
	if err != nil {
		return WorkspaceFile{}, errkind.Wrap(errkind.Unavailable, errGatewayFailed.Message, err)
	}
	if f.Missing {
		return WorkspaceFile{}, errFileNotFound
	}
	// The client checked the content rule and the hash; check again here
	// so that no fake or future client can hand the API bad content.
	if workspace.CheckContent(f.Content) != nil {
		return WorkspaceFile{}, errGatewayFailed
	}
	return WorkspaceFile{Name: name, Content: f.Content, Hash: digest.Of(f.Content)}, nil
}

// PutWorkspaceFile writes one of the four files on the Agent's running
// gateway. expectedHash, when set, makes it a compare-and-swap: a file that
// changed since it was read answers 412 PRECONDITION_FAILED with the
// current hash. Every write is audited ahead and after, without content:
//
//   - before the set frame can be sent, an "attempted" record is committed
//     (audit.Recorder.Attempt, run by the client alongside its dial and
//     handshake: agentgw.FileClient.SetAdmitted); if it cannot be, nothing
//     is sent and the answer is 503 DEPENDENCY_UNAVAILABLE. Every outcome record below
//     names it (attemptId), so an attempt without outcome is a write whose
//     OCC process died in flight (GET /audit-events?withoutOutcome=true).
//   - success → audit success; if that audit cannot be written the write
//     happened but is unrecorded, which the caller is told as 503
//     UNKNOWN_OUTCOME.
//   - unknown outcome (the set frame was sent, no reliable answer, or the
//     deadline or a client disconnect hit in flight) → audit failure
//     UNKNOWN_OUTCOME → 503 UNKNOWN_OUTCOME, even if the audit fails. OCC
//     never replays the write.
//   - any other failure → audit failure with its reason → its status; if
//     that audit cannot be written → 503 DEPENDENCY_UNAVAILABLE.
func (s *Service) PutWorkspaceFile(ctx context.Context, namespaceID, agentID, name, content, expectedHash string) (WrittenFile, error) {
	ctx, span := tracer.Start(ctx, "occ.PutWorkspaceFile")
	defer span.End()
	if s.files.Client == nil || s.files.Driver == nil {
		return WrittenFile{}, errFilesUnavailable
	}
	if !workspace.ValidName(name) {
		return WrittenFile{}, invalidName()
	}
	if details := workspace.ContentDetails("/content", content); len(details) > 0 {
		return WrittenFile{}, errkind.InvalidDetails("The content must be valid Unicode without NUL, at most 16,384 UTF-8 bytes.", details...)
	}
	ctx, cancelDeadline := s.fileDeadline(ctx)
	defer cancelDeadline()
	t, err := s.activeTarget(ctx, namespaceID, agentID, store.ActionOperate)
	if err != nil {
		return WrittenFile{}, err
	}
	res := store.AuditResource{Kind: store.KindAgent, ID: agentID, NamespaceID: namespaceID}
	// The write-ahead record is the write's admission: the client commits
	// it while it dials and does the handshake, and sends the set frame
	// only once it is committed. The client returns only after admit has,
	// so attemptID and attemptErr are settled below.
	var attemptID string
	var attemptErr error
	admit := func(ctx context.Context) error {
		attemptID, attemptErr = s.audit.Attempt(ctx, ActionWorkspaceFileWrite, res, map[string]string{"workspaceFileName": name})
		return attemptErr
	}
	f, err := s.files.Client.SetAdmitted(ctx, t, name, content, expectedHash, admit)
	if attemptErr != nil {
		return WrittenFile{}, errkind.Wrap(errkind.Unavailable, "The write was not sent: its audit record could not be written.", attemptErr)
	}
	// The audit must be written even when the request context ended (a
	// client disconnect or the deadline is exactly when it matters most).
	actx, cancel := context.WithTimeout(context.WithoutCancel(ctx), audit.AfterTimeout)
	defer cancel()
	record := func(outcome, reason string) error {
		return s.audit.Record(actx, nil, store.AuditEvent{
			Kind: store.AuditMutation, Action: ActionWorkspaceFileWrite, Resource: res,
			Outcome: outcome, ReasonCode: reason, Details: map[string]string{"workspaceFileName": name},
			AttemptID: attemptID,
		})
	}
	switch {
	case err == nil && f.Missing:
		// The native client never reports missing on writes; treat it as
		// the reference does.
		if aerr := record(store.OutcomeFailure, ReasonFileMissing); aerr != nil {
			return WrittenFile{}, errGatewayFailed
		}
		return WrittenFile{}, errFileNotFound
	case err == nil:
		if aerr := record(store.OutcomeSuccess, ""); aerr != nil {
			return WrittenFile{}, errkind.Wrap(errkind.OutcomeUnknown,
				"The write was applied but could not be recorded; treat its outcome as unknown.", aerr)
		}
		return WrittenFile{Name: name, Size: len(content), Hash: digest.Of(content)}, nil
	}
	var gerr *agentgw.Error
	errors.As(err, &gerr)
	switch {
	case gerr != nil && gerr.Kind == agentgw.OutcomeUnknown:
		_ = record(store.OutcomeFailure, ReasonUnknownOutcome)
		return WrittenFile{}, errkind.Wrap(errkind.OutcomeUnknown, errUnknownOutcome.Message, err)
	case gerr != nil && gerr.Kind == agentgw.Conflict:
		if aerr := record(store.OutcomeFailure, ReasonPreconditionFailed); aerr != nil {
			return WrittenFile{}, errGatewayFailed
		}
		e := errkind.New(errkind.PreconditionFailed, "The file changed since it was read.")
		// A file that is missing has no hash: the key is left out, as
		// the native gateway leaves it out of its conflict.
		if gerr.CurrentHash != "" {
			e.Data = map[string]any{"currentHash": gerr.CurrentHash}
		}
		return WrittenFile{}, e
	default:
		if aerr := record(store.OutcomeFailure, ReasonDependencyUnavailable); aerr != nil {
			return WrittenFile{}, errGatewayFailed
		}
		return WrittenFile{}, errkind.Wrap(errkind.Unavailable, errGatewayFailed.Message, err)
	}
}
