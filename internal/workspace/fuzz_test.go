package workspace

import (
	"encoding/json"
	"strings"
	"testing"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/openclaw/occ/internal/errkind"
)

// refContent is an independent statement of the content rule: converting
// to runes and back changes a string exactly when it holds invalid UTF-8.
func refContent(s string) (tooLong, invalid bool) {
	tooLong = len([]byte(s)) > 16384
	runes := []rune(s)
	invalid = string(runes) != s
	for _, r := range runes {
		if r == 0 {
			invalid = true
		}
	}
	return tooLong, invalid
}

// fills are what the fuzz targets repeat n times to reach the size limit
// from a small input: one-, three- and four-byte runes, and (for JSON) the
// escaped form of a three-byte rune. Small inputs keep the fuzzer fast;
// 16 KiB inputs make each execution and every minimization slow.
var fills = [...]string{"a", "€", "😀", `\u20ac`}

// padded returns strings.Repeat(fills[fill], n) + s.
func padded(s string, n uint16, fill byte) string {
	return strings.Repeat(fills[int(fill)%len(fills)], int(n)) + s
}

func FuzzCheckContent(f *testing.F) {
	type seed struct {
		s    string
		n    uint16
		fill byte
	}
	for _, sd := range []seed{
		{"", 0, 0}, {"a", 0, 0}, {"# AGENTS.md\r\n", 0, 0}, {"\x00", 0, 0}, {"a\x00b", 0, 0},
		{"\uFFFD", 0, 0}, {"\xff", 0, 0}, {"\xe2\x82", 0, 0}, {"\xed\xa0\x80", 0, 0},
		{"\xc0\xaf", 0, 0}, {"\xf4\x90\x80\x80", 0, 0}, {"😀", 0, 0},
		{"", MaxFileBytes, 0}, {"a", MaxFileBytes, 0}, // at and one past the limit
		{"a", 5461, 1}, {"ab", 5461, 1}, // 5,461 euros + 1 or 2 bytes
		{"", 4096, 2}, {"a", 4096, 2}, // four-byte runes
		{"\x00", MaxFileBytes, 0}, {"\xff", MaxFileBytes - 1, 0}, {"\uFFFD", MaxFileBytes - 3, 0},
	} {
		f.Add(sd.s, sd.n, sd.fill)
	}
	f.Fuzz(func(t *testing.T, tail string, n uint16, fill byte) {
		s := padded(tail, n, fill%3) // the escaped fill is for JSON only
		tooLong, invalid := refContent(s)
		err := CheckContent(s)
		if (err == nil) != (!tooLong && !invalid) {
			t.Fatalf("CheckContent(%q) = %v; reference: tooLong=%v invalid=%v", s, err, tooLong, invalid)
		}
		var wantCodes []string
		if tooLong {
			wantCodes = append(wantCodes, errkind.DetailTooLong)
		}
		if invalid {
			wantCodes = append(wantCodes, errkind.DetailInvalidValue)
		}
		if err != nil {
			ce := err.(*ContentError)
			if ce.TooLong != tooLong || ce.Invalid != invalid {
				t.Fatalf("CheckContent(%q) = %+v; reference: tooLong=%v invalid=%v", s, ce, tooLong, invalid)
			}
			diff(t, "codes", wantCodes, ce.Codes())
		}
		details := ContentDetails("/content", s)
		if len(details) != len(wantCodes) {
			t.Fatalf("ContentDetails(%q) = %v, want codes %v", s, details, wantCodes)
		}
		for i, d := range details {
			if d.Path != "/content" || d.Code != wantCodes[i] {
				t.Fatalf("ContentDetails(%q) = %v, want codes %v", s, details, wantCodes)
			}
		}
	})
}

// refString is how the reference would see one JSON string literal: the
// UTF-16 code units JSON.parse produces, except that raw bytes that are not
// UTF-8 (which a JavaScript string cannot hold) are only counted.
type refString struct {
	units  []uint16
	rawBad bool // raw bytes that are not UTF-8
	bytes  int  // UTF-8 length as Node's Buffer.byteLength counts it
}

