package openapi

import (
	"encoding/json"
	"regexp"
	"strings"
	"testing"
	"unicode"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/workspace"
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

func TestOperationIDs(t *testing.T) {
	var ops []Operation
	for route := range operationIDs {
		method, path, _ := strings.Cut(route, " ")
		ops = append(ops, Operation{Method: method, Path: path, OK: 200})
	}
	ops = append(ops, Operation{Method: "GET", Path: "/namespaces/{ns}/agents/{agentId}", OK: 200})
	doc, err := Build(ops)
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Paths map[string]map[string]struct {
			OperationID string `json:"operationId"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for path, methods := range d.Paths {
		for m, o := range methods {
			got[strings.ToUpper(m)+" "+path] = o.OperationID
		}
	}
	want := map[string]string{
		"POST /namespaces/{ns}/agents":                                 "createAgent",
		"GET /namespaces/{ns}/agents/{agentId}/workspace/files/{name}": "getAgentWorkspaceFile",
		"PUT /namespaces/{ns}/agents/{agentId}/workspace/files/{name}": "putAgentWorkspaceFile",
		// Routes the reference names no id for keep the derived one.
		"GET /namespaces/{ns}/agents/{agentId}": "getNamespacesNsAgentsAgentId",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("operation ids (-want +got):\n%s", diff)
	}

	// Two operations with one id are a programming error.
	_, err = Build([]Operation{
		{Method: "GET", Path: "/a-b", OK: 200},
		{Method: "GET", Path: "/a/b", OK: 200},
	})
	if err == nil || !strings.Contains(err.Error(), "getAB") {
		t.Errorf("Build of two operations with the id getAB: err = %v, want a duplicate id error", err)
	}
}

// TestIDPatternAgreesWithIDs holds the documented id pattern to ids.Valid:
// generated ids match, and every one-character change of one is matched
// exactly when ids.Valid accepts it.
func TestIDPatternAgreesWithIDs(t *testing.T) {
	const alphabet = "0123456789abcdefgABF-_.\n 4"
	for param, prefix := range pathIDPrefixes {
		re := regexp.MustCompile(idPattern(prefix))
		check := func(s string) {
			if got, want := re.MatchString(s), ids.Valid(prefix, s); got != want {
				t.Errorf("%s: pattern matches %q = %v, ids.Valid = %v", param, s, got, want)
			}
		}
		for range 20 {
			id := ids.New(prefix)
			if !re.MatchString(id) {
				t.Errorf("%s: pattern %s refuses the new id %q", param, idPattern(prefix), id)
			}
			check(id[:len(id)-1])
			check(id + "0")
			check(strings.ToUpper(id))
			for i := range len(id) {
				check(id[:i] + id[i+1:])
				for _, c := range alphabet {
					check(id[:i] + string(c) + id[i+1:])
				}
			}
		}
		for _, other := range pathIDPrefixes {
			check(ids.New(other))
		}
		check("")
		check(prefix)
	}
}

// TestIfMatchWhiteSpace: the If-Match pattern allows around the tag exactly
// the runes strings.TrimSpace removes that a header value can hold (tab,
// and no other ASCII control character).
func TestIfMatchWhiteSpace(t *testing.T) {
	re := regexp.MustCompile(ifMatchPattern)
	tag := `"` + strings.Repeat("aB09", digest.Len/4) + `"`
	if !re.MatchString(tag) {
		t.Fatalf("the If-Match pattern %q refuses %s", ifMatchPattern, tag)
	}
	for r := rune(0); r <= 0x10000; r++ {
		want := unicode.IsSpace(r) && (r >= ' ' || r == '\t')
		if got := re.MatchString(string(r) + tag + string(r)); got != want {
			t.Errorf("If-Match pattern with U+%04X around the tag: match = %v, want %v", r, got, want)
		}
	}
}

func TestParameterConstraints(t *testing.T) {
	doc, err := Build([]Operation{
		{Method: "GET", Path: "/namespaces/{ns}/agents/{agentId}/workspace/files/{name}", OK: 200},
		{Method: "GET", Path: "/namespaces", OK: 200, Query: apitypes.ListQuery{}},
		{Method: "GET", Path: "/audit-events", OK: 200, Query: apitypes.AuditQuery{}},
	})
	if err != nil {
		t.Fatal(err)
	}
	var d struct {
		Paths map[string]map[string]struct {
			Parameters []struct {
				Name   string         `json:"name"`
				Schema map[string]any `json:"schema"`
			} `json:"parameters"`
		} `json:"paths"`
	}
	if err := json.Unmarshal(doc, &d); err != nil {
		t.Fatal(err)
	}
	param := func(path, name string) map[string]any {
		for _, p := range d.Paths[path]["get"].Parameters {
			if p.Name == name {
				return p.Schema
			}
		}
		t.Fatalf("%s has no parameter %s", path, name)
		return nil
	}
	files := "/namespaces/{ns}/agents/{agentId}/workspace/files/{name}"
	names := []any{}
	for _, n := range workspace.Names {
		names = append(names, n)
	}
	for _, tc := range []struct {
		name string
		got  any
		want any
	}{
		{"ns pattern", param(files, "ns")["pattern"], idPattern(ids.Namespace)},
		{"agentId pattern", param(files, "agentId")["pattern"], idPattern(ids.Agent)},
		{"file name enum", param(files, "name")["enum"], names},
		{"page limit", param("/namespaces", "limit"), map[string]any{
			"type": "integer", "minimum": 1.0, "maximum": float64(occ.MaxPageSize), "default": float64(occ.DefaultPageSize)}},
		{"audit limit", param("/audit-events", "limit"), map[string]any{
			"type": "integer", "minimum": 1.0, "maximum": float64(occ.MaxAuditPageSize), "default": float64(occ.DefaultAuditPageSize)}},
	} {
		if diff := cmp.Diff(tc.want, tc.got); diff != "" {
			t.Errorf("%s (-want +got):\n%s", tc.name, diff)
		}
	}
}
