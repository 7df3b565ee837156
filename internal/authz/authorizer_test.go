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
			// A Namespace's binding on an exact resource reaches it only
			// in that Namespace, whatever id it names.
			name: "exact grant in one namespace does not cover that id in another", subject: user, action: store.ActionDelete,
			res: Resource{Kind: store.KindServiceAccount, ID: "sa_b", NamespaceID: ns2},
			grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1", NamespaceID: ns1, ResourceKind: store.KindServiceAccount, ResourceID: "sa_b"},
				Permissions: []store.Permission{{Action: store.ActionDelete, ResourceKind: store.KindServiceAccount}}}},
			want: Decision{},
		},
		{
			name: "exact grant in one namespace does not cover that id at installation level", subject: user, action: store.ActionDelete,
			res: Resource{Kind: store.KindServiceAccount, ID: "sa_i"},
			grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1", NamespaceID: ns1, ResourceKind: store.KindServiceAccount, ResourceID: "sa_i"},
				Permissions: []store.Permission{{Action: store.ActionDelete, ResourceKind: store.KindServiceAccount}}}},
			want: Decision{},
		},
		{
			name: "exact grant without a namespace covers its installation-level principal", subject: user, action: store.ActionDelete,
			res: Resource{Kind: store.KindServiceAccount, ID: "sa_i"},
			grants: []store.Grant{{Binding: store.AccessBinding{ID: "b1", ResourceKind: store.KindServiceAccount, ResourceID: "sa_i"},
				Permissions: []store.Permission{{Action: store.ActionDelete, ResourceKind: store.KindServiceAccount}}}},
			want: Decision{Allowed: true, BindingIDs: []string{"b1"}},
		},
		{
			// A deny matching more is the safe side: it keeps its exact
			// resource whatever Namespace it was stored with.
			name: "exact restriction stored with another namespace still applies", subject: user, action: store.ActionOperate, res: agentOther,
			grants:       []store.Grant{{Binding: store.AccessBinding{ID: "b1"}, Permissions: agentOps}},
			restrictions: []store.Restriction{{ID: "r1", Action: store.ActionOperate, ResourceKind: store.KindAgent, NamespaceID: ns1, ResourceID: "agt_3"}},
			want:         Decision{Restricted: true, Restriction: "r1"},
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

// TestReadsAgentsIn: whether a caller without Namespace read may list a
// Namespace's Agents is decided from its grants: a grant of Agent read
// covering the Namespace (at any scope), or one on an exact Agent there,
// unless a restriction denies Agent read across the Namespace.
func TestReadsAgentsIn(t *testing.T) {
	const ns1, ns2 = "ns_1", "ns_2"
	agentRead := []store.Permission{{Action: store.ActionRead, ResourceKind: store.KindAgent}}
	agentOperate := []store.Permission{{Action: store.ActionOperate, ResourceKind: store.KindAgent}}
	grant := func(ns string, kind store.ResourceKind, id string, ps []store.Permission) store.Grant {
		return store.Grant{Binding: store.AccessBinding{ID: "b", NamespaceID: ns, ResourceKind: kind, ResourceID: id}, Permissions: ps}
	}
	denyRead := func(ns, id string) store.Restriction {
		return store.Restriction{ID: "r", Action: store.ActionRead, ResourceKind: store.KindAgent, NamespaceID: ns, ResourceID: id}
	}
	tests := []struct {
		name         string
		grants       []store.Grant
		restrictions []store.Restriction
		want         bool
	}{
		{name: "no grant", want: false},
		{name: "Agent read installation-wide", grants: []store.Grant{grant("", "", "", agentRead)}, want: true},
		{name: "Agent read across the Namespace", grants: []store.Grant{grant(ns1, "", "", agentRead)}, want: true},
		{name: "Agent read on the exact Namespace", grants: []store.Grant{grant(ns1, store.KindNamespace, ns1, agentRead)}, want: true},
		{name: "Agent read on an exact Agent there", grants: []store.Grant{grant(ns1, store.KindAgent, "agt_1", agentRead)}, want: true},
		{name: "Agent read across another Namespace", grants: []store.Grant{grant(ns2, "", "", agentRead)}, want: false},
		{name: "Agent read on an exact Agent elsewhere", grants: []store.Grant{grant(ns2, store.KindAgent, "agt_2", agentRead)}, want: false},
		{name: "another Agent action across the Namespace", grants: []store.Grant{grant(ns1, "", "", agentOperate)}, want: false},
		{
			name: "Agent read across the Namespace, one Agent denied", grants: []store.Grant{grant(ns1, "", "", agentRead)},
			restrictions: []store.Restriction{denyRead(ns1, "agt_1")}, want: true,
		},
		{
			name: "Agent read installation-wide, denied across the Namespace", grants: []store.Grant{grant("", "", "", agentRead)},
			restrictions: []store.Restriction{denyRead(ns1, "")}, want: false,
		},
		{
			name: "Agent read on an exact Agent, that Agent denied", grants: []store.Grant{grant(ns1, store.KindAgent, "agt_1", agentRead)},
			restrictions: []store.Restriction{denyRead(ns1, "agt_1")}, want: false,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &access{subject: &Subject{ID: "usr_1", Kind: KindUser}, grants: tc.grants, restrictions: tc.restrictions}
			if got := a.readsAgentsIn(ns1); got != tc.want {
				t.Errorf("readsAgentsIn(%s) = %v, want %v", ns1, got, tc.want)
			}
		})
	}
}

