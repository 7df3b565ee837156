package httpx

import (
	"cmp"
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"sync"
	"unicode"
)

// kind is what JSON a Go type accepts, as far as ReadJSON's second pass is
// concerned. The rules are encoding/json's, narrowed: anything encoding/json
// would accept only by silently dropping or converting data is refused.
type kind uint8

const (
	kindRaw       kind = iota // json.RawMessage: any JSON value
	kindCustom                // json.Unmarshaler: any JSON value; the type decides when decoding
	kindInterface             // empty interface: any JSON value; numbers must fit a float64
	kindString                // a JSON string
	kindText                  // encoding.TextUnmarshaler: a JSON string; the type decides when decoding
	kindBytes                 // []byte: a JSON string in standard base64
	kindBool                  // true or false
	kindInt                   // an integer literal within the type's range
	kindUint                  // a non-negative integer literal within the type's range
	kindFloat                 // a number within the type's range
	kindNumber                // json.Number: any JSON number, kept as written
	kindPointer               // null, or what elem accepts
	kindStruct                // an object with the struct's fields
	kindSlice                 // an array of what elem accepts
	kindMap                   // an object of what elem accepts
)

// schema describes the JSON a Go type accepts. Schemas form a graph
// (recursive types point back at themselves) and are immutable once built.
type schema struct {
	kind   kind
	bits   int            // kindInt, kindUint, kindFloat
	elem   *schema        // kindPointer, kindSlice, kindMap
	fields []field        // kindStruct, in declaration order
	index  map[string]int // kindStruct: JSON name -> position in fields
}

type field struct {
	name     string
	required bool
	schema   *schema
}

// schemaEntry is a cached result of schemaFor.
type schemaEntry struct {
	s *schema
	// custom reports that decoding can still reject a validated body
	// because a type with its own unmarshalling code is reachable.
	custom bool
	err    error
}

var (
	schemaCache sync.Map // reflect.Type -> schemaEntry

	rawMessageType      = reflect.TypeFor[json.RawMessage]()
	numberType          = reflect.TypeFor[json.Number]()
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
)

// schemaFor returns the schema of t, building it on first use. An error
// means t cannot be validated (a channel, an array, a non-string map key,
// the ",string" option): a programming error reported as a 500 on every
// request that uses the type, which its first test catches.
func schemaFor(t reflect.Type) schemaEntry {
	if e, ok := schemaCache.Load(t); ok {
		return e.(schemaEntry)
	}
	b := builder{built: map[reflect.Type]*schema{}}
	s, err := b.build(t)
	e := schemaEntry{s: s, custom: b.custom, err: err}
	if err != nil {
		e = schemaEntry{err: fmt.Errorf("httpx: cannot validate JSON for %v: %w", t, err)}
	}
	got, _ := schemaCache.LoadOrStore(t, e)
	return got.(schemaEntry)
}

type builder struct {
	built  map[reflect.Type]*schema
	custom bool
}

func (b *builder) build(t reflect.Type) (*schema, error) {
	if s, ok := b.built[t]; ok {
		return s, nil
	}
	s := &schema{}
	b.built[t] = s // before recursing, so recursive types terminate

	// The order of these checks is encoding/json's: its own methods first.
	pt := reflect.PointerTo(t)
	switch {
	case t == rawMessageType:
		s.kind = kindRaw
		return s, nil
	case t == numberType:
		// encoding/json would also take a string holding a number; a
		// number field takes numbers only.
		s.kind = kindNumber
		return s, nil
	case t.Kind() != reflect.Pointer && pt.Implements(jsonUnmarshalerType):
		s.kind = kindCustom
		b.custom = true
		return s, nil
	case t.Kind() != reflect.Pointer && pt.Implements(textUnmarshalerType):
		s.kind = kindText
		b.custom = true
		return s, nil
	}

	switch t.Kind() {
	case reflect.String:
		s.kind = kindString
	case reflect.Bool:
		s.kind = kindBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		s.kind, s.bits = kindInt, t.Bits()
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		s.kind, s.bits = kindUint, t.Bits()
	case reflect.Float32, reflect.Float64:
		s.kind, s.bits = kindFloat, t.Bits()
	case reflect.Interface:
		if t.NumMethod() != 0 {
			return nil, fmt.Errorf("interface %v has methods", t)
		}
		s.kind = kindInterface
	case reflect.Pointer:
		if t.Elem().Kind() == reflect.Pointer {
			// Also keeps "type P *P" from recursing forever.
			return nil, fmt.Errorf("pointer to pointer %v", t)
		}
		s.kind = kindPointer
		elem, err := b.build(t.Elem())
		if err != nil {
			return nil, err
		}
		s.elem = elem
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			s.kind = kindBytes
			break
		}
		s.kind = kindSlice
		elem, err := b.build(t.Elem())
		if err != nil {
			return nil, err
		}
		s.elem = elem
	case reflect.Map:
		if t.Key().Kind() != reflect.String {
			return nil, fmt.Errorf("map key type %v is not a string type", t.Key())
		}
		if reflect.PointerTo(t.Key()).Implements(textUnmarshalerType) {
			b.custom = true
		}
		s.kind = kindMap
		elem, err := b.build(t.Elem())
		if err != nil {
			return nil, err
		}
		s.elem = elem
	case reflect.Struct:
		s.kind = kindStruct
		if err := b.structFields(s, t); err != nil {
			return nil, err
		}
	default: // arrays, channels, functions, complex numbers, unsafe pointers
		return nil, fmt.Errorf("unsupported type %v", t)
	}
	return s, nil
}

