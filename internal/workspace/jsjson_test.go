package workspace

import (
	"encoding/json"
	"testing"
	"unicode/utf8"
)

func TestStringifyJS(t *testing.T) {
	// Each want is Node's JSON.stringify of the corresponding value.
	tests := []struct {
		name string
		in   any
		want string
	}{
		{"plain", "abc", `"abc"`},
		{"empty", "", `""`},
		{"HTML characters stay raw", "<>&", `"<>&"`},
		{"line and paragraph separators stay raw", "\u2028\u2029", "\"\u2028\u2029\""},
		{"quote and backslash", `"\`, `"\"\\"`},
		{"short escapes", "\b\f\n\r\t", `"\b\f\n\r\t"`},
		{"other controls use lowercase \\u00xx", "\x00\x01\x0b\x1a\x1f", `"\u0000\u0001\u000b\u001a\u001f"`},
		{"DEL stays raw", "\x7f", "\"\x7f\""},
		{"C1, soft hyphen and BOM stay raw", "\u0085\u00ad\uFEFF", "\"\u0085\u00ad\uFEFF\""},
		{"non-ASCII stays raw", "é€😀", `"é€😀"`},
		{"slash is not escaped", "a/b", `"a/b"`},
		{"invalid UTF-8 as Node decodes it", "a\xe2\x82b\xff", "\"a\uFFFDb\uFFFD\""},
		{"null", nil, `null`},
		{"booleans", []any{true, false}, `[true,false]`},
		{"string array", []string{"a", "b\n"}, `["a","b\n"]`},
		{"empty arrays", []any{[]string{}, []any{}}, `[[],[]]`},
		{"nested", []any{[]string{"AGENTS.md", "x"}, []any{"SOUL.md", nil}}, `[["AGENTS.md","x"],["SOUL.md",null]]`},
		{"object in insertion order", Object{{"id", "a"}, {"namespaceId", "b"}}, `{"id":"a","namespaceId":"b"}`},
		{"empty object", Object{}, `{}`},
		{
			"array-index keys first, ascending",
			Object{{"b", true}, {"4294967295", true}, {"4294967294", true}, {"1", true}, {"01", true}, {"0", true}},
			`{"0":true,"1":true,"4294967294":true,"b":true,"4294967295":true,"01":true}`,
		},
		{"repeated key keeps position, takes last value", Object{{"a", "1"}, {"b", "2"}, {"a", "3"}}, `{"a":"3","b":"2"}`},
		{"escaped keys", Object{{"<\"k\">", "\u2028"}}, "{\"<\\\"k\\\">\":\"\u2028\"}"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := StringifyJS(tt.in)
			if err != nil {
				t.Fatalf("StringifyJS: %v", err)
			}
			diff(t, "StringifyJS", tt.want, string(got))
		})
	}
}

func TestStringifyJSErrors(t *testing.T) {
	cyclic := make([]any, 1)
	cyclic[0] = cyclic
	for _, in := range []any{1, 1.5, map[string]string{}, struct{}{}, []int{1}, cyclic} {
		if got, err := StringifyJS(in); err == nil {
			t.Errorf("StringifyJS(%T) = %s, want an error", in, got)
		}
	}
}

// TestAppendJSStringRoundTrip checks every byte value and a few boundary
// runes: the output is valid JSON that decodes to the input.
func TestAppendJSStringRoundTrip(t *testing.T) {
	var all []byte
	for c := 0; c < 0x80; c++ {
		all = append(all, byte(c))
	}
	for _, s := range []string{string(all), "\u0080\u07ff\u0800\uffff\U00010000\U0010ffff", "\uFFFD"} {
		out := AppendJSString(nil, s)
		var back string
		if err := json.Unmarshal(out, &back); err != nil {
			t.Fatalf("AppendJSString(%q) = %s: not JSON: %v", s, out, err)
		}
		if back != s {
			t.Errorf("round trip of %q gave %q", s, back)
		}
		if !utf8.Valid(out) {
			t.Errorf("AppendJSString(%q) is not valid UTF-8", s)
		}
	}
}

func TestToWellFormed(t *testing.T) {
	// Node: Buffer.from([...]).toString("utf8") gives one U+FFFD per
	// maximal subpart; want holds the number of U+FFFD between the letters.
	in := "a\xe2\x82b\xf0\x9f\x98c\xc0\xaf\xed\xa0\x80\xff\xf4\x90\x80\x80\xe0\x80\x80"
	want := "a\uFFFDb\uFFFDc" + string([]rune{0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD, 0xFFFD})
	diff(t, "toWellFormed", want, toWellFormed(in))
	for _, s := range []string{"", "plain", "é€😀\uFFFD"} {
		if got := toWellFormed(s); got != s {
			t.Errorf("toWellFormed(%q) = %q, want it unchanged", s, got)
		}
	}
}