// TestCoversGrant: an issuer holds a principal's grant only when it is
// allowed the grant's permissions on the grant's whole scope and none of
// its restrictions on the same action and kind lies inside that scope
// (a restriction on one exact Agent X inside "Agents in Namespace A").
func TestCoversGrant(t *testing.T) {
	const nsA, nsB = "ns_a", "ns_b"
	all := []store.Grant{{Binding: store.AccessBinding{ID: "admin"}, Permissions: AllPermissions()}}
	agentDelete := []store.Permission{{Action: store.ActionDelete, ResourceKind: store.KindAgent}}
	revRead := []store.Permission{{Action: store.ActionRead, ResourceKind: store.KindAgentRevision}}
	target := func(ns string, kind store.ResourceKind, id string, ps []store.Permission) store.Grant {
		return store.Grant{Binding: store.AccessBinding{ID: "t", NamespaceID: ns, ResourceKind: kind, ResourceID: id}, Permissions: ps}
	}
	deny := func(action store.Action, kind store.ResourceKind, ns, id string) store.Restriction {
		return store.Restriction{ID: "r", Action: action, ResourceKind: kind, NamespaceID: ns, ResourceID: id}
	}
	tests := []struct {
		name         string
		grants       []store.Grant
		restrictions []store.Restriction
		target       store.Grant
		want         bool
	}{
		{name: "unrestricted administrator, Namespace grant", grants: all, target: target(nsA, "", "", agentDelete), want: true},
		{name: "no grant", target: target(nsA, "", "", agentDelete), want: false},
		{
			name: "denied on one Agent of the Namespace", grants: all, target: target(nsA, "", "", agentDelete),
			restrictions: []store.Restriction{deny(store.ActionDelete, store.KindAgent, nsA, "agt_x")}, want: false,
		},
		{
			name: "denied on one Agent, installation-wide grant", grants: all, target: target("", "", "", agentDelete),
			restrictions: []store.Restriction{deny(store.ActionDelete, store.KindAgent, nsA, "agt_x")}, want: false,
		},
		{
			name: "denied on one Agent, grant on the exact Namespace", grants: all, target: target(nsA, store.KindNamespace, nsA, agentDelete),
			restrictions: []store.Restriction{deny(store.ActionDelete, store.KindAgent, nsA, "agt_x")}, want: false,
		},
		{
			name: "denied on that exact Agent", grants: all, target: target(nsA, store.KindAgent, "agt_x", agentDelete),
			restrictions: []store.Restriction{deny(store.ActionDelete, store.KindAgent, nsA, "agt_x")}, want: false,
		},
		{
			name: "denied across the Namespace", grants: all, target: target(nsA, "", "", agentDelete),
			restrictions: []store.Restriction{deny(store.ActionDelete, store.KindAgent, nsA, "")}, want: false,
		},
		{
			name: "denied on an Agent of another Namespace", grants: all, target: target(nsA, "", "", agentDelete),
			restrictions: []store.Restriction{deny(store.ActionDelete, store.KindAgent, nsB, "agt_y")}, want: true,
		},
		{
			name: "denied on another exact Agent", grants: all, target: target(nsA, store.KindAgent, "agt_x", agentDelete),
			restrictions: []store.Restriction{deny(store.ActionDelete, store.KindAgent, nsA, "agt_z")}, want: true,
		},
		{
			name: "denied another action on the Agent", grants: all, target: target(nsA, "", "", agentDelete),
			restrictions: []store.Restriction{deny(store.ActionOperate, store.KindAgent, nsA, "agt_x")}, want: true,
		},
		{
			name: "denied one revision, grant on an exact Agent of its Namespace", grants: all, target: target(nsA, store.KindAgent, "agt_x", revRead),
			restrictions: []store.Restriction{deny(store.ActionRead, store.KindAgentRevision, nsA, "rev_1")}, want: false,
		},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			a := &access{subject: &Subject{ID: "usr_1", Kind: KindUser}, grants: tc.grants, restrictions: tc.restrictions}
			if got := a.coversGrant(tc.target); got != tc.want {
				t.Errorf("coversGrant(%+v) = %v, want %v", tc.target.Binding, got, tc.want)
			}
		})
	}
}
