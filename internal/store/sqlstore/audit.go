package sqlstore

import (
	"context"
	"strings"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// This file: the append-only audit log. The schema refuses UPDATE and DELETE
// on audit_events, so the store has no way to change a written event.

const auditColumns = `id, occurred_at, kind, actor_id, credential, request_id, action,
	namespace_id, resource_kind, resource_id, outcome, reason_code, details`

// AppendAuditEvent writes one event. Empty optional fields are stored as
// NULL and empty Details as no details.
func (s *Store) AppendAuditEvent(ctx context.Context, e store.AuditEvent) error {
	var details any
	if len(e.Details) > 0 {
		j, err := jsonArg(e.Details)
		if err != nil {
			return err
		}
		details = j
	}
	_, err := s.exec(ctx, `INSERT INTO audit_events (`+auditColumns+`) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)`,
		e.ID, s.t(e.OccurredAt), e.Kind, e.ActorID, nullString(e.Credential), nullString(e.RequestID), e.Action,
		nullString(e.Resource.NamespaceID), nullString(string(e.Resource.Kind)), nullString(e.Resource.ID),
		e.Outcome, nullString(e.ReasonCode), details)
	return s.dbErr("append audit event", err)
}

func scanAuditEvent(r rowScanner) (store.AuditEvent, error) {
	var e store.AuditEvent
	var kind string
	err := r.Scan(&e.ID, timeCol{&e.OccurredAt}, &e.Kind, &e.ActorID, optStringCol{&e.Credential},
		optStringCol{&e.RequestID}, &e.Action, optStringCol{&e.Resource.NamespaceID}, optStringCol{&kind},
		optStringCol{&e.Resource.ID}, &e.Outcome, optStringCol{&e.ReasonCode}, jsonCol{&e.Details})
	e.Resource.Kind = store.ResourceKind(kind)
	return e, err
}

// ListAuditEvents returns at most limit events matching f, newest first by
// (occurred_at, id), strictly after the cursor when one is given. Paging with
// the last event of each page as the cursor visits every event exactly once,
// also when many share a timestamp, because ids break the tie.
func (s *Store) ListAuditEvents(ctx context.Context, f store.AuditFilter, after *store.AuditCursor, limit int) ([]store.AuditEvent, error) {
	if limit <= 0 {
		return nil, errkind.New(errkind.Invalid, "the audit page size must be positive")
	}
	var where []string
	var args []any
	eq := func(col, v string) {
		if v != "" {
			where = append(where, col+" = ?")
			args = append(args, v)
		}
	}
	eq("namespace_id", f.NamespaceID)
	eq("resource_kind", string(f.ResourceKind))
	eq("resource_id", f.ResourceID)
	eq("actor_id", f.ActorID)
	eq("action", f.Action)
	eq("kind", f.Kind)
	eq("outcome", f.Outcome)
	if !f.Since.IsZero() {
		where = append(where, "occurred_at >= ?")
		args = append(args, s.t(f.Since))
	}
	if !f.Until.IsZero() {
		where = append(where, "occurred_at < ?")
		args = append(args, s.t(f.Until))
	}
	if after != nil {
		// Led by occurred_at <= ?, which both engines turn into a seek in
		// the (…, occurred_at DESC, id DESC) indexes; the OR alone would
		// make SQLite walk the index from the newest event and filter.
		where = append(where, "occurred_at <= ? AND (occurred_at < ? OR id < ?)")
		args = append(args, s.t(after.OccurredAt), s.t(after.OccurredAt), after.ID)
	}
	q := `SELECT ` + auditColumns + ` FROM audit_events`
	if len(where) > 0 {
		q += ` WHERE ` + strings.Join(where, " AND ")
	}
	q += ` ORDER BY occurred_at DESC, id DESC LIMIT ?`
	args = append(args, limit)
	return list(ctx, s, "list audit events", scanAuditEvent, q, args...)
}
