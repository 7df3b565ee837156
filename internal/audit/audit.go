// Package audit owns OCC's audit trail: building events from the request
// context (actor, credential, request id), keeping file content and secrets
// out of them, and recording denials from the authorization layer.
//
// Events are written through the authorizing store as the system:audit
// subject, so audit writes pass the same single data-access layer as
// everything else. Recording is durable-first: Record returns the store's
// error and the caller decides (workspace writes, for example, answer
// UNKNOWN_OUTCOME when a success cannot be audited). Denial recording
// cannot fail the request it describes; its errors are logged.
package audit

import (
	"context"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// Detail keys that may appear in an event. Anything else is dropped before
// the event is written: details describe what happened, never the data
// (no file content, no secrets, no configuration documents).
var allowedDetails = map[string]bool{
	"name":               true,
	"email":              true,
	"status":             true,
	"generation":         true,
	"configurationId":    true,
	"roleId":             true,
	"subjectId":          true,
	"servicePrincipalId": true,
	"keyId":              true,
	"namespaceId":        true,
	"revisionId":         true,
	"resourceKind":       true,
	"resourceId":         true,
	"workspaceFileName":  true,
	"decision":           true,
	"restrictionId":      true,
	"expiresAt":          true,
	// Sign-in throttling (authn.Throttle): which counter, how many
	// failures, until when, and the client address it keys on.
	"throttleScope": true,
	"failures":      true,
	"until":         true,
	"clientAddress": true,
	// Session and credential revocation.
	"sessionId":       true,
	"sessionsRevoked": true,
	"keysRevoked":     true,
}

// Recorder writes audit events.
type Recorder struct {
	store     store.Store
	now       func() time.Time
	requestID func(context.Context) string
	logger    *slog.Logger
	failures  FailureObserver
}

// FailureObserver is told of every audit event the store refused to
// write, by event kind (metrics). Kinds are the store's fixed AuditKind
// values.
type FailureObserver interface {
	AuditWriteFailed(kind string)
}

// ObserveFailures sets the failure observer. Call it before the Recorder
// is used; it is not synchronised with Record.
func (r *Recorder) ObserveFailures(o FailureObserver) { r.failures = o }

// NewRecorder returns a Recorder writing through s (the authorizing
// store). requestID extracts the request id from a context; it may be nil.
func NewRecorder(s store.Store, now func() time.Time, requestID func(context.Context) string, logger *slog.Logger) *Recorder {
	if now == nil {
		now = time.Now
	}
	if logger == nil {
		logger = slog.Default()
	}
	return &Recorder{store: s, now: now, requestID: requestID, logger: logger}
}

// Record fills the event's id (unless set), time, actor, credential and request id from
// ctx, strips details that are not on the allowlist, and appends it through
// st, which is the transaction the recorded change belongs to (so that the
// change and its record commit or roll back together); nil means the
// recorder's own store, outside any transaction.
func (r *Recorder) Record(ctx context.Context, st store.Store, e store.AuditEvent) error {
	if e.ID == "" {
		e.ID = ids.New(ids.Audit)
	}
	e.OccurredAt = r.now().UTC().Truncate(time.Microsecond)
	if s := authz.SubjectFrom(ctx); s != nil {
		if e.ActorID == "" {
			e.ActorID = s.ID
		}
		if e.Credential == "" {
			e.Credential = s.Credential
		}
	}
	if e.ActorID == "" {
		e.ActorID = "anonymous"
	}
	if r.requestID != nil && e.RequestID == "" {
		e.RequestID = r.requestID(ctx)
	}
	if e.Resource.Kind == store.KindNamespace && e.Resource.NamespaceID == "" {
		e.Resource.NamespaceID = e.Resource.ID
	}
	for k := range e.Details {
		if !allowedDetails[k] {
			// A programming error, not a runtime condition: say so loudly
			// in logs but never write the value.
			r.logger.ErrorContext(ctx, "audit: dropped detail key not on the allowlist", "key", k, "action", e.Action)
			delete(e.Details, k)
		}
	}
	if st == nil {
		st = r.store
	}
	err := st.AppendAuditEvent(authz.WithSubject(ctx, authz.SystemSubject(authz.SystemAudit)), e)
	// A write abandoned because its caller went away (a client that
	// disconnected, a server shutting down) loses nothing: the change or
	// the gateway write it records was not made either. It is not a
	// failure to alert on. A deadline is: the database did not answer.
	if err != nil && r.failures != nil && !errors.Is(ctx.Err(), context.Canceled) {
		r.failures.AuditWriteFailed(string(e.Kind))
	}
	return err
}

// AfterTimeout bounds RecordAfter's write, and Flush's writes together.
const AfterTimeout = 5 * time.Second

// RecordAfter records e outside any transaction, for something that has
// already happened (a denial, a sign-in throttle): the write does not stop
// when ctx is cancelled, since a client that hangs up right after its
// request was judged must not erase the record of it (a brute-force client
// could otherwise leave no lockout behind). It is bounded by AfterTimeout
// instead, and keeps ctx's values (the request id in the log line).
func (r *Recorder) RecordAfter(ctx context.Context, e store.AuditEvent) error {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AfterTimeout)
	defer cancel()
	return r.Record(ctx, nil, e)
}