// candidate is a struct field that may receive a JSON member.
type candidate struct {
	name     string
	tagged   bool  // the name comes from a json tag
	index    []int // path of field indexes from the outer struct
	optional bool
	typ      reflect.Type
}

// structFields resolves which JSON names a struct accepts, following
// encoding/json: exported fields, json tag names (invalid names fall back to
// the Go name), "-" skipped, untagged embedded structs flattened, and a name
// claimed by several fields going to the shallowest one, then to the only
// tagged one, else to none. Two differences: an embedded pointer to an
// unexported struct is skipped (encoding/json fails at decode time), and
// the ",string" option is refused rather than half-supported.
//
// A field is optional (no REQUIRED detail when absent) if its tag has
// omitempty or omitzero, its type is a pointer, or it is reached through an
// embedded pointer; otherwise it is required.
func (b *builder) structFields(s *schema, t reflect.Type) error {
	type embedded struct {
		typ      reflect.Type
		index    []int
		optional bool
	}
	var cands []candidate
	visited := map[reflect.Type]bool{}
	count := map[reflect.Type]int{}
	for current := []embedded{{typ: t}}; len(current) > 0; {
		var next []embedded
		nextCount := map[reflect.Type]int{}
		for _, e := range current {
			if visited[e.typ] {
				continue
			}
			visited[e.typ] = true
			for i := range e.typ.NumField() {
				sf := e.typ.Field(i)
				ft := sf.Type
				if sf.Anonymous {
					if ft.Kind() == reflect.Pointer {
						ft = ft.Elem()
					}
					if !sf.IsExported() && (ft.Kind() != reflect.Struct || sf.Type.Kind() == reflect.Pointer) {
						continue
					}
				} else if !sf.IsExported() {
					continue
				}
				tag := sf.Tag.Get("json")
				if tag == "-" {
					continue
				}
				name, opts, _ := strings.Cut(tag, ",")
				if !validTagName(name) {
					name = ""
				}
				index := append(slices.Clip(e.index), i)
				if name == "" && sf.Anonymous && ft.Kind() == reflect.Struct {
					nextCount[ft]++
					if nextCount[ft] == 1 {
						next = append(next, embedded{
							typ:      ft,
							index:    index,
							optional: e.optional || sf.Type.Kind() == reflect.Pointer,
						})
					}
					continue
				}
				optional := e.optional || sf.Type.Kind() == reflect.Pointer
				for _, o := range strings.Split(opts, ",") {
					switch o {
					case "omitempty", "omitzero":
						optional = true
					case "string":
						return fmt.Errorf("field %s uses the \",string\" option", sf.Name)
					}
				}
				c := candidate{name: name, tagged: name != "", index: index, optional: optional, typ: sf.Type}
				if c.name == "" {
					c.name = sf.Name
				}
				cands = append(cands, c)
				if count[e.typ] > 1 {
					// The same struct is embedded twice at this depth:
					// a second copy makes its names ambiguous below,
					// as encoding/json does.
					cands = append(cands, c)
				}
			}
		}
		current, count = next, nextCount
	}

	// Keep the dominant field for each name.
	slices.SortStableFunc(cands, func(a, b candidate) int {
		if c := strings.Compare(a.name, b.name); c != 0 {
			return c
		}
		if c := cmp.Compare(len(a.index), len(b.index)); c != 0 {
			return c
		}
		if a.tagged != b.tagged {
			if a.tagged {
				return -1
			}
			return 1
		}
		return 0
	})
	var kept []candidate
	for i := 0; i < len(cands); {
		j := i + 1
		for j < len(cands) && cands[j].name == cands[i].name {
			j++
		}
		group := cands[i:j]
		i = j
		if len(group) > 1 && len(group[1].index) == len(group[0].index) && group[1].tagged == group[0].tagged {
			continue // ambiguous: encoding/json ignores every field of this name
		}
		kept = append(kept, group[0])
	}
	slices.SortFunc(kept, func(a, b candidate) int { return slices.Compare(a.index, b.index) })

	s.fields = make([]field, len(kept))
	s.index = make(map[string]int, len(kept))
	for i, c := range kept {
		fs, err := b.build(c.typ)
		if err != nil {
			return fmt.Errorf("field %s: %w", c.name, err)
		}
		s.fields[i] = field{name: c.name, required: !c.optional, schema: fs}
		s.index[c.name] = i
	}
	return nil
}

// validTagName reports whether encoding/json accepts name as a JSON name
// from a struct tag; it uses the Go field name otherwise.
func validTagName(name string) bool {
	if name == "" {
		return false
	}
	for _, c := range name {
		switch {
		case strings.ContainsRune("!#$%&()*+-./:;<=>?@[]^_{|}~ ", c):
		case !unicode.IsLetter(c) && !unicode.IsDigit(c):
			return false
		}
	}
	return true
}
