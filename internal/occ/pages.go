package occ

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"time"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// Page sizes of the paged lists (Namespaces, Agents, Configurations,
// revisions, service principals, roles, access bindings, restrictions): a request without a
// limit gets DefaultPageSize items, and no request gets more than
// MaxPageSize.
// They are apitypes' (the API's contract); the store pages at most
// store.MaxPageSize, the same number (TestPageSizesAgree).
const (
	DefaultPageSize = apitypes.DefaultPageSize
	MaxPageSize     = apitypes.MaxPageSize
)

// Page is one page of a list, oldest first. NextCursor is empty on the
// last page, and otherwise names the page's last item: the authorizing
// store leaves out the items the caller may not read and never makes a
// cursor from one of them. A page may still be short (see
// authz.visiblePage's read budget), and the last one empty.
type Page[T any] struct {
	Items      []T
	NextCursor string
}

// PageQuery is a client's page request: a limit (0 for the default) and a
// previous page's NextCursor ("" for the first page).
type PageQuery struct {
	Limit  int
	Cursor string
}

// encodeCursor and decodeCursor are the one opaque cursor form, shared
// with the audit log: base64url of {"t": time, "id": id}.
func encodeCursor(t cursorJSON) string {
	raw, _ := json.Marshal(t)
	return base64.RawURLEncoding.EncodeToString(raw)
}

func decodeCursor(cursor string) (cursorJSON, error) {
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	var c cursorJSON
	if err == nil {
		err = json.Unmarshal(raw, &c)
	}
	if err != nil || c.ID == "" || c.T.IsZero() || !storable(c.T) {
		return cursorJSON{}, errkind.InvalidDetails("The cursor is malformed.", errkind.Detail{Path: "/query/cursor", Code: errkind.DetailInvalidFormat})
	}
	return c, nil
}

// storable reports whether t, in UTC, lies in the years 1 to 9999, which
// both engines store and order alike. A time written with an offset can
// name another UTC year (9999-12-31T23:00:00-23:00 is in 10000): SQLite,
// which keeps times as text, would sort it before 2026 and PostgreSQL
// after everything, so the same cursor or filter would answer differently
// on each.
func storable(t time.Time) bool {
	y := t.UTC().Year()
	return y >= 1 && y <= 9999
}

// request turns a client's page query into the store's.
func (q PageQuery) request() (store.PageRequest, error) {
	p := store.PageRequest{Limit: q.Limit}
	if p.Limit == 0 {
		p.Limit = DefaultPageSize
	}
	if p.Limit < 1 || p.Limit > MaxPageSize {
		return store.PageRequest{}, errkind.InvalidDetails("The page size is out of range.", errkind.Detail{Path: "/query/limit", Code: errkind.DetailInvalidValue})
	}
	if q.Cursor != "" {
		c, err := decodeCursor(q.Cursor)
		if err != nil {
			return store.PageRequest{}, err
		}
		p.After = &store.PageCursor{CreatedAt: c.T, ID: c.ID}
	}
	return p, nil
}

func fromStorePage[T any](p store.Page[T]) Page[T] {
	out := Page[T]{Items: p.Items}
	if out.Items == nil {
		out.Items = []T{}
	}
	if p.Next != nil {
		out.NextCursor = encodeCursor(cursorJSON{T: p.Next.CreatedAt, ID: p.Next.ID})
	}
	return out
}

// paged runs one page of a paged store list for a client's page query.
func paged[T any](q PageQuery, list func(store.PageRequest) (store.Page[T], error)) (Page[T], error) {
	p, err := q.request()
	if err != nil {
		return Page[T]{}, err
	}
	page, err := list(p)
	if err != nil {
		return Page[T]{}, err
	}
	return fromStorePage(page), nil
}

// eachNamespace calls fn with every Namespace, a page at a time, for
// domain operations that act on all of them.
func eachNamespace(ctx context.Context, st store.Store, fn func(store.Namespace) error) error {
	p := store.PageRequest{Limit: MaxPageSize}
	for {
		page, err := st.ListNamespaces(ctx, p)
		if err != nil {
			return err
		}
		for _, ns := range page.Items {
			if err := fn(ns); err != nil {
				return err
			}
		}
		if page.Next == nil {
			return nil
		}
		p.After = page.Next
	}
}
