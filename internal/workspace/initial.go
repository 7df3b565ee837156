package workspace

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"
	"unicode/utf8"

	"github.com/openclaw/occ/internal/errkind"
)

// Request fields, as JSON pointers, that the errors below point at.
const (
	initialFilesPath = "/initialWorkspaceFiles"
	defaultsIDPath   = "/workspaceDefaultsId"
)

const initialFilesMessage = "Initial workspace files must use the four allowed names, valid Unicode without NUL, within 16 KiB per file."

// NormalizeInitialFiles validates the initialWorkspaceFiles of an Agent
// create request that was already decoded into a map. present says whether
// the field was in the request at all, because a decoded map cannot tell
// an absent field from an empty one:
//
//   - !present → (nil, nil): no setup;
//   - present with a nil map (the field was null) → error;
//   - an empty map → (nil, nil): no setup, no record;
//   - otherwise every key must be one of Names and every value must satisfy
//     the content rule; empty strings are valid (they create empty files).
//
// The result is a new map holding the same strings, byte for byte (no
// trimming, no line-ending changes). A failure is an errkind.Invalid with
// one message and details at /initialWorkspaceFiles/<key>, sorted by key:
// UNKNOWN_FIELD for a name outside Names (it is a closed object, and
// httpx reports keys outside a closed object that way), TOO_LONG and/or
// INVALID_VALUE for content. A null field is INVALID_TYPE at
// /initialWorkspaceFiles. At most errkind.MaxDetails details are kept.
//
// A map decoded by encoding/json has lost unpaired surrogates and invalid
// UTF-8 (both became U+FFFD), so this form is safe only behind a reader
// that rejects them, as httpx.ReadJSON does; NormalizeInitialFilesJSON
// checks them itself.
func NormalizeInitialFiles(raw map[string]string, present bool) (map[string]string, error) {
	if !present {
		return nil, nil
	}
	if raw == nil {
		return nil, invalidFiles(errkind.Detail{Path: initialFilesPath, Code: errkind.DetailInvalidType})
	}
	if len(raw) == 0 {
		return nil, nil
	}
	var c collector
	for _, key := range slices.Sorted(maps.Keys(raw)) {
		c.member(key, raw[key])
	}
	return c.result()
}

// NormalizeInitialFilesJSON is NormalizeInitialFiles for the raw JSON of
// the field, for a request type that declares it as json.RawMessage. It
// reads the JSON text itself, so nothing the reference would refuse is
// lost in decoding:
//
//   - empty or whitespace-only raw → (nil, nil): the field was absent;
//   - null, an array, a string, a number or a boolean → INVALID_TYPE at
//     /initialWorkspaceFiles; text that is not JSON → INVALID_VALUE there;
//   - {} → (nil, nil);
//   - per key (compared after unescaping), in document order: a name
//     outside Names → UNKNOWN_FIELD (its value is not looked at); a name
//     seen before → INVALID_VALUE, as httpx reports duplicate keys; a
//     value that is not a string (null included) → INVALID_TYPE; a string
//     whose raw bytes are invalid UTF-8, whose escapes leave an unpaired
//     surrogate (encoding/json would silently turn either into U+FFFD) or
//     that holds U+0000 → INVALID_VALUE; one longer than MaxFileBytes →
//     TOO_LONG, counting an unpaired surrogate as 3 bytes as Node's
//     Buffer.byteLength does. Both codes can apply to one string.
//
// Strings are decoded exactly: "\r\n" stays CRLF, "\u00e9" and a raw "é"
// give the same bytes.
func NormalizeInitialFilesJSON(raw json.RawMessage) (map[string]string, error) {
	s := string(raw)
	i := skipWS(s, 0)
	if i == len(s) {
		return nil, nil
	}
	if !json.Valid(raw) {
		return nil, invalidFiles(errkind.Detail{Path: initialFilesPath, Code: errkind.DetailInvalidValue})
	}
	if s[i] != '{' {
		return nil, invalidFiles(errkind.Detail{Path: initialFilesPath, Code: errkind.DetailInvalidType})
	}
	// From here on s is known to be one valid JSON object, so the scanning
	// helpers need not handle syntax errors.
	var c collector
	seen := make(map[string]bool, len(Names))
	i = skipWS(s, i+1)
	for s[i] != '}' {
		end := stringEnd(s, i)
		key := decodeKey(s[i:end])
		i = skipWS(s, end)
		i = skipWS(s, i+1) // past ':'
		start := i
		i = skipValue(s, i)
		value := s[start:i]
		switch {
		case !ValidName(key):
			c.add(key, errkind.DetailUnknownField)
		case seen[key]:
			c.add(key, errkind.DetailInvalidValue)
		case value[0] != '"':
			seen[key] = true
			c.add(key, errkind.DetailInvalidType)
		default:
			seen[key] = true
			c.member(key, unquote(value))
		}
		i = skipWS(s, i)
		if s[i] == ',' {
			i = skipWS(s, i+1)
		}
	}
	return c.result()
}

// collector gathers valid files and the details of invalid ones.
type collector struct {
	files   map[string]string
	details []errkind.Detail
}

func (c *collector) member(key, value string) {
	if !ValidName(key) {
		c.add(key, errkind.DetailUnknownField)
		return
	}
	if err := CheckContent(value); err != nil {
		for _, code := range err.(*ContentError).Codes() {
			c.add(key, code)
		}
		return
	}
	if c.files == nil {
		c.files = make(map[string]string, len(Names))
	}
	c.files[key] = value
}

