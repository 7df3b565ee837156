package exactjson

import (
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// Mode says how a string's value is written where it is not well-formed
// (see Flags.IllFormed). Well-formed strings decode the same in every
// mode: "\u00e9" and a raw "é" give the same bytes, "\r\n" stays CRLF.
type Mode uint8

const (
	// ReplaceInvalid decodes exactly as encoding/json does: each raw byte
	// that is not UTF-8 and each unpaired surrogate escape becomes
	// U+FFFD. The result is always valid UTF-8.
	ReplaceInvalid Mode = iota
	// ReplaceSurrogates writes each unpaired surrogate escape as U+FFFD
	// and copies raw bytes unchanged, even when they are not UTF-8. It
	// serves readers that refuse ill-formed strings anyway and only need
	// a spelling to name them by.
	ReplaceSurrogates
	// JavaScript decodes the string JSON.parse would produce and writes
	// it in generalized UTF-8: raw bytes are copied unchanged, a surrogate
	// pair becomes its 4-byte character and an unpaired surrogate escape
	// its 3-byte form (ED A0 80–ED BF BF). Both ill-formed cases are
	// invalid UTF-8, so a UTF-8 check refuses them, and the length in
	// bytes is what Node's Buffer.byteLength reports for the JavaScript
	// string (an unpaired surrogate counts 3 bytes, as U+FFFD does).
	JavaScript
)

// Unquote returns the value of the string literal lit (quotes included),
// which ScanString (or json.Valid) has accepted, decoded in mode m. A
// literal without escapes is returned as a substring of lit, without
// allocating (in ReplaceInvalid mode, only when it is valid UTF-8).
func Unquote(lit string, m Mode) string {
	body := lit[1 : len(lit)-1]
	if strings.IndexByte(body, '\\') < 0 && (m != ReplaceInvalid || utf8.ValidString(body)) {
		return body
	}
	return string(appendBody(make([]byte, 0, len(body)), body, m))
}

// appendBody appends the decoded value of body, a string literal's text
// between its quotes.
func appendBody(b []byte, body string, m Mode) []byte {
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			if c < utf8.RuneSelf || m != ReplaceInvalid {
				b = append(b, c)
				i++
				continue
			}
			r, size := utf8.DecodeRuneInString(body[i:])
			if r == utf8.RuneError && size == 1 {
				b = append(b, "\uFFFD"...)
			} else {
				b = append(b, body[i:i+size]...)
			}
			i += size
			continue
		}
		switch e := body[i+1]; e {
		case 'b':
			b = append(b, '\b')
		case 'f':
			b = append(b, '\f')
		case 'n':
			b = append(b, '\n')
		case 'r':
			b = append(b, '\r')
		case 't':
			b = append(b, '\t')
		case 'u':
			r, _ := hex4(body, i+2)
			i += 6
			if utf16.IsSurrogate(r) {
				switch {
				case r < 0xDC00 && lowAt(body, i):
					lo, _ := hex4(body, i+2)
					r = utf16.DecodeRune(r, lo)
					i += 6
				case m == JavaScript:
					b = append(b, 0xE0|byte(r>>12), 0x80|byte(r>>6)&0x3F, 0x80|byte(r)&0x3F)
					continue
				default:
					r = utf8.RuneError
				}
			}
			b = utf8.AppendRune(b, r)
			continue
		default: // '"', '\\', '/'
			b = append(b, e)
		}
		i += 2
	}
	return b
}
