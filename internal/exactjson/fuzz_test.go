package exactjson

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
)

// FuzzParse checks Parse and the string decoder against independent
// oracles, for any input:
//   - Parse accepts exactly what json.Valid accepts (for inputs too short
//     to reach either's nesting limit);
//   - an accepted document yields the token stream encoding/json's
//     tokenizer yields, strings decoded in ReplaceInvalid mode;
//   - every string's Flags, and its value in the other two modes, match a
//     reference decoder written from the mode definitions.
//
// Seeds: f.Add below and testdata/fuzz/FuzzParse, which holds the kept
// corpora of httpx's FuzzReadJSON and setuprunner's FuzzParsePayload.
func FuzzParse(f *testing.F) {
	for _, seed := range []string{
		`{"a":[1,-0.5e+3,true,false,null,"x",{}],"b":{"c":[]}}`,
		`"\ud83d\ude00\ud800\udc00\ud800x\udc00\ud800\ud800\udc00"`,
		"\"a\xffb\xe2\x82\xed\xa0\x80\"",
		`"\u00e9\r\n\t\b\f\/\\\"\u0000"`,
		`{"a":1,"a":2,"\u0061":3}`,
		` [ ] `, `{`, `[1,]`, `01`, `"\x"`, `"\u12"`, `tru`, "\"\x01\"", `{} {}`, ``,
	} {
		f.Add([]byte(seed))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		v, err := Parse(string(data), 10000)
		if err != nil {
			var se *SyntaxError
			if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(data) {
				t.Fatalf("Parse(%q) error %v, want a *SyntaxError within the input", data, err)
			}
		}
		// json.Valid refuses nesting past 10000 containers, Parse values
		// past depth 10000; neither limit is reachable in fewer bytes.
		if len(data) < 10000 && (err == nil) != json.Valid(data) {
			t.Fatalf("Parse(%q) error %v, json.Valid %v", data, err, json.Valid(data))
		}
		if err != nil {
			return
		}
		if diff := cmp.Diff(goTokens(t, data), tokens(v, nil)); diff != "" {
			t.Fatalf("tokens of %q (-encoding/json +Parse):\n%s", data, diff)
		}
		forStrings(v, func(s Value) { checkString(t, s) })
	})
}

// goTokens is encoding/json's token stream of data, numbers as text.
func goTokens(t *testing.T, data []byte) []any {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var out []any
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			return out
		}
		if err != nil {
			t.Fatalf("encoding/json refused %q, which Parse accepted: %v", data, err)
		}
		if n, ok := tok.(json.Number); ok {
			tok = string("#" + n)
		}
		out = append(out, tok)
	}
}

// tokens appends v's token stream in goTokens' form.
func tokens(v Value, out []any) []any {
	switch v.Kind {
	case Null:
		return append(out, nil)
	case Bool:
		return append(out, v.True())
	case Number:
		return append(out, "#"+v.Text)
	case String:
		return append(out, v.Str(ReplaceInvalid))
	case Array:
		out = append(out, json.Delim('['))
		for _, e := range v.Elems {
			out = tokens(e, out)
		}
		return append(out, json.Delim(']'))
	default:
		out = append(out, json.Delim('{'))
		for _, m := range v.Members {
			out = tokens(m.Value, tokens(m.Key, out))
		}
		return append(out, json.Delim('}'))
	}
}

func forStrings(v Value, fn func(Value)) {
	switch v.Kind {
	case String:
		fn(v)
	case Array:
		for _, e := range v.Elems {
			forStrings(e, fn)
		}
	case Object:
		for _, m := range v.Members {
			fn(m.Key)
			forStrings(m.Value, fn)
		}
	}
}

