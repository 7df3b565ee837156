package storetest

import (
	"context"
	"testing"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// checkPagedAtTheLimit checks a paged list holding exactly want
// (MaxPageSize+1 items, in list order): a page of MaxPageSize holds the
// first MaxPageSize with a Next, the page after it the last one without;
// a page size one past the limit, and 0, are Invalid.
func checkPagedAtTheLimit[T any](t *testing.T, name string, want []T, list func(context.Context, store.PageRequest) (store.Page[T], error)) {
	t.Helper()
	if len(want) != store.MaxPageSize+1 {
		t.Fatalf("%s: the test wants %d items, has %d", name, store.MaxPageSize+1, len(want))
	}
	first, err := list(ctx(t), store.PageRequest{Limit: store.MaxPageSize})
	must(t, name+" at the page-size limit", err)
	check(t, name+" first page", want[:store.MaxPageSize], first.Items)
	if first.Next == nil {
		t.Fatalf("%s: first page of MaxPageSize+1 items: Next is nil", name)
	}
	second, err := list(ctx(t), store.PageRequest{After: first.Next, Limit: store.MaxPageSize})
	must(t, name+" second page", err)
	check(t, name+" second page", store.Page[T]{Items: want[store.MaxPageSize:]}, second)
	_, err = list(ctx(t), store.PageRequest{Limit: store.MaxPageSize + 1})
	wantErr(t, name+" one past the page-size limit", err, errkind.Invalid, "")
	_, err = list(ctx(t), store.PageRequest{Limit: 0})
	wantErr(t, name+" with page size 0", err, errkind.Invalid, "")
}

var pageListCases = []testCase{
	{"Page/RevisionsAtTheLimitAndOnePast", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a := f.agent()
		other := f.agent()
		f.revision(other) // another Agent's: never listed
		want := make([]store.Revision, 0, store.MaxPageSize+1)
		for range store.MaxPageSize + 1 {
			want = append(want, f.revision(a))
		}
		checkPagedAtTheLimit(t, "ListRevisions", want, func(c context.Context, p store.PageRequest) (store.Page[store.Revision], error) {
			return h.Store.ListRevisions(c, a.NamespaceID, a.ID, p)
		})
		// A cursor of another Agent's revision seeks nowhere: an empty last page.
		otherPage, err := h.Store.ListRevisions(ctx(t), other.NamespaceID, other.ID, store.PageRequest{Limit: 1})
		must(t, "ListRevisions of the other Agent", err)
		page, err := h.Store.ListRevisions(ctx(t), a.NamespaceID, a.ID, store.PageRequest{Limit: 1,
			After: &store.PageCursor{CreatedAt: otherPage.Items[0].CreatedAt, ID: otherPage.Items[0].ID}})
		must(t, "ListRevisions after a foreign cursor", err)
		check(t, "ListRevisions after a foreign cursor", store.Page[store.Revision]{Items: []store.Revision{}}, page)
	}},
	{"Page/ServicePrincipalsAtTheLimitAndOnePast", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		want := make([]store.ServicePrincipal, 0, store.MaxPageSize+1)
		for range store.MaxPageSize + 1 {
			want = append(want, f.principal())
		}
		checkPagedAtTheLimit(t, "ListServicePrincipals", want, h.Store.ListServicePrincipals)
	}},
	{"Page/IAMAtTheLimitAndOnePast", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		sp := f.principal()
		roles := make([]store.Role, 0, store.MaxPageSize+1)
		for range store.MaxPageSize + 1 {
			roles = append(roles, f.role())
		}
		checkPagedAtTheLimit(t, "ListRoles", roles, h.Store.ListRoles)
		bindings := make([]store.AccessBinding, 0, store.MaxPageSize+1)
		restrictions := make([]store.Restriction, 0, store.MaxPageSize+1)
		for i := range store.MaxPageSize + 1 {
			bindings = append(bindings, f.binding(sp.ID, roles[i]))
			restrictions = append(restrictions, f.restriction(sp.ID))
		}
		checkPagedAtTheLimit(t, "ListAccessBindings", bindings, h.Store.ListAccessBindings)
		checkPagedAtTheLimit(t, "ListRestrictions", restrictions, h.Store.ListRestrictions)
	}},
}
