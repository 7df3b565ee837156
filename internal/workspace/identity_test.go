package workspace

import (
	"encoding/json"
	"testing"
)

func TestMarshalMarker(t *testing.T) {
	// Each want is Node's JSON.stringify of the runner's identity object
	// {id, namespaceId, agentId, ...(defaultsId === undefined ? {} : {defaultsId})}.
	tests := []struct {
		name string
		in   Identity
		want string
	}{
		{
			"with defaults",
			Identity{ID: "wss_1", NamespaceID: "ns-a", AgentID: "agent-1", DefaultsID: DefaultsID},
			`{"id":"wss_1","namespaceId":"ns-a","agentId":"agent-1","defaultsId":"` + DefaultsID + `"}`,
		},
		{
			"without defaults",
			Identity{ID: "wss_1", NamespaceID: "ns-a", AgentID: "agent-1"},
			`{"id":"wss_1","namespaceId":"ns-a","agentId":"agent-1"}`,
		},
		{
			"escaping like JSON.stringify",
			Identity{ID: "<&>", NamespaceID: "q\"b\\", AgentID: "\u2028\x01é"},
			"{\"id\":\"<&>\",\"namespaceId\":\"q\\\"b\\\\\",\"agentId\":\"\u2028\\u0001é\"}",
		},
		{"empty fields", Identity{}, `{"id":"","namespaceId":"","agentId":""}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := tt.in.MarshalMarker()
			diff(t, "MarshalMarker", tt.want, string(got))

			// The same bytes come from StringifyJS of the ordered object,
			// and decode back to the identity.
			o := Object{{"id", tt.in.ID}, {"namespaceId", tt.in.NamespaceID}, {"agentId", tt.in.AgentID}}
			if tt.in.DefaultsID != "" {
				o = append(o, Member{"defaultsId", tt.in.DefaultsID})
			}
			viaObject, err := StringifyJS(o)
			if err != nil {
				t.Fatal(err)
			}
			diff(t, "StringifyJS(Object)", string(got), string(viaObject))
			var back Identity
			if err := json.Unmarshal(got, &back); err != nil {
				t.Fatal(err)
			}
			diff(t, "decoded marker", tt.in, back)
		})
	}
	if MarkerName != ".oce-workspace-setup.json" {
		t.Errorf("MarkerName = %q", MarkerName)
	}
}
