package workspace

import (
	"encoding/json"
	"fmt"
	"strings"
	"testing"

	"github.com/openclaw/occ/internal/errkind"
)

const (
	tooLong     = errkind.DetailTooLong
	invalidVal  = errkind.DetailInvalidValue
	invalidType = errkind.DetailInvalidType
	unknown     = errkind.DetailUnknownField
)

func TestNormalizeInitialFiles(t *testing.T) {
	full := strings.Repeat("a", MaxFileBytes)
	tests := []struct {
		name    string
		raw     map[string]string
		present bool
		want    outcome
	}{
		{"absent", nil, false, accepted(nil)},
		{"absent ignores the map", map[string]string{"x": "y"}, false, accepted(nil)},
		{"null", nil, true, refused(atField(invalidType))},
		{"empty map means no setup", map[string]string{}, true, accepted(nil)},
		{"one file", map[string]string{"SOUL.md": "# Soul\n"}, true, accepted(map[string]string{"SOUL.md": "# Soul\n"})},
		{
			"all four, preserved byte for byte",
			map[string]string{
				"AGENTS.md":   "line  \r\nnext\r\n",
				"SOUL.md":     "  leading and trailing  \n\n",
				"IDENTITY.md": "\uFEFF---\nfront: matter\n---\n",
				"USER.md":     "",
			},
			true,
			accepted(map[string]string{
				"AGENTS.md":   "line  \r\nnext\r\n",
				"SOUL.md":     "  leading and trailing  \n\n",
				"IDENTITY.md": "\uFEFF---\nfront: matter\n---\n",
				"USER.md":     "",
			}),
		},
		{"empty string creates an empty file", map[string]string{"USER.md": ""}, true, accepted(map[string]string{"USER.md": ""})},
		{"at the limit", map[string]string{"AGENTS.md": full}, true, accepted(map[string]string{"AGENTS.md": full})},
		{"multi-byte at the limit", map[string]string{"AGENTS.md": euros(5461) + "a"}, true, accepted(map[string]string{"AGENTS.md": euros(5461) + "a"})},
		{"one past the limit", map[string]string{"AGENTS.md": full + "a"}, true, refused(at("AGENTS.md", tooLong))},
		{"multi-byte one past the limit", map[string]string{"AGENTS.md": euros(5461) + "ab"}, true, refused(at("AGENTS.md", tooLong))},
		{"NUL", map[string]string{"SOUL.md": "a\x00"}, true, refused(at("SOUL.md", invalidVal))},
		{"invalid UTF-8", map[string]string{"SOUL.md": "\xff"}, true, refused(at("SOUL.md", invalidVal))},
		{"U+FFFD", map[string]string{"SOUL.md": "\uFFFD"}, true, accepted(map[string]string{"SOUL.md": "\uFFFD"})},
		{"too long and invalid", map[string]string{"USER.md": full + "\x00"}, true, refused(at("USER.md", tooLong), at("USER.md", invalidVal))},
		{"unknown name", map[string]string{"MEMORY.md": "x"}, true, refused(at("MEMORY.md", unknown))},
		{"name is case-sensitive", map[string]string{"soul.md": "x"}, true, refused(at("soul.md", unknown))},
		{"pointer escaping of unknown names", map[string]string{"a/b~c": "x"}, true, refused(at("a~1b~0c", unknown))},
		{"empty key", map[string]string{"": "x"}, true, refused(at("", unknown))},
		{"unknown name with invalid UTF-8 stays valid UTF-8 in the path", map[string]string{"\xff": "x"}, true, refused(at("\uFFFD", unknown))},
		{
			"details sorted by key; valid files do not survive an error",
			map[string]string{"USER.md": "\x00", "SOUL.md": "ok", "AGENTS.md": full + "a", "Z": ""},
			true,
			refused(at("AGENTS.md", tooLong), at("USER.md", invalidVal), at("Z", unknown)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diff(t, "outcome", tt.want, outcomeOf(NormalizeInitialFiles(tt.raw, tt.present)))
		})
	}
}

func TestNormalizeInitialFilesCopies(t *testing.T) {
	in := map[string]string{"SOUL.md": "x"}
	out, err := NormalizeInitialFiles(in, true)
	if err != nil {
		t.Fatal(err)
	}
	out["SOUL.md"] = "changed"
	if in["SOUL.md"] != "x" {
		t.Error("NormalizeInitialFiles returned the caller's map")
	}
}

