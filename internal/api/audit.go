package api

import (
	"maps"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode"
	"unicode/utf8"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/httpx"
	"github.com/openclaw/occ/internal/occ"
)

// auditParams lists the query parameters GET /audit-events accepts; any
// other parameter is refused, like a query on any other route.
var auditParams = map[string]bool{
	"namespaceId": true, "resourceKind": true, "resourceId": true, "actorId": true, "action": true,
	"kind": true, "outcome": true, "since": true, "until": true, "limit": true, "cursor": true,
	"withoutOutcome": true,
}

// ListAuditEvents pages through audit events (administrators only).
func (a *API) ListAuditEvents(w http.ResponseWriter, r *http.Request) {
	if err := httpx.NoBody(r); err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	q, limit, cursor, err := parseAuditQuery(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return
	}
	page, err := a.svc.ListAuditEvents(r.Context(), q.filter(), cursor, limit)
	respond(w, r, http.StatusOK, toAuditPage(page), err)
}

// auditQuery is the filter part of a validated GET /audit-events query.
type auditQuery struct {
	namespaceID, resourceKind, resourceID, actorID, action, kind, outcome string
	since, until                                                          time.Time
	withoutOutcome                                                        bool
}

func parseAuditQuery(r *http.Request) (auditQuery, int, string, error) {
	q, err := httpx.Query(r)
	if err != nil {
		return auditQuery{}, 0, "", err
	}
	var details []errkind.Detail
	bad := func(name, code string) { details = append(details, errkind.Detail{Path: "/query/" + name, Code: code}) }
	for _, k := range slices.Sorted(maps.Keys(q)) {
		v := q[k]
		if !auditParams[k] {
			bad(k, errkind.DetailUnknownField)
		} else if len(v) != 1 {
			bad(k, errkind.DetailInvalidValue)
		} else if len(v[0]) > 400 {
			bad(k, errkind.DetailTooLong)
		} else if !utf8.ValidString(v[0]) || strings.ContainsFunc(v[0], unicode.IsControl) {
			// No stored value holds one, and PostgreSQL refuses a NUL
			// in a text parameter (without naming it) where SQLite
			// would match nothing: refused alike on both engines.
			bad(k, errkind.DetailInvalidValue)
		}
	}
	f := auditQuery{
		namespaceID: q.Get("namespaceId"), resourceKind: q.Get("resourceKind"), resourceID: q.Get("resourceId"),
		actorID: q.Get("actorId"), action: q.Get("action"), kind: q.Get("kind"), outcome: q.Get("outcome"),
	}
	for _, t := range []struct {
		name string
		dst  *time.Time
	}{{"since", &f.since}, {"until", &f.until}} {
		if v := q.Get(t.name); v != "" {
			ts, err := time.Parse(time.RFC3339Nano, v)
			if err != nil {
				bad(t.name, errkind.DetailInvalidFormat)
			}
			*t.dst = ts
		}
	}
	switch q.Get("withoutOutcome") {
	case "", "false":
	case "true":
		f.withoutOutcome = true
	default:
		bad("withoutOutcome", errkind.DetailInvalidValue)
	}
	limit := 0
	if v := q.Get("limit"); v != "" {
		n, err := strconv.Atoi(v)
		switch {
		case err != nil:
			bad("limit", errkind.DetailInvalidType)
		case n < 1 || n > occ.MaxAuditPageSize:
			bad("limit", errkind.DetailInvalidValue)
		}
		limit = n
	}
	if len(details) > 0 {
		return f, 0, "", errkind.InvalidDetails("The query is invalid.", details...)
	}
	return f, limit, q.Get("cursor"), nil
}
