package httpx

import (
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"net/url"
	"reflect"
	"strings"
	"unicode/utf16"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/exactjson"
	"github.com/openclaw/occ/internal/ids"
)

// DefaultLimit is the body limit, in bytes, of operations without their own.
const DefaultLimit = 64 << 10

// maxPathValue caps a decoded path parameter, in UTF-16 code units as the
// reference counts it (pathLen). Identifiers are far shorter; the cap stops
// long values from reaching logs and error details.
const maxPathValue = 400

// ReadJSON reads the request body as JSON into dst, a non-nil pointer
// (normally to a struct), reading at most limit bytes (DefaultLimit if
// limit <= 0). It decodes into dst only if every check passes, so a
// refused body leaves dst untouched (unless a type's own UnmarshalJSON or
// UnmarshalText refuses its value part-way through the final decode). The
// checks, in the order they run, each returning an *errkind.Error for
// WriteError:
//
//   - no body (Content-Length 0), or only whitespace: 400, detail REQUIRED at "";
//   - Content-Type not application/json (parameters allowed, a charset
//     only if UTF-8): 415;
//   - Content-Length above limit: 413 without reading; a body of unknown
//     length (chunked) that grows past limit while reading: 413. Either
//     way the connection is marked for closing, so the server does not
//     read the rest;
//   - malformed JSON, or data after the value: 400 naming the byte offset;
//   - nesting past MaxDepth (TOO_DEEP), keys __proto__, constructor or
//     prototype, duplicate keys, strings with invalid UTF-8 or unpaired
//     surrogate escapes (INVALID_VALUE): 400 with details;
//   - then, against dst's type: unknown fields (UNKNOWN_FIELD), wrong
//     JSON types or numbers out of range (INVALID_TYPE), bad base64 for
//     []byte (INVALID_FORMAT), missing required fields (REQUIRED): 400
//     with details.
//
// Details are JSON pointers in document order, at most errkind.MaxDetails.
// A field is required unless its tag says omitempty or omitzero or its type
// is a pointer. null is accepted only for pointers, interfaces and
// json.RawMessage. Object keys must match json names exactly (encoding/json
// alone would also accept other capitalisations).
//
// A non-pointer dst, or a type that cannot be validated (channels, arrays,
// non-string map keys, the ",string" option), yields a plain error: a
// programming error that WriteError answers with 500.
func ReadJSON(w http.ResponseWriter, r *http.Request, dst any, limit int64) error {
	if limit <= 0 {
		limit = DefaultLimit
	}
	rv := reflect.ValueOf(dst)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return fmt.Errorf("httpx: ReadJSON needs a non-nil pointer, got %T", dst)
	}
	sc := schemaFor(rv.Type().Elem())
	if sc.err != nil {
		return sc.err
	}
	// A request that declares no body is missing its body, whatever its
	// Content-Type says; clients often send none with an empty request.
	if r.ContentLength == 0 || r.Body == nil || r.Body == http.NoBody {
		return errBodyRequired()
	}
	// The declared size is checked first, as the reference does: a body
	// too large for the route is 413 whatever its type.
	if r.ContentLength > limit {
		return errTooLarge(w, limit)
	}
	if !isJSON(r.Header) {
		return errkind.New(errkind.UnsupportedMedia, "Content-Type must be application/json.")
	}
	body, err := readBody(w, r, limit)
	if err != nil {
		var tooLarge *http.MaxBytesError
		if errors.As(err, &tooLarge) {
			return errTooLarge(w, limit)
		}
		return errkind.Wrap(errkind.Invalid, "The request body could not be read.", err)
	}
	return decodeStrict(body, dst, sc)
}

func errBodyRequired() error {
	return errkind.InvalidDetails("A JSON request body is required.",
		errkind.Detail{Path: "", Code: errkind.DetailRequired})
}

func errTooLarge(w http.ResponseWriter, limit int64) error {
	// Closing the connection after the reply keeps the server from reading
	// (and a client from streaming) the rest of a body nobody will use.
	w.Header().Set("Connection", "close")
	return errkind.Newf(errkind.TooLarge, "The request body exceeds the limit of %d bytes.", limit)
}

// isJSON reports whether the request has exactly one Content-Type, naming
// application/json (matched case-insensitively), with a UTF-8 charset if
// any: JSON on the wire is UTF-8 (RFC 8259) and other charsets would be
// misread, not converted.
func isJSON(h http.Header) bool {
	values := h.Values("Content-Type")
	if len(values) != 1 {
		return false
	}
	mt, params, err := mime.ParseMediaType(values[0])
	if err != nil || mt != "application/json" {
		return false
	}
	if cs, ok := params["charset"]; ok && !strings.EqualFold(cs, "utf-8") {
		return false
	}
	return true
}

// readBody reads at most limit bytes; a longer body yields an
// *http.MaxBytesError. The buffer is sized from Content-Length when known.
func readBody(w http.ResponseWriter, r *http.Request, limit int64) ([]byte, error) {
	body := http.MaxBytesReader(w, r.Body, limit)
	size := int64(512)
	if r.ContentLength > 0 {
		size = r.ContentLength + 1 // +1 so the final read sees EOF without growing
	}
	buf := make([]byte, 0, size)
	for {
		if len(buf) == cap(buf) {
			buf = append(buf, 0)[:len(buf)]
		}
		n, err := body.Read(buf[len(buf):cap(buf)])
		buf = buf[:len(buf)+n]
		if err == io.EOF {
			return buf, nil
		}
		if err != nil {
			return nil, err
		}
	}
}

