package authz

import (
	"slices"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/store"
)

func TestDecide(t *testing.T) {
	const ns1, ns2 = "ns_1", "ns_2"
	agentRead := []store.Permission{{Action: store.ActionRead, ResourceKind: store.KindAgent}}
	agentOps := []store.Permission{{Action: store.ActionRead, ResourceKind: store.KindAgent}, {Action: store.ActionOperate, ResourceKind: store.KindAgent}}
	revRead := []store.Permission{{Action: store.ActionRead, ResourceKind: store.KindAgentRevision}}
	agent1 := Resource{Kind: store.KindAgent, ID: "agt_1", NamespaceID: ns1}
	agent2 := Resource{Kind: store.KindAgent, ID: "agt_2", NamespaceID: ns1}
	agentOther := Resource{Kind: store.KindAgent, ID: "agt_3", NamespaceID: ns2}
	rev1 := Resource{Kind: store.KindAgentRevision, ID: "rev_1", NamespaceID: ns1, AgentID: "agt_1"}

	user := &Subject{ID: "usr_1", Kind: KindUser}
	key := &Subject{ID: "sa_1", Kind: KindServicePrincipal, NamespaceID: ns1}

	tests := []struct {
		name         string
		subject      *Subject
		grants       []store.Grant
		restrictions []store.Restriction
		action       store.Action
		res          Resource
		want         Decision
	}{
		{name: "no grants", subject: user, action: store.ActionRead, res: agent1, want: Decision{}},
		{
			name: "installation-wide grant covers any namespace", subject: user, action: store.ActionRead, res: agentOther,
			grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1"}, Permissions: agentRead}},
			want:   Decision{Allowed: true, BindingIDs: []string{"b1"}},
		},
		{
			name: "namespace grant covers its namespace", subject: user, action: store.ActionRead, res: agent2,
			grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1", NamespaceID: ns1}, Permissions: agentRead}},
			want:   Decision{Allowed: true, BindingIDs: []string{"b1"}},
		},
		{
			name: "namespace grant does not cover another namespace", subject: user, action: store.ActionRead, res: agentOther,
			grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1", NamespaceID: ns1}, Permissions: agentRead}},
			want:   Decision{},
		},
		{
			name: "exact grant covers only that agent", subject: user, action: store.ActionRead, res: agent2,
			grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1", NamespaceID: ns1, ResourceKind: store.KindAgent, ResourceID: "agt_1"}, Permissions: agentRead}},
			want:   Decision{},
		},
		{
			name: "exact agent grant covers its revisions", subject: user, action: store.ActionRead, res: rev1,
			grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1", NamespaceID: ns1, ResourceKind: store.KindAgent, ResourceID: "agt_1"}, Permissions: revRead}},
			want:   Decision{Allowed: true, BindingIDs: []string{"b1"}},
		},
		{
			name: "action not in role", subject: user, action: store.ActionDelete, res: agent1,
			grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1"}, Permissions: agentOps}},
			want:   Decision{},
		},
		{
			name: "restriction wins over grant", subject: user, action: store.ActionOperate, res: agent1,
			grants:       []store.Grant{{Binding: store.AccessBinding{ID: "b1"}, Permissions: agentOps}},
			restrictions: []store.Restriction{{ID: "r1", Action: store.ActionOperate, ResourceKind: store.KindAgent, NamespaceID: ns1, ResourceID: "agt_1"}},
			want:         Decision{Restricted: true, Restriction: "r1"},
		},
		{
			name: "restriction on another agent does not apply", subject: user, action: store.ActionOperate, res: agent2,
			grants:       []store.Grant{{Binding: store.AccessBinding{ID: "b1"}, Permissions: agentOps}},
			restrictions: []store.Restriction{{ID: "r1", Action: store.ActionOperate, ResourceKind: store.KindAgent, NamespaceID: ns1, ResourceID: "agt_1"}},
			want:         Decision{Allowed: true, BindingIDs: []string{"b1"}},
		},
		{
			name: "two grants cover it: both named", subject: user, action: store.ActionRead, res: agent2,
			grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1"}, Permissions: agentRead},
				{Binding: store.AccessBinding{ID: "b2", NamespaceID: ns1}, Permissions: agentOps}},
			want: Decision{Allowed: true, BindingIDs: []string{"b1", "b2"}},
		},
		{
			name: "namespace key inside its namespace", subject: key, action: store.ActionRead, res: agent1,
			grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1"}, Permissions: agentRead}},
			want:   Decision{Allowed: true, BindingIDs: []string{"b1"}},
		},
		{
			name: "namespace key outside its namespace", subject: key, action: store.ActionRead, res: agentOther,
			grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1"}, Permissions: agentRead}},
			want:   Decision{OutOfScope: true},
		},
		{
			name: "namespace key on installation", subject: key, action: store.ActionAdminister, res: Installation,
			grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1"}, Permissions: AllPermissions()}},
			want:   Decision{OutOfScope: true},
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &access{subject: tc.subject, grants: tc.grants, restrictions: tc.restrictions}
			got := a.decide(tc.action, tc.res)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("decide(%s, %+v) mismatch (-want +got):\n%s", tc.action, tc.res, diff)
			}
			if allowed := a.allows(tc.action, tc.res); allowed != tc.want.Allowed {
				t.Errorf("allows(%s, %+v) = %v, want %v as decide", tc.action, tc.res, allowed, tc.want.Allowed)
			}
		})
	}
}