// checkString compares a string's Flags and decodings with refDecode.
func checkString(t *testing.T, s Value) {
	t.Helper()
	body := s.Text[1 : len(s.Text)-1]
	raw, lone := refDecode(body)
	want := Flags(0)
	if strings.Contains(body, `\`) {
		want |= Escaped
	}
	if !utf8.ValidString(body) {
		want |= InvalidUTF8
	}
	if lone {
		want |= LoneSurrogate
	}
	if s.Flags != want {
		t.Fatalf("flags of %q = %b, want %b", s.Text, s.Flags, want)
	}
	if s.Flags.IllFormed() != (want&(InvalidUTF8|LoneSurrogate) != 0) {
		t.Fatalf("IllFormed of %q = %v", s.Text, s.Flags.IllFormed())
	}
	for _, m := range []Mode{ReplaceSurrogates, JavaScript} {
		if got, want := s.Str(m), refString(raw, m); got != want {
			t.Fatalf("Str(%d) of %q = %q, want %q", m, s.Text, got, want)
		}
	}
	if !utf8.ValidString(s.Str(ReplaceInvalid)) {
		t.Fatalf("Str(ReplaceInvalid) of %q is not UTF-8", s.Text)
	}
}

// piece is one unit of a decoded string for the reference: a raw byte
// (unit < 0) or a UTF-16 code unit from an escape.
type piece struct {
	raw  byte
	unit int
}

// refDecode splits a string literal's body (already accepted) into raw
// bytes and escaped UTF-16 code units, and reports whether an escaped
// surrogate is unpaired (a high one not directly followed by an escaped
// low one, or a low one not directly preceded by an escaped high one).
func refDecode(body string) ([]piece, bool) {
	var out []piece
	for i := 0; i < len(body); {
		if body[i] != '\\' {
			out = append(out, piece{raw: body[i], unit: -1})
			i++
			continue
		}
		e := body[i+1]
		unit := int(e)
		switch e {
		case 'b':
			unit = '\b'
		case 'f':
			unit = '\f'
		case 'n':
			unit = '\n'
		case 'r':
			unit = '\r'
		case 't':
			unit = '\t'
		case 'u':
			var u int
			for _, c := range body[i+2 : i+6] {
				u <<= 4
				switch {
				case c >= 'a':
					u |= int(c-'a') + 10
				case c >= 'A':
					u |= int(c-'A') + 10
				default:
					u |= int(c - '0')
				}
			}
			unit = u
			i += 4
		}
		i += 2
		out = append(out, piece{unit: unit})
	}
	lone := false
	for i, p := range out {
		switch {
		case p.unit >= 0xD800 && p.unit < 0xDC00:
			lone = lone || i+1 == len(out) || !(out[i+1].unit >= 0xDC00 && out[i+1].unit < 0xE000)
		case p.unit >= 0xDC00 && p.unit < 0xE000:
			lone = lone || i == 0 || !(out[i-1].unit >= 0xD800 && out[i-1].unit < 0xDC00)
		}
	}
	return out, lone
}

// refString writes pieces in mode m (ReplaceSurrogates or JavaScript):
// raw bytes as they are, pairs as one character, an unpaired surrogate as
// U+FFFD or as its 3-byte generalized UTF-8 form.
func refString(pieces []piece, m Mode) string {
	var b []byte
	for i := 0; i < len(pieces); i++ {
		p := pieces[i]
		switch {
		case p.unit < 0:
			b = append(b, p.raw)
		case utf16.IsSurrogate(rune(p.unit)):
			if p.unit < 0xDC00 && i+1 < len(pieces) && pieces[i+1].unit >= 0xDC00 && pieces[i+1].unit < 0xE000 {
				b = utf8.AppendRune(b, utf16.DecodeRune(rune(p.unit), rune(pieces[i+1].unit)))
				i++
			} else if m == JavaScript {
				u := p.unit
				b = append(b, 0xE0|byte(u>>12), 0x80|byte(u>>6)&0x3F, 0x80|byte(u)&0x3F)
			} else {
				b = append(b, "\uFFFD"...)
			}
		default:
			b = utf8.AppendRune(b, rune(p.unit))
		}
	}
	return string(b)
}
