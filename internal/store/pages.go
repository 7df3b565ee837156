package store

import (
	"context"
	"errors"
)

// maxAllPages bounds All: a store that keeps answering a Next (a bug)
// cannot keep its caller looping. At MaxPageSize that is 50 million items.
const maxAllPages = 100_000

// All reads every page of list at MaxPageSize, oldest first, for callers
// that must act on a whole list (the worker stopping every revision of an
// Agent). It returns the first error list returns, and an error after
// maxAllPages pages.
func All[T any](ctx context.Context, list func(context.Context, PageRequest) (Page[T], error)) ([]T, error) {
	out := []T{}
	p := PageRequest{Limit: MaxPageSize}
	for range maxAllPages {
		page, err := list(ctx, p)
		if err != nil {
			return nil, err
		}
		out = append(out, page.Items...)
		if page.Next == nil {
			return out, nil
		}
		p.After = page.Next
	}
	return nil, errors.New("store: a list has more than 100,000 pages")
}

// AllRevisions reads every revision of the Agent, by number.
func AllRevisions(ctx context.Context, st Store, namespaceID, agentID string) ([]Revision, error) {
	return All(ctx, func(ctx context.Context, p PageRequest) (Page[Revision], error) {
		return st.ListRevisions(ctx, namespaceID, agentID, p)
	})
}
