package setuprunner

import (
	"errors"
	"unicode/utf8"
)

// The runner reads three JSON documents whose strings must be compared
// exactly as the reference runner (JavaScript's JSON.parse) sees them: the
// payload, the marker and an OpenClaw package.json. encoding/json cannot
// be used for the first two because it silently replaces invalid UTF-8 and
// unpaired surrogate escapes with U+FFFD, which would make a string that
// JavaScript treats as ill-formed (and refuses, or never matches) look
// like a legitimate one. This small decoder keeps strings exact, keeps
// object members in document order (duplicates included) and says whether
// a string held an unpaired surrogate.

type jsonKind uint8

const (
	jsonNull jsonKind = iota
	jsonBool
	jsonNumber
	jsonString
	jsonArray
	jsonObject
)

// jsonValue is one decoded JSON value.
type jsonValue struct {
	kind jsonKind
	b    bool
	// s is the decoded string: raw bytes copied unchanged, escapes
	// decoded, an unpaired surrogate escape written as its 3-byte
	// generalized UTF-8 form (ED A0 80–ED BF BF), which is invalid UTF-8.
	s string
	// lone reports that s came from an unpaired surrogate escape.
	lone    bool
	members []jsonMember // jsonObject, in document order
	elems   []jsonValue  // jsonArray
}

type jsonMember struct {
	key     string
	keyLone bool
	value   jsonValue
}

// maxJSONDepth bounds nesting. Every document the runner reads is flat
// (the payload nests one object); a deeper one is refused by the schema
// anyway, so refusing it early changes no outcome and bounds recursion.
const maxJSONDepth = 64

var errJSONSyntax = errors.New("invalid JSON")

// decodeJSON decodes data, which must hold exactly one JSON value with
// optional surrounding whitespace (space, tab, LF, CR, as JSON.parse
// allows; a BOM is not whitespace there either).
func decodeJSON(data []byte) (jsonValue, error) {
	d := jsonDecoder{data: data}
	d.skipWS()
	v, err := d.value(0)
	if err != nil {
		return jsonValue{}, err
	}
	d.skipWS()
	if d.pos != len(d.data) {
		return jsonValue{}, errJSONSyntax
	}
	return v, nil
}

type jsonDecoder struct {
	data []byte
	pos  int
}

func (d *jsonDecoder) skipWS() {
	for d.pos < len(d.data) {
		switch d.data[d.pos] {
		case ' ', '\t', '\n', '\r':
			d.pos++
		default:
			return
		}
	}
}

func (d *jsonDecoder) value(depth int) (jsonValue, error) {
	if depth > maxJSONDepth || d.pos >= len(d.data) {
		return jsonValue{}, errJSONSyntax
	}
	switch c := d.data[d.pos]; {
	case c == '{':
		return d.object(depth)
	case c == '[':
		return d.array(depth)
	case c == '"':
		s, lone, err := d.str()
		return jsonValue{kind: jsonString, s: s, lone: lone}, err
	case c == 't':
		return jsonValue{kind: jsonBool, b: true}, d.literal("true")
	case c == 'f':
		return jsonValue{kind: jsonBool}, d.literal("false")
	case c == 'n':
		return jsonValue{kind: jsonNull}, d.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return jsonValue{kind: jsonNumber}, d.number()
	}
	return jsonValue{}, errJSONSyntax
}

func (d *jsonDecoder) literal(lit string) error {
	if len(d.data)-d.pos < len(lit) || string(d.data[d.pos:d.pos+len(lit)]) != lit {
		return errJSONSyntax
	}
	d.pos += len(lit)
	return nil
}

// number checks the JSON number grammar; the value itself is never needed.
func (d *jsonDecoder) number() error {
	digits := func() int {
		start := d.pos
		for d.pos < len(d.data) && d.data[d.pos] >= '0' && d.data[d.pos] <= '9' {
			d.pos++
		}
		return d.pos - start
	}
	if d.data[d.pos] == '-' {
		d.pos++
	}
	if d.pos < len(d.data) && d.data[d.pos] == '0' {
		d.pos++
	} else if digits() == 0 {
		return errJSONSyntax
	}
	if d.pos < len(d.data) && d.data[d.pos] == '.' {
		d.pos++
		if digits() == 0 {
			return errJSONSyntax
		}
	}
	if d.pos < len(d.data) && (d.data[d.pos] == 'e' || d.data[d.pos] == 'E') {
		d.pos++
		if d.pos < len(d.data) && (d.data[d.pos] == '+' || d.data[d.pos] == '-') {
			d.pos++
		}
		if digits() == 0 {
			return errJSONSyntax
		}
	}
	return nil
}

