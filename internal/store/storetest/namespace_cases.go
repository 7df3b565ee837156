package storetest

import (
	"encoding/json"
	"testing"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
)

var namespaceCases = []testCase{
	{"Namespace/CreateGetList", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		check(t, "ListNamespaces on an empty database", []store.Namespace{}, allNamespaces(t, h.Store))

		a, b := f.namespace(), f.namespace()
		for _, want := range []store.Namespace{a, b} {
			got, err := h.Store.GetNamespace(ctx(t), want.ID)
			must(t, "GetNamespace", err)
			check(t, "GetNamespace", want, got)
		}
		check(t, "ListNamespaces", []store.Namespace{a, b}, allNamespaces(t, h.Store))
		_, err := h.Store.GetNamespace(ctx(t), ids.New(ids.Namespace))
		wantErr(t, "GetNamespace unknown id", err, errkind.NotFound, "")
	}},
	{"Namespace/UniqueNameAndID", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		a := f.namespace()
		sameName := store.Namespace{ID: ids.New(ids.Namespace), Name: a.Name, Status: store.NamespaceReady, CreatedAt: at(9), UpdatedAt: at(9)}
		wantErr(t, "CreateNamespace with an existing name", h.Store.CreateNamespace(ctx(t), sameName), errkind.Conflict, "")
		sameID := a
		sameID.Name = "other"
		wantErr(t, "CreateNamespace with an existing id", h.Store.CreateNamespace(ctx(t), sameID), errkind.Conflict, "")
		bad := store.Namespace{ID: ids.New(ids.Namespace), Name: "bad", Status: "archived", CreatedAt: at(9), UpdatedAt: at(9)}
		wantErr(t, "CreateNamespace with an unknown status", h.Store.CreateNamespace(ctx(t), bad), errkind.Invalid, "")
	}},
	{"Namespace/UpdateStatus", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		ns := f.namespace()
		when := at(40)
		must(t, "UpdateNamespaceStatus", h.Store.UpdateNamespaceStatus(ctx(t), ns.ID, store.NamespaceDeleting, when))
		want := ns
		want.Status, want.UpdatedAt = store.NamespaceDeleting, stored(when)
		got, err := h.Store.GetNamespace(ctx(t), ns.ID)
		must(t, "GetNamespace", err)
		check(t, "namespace after UpdateNamespaceStatus", want, got)

		wantErr(t, "UpdateNamespaceStatus unknown id",
			h.Store.UpdateNamespaceStatus(ctx(t), ids.New(ids.Namespace), store.NamespaceReady, when), errkind.NotFound, "")
		wantErr(t, "UpdateNamespaceStatus to an unknown status",
			h.Store.UpdateNamespaceStatus(ctx(t), ns.ID, "archived", when), errkind.Invalid, "")

		// A deleting Namespace stays deleting: a reconcile that read it
		// before the deletion began cannot reopen it.
		for _, status := range []store.NamespaceStatus{store.NamespaceReady, store.NamespaceFailed, store.NamespaceProvisioning} {
			wantErr(t, "UpdateNamespaceStatus of a deleting namespace to "+string(status),
				h.Store.UpdateNamespaceStatus(ctx(t), ns.ID, status, at(41)), errkind.Conflict, errkind.CodeResourceConflict)
		}
		got, err = h.Store.GetNamespace(ctx(t), ns.ID)
		must(t, "GetNamespace", err)
		check(t, "a deleting namespace after the refused updates", want, got)
	}},
	{"Namespace/MarkDeleting", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		ns := f.namespace()
		when := at(40)
		got, err := h.Store.MarkNamespaceDeleting(ctx(t), ns.ID, when)
		must(t, "MarkNamespaceDeleting", err)
		want := ns
		want.Status, want.UpdatedAt = store.NamespaceDeleting, stored(when)
		check(t, "MarkNamespaceDeleting result", want, got)
		read, err := h.Store.GetNamespace(ctx(t), ns.ID)
		must(t, "GetNamespace", err)
		check(t, "GetNamespace after MarkNamespaceDeleting", want, read)

		// Repeating it changes nothing.
		got, err = h.Store.MarkNamespaceDeleting(ctx(t), ns.ID, at(41))
		must(t, "MarkNamespaceDeleting again", err)
		check(t, "repeated MarkNamespaceDeleting", want, got)

		// Nothing new can be created in it.
		c := store.Configuration{
			ID: ids.New(ids.Configuration), NamespaceID: ns.ID, Name: "late", Kind: store.ConfigurationKindAgent,
			Document: []byte(`{}`), Generation: 1, CreatedAt: at(42), UpdatedAt: at(42),
		}
		wantErr(t, "CreateConfiguration in a deleting namespace", h.Store.CreateConfiguration(ctx(t), c),
			errkind.Conflict, errkind.CodeResourceConflict)

		_, err = h.Store.MarkNamespaceDeleting(ctx(t), ids.New(ids.Namespace), when)
		wantErr(t, "MarkNamespaceDeleting unknown id", err, errkind.NotFound, "")
	}},
	{"Namespace/MarkDeletingNotEmpty", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		withConfig := f.namespace()
		f.configuration(withConfig)
		withAgent := f.namespace()
		cfg := f.configuration(withAgent)
		f.agent(cfg)
		for _, ns := range []store.Namespace{withConfig, withAgent} {
			_, err := h.Store.MarkNamespaceDeleting(ctx(t), ns.ID, at(50))
			wantErr(t, "MarkNamespaceDeleting of a non-empty namespace", err, errkind.Conflict, errkind.CodeNamespaceNotEmpty)
			got, err := h.Store.GetNamespace(ctx(t), ns.ID)
			must(t, "GetNamespace", err)
			check(t, "namespace after refused MarkNamespaceDeleting", ns, got)
		}
	}},
	{"Namespace/Delete", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		ns := f.namespace()
		must(t, "DeleteNamespace", h.Store.DeleteNamespace(ctx(t), ns.ID))
		_, err := h.Store.GetNamespace(ctx(t), ns.ID)
		wantErr(t, "GetNamespace after delete", err, errkind.NotFound, "")
		wantErr(t, "DeleteNamespace again", h.Store.DeleteNamespace(ctx(t), ns.ID), errkind.NotFound, "")
	}},
	{"Namespace/DeleteNotEmpty", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		withConfig := f.namespace()
		cfg := f.configuration(withConfig)
		wantErr(t, "DeleteNamespace with a configuration", h.Store.DeleteNamespace(ctx(t), withConfig.ID),
			errkind.Conflict, errkind.CodeNamespaceNotEmpty)

		withAgent := f.namespace()
		agentCfg := f.configuration(withAgent)
		a := f.agent(agentCfg)
		wantErr(t, "DeleteNamespace with an agent", h.Store.DeleteNamespace(ctx(t), withAgent.ID),
			errkind.Conflict, errkind.CodeNamespaceNotEmpty)

		// Emptied, both can go.
		must(t, "DeleteConfiguration", h.Store.DeleteConfiguration(ctx(t), withConfig.ID, cfg.ID))
		must(t, "DeleteNamespace once empty", h.Store.DeleteNamespace(ctx(t), withConfig.ID))
		must(t, "delete agent (raw)", rawExec(t, h, `DELETE FROM agents WHERE id = ?`, a.ID))
		must(t, "DeleteConfiguration", h.Store.DeleteConfiguration(ctx(t), withAgent.ID, agentCfg.ID))
		must(t, "DeleteNamespace once empty", h.Store.DeleteNamespace(ctx(t), withAgent.ID))
	}},
}

