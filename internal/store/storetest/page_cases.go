package storetest

import (
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// allAgents reads every Agent of the Namespace through the paged list.
func allAgents(t *testing.T, s store.Store, namespaceID string) []store.Agent {
	t.Helper()
	out := []store.Agent{}
	p := store.PageRequest{Limit: store.MaxPageSize}
	for range 1000 {
		page, err := s.ListAgents(ctx(t), namespaceID, p)
		must(t, "ListAgents", err)
		out = append(out, page.Items...)
		if page.Next == nil {
			return out
		}
		p.After = page.Next
	}
	t.Fatal("ListAgents: more than 1000 pages")
	return nil
}

// allNamespaces reads every Namespace through the paged list.
func allNamespaces(t *testing.T, s store.Store) []store.Namespace {
	t.Helper()
	out := []store.Namespace{}
	p := store.PageRequest{Limit: store.MaxPageSize}
	for range 1000 {
		page, err := s.ListNamespaces(ctx(t), p)
		must(t, "ListNamespaces", err)
		out = append(out, page.Items...)
		if page.Next == nil {
			return out
		}
		p.After = page.Next
	}
	t.Fatal("ListNamespaces: more than 1000 pages")
	return nil
}

func agentIDs(v []store.Agent) []string {
	out := make([]string, len(v))
	for i, a := range v {
		out[i] = a.ID
	}
	return out
}

var pageCases = []testCase{
	{"Page/ValuesHoldingControlCharacters", func(t *testing.T, h Harness) {
		// The store keeps any text; a value holding U+001F or U+001E
		// (which SQLite's packed pages join columns and rows with) or
		// other control characters comes back exactly, and so do the
		// plain rows on the same page. The Namespace name and the audit
		// request id are shaped like a whole packed row of their lists, to
		// be read as an extra row if the page were split by content alone.
		f := newFixture(t, h)
		ns := f.namespace()
		forged := store.Namespace{ID: ids.New(ids.Namespace), Status: store.NamespaceReady, CreatedAt: at(f.now()), UpdatedAt: at(f.now())}
		stamp := forged.CreatedAt.UTC().Format("2006-01-02T15:04:05.000000Z")
		forged.Name = "x\x1fready\x1f" + stamp + "\x1f" + stamp + "\x1e" + ids.New(ids.Namespace) + "\x1fforged"
		must(t, "CreateNamespace", h.Store.CreateNamespace(ctx(t), forged))
		forged.CreatedAt, forged.UpdatedAt = stored(forged.CreatedAt), stored(forged.UpdatedAt)
		check(t, "ListNamespaces", []store.Namespace{ns, forged}, allNamespaces(t, h.Store))
		odd := store.Namespace{ID: ids.New(ids.Namespace), Name: "odd\x1fname\x1e\tend", Status: store.NamespaceReady,
			CreatedAt: at(f.now()), UpdatedAt: at(f.now())}
		must(t, "CreateNamespace", h.Store.CreateNamespace(ctx(t), odd))
		odd.CreatedAt, odd.UpdatedAt = stored(odd.CreatedAt), stored(odd.UpdatedAt)
		check(t, "ListNamespaces", []store.Namespace{ns, forged, odd}, allNamespaces(t, h.Store))

		cfg := f.configuration(ns)
		plain := f.agent(cfg)
		a := f.newAgent(cfg)
		a.Name = "\x1f"
		must(t, "CreateAgent", h.Store.CreateAgent(ctx(t), a, nil))
		last := f.agent(cfg)
		check(t, "ListAgents", []store.Agent{plain, storedAgent(a), last}, allAgents(t, h.Store, ns.ID))

		e := auditEvent(f.now())
		e.RequestID = "req\x1f\x1f\x1e" + e.ID + "\x1f\x1f"
		e.Details = map[string]string{"k\x1f": "v\x1f"}
		events := appendAll(t, h, auditEvent(f.now()), e, auditEvent(f.now()))
		got, err := h.Store.ListAuditEvents(ctx(t), store.AuditFilter{}, nil, 10)
		must(t, "ListAuditEvents", err)
		check(t, "ListAuditEvents", newestFirst(events), got)
	}},
	{"Page/AgentsAtTheLimitAndOnePast", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		cfg := f.configuration(f.namespace())
		f.agent() // in another namespace: never listed
		// MaxPageSize+1 Agents; every tenth shares its creation time with
		// the one before, so the id must break ties.
		want := make([]store.Agent, 0, store.MaxPageSize+1)
		for i := range store.MaxPageSize + 1 {
			a := f.newAgent(cfg)
			if i%10 == 1 {
				a.CreatedAt = want[i-1].CreatedAt
			}
			must(t, "CreateAgent", h.Store.CreateAgent(ctx(t), a, nil))
			want = append(want, storedAgent(a))
		}
		slices.SortFunc(want, func(a, b store.Agent) int {
			if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})

		first, err := h.Store.ListAgents(ctx(t), cfg.NamespaceID, store.PageRequest{Limit: store.MaxPageSize})
		must(t, "ListAgents at the page-size limit", err)
		check(t, "first page", agentIDs(want[:store.MaxPageSize]), agentIDs(first.Items))
		if first.Next == nil {
			t.Fatal("first page of MaxPageSize+1 Agents: Next is nil")
		}
		second, err := h.Store.ListAgents(ctx(t), cfg.NamespaceID, store.PageRequest{After: first.Next, Limit: store.MaxPageSize})
		must(t, "ListAgents second page", err)
		check(t, "second page", want[store.MaxPageSize:], second.Items)
		check(t, "second page's Next", (*store.PageCursor)(nil), second.Next)

		_, err = h.Store.ListAgents(ctx(t), cfg.NamespaceID, store.PageRequest{Limit: store.MaxPageSize + 1})
		wantErr(t, "ListAgents one past the page-size limit", err, errkind.Invalid, "")
		_, err = h.Store.ListAgents(ctx(t), cfg.NamespaceID, store.PageRequest{Limit: 0})
		wantErr(t, "ListAgents with page size 0", err, errkind.Invalid, "")

		// Small pages visit every Agent exactly once, in order.
		var got []store.Agent
		p := store.PageRequest{Limit: 7}
		for range 100 {
			page, err := h.Store.ListAgents(ctx(t), cfg.NamespaceID, p)
			must(t, "ListAgents page of 7", err)
			if len(page.Items) > 7 {
				t.Fatalf("page of 7 holds %d", len(page.Items))
			}
			got = append(got, page.Items...)
			if page.Next == nil {
				break
			}
			p.After = page.Next
		}
		check(t, "every page of 7", agentIDs(want), agentIDs(got))
	}},
	{"Page/ExactlyFullPageHasNoNext", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		cfg := f.configuration(f.namespace())
		want := []store.Agent{f.agent(cfg), f.agent(cfg), f.agent(cfg)}
		page, err := h.Store.ListAgents(ctx(t), cfg.NamespaceID, store.PageRequest{Limit: 3})
		must(t, "ListAgents", err)
		check(t, "a full last page", store.Page[store.Agent]{Items: want}, page)
		page, err = h.Store.ListAgents(ctx(t), ids.New(ids.Namespace), store.PageRequest{Limit: 3})
		must(t, "ListAgents of an unknown namespace", err)
		check(t, "ListAgents of an unknown namespace", store.Page[store.Agent]{Items: []store.Agent{}}, page)
	}},
	{"Page/NamespacesAtTheLimitAndOnePast", func(t *testing.T, h Harness) {
		want := make([]store.Namespace, 0, store.MaxPageSize+1)
		for i := range store.MaxPageSize + 1 {
			ns := store.Namespace{ID: ids.New(ids.Namespace), Name: fmt.Sprintf("page-%d", i), Status: store.NamespaceReady,
				CreatedAt: at(i / 3), UpdatedAt: at(i / 3)} // three per instant: ids break ties
			must(t, "CreateNamespace", h.Store.CreateNamespace(ctx(t), ns))
			ns.CreatedAt, ns.UpdatedAt = stored(ns.CreatedAt), stored(ns.UpdatedAt)
			want = append(want, ns)
		}
		slices.SortFunc(want, func(a, b store.Namespace) int {
			if c := a.CreatedAt.Compare(b.CreatedAt); c != 0 {
				return c
			}
			return strings.Compare(a.ID, b.ID)
		})
		first, err := h.Store.ListNamespaces(ctx(t), store.PageRequest{Limit: store.MaxPageSize})
		must(t, "ListNamespaces at the page-size limit", err)
		check(t, "first page", want[:store.MaxPageSize], first.Items)
		if first.Next == nil {
			t.Fatal("first page of MaxPageSize+1 Namespaces: Next is nil")
		}
		second, err := h.Store.ListNamespaces(ctx(t), store.PageRequest{After: first.Next, Limit: store.MaxPageSize})
		must(t, "ListNamespaces second page", err)
		check(t, "second page", store.Page[store.Namespace]{Items: want[store.MaxPageSize:]}, second)
		_, err = h.Store.ListNamespaces(ctx(t), store.PageRequest{Limit: store.MaxPageSize + 1})
		wantErr(t, "ListNamespaces one past the page-size limit", err, errkind.Invalid, "")
		check(t, "allNamespaces", want, allNamespaces(t, h.Store))
	}},
}