func (d *jsonDecoder) object(depth int) (jsonValue, error) {
	v := jsonValue{kind: jsonObject}
	d.pos++ // '{'
	d.skipWS()
	if d.pos < len(d.data) && d.data[d.pos] == '}' {
		d.pos++
		return v, nil
	}
	for {
		if d.pos >= len(d.data) || d.data[d.pos] != '"' {
			return jsonValue{}, errJSONSyntax
		}
		key, keyLone, err := d.str()
		if err != nil {
			return jsonValue{}, err
		}
		d.skipWS()
		if d.pos >= len(d.data) || d.data[d.pos] != ':' {
			return jsonValue{}, errJSONSyntax
		}
		d.pos++
		d.skipWS()
		val, err := d.value(depth + 1)
		if err != nil {
			return jsonValue{}, err
		}
		v.members = append(v.members, jsonMember{key: key, keyLone: keyLone, value: val})
		d.skipWS()
		if d.pos >= len(d.data) {
			return jsonValue{}, errJSONSyntax
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			d.skipWS()
		case '}':
			d.pos++
			return v, nil
		default:
			return jsonValue{}, errJSONSyntax
		}
	}
}

func (d *jsonDecoder) array(depth int) (jsonValue, error) {
	v := jsonValue{kind: jsonArray}
	d.pos++ // '['
	d.skipWS()
	if d.pos < len(d.data) && d.data[d.pos] == ']' {
		d.pos++
		return v, nil
	}
	for {
		e, err := d.value(depth + 1)
		if err != nil {
			return jsonValue{}, err
		}
		v.elems = append(v.elems, e)
		d.skipWS()
		if d.pos >= len(d.data) {
			return jsonValue{}, errJSONSyntax
		}
		switch d.data[d.pos] {
		case ',':
			d.pos++
			d.skipWS()
		case ']':
			d.pos++
			return v, nil
		default:
			return jsonValue{}, errJSONSyntax
		}
	}
}

// str decodes the string literal at d.pos. Raw control characters are a
// syntax error, as in JSON.parse.
func (d *jsonDecoder) str() (s string, lone bool, err error) {
	d.pos++ // opening quote
	start := d.pos
	// Fast path: no escapes.
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		if c == '"' {
			s = string(d.data[start:d.pos])
			d.pos++
			return s, false, nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", false, errJSONSyntax
		}
		d.pos++
	}
	b := append([]byte(nil), d.data[start:d.pos]...)
	for d.pos < len(d.data) {
		c := d.data[d.pos]
		switch {
		case c == '"':
			d.pos++
			return string(b), lone, nil
		case c < 0x20:
			return "", false, errJSONSyntax
		case c != '\\':
			b = append(b, c)
			d.pos++
			continue
		}
		if d.pos+1 >= len(d.data) {
			return "", false, errJSONSyntax
		}
		e := d.data[d.pos+1]
		d.pos += 2
		switch e {
		case '"', '\\', '/':
			b = append(b, e)
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
			u, ok := d.hex4()
			if !ok {
				return "", false, errJSONSyntax
			}
			if u >= 0xD800 && u < 0xDC00 && d.pos+1 < len(d.data) && d.data[d.pos] == '\\' && d.data[d.pos+1] == 'u' {
				save := d.pos
				d.pos += 2
				if lo, ok := d.hex4(); ok && lo >= 0xDC00 && lo < 0xE000 {
					b = utf8.AppendRune(b, 0x10000+(u-0xD800)<<10+(lo-0xDC00))
					continue
				}
				d.pos = save // not a low surrogate: decode it on its own
			}
			if u >= 0xD800 && u < 0xE000 {
				lone = true
				b = append(b, 0xE0|byte(u>>12), 0x80|byte(u>>6)&0x3F, 0x80|byte(u)&0x3F)
			} else {
				b = utf8.AppendRune(b, u)
			}
		default:
			return "", false, errJSONSyntax
		}
	}
	return "", false, errJSONSyntax
}

func (d *jsonDecoder) hex4() (rune, bool) {
	if len(d.data)-d.pos < 4 {
		return 0, false
	}
	var r rune
	for _, c := range d.data[d.pos : d.pos+4] {
		switch {
		case c >= '0' && c <= '9':
			c -= '0'
		case c >= 'a' && c <= 'f':
			c -= 'a' - 10
		case c >= 'A' && c <= 'F':
			c -= 'A' - 10
		default:
			return 0, false
		}
		r = r<<4 | rune(c)
	}
	d.pos += 4
	return r, true
}
