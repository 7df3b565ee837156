package httpx

import (
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/errkind"
)

type inner struct {
	C string `json:"c"`
}

type middle struct {
	B []inner `json:"b"`
}

// target exercises every kind the validator supports. Only name is
// required: opt is a pointer, the rest say omitempty.
type target struct {
	Name   string           `json:"name"`
	Count  int              `json:"count,omitempty"`
	Small  int8             `json:"small,omitempty"`
	U      uint16           `json:"u,omitempty"`
	Ratio  float32          `json:"ratio,omitempty"`
	On     bool             `json:"on,omitempty"`
	Opt    *string          `json:"opt"`
	A      *middle          `json:"a,omitempty"`
	Labels map[string]inner `json:"labels,omitempty"`
	List   []int            `json:"list,omitempty"`
	Raw    json.RawMessage  `json:"raw,omitempty"`
	Any    any              `json:"any,omitempty"`
	Blob   []byte           `json:"blob,omitempty"`
}

func readTarget(body string) error {
	var dst target
	return ReadJSON(httptest.NewRecorder(), jsonRequest(body), &dst, DefaultLimit)
}

func TestReadJSONAcceptsAndDecodes(t *testing.T) {
	body := `{
		"name": "n <&> \ud83d\ude00 \uD83D\uDE00 \\ud800",
		"count": -9007199254740993, "small": -128, "u": 65535, "ratio": 3.4e38, "on": true,
		"opt": "o", "a": {"b": [{"c": "1"}, {"c": "2"}]},
		"labels": {"a/b~c": {"c": ""}}, "list": [0, 1],
		"raw": {"k": [1, true, null, "s"]}, "any": {"x": [1.5, "y", null]}, "blob": "aGk="
	}`
	opt := "o"
	want := target{
		Name:  "n <&> 😀 😀 \\ud800",
		Count: -9007199254740993, Small: -128, U: 65535, Ratio: 3.4e38, On: true,
		Opt:    &opt,
		A:      &middle{B: []inner{{C: "1"}, {C: "2"}}},
		Labels: map[string]inner{"a/b~c": {C: ""}},
		List:   []int{0, 1},
		Raw:    json.RawMessage(`{"k": [1, true, null, "s"]}`),
		Any:    map[string]any{"x": []any{1.5, "y", nil}},
		Blob:   []byte("hi"),
	}
	var got target
	if err := ReadJSON(httptest.NewRecorder(), jsonRequest(body), &got, DefaultLimit); err != nil {
		t.Fatalf("ReadJSON(%s) = %v", body, err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("ReadJSON decoded (-want +got):\n%s", diff)
	}
}

func TestReadJSONLeavesDstAloneOnError(t *testing.T) {
	dst := target{Name: "before", Count: 7}
	err := ReadJSON(httptest.NewRecorder(), jsonRequest(`{"name":"after","count":"x"}`), &dst, DefaultLimit)
	if err == nil {
		t.Fatal("ReadJSON accepted a wrong type")
	}
	if diff := cmp.Diff(target{Name: "before", Count: 7}, dst); diff != "" {
		t.Errorf("dst after a refused body (-want +got):\n%s", diff)
	}
}

func TestReadJSON(t *testing.T) {
	const (
		req   = errkind.DetailRequired
		unk   = errkind.DetailUnknownField
		typ   = errkind.DetailInvalidType
		val   = errkind.DetailInvalidValue
		frmt  = errkind.DetailInvalidFormat
		other = ""
	)
	ok := outcome{Status: http.StatusOK}
	tests := []struct {
		name string
		body string
		want outcome
	}{
		{"minimal", `{"name":"x"}`, ok},
		{"surrounding whitespace", " \t\r\n{\"name\":\"x\"}\n ", ok},
		{"optional pointer null", `{"name":"x","opt":null,"a":null}`, ok},

		// Body shape.
		{"only whitespace", " \n\t ", invalid(detail("", req))},
		{"truncated", `{"name":`, invalid()},
		{"trailing comma", `{"name":"x",}`, invalid()},
		{"single quotes", `{'name':'x'}`, invalid()},
		{"leading zero", `{"name":"x","count":01}`, invalid()},
		{"bare minus", `{"name":"x","count":-}`, invalid()},
		{"bad literal", `{"name":"x","on":tru}`, invalid()},
		{"byte order mark", "\ufeff{\"name\":\"x\"}", invalid()},
		{"control character in string", "{\"name\":\"a\tb\"}", invalid()},
		{"bad escape", `{"name":"\x"}`, invalid()},
		{"short unicode escape", `{"name":"\u12"}`, invalid()},
		{"trailing garbage", `{"name":"x"} x`, invalid()},
		{"second value", `{"name":"x"}{"name":"y"}`, invalid()},
		{"trailing null", `{"name":"x"} null`, invalid()},

		// Duplicates and forbidden keys, compared after unescaping.
		{"duplicate key", `{"name":"x","name":"y"}`, invalid(detail("/name", val))},
		{"duplicate key by escape", `{"name":"x","n\u0061me":"y"}`, invalid(detail("/name", val))},
		{"duplicate nested key", `{"name":"x","labels":{"k":{"c":"1"},"k":{"c":"2"}}}`, invalid(detail("/labels/k", val))},
		{"duplicate of an early key in a large object", `{"name":"x","any":{` + manyKeys(20) + `,"k3":1}}`, invalid(detail("/any/k3", val))},
		{"duplicate of a late key in a large object", `{"name":"x","any":{` + manyKeys(20) + `,"k19":1}}`, invalid(detail("/any/k19", val))},
		{"large object without duplicates", `{"name":"x","any":{` + manyKeys(100) + `}}`, ok},
		{"same key in sibling objects", `{"name":"x","a":{"b":[{"c":"1"},{"c":"2"}]}}`, ok},
		{"__proto__ top level", `{"name":"x","__proto__":{}}`, invalid(detail("/__proto__", val))},
		{"constructor top level", `{"constructor":1,"name":"x"}`, invalid(detail("/constructor", val))},
		{"prototype top level", `{"name":"x","prototype":null}`, invalid(detail("/prototype", val))},
		{"__proto__ nested in a map", `{"name":"x","labels":{"__proto__":{"c":""}}}`, invalid(detail("/labels/__proto__", val))},
		{"constructor nested in raw", `{"name":"x","raw":{"a":[{"constructor":1}]}}`, invalid(detail("/raw/a/0/constructor", val))},
		{"prototype nested in any", `{"name":"x","any":[[{"prototype":1}]]}`, invalid(detail("/any/0/0/prototype", val))},
		{"__proto__ by escape", `{"name":"x","__pr\u006fto__":1}`, invalid(detail("/__proto__", val))},
		{"forbidden key as a value is fine", `{"name":"__proto__","list":[]}`, ok},

		// Strings that encoding/json would silently alter.
		{"lone high surrogate", `{"name":"\ud800"}`, invalid(detail("/name", val))},
		{"lone low surrogate", `{"name":"\udc00"}`, invalid(detail("/name", val))},
		{"reversed pair", `{"name":"\ude00\ud83d"}`, invalid(detail("/name", val))},
		{"high surrogate then non-surrogate escape", `{"name":"\ud83d\u0041"}`, invalid(detail("/name", val))},
		{"high surrogate then the escape after the low range", `{"name":"\ud83d\ue000"}`, invalid(detail("/name", val))},
		{"high surrogate then the last high", `{"name":"\ud83d\udbff"}`, invalid(detail("/name", val))},
		{"highest valid pair", `{"name":"\udbff\udfff"}`, ok},
		{"high surrogate then plain text", `{"name":"\ud83dx"}`, invalid(detail("/name", val))},
		{"high surrogate at end", `{"name":"a\ud83d"}`, invalid(detail("/name", val))},
		{"two high surrogates then low", `{"name":"\ud83d\ud83d\ude00"}`, invalid(detail("/name", val))},
		{"lone surrogate in raw", `{"name":"x","raw":["\udfff"]}`, invalid(detail("/raw/0", val))},
		{"lone surrogate in a key", `{"name":"x","a\udc00":1}`, invalid(detail("/a\ufffd", val))},
		{"valid pair", `{"name":"\ud83d\ude00"}`, ok},
		{"valid pair upper case", `{"name":"\uD83D\uDE00"}`, ok},
		{"escaped backslash before u", `{"name":"\\ud800"}`, ok},
		{"invalid UTF-8", "{\"name\":\"\xff\"}", invalid(detail("/name", val))},
		{"UTF-8 encoded surrogate", "{\"name\":\"\xed\xa0\x80\"}", invalid(detail("/name", val))},
		{"truncated UTF-8", "{\"name\":\"\xe2\x82\"}", invalid(detail("/name", val))},
		{"escaped NUL is a valid string", `{"name":"\u0000"}`, ok},

		// Unknown fields.
		{"unknown top level", `{"name":"x","foo":1}`, invalid(detail("/foo", unk))},
		{"unknown nested", `{"name":"x","a":{"b":[{"c":"1","d":2}]}}`, invalid(detail("/a/b/0/d", unk))},
		{"unknown in second element", `{"name":"x","a":{"b":[{"c":"1"},{"c":"2","e":[]}]}}`, invalid(detail("/a/b/1/e", unk))},
		{"other capitalisation", `{"Name":"x"}`, invalid(detail("/Name", unk), detail("/name", req))},
		{"unknown key escaped in pointer", `{"name":"x","x/y~z":1}`, invalid(detail("/x~1y~0z", unk))},
		{"empty key", `{"name":"x","":1}`, invalid(detail("/", unk))},

		// Missing fields.
		{"missing top level", `{}`, invalid(detail("/name", req))},
		{"missing nested", `{"name":"x","a":{"b":[{}]}}`, invalid(detail("/a/b/0/c", req))},
		{"missing nested slice", `{"name":"x","a":{}}`, invalid(detail("/a/b", req))},
		{"missing in map value", `{"name":"x","labels":{"k":{}}}`, invalid(detail("/labels/k/c", req))},

		// Wrong types.
		{"top level array", `[]`, invalid(detail("", typ))},
		{"top level null", `null`, invalid(detail("", typ))},
		{"top level string", `"x"`, invalid(detail("", typ))},
		{"number for string", `{"name":1}`, invalid(detail("/name", typ))},
		{"null for string", `{"name":null}`, invalid(detail("/name", typ))},
		{"string for int", `{"name":"x","count":"1"}`, invalid(detail("/count", typ))},
		{"fraction for int", `{"name":"x","count":1.5}`, invalid(detail("/count", typ))},
		{"integral fraction for int", `{"name":"x","count":1.0}`, invalid(detail("/count", typ))},
		{"exponent for int", `{"name":"x","count":1e2}`, invalid(detail("/count", typ))},
		{"int at max", `{"name":"x","count":9223372036854775807}`, ok},
		{"int past max", `{"name":"x","count":9223372036854775808}`, invalid(detail("/count", typ))},
		{"int8 at min", `{"name":"x","small":-128}`, ok},
		{"int8 past min", `{"name":"x","small":-129}`, invalid(detail("/small", typ))},
		{"int8 past max", `{"name":"x","small":128}`, invalid(detail("/small", typ))},
		{"uint16 at max", `{"name":"x","u":65535}`, ok},
		{"uint16 past max", `{"name":"x","u":65536}`, invalid(detail("/u", typ))},
		{"negative uint", `{"name":"x","u":-1}`, invalid(detail("/u", typ))},
		{"negative zero uint", `{"name":"x","u":-0}`, invalid(detail("/u", typ))},
		{"float32 in range", `{"name":"x","ratio":-3.4e38}`, ok},
		{"float32 out of range", `{"name":"x","ratio":1e39}`, invalid(detail("/ratio", typ))},
		{"float underflow is zero", `{"name":"x","ratio":1e-400}`, ok},
		{"string for bool", `{"name":"x","on":"true"}`, invalid(detail("/on", typ))},
		{"number for bool", `{"name":"x","on":1}`, invalid(detail("/on", typ))},
		{"array for struct", `{"name":"x","a":[]}`, invalid(detail("/a", typ))},
		{"null for map", `{"name":"x","labels":null}`, invalid(detail("/labels", typ))},
		{"null for slice", `{"name":"x","list":null}`, invalid(detail("/list", typ))},
		{"wrong map value", `{"name":"x","labels":{"a/b~c":1}}`, invalid(detail("/labels/a~1b~0c", typ))},
		{"wrong slice element", `{"name":"x","list":[1,"2",3.5]}`, invalid(detail("/list/1", typ), detail("/list/2", typ))},
		{"object for slice", `{"name":"x","list":{}}`, invalid(detail("/list", typ))},
		{"number out of float64 range in any", `{"name":"x","any":{"v":[1e400]}}`, invalid(detail("/any/v/0", typ))},
		{"bytes not base64", `{"name":"x","blob":"!!"}`, invalid(detail("/blob", frmt))},
		{"bytes unpadded", `{"name":"x","blob":"aGk"}`, invalid(detail("/blob", frmt))},
		{"bytes as array", `{"name":"x","blob":[104,105]}`, invalid(detail("/blob", typ))},
		{"bytes with newline escapes", `{"name":"x","blob":"aG\nk="}`, ok},
		{"raw accepts anything", `{"name":"x","raw":[1,"a",{"b":null},true]}`, ok},
		{"raw null", `{"name":"x","raw":null}`, ok},

		// Problems come in document order; the type check does not look
		// inside values that are unknown or of the wrong type.
		{
			"several problems in order",
			`{"foo":{"__x":1},"name":2,"a":{"b":[{"x":1},"s"]},"count":"c"}`,
			invalid(detail("/foo", unk), detail("/name", typ), detail("/a/b/0/x", unk),
				detail("/a/b/0/c", req), detail("/a/b/1", typ), detail("/count", typ)),
		},
		{
			"structural problems first, type problems not examined",
			`{"foo":1,"name":"\ud800","labels":{"k":{},"k":{}}}`,
			invalid(detail("/name", val), detail("/labels/k", val)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := outcomeOf(readTarget(tt.body))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReadJSON(%q) (-want +got):\n%s", tt.body, diff)
			}
		})
	}
}

