package exactjson

import (
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestScanString(t *testing.T) {
	type result struct {
		End   int
		Flags Flags
		Err   string
	}
	for _, tc := range []struct {
		in   string
		want result
	}{
		{`"" tail`, result{End: 2}},
		{`"abc"`, result{End: 5}},
		{`"é€😀"`, result{End: 11}},
		{`"a\"b"`, result{End: 6, Flags: Escaped}},
		{`"\/\\\b\f\n\r\t"`, result{End: 16, Flags: Escaped}},
		{`"\ud83d\ude00"`, result{End: 14, Flags: Escaped}},
		{`"\ud800"`, result{End: 8, Flags: Escaped | LoneSurrogate}},
		{`"\udc00\ud800"`, result{End: 14, Flags: Escaped | LoneSurrogate}},
		{`"\ud800\u0041"`, result{End: 14, Flags: Escaped | LoneSurrogate}},
		{`"\ud800\ud800\udc00"`, result{End: 20, Flags: Escaped | LoneSurrogate}},
		{"\"a\xffb\"", result{End: 5, Flags: InvalidUTF8}},
		{"\"\xed\xa0\x80\"", result{End: 5, Flags: InvalidUTF8}}, // UTF-8-encoded surrogate
		{"\"\xe2\x82\"", result{End: 4, Flags: InvalidUTF8}},
		{`"abc`, result{Err: "unterminated string at byte 0"}},
		{`"abc\`, result{Err: "unterminated string at byte 0"}},
		{`"ab\x"`, result{Err: "invalid escape at byte 3"}},
		{`"ab\u12"`, result{Err: "invalid \\u escape at byte 3"}},
		{`"ab\u12g4"`, result{Err: "invalid \\u escape at byte 3"}},
		{`"\ud800\u12"`, result{Err: "invalid \\u escape at byte 7"}},
		{"\"ab\tc\"", result{Err: "control character in string at byte 3"}},
		{"\"\x00\"", result{Err: "control character in string at byte 1"}},
	} {
		var got result
		end, f, err := ScanString(tc.in, 0)
		if err != nil {
			got.Err = err.Error()
		} else {
			got.End, got.Flags = end, f
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("ScanString(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

func TestUnquote(t *testing.T) {
	type decoded struct{ Invalid, Surrogates, JS string }
	for _, tc := range []struct {
		lit  string
		want decoded
	}{
		{`""`, decoded{"", "", ""}},
		{`"plain é"`, decoded{"plain é", "plain é", "plain é"}},
		{`"\u00e9\r\n\/\"\\"`, decoded{"é\r\n/\"\\", "é\r\n/\"\\", "é\r\n/\"\\"}},
		{`"\ud83d\ude00"`, decoded{"😀", "😀", "😀"}},
		{`"\ud800x"`, decoded{"\uFFFDx", "\uFFFDx", "\xed\xa0\x80x"}},
		{`"\uDBFF"`, decoded{"\uFFFD", "\uFFFD", "\xed\xaf\xbf"}},
		{`"\udc00\ud800"`, decoded{"\uFFFD\uFFFD", "\uFFFD\uFFFD", "\xed\xb0\x80\xed\xa0\x80"}},
		{`"\ud800\ud800\udc00"`, decoded{"\uFFFD𐀀", "\uFFFD𐀀", "\xed\xa0\x80𐀀"}},
		// Raw bytes: encoding/json replaces each bad byte; the other
		// modes keep them, with or without escapes beside them.
		{"\"a\xff\xfeb\"", decoded{"a\uFFFD\uFFFDb", "a\xff\xfeb", "a\xff\xfeb"}},
		{"\"\xe2\x82\\n\"", decoded{"\uFFFD\uFFFD\n", "\xe2\x82\n", "\xe2\x82\n"}},
		{"\"\xed\xa0\x80\"", decoded{"\uFFFD\uFFFD\uFFFD", "\xed\xa0\x80", "\xed\xa0\x80"}},
	} {
		got := decoded{Unquote(tc.lit, ReplaceInvalid), Unquote(tc.lit, ReplaceSurrogates), Unquote(tc.lit, JavaScript)}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("Unquote(%q) (-want +got):\n%s", tc.lit, diff)
		}
	}
}

// TestJavaScriptByteLength: the JavaScript mode's length is what Node's
// Buffer.byteLength reports for the string JSON.parse returns.
func TestJavaScriptByteLength(t *testing.T) {
	for _, tc := range []struct {
		lit  string
		want int
	}{
		{`"a"`, 1},
		{`"\u00e9"`, 2},
		{`"€"`, 3},
		{`"\ud83d\ude00"`, 4},
		{`"\ud800"`, 3},       // as U+FFFD
		{`"\ud800\ud800"`, 6}, // two unpaired
		{`"` + strings.Repeat(`\u0000`, 3) + `"`, 3},
	} {
		if got := len(Unquote(tc.lit, JavaScript)); got != tc.want {
			t.Errorf("len(Unquote(%s, JavaScript)) = %d, want %d", tc.lit, got, tc.want)
		}
	}
}

func TestParse(t *testing.T) {
	v, err := Parse(` {"a" : [1, -2.5e3, true, false, null, "x\ty"], "a": {}} `, 8)
	if err != nil {
		t.Fatal(err)
	}
	type flat struct {
		Kind  Kind
		Text  string
		Flags Flags
		Keys  []string
		N     int
	}
	summary := func(v Value) flat {
		f := flat{Kind: v.Kind, Text: v.Text, Flags: v.Flags, N: len(v.Elems)}
		for _, m := range v.Members {
			f.Keys = append(f.Keys, m.Key.Str(JavaScript))
		}
		return f
	}
	var got []flat
	got = append(got, summary(v))
	for _, e := range v.Members[0].Value.Elems {
		got = append(got, summary(e))
	}
	got = append(got, summary(v.Members[1].Value))
	want := []flat{
		{Kind: Object, Text: `{"a" : [1, -2.5e3, true, false, null, "x\ty"], "a": {}}`, Keys: []string{"a", "a"}},
		{Kind: Number, Text: "1"},
		{Kind: Number, Text: "-2.5e3"},
		{Kind: Bool, Text: "true"},
		{Kind: Bool, Text: "false"},
		{Kind: Null, Text: "null"},
		{Kind: String, Text: `"x\ty"`, Flags: Escaped},
		{Kind: Object, Text: "{}"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Parse (-want +got):\n%s", diff)
	}
	if !v.Members[0].Value.Elems[2].True() || v.Members[0].Value.Elems[3].True() {
		t.Error("True() does not tell true from false")
	}
}

func TestParseErrors(t *testing.T) {
	for _, tc := range []struct {
		in       string
		maxDepth int
		want     string // "" when accepted
	}{
		{``, 8, "unexpected end of JSON input at byte 0"},
		{`  `, 8, "unexpected end of JSON input at byte 2"},
		{`{} {}`, 8, "unexpected data after the top-level value at byte 3"},
		{"\ufeff{}", 8, "invalid character at byte 0"},
		{`{"a" 1}`, 8, "expected ':' after an object key at byte 5"},
		{`{"a":1 "b":2}`, 8, "expected ',' or '}' after an object member at byte 7"},
		{`[1 2]`, 8, "expected ',' or ']' after an array element at byte 3"},
		{`{1:2}`, 8, "expected a string object key at byte 1"},
		{`{"a":1,}`, 8, "expected a string object key at byte 7"},
		{`[1,]`, 8, "invalid character at byte 3"},
		{`[tru]`, 8, "invalid literal at byte 1"},
		{`01`, 8, "unexpected data after the top-level value at byte 1"},
		{`-`, 8, "invalid character at byte 0"},
		{`1.`, 8, "invalid character at byte 0"},
		{`"a`, 8, "unterminated string at byte 0"},
		{`[[1]]`, 2, ""},
		{`[[[]]]`, 2, ""},
		{`[[[1]]]`, 2, "nesting too deep at byte 3"},
		{`[[{"a":1}]]`, 2, "nesting too deep at byte 3"},
		{`"x"`, 0, ""},
		{`[]`, 0, ""},
		{`[1]`, 0, "nesting too deep at byte 1"},
	} {
		got := ""
		if _, err := Parse(tc.in, tc.maxDepth); err != nil {
			got = err.Error()
		}
		if got != tc.want {
			t.Errorf("Parse(%q, %d) error %q, want %q", tc.in, tc.maxDepth, got, tc.want)
		}
	}
}

func TestSkipValue(t *testing.T) {
	s := `{"a":[1,{"b":"]}"}],"c":-1.5e+2}, "next"`
	if got, want := SkipValue(s, 0), strings.Index(s, ","+` "next"`); got != want {
		t.Errorf("SkipValue = %d, want %d", got, want)
	}
	if got, want := SkipValue(`-1.5e+2]`, 0), 7; got != want {
		t.Errorf("SkipValue(number) = %d, want %d", got, want)
	}
	if got, want := StringEnd(`"a\"b" x`, 0), 6; got != want {
		t.Errorf("StringEnd = %d, want %d", got, want)
	}
}
