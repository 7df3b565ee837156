package httpx

import (
	"errors"
	"strconv"
	"strings"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/exactjson"
)

// MaxDepth is the deepest nesting of objects and arrays a request body may
// have: a body whose values are MaxDepth containers deep is accepted, one
// more level is refused with TOO_DEEP. The top-level object is level 1.
const MaxDepth = 24

// linearKeys is how many keys an object may have before duplicate detection
// switches from a linear scan to a map. Request objects are small; the map
// only protects against bodies built to make the scan quadratic.
const linearKeys = 16

// forbiddenKeys are object keys refused at any depth. They are harmless to
// Go, but OCC's bodies reach JavaScript (the console, audit viewers, the
// reference tooling) where they can pollute object prototypes.
var forbiddenKeys = map[string]bool{"__proto__": true, "constructor": true, "prototype": true}

// errEmptyBody reports a body with no JSON value in it (only whitespace).
var errEmptyBody = errors.New("empty body")

// checker is the first of ReadJSON's two passes. It reads the body once,
// iteratively (so a body of a million '[' cannot exhaust the stack), and
// checks everything that does not depend on the target type:
//
//   - JSON syntax (RFC 8259), including a single top-level value;
//   - nesting depth (TOO_DEEP at the first too-deep container; nothing
//     inside it is examined further, but its syntax still is);
//   - forbidden keys, duplicate keys, strings with invalid UTF-8 or
//     unpaired surrogate escapes (INVALID_VALUE).
//
// A syntax error ends the check; the other problems are collected, up to
// errkind.MaxDetails, in document order.
type checker struct {
	s       string
	i       int
	kinds   []byte          // '{' or '[' for each open container, outermost first
	frames  [MaxDepth]frame // position inside each open container up to MaxDepth
	deep    int             // level of the too-deep container being skipped; 0 if none
	details []errkind.Detail
}

// frame is the position inside one open container.
type frame struct {
	index int                 // array: index of the current element
	key   string              // object: decoded key of the current member
	keys  []string            // object: keys so far, while there are few
	seen  map[string]struct{} // object: keys so far, once there are many
}

// check runs the first pass over c.s. It returns errEmptyBody, an
// *exactjson.SyntaxError, or nil; problems that are not syntax errors are in
// c.details.
func (c *checker) check() error {
	c.skipWS()
	if c.i == len(c.s) {
		return errEmptyBody
	}
value: // c.i is at the start of a value; whitespace has been skipped.
	for {
		if c.i >= len(c.s) {
			return c.errorf("unexpected end of JSON input")
		}
		switch ch := c.s[c.i]; ch {
		case '{', '[':
			c.open(ch)
			c.i++
			c.skipWS()
			if c.i < len(c.s) && c.s[c.i] == closer(ch) {
				c.i++
				c.close()
				break
			}
			if ch == '{' {
				if err := c.member(); err != nil {
					return err
				}
			}
			continue value
		case '"':
			end, f, err := exactjson.ScanString(c.s, c.i)
			if err != nil {
				return err
			}
			c.i = end
			if f.IllFormed() {
				c.report(errkind.DetailInvalidValue)
			}
		case 't':
			if err := c.literal("true"); err != nil {
				return err
			}
		case 'f':
			if err := c.literal("false"); err != nil {
				return err
			}
		case 'n':
			if err := c.literal("null"); err != nil {
				return err
			}
		default:
			end, ok := exactjson.ScanNumber(c.s, c.i)
			if !ok {
				return c.errorf("invalid character")
			}
			c.i = end
		}
		// A value has ended; what follows depends on its container.
		for {
			c.skipWS()
			depth := len(c.kinds)
			if depth == 0 {
				if c.i < len(c.s) {
					return c.errorf("unexpected data after the top-level value")
				}
				return nil
			}
			if c.i >= len(c.s) {
				return c.errorf("unexpected end of JSON input")
			}
			open := c.kinds[depth-1]
			switch c.s[c.i] {
			case ',':
				c.i++
				c.skipWS()
				if open == '{' {
					if err := c.member(); err != nil {
						return err
					}
				} else if depth <= MaxDepth {
					c.frames[depth-1].index++
				}
				continue value
			case closer(open):
				c.i++
				c.close()
			default:
				if open == '{' {
					return c.errorf("expected ',' or '}' after an object member")
				}
				return c.errorf("expected ',' or ']' after an array element")
			}
		}
	}
}

func closer(open byte) byte {
	if open == '{' {
		return '}'
	}
	return ']'
}

