package setuprunner_test

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/setuprunner"
	"github.com/openclaw/occ/internal/workspace"
)

// parsed is ParsePayload's outcome in a form cmp can diff.
type parsed struct {
	Setup  workspace.Setup
	Failed bool
}

func parse(payload string) parsed {
	s, err := setuprunner.ParsePayload(strings.NewReader(payload))
	if err != nil {
		if !errors.Is(err, setuprunner.ErrFailed) {
			panic("ParsePayload error does not wrap ErrFailed: " + err.Error())
		}
		return parsed{Failed: true}
	}
	return parsed{Setup: s}
}

var failed = parsed{Failed: true}

// payloadWith is a pending payload with the given raw JSON for files.
func payloadWith(files string) string {
	return `{"id":"s1","namespaceId":"ns","agentId":"a1","files":` + files + `,"completed":false}`
}

func pendingWith(files map[string]string) parsed {
	return parsed{Setup: workspace.Setup{ID: "s1", NamespaceID: "ns", AgentID: "a1", Files: files}}
}

// padTo pads a JSON payload with trailing whitespace to n bytes.
func padTo(payload string, n int) string {
	return payload + strings.Repeat(" ", n-len(payload))
}

func TestParsePayload(t *testing.T) {
	t.Parallel()
	d := workspace.DefaultsID
	id256 := strings.Repeat("i", 256)
	emoji128 := strings.Repeat("😀", 128) // 256 UTF-16 code units
	tests := []struct {
		name    string
		payload string
		want    parsed
	}{
		{
			name:    "pending",
			payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","defaultsId":"` + d + `","files":{"SOUL.md":"soul","USER.md":"user"},"completed":false}`,
			want: parsed{Setup: workspace.Setup{ID: "s1", NamespaceID: "ns", AgentID: "a1", DefaultsID: d,
				Files: map[string]string{"SOUL.md": "soul", "USER.md": "user"}}},
		},
		{
			name:    "completed identity",
			payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","defaultsId":"` + d + `","completed":true}`,
			want:    parsed{Setup: workspace.Setup{ID: "s1", NamespaceID: "ns", AgentID: "a1", DefaultsID: d, Completed: true}},
		},
		{
			name:    "whitespace around and between, keys in any order",
			payload: " \r\n\t{ \"completed\" : false , \"files\" : { \"AGENTS.md\" : \"x\" } , \"agentId\":\"a1\",\"namespaceId\":\"ns\",\"id\":\"s1\" }\n",
			want:    pendingWith(map[string]string{"AGENTS.md": "x"}),
		},
		{name: "empty-string files", payload: payloadWith(`{"IDENTITY.md":"","USER.md":""}`), want: pendingWith(map[string]string{"IDENTITY.md": "", "USER.md": ""})},
		{name: "all four names", payload: payloadWith(`{"AGENTS.md":"a","SOUL.md":"s","IDENTITY.md":"i","USER.md":"u"}`),
			want: pendingWith(map[string]string{"AGENTS.md": "a", "SOUL.md": "s", "IDENTITY.md": "i", "USER.md": "u"})},
		{name: "strings exact: CRLF, escapes, surrogate pair", payload: payloadWith(`{"SOUL.md":"a\r\nb\u00e9\ud83d\ude00\/\"\\\t"}`),
			want: pendingWith(map[string]string{"SOUL.md": "a\r\nbé😀/\"\\\t"})},
		{name: "escaped key names the field", payload: `{"\u0069d":"s1","namespaceId":"ns","agentId":"a1","files":{"SOUL\u002emd":"x"},"completed":false}`,
			want: pendingWith(map[string]string{"SOUL.md": "x"})},

		// Size limits.
		{name: "payload of 400,000 bytes", payload: padTo(payloadWith(`{"SOUL.md":"x"}`), 400_000), want: pendingWith(map[string]string{"SOUL.md": "x"})},
		{name: "payload of 400,001 bytes", payload: padTo(payloadWith(`{"SOUL.md":"x"}`), 400_001), want: failed},
		{name: "file of 16,384 bytes", payload: payloadWith(`{"SOUL.md":"` + strings.Repeat("s", 16384) + `"}`),
			want: pendingWith(map[string]string{"SOUL.md": strings.Repeat("s", 16384)})},
		{name: "file of 16,385 bytes", payload: payloadWith(`{"SOUL.md":"` + strings.Repeat("s", 16385) + `"}`), want: failed},
		{name: "file of 16,384 UTF-8 bytes in three-byte runes", payload: payloadWith(`{"SOUL.md":"` + strings.Repeat("€", 5461) + `a"}`),
			want: pendingWith(map[string]string{"SOUL.md": strings.Repeat("€", 5461) + "a"})},
		{name: "file of 16,385 UTF-8 bytes in three-byte runes", payload: payloadWith(`{"SOUL.md":"` + strings.Repeat(`\u20ac`, 5461) + `ab"}`), want: failed},
		{name: "escaped file counted decoded", payload: payloadWith(`{"SOUL.md":"` + strings.Repeat(`\u0001`, 16384) + `"}`),
			want: pendingWith(map[string]string{"SOUL.md": strings.Repeat("\x01", 16384)})},
		{name: "id of 256 code units", payload: `{"id":"` + id256 + `","namespaceId":"ns","agentId":"a1","completed":true}`,
			want: parsed{Setup: workspace.Setup{ID: id256, NamespaceID: "ns", AgentID: "a1", Completed: true}}},
		{name: "id of 257 code units", payload: `{"id":"` + id256 + `i","namespaceId":"ns","agentId":"a1","completed":true}`, want: failed},
		{name: "agentId of 128 astral runes", payload: `{"id":"s1","namespaceId":"ns","agentId":"` + emoji128 + `","completed":true}`,
			want: parsed{Setup: workspace.Setup{ID: "s1", NamespaceID: "ns", AgentID: emoji128, Completed: true}}},
		{name: "agentId of 129 astral runes", payload: `{"id":"s1","namespaceId":"ns","agentId":"` + emoji128 + `😀","completed":true}`, want: failed},

		// Closed schema.
		{name: "unknown key", payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","completed":true,"extra":1}`, want: failed},
		{name: "__proto__ key", payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","completed":true,"__proto__":{}}`, want: failed},
		{name: "duplicate key", payload: `{"id":"s1","id":"s1","namespaceId":"ns","agentId":"a1","completed":true}`, want: failed},
		{name: "id missing", payload: `{"namespaceId":"ns","agentId":"a1","completed":true}`, want: failed},
		{name: "completed missing", payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","files":{"SOUL.md":"x"}}`, want: failed},
		{name: "completed as a string", payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","completed":"true"}`, want: failed},
		{name: "id empty", payload: `{"id":"","namespaceId":"ns","agentId":"a1","completed":true}`, want: failed},
		{name: "id a number", payload: `{"id":1,"namespaceId":"ns","agentId":"a1","completed":true}`, want: failed},
		{name: "id with an unpaired surrogate", payload: `{"id":"s\ud800","namespaceId":"ns","agentId":"a1","completed":true}`, want: failed},
		{name: "namespaceId null", payload: `{"id":"s1","namespaceId":null,"agentId":"a1","completed":true}`, want: failed},
		{name: "defaultsId uppercase", payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","defaultsId":"` + strings.ToUpper(d) + `","completed":true}`, want: failed},
		{name: "defaultsId empty", payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","defaultsId":"","completed":true}`, want: failed},
		{name: "defaultsId null", payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","defaultsId":null,"completed":true}`, want: failed},
		{name: "defaultsId of 63 digits", payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","defaultsId":"` + d[:63] + `","completed":true}`, want: failed},
		{name: "defaultsId with a newline", payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","defaultsId":"` + d + `\n","completed":true}`, want: failed},

		// Files against completed.
		{name: "files present with completed=true", payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","files":{"SOUL.md":"x"},"completed":true}`, want: failed},
		{name: "empty files present with completed=true", payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","files":{},"completed":true}`, want: failed},
		{name: "empty files with completed=false", payload: payloadWith(`{}`), want: failed},
		{name: "files absent with completed=false", payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","completed":false}`, want: failed},
		{name: "files null", payload: payloadWith(`null`), want: failed},
		{name: "files an array", payload: payloadWith(`[]`), want: failed},
		{name: "unknown file name", payload: payloadWith(`{"TOOLS.md":"x"}`), want: failed},
		{name: "file name in other case", payload: payloadWith(`{"soul.md":"x"}`), want: failed},
		{name: "duplicate file", payload: payloadWith(`{"SOUL.md":"x","SOUL.md":"y"}`), want: failed},
		{name: "file content a number", payload: payloadWith(`{"SOUL.md":1}`), want: failed},
		{name: "file content null", payload: payloadWith(`{"SOUL.md":null}`), want: failed},
		{name: "file with NUL", payload: payloadWith(`{"SOUL.md":"a\u0000b"}`), want: failed},
		{name: "file with an unpaired surrogate", payload: payloadWith(`{"SOUL.md":"a\udc00"}`), want: failed},
		{name: "file with a reversed surrogate pair", payload: payloadWith(`{"SOUL.md":"\ude00\ud83d"}`), want: failed},

		// Not JSON, or not an object.
		{name: "invalid UTF-8", payload: payloadWith("{\"SOUL.md\":\"\xff\"}"), want: failed},
		{name: "byte order mark", payload: "\uFEFF" + payloadWith(`{"SOUL.md":"x"}`), want: failed},
		{name: "raw control character in a string", payload: payloadWith("{\"SOUL.md\":\"a\nb\"}"), want: failed},
		{name: "trailing text", payload: payloadWith(`{"SOUL.md":"x"}`) + "x", want: failed},
		{name: "two documents", payload: payloadWith(`{"SOUL.md":"x"}`) + payloadWith(`{"SOUL.md":"x"}`), want: failed},
		{name: "truncated", payload: strings.TrimSuffix(payloadWith(`{"SOUL.md":"x"}`), "}"), want: failed},
		{name: "trailing comma", payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","completed":true,}`, want: failed},
		{name: "bad escape", payload: payloadWith(`{"SOUL.md":"\x41"}`), want: failed},
		{name: "array", payload: `[]`, want: failed},
		{name: "null", payload: `null`, want: failed},
		{name: "string", payload: `"s1"`, want: failed},
		{name: "empty", payload: ``, want: failed},
		{name: "deep nesting", payload: `{"id":"s1","namespaceId":"ns","agentId":"a1","completed":true,"x":` + strings.Repeat("[", 10000) + strings.Repeat("]", 10000) + `}`, want: failed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			if diff := cmp.Diff(tt.want, parse(tt.payload)); diff != "" {
				t.Errorf("ParsePayload(%.80q…) mismatch (-want +got):\n%s", tt.payload, diff)
			}
		})
	}
}

// A payload source longer than the limit is refused without reading it
// all.
func TestParsePayloadStopsAtLimit(t *testing.T) {
	t.Parallel()
	r := &countingReader{}
	if _, err := setuprunner.ParsePayload(r); !errors.Is(err, setuprunner.ErrFailed) {
		t.Fatalf("ParsePayload(endless) = %v, want ErrFailed", err)
	}
	if r.n > setuprunner.MaxPayloadBytes+64*1024 {
		t.Errorf("ParsePayload read %d bytes of an endless payload", r.n)
	}
}

type countingReader struct{ n int }

func (r *countingReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = ' '
	}
	r.n += len(p)
	return len(p), nil
}

func TestMainAgentSupported(t *testing.T) {
	t.Parallel()
	tests := []struct {
		name   string
		config string
		wantOK bool
	}{
		{name: "no agents", config: `{"gateway":{"mode":"local"}}`, wantOK: true},
		{name: "agents without entries", config: `{"agents":{"defaults":{"workspace":"/w"}}}`, wantOK: true},
		{name: "only main", config: `{"agents":{"entries":{"main":{}}}}`, wantOK: true},
		{name: "main with settings", config: `{"agents":{"entries":{"main":{"name":"Main"}}}}`, wantOK: true},
		{name: "main repeated", config: `{"agents":{"entries":{"main":{},"main":{}}}}`, wantOK: true},
		{name: "agents.list", config: `{"agents":{"list":[]}}`},
		{name: "agents.list with main entries", config: `{"agents":{"list":[{"id":"main"}],"entries":{"main":{}}}}`},
		{name: "another agent", config: `{"agents":{"entries":{"main":{},"helper":{}}}}`},
		{name: "no main", config: `{"agents":{"entries":{"helper":{}}}}`},
		{name: "empty entries", config: `{"agents":{"entries":{}}}`},
		{name: "entries null", config: `{"agents":{"entries":null}}`},
		{name: "main not an object", config: `{"agents":{"entries":{"main":true}}}`},
		{name: "main null", config: `{"agents":{"entries":{"main":null}}}`},
		{name: "agents null", config: `{"agents":null}`},
		{name: "agents an array", config: `{"agents":[]}`},
		{name: "not an object", config: `[]`},
		{name: "not JSON", config: `agents:`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			t.Parallel()
			err := setuprunner.MainAgentSupported([]byte(tt.config))
			if tt.wantOK && err != nil {
				t.Errorf("MainAgentSupported(%s) = %v, want nil", tt.config, err)
			}
			if !tt.wantOK && !errors.Is(err, setuprunner.ErrMainAgentUnsupported) {
				t.Errorf("MainAgentSupported(%s) = %v, want ErrMainAgentUnsupported", tt.config, err)
			}
		})
	}
}