func TestBuiltinRolesUseOnlyTablePermissions(t *testing.T) {
	for _, r := range BuiltinRoles() {
		for _, p := range r.Permissions {
			if !Supported(p.ResourceKind, p.Action) {
				t.Errorf("role %s holds %v, which is not in the permission table", r.Name, p)
			}
		}
	}
}

// TestKeepAllowed: the items a subject may read, in order; the page
// itself when it may read them all, a new slice (the page unchanged)
// otherwise.
func TestKeepAllowed(t *testing.T) {
	user := &Subject{ID: "usr_1", Kind: KindUser}
	agentRead := []store.Permission{{Action: store.ActionRead, ResourceKind: store.KindAgent}}
	exact := func(ids ...string) []store.Grant {
		var gs []store.Grant
		for _, id := range ids {
			gs = append(gs, store.Grant{Binding: store.AccessBinding{ID: "b_" + id, NamespaceID: "ns_1", ResourceKind: store.KindAgent, ResourceID: id}, Permissions: agentRead})
		}
		return gs
	}
	res := func(id string) Resource { return Resource{Kind: store.KindAgent, ID: id, NamespaceID: "ns_1"} }
	tests := []struct {
		name   string
		grants []store.Grant
		items  []string
		want   []string
		same   bool // the result is items itself
	}{
		{name: "empty", grants: exact("a"), items: []string{}, want: []string{}, same: true},
		{name: "all allowed", grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1"}, Permissions: agentRead}}, items: []string{"a", "b", "c"}, want: []string{"a", "b", "c"}, same: true},
		{name: "first denied", grants: exact("b", "c"), items: []string{"a", "b", "c"}, want: []string{"b", "c"}},
		{name: "middle denied", grants: exact("a", "c"), items: []string{"a", "b", "c"}, want: []string{"a", "c"}},
		{name: "last denied", grants: exact("a", "b"), items: []string{"a", "b", "c"}, want: []string{"a", "b"}},
		{name: "all denied", grants: exact("z"), items: []string{"a", "b"}, want: []string{}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			acc := &access{subject: user, grants: tc.grants}
			in := slices.Clone(tc.items)
			got := keepAllowed(acc, in, res)
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("keepAllowed mismatch (-want +got):\n%s", diff)
			}
			if diff := cmp.Diff(tc.items, in); diff != "" {
				t.Errorf("the input changed (-before +after):\n%s", diff)
			}
			if same := len(got) > 0 && &got[0] == &in[0]; same != (tc.same && len(in) > 0) {
				t.Errorf("result shares the input: %v, want %v", same, tc.same)
			}
		})
	}
}