// manyKeys returns n members "k0":0 ... for an object body.
func manyKeys(n int) string {
	parts := make([]string, n)
	for i := range parts {
		parts[i] = fmt.Sprintf(`"k%d":0`, i)
	}
	return strings.Join(parts, ",")
}

func TestReadJSONEmptyBody(t *testing.T) {
	want := invalid(detail("", errkind.DetailRequired))
	tests := []struct {
		name string
		req  *http.Request
	}{
		{"no body", httptest.NewRequest(http.MethodPost, "/x", nil)},
		{"empty JSON body", jsonRequest("")},
		{"empty chunked body", chunkedRequest("")},
		{"empty body without content type", func() *http.Request {
			r := jsonRequest("")
			r.Header.Del("Content-Type")
			return r
		}()},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dst target
			got := outcomeOf(ReadJSON(httptest.NewRecorder(), tt.req, &dst, DefaultLimit))
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("ReadJSON (-want +got):\n%s", diff)
			}
		})
	}
}

func TestReadJSONContentType(t *testing.T) {
	unsupported := outcome{Status: http.StatusUnsupportedMediaType, Code: errkind.CodeUnsupportedMedia}
	ok := outcome{Status: http.StatusOK}
	tests := []struct {
		name   string
		values []string
		want   outcome
	}{
		{"plain", []string{"application/json"}, ok},
		{"charset", []string{"application/json; charset=utf-8"}, ok},
		{"upper case", []string{"Application/JSON; Charset=UTF-8"}, ok},
		{"no space, quoted charset", []string{`application/json;charset="utf-8"`}, ok},
		{"other parameter", []string{"application/json; profile=x"}, ok},
		{"missing", nil, unsupported},
		{"empty", []string{""}, unsupported},
		{"text/plain", []string{"text/plain"}, unsupported},
		{"form", []string{"application/x-www-form-urlencoded"}, unsupported},
		{"json suffix type", []string{"application/merge-patch+json"}, unsupported},
		{"prefix match", []string{"application/jsonx"}, unsupported},
		{"list", []string{"application/json, text/plain"}, unsupported},
		{"other charset", []string{"application/json; charset=latin1"}, unsupported},
		{"malformed parameter", []string{"application/json; charset"}, unsupported},
		{"two headers", []string{"application/json", "application/json"}, unsupported},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := jsonRequest(`{"name":"x"}`)
			r.Header.Del("Content-Type")
			for _, v := range tt.values {
				r.Header.Add("Content-Type", v)
			}
			var dst target
			got := outcomeOf(ReadJSON(httptest.NewRecorder(), r, &dst, DefaultLimit))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReadJSON with Content-Type %q (-want +got):\n%s", tt.values, diff)
			}
		})
	}
}

