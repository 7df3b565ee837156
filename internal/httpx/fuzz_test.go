package httpx

import (
	"bytes"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/google/go-cmp/cmp"
	"github.com/google/go-cmp/cmp/cmpopts"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
)

// fuzzTarget covers each kind the validator supports; only name is
// required so that the fuzzer reaches acceptance often.
type fuzzTarget struct {
	Name   string            `json:"name"`
	Count  int32             `json:"count,omitempty"`
	Big    uint64            `json:"big,omitempty"`
	Ratio  float64           `json:"ratio,omitempty"`
	Small  float32           `json:"small,omitempty"`
	On     *bool             `json:"on"`
	Tags   []string          `json:"tags,omitempty"`
	Labels map[string]string `json:"labels,omitempty"`
	Nested *fuzzNested       `json:"nested,omitempty"`
	Items  []fuzzNested      `json:"items,omitempty"`
	Raw    json.RawMessage   `json:"raw,omitempty"`
	Any    any               `json:"any,omitempty"`
	Blob   []byte            `json:"blob,omitempty"`
}

type fuzzNested struct {
	ID   string         `json:"id"`
	Deep *fuzzNested    `json:"deep,omitempty"`
	Vals map[string]int `json:"vals,omitempty"`
}

var knownDetailCodes = map[string]bool{
	errkind.DetailRequired: true, errkind.DetailUnknownField: true, errkind.DetailInvalidType: true,
	errkind.DetailInvalidFormat: true, errkind.DetailInvalidValue: true, errkind.DetailTooDeep: true,
}

// compactRaw returns t with Raw in compact form, as encoding writes it.
func compactRaw(t *testing.T, v fuzzTarget) fuzzTarget {
	t.Helper()
	if v.Raw == nil {
		return v
	}
	var b bytes.Buffer
	if err := json.Compact(&b, v.Raw); err != nil {
		t.Fatalf("compacting raw %q: %v", v.Raw, err)
	}
	v.Raw = b.Bytes()
	return v
}

// FuzzReadJSON checks, for any body:
//   - ReadJSON never panics and fails only with a classified 400 or 413
//     carrying at most MaxDetails known details (an unclassified error
//     would mean encoding/json refused what the validator accepted);
//   - the checker's verdict on syntax agrees with json.Valid, and its
//     structural verdict agrees with independent oracles built on
//     encoding/json's tokenizer: it reports nothing exactly when the body
//     is within MaxDepth, has no duplicate or forbidden keys, is valid
//     UTF-8 and has no unpaired surrogate escapes;
//   - an accepted body encodes and reads back to an equal value.
func FuzzReadJSON(f *testing.F) {
	f.Fuzz(func(t *testing.T, body []byte) {
		var got fuzzTarget
		err := ReadJSON(httptest.NewRecorder(), jsonRequest(string(body)), &got, DefaultLimit)
		if err != nil {
			e := errkind.As(err)
			if e == nil || (e.Status() != http.StatusBadRequest && e.Status() != http.StatusRequestEntityTooLarge) {
				t.Fatalf("ReadJSON(%q) = %v, want a 400 or 413", body, err)
			}
			if len(e.Details) > errkind.MaxDetails {
				t.Fatalf("ReadJSON(%q): %d details, more than %d", body, len(e.Details), errkind.MaxDetails)
			}
			for _, d := range e.Details {
				if !knownDetailCodes[d.Code] || (d.Path != "" && d.Path[0] != '/') {
					t.Fatalf("ReadJSON(%q): bad detail %+v", body, d)
				}
			}
		}

		c := checker{s: string(body)}
		syntaxErr := c.check()
		valid := json.Valid(body)
		tooDeep := len(c.details) > 0 && c.details[0].Code == errkind.DetailTooDeep
		if valid != (syntaxErr == nil) && !(tooDeep && syntaxErr == nil) {
			// json.Valid also refuses nesting past 10000, which the
			// checker reports as TOO_DEEP instead.
			t.Fatalf("checker syntax verdict %v, json.Valid %v, for %q", syntaxErr, valid, body)
		}
		if syntaxErr == nil {
			o, oerr := oracle(body)
			clean := oerr == nil && o.depth <= MaxDepth && !o.duplicate && !o.forbidden && !o.loneSurrogate && utf8.Valid(body)
			if clean != (len(c.details) == 0) {
				t.Fatalf("checker details %v, oracle %+v (err %v, UTF-8 %v), for %q", c.details, o, oerr, utf8.Valid(body), body)
			}
		}

		if err != nil {
			return
		}
		if syntaxErr != nil || len(c.details) > 0 {
			t.Fatalf("ReadJSON accepted %q, which the checker refuses", body)
		}
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(got); err != nil {
			t.Fatalf("encoding %+v: %v", got, err)
		}
		var again fuzzTarget
		if err := ReadJSON(httptest.NewRecorder(), jsonRequest(buf.String()), &again, 1<<20); err != nil {
			t.Fatalf("ReadJSON refused its own round trip %s (from %q): %v", buf.Bytes(), body, err)
		}
		// Empty maps and slices equal absent ones: omitempty drops them.
		if diff := cmp.Diff(compactRaw(t, got), compactRaw(t, again), cmpopts.EquateEmpty()); diff != "" {
			t.Fatalf("round trip of %q through %s (-first +second):\n%s", body, buf.Bytes(), diff)
		}
	})
}

