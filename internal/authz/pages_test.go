package authz

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/store"
)

// sliceList pages ids as the store does: at most p.Limit items after
// p.After, and Next naming the last of them when more follow. calls
// counts the store reads and rows the rows read.
type sliceList struct {
	ids          []string
	calls, rows  int
	largestLimit int
}

var epoch = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)

func (l *sliceList) list(p store.PageRequest) (store.Page[string], error) {
	l.calls++
	l.largestLimit = max(l.largestLimit, p.Limit)
	start := 0
	if p.After != nil {
		start = slices.Index(l.ids, p.After.ID) + 1
	}
	end := min(start+p.Limit, len(l.ids))
	page := store.Page[string]{Items: slices.Clone(l.ids[start:end])}
	l.rows += len(page.Items)
	if end < len(l.ids) {
		page.Next = &store.PageCursor{CreatedAt: epoch, ID: l.ids[end-1]}
	}
	return page, nil
}

func idKey(id string) store.PageCursor { return store.PageCursor{CreatedAt: epoch, ID: id} }

// exactAgentReader may read exactly the Agents named.
func exactAgentReader(ids []string) *access {
	var gs []store.Grant
	for _, id := range ids {
		gs = append(gs, store.Grant{Binding: store.AccessBinding{ID: "b_" + id, NamespaceID: "ns_1", ResourceKind: store.KindAgent, ResourceID: id},
			Permissions: []store.Permission{{Action: store.ActionRead, ResourceKind: store.KindAgent}}})
	}
	return &access{subject: &Subject{ID: "usr_1", Kind: KindUser}, grants: gs}
}

func agentIn(id string) Resource { return Resource{Kind: store.KindAgent, ID: id, NamespaceID: "ns_1"} }

// walkPages follows Next from the start in pages of limit and returns
// every item and every Next. It fails on a page that is short but has a
// Next (these lists are far below the scan budget).
func walkPages(t *testing.T, acc *access, l *sliceList, limit int) (items, nexts []string) {
	t.Helper()
	p := store.PageRequest{Limit: limit}
	for range 1000 {
		page, err := visiblePage(acc, p, l.list, agentIn, idKey)
		if err != nil {
			t.Fatalf("visiblePage: %v", err)
		}
		if len(page.Items) > limit {
			t.Fatalf("visiblePage(limit %d): %d items", limit, len(page.Items))
		}
		items = append(items, page.Items...)
		if page.Next == nil {
			return items, nexts
		}
		nexts = append(nexts, page.Next.ID)
		if len(page.Items) != limit {
			t.Fatalf("visiblePage(limit %d): a short page (%v) with a Next", limit, page.Items)
		}
		if page.Next.ID != page.Items[len(page.Items)-1] {
			t.Fatalf("visiblePage(limit %d): Next %s is not the page's last item (%v)", limit, page.Next.ID, page.Items)
		}
		p.After = page.Next
	}
	t.Fatal("more than 1000 pages")
	return nil, nil
}

// TestVisiblePage: walking a list whose items the caller may read only in
// part, with pages of any size, yields exactly the readable items in order;
// every Next names the page's last item (never a hidden one); and the last
// page has no Next exactly when no readable item follows it.
func TestVisiblePage(t *testing.T) {
	ids := func(n int) []string {
		out := make([]string, n)
		for i := range out {
			out[i] = fmt.Sprintf("agt_%03d", i)
		}
		return out
	}
	every := func(all []string, keep func(i int) bool) []string {
		var out []string
		for i, id := range all {
			if keep(i) {
				out = append(out, id)
			}
		}
		return out
	}
	all := ids(9)
	tests := []struct {
		name    string
		visible []string
	}{
		{"every other, hidden first and last", every(all, func(i int) bool { return i%2 == 1 })},
		{"every other, visible first and last", every(all, func(i int) bool { return i%2 == 0 })},
		{"only the first", all[:1]},
		{"only the last", all[8:]},
		{"a hidden run in the middle", every(all, func(i int) bool { return i < 2 || i > 6 })},
		{"all", all},
		{"none", nil},
	}
	for _, tc := range tests {
		for _, limit := range []int{1, 2, 3, 9, 10} {
			t.Run(fmt.Sprintf("%s/limit %d", tc.name, limit), func(t *testing.T) {
				l := &sliceList{ids: all}
				items, nexts := walkPages(t, exactAgentReader(tc.visible), l, limit)
				if diff := cmp.Diff(tc.visible, items); diff != "" {
					t.Errorf("items (-want +got):\n%s", diff)
				}
				for _, id := range nexts {
					if !slices.Contains(tc.visible, id) {
						t.Errorf("a Next names %s, which the caller may not read", id)
					}
				}
				// Full pages until the last (walkPages), which may be empty
				// when only hidden items follow a full page.
				if most := len(tc.visible)/limit + 1; len(nexts)+1 > most {
					t.Errorf("%d pages, want at most %d", len(nexts)+1, most)
				}
			})
		}
	}
}

// TestVisiblePageCost: a caller who may read everything costs one store
// read per page, as before; one who sees two items across thousands of
// hidden ones reads in growing store pages (at most store.MaxPageSize), and
// a request that has an item stops after scanBudget rows with a short page
// whose Next names its last item, while one that has none reads on to the
// next readable item or the end.
func TestVisiblePageCost(t *testing.T) {
	all := make([]string, 3*scanBudget+2)
	for i := range all {
		all[i] = fmt.Sprintf("agt_%05d", i)
	}
	first, last := all[0], all[len(all)-1]

	l := &sliceList{ids: all}
	admin := &access{subject: &Subject{ID: "usr_1", Kind: KindUser}, grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1"},
		Permissions: []store.Permission{{Action: store.ActionRead, ResourceKind: store.KindAgent}}}}}
	if _, err := visiblePage(admin, store.PageRequest{Limit: 7}, l.list, agentIn, idKey); err != nil {
		t.Fatal(err)
	}
	if l.calls != 1 || l.rows != 7 {
		t.Errorf("a caller who reads everything: %d store reads of %d rows, want 1 of 7", l.calls, l.rows)
	}

	l = &sliceList{ids: all}
	acc := exactAgentReader([]string{first, last})
	page1, err := visiblePage(acc, store.PageRequest{Limit: 2}, l.list, agentIn, idKey)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.Page[string]{Items: []string{first}, Next: &store.PageCursor{CreatedAt: epoch, ID: first}}, page1); diff != "" {
		t.Errorf("first page (-want +got):\n%s", diff)
	}
	if l.rows < scanBudget || l.rows >= scanBudget+store.MaxPageSize {
		t.Errorf("first page: %d rows read, want the budget (%d) and less than a store page more", l.rows, scanBudget)
	}
	if l.largestLimit != store.MaxPageSize || l.calls > 12 {
		t.Errorf("first page: %d store reads, largest %d; want growing pages up to %d", l.calls, l.largestLimit, store.MaxPageSize)
	}

	// No item until the last row, far past the budget: read on to it.
	l.calls, l.rows = 0, 0
	page2, err := visiblePage(acc, store.PageRequest{Limit: 2, After: page1.Next}, l.list, agentIn, idKey)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(store.Page[string]{Items: []string{last}}, page2); diff != "" {
		t.Errorf("second page (-want +got):\n%s", diff)
	}
	if l.rows != len(all)-1 {
		t.Errorf("second page: %d rows read, want every row after the first (%d)", l.rows, len(all)-1)
	}
}