// Mutation records a successful change by the subject in ctx, inside the
// change's transaction tx.
func (r *Recorder) Mutation(ctx context.Context, tx store.Store, action string, res store.AuditResource, details map[string]string) error {
	return r.Record(ctx, tx, store.AuditEvent{
		Kind: store.AuditMutation, Action: action, Resource: res,
		Outcome: store.OutcomeSuccess, Details: details,
	})
}

// Attempt commits the write-ahead record of an operation whose effect lies
// outside OCC's database (a workspace file write sent to a gateway), before
// it is started, and returns the record's id. The caller then records the
// outcome with AttemptID set to that id. An attempt that no outcome record
// ever names (OCC died in between) stays visible as attempted without
// outcome (store.AuditFilter.WithoutOutcome). If Attempt fails the caller
// must not start the operation: an unrecorded attempt is what this exists
// to prevent.
func (r *Recorder) Attempt(ctx context.Context, action string, res store.AuditResource, details map[string]string) (string, error) {
	id := ids.New(ids.Audit)
	err := r.Record(ctx, nil, store.AuditEvent{
		ID: id, Kind: store.AuditMutation, Action: action, Resource: res,
		Outcome: store.OutcomeAttempted, Details: details,
	})
	if err != nil {
		return "", err
	}
	return id, nil
}

// Denial is an authz.DenialHook: it records an authorization_denial event.
// It never fails the request; a write error is logged.
//
// A denial usually happens inside a transaction that is then rolled back
// (the denial is its error), so the record must not be written in it, and
// writing outside it from within would deadlock an engine with a single
// writer. When ctx carries a denial buffer (see WithDenialBuffer) the event
// is queued and written by Flush after the request's transaction ended;
// otherwise it is written at once.
func (r *Recorder) Denial(ctx context.Context, s *authz.Subject, action store.Action, res authz.Resource, d authz.Decision) {
	reason := "NO_GRANT"
	details := map[string]string{}
	switch {
	case d.Restricted:
		reason = "RESTRICTED"
		details["restrictionId"] = d.Restriction
	case d.OutOfScope:
		reason = "OUT_OF_NAMESPACE_SCOPE"
	case d.WrongCredential:
		reason = "CREDENTIAL_NOT_ALLOWED"
	}
	e := store.AuditEvent{
		Kind:       store.AuditAuthorizationDenial,
		ActorID:    s.ID,
		Credential: s.Credential,
		Action:     "openclaw." + string(res.Kind) + "." + string(action),
		Resource:   store.AuditResource{Kind: res.Kind, ID: res.ID, NamespaceID: res.NamespaceID},
		Outcome:    store.OutcomeDenied,
		ReasonCode: reason,
		Details:    details,
	}
	if buf, ok := ctx.Value(bufferKey{}).(*denialBuffer); ok {
		buf.mu.Lock()
		buf.events = append(buf.events, e)
		buf.mu.Unlock()
		return
	}
	r.writeDenial(ctx, e)
}

func (r *Recorder) writeDenial(ctx context.Context, e store.AuditEvent) {
	if err := r.RecordAfter(ctx, e); err != nil {
		r.logger.ErrorContext(ctx, "audit: could not record authorization denial", "error", err, "action", e.Action)
	}
}

type bufferKey struct{}

type denialBuffer struct {
	mu     sync.Mutex
	events []store.AuditEvent
}

// WithDenialBuffer returns a context in which denials are queued until
// Flush. The HTTP layer wraps every request with it.
func WithDenialBuffer(ctx context.Context) context.Context {
	return context.WithValue(ctx, bufferKey{}, &denialBuffer{})
}

// Flush writes the denials queued in ctx. Call it once the request's
// transactions have ended.
func (r *Recorder) Flush(ctx context.Context) {
	buf, ok := ctx.Value(bufferKey{}).(*denialBuffer)
	if !ok {
		return
	}
	buf.mu.Lock()
	events := buf.events
	buf.events = nil
	buf.mu.Unlock()
	if len(events) == 0 {
		return
	}
	// One deadline for all of them: a request that left several denials
	// still ends within AfterTimeout, which the server's shutdown counts
	// on (it waits a bounded time for cancelled requests before it closes
	// the store).
	fctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), AfterTimeout)
	defer cancel()
	for _, e := range events {
		if err := r.Record(fctx, nil, e); err != nil {
			r.logger.ErrorContext(ctx, "audit: could not record authorization denial", "error", err, "action", e.Action)
		}
	}
}