// TestReadJSONSizeBeforeType: a declared size past the limit is 413
// whatever the Content-Type (the reference checks content-length first);
// within the limit a wrong type is still 415.
func TestReadJSONSizeBeforeType(t *testing.T) {
	tests := []struct {
		name  string
		size  int
		ctype string
		want  outcome
	}{
		{"text/plain past the limit", 1025, "text/plain", outcome{Status: http.StatusRequestEntityTooLarge, Code: errkind.CodePayloadTooLarge}},
		{"no type past the limit", 1025, "", outcome{Status: http.StatusRequestEntityTooLarge, Code: errkind.CodePayloadTooLarge}},
		{"text/plain at the limit", 1024, "text/plain", outcome{Status: http.StatusUnsupportedMediaType, Code: errkind.CodeUnsupportedMedia}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := jsonRequest(paddedBody(tt.size))
			r.Header.Del("Content-Type")
			if tt.ctype != "" {
				r.Header.Set("Content-Type", tt.ctype)
			}
			var dst target
			got := outcomeOf(ReadJSON(httptest.NewRecorder(), r, &dst, 1024))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReadJSON (-want +got):\n%s", diff)
			}
		})
	}
}

// paddedBody returns a valid body for target of exactly n bytes.
func paddedBody(n int) string {
	const frame = `{"name":""}`
	return `{"name":"` + strings.Repeat("a", n-len(frame)) + `"}`
}