// decodeStrict runs both validation passes over body and, if neither finds
// a problem, decodes it into dst with encoding/json.
func decodeStrict(body []byte, dst any, sc schemaEntry) error {
	// One copy as a string lets both passes slice keys out of the body
	// without allocating.
	s := string(body)
	c := checker{s: s}
	if err := c.check(); err != nil {
		if err == errEmptyBody {
			return errBodyRequired()
		}
		return errkind.Newf(errkind.Invalid, "The request body is not valid JSON: %v.", err)
	}
	if len(c.details) > 0 {
		return errkind.InvalidDetails("The request body is not acceptable JSON; see details.", c.details...)
	}
	v := validator{s: s}
	v.value(sc.s, exactjson.SkipSpace(s, 0))
	if len(v.details) > 0 {
		return errkind.InvalidDetails("The request body does not match the expected fields; see details.", v.details...)
	}
	if err := json.Unmarshal(body, dst); err != nil {
		if sc.custom {
			// A type's own UnmarshalJSON or UnmarshalText refused the
			// value: the client's input, but the error text is the type's
			// and stays in the logs.
			return errkind.Wrap(errkind.Invalid, "The request body contains a value that could not be decoded.", err)
		}
		// The validator accepted something encoding/json refuses: a bug
		// here, not a client error.
		return fmt.Errorf("httpx: validated body failed to decode into %T: %w", dst, err)
	}
	return nil
}

// NoBody refuses a request body on an operation that takes none: a client
// sending one is confused about the operation, and silently ignoring it
// would hide that. A declared Content-Length above zero is a body; with an
// unknown length (chunked) NoBody reads one byte to find out, so call it
// before anything else reads the body.
func NoBody(r *http.Request) error {
	if r.Body == nil || r.Body == http.NoBody || r.ContentLength == 0 {
		return nil
	}
	if r.ContentLength < 0 {
		var b [1]byte
		switch _, err := io.ReadFull(r.Body, b[:]); {
		case err == io.EOF:
			return nil
		case err != nil:
			return errkind.Wrap(errkind.Invalid, "The request body could not be read.", err)
		}
	}
	return errkind.New(errkind.Invalid, "This operation does not accept a request body.")
}

// Query parses the request's query for a route that takes one. Unlike
// r.URL.Query, which drops a pair it cannot decode (a ";" in it, a bad
// "%" escape) and answers as if it had not been sent, a query that does
// not parse whole is refused with 400, so a mistyped parameter is never
// silently ignored.
func Query(r *http.Request) (url.Values, error) {
	q, err := url.ParseQuery(r.URL.RawQuery)
	if err != nil {
		return nil, errkind.InvalidDetails("The query is malformed: "+queryProblem(err)+".",
			errkind.Detail{Path: "/query", Code: errkind.DetailInvalidFormat})
	}
	return q, nil
}

// queryProblem names what url.ParseQuery refused without repeating the
// query itself (which may be long, or hold what the caller typed by
// mistake).
func queryProblem(err error) string {
	var esc url.EscapeError
	if errors.As(err, &esc) {
		return "a bad % escape"
	}
	if strings.Contains(err.Error(), "semicolon") {
		return "a semicolon (use & between parameters)"
	}
	return "it does not parse"
}

// NoQuery refuses any query string (even a bare "?"): operations that take
// no parameters say so rather than ignore a misspelt one. The message names
// the first parameter; details list each distinct one, in order, as
// UNKNOWN_FIELD at "/query/<name>".
func NoQuery(r *http.Request) error {
	if r.URL.RawQuery == "" && !r.URL.ForceQuery {
		return nil
	}
	var details []errkind.Detail
	var first string
	seen := map[string]bool{}
	for part := range strings.SplitSeq(r.URL.RawQuery, "&") {
		name, _, _ := strings.Cut(part, "=")
		if n, err := url.QueryUnescape(name); err == nil {
			name = n
		}
		if name == "" || seen[name] || len(details) == errkind.MaxDetails {
			continue
		}
		seen[name] = true
		if first == "" {
			first = name
		}
		var b strings.Builder
		b.WriteString("/query/")
		writeSegment(&b, name)
		details = append(details, errkind.Detail{Path: b.String(), Code: errkind.DetailUnknownField})
	}
	if len(details) == 0 {
		return errkind.New(errkind.Invalid, "This operation does not accept a query string.")
	}
	return errkind.InvalidDetails(
		fmt.Sprintf("This operation does not accept query parameters; got %q.", clip(first, 64)), details...)
}

// pathLen is v's length in UTF-16 code units: 1 for a rune of the Basic
// Multilingual Plane, 2 for one beyond it (a surrogate pair), and 1 for each
// byte that is not valid UTF-8 (decoded as U+FFFD). It stops counting past
// maxPathValue, so a long value costs no more than a short one.
func pathLen(v string) int {
	n := 0
	for _, r := range v {
		if n += utf16.RuneLen(r); n > maxPathValue {
			break
		}
	}
	return n
}

// PathID returns the path wildcard name, which must be an identifier with
// the given prefix (see ids.Valid). Otherwise it returns a 400 with detail
// INVALID_FORMAT at "/path/<name>", or TOO_LONG if the decoded value is
// longer than 400 UTF-16 code units. The value is not echoed in the message.
func PathID(r *http.Request, name, prefix string) (string, error) {
	v := r.PathValue(name)
	var b strings.Builder
	b.WriteString("/path/")
	writeSegment(&b, name)
	path := b.String()
	if pathLen(v) > maxPathValue {
		return "", errkind.InvalidDetails(fmt.Sprintf("Path parameter %s is too long.", name),
			errkind.Detail{Path: path, Code: errkind.DetailTooLong})
	}
	if !ids.Valid(prefix, v) {
		return "", errkind.InvalidDetails(fmt.Sprintf("Path parameter %s is not a valid %s identifier.", name, prefix),
			errkind.Detail{Path: path, Code: errkind.DetailInvalidFormat})
	}
	return v, nil
}
