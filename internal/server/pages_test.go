package server_test

import (
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

type idPage struct {
	Items []struct {
		ID string `json:"id"`
	} `json:"items"`
	NextCursor string `json:"nextCursor"`
}

// pageAll follows nextCursor from path with the given page size and
// returns every id, failing past 1,000 pages.
func pageAll(t *testing.T, e *env, path string, limit int, c cred) []string {
	t.Helper()
	var ids []string
	cursor := ""
	for range 1000 {
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
			return ids
		}
		cursor = p.NextCursor
	}
	t.Fatalf("GET %s: more than 1000 pages", path)
	return nil
}

// TestPagedLists checks the cursor pagination of GET /namespaces, GET
// /namespaces/{ns}/agents and GET /namespaces/{ns}/configurations: the page size at its limit (500) and one past
// it, the default, malformed cursors and queries, that small pages visit
// every item once in creation order, and that a caller bound to one exact
// Agent pages through only that Agent while one bound to nothing is told
// 404.
func TestPagedLists(t *testing.T) {
	e := newEnv(t, testdb.SQLite(t))
	var ns, cfg idOnly
	e.must("POST", "/namespaces", map[string]string{"name": "paged"}, e.admin, 201, &ns)
	e.must("POST", "/namespaces/"+ns.ID+"/configurations", map[string]any{"name": "c", "kind": "agent", "document": map[string]any{}}, e.admin, 201, &cfg)
	const n = store.MaxPageSize + 1
	var want []string
	for i := range n {
		var a idOnly
		e.must("POST", "/namespaces/"+ns.ID+"/agents", map[string]any{"name": fmt.Sprintf("a-%d", i), "configurationId": cfg.ID}, e.admin, 201, &a)
		want = append(want, a.ID)
	}
	agents := "/namespaces/" + ns.ID + "/agents"
	// The test clock stands still: every Agent has the same creation time,
	// so the list's order is the ids' order (the tie-breaker).
	oneAgent := want[250]
	slices.Sort(want)

	var p idPage
	e.must("GET", agents+"?limit=500", nil, e.admin, 200, &p)
	if len(p.Items) != 500 || p.NextCursor == "" {
		t.Fatalf("limit=500 of %d: %d items, nextCursor %q; want 500 and a cursor", n, len(p.Items), p.NextCursor)
	}
	var last idPage
	e.must("GET", agents+"?limit=500&cursor="+url.QueryEscape(p.NextCursor), nil, e.admin, 200, &last)
	if len(last.Items) != 1 || last.Items[0].ID != want[n-1] || last.NextCursor != "" {
		t.Errorf("second page: %+v; want exactly the last Agent and no cursor", last)
	}
	e.must("GET", agents, nil, e.admin, 200, &p)
	if len(p.Items) != 100 || p.NextCursor == "" {
		t.Errorf("default page: %d items, nextCursor %q; want 100 and a cursor", len(p.Items), p.NextCursor)
	}
	if diff := cmp.Diff(want, pageAll(t, e, agents, 37, e.admin)); diff != "" {
		t.Errorf("pages of 37 (-want +got):\n%s", diff)
	}
	cfgs := "/namespaces/" + ns.ID + "/configurations"
	wantCfg := []string{cfg.ID}
	for i := range 2 {
		var c idOnly
		e.must("POST", cfgs, map[string]any{"name": fmt.Sprintf("c-%d", i), "kind": "agent", "document": map[string]any{}}, e.admin, 201, &c)
		wantCfg = append(wantCfg, c.ID)
	}
	slices.Sort(wantCfg)
	if diff := cmp.Diff(wantCfg, pageAll(t, e, cfgs, 2, e.admin)); diff != "" {
		t.Errorf("Configurations in pages of 2 (-want +got):\n%s", diff)
	}
	for _, path := range []string{agents, "/namespaces", cfgs} {
		for _, bad := range []string{"?limit=501", "?limit=0", "?limit=-1", "?limit=x", "?cursor=%21%21", "?cursor=e30", "?limit=1&limit=2", "?color=red"} {
			if code, _, _ := e.do("GET", path+bad, nil, e.admin); code != 400 {
				t.Errorf("GET %s%s: %d, want 400", path, bad, code)
			}
		}
	}

	// 501 Namespaces in all (the one above and 500 more).
	wantNS := []string{ns.ID}
	for i := range store.MaxPageSize {
		var x idOnly
		e.must("POST", "/namespaces", map[string]string{"name": fmt.Sprintf("ns-%d", i)}, e.admin, 201, &x)
		wantNS = append(wantNS, x.ID)
	}
	slices.Sort(wantNS)
	if diff := cmp.Diff(wantNS, pageAll(t, e, "/namespaces", 500, e.admin)); diff != "" {
		t.Errorf("Namespaces in pages of 500 (-want +got):\n%s", diff)
	}

	// A principal bound to one exact Agent (the viewer role, no
	// Namespace read) pages through the whole list and sees only it; one
	// bound to nothing there is told 404.
	sp, _, key := e.principal("one-agent", "", "")
	e.must("POST", "/iam/access-bindings", map[string]string{"subjectId": sp, "roleId": authz.RoleViewerID,
		"namespaceId": ns.ID, "resourceKind": string(store.KindAgent), "resourceId": oneAgent}, e.admin, 201, nil)
	if diff := cmp.Diff([]string{oneAgent}, pageAll(t, e, agents, 100, key)); diff != "" {
		t.Errorf("Agents seen by a caller bound to one (-want +got):\n%s", diff)
	}
	_, _, none := e.principal("nothing", "", "")
	if code, _, _ := e.do("GET", agents+"?limit=10", nil, none); code != 404 {
		t.Errorf("GET %s by a caller without any grant: %d, want 404", agents, code)
	}
}