// unreadable fails the test if ReadJSON reads a body it should refuse from
// Content-Length alone.
type unreadable struct{ t *testing.T }

func (u unreadable) Read([]byte) (int, error) {
	u.t.Error("body was read although Content-Length exceeds the limit")
	return 0, io.EOF
}

func TestReadJSONLimit(t *testing.T) {
	tooLarge := outcome{Status: http.StatusRequestEntityTooLarge, Code: errkind.CodePayloadTooLarge}
	ok := outcome{Status: http.StatusOK}
	for _, limit := range []int64{100, DefaultLimit, 448 << 10} {
		n := int(limit)
		tests := []struct {
			name string
			req  *http.Request
			want outcome
		}{
			{"length at limit", jsonRequest(paddedBody(n)), ok},
			{"length past limit", jsonRequest(paddedBody(n + 1)), tooLarge},
			{"chunked at limit", chunkedRequest(paddedBody(n)), ok},
			{"chunked past limit", chunkedRequest(paddedBody(n + 1)), tooLarge},
			{"chunked far past limit", chunkedRequest(paddedBody(3*n + 1000)), tooLarge},
			{"declared length past limit is not read", func() *http.Request {
				r := httptest.NewRequest(http.MethodPost, "/x", unreadable{t})
				r.Header.Set("Content-Type", "application/json")
				r.ContentLength = limit + 1
				return r
			}(), tooLarge},
		}
		for _, tt := range tests {
			t.Run(fmt.Sprintf("%d/%s", limit, tt.name), func(t *testing.T) {
				w := httptest.NewRecorder()
				var dst target
				got := outcomeOf(ReadJSON(w, tt.req, &dst, limit))
				if diff := cmp.Diff(tt.want, got); diff != "" {
					t.Errorf("ReadJSON (-want +got):\n%s", diff)
				}
				wantClose := ""
				if tt.want.Status == http.StatusRequestEntityTooLarge {
					wantClose = "close"
				}
				if got := w.Header().Get("Connection"); got != wantClose {
					t.Errorf("ReadJSON: Connection header = %q, want %q", got, wantClose)
				}
			})
		}
	}
}