var configurationCases = []testCase{
	{"Configuration/CreateGetList", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		ns, other := f.namespace(), f.namespace()
		got, err := h.Store.ListConfigurations(ctx(t), ns.ID, store.PageRequest{Limit: store.MaxPageSize})
		must(t, "ListConfigurations", err)
		check(t, "ListConfigurations of an empty namespace", store.Page[store.Configuration]{Items: []store.Configuration{}}, got)

		a, b := f.configuration(ns), f.configuration(ns)
		inOther := f.configuration(other)
		got1, err := h.Store.GetConfiguration(ctx(t), ns.ID, a.ID)
		must(t, "GetConfiguration", err)
		check(t, "GetConfiguration", a, got1)
		// The document comes back byte for byte: key order, spacing, escapes.
		if string(got1.Document) != sampleDocument {
			t.Errorf("GetConfiguration().Document = %s, want exactly %s", got1.Document, sampleDocument)
		}
		list, err := h.Store.ListConfigurations(ctx(t), ns.ID, store.PageRequest{Limit: 2})
		must(t, "ListConfigurations", err)
		check(t, "ListConfigurations, a full last page", store.Page[store.Configuration]{Items: []store.Configuration{a, b}}, list)
		first, err := h.Store.ListConfigurations(ctx(t), ns.ID, store.PageRequest{Limit: 1})
		must(t, "ListConfigurations page of 1", err)
		check(t, "ListConfigurations first page of 1", []store.Configuration{a}, first.Items)
		if first.Next == nil {
			t.Fatal("ListConfigurations first page of 1 of 2: Next is nil")
		}
		second, err := h.Store.ListConfigurations(ctx(t), ns.ID, store.PageRequest{Limit: 1, After: first.Next})
		must(t, "ListConfigurations second page of 1", err)
		check(t, "ListConfigurations second page of 1", store.Page[store.Configuration]{Items: []store.Configuration{b}}, second)
		_, err = h.Store.ListConfigurations(ctx(t), ns.ID, store.PageRequest{Limit: store.MaxPageSize + 1})
		wantErr(t, "ListConfigurations one past the page-size limit", err, errkind.Invalid, "")

		_, err = h.Store.GetConfiguration(ctx(t), ns.ID, inOther.ID)
		wantErr(t, "GetConfiguration through another namespace", err, errkind.NotFound, "")
		_, err = h.Store.GetConfiguration(ctx(t), ns.ID, ids.New(ids.Configuration))
		wantErr(t, "GetConfiguration unknown id", err, errkind.NotFound, "")
	}},
	{"Configuration/CreateErrors", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		ns, other := f.namespace(), f.namespace()
		existing := f.configuration(ns)
		valid := func() store.Configuration {
			return store.Configuration{
				ID: ids.New(ids.Configuration), NamespaceID: ns.ID, Name: "fresh", Kind: store.ConfigurationKindAgent,
				Document: json.RawMessage(`{}`), Generation: 1, CreatedAt: at(50), UpdatedAt: at(50),
			}
		}
		tests := []struct {
			name   string
			modify func(c *store.Configuration)
			kind   errkind.Kind
		}{
			{"same name in the namespace", func(c *store.Configuration) { c.Name = existing.Name }, errkind.Conflict},
			{"existing id", func(c *store.Configuration) { c.ID = existing.ID }, errkind.Conflict},
			{"unknown namespace", func(c *store.Configuration) { c.NamespaceID = ids.New(ids.Namespace) }, errkind.NotFound},
			{"kind not agent", func(c *store.Configuration) { c.Kind = "preset" }, errkind.Invalid},
			{"document not an object", func(c *store.Configuration) { c.Document = json.RawMessage(`[1]`) }, errkind.Invalid},
			{"document not JSON", func(c *store.Configuration) { c.Document = json.RawMessage(`{"a":`) }, errkind.Invalid},
			{"no document", func(c *store.Configuration) { c.Document = nil }, errkind.Invalid},
			{"generation zero", func(c *store.Configuration) { c.Generation = 0 }, errkind.Invalid},
		}
		for _, tt := range tests {
			c := valid()
			tt.modify(&c)
			wantErr(t, "CreateConfiguration with "+tt.name, h.Store.CreateConfiguration(ctx(t), c), tt.kind, "")
		}
		// The same name in another namespace is fine.
		c := valid()
		c.NamespaceID, c.Name = other.ID, existing.Name
		must(t, "CreateConfiguration with the same name in another namespace", h.Store.CreateConfiguration(ctx(t), c))
	}},
	{"Configuration/Update", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		ns := f.namespace()
		c, sibling := f.configuration(ns), f.configuration(ns)
		upd := c
		upd.Name = "renamed"
		upd.Document = json.RawMessage(`{ "model" : "b" }`)
		upd.Kind, upd.Generation, upd.CreatedAt = "ignored", 99, at(999) // not part of an update
		upd.UpdatedAt = at(60)
		got, err := h.Store.UpdateConfiguration(ctx(t), upd)
		must(t, "UpdateConfiguration", err)
		want := c
		want.Name, want.Document, want.Generation, want.UpdatedAt = "renamed", upd.Document, 2, stored(upd.UpdatedAt)
		check(t, "UpdateConfiguration result", want, got)
		read, err := h.Store.GetConfiguration(ctx(t), ns.ID, c.ID)
		must(t, "GetConfiguration", err)
		check(t, "GetConfiguration after update", want, read)

		upd.UpdatedAt = at(61)
		got, err = h.Store.UpdateConfiguration(ctx(t), upd)
		must(t, "UpdateConfiguration again", err)
		if got.Generation != 3 {
			t.Errorf("second UpdateConfiguration().Generation = %d, want 3", got.Generation)
		}

		clash := upd
		clash.Name = sibling.Name
		_, err = h.Store.UpdateConfiguration(ctx(t), clash)
		wantErr(t, "UpdateConfiguration to a sibling's name", err, errkind.Conflict, "")
		missing := upd
		missing.ID = ids.New(ids.Configuration)
		_, err = h.Store.UpdateConfiguration(ctx(t), missing)
		wantErr(t, "UpdateConfiguration unknown id", err, errkind.NotFound, "")
		wrongNS := upd
		wrongNS.NamespaceID = f.namespace().ID
		_, err = h.Store.UpdateConfiguration(ctx(t), wrongNS)
		wantErr(t, "UpdateConfiguration through another namespace", err, errkind.NotFound, "")
	}},
	{"Configuration/Delete", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		ns := f.namespace()
		c := f.configuration(ns)
		wantErr(t, "DeleteConfiguration through another namespace",
			h.Store.DeleteConfiguration(ctx(t), f.namespace().ID, c.ID), errkind.NotFound, "")
		must(t, "DeleteConfiguration", h.Store.DeleteConfiguration(ctx(t), ns.ID, c.ID))
		_, err := h.Store.GetConfiguration(ctx(t), ns.ID, c.ID)
		wantErr(t, "GetConfiguration after delete", err, errkind.NotFound, "")
		wantErr(t, "DeleteConfiguration again", h.Store.DeleteConfiguration(ctx(t), ns.ID, c.ID), errkind.NotFound, "")
	}},
	{"Configuration/DeleteReferencedConflicts", func(t *testing.T, h Harness) {
		f := newFixture(t, h)
		c := f.configuration(f.namespace())
		f.agent(c)
		wantErr(t, "DeleteConfiguration referenced by an agent",
			h.Store.DeleteConfiguration(ctx(t), c.NamespaceID, c.ID), errkind.Conflict, "")
		_, err := h.Store.GetConfiguration(ctx(t), c.NamespaceID, c.ID)
		must(t, "GetConfiguration after refused delete", err)
	}},
}