// open enters a container. The first container past MaxDepth is reported at
// its own pointer; everything inside it is then only syntax-checked.
func (c *checker) open(ch byte) {
	level := len(c.kinds) + 1
	if level > MaxDepth && c.deep == 0 {
		c.report(errkind.DetailTooDeep)
		c.deep = level
	}
	c.kinds = append(c.kinds, ch)
	if level <= MaxDepth {
		f := &c.frames[level-1]
		f.index, f.key, f.keys, f.seen = 0, "", f.keys[:0], nil
	}
}

func (c *checker) close() {
	level := len(c.kinds)
	c.kinds = c.kinds[:level-1]
	if level == c.deep {
		c.deep = 0
	}
}

// member reads an object key and the colon after it, leaving c.i at the
// member's value, and checks the key: well-formed, not forbidden, not a
// duplicate. Keys are compared after unescaping, so "__prot\u006f__" is
// "__proto__" and {"a":1,"\u0061":2} has a duplicate, exactly as a JSON
// consumer would see them.
func (c *checker) member() error {
	if c.i >= len(c.s) || c.s[c.i] != '"' {
		return c.errorf("expected a string object key")
	}
	start := c.i
	end, flags, err := exactjson.ScanString(c.s, c.i)
	if err != nil {
		return err
	}
	c.i = end
	if c.deep == 0 { // so len(c.kinds) <= MaxDepth
		// Unescaped keys are sliced out of the body, not copied.
		key := c.s[start+1 : end-1]
		if flags&exactjson.Escaped != 0 {
			key = exactjson.Unquote(c.s[start:end], exactjson.ReplaceSurrogates)
		}
		f := &c.frames[len(c.kinds)-1]
		f.key = key
		switch {
		case flags.IllFormed():
			// The pointer shows the key with U+FFFD in place of what
			// could not be decoded; there is no faithful spelling.
			c.report(errkind.DetailInvalidValue)
		case forbiddenKeys[key]:
			c.report(errkind.DetailInvalidValue)
		case f.seenBefore(key):
			c.report(errkind.DetailInvalidValue)
		}
	}
	c.skipWS()
	if c.i >= len(c.s) || c.s[c.i] != ':' {
		return c.errorf("expected ':' after an object key")
	}
	c.i++
	c.skipWS()
	return nil
}

// seenBefore records key and reports whether the object already had it.
func (f *frame) seenBefore(key string) bool {
	if f.seen != nil {
		if _, ok := f.seen[key]; ok {
			return true
		}
		f.seen[key] = struct{}{}
		return false
	}
	for _, k := range f.keys {
		if k == key {
			return true
		}
	}
	f.keys = append(f.keys, key)
	if len(f.keys) > linearKeys {
		f.seen = make(map[string]struct{}, 2*len(f.keys))
		for _, k := range f.keys {
			f.seen[k] = struct{}{}
		}
	}
	return false
}

func (c *checker) literal(word string) error {
	end, ok := exactjson.ScanLiteral(c.s, c.i, word)
	if !ok {
		return c.errorf("invalid literal")
	}
	c.i = end
	return nil
}

// report records a problem at the current value's pointer, unless the
// value is inside a too-deep container or enough problems are known.
func (c *checker) report(code string) {
	if c.deep != 0 || len(c.details) >= errkind.MaxDetails {
		return
	}
	c.details = append(c.details, errkind.Detail{Path: c.pointer(), Code: code})
}

// pointer is the JSON pointer of the value at c.i: one segment per open
// container, the current key or index.
func (c *checker) pointer() string {
	var b strings.Builder
	for l := range min(len(c.kinds), MaxDepth) {
		b.WriteByte('/')
		if c.kinds[l] == '{' {
			writeSegment(&b, c.frames[l].key)
		} else {
			b.WriteString(strconv.Itoa(c.frames[l].index))
		}
	}
	return b.String()
}

func (c *checker) skipWS() { c.i = exactjson.SkipSpace(c.s, c.i) }

func (c *checker) errorf(msg string) error { return &exactjson.SyntaxError{Offset: c.i, Msg: msg} }

// writeSegment writes key as a JSON pointer segment (RFC 6901: "~" is
// written "~0" and "/" is written "~1").
func writeSegment(b *strings.Builder, key string) {
	if !strings.ContainsAny(key, "~/") {
		b.WriteString(key)
		return
	}
	for i := 0; i < len(key); i++ {
		switch key[i] {
		case '~':
			b.WriteString("~0")
		case '/':
			b.WriteString("~1")
		default:
			b.WriteByte(key[i])
		}
	}
}