func TestReadJSONLimitDefault(t *testing.T) {
	var dst target
	err := ReadJSON(httptest.NewRecorder(), jsonRequest(paddedBody(DefaultLimit+1)), &dst, 0)
	if got := outcomeOf(err).Status; got != http.StatusRequestEntityTooLarge {
		t.Errorf("ReadJSON with limit 0 and a body of DefaultLimit+1: status %d, want 413", got)
	}
}

// TestReadJSONLimitOverHTTP sends real chunked requests through a server,
// where the body reader, MaxBytesReader and connection handling are the
// production ones.
func TestReadJSONLimitOverHTTP(t *testing.T) {
	const limit = 1000
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		var dst target
		if err := ReadJSON(w, r, &dst, limit); err != nil {
			WriteError(w, r, err)
			return
		}
		Write(w, r, http.StatusOK, len(dst.Name))
	}))
	defer srv.Close()

	tests := []struct {
		name      string
		body      string
		chunked   bool
		want      int
		wantClose bool
	}{
		{"length at limit", paddedBody(limit), false, http.StatusOK, false},
		{"length past limit", paddedBody(limit + 1), false, http.StatusRequestEntityTooLarge, true},
		{"chunked at limit", paddedBody(limit), true, http.StatusOK, false},
		{"chunked past limit", paddedBody(limit + 1), true, http.StatusRequestEntityTooLarge, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var body io.Reader = strings.NewReader(tt.body)
			if tt.chunked {
				body = onlyReader{body}
			}
			req, err := http.NewRequestWithContext(t.Context(), http.MethodPost, srv.URL, body)
			if err != nil {
				t.Fatal(err)
			}
			req.Header.Set("Content-Type", "application/json")
			res, err := srv.Client().Do(req)
			if err != nil {
				t.Fatalf("POST: %v", err)
			}
			defer res.Body.Close()
			_, _ = io.Copy(io.Discard, res.Body)
			if res.StatusCode != tt.want || res.Close != tt.wantClose {
				t.Errorf("POST %s: status %d close %v, want %d close %v", tt.name, res.StatusCode, res.Close, tt.want, tt.wantClose)
			}
		})
	}
}

func TestReadJSONDepth(t *testing.T) {
	arrays := func(n int) string { return strings.Repeat("[", n) + strings.Repeat("]", n) }
	zeros := func(n int) string { return strings.Repeat("/0", n) }
	// objects nests n-1 objects under "raw" in a target, n levels in all.
	objects := func(n int) string {
		return `{"name":"x","raw":` + strings.Repeat(`{"a":`, n-2) + `{}` + strings.Repeat(`}`, n-2) + `}`
	}
	tooDeep := errkind.DetailTooDeep
	ok := outcome{Status: http.StatusOK}
	tests := []struct {
		name string
		body string
		dst  any
		want outcome
	}{
		{"arrays at limit", arrays(MaxDepth), new(any), ok},
		{"arrays past limit", arrays(MaxDepth + 1), new(any), invalid(detail(zeros(MaxDepth), tooDeep))},
		{"objects at limit", objects(MaxDepth), new(target), ok},
		{"objects past limit", objects(MaxDepth + 1), new(target), invalid(detail("/raw"+strings.Repeat("/a", MaxDepth-1), tooDeep))},
		{"far past limit reports once", arrays(100000), new(any), invalid(detail(zeros(MaxDepth), tooDeep))},
		{"far past limit and unclosed is a syntax error", strings.Repeat("[", 100000), new(any), invalid()},
		{
			"problems after a too-deep value are still found",
			"[" + arrays(MaxDepth) + `,{"__proto__":1},` + arrays(MaxDepth) + "]",
			new(any),
			invalid(detail(zeros(MaxDepth), tooDeep), detail("/1/__proto__", errkind.DetailInvalidValue), detail("/2"+zeros(MaxDepth-1), tooDeep)),
		},
		{
			"problems inside a too-deep value are not reported",
			strings.Repeat("[", MaxDepth) + `{"__proto__":"\ud800"}` + strings.Repeat("]", MaxDepth),
			new(any),
			invalid(detail(zeros(MaxDepth), tooDeep)),
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := outcomeOf(ReadJSON(httptest.NewRecorder(), jsonRequest(tt.body), tt.dst, 1<<20))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReadJSON of %d bytes (-want +got):\n%s", len(tt.body), diff)
			}
		})
	}
}

