package workspace

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSetupWireFormat pins the JSON that drivers hand the setup runner
// (setuprunner.ParsePayload reads it): key names, key order, defaultsId and
// files left out when empty, completed always present.
func TestSetupWireFormat(t *testing.T) {
	const d = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		name string
		in   Setup
		want string
	}{
		{
			name: "pending",
			in:   Setup{ID: "wss_1", NamespaceID: "ns_1", AgentID: "agt_1", DefaultsID: d, Files: map[string]string{"SOUL.md": "be <kind>", "AGENTS.md": ""}},
			want: `{"id":"wss_1","namespaceId":"ns_1","agentId":"agt_1","defaultsId":"` + d + `","files":{"AGENTS.md":"","SOUL.md":"be \u003ckind\u003e"},"completed":false}`,
		},
		{
			name: "completed without defaults",
			in:   Setup{ID: "wss_1", NamespaceID: "ns_1", AgentID: "agt_1", Completed: true},
			want: `{"id":"wss_1","namespaceId":"ns_1","agentId":"agt_1","completed":true}`,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := json.Marshal(tt.in)
			if err != nil {
				t.Fatalf("json.Marshal: %v", err)
			}
			if string(got) != tt.want {
				t.Errorf("json.Marshal(%+v):\n got  %s\n want %s", tt.in, got, tt.want)
			}
		})
	}
}

func TestSetupIdentityAndWithoutFiles(t *testing.T) {
	s := Setup{ID: "wss_1", NamespaceID: "ns_1", AgentID: "agt_1", DefaultsID: "d", Files: map[string]string{"SOUL.md": "x"}, Completed: true}
	if diff := cmp.Diff(Identity{ID: "wss_1", NamespaceID: "ns_1", AgentID: "agt_1", DefaultsID: "d"}, s.Identity()); diff != "" {
		t.Errorf("Identity() mismatch (-want +got):\n%s", diff)
	}
	want := Setup{ID: "wss_1", NamespaceID: "ns_1", AgentID: "agt_1", DefaultsID: "d", Completed: true}
	if diff := cmp.Diff(want, s.WithoutFiles()); diff != "" {
		t.Errorf("WithoutFiles() mismatch (-want +got):\n%s", diff)
	}
	if len(s.Files) != 1 {
		t.Errorf("WithoutFiles changed the receiver's files: %v", s.Files)
	}
}
