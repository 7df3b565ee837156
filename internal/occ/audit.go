package occ

import (
	"context"
	"time"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// Audit listing limits.
const (
	DefaultAuditPageSize = apitypes.DefaultAuditPageSize
	MaxAuditPageSize     = apitypes.MaxAuditPageSize
)

// AuditPage is one page of audit events, newest first. NextCursor is empty
// on the last page.
type AuditPage struct {
	Items      []store.AuditEvent
	NextCursor string
}

type cursorJSON struct {
	T  time.Time `json:"t"`
	ID string    `json:"id"`
}

// ListAuditEvents returns one page of events matching f, for
// administrators. The cursor is opaque to clients.
func (s *Service) ListAuditEvents(ctx context.Context, f store.AuditFilter, cursor string, limit int) (AuditPage, error) {
	if limit == 0 {
		limit = DefaultAuditPageSize
	}
	var bad []errkind.Detail
	if !f.Since.IsZero() && !storable(f.Since) {
		bad = append(bad, errkind.Detail{Path: "/query/since", Code: errkind.DetailInvalidValue})
	}
	if !f.Until.IsZero() && !storable(f.Until) {
		bad = append(bad, errkind.Detail{Path: "/query/until", Code: errkind.DetailInvalidValue})
	}
	if len(bad) > 0 {
		return AuditPage{}, errkind.InvalidDetails("A time must be in the years 1 to 9999 (UTC).", bad...)
	}
	var after *store.AuditCursor
	if cursor != "" {
		c, err := decodeCursor(cursor)
		if err != nil {
			return AuditPage{}, err
		}
		after = &store.AuditCursor{OccurredAt: c.T, ID: c.ID}
	}
	// Ask for one more than the page to know whether another page exists.
	evs, err := s.store.ListAuditEvents(ctx, f, after, limit+1)
	if err != nil {
		return AuditPage{}, err
	}
	page := AuditPage{Items: evs}
	if len(evs) > limit {
		page.Items = evs[:limit]
		last := page.Items[limit-1]
		page.NextCursor = encodeCursor(cursorJSON{T: last.OccurredAt, ID: last.ID})
	}
	if page.Items == nil {
		page.Items = []store.AuditEvent{}
	}
	return page, nil
}
