package exactjson

// Kind is the JSON type of a Value.
type Kind uint8

const (
	Null Kind = iota
	Bool
	Number
	String
	Array
	Object
)

// Value is one parsed JSON value. Strings are not decoded by Parse: Text
// keeps the literal, and each reader decodes it with Str in the mode it
// needs.
type Value struct {
	Kind Kind
	// Text is the value's JSON text as written: a string literal with
	// its quotes, a number, a literal, or a whole array or object.
	Text string
	// Flags describe a String's literal.
	Flags Flags
	// Members are an Object's members in document order, repeated keys
	// included.
	Members []Member
	// Elems are an Array's elements.
	Elems []Value
}

// Member is one member of an Object. Key is a String.
type Member struct {
	Key   Value
	Value Value
}

// Str returns a String's value decoded in mode m.
func (v Value) Str(m Mode) string { return Unquote(v.Text, m) }

// True reports whether v is the literal true.
func (v Value) True() bool { return v.Kind == Bool && v.Text == "true" }

// Parse parses s, which must hold exactly one JSON value with optional
// surrounding whitespace, as RFC 8259 and JSON.parse read it. A value
// nested deeper than maxDepth (the top-level value is at depth 0) is an
// error too: the parser recurses, so the limit bounds its stack. Invalid
// UTF-8 and unpaired surrogate escapes in strings are not errors; they are
// reported in each string's Flags. Any error is a *SyntaxError.
func Parse(s string, maxDepth int) (Value, error) {
	p := parser{s: s, maxDepth: maxDepth}
	p.i = SkipSpace(s, 0)
	v, err := p.value(0)
	if err != nil {
		return Value{}, err
	}
	if p.i = SkipSpace(s, p.i); p.i != len(s) {
		return Value{}, p.errorf("unexpected data after the top-level value")
	}
	return v, nil
}

type parser struct {
	s        string
	i        int
	maxDepth int
}

func (p *parser) errorf(msg string) error { return &SyntaxError{Offset: p.i, Msg: msg} }

// value parses the value at p.i, where whitespace has been skipped, and
// leaves p.i just past it.
func (p *parser) value(depth int) (Value, error) {
	if depth > p.maxDepth {
		return Value{}, p.errorf("nesting too deep")
	}
	if p.i >= len(p.s) {
		return Value{}, p.errorf("unexpected end of JSON input")
	}
	start := p.i
	var v Value
	switch c := p.s[p.i]; c {
	case '{':
		v.Kind = Object
		if err := p.object(&v, depth); err != nil {
			return Value{}, err
		}
	case '[':
		v.Kind = Array
		if err := p.array(&v, depth); err != nil {
			return Value{}, err
		}
	case '"':
		end, f, err := ScanString(p.s, p.i)
		if err != nil {
			return Value{}, err
		}
		v.Kind, v.Flags, p.i = String, f, end
	case 't', 'f', 'n':
		word, kind := "null", Null
		switch c {
		case 't':
			word, kind = "true", Bool
		case 'f':
			word, kind = "false", Bool
		}
		end, ok := ScanLiteral(p.s, p.i, word)
		if !ok {
			return Value{}, p.errorf("invalid literal")
		}
		v.Kind, p.i = kind, end
	default:
		end, ok := ScanNumber(p.s, p.i)
		if !ok {
			return Value{}, p.errorf("invalid character")
		}
		v.Kind, p.i = Number, end
	}
	v.Text = p.s[start:p.i]
	return v, nil
}

func (p *parser) object(v *Value, depth int) error {
	p.i = SkipSpace(p.s, p.i+1)
	if p.i < len(p.s) && p.s[p.i] == '}' {
		p.i++
		return nil
	}
	for {
		if p.i >= len(p.s) || p.s[p.i] != '"' {
			return p.errorf("expected a string object key")
		}
		key, err := p.value(depth + 1)
		if err != nil {
			return err
		}
		if p.i = SkipSpace(p.s, p.i); p.i >= len(p.s) || p.s[p.i] != ':' {
			return p.errorf("expected ':' after an object key")
		}
		p.i = SkipSpace(p.s, p.i+1)
		val, err := p.value(depth + 1)
		if err != nil {
			return err
		}
		v.Members = append(v.Members, Member{Key: key, Value: val})
		if p.i = SkipSpace(p.s, p.i); p.i < len(p.s) && p.s[p.i] == '}' {
			p.i++
			return nil
		}
		if p.i >= len(p.s) || p.s[p.i] != ',' {
			return p.errorf("expected ',' or '}' after an object member")
		}
		p.i = SkipSpace(p.s, p.i+1)
	}
}

func (p *parser) array(v *Value, depth int) error {
	p.i = SkipSpace(p.s, p.i+1)
	if p.i < len(p.s) && p.s[p.i] == ']' {
		p.i++
		return nil
	}
	for {
		e, err := p.value(depth + 1)
		if err != nil {
			return err
		}
		v.Elems = append(v.Elems, e)
		if p.i = SkipSpace(p.s, p.i); p.i < len(p.s) && p.s[p.i] == ']' {
			p.i++
			return nil
		}
		if p.i >= len(p.s) || p.s[p.i] != ',' {
			return p.errorf("expected ',' or ']' after an array element")
		}
		p.i = SkipSpace(p.s, p.i+1)
	}
}
