package storetest

import (
	"fmt"
	"sort"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

// auditEvent returns a complete event at instant n.
func auditEvent(n int) store.AuditEvent {
	return store.AuditEvent{
		ID: ids.New(ids.Audit), OccurredAt: at(n), Kind: store.AuditMutation, ActorID: "usr_actor",
		Credential: "api_key:key_1", RequestID: fmt.Sprintf("req-%d", n),
		Action:   "openclaw.agents.workspace.files.write",
		Resource: store.AuditResource{Kind: store.KindAgent, ID: "agt_1", NamespaceID: "ns_1"},
		Outcome:  store.OutcomeSuccess, ReasonCode: "UNKNOWN_OUTCOME",
		Details: map[string]string{"workspaceFileName": "SOUL.md"},
	}
}

func storedEvent(e store.AuditEvent) store.AuditEvent {
	e.OccurredAt = stored(e.OccurredAt)
	return e
}

// newestFirst sorts events the way ListAuditEvents must return them.
func newestFirst(events []store.AuditEvent) []store.AuditEvent {
	out := append([]store.AuditEvent{}, events...)
	sort.Slice(out, func(i, j int) bool {
		if !out[i].OccurredAt.Equal(out[j].OccurredAt) {
			return out[i].OccurredAt.After(out[j].OccurredAt)
		}
		return out[i].ID > out[j].ID
	})
	return out
}

// appendAll appends the events and returns them as stored.
func appendAll(t *testing.T, h Harness, events ...store.AuditEvent) []store.AuditEvent {
	t.Helper()
	out := make([]store.AuditEvent, len(events))
	for i, e := range events {
		must(t, "AppendAuditEvent", h.Store.AppendAuditEvent(ctx(t), e))
		out[i] = storedEvent(e)
	}
	return out
}

var auditCases = []testCase{
	{"Audit/RoundTrip", func(t *testing.T, h Harness) {
		full := auditEvent(1)
		minimal := store.AuditEvent{
			ID: ids.New(ids.Audit), OccurredAt: at(2), Kind: store.AuditBootstrap, ActorID: "usr_first",
			Action: "installation.bootstrap", Resource: store.AuditResource{Kind: store.KindInstallation},
			Outcome: store.OutcomeSuccess,
		}
		stored := appendAll(t, h, full, minimal)
		got, err := h.Store.ListAuditEvents(ctx(t), store.AuditFilter{}, nil, 10)
		must(t, "ListAuditEvents", err)
		check(t, "ListAuditEvents", []store.AuditEvent{stored[1], stored[0]}, got)

		wantErr(t, "AppendAuditEvent with an existing id", h.Store.AppendAuditEvent(ctx(t), full), errkind.Conflict, "")
		bad := auditEvent(3)
		bad.Outcome = "maybe"
		wantErr(t, "AppendAuditEvent with an unknown outcome", h.Store.AppendAuditEvent(ctx(t), bad), errkind.Invalid, "")
		bad = auditEvent(3)
		bad.Kind = "read"
		wantErr(t, "AppendAuditEvent with an unknown kind", h.Store.AppendAuditEvent(ctx(t), bad), errkind.Invalid, "")
	}},
	{"Audit/EmptyAndLimit", func(t *testing.T, h Harness) {
		got, err := h.Store.ListAuditEvents(ctx(t), store.AuditFilter{}, nil, 5)
		must(t, "ListAuditEvents", err)
		check(t, "ListAuditEvents on an empty log", []store.AuditEvent{}, got)
		for _, limit := range []int{0, -1} {
			_, err := h.Store.ListAuditEvents(ctx(t), store.AuditFilter{}, nil, limit)
			wantErr(t, fmt.Sprintf("ListAuditEvents with limit %d", limit), err, errkind.Invalid, "")
		}
	}},
	{"Audit/OrderAndPagination", func(t *testing.T, h Harness) {
		// Seven events, five of them at one instant (ids decide their order),
		// appended in an order unrelated to the expected one.
		var events []store.AuditEvent
		for i := 0; i < 5; i++ {
			e := auditEvent(10)
			e.OccurredAt = e.OccurredAt.Add(time.Duration(i) * 10 * time.Nanosecond) // same microsecond
			events = append(events, e)
		}
		events = append(events, auditEvent(20), auditEvent(5))
		all := newestFirst(appendAll(t, h, events...))

		got, err := h.Store.ListAuditEvents(ctx(t), store.AuditFilter{}, nil, 100)
		must(t, "ListAuditEvents", err)
		check(t, "ListAuditEvents order", all, got)

		for _, pageSize := range []int{1, 2, 3, 7} {
			var pages []store.AuditEvent
			var cursor *store.AuditCursor
			for n := 0; n < 20; n++ {
				page, err := h.Store.ListAuditEvents(ctx(t), store.AuditFilter{}, cursor, pageSize)
				must(t, "ListAuditEvents page", err)
				if len(page) > pageSize {
					t.Fatalf("page size %d: got %d events", pageSize, len(page))
				}
				if len(page) == 0 {
					break
				}
				pages = append(pages, page...)
				last := page[len(page)-1]
				cursor = &store.AuditCursor{OccurredAt: last.OccurredAt, ID: last.ID}
			}
			check(t, fmt.Sprintf("events paged %d at a time", pageSize), all, pages)
		}
	}},
	{"Audit/Filters", func(t *testing.T, h Harness) {
		base := auditEvent(10)
		vary := func(n int, change func(e *store.AuditEvent)) store.AuditEvent {
			e := base
			e.ID, e.OccurredAt, e.RequestID = ids.New(ids.Audit), at(n), fmt.Sprintf("req-%d", n)
			change(&e)
			return e
		}
		events := appendAll(t, h,
			vary(1, func(e *store.AuditEvent) {}),
			vary(2, func(e *store.AuditEvent) { e.Resource.NamespaceID = "ns_2" }),
			vary(3, func(e *store.AuditEvent) { e.Resource.Kind = store.KindConfiguration }),
			vary(4, func(e *store.AuditEvent) { e.Resource.ID = "agt_2" }),
			vary(5, func(e *store.AuditEvent) { e.ActorID = "sa_robot" }),
			vary(6, func(e *store.AuditEvent) { e.Action = "agents.create" }),
			vary(7, func(e *store.AuditEvent) { e.Kind = store.AuditAuthorizationDenial }),
			vary(8, func(e *store.AuditEvent) { e.Outcome = store.OutcomeDenied }),
		)
		pick := func(idx ...int) []store.AuditEvent {
			var out []store.AuditEvent
			for _, i := range idx {
				out = append(out, events[i])
			}
			return newestFirst(out)
		}
		except := func(skip int) []store.AuditEvent {
			var idx []int
			for i := range events {
				if i != skip {
					idx = append(idx, i)
				}
			}
			return pick(idx...)
		}
		tests := []struct {
			name string
			f    store.AuditFilter
			want []store.AuditEvent
		}{
			{"none", store.AuditFilter{}, except(-1)},
			{"namespace", store.AuditFilter{NamespaceID: "ns_2"}, pick(1)},
			{"resource kind", store.AuditFilter{ResourceKind: store.KindConfiguration}, pick(2)},
			{"resource id", store.AuditFilter{ResourceID: "agt_2"}, pick(3)},
			{"actor", store.AuditFilter{ActorID: "sa_robot"}, pick(4)},
			{"action", store.AuditFilter{Action: "agents.create"}, pick(5)},
			{"kind", store.AuditFilter{Kind: store.AuditAuthorizationDenial}, pick(6)},
			{"outcome", store.AuditFilter{Outcome: store.OutcomeDenied}, pick(7)},
			{"namespace, excluding", store.AuditFilter{NamespaceID: "ns_1"}, except(1)},
			{"since is inclusive", store.AuditFilter{Since: at(7)}, pick(6, 7)},
			{"until is exclusive", store.AuditFilter{Until: at(3)}, pick(0, 1)},
			{"since and until", store.AuditFilter{Since: at(3), Until: at(5)}, pick(2, 3)},
			{"combined", store.AuditFilter{ResourceKind: store.KindAgent, ActorID: "usr_actor", Since: at(4)}, pick(3, 5, 6, 7)},
			{"no match", store.AuditFilter{ActorID: "usr_nobody"}, nil},
		}
		for _, tt := range tests {
			got, err := h.Store.ListAuditEvents(ctx(t), tt.f, nil, 100)
			must(t, "ListAuditEvents "+tt.name, err)
			want := tt.want
			if want == nil {
				want = []store.AuditEvent{}
			}
			check(t, "ListAuditEvents filter "+tt.name, want, got)
		}
		// A filter and a cursor together.
		first, err := h.Store.ListAuditEvents(ctx(t), store.AuditFilter{ActorID: "usr_actor"}, nil, 2)
		must(t, "ListAuditEvents first page", err)
		last := first[len(first)-1]
		rest, err := h.Store.ListAuditEvents(ctx(t), store.AuditFilter{ActorID: "usr_actor"},
			&store.AuditCursor{OccurredAt: last.OccurredAt, ID: last.ID}, 100)
		must(t, "ListAuditEvents second page", err)
		check(t, "filtered pages", except(4), append(first, rest...))
	}},
}