func TestReadJSONDetailCap(t *testing.T) {
	unknown := func(n int) string {
		parts := []string{`"name":"x"`}
		for i := range n {
			parts = append(parts, fmt.Sprintf(`"u%d":0`, i))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	dupes := func(n int) string {
		parts := []string{`"name":"x"`}
		for range n {
			parts = append(parts, `"name":"x"`)
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	unknownDetails := func(n int) []errkind.Detail {
		var ds []errkind.Detail
		for i := range n {
			ds = append(ds, detail(fmt.Sprintf("/u%d", i), errkind.DetailUnknownField))
		}
		return ds
	}
	dupeDetails := func(n int) []errkind.Detail {
		var ds []errkind.Detail
		for range n {
			ds = append(ds, detail("/name", errkind.DetailInvalidValue))
		}
		return ds
	}
	tests := []struct {
		name string
		body string
		want outcome
	}{
		{"32 unknown fields", unknown(32), invalid(unknownDetails(32)...)},
		{"33 unknown fields", unknown(33), invalid(unknownDetails(32)...)},
		{"100 unknown fields", unknown(100), invalid(unknownDetails(32)...)},
		{"32 duplicate keys", dupes(32), invalid(dupeDetails(32)...)},
		{"33 duplicate keys", dupes(33), invalid(dupeDetails(32)...)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := outcomeOf(readTarget(tt.body))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReadJSON (-want +got):\n%s", diff)
			}
		})
	}
}

// Types for the struct-field rules, which follow encoding/json.
type (
	Base struct {
		ID   string `json:"id"`
		Note string `json:"note,omitempty"`
	}
	// The field-resolution cases use untagged names, because go vet
	// rightly flags a json tag repeated through embedding.
	KindA      struct{ Kind string }
	KindB      struct{ Kind string }
	KindTagged struct {
		X string `json:"Kind"`
	}
	Extra struct {
		More string `json:"more"`
	}
	embedding struct {
		Base          // id (required), note promoted
		*Extra        // more promoted, optional through the pointer
		Name   string `json:"name"`
	}
	shadowing struct {
		KindA
		Kind int // shallower: wins over KindA.Kind
	}
	ambiguous struct {
		KindA
		KindB // Kind at the same depth in both, both untagged: neither is used
	}
	taggedWins struct {
		KindA
		KindTagged // Kind at the same depth, but tagged here: this one is used
	}
	tagRules struct {
		Skipped  string `json:"-"`
		Dash     string `json:"-,"` //lint:ignore SA5008 deliberate: the "-," tag names a field "-"
		NoTag    string
		BadName  string `json:"a\"b"` //lint:ignore SA5008 deliberate: a malformed name must be handled like encoding/json does
		Zero     int    `json:"zero,omitzero"`
		hidden   string //lint:ignore U1000 deliberate: an unexported field is never a JSON field
		Renamed  Extra  `json:"renamed,omitempty"`
		Embedded Base   `json:"embedded,omitempty"` // a tagged embed is a plain field
	}
)

func TestReadJSONStructFields(t *testing.T) {
	req, unk, typ := errkind.DetailRequired, errkind.DetailUnknownField, errkind.DetailInvalidType
	ok := outcome{Status: http.StatusOK}
	tests := []struct {
		name string
		dst  any
		body string
		want outcome
	}{
		{"promoted fields", new(embedding), `{"id":"1","note":"n","more":"m","name":"x"}`, ok},
		{"promoted required", new(embedding), `{"name":"x"}`, invalid(detail("/id", req))},
		{"shadowed by the outer field", new(shadowing), `{"Kind":"s"}`, invalid(detail("/Kind", typ))},
		{"shadowing field accepted", new(shadowing), `{"Kind":1}`, ok},
		{"ambiguous name is unknown", new(ambiguous), `{"Kind":"1"}`, invalid(detail("/Kind", unk))},
		{"tagged field wins at the same depth", new(taggedWins), `{"Kind":"1"}`, ok},
		{"tagged field is required", new(taggedWins), `{}`, invalid(detail("/Kind", req))},
		{"dash skips, dash-comma names", new(tagRules), `{"-":"d","NoTag":"n","BadName":"b","zero":0}`, ok},
		{"skipped field is unknown", new(tagRules), `{"-":"d","NoTag":"n","BadName":"b","Skipped":"s"}`, invalid(detail("/Skipped", unk))},
		{"unexported field is unknown", new(tagRules), `{"-":"d","NoTag":"n","BadName":"b","hidden":"h"}`, invalid(detail("/hidden", unk))},
		{"required without omitempty", new(tagRules), `{}`, invalid(detail("/-", req), detail("/NoTag", req), detail("/BadName", req))},
		{"tagged embed is nested", new(tagRules), `{"-":"d","NoTag":"n","BadName":"b","embedded":{}}`, invalid(detail("/embedded/id", req))},
		{"top-level map", new(map[string]int), `{"a":1,"b":"2"}`, invalid(detail("/b", typ))},
		{"top-level slice", new([]string), `["a",1]`, invalid(detail("/1", typ))},
		{"top-level any", new(any), `{"a":[1,"x",null,{"b":true}]}`, ok},
		{"top-level raw", new(json.RawMessage), `{"a":1}`, ok},
		{"json.Number takes any number", new([]json.Number), `[1, -0.5e400, 123456789012345678901234567890]`, ok},
		{"json.Number takes no string", new([]json.Number), `["1"]`, invalid(detail("/0", typ))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got := outcomeOf(ReadJSON(httptest.NewRecorder(), jsonRequest(tt.body), tt.dst, DefaultLimit))
			if diff := cmp.Diff(tt.want, got); diff != "" {
				t.Errorf("ReadJSON(%s) into %T (-want +got):\n%s", tt.body, tt.dst, diff)
			}
		})
	}
}

// upper has its own text unmarshalling, which can refuse a validated value.
type upper string

func (u *upper) UnmarshalText(b []byte) error {
	if strings.ToUpper(string(b)) != string(b) {
		return fmt.Errorf("secret detail: %q is not upper case", b)
	}
	*u = upper(b)
	return nil
}

func TestReadJSONCustomUnmarshaler(t *testing.T) {
	type withText struct {
		U upper `json:"u"`
	}
	tests := []struct {
		name string
		body string
		want outcome
	}{
		{"accepted by the type", `{"u":"ABC"}`, outcome{Status: http.StatusOK}},
		{"refused by the type", `{"u":"abc"}`, invalid()},
		{"not a string", `{"u":1}`, invalid(detail("/u", errkind.DetailInvalidType))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var dst withText
			err := ReadJSON(httptest.NewRecorder(), jsonRequest(tt.body), &dst, DefaultLimit)
			if diff := cmp.Diff(tt.want, outcomeOf(err)); diff != "" {
				t.Errorf("ReadJSON(%s) (-want +got):\n%s", tt.body, diff)
			}
			if e := errkind.As(err); e != nil && strings.Contains(e.Message, "secret") {
				t.Errorf("ReadJSON(%s): message %q carries the type's error text", tt.body, e.Message)
			}
		})
	}
}

