package setuprunner_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"unicode/utf16"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/setuprunner"
	"github.com/openclaw/occ/internal/workspace"
)

// FuzzParsePayload checks ParsePayload against the payload rules stated
// independently, and against encoding/json: whatever ParsePayload accepts
// must decode to the same Setup there (the decoders agree on every string
// a valid payload can hold), and must survive a round trip through
// json.Marshal. Seeds: f.Add below and testdata/fuzz/FuzzParsePayload.
func FuzzParsePayload(f *testing.F) {
	d := workspace.DefaultsID
	for _, seed := range []string{
		`{"id":"s1","namespaceId":"ns","agentId":"a1","defaultsId":"` + d + `","files":{"SOUL.md":"soul","USER.md":""},"completed":false}`,
		`{"id":"s1","namespaceId":"ns","agentId":"a1","completed":true}`,
		`{"id":"s1","namespaceId":"ns","agentId":"a1","files":{},"completed":true}`,
		`{"id":"s\ud83d\ude00","namespaceId":"n\u0000s","agentId":"a1","files":{"AGENTS.md":"a\r\n\u2028"},"completed":false}`,
		`{"id":"s\ud800","namespaceId":"ns","agentId":"a1","completed":true}`,
		`{"id":"s1","id":"s2","namespaceId":"ns","agentId":"a1","completed":true}`,
		`{"ID":"s1","namespaceId":"ns","agentId":"a1","completed":true}`,
		`{"id":"s1","namespaceId":"ns","agentId":"a1","completed":true,"files":null}`,
		`{"id":"s1","namespaceId":"ns","agentId":"a1","completed":false,"files":{"SOUL.md":"\x00"}}`,
		"{\"id\":\"s1\",\"namespaceId\":\"ns\",\"agentId\":\"a1\",\"completed\":false,\"files\":{\"SOUL.md\":\"\xff\"}}",
		`[1,-0.5e+3,true,null,"x",{}]`,
		``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, payload []byte) {
		s, err := setuprunner.ParsePayload(bytes.NewReader(payload))
		if err != nil {
			if !errors.Is(err, setuprunner.ErrFailed) {
				t.Fatalf("ParsePayload error %v does not wrap ErrFailed", err)
			}
			return
		}
		checkSetupRules(t, s)

		// encoding/json must see the same document.
		var ref struct {
			ID          *string            `json:"id"`
			NamespaceID *string            `json:"namespaceId"`
			AgentID     *string            `json:"agentId"`
			DefaultsID  *string            `json:"defaultsId"`
			Files       *map[string]string `json:"files"`
			Completed   *bool              `json:"completed"`
		}
		dec := json.NewDecoder(bytes.NewReader(payload))
		dec.DisallowUnknownFields()
		if err := dec.Decode(&ref); err != nil {
			t.Fatalf("ParsePayload accepted %q; encoding/json: %v", payload, err)
		}
		if ref.ID == nil || ref.NamespaceID == nil || ref.AgentID == nil || ref.Completed == nil {
			t.Fatalf("ParsePayload accepted %q without a required key", payload)
		}
		want := workspace.Setup{ID: *ref.ID, NamespaceID: *ref.NamespaceID, AgentID: *ref.AgentID, Completed: *ref.Completed}
		if ref.DefaultsID != nil {
			want.DefaultsID = *ref.DefaultsID
		}
		if ref.Files != nil {
			want.Files = *ref.Files
		}
		if diff := cmp.Diff(want, s); diff != "" {
			t.Fatalf("ParsePayload(%q) differs from encoding/json (-json +ParsePayload):\n%s", payload, diff)
		}

		again, err := json.Marshal(s)
		if err != nil {
			t.Fatal(err)
		}
		s2, err := setuprunner.ParsePayload(bytes.NewReader(again))
		if err != nil {
			t.Fatalf("ParsePayload refused its own result re-encoded %q: %v", again, err)
		}
		if diff := cmp.Diff(s, s2); diff != "" {
			t.Fatalf("round trip mismatch (-first +second):\n%s", diff)
		}
	})
}

// checkSetupRules states the payload rules once more, independently.
func checkSetupRules(t *testing.T, s workspace.Setup) {
	t.Helper()
	for _, id := range []string{s.ID, s.NamespaceID, s.AgentID} {
		units := utf16.Encode([]rune(id))
		if id == "" || len(units) > 256 || string([]rune(id)) != id {
			t.Fatalf("accepted identity field %q", id)
		}
	}
	if s.DefaultsID != "" && (len(s.DefaultsID) != 64 || strings.Trim(s.DefaultsID, "0123456789abcdef") != "") {
		t.Fatalf("accepted defaultsId %q", s.DefaultsID)
	}
	if s.Completed != (s.Files == nil) {
		t.Fatalf("accepted completed=%v with files=%v", s.Completed, s.Files != nil)
	}
	if !s.Completed && len(s.Files) == 0 {
		t.Fatalf("accepted a pending setup without files")
	}
	for name, content := range s.Files {
		if !workspace.ValidName(name) {
			t.Fatalf("accepted file name %q", name)
		}
		if len(content) > 16384 || string([]rune(content)) != content || strings.IndexByte(content, 0) >= 0 {
			t.Fatalf("accepted content of %s (%d bytes) that breaks the content rule", name, len(content))
		}
	}
}
