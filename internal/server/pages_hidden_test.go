package server_test

import (
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/url"
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/authz"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// walk follows nextCursor from path in pages of limit as c and returns
// every id listed and the id every cursor names, failing past 100 pages or
// on a page longer than limit.
func walk(t *testing.T, e *env, path string, limit int, c cred) (ids, cursorIDs []string) {
	t.Helper()
	cursor := ""
	for range 100 {
		q := url.Values{"limit": {fmt.Sprint(limit)}}
		if cursor != "" {
			q.Set("cursor", cursor)
		}
		var p idPage
		e.must("GET", path+"?"+q.Encode(), nil, c, 200, &p)
		if len(p.Items) > limit {
			t.Fatalf("GET %s: %d items on a page of %d", path, len(p.Items), limit)
		}
		for _, it := range p.Items {
			ids = append(ids, it.ID)
		}
		if p.NextCursor == "" {
			return ids, cursorIDs
		}
		cursorIDs = append(cursorIDs, cursorID(t, p.NextCursor))
		cursor = p.NextCursor
	}
	t.Fatalf("GET %s: more than 100 pages", path)
	return nil, nil
}

// cursorID decodes the id a page cursor names. The cursor is opaque to
// clients by contract, but not by construction (base64url of JSON), which
// is why it must never name what the caller may not see.
func cursorID(t *testing.T, cursor string) string {
	t.Helper()
	raw, err := base64.RawURLEncoding.DecodeString(cursor)
	if err != nil {
		t.Fatalf("cursor %q: %v", cursor, err)
	}
	var c struct {
		ID string `json:"id"`
	}
	if err := json.Unmarshal(raw, &c); err != nil {
		t.Fatalf("cursor %q: %v", cursor, err)
	}
	return c.ID
}

// TestPageCursorsNameOnlyVisibleItems: on every list filtered per item,
// a caller who may read only some of the items (every other one, hidden
// ones first and last) walking with pages of 1, 2 and 3 gets exactly the
// items it may read, in the list's order, and no cursor names an item it
// may not read. Before, a page's cursor was the last row the store read,
// hidden or not: a key with no grants learned every Namespace id.
func TestPageCursorsNameOnlyVisibleItems(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		e := newDeployEnv(t, st, compute.Capabilities{})
		// nsKey may read every other Namespace; key may read the deploy
		// Namespace and every other item of each list in it, and every
		// other service principal.
		nsSP, _, nsKey := e.principal("some-namespaces", "", "")
		sp, _, key := e.principal("some-of-each", "", "")
		_, _, none := e.principal("no-grants", "", "")
		bindTo := func(subject, role string, ns string, kind store.ResourceKind, id string) {
			t.Helper()
			e.must("POST", "/iam/access-bindings", map[string]string{"subjectId": subject, "roleId": role,
				"namespaceId": ns, "resourceKind": string(kind), "resourceId": id}, e.admin, 201, nil)
		}
		bind := func(role string, ns string, kind store.ResourceKind, id string) { bindTo(sp, role, ns, kind, id) }
		var nsRead idOnly
		e.must("POST", "/iam/roles", map[string]any{"name": "namespace-read",
			"permissions": []store.Permission{{Action: store.ActionRead, ResourceKind: store.KindNamespace}}}, e.admin, 201, &nsRead)

		// visibleOf lists path whole as the administrator and picks every
		// other item, the first and the last hidden (an odd count).
		visibleOf := func(path string) (all, visible []string) {
			t.Helper()
			var whole idPage
			e.must("GET", path+"?limit=500", nil, e.admin, 200, &whole)
			for _, it := range whole.Items {
				all = append(all, it.ID)
			}
			if len(all)%2 == 0 || len(all) < 5 {
				t.Fatalf("GET %s: %d items; the test needs an odd number of at least 5", path, len(all))
			}
			for i := 1; i < len(all); i += 2 {
				visible = append(visible, all[i])
			}
			return all, visible
		}

		// Namespaces: 7 in all, the deploy one first.
		for i := range 6 {
			e.must("POST", "/namespaces", map[string]string{"name": fmt.Sprintf("walk-%d", i)}, e.admin, 201, nil)
		}
		_, visibleNS := visibleOf("/namespaces")
		for _, ns := range visibleNS {
			bindTo(nsSP, nsRead.ID, ns, store.KindNamespace, ns)
		}
		bind(nsRead.ID, e.ns, store.KindNamespace, e.ns)

		// Configurations of the deploy Namespace: 5 in all.
		for i := range 4 {
			e.must("POST", "/namespaces/"+e.ns+"/configurations",
				map[string]any{"name": fmt.Sprintf("walk-%d", i), "kind": "agent", "document": map[string]any{}}, e.admin, 201, nil)
		}
		cfgs := "/namespaces/" + e.ns + "/configurations"
		_, visibleCfg := visibleOf(cfgs)
		for _, id := range visibleCfg {
			bind(authz.RoleViewerID, e.ns, store.KindConfiguration, id)
		}

		// Agents: 5, bound on every other one.
		for i := range 5 {
			e.createAgent(fmt.Sprintf("walk-%d", i), nil)
		}
		agents := "/namespaces/" + e.ns + "/agents"
		_, visibleAgents := visibleOf(agents)
		for _, id := range visibleAgents {
			bind(authz.RoleViewerID, e.ns, store.KindAgent, id)
		}

		// Revisions of a visible Agent: 5, read denied on every other one.
		agent := visibleAgents[0]
		for range 5 {
			e.deploy(agent)
		}
		revisions := "/namespaces/" + e.ns + "/agents/" + agent + "/revisions"
		allRevs, visibleRevs := visibleOf(revisions)
		for _, id := range allRevs {
			if !slices.Contains(visibleRevs, id) {
				e.must("POST", "/iam/restrictions", map[string]string{"subjectId": sp, "action": "read",
					"resourceKind": string(store.KindAgentRevision), "namespaceId": e.ns, "resourceId": id}, e.admin, 201, nil)
			}
		}

		// Service principals: the three above and 2 more.
		for i := range 2 {
			e.must("POST", "/iam/service-principals", map[string]string{"name": fmt.Sprintf("walk-%d", i)}, e.admin, 201, nil)
		}
		_, visibleSPs := visibleOf("/iam/service-principals")
		for _, id := range visibleSPs {
			bind(authz.RoleViewerID, "", store.KindServiceAccount, id)
		}

		for _, tc := range []struct {
			path    string
			c       cred
			visible []string
		}{
			{"/namespaces", nsKey, visibleNS},
			{cfgs, key, visibleCfg},
			{agents, key, visibleAgents},
			{revisions, key, visibleRevs},
			{"/iam/service-principals", key, visibleSPs},
		} {
			for _, limit := range []int{1, 2, 3} {
				ids, cursorIDs := walk(t, e.env, tc.path, limit, tc.c)
				if diff := cmp.Diff(tc.visible, ids); diff != "" {
					t.Errorf("GET %s in pages of %d: items (-want +got):\n%s", tc.path, limit, diff)
				}
				for _, id := range cursorIDs {
					if !slices.Contains(tc.visible, id) {
						t.Errorf("GET %s in pages of %d: a cursor names %s, which the caller may not read", tc.path, limit, id)
					}
				}
			}
		}

		// A key with no grants at all learns nothing: one empty last page.
		for _, limit := range []int{1, 2} {
			ids, cursorIDs := walk(t, e.env, "/namespaces", limit, none)
			if len(ids) != 0 || len(cursorIDs) != 0 {
				t.Errorf("GET /namespaces in pages of %d by a key without grants: items %v, cursors naming %v; want none", limit, ids, cursorIDs)
			}
		}
	})
}
