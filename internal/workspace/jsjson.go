package workspace

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"unicode/utf8"
)

// Object is a JavaScript object for StringifyJS: its members in insertion
// order.
type Object []Member

// Member is one property of an Object.
type Member struct {
	Key   string
	Value any
}

// maxStringifyDepth bounds StringifyJS's recursion, so that a []any that
// contains itself fails (as JSON.stringify throws on cycles) instead of
// exhausting the stack.
const maxStringifyDepth = 256

// StringifyJS serializes v exactly as JavaScript's JSON.stringify (no
// indentation) serializes the corresponding JavaScript value, for the
// types the defaults identity and the marker need:
//
//   - nil → null; bool → true/false;
//   - string → a JSON string (see AppendJSString);
//   - []string, []any → arrays;
//   - Object → an object. Like a JavaScript object, keys that are array
//     indices ("0" … "4294967294") come first in ascending numeric order and
//     the other keys follow in insertion order; a repeated key keeps its
//     first position and takes the last value, as assigning it again would.
//
// Numbers are not supported because JavaScript's number formatting differs
// from Go's and nothing here needs it. Any other type, or nesting deeper
// than 256 levels, is an error.
func StringifyJS(v any) ([]byte, error) {
	return appendJS(nil, v, 0)
}

func appendJS(dst []byte, v any, depth int) ([]byte, error) {
	if depth > maxStringifyDepth {
		return nil, errors.New("workspace: StringifyJS: nesting too deep")
	}
	switch v := v.(type) {
	case nil:
		return append(dst, "null"...), nil
	case bool:
		return strconv.AppendBool(dst, v), nil
	case string:
		return AppendJSString(dst, v), nil
	case []string:
		dst = append(dst, '[')
		for i, s := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSString(dst, s)
		}
		return append(dst, ']'), nil
	case []any:
		dst = append(dst, '[')
		for i, e := range v {
			if i > 0 {
				dst = append(dst, ',')
			}
			var err error
			if dst, err = appendJS(dst, e, depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, ']'), nil
	case Object:
		dst = append(dst, '{')
		for i, m := range jsPropertyOrder(v) {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = AppendJSString(dst, m.Key)
			dst = append(dst, ':')
			var err error
			if dst, err = appendJS(dst, m.Value, depth+1); err != nil {
				return nil, err
			}
		}
		return append(dst, '}'), nil
	default:
		return nil, fmt.Errorf("workspace: StringifyJS: unsupported type %T", v)
	}
}

// jsPropertyOrder returns o's members in the order a JavaScript object
// built by assigning them in turn enumerates its own properties.
func jsPropertyOrder(o Object) Object {
	out := make(Object, 0, len(o))
	pos := make(map[string]int, len(o))
	for _, m := range o {
		if i, ok := pos[m.Key]; ok {
			out[i].Value = m.Value
			continue
		}
		pos[m.Key] = len(out)
		out = append(out, m)
	}
	// A stable sort keeps insertion order among the non-index keys.
	slices.SortStableFunc(out, func(a, b Member) int {
		ai, aok := arrayIndex(a.Key)
		bi, bok := arrayIndex(b.Key)
		switch {
		case aok && bok:
			return cmpUint(ai, bi)
		case aok:
			return -1
		case bok:
			return 1
		}
		return 0
	})
	return out
}

func cmpUint(a, b uint64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	return 0
}

// arrayIndex reports whether k is an ECMAScript array index: the canonical
// decimal form of an integer in [0, 2^32-2].
func arrayIndex(k string) (uint64, bool) {
	if k == "" || len(k) > 10 || (len(k) > 1 && k[0] == '0') {
		return 0, false
	}
	var n uint64
	for i := 0; i < len(k); i++ {
		c := k[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		n = n*10 + uint64(c-'0')
	}
	return n, n <= 1<<32-2
}

const hexDigits = "0123456789abcdef"

// AppendJSString appends s as JSON.stringify writes a string: quotation
// mark and reverse solidus escaped, the control characters U+0000–U+001F
// as \b \t \n \f \r or \u00xx (lowercase hex), and everything else,
// including <, >, &, U+007F, U+2028 and U+2029, as raw UTF-8.
//
// A JavaScript string cannot hold invalid UTF-8, so if s does, it is first
// decoded as Node decodes such bytes (see toWellFormed): the result is what
// JSON.stringify would write for the string Node read from those bytes.
func AppendJSString(dst []byte, s string) []byte {
	s = toWellFormed(s)
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); i++ {
		c := s[i]
		if c >= 0x20 && c != '"' && c != '\\' {
			continue
		}
		dst = append(dst, s[start:i]...)
		switch c {
		case '"', '\\':
			dst = append(dst, '\\', c)
		case '\b':
			dst = append(dst, '\\', 'b')
		case '\t':
			dst = append(dst, '\\', 't')
		case '\n':
			dst = append(dst, '\\', 'n')
		case '\f':
			dst = append(dst, '\\', 'f')
		case '\r':
			dst = append(dst, '\\', 'r')
		default:
			dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xf])
		}
		start = i + 1
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// toWellFormed returns s with every maximal ill-formed subpart replaced by
// one U+FFFD, the "best practice" of Unicode §3.9 that the WHATWG decoder
// and Node's Buffer#toString("utf8") follow. Go's own conversions replace
// each bad byte separately ("\xe2\x82" becomes two U+FFFD, Node writes
// one), which would make digests and renderings differ from the runner's.
func toWellFormed(s string) string {
	if utf8.ValidString(s) {
		return s
	}
	b := make([]byte, 0, len(s)+8)
	for i := 0; i < len(s); {
		r, size := utf8.DecodeRuneInString(s[i:])
		if r != utf8.RuneError || size > 1 {
			b = append(b, s[i:i+size]...)
			i += size
			continue
		}
		b = append(b, "\uFFFD"...)
		i += maximalSubpart(s[i:])
	}
	return string(b)
}

// maximalSubpart returns the length of the maximal subpart at the start of
// s, which does not begin a well-formed sequence: the lead byte plus the
// continuation bytes that could still have completed it (Unicode Table 3-7),
// at least 1.
func maximalSubpart(s string) int {
	lo, hi := byte(0x80), byte(0xBF) // range of the first continuation byte
	var need int
	switch c := s[0]; {
	case c >= 0xC2 && c <= 0xDF:
		need = 1
	case c == 0xE0:
		need, lo = 2, 0xA0
	case c >= 0xE1 && c <= 0xEC, c == 0xEE, c == 0xEF:
		need = 2
	case c == 0xED:
		need, hi = 2, 0x9F
	case c == 0xF0:
		need, lo = 3, 0x90
	case c >= 0xF1 && c <= 0xF3:
		need = 3
	case c == 0xF4:
		need, hi = 3, 0x8F
	default:
		return 1
	}
	n := 1
	for ; n <= need && n < len(s); n++ {
		if c := s[n]; c < lo || c > hi {
			break
		}
		lo, hi = 0x80, 0xBF
	}
	return n
}
