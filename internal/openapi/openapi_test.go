package openapi

import (
	"encoding/json"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/apitypes"
)

func TestBuildDescribesTheWireTypes(t *testing.T) {
	doc, err := Build([]Operation{
		{Method: "GET", Path: "/namespaces/{ns}/agents", OK: 200, Out: apitypes.List[apitypes.Agent]{}},
		{Method: "PUT", Path: "/f/{name}", OK: 200, In: apitypes.PutWorkspaceFileRequest{}, Out: apitypes.WrittenFile{}, ETag: true},
		{Method: "GET", Path: "/audit-events", OK: 200, Out: apitypes.AuditPage{}, Query: apitypes.AuditQuery{}},
		{Method: "GET", Path: "/healthz", Public: true, OK: 200, Out: apitypes.Health{}},
		{Method: "GET", Path: "/d", OK: 200, Out: apitypes.Deployment{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Paths      map[string]map[string]map[string]any `json:"paths"`
		Components struct {
			Schemas map[string]map[string]any `json:"schemas"`
		} `json:"components"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	get := func(v any, keys ...string) any {
		for _, k := range keys {
			m, ok := v.(map[string]any)
			if !ok {
				return nil
			}
			v = m[k]
		}
		return v
	}
	list := d.Paths["/namespaces/{ns}/agents"]["get"]
	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"operation id", list["operationId"], "getNamespacesNsAgents"},
		{"list schema name", get(list, "responses", "200", "content", "application/json", "schema", "properties", "data", "$ref"), "#/components/schemas/AgentList"},
		{"path parameter", get(list["parameters"].([]any)[0], "name"), "ns"},
		{"every error status", len(list["responses"].(map[string]any)), 14},
		{"public route has no security", len(d.Paths["/healthz"]["get"]["security"].([]any)), 0},
		{"ETag header", get(d.Paths["/f/{name}"]["put"], "responses", "200", "headers", "ETag", "required"), true},
		{"If-Match parameter", get(d.Paths["/f/{name}"]["put"]["parameters"].([]any)[1], "name"), "If-Match"},
		{"query parameters", len(d.Paths["/audit-events"]["get"]["parameters"].([]any)), 12},
		{"omitempty is not required", d.Components.Schemas["AuditPage"]["required"], []any{"items"}},
		{"no extra members", d.Components.Schemas["Agent"]["additionalProperties"], false},
		{"nullable pointer", get(d.Components.Schemas["Deployment"], "properties", "error", "oneOf") != nil, true},
		{"description from the doc comment", get(d.Components.Schemas["WrittenFile"], "properties", "size", "description") != nil, true},
	} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}

func TestBuildRefusesUndescribableTypes(t *testing.T) {
	type bad struct {
		C chan int `json:"c"`
	}
	if _, err := Build([]Operation{{Method: "GET", Path: "/x", OK: 200, Out: bad{}}}); err == nil {
		t.Error("Build accepted a channel field")
	}
	type unnamed struct {
		A string
	}
	if _, err := Build([]Operation{{Method: "GET", Path: "/x", OK: 200, Out: unnamed{}}}); err == nil {
		t.Error("Build accepted a field without a JSON name")
	}
}