func TestNormalizeInitialFilesManyDetails(t *testing.T) {
	raw := map[string]string{}
	var b strings.Builder
	b.WriteByte('{')
	for i := range 40 {
		raw[fmt.Sprintf("k%02d", i)] = ""
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"k%02d":""`, i)
	}
	b.WriteByte('}')
	var want []errkind.Detail
	for i := range errkind.MaxDetails {
		want = append(want, at(fmt.Sprintf("k%02d", i), unknown))
	}
	diff(t, "map form", refused(want...), outcomeOf(NormalizeInitialFiles(raw, true)))
	diff(t, "JSON form", refused(want...), outcomeOf(NormalizeInitialFilesJSON(json.RawMessage(b.String()))))
}

func TestNormalizeInitialFilesJSON(t *testing.T) {
	full := strings.Repeat("a", MaxFileBytes)
	tests := []struct {
		name string
		raw  string
		want outcome
	}{
		{"absent", "", accepted(nil)},
		{"whitespace only", " \n\t", accepted(nil)},
		{"null", "null", refused(atField(invalidType))},
		{"array", `[["AGENTS.md","x"]]`, refused(atField(invalidType))},
		{"string", `"AGENTS.md"`, refused(atField(invalidType))},
		{"number", `1`, refused(atField(invalidType))},
		{"boolean", `true`, refused(atField(invalidType))},
		{"not JSON", `{"AGENTS.md":`, refused(atField(invalidVal))},
		{"trailing data", `{} {}`, refused(atField(invalidVal))},
		{"empty object", ` { } `, accepted(nil)},
		{"one file", `{"SOUL.md":"# Soul\n"}`, accepted(map[string]string{"SOUL.md": "# Soul\n"})},
		{
			"escapes decoded exactly",
			`{"AGENTS.md":"a\r\nb \t\"\\\/\b\f\u00e9\u20ac\ud83d\ude00\u2028<>&","USER.md":""}`,
			accepted(map[string]string{"AGENTS.md": "a\r\nb \t\"\\/\b\f\u00e9€😀\u2028<>&", "USER.md": ""}),
		},
		{"raw and escaped forms agree", `{"SOUL.md":"é😀"}`, accepted(map[string]string{"SOUL.md": "é😀"})},
		{"escaped key", `{"SOUL\u002emd":"x"}`, accepted(map[string]string{"SOUL.md": "x"})},
		{"U+FFFD raw and escaped", `{"SOUL.md":"\ufffd` + "\uFFFD" + `"}`, accepted(map[string]string{"SOUL.md": "\uFFFD\uFFFD"})},
		{"at the limit", `{"AGENTS.md":"` + full + `"}`, accepted(map[string]string{"AGENTS.md": full})},
		{"one past the limit", `{"AGENTS.md":"` + full + `a"}`, refused(at("AGENTS.md", tooLong))},
		{"multi-byte at the limit", `{"AGENTS.md":"` + euros(5461) + `a"}`, accepted(map[string]string{"AGENTS.md": euros(5461) + "a"})},
		{"multi-byte one past the limit", `{"AGENTS.md":"` + euros(5461) + `ab"}`, refused(at("AGENTS.md", tooLong))},
		{"escapes count decoded bytes", `{"AGENTS.md":"` + strings.Repeat(`\u20ac`, 5461) + `a"}`, accepted(map[string]string{"AGENTS.md": euros(5461) + "a"})},
		{"escaped NUL", `{"SOUL.md":"a\u0000"}`, refused(at("SOUL.md", invalidVal))},
		{"lone high surrogate", `{"SOUL.md":"\ud800"}`, refused(at("SOUL.md", invalidVal))},
		{"lone low surrogate", `{"SOUL.md":"\udc00x"}`, refused(at("SOUL.md", invalidVal))},
		{"high surrogate then high surrogate pair", `{"SOUL.md":"\ud800\ud83d\ude00"}`, refused(at("SOUL.md", invalidVal))},
		{"reversed pair", `{"SOUL.md":"\ude00\ud83d"}`, refused(at("SOUL.md", invalidVal))},
		{"raw invalid UTF-8", "{\"SOUL.md\":\"a\xffb\"}", refused(at("SOUL.md", invalidVal))},
		// 16,383 bytes plus one unpaired surrogate (3 bytes, as Node counts it).
		{"lone surrogate counts 3 bytes", `{"SOUL.md":"` + full[:MaxFileBytes-3] + `\udbff"}`, refused(at("SOUL.md", invalidVal))},
		{"lone surrogate past the limit", `{"SOUL.md":"` + full[:MaxFileBytes-2] + `\udbff"}`, refused(at("SOUL.md", tooLong), at("SOUL.md", invalidVal))},
		{"null value", `{"SOUL.md":null}`, refused(at("SOUL.md", invalidType))},
		{"number value", `{"SOUL.md":1}`, refused(at("SOUL.md", invalidType))},
		{"object value", `{"SOUL.md":{"content":"x"}}`, refused(at("SOUL.md", invalidType))},
		{"array value", `{"SOUL.md":["x"]}`, refused(at("SOUL.md", invalidType))},
		{"unknown name, value not looked at", `{"MEMORY.md":{"a":[1,"\ud800"]}}`, refused(at("MEMORY.md", unknown))},
		{"duplicate name", `{"SOUL.md":"a","SOUL.md":"b"}`, refused(at("SOUL.md", invalidVal))},
		{"duplicate by escape", `{"SOUL.md":"a","SOUL\u002emd":"a"}`, refused(at("SOUL.md", invalidVal))},
		{"unknown name with a slash", `{"../AGENTS.md":""}`, refused(at("..~1AGENTS.md", unknown))},
		{"empty key is a pointer ending in a slash", `{"":""}`, refused(at("", unknown))},
		{
			"details in document order",
			`{"USER.md":"\u0000", "SOUL.md":"ok", "Z":1, "AGENTS.md":"` + full + `a", "IDENTITY.md":true}`,
			refused(at("USER.md", invalidVal), at("Z", unknown), at("AGENTS.md", tooLong), at("IDENTITY.md", invalidType)),
		},
		{
			"whitespace everywhere",
			" {\n\t\"SOUL.md\" :\r\n \"x\" ,\n \"USER.md\":\"\"\n}\n",
			accepted(map[string]string{"SOUL.md": "x", "USER.md": ""}),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diff(t, "outcome", tt.want, outcomeOf(NormalizeInitialFilesJSON(json.RawMessage(tt.raw))))
		})
	}
}

// TestNormalizeInitialFilesJSONInStruct checks the contract with
// encoding/json: a json.RawMessage field is empty when absent and holds
// "null" when null, so the JSON form can tell the three apart.
func TestNormalizeInitialFilesJSONInStruct(t *testing.T) {
	type createReq struct {
		Name  string          `json:"name"`
		Files json.RawMessage `json:"initialWorkspaceFiles,omitempty"`
	}
	tests := []struct {
		body string
		want outcome
	}{
		{`{"name":"a"}`, accepted(nil)},
		{`{"name":"a","initialWorkspaceFiles":null}`, refused(atField(invalidType))},
		{`{"name":"a","initialWorkspaceFiles":{}}`, accepted(nil)},
		{`{"name":"a","initialWorkspaceFiles":{"USER.md":"u"}}`, accepted(map[string]string{"USER.md": "u"})},
	}
	for _, tt := range tests {
		var req createReq
		if err := json.Unmarshal([]byte(tt.body), &req); err != nil {
			t.Fatal(err)
		}
		diff(t, tt.body, tt.want, outcomeOf(NormalizeInitialFilesJSON(req.Files)))
	}
}

func TestValidateDefaultsID(t *testing.T) {
	badFormat := outcome{
		Kind: errkind.Invalid, Code: errkind.CodeInvalidRequest,
		Message: "Workspace defaults identity must be 64 lowercase hexadecimal characters.",
		Details: []errkind.Detail{{Path: "/workspaceDefaultsId", Code: errkind.DetailInvalidFormat}},
	}
	conflict := outcome{
		Kind: errkind.Conflict, Code: errkind.CodeResourceConflict,
		Message: "Workspace defaults changed. Reload the create form before submitting.",
	}
	other := strings.Repeat("0", 64)
	tests := []struct {
		name          string
		in            string
		validate, chk outcome
	}{
		{"current", DefaultsID, outcome{}, outcome{}},
		{"other well-formed", other, outcome{}, conflict},
		{"reference constant", "1b26af5957961dbd59733d2306759c7e6cc92cd5e9e34522705a08dbdd9e697d", outcome{}, conflict},
		{"empty", "", badFormat, badFormat},
		{"63 chars", DefaultsID[:63], badFormat, badFormat},
		{"65 chars", DefaultsID + "0", badFormat, badFormat},
		{"uppercase", strings.ToUpper(DefaultsID), badFormat, badFormat},
		{"non-hex", strings.Repeat("g", 64), badFormat, badFormat},
		{"spaces", " " + DefaultsID[1:], badFormat, badFormat},
		{"multi-byte", "é" + DefaultsID[2:], badFormat, badFormat},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			diff(t, "ValidateDefaultsID", tt.validate, outcomeOf(nil, ValidateDefaultsID(tt.in)))
			diff(t, "CheckDefaultsID", tt.chk, outcomeOf(nil, CheckDefaultsID(tt.in)))
		})
	}
}