func TestReadJSONProgrammingErrors(t *testing.T) {
	type withChan struct {
		C chan int `json:"c"`
	}
	type withString struct {
		N int `json:"n,string"`
	}
	type withIntKeys struct {
		M map[int]string `json:"m"`
	}
	type withArray struct {
		A [2]int `json:"a"`
	}
	tests := []struct {
		name string
		dst  any
	}{
		{"not a pointer", target{}},
		{"nil pointer", (*target)(nil)},
		{"nil", nil},
		{"channel field", new(withChan)},
		{"string option", new(withString)},
		{"int map keys", new(withIntKeys)},
		{"array", new(withArray)},
		{"interface with methods", new(fmt.Stringer)},
		{"pointer to pointer", new(**string)},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := ReadJSON(httptest.NewRecorder(), jsonRequest(`{}`), tt.dst, DefaultLimit)
			if err == nil || errkind.As(err) != nil {
				t.Errorf("ReadJSON into %T = %v, want an unclassified (500) error", tt.dst, err)
			}
		})
	}
}

func TestNoBody(t *testing.T) {
	bad := invalid()
	ok := outcome{Status: http.StatusOK}
	tests := []struct {
		name string
		req  *http.Request
		want outcome
	}{
		{"no body", httptest.NewRequest(http.MethodGet, "/x", nil), ok},
		{"empty body with length", httptest.NewRequest(http.MethodGet, "/x", strings.NewReader("")), ok},
		{"empty chunked body", httptest.NewRequest(http.MethodGet, "/x", onlyReader{strings.NewReader("")}), ok},
		{"body with length", httptest.NewRequest(http.MethodGet, "/x", strings.NewReader("{}")), bad},
		{"one byte with length", httptest.NewRequest(http.MethodGet, "/x", strings.NewReader(" ")), bad},
		{"chunked body", httptest.NewRequest(http.MethodGet, "/x", onlyReader{strings.NewReader("x")}), bad},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, outcomeOf(NoBody(tt.req))); diff != "" {
				t.Errorf("NoBody (-want +got):\n%s", diff)
			}
		})
	}
}