func (c *collector) add(key, code string) {
	if len(c.details) < errkind.MaxDetails {
		c.details = append(c.details, errkind.Detail{Path: filePath(key), Code: code})
	}
}

func (c *collector) result() (map[string]string, error) {
	if len(c.details) > 0 {
		return nil, invalidFiles(c.details...)
	}
	return c.files, nil // nil when there were no members
}

func invalidFiles(details ...errkind.Detail) error {
	return errkind.InvalidDetails(initialFilesMessage, details...)
}

// filePath is the JSON pointer (RFC 6901) of one key of the field. An
// unknown key may hold anything the client sent; the pointer is made valid
// UTF-8 so that the error body stays well-formed.
func filePath(key string) string {
	return initialFilesPath + "/" + pointerEscaper.Replace(strings.ToValidUTF8(key, "\uFFFD"))
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// ValidateDefaultsID checks the form of a workspaceDefaultsId the client
// sent: exactly 64 lowercase hexadecimal characters. An absent field is the
// caller's business; an empty string is refused.
func ValidateDefaultsID(s string) error {
	if !isDigestHex(s) {
		return errkind.InvalidDetails("Workspace defaults identity must be 64 lowercase hexadecimal characters.",
			errkind.Detail{Path: defaultsIDPath, Code: errkind.DetailInvalidFormat})
	}
	return nil
}

// CheckDefaultsID is ValidateDefaultsID followed by a comparison with
// DefaultsID: a well-formed identity of other defaults means the form was
// rendered from another OCC release, so the operator saw other texts than
// the ones setup would keep; 409 RESOURCE_CONFLICT asks for a reload.
func CheckDefaultsID(s string) error {
	if err := ValidateDefaultsID(s); err != nil {
		return err
	}
	if s != DefaultsID {
		return errkind.WithCode(errkind.Conflict, errkind.CodeResourceConflict,
			"Workspace defaults changed. Reload the create form before submitting.")
	}
	return nil
}

func isDigestHex(s string) bool {
	if len(s) != 64 {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// The helpers below scan text that json.Valid accepted.

func skipWS(s string, i int) int {
	for i < len(s) && (s[i] == ' ' || s[i] == '\t' || s[i] == '\n' || s[i] == '\r') {
		i++
	}
	return i
}

// stringEnd returns the index just past the string literal at s[i].
func stringEnd(s string, i int) int {
	for i++; ; i++ {
		switch s[i] {
		case '\\':
			i++
		case '"':
			return i + 1
		}
	}
}

// skipValue returns the index just past the value at s[i].
func skipValue(s string, i int) int {
	switch s[i] {
	case '"':
		return stringEnd(s, i)
	case '{', '[':
		depth := 0
		for {
			switch s[i] {
			case '"':
				i = stringEnd(s, i)
				continue
			case '{', '[':
				depth++
			case '}', ']':
				depth--
				if depth == 0 {
					return i + 1
				}
			}
			i++
		}
	default: // number, true, false, null
		for i < len(s) && !strings.ContainsRune(",}] \t\n\r", rune(s[i])) {
			i++
		}
		return i
	}
}

// decodeKey decodes an object key as encoding/json does, so that a
// detail's path names an odd key (one with an unpaired surrogate, say) the
// way httpx would. Names are plain ASCII, so comparing them is unaffected.
func decodeKey(lit string) string {
	var key string
	if err := json.Unmarshal([]byte(lit), &key); err != nil {
		return unquote(lit) // unreachable: lit is a valid string literal
	}
	return key
}

// unquote decodes a valid JSON string literal, quotes included, without
// the repairs encoding/json makes: raw bytes are copied as they are, even
// when they are not UTF-8, and a \u escape of an unpaired surrogate is
// written as its 3-byte generalized UTF-8 form (ED A0 80–ED BF BF). Both
// are invalid UTF-8, so CheckContent refuses them, and the length is the
// one Node's Buffer.byteLength reports (3 bytes, as for U+FFFD).
func unquote(lit string) string {
	body := lit[1 : len(lit)-1]
	if strings.IndexByte(body, '\\') < 0 {
		return body
	}
	b := make([]byte, 0, len(body))
	for i := 0; i < len(body); {
		c := body[i]
		if c != '\\' {
			b = append(b, c)
			i++
			continue
		}
		e := body[i+1]
		i += 2
		switch e {
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
			u := hex4(body[i:])
			i += 4
			if u >= 0xD800 && u < 0xDC00 && i+6 <= len(body) && body[i] == '\\' && body[i+1] == 'u' {
				if lo := hex4(body[i+2:]); lo >= 0xDC00 && lo < 0xE000 {
					b = utf8.AppendRune(b, 0x10000+(u-0xD800)<<10+(lo-0xDC00))
					i += 6
					continue
				}
			}
			if u >= 0xD800 && u < 0xE000 {
				b = append(b, 0xE0|byte(u>>12), 0x80|byte(u>>6)&0x3F, 0x80|byte(u)&0x3F)
			} else {
				b = utf8.AppendRune(b, u)
			}
		default: // '"', '\\', '/'
			b = append(b, e)
		}
	}
	return string(b)
}

func hex4(s string) rune {
	var r rune
	for i := 0; i < 4; i++ {
		c := s[i]
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		default:
			c -= 'A' - 10
		}
		r = r<<4 | rune(c)
	}
	return r
}