// oracleResult is what the token-stream oracle finds in a body.
type oracleResult struct {
	depth         int
	duplicate     bool
	forbidden     bool
	loneSurrogate bool
}

// oracle walks a syntactically valid body with encoding/json's own
// tokenizer, independently of the checker. Unpaired surrogates are
// detected by counting: encoding/json decodes each to U+FFFD, so a body
// whose decoded strings hold more U+FFFD than its text spells out (raw or
// as \ufffd) had unpaired surrogates. This holds for valid UTF-8 bodies,
// the only ones where the answer matters.
func oracle(body []byte) (oracleResult, error) {
	var o oracleResult
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.UseNumber() // numbers out of float64 range are not the oracle's concern
	type level struct {
		object    bool
		expectKey bool
		keys      map[string]bool
	}
	var stack []*level
	decoded := 0
	for {
		tok, err := dec.Token()
		if errors.Is(err, io.EOF) {
			break
		}
		if err != nil {
			return o, err
		}
		var top *level
		if len(stack) > 0 {
			top = stack[len(stack)-1]
		}
		switch v := tok.(type) {
		case json.Delim:
			switch v {
			case '{', '[':
				if top != nil && top.object {
					top.expectKey = true
				}
				stack = append(stack, &level{object: v == '{', expectKey: v == '{', keys: map[string]bool{}})
				o.depth = max(o.depth, len(stack))
			default:
				stack = stack[:len(stack)-1]
			}
			continue
		case string:
			decoded += strings.Count(v, "\uFFFD")
			if top != nil && top.object && top.expectKey {
				if top.keys[v] {
					o.duplicate = true
				}
				top.keys[v] = true
				if v == "__proto__" || v == "constructor" || v == "prototype" {
					o.forbidden = true
				}
				top.expectKey = false
				continue
			}
		}
		if top != nil && top.object {
			top.expectKey = true
		}
	}
	o.loneSurrogate = decoded > spelledReplacements(body)
	return o, nil
}

// spelledReplacements counts U+FFFD written in body, raw or escaped.
func spelledReplacements(body []byte) int {
	n := bytes.Count(body, []byte("\uFFFD"))
	for i := 0; i < len(body); i++ {
		if body[i] != '\\' || i+1 >= len(body) {
			continue
		}
		if body[i+1] == 'u' && i+6 <= len(body) && strings.EqualFold(string(body[i+2:i+6]), "fffd") {
			n++
		}
		i++ // skip the escaped character, so "\\ufffd" is not an escape
	}
	return n
}

// FuzzPathID checks, for any decoded path value, that PathID accepts it
// exactly when ids.Valid does, and otherwise answers TOO_LONG exactly when
// the value is over 400 UTF-16 code units, counted by an independent
// oracle (utf16.Encode of its runes), and INVALID_FORMAT below, with one
// of two fixed messages (so never echoing the value).
func FuzzPathID(f *testing.F) {
	for _, s := range []string{"", "ns_0b6f0a3c-2f1e-4c55-9a7d-1d2c3b4a5f60", strings.Repeat("é", 401),
		strings.Repeat("😀", 200), strings.Repeat("a", 399) + "😀", "\xff\xfe", strings.Repeat("\xed\xa0\x80", 134)} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, v string) {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.SetPathValue("ns", v)
		got, err := PathID(r, "ns", "ns_")
		if ids.Valid("ns_", v) {
			if err != nil || got != v {
				t.Fatalf("PathID(%q) = %q, %v; want it accepted", v, got, err)
			}
			return
		}
		code, message := errkind.DetailInvalidFormat, "Path parameter ns is not a valid ns_ identifier."
		if len(utf16.Encode([]rune(v))) > 400 {
			code, message = errkind.DetailTooLong, "Path parameter ns is too long."
		}
		want := outcome{Status: http.StatusBadRequest, Code: "INVALID_REQUEST", Details: []errkind.Detail{{Path: "/path/ns", Code: code}}}
		if diff := cmp.Diff(want, outcomeOf(err)); diff != "" || got != "" {
			t.Fatalf("PathID(%q) = %q (-want +got):\n%s", v, got, diff)
		}
		if e := errkind.As(err); e.Message != message {
			t.Fatalf("PathID(%q): message %q, want %q", v, e.Message, message)
		}
	})
}