func TestNoQuery(t *testing.T) {
	unk := errkind.DetailUnknownField
	tests := []struct {
		target  string
		want    outcome
		message string
	}{
		{"/x", outcome{Status: http.StatusOK}, ""},
		{"/x?", invalid(), "This operation does not accept a query string."},
		{"/x?a=1", invalid(detail("/query/a", unk)), `This operation does not accept query parameters; got "a".`},
		{"/x?limit=10&cursor=&limit=2&flag", invalid(detail("/query/limit", unk), detail("/query/cursor", unk), detail("/query/flag", unk)), `This operation does not accept query parameters; got "limit".`},
		{"/x?a%2Fb%7E=1", invalid(detail("/query/a~1b~0", unk)), `This operation does not accept query parameters; got "a/b~".`},
		{"/x?&&", invalid(), "This operation does not accept a query string."},
	}
	for _, tt := range tests {
		t.Run(tt.target, func(t *testing.T) {
			err := NoQuery(httptest.NewRequest(http.MethodGet, tt.target, nil))
			if diff := cmp.Diff(tt.want, outcomeOf(err)); diff != "" {
				t.Errorf("NoQuery(%s) (-want +got):\n%s", tt.target, diff)
			}
			if e := errkind.As(err); e != nil && e.Message != tt.message {
				t.Errorf("NoQuery(%s) message = %q, want %q", tt.target, e.Message, tt.message)
			}
		})
	}
}

func TestPathID(t *testing.T) {
	const id = "ns_0b6f0a3c-2f1e-4c55-9a7d-1d2c3b4a5f60"
	format := invalid(detail("/path/ns", errkind.DetailInvalidFormat))
	tests := []struct {
		name  string
		value string
		want  outcome
	}{
		{"valid", id, outcome{Status: http.StatusOK}},
		{"empty", "", format},
		{"garbage", "hello", format},
		{"upper case", strings.ToUpper(id[:3]) + id[3:], format},
		{"upper case uuid", id[:3] + strings.ToUpper(id[3:]), format},
		{"wrong prefix", "agt_" + id[3:], format},
		{"no prefix", id[3:], format},
		{"not version 4", id[:17] + "1" + id[18:], format},
		{"trailing newline", id + "\n", format},
		{"400 bytes", strings.Repeat("a", 400), format},
		{"401 bytes", strings.Repeat("a", 401), invalid(detail("/path/ns", errkind.DetailTooLong))},
		// The limit counts UTF-16 code units, as the reference does, not
		// bytes: é is 2 bytes and 1 unit, 😀 4 bytes and 2 units.
		{"400 units in 800 bytes", strings.Repeat("é", 400), format},
		{"401 units in 802 bytes", strings.Repeat("é", 401), invalid(detail("/path/ns", errkind.DetailTooLong))},
		{"400 units of surrogate pairs", strings.Repeat("😀", 200), format},
		{"402 units of surrogate pairs", strings.Repeat("😀", 201), invalid(detail("/path/ns", errkind.DetailTooLong))},
		{"399 units and a pair", strings.Repeat("a", 399) + "😀", invalid(detail("/path/ns", errkind.DetailTooLong))},
		{"400 invalid bytes count 1 each", strings.Repeat("\xff", 400), format},
		{"401 invalid bytes", strings.Repeat("\xff", 401), invalid(detail("/path/ns", errkind.DetailTooLong))},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			r := httptest.NewRequest(http.MethodGet, "/x", nil)
			r.SetPathValue("ns", tt.value)
			got, err := PathID(r, "ns", "ns_")
			if diff := cmp.Diff(tt.want, outcomeOf(err)); diff != "" {
				t.Errorf("PathID(%q) (-want +got):\n%s", tt.value, diff)
			}
			wantID := ""
			if err == nil {
				wantID = tt.value
			}
			if got != wantID {
				t.Errorf("PathID(%q) = %q, want %q", tt.value, got, wantID)
			}
			if e := errkind.As(err); e != nil && strings.Contains(e.Message, tt.value) && tt.value != "" {
				t.Errorf("PathID(%q): message %q echoes the value", tt.value, e.Message)
			}
		})
	}
}

// TestPathIDThroughMux checks that PathID sees the decoded wildcard.
func TestPathIDThroughMux(t *testing.T) {
	const id = "agt_0b6f0a3c-2f1e-4c55-9a7d-1d2c3b4a5f60"
	var m Mux
	var got string
	var gotErr error
	m.HandleFunc("GET /agents/{agent}", func(w http.ResponseWriter, r *http.Request) {
		got, gotErr = PathID(r, "agent", "agt_")
	})
	m.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest(http.MethodGet, "/agents/"+strings.Replace(id, "_", "%5F", 1), nil))
	if got != id || gotErr != nil {
		t.Errorf("PathID through Mux = %q, %v; want %q, nil", got, gotErr, id)
	}
}
