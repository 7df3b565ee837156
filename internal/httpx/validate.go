package httpx

import (
	"encoding/base64"
	"strconv"
	"strings"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/exactjson"
)

// validator is ReadJSON's second pass: it walks a body the checker has
// accepted (valid syntax, at most MaxDepth deep, so recursion is bounded)
// against a schema and collects UNKNOWN_FIELD, INVALID_TYPE, INVALID_FORMAT
// and REQUIRED problems in document order. The REQUIRED problems of an
// object come at its end, in field declaration order. Values of unknown
// fields and values of the wrong type are not looked into.
//
// Everything it accepts decodes with encoding/json into the same type
// without error, unless a type with its own unmarshalling code (kindCustom,
// kindText) rejects its input; FuzzReadJSON checks this. The only
// conversion left is the one the Go type asks for: numbers in an interface
// become float64.
type validator struct {
	s       string
	path    []segment
	details []errkind.Detail
}

// segment is one step of a JSON pointer: an object key, or an array index
// when index >= 0.
type segment struct {
	key   string
	index int
}

func (v *validator) report(code string) {
	if len(v.details) >= errkind.MaxDetails {
		return
	}
	var b strings.Builder
	for _, seg := range v.path {
		b.WriteByte('/')
		if seg.index >= 0 {
			b.WriteString(strconv.Itoa(seg.index))
		} else {
			writeSegment(&b, seg.key)
		}
	}
	v.details = append(v.details, errkind.Detail{Path: b.String(), Code: code})
}

func (v *validator) full() bool { return len(v.details) >= errkind.MaxDetails }

// value validates the value starting at v.s[i] and returns the index just
// past it.
func (v *validator) value(s *schema, i int) int {
	if v.full() {
		return exactjson.SkipValue(v.s, i)
	}
	c := v.s[i]
	switch s.kind {
	case kindRaw, kindCustom:
		return exactjson.SkipValue(v.s, i)
	case kindInterface:
		return v.anyValue(i)
	case kindPointer:
		if c == 'n' {
			return i + len("null")
		}
		return v.value(s.elem, i)
	case kindString, kindText:
		if c == '"' {
			return exactjson.StringEnd(v.s, i)
		}
	case kindBytes:
		if c == '"' {
			end := exactjson.StringEnd(v.s, i)
			// encoding/json decodes with StdEncoding, which skips \r and \n.
			if _, err := base64.StdEncoding.DecodeString(exactjson.Unquote(v.s[i:end], exactjson.ReplaceSurrogates)); err != nil {
				v.report(errkind.DetailInvalidFormat)
			}
			return end
		}
	case kindBool:
		switch c {
		case 't':
			return i + len("true")
		case 'f':
			return i + len("false")
		}
	case kindNumber:
		if c == '-' || ('0' <= c && c <= '9') {
			end, _ := exactjson.ScanNumber(v.s, i)
			return end
		}
	case kindInt, kindUint, kindFloat:
		if c == '-' || ('0' <= c && c <= '9') {
			end, _ := exactjson.ScanNumber(v.s, i)
			if !numberFits(s, v.s[i:end]) {
				v.report(errkind.DetailInvalidType)
			}
			return end
		}
	case kindStruct:
		if c == '{' {
			return v.object(s, i)
		}
	case kindMap:
		if c == '{' {
			return v.mapValue(s, i)
		}
	case kindSlice:
		if c == '[' {
			return v.array(s.elem, i)
		}
	}
	v.report(errkind.DetailInvalidType)
	return exactjson.SkipValue(v.s, i)
}

// numberFits reports whether encoding/json decodes the literal lit into a
// value of s's kind without error: integers must be written as integers
// (no fraction, no exponent) within range; floats must be within range.
// These are exactly the strconv calls encoding/json makes.
func numberFits(s *schema, lit string) bool {
	var err error
	switch s.kind {
	case kindInt:
		_, err = strconv.ParseInt(lit, 10, s.bits)
	case kindUint:
		_, err = strconv.ParseUint(lit, 10, s.bits)
	default:
		_, err = strconv.ParseFloat(lit, s.bits)
	}
	return err == nil
}

// object validates a struct's object: known names only, each value against
// its field, then REQUIRED for each required field that was absent. The
// checker has already refused duplicate keys.
func (v *validator) object(s *schema, i int) int {
	var small uint64 // seen fields, when there are at most 64
	var large []bool // seen fields, otherwise
	if len(s.fields) > 64 {
		large = make([]bool, len(s.fields))
	}
	i = v.members(i, func(key string, i int) int {
		n, ok := s.index[key]
		if !ok {
			v.report(errkind.DetailUnknownField)
			return exactjson.SkipValue(v.s, i)
		}
		if large != nil {
			large[n] = true
		} else {
			small |= 1 << n
		}
		return v.value(s.fields[n].schema, i)
	})
	for n, f := range s.fields {
		seen := small&(1<<n) != 0
		if large != nil {
			seen = large[n]
		}
		if f.required && !seen {
			v.path = append(v.path, segment{key: f.name, index: -1})
			v.report(errkind.DetailRequired)
			v.path = v.path[:len(v.path)-1]
		}
	}
	return i
}

// mapValue validates every member's value against the map's element.
func (v *validator) mapValue(s *schema, i int) int {
	return v.members(i, func(_ string, i int) int { return v.value(s.elem, i) })
}

// members walks the object at v.s[i], calling member for each key with the
// index of its value and the key pushed on the path. member returns the
// index past the value. members returns the index past the object.
func (v *validator) members(i int, member func(key string, i int) int) int {
	i = exactjson.SkipSpace(v.s, i+1)
	if v.s[i] == '}' {
		return i + 1
	}
	for {
		end := exactjson.StringEnd(v.s, i)
		key := exactjson.Unquote(v.s[i:end], exactjson.ReplaceSurrogates)
		i = exactjson.SkipSpace(v.s, exactjson.SkipSpace(v.s, end)+1) // past ':'
		v.path = append(v.path, segment{key: key, index: -1})
		i = member(key, i)
		v.path = v.path[:len(v.path)-1]
		i = exactjson.SkipSpace(v.s, i)
		if v.s[i] == '}' {
			return i + 1
		}
		i = exactjson.SkipSpace(v.s, i+1) // past ','
	}
}

// array validates each element against elem.
func (v *validator) array(elem *schema, i int) int {
	i = exactjson.SkipSpace(v.s, i+1)
	if v.s[i] == ']' {
		return i + 1
	}
	for n := 0; ; n++ {
		v.path = append(v.path, segment{index: n})
		i = v.value(elem, i)
		v.path = v.path[:len(v.path)-1]
		i = exactjson.SkipSpace(v.s, i)
		if v.s[i] == ']' {
			return i + 1
		}
		i = exactjson.SkipSpace(v.s, i+1)
	}
}

// Schemas for the values inside an empty interface.
var (
	anySchema     = &schema{kind: kindInterface}
	anyMapSchema  = &schema{kind: kindMap, elem: anySchema}
	float64Schema = &schema{kind: kindFloat, bits: 64}
)

// anyValue validates a value decoded into an empty interface: any JSON,
// but encoding/json turns numbers into float64 and fails on those out of
// its range.
func (v *validator) anyValue(i int) int {
	switch c := v.s[i]; {
	case c == '{':
		return v.mapValue(anyMapSchema, i)
	case c == '[':
		return v.array(anySchema, i)
	case c == '-' || ('0' <= c && c <= '9'):
		return v.value(float64Schema, i)
	}
	return exactjson.SkipValue(v.s, i)
}