// parseRefString decodes the body of a valid JSON string literal
// independently of the code under test.
func parseRefString(body string) refString {
	var r refString
	var escaped []uint16 // consecutive escape units, measured together
	flush := func() {
		r.bytes += jsByteLength(escaped)
		r.units = append(r.units, escaped...)
		escaped = escaped[:0]
	}
	for i := 0; i < len(body); {
		if body[i] == '\\' {
			switch c := body[i+1]; c {
			case 'u':
				var u uint16
				for _, h := range body[i+2 : i+6] {
					u <<= 4
					switch {
					case h >= '0' && h <= '9':
						u |= uint16(h - '0')
					case h >= 'a' && h <= 'f':
						u |= uint16(h-'a') + 10
					default:
						u |= uint16(h-'A') + 10
					}
				}
				escaped = append(escaped, u)
				i += 6
			default:
				escaped = append(escaped, uint16(map[byte]byte{'b': '\b', 'f': '\f', 'n': '\n', 'r': '\r', 't': '\t', '"': '"', '\\': '\\', '/': '/'}[c]))
				i += 2
			}
			continue
		}
		flush()
		j := strings.IndexByte(body[i:], '\\')
		if j < 0 {
			j = len(body) - i
		}
		run := body[i : i+j]
		i += j
		r.bytes += len(run)
		if !utf8.ValidString(run) {
			r.rawBad = true
			continue
		}
		r.units = append(r.units, utf16.Encode([]rune(run))...)
	}
	flush()
	return r
}

// jsByteLength is Buffer.byteLength for UTF-16 units: an unpaired
// surrogate counts 3 bytes (it is written as U+FFFD).
func jsByteLength(units []uint16) int {
	n := 0
	for i := 0; i < len(units); i++ {
		u := units[i]
		switch {
		case u < 0x80:
			n++
		case u < 0x800:
			n += 2
		case u >= 0xD800 && u < 0xDC00 && i+1 < len(units) && units[i+1] >= 0xDC00 && units[i+1] < 0xE000:
			n += 4
			i++
		default:
			n += 3
		}
	}
	return n
}

// wellFormed is String.prototype.isWellFormed.
func wellFormed(units []uint16) bool {
	for i := 0; i < len(units); i++ {
		u := units[i]
		if u >= 0xD800 && u < 0xDC00 && i+1 < len(units) && units[i+1] >= 0xDC00 && units[i+1] < 0xE000 {
			i++
			continue
		}
		if u >= 0xD800 && u < 0xE000 {
			return false
		}
	}
	return true
}

// refNormalize predicts NormalizeInitialFilesJSON's outcome with the
// reference's rules, read with encoding/json's tokenizer for structure.
func refNormalize(t *testing.T, data []byte) outcome {
	if strings.Trim(string(data), " \t\r\n") == "" {
		return accepted(nil)
	}
	if !json.Valid(data) {
		return refused(atField(errkind.DetailInvalidValue))
	}
	dec := json.NewDecoder(strings.NewReader(string(data)))
	if tok, _ := dec.Token(); tok != json.Delim('{') {
		return refused(atField(errkind.DetailInvalidType))
	}
	allowed := map[string]bool{"AGENTS.md": true, "SOUL.md": true, "IDENTITY.md": true, "USER.md": true}
	seen := map[string]bool{}
	files := map[string]string{}
	var details []errkind.Detail
	add := func(key, code string) {
		if len(details) < errkind.MaxDetails {
			details = append(details, at(strings.NewReplacer("~", "~0", "/", "~1").Replace(key), code))
		}
	}
	for dec.More() {
		tok, err := dec.Token()
		if err != nil {
			t.Fatalf("reference tokenizer: %v", err)
		}
		key := tok.(string)
		var raw json.RawMessage
		if err := dec.Decode(&raw); err != nil {
			t.Fatalf("reference decoder: %v", err)
		}
		switch {
		case !allowed[key]:
			add(key, errkind.DetailUnknownField)
		case seen[key]:
			add(key, errkind.DetailInvalidValue)
		case raw[0] != '"':
			add(key, errkind.DetailInvalidType)
		default:
			r := parseRefString(string(raw[1 : len(raw)-1]))
			nul := false
			for _, u := range r.units {
				nul = nul || u == 0
			}
			bad := r.rawBad || !wellFormed(r.units) || nul
			if r.bytes > 16384 {
				add(key, errkind.DetailTooLong)
			}
			if bad {
				add(key, errkind.DetailInvalidValue)
			}
			if !bad && r.bytes <= 16384 {
				files[key] = string(utf16.Decode(r.units))
			}
		}
		seen[key] = true
	}
	switch {
	case len(details) > 0:
		return refused(details...)
	case len(files) == 0:
		return accepted(nil)
	}
	return accepted(files)
}