// TestPagedRevisionsAndIAMLists checks the paging of the revisions and IAM
// lists on both engines: the page size at its limit (500) and one past it,
// and that pages of one visit every item exactly once, in the order of the
// whole list.
func TestPagedRevisionsAndIAMLists(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, st *sqlstore.Store) {
		e := newDeployEnv(t, st, compute.Capabilities{})
		agent := e.createAgent("a", nil)
		for range 3 {
			e.deploy(agent)
		}
		for i := range 3 {
			sp, _, _ := e.principal(fmt.Sprintf("paged-%d", i), "", "")
			var role idOnly
			e.must("POST", "/iam/roles", map[string]any{"name": fmt.Sprintf("r-%d", i), "permissions": []map[string]string{{"action": "read", "resourceKind": "agent"}}}, e.admin, 201, &role)
			e.must("POST", "/iam/access-bindings", map[string]string{"subjectId": sp, "roleId": role.ID}, e.admin, 201, nil)
			e.must("POST", "/iam/restrictions", map[string]string{"subjectId": sp, "action": "delete", "resourceKind": "agent"}, e.admin, 201, nil)
		}
		revisions := "/namespaces/" + e.ns + "/agents/" + agent + "/revisions"
		for _, path := range []string{revisions, "/iam/service-principals", "/iam/roles", "/iam/access-bindings", "/iam/restrictions"} {
			var whole idPage
			e.must("GET", path+"?limit=500", nil, e.admin, 200, &whole)
			if len(whole.Items) < 3 || whole.NextCursor != "" {
				t.Errorf("GET %s?limit=500: %d items, nextCursor %q; want at least 3 and no cursor", path, len(whole.Items), whole.NextCursor)
			}
			var want []string
			for _, it := range whole.Items {
				want = append(want, it.ID)
			}
			if diff := cmp.Diff(want, pageAll(t, e.env, path, 1, e.admin)); diff != "" {
				t.Errorf("GET %s in pages of 1 (-want +got):\n%s", path, diff)
			}
			var def idPage
			e.must("GET", path, nil, e.admin, 200, &def)
			if len(def.Items) != len(want) {
				t.Errorf("GET %s with the default page size: %d items, want %d", path, len(def.Items), len(want))
			}
			for _, bad := range []string{"?limit=501", "?limit=0", "?cursor=%21%21", "?color=red"} {
				if code, _, _ := e.do("GET", path+bad, nil, e.admin); code != 400 {
					t.Errorf("GET %s%s: %d, want 400", path, bad, code)
				}
			}
		}
	})
}
