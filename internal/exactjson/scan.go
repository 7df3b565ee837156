package exactjson

import (
	"fmt"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// SyntaxError reports malformed JSON at a byte offset of the input. Its
// text never quotes the input.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string { return fmt.Sprintf("%s at byte %d", e.Msg, e.Offset) }

// Flags describe what a string literal holds.
type Flags uint8

const (
	// Escaped: the literal has backslash escapes, so its value differs
	// from its text.
	Escaped Flags = 1 << iota
	// InvalidUTF8: the literal holds raw bytes that are not UTF-8,
	// including UTF-8-encoded surrogates.
	InvalidUTF8
	// LoneSurrogate: the literal holds a \u escape of a high surrogate
	// not followed by a \u escape of a low one, or of a low surrogate
	// with no high one before it.
	LoneSurrogate
)

// IllFormed reports whether the string's value is not a well-formed
// Unicode string: encoding/json would change it (to U+FFFD), JavaScript
// would hold an unpaired surrogate or Node's decoding of the bytes.
func (f Flags) IllFormed() bool { return f&(InvalidUTF8|LoneSurrogate) != 0 }

// SkipSpace returns the index of the first byte at or after i that is not
// JSON whitespace (space, tab, LF, CR; a BOM is not whitespace).
func SkipSpace(s string, i int) int {
	for i < len(s) {
		switch s[i] {
		case ' ', '\t', '\n', '\r':
			i++
		default:
			return i
		}
	}
	return i
}

// ScanString scans the JSON string literal whose opening quote is at s[i]
// and returns the index just past its closing quote and what it holds.
// Raw control characters (below U+0020), unknown escapes and \u escapes
// without four hex digits are syntax errors, as in RFC 8259 and
// JSON.parse; invalid UTF-8 and unpaired surrogates are not (see Flags).
// The errors are "unterminated string" at the opening quote, "invalid
// \u escape" and "invalid escape" at the backslash, "control character
// in string" at the character.
func ScanString(s string, i int) (end int, f Flags, err error) {
	start := i
	i++
	for {
		for i < len(s) && s[i] >= 0x20 && s[i] != '"' && s[i] != '\\' && s[i] < utf8.RuneSelf {
			i++
		}
		if i >= len(s) {
			return 0, 0, &SyntaxError{Offset: start, Msg: "unterminated string"}
		}
		switch b := s[i]; {
		case b == '"':
			return i + 1, f, nil
		case b == '\\':
			f |= Escaped
			if i+1 >= len(s) {
				return 0, 0, &SyntaxError{Offset: start, Msg: "unterminated string"}
			}
			switch s[i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				i += 2
			case 'u':
				r, ok := hex4(s, i+2)
				if !ok {
					return 0, 0, &SyntaxError{Offset: i, Msg: "invalid \\u escape"}
				}
				i += 6
				switch {
				case utf16.IsSurrogate(r) && r < 0xDC00: // high: a low must follow
					if lowAt(s, i) {
						i += 6
					} else {
						f |= LoneSurrogate
					}
				case utf16.IsSurrogate(r): // low, with no high before it
					f |= LoneSurrogate
				}
			default:
				return 0, 0, &SyntaxError{Offset: i, Msg: "invalid escape"}
			}
		case b < 0x20:
			return 0, 0, &SyntaxError{Offset: i, Msg: "control character in string"}
		default:
			r, size := utf8.DecodeRuneInString(s[i:])
			if r == utf8.RuneError && size == 1 {
				f |= InvalidUTF8
			}
			i += size
		}
	}
}

// lowAt reports whether s[i:] starts with a \u escape of a low surrogate.
func lowAt(s string, i int) bool {
	r, ok := hex4(s, i+2)
	return ok && s[i] == '\\' && s[i+1] == 'u' && r >= 0xDC00 && r <= 0xDFFF
}

// hex4 decodes the four hex digits at s[i:i+4].
func hex4(s string, i int) (rune, bool) {
	if i+4 > len(s) {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[i : i+4]) {
		switch {
		case '0' <= c && c <= '9':
			c -= '0'
		case 'a' <= c && c <= 'f':
			c = c - 'a' + 10
		case 'A' <= c && c <= 'F':
			c = c - 'A' + 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	return r, true
}

// ScanNumber scans the JSON number at s[i] and returns the index past it.
// The grammar is RFC 8259's: -?(0|[1-9][0-9]*)(.[0-9]+)?([eE][+-]?[0-9]+)?
// ok is false when s[i:] does not start with a number.
func ScanNumber(s string, i int) (end int, ok bool) {
	if i < len(s) && s[i] == '-' {
		i++
	}
	switch {
	case i < len(s) && s[i] == '0':
		i++
	case i < len(s) && '1' <= s[i] && s[i] <= '9':
		i = digits(s, i)
	default:
		return 0, false
	}
	if i < len(s) && s[i] == '.' {
		j := digits(s, i+1)
		if j == i+1 {
			return 0, false
		}
		i = j
	}
	if i < len(s) && (s[i] == 'e' || s[i] == 'E') {
		i++
		if i < len(s) && (s[i] == '+' || s[i] == '-') {
			i++
		}
		j := digits(s, i)
		if j == i {
			return 0, false
		}
		i = j
	}
	return i, true
}

func digits(s string, i int) int {
	for i < len(s) && '0' <= s[i] && s[i] <= '9' {
		i++
	}
	return i
}

// ScanLiteral reports whether s[i:] starts with word (true, false or
// null) and returns the index past it.
func ScanLiteral(s string, i int, word string) (end int, ok bool) {
	if !strings.HasPrefix(s[i:], word) {
		return 0, false
	}
	return i + len(word), true
}

// StringEnd returns the index past the string literal at s[i], which
// ScanString (or json.Valid) has accepted.
func StringEnd(s string, i int) int {
	for i++; ; i++ {
		switch s[i] {
		case '"':
			return i + 1
		case '\\':
			i++
		}
	}
}

// SkipValue returns the index past the value at s[i], in text already
// accepted as JSON. It is iterative, so any nesting is fine.
func SkipValue(s string, i int) int {
	depth := 0
	for {
		switch s[i] {
		case '{', '[':
			depth++
			i++
		case '}', ']':
			depth--
			i++
		case '"':
			i = StringEnd(s, i)
		case ',', ':', ' ', '\t', '\n', '\r':
			i++
			continue
		default: // number or literal
			for i < len(s) && strings.IndexByte("0123456789+-.eEtruefalsn", s[i]) >= 0 {
				i++
			}
		}
		if depth == 0 {
			return i
		}
	}
}
