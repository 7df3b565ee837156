package api

import (
	"maps"
	"net/http"
	"slices"
	"strconv"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/httpx"
	"github.com/openclaw/occ/internal/occ"
)

// pageQuery checks a paged list request: no body, and a query of at most
// limit (1..occ.MaxPageSize) and cursor, each once. Anything else is
// refused like a query on any other route; a bad cursor is the domain's
// to refuse. On failure it has written the error.
func pageQuery(w http.ResponseWriter, r *http.Request) (occ.PageQuery, bool) {
	if err := httpx.NoBody(r); err != nil {
		httpx.WriteError(w, r, err)
		return occ.PageQuery{}, false
	}
	q, err := httpx.Query(r)
	if err != nil {
		httpx.WriteError(w, r, err)
		return occ.PageQuery{}, false
	}
	var details []errkind.Detail
	bad := func(name, code string) { details = append(details, errkind.Detail{Path: "/query/" + name, Code: code}) }
	var out occ.PageQuery
	for _, k := range slices.Sorted(maps.Keys(q)) {
		v := q[k]
		switch {
		case k != "limit" && k != "cursor":
			bad(k, errkind.DetailUnknownField)
			continue
		case len(v) != 1:
			bad(k, errkind.DetailInvalidValue)
			continue
		case len(v[0]) > 400:
			bad(k, errkind.DetailTooLong)
			continue
		}
		if k == "cursor" {
			out.Cursor = v[0]
			continue
		}
		n, err := strconv.Atoi(v[0])
		switch {
		case err != nil:
			bad("limit", errkind.DetailInvalidType)
		case n < 1 || n > occ.MaxPageSize:
			bad("limit", errkind.DetailInvalidValue)
		}
		out.Limit = n
	}
	if len(details) > 0 {
		httpx.WriteError(w, r, errkind.InvalidDetails("The query is invalid.", details...))
		return occ.PageQuery{}, false
	}
	return out, true
}

// pageOf converts one domain page to its wire list.
func pageOf[S any, T apitypes.Data](p occ.Page[S], conv func(S) T) apitypes.List[T] {
	l := list(p.Items, conv)
	l.NextCursor = p.NextCursor
	return l
}