// padJSON inserts the padding right after the first `:"` of data, which in
// most inputs is the start of the first value's text. Where it lands does
// not matter for correctness: the reference judges the resulting bytes.
func padJSON(data []byte, n uint16, fill byte) []byte {
	i := strings.Index(string(data), `:"`)
	if i < 0 || n == 0 {
		return data
	}
	return []byte(string(data[:i+2]) + padded(string(data[i+2:]), n, fill))
}

func FuzzNormalizeInitialFiles(f *testing.F) {
	type seed struct {
		s    string
		n    uint16
		fill byte
	}
	for _, sd := range []seed{
		{``, 0, 0}, {` `, 0, 0}, {`null`, 0, 0}, {`[]`, 0, 0}, {`"x"`, 0, 0}, {`1`, 0, 0}, {`true`, 0, 0},
		{`{`, 0, 0}, {`{}`, 0, 0}, {`{} {}`, 0, 0},
		{`{"AGENTS.md":"# A\r\n","SOUL.md":"","IDENTITY.md":"  x  ","USER.md":"\u00e9\ud83d\ude00"}`, 0, 0},
		{`{"SOUL.md":"\u0000"}`, 0, 0}, {`{"SOUL.md":"\ud800"}`, 0, 0}, {`{"SOUL.md":"\udc00\ud800"}`, 0, 0},
		{`{"SOUL.md":"\ud800\ud800\udc00"}`, 0, 0}, {"{\"SOUL.md\":\"a\xffb\"}", 0, 0},
		{"{\"SOUL.md\":\"\xe2\x82\"}", 0, 0}, {`{"SOUL.md":"\ufffd"}`, 0, 0},
		{`{"SOUL.md":null}`, 0, 0}, {`{"SOUL.md":1}`, 0, 0}, {`{"SOUL.md":{"a":"}"}}`, 0, 0}, {`{"SOUL.md":["]"]}`, 0, 0},
		{`{"MEMORY.md":"x"}`, 0, 0}, {`{"a/b~c":1}`, 0, 0}, {`{"\ud800":1}`, 0, 0},
		{`{"SOUL.md":"a","SOUL\u002emd":"b"}`, 0, 0},
		{`{"AGENTS.md":""}`, MaxFileBytes, 0}, {`{"AGENTS.md":"a"}`, MaxFileBytes, 0}, // at and one past the limit
		{`{"AGENTS.md":"a"}`, 5461, 1}, {`{"AGENTS.md":"ab"}`, 5461, 1}, // raw euros
		{`{"AGENTS.md":"a"}`, 5461, 3}, {`{"AGENTS.md":"ab"}`, 5461, 3}, // escaped euros
		{`{"AGENTS.md":"\udbff"}`, MaxFileBytes - 3, 0}, {`{"AGENTS.md":"\udbff"}`, MaxFileBytes - 2, 0},
	} {
		f.Add([]byte(sd.s), sd.n, sd.fill)
	}
	f.Fuzz(func(t *testing.T, body []byte, n uint16, fill byte) {
		data := padJSON(body, n, fill)
		files, err := NormalizeInitialFilesJSON(json.RawMessage(data))
		got := outcomeOf(files, err)
		diff(t, "outcome vs reference", refNormalize(t, data), got)
		if err != nil || files == nil {
			return
		}
		// What is accepted satisfies the rule, and the map form accepts
		// the same files unchanged.
		for name, content := range files {
			if !ValidName(name) || CheckContent(content) != nil {
				t.Fatalf("accepted %q with content %q", name, content)
			}
		}
		again, err := NormalizeInitialFiles(files, true)
		if err != nil {
			t.Fatalf("map form refused what the JSON form accepted: %v", err)
		}
		diff(t, "map form", files, again)
	})
}
