package authz

import (
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
