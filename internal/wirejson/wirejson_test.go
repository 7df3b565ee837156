package wirejson

import (
	"bytes"
	"encoding/json"
	"math/rand/v2"
	"reflect"
	"strconv"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/apitypes"
)

// std is the reference: what httpx's encoder writes for the envelope
// (encoding/json, HTML escaping off, trailing newline).
func std(t testing.TB, data any, requestID string) ([]byte, error) {
	t.Helper()
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	err := enc.Encode(apitypes.Envelope[any]{Data: data, Meta: apitypes.Meta{RequestID: requestID}})
	return buf.Bytes(), err
}

// same checks that AppendEnvelope encodes data as std does, after a prefix
// that it must leave alone.
func same(t *testing.T, data any, requestID string) {
	t.Helper()
	want, err := std(t, data, requestID)
	if err != nil {
		t.Fatalf("encoding/json refused %#v: %v", data, err)
	}
	got, ok := AppendEnvelope([]byte("prefix"), data, requestID)
	if !ok {
		t.Fatalf("AppendEnvelope declined %#v", data)
	}
	if diff := cmp.Diff(string(want), string(got[len("prefix"):])); diff != "" || string(got[:len("prefix")]) != "prefix" {
		t.Fatalf("AppendEnvelope differs from encoding/json (-want +got):\n%s\nwhole output %q", diff, got)
	}
}

// tricky strings: every escape encoding/json makes, invalid UTF-8, the
// JavaScript line ends, HTML characters (not escaped here), multi-byte
// characters, and plain identifiers.
var tricky = []string{
	"", "agt_0123456789abcdefghijklmnop", "plain-name", `quote " and \ backslash`,
	"\x00\x01\x07\x08\x09\x0a\x0b\x0c\x0d\x1b\x1f\x7f", "<b>&amp;</b>", "\xff\xfe invalid \xc3", "line\u2028sep\u2029par",
	"日本語 ü é 🦀", "\xed\xa0\x80 surrogate half", "tail\\", "\"", "\u00a0nbsp",
}

// filler sets every field of a value to something non-zero (a string from
// tricky, a time in some zone, a map with entries, a slice with elements),
// so a field that AppendEnvelope leaves out shows in the comparison.
type filler struct {
	r     *rand.Rand
	empty bool // also leave strings and maps empty at random
}

var timeType = reflect.TypeFor[time.Time]()

func (f filler) fill(v reflect.Value) {
	switch {
	case v.Type() == timeType:
		v.Set(reflect.ValueOf(f.time()))
		return
	case v.Kind() == reflect.String:
		s := tricky[1+f.r.IntN(len(tricky)-1)]
		if f.empty && f.r.IntN(3) == 0 {
			s = ""
		}
		v.SetString(s)
	case v.Kind() == reflect.Struct:
		for i := range v.NumField() {
			f.fill(v.Field(i))
		}
	case v.Kind() == reflect.Slice:
		n := 1 + f.r.IntN(4)
		if f.empty && f.r.IntN(4) == 0 {
			n = 0
		}
		s := reflect.MakeSlice(v.Type(), n, n)
		for i := range n {
			f.fill(s.Index(i))
		}
		v.Set(s)
	case v.Kind() == reflect.Map && v.Type().Key().Kind() == reflect.String && v.Type().Elem().Kind() == reflect.String:
		if f.empty && f.r.IntN(3) == 0 {
			return // nil
		}
		m := reflect.MakeMap(v.Type())
		for range 1 + f.r.IntN(5) {
			m.SetMapIndex(reflect.ValueOf(tricky[f.r.IntN(len(tricky))]), reflect.ValueOf(tricky[f.r.IntN(len(tricky))]))
		}
		v.Set(m)
	default:
		panic("filler: no rule for " + v.Type().String() + ": teach the filler and AppendEnvelope this field")
	}
}

// zones include offsets with seconds (local mean time), which MarshalJSON
// drops, and the largest offsets it accepts.
var zones = []*time.Location{time.UTC, time.FixedZone("", 5*3600+30*60), time.FixedZone("X", -8*3600), time.Local,
	time.FixedZone("LMT", 3600+30), time.FixedZone("", -(24*3600 - 1)), time.FixedZone("", 24*3600-1)}

func (f filler) time() time.Time {
	t := time.Unix(f.r.Int64N(253402300799), 0).In(zones[f.r.IntN(len(zones))])
	switch f.r.IntN(4) { // nanoseconds: none, µs, ms-ish, full
	case 1:
		t = t.Add(time.Duration(f.r.IntN(1e6)) * time.Microsecond)
	case 2:
		t = t.Add(time.Duration(f.r.IntN(1000)) * time.Millisecond)
	case 3:
		t = t.Add(time.Duration(f.r.IntN(1e9)))
	}
	return t
}

// values are fresh values of every type AppendEnvelope encodes.
func values(f filler) []any {
	var out []any
	for _, p := range []any{&apitypes.Agent{}, &apitypes.List[apitypes.Agent]{}, &apitypes.Namespace{},
		&apitypes.List[apitypes.Namespace]{}, &apitypes.AuditPage{}} {
		v := reflect.ValueOf(p).Elem()
		f.fill(v)
		out = append(out, v.Interface())
	}
	return out
}

// TestSameAsEncodingJSON compares AppendEnvelope with encoding/json on
// values with every field set and on values with empty optional fields.
func TestSameAsEncodingJSON(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 400 {
		f := filler{r: r, empty: i%2 == 1}
		for _, v := range values(f) {
			same(t, v, "req_"+strconv.Itoa(i)+tricky[i%len(tricky)])
		}
	}
}

// TestWireShapes pins the output for hand-written values, so the
// comparison above is not the only thing that says what the bytes are.
func TestWireShapes(t *testing.T) {
	at := time.Date(2026, 12, 3, 11, 0, 0, 120000000, time.UTC)
	tests := []struct {
		name string
		data any
		want string
	}{
		{"agent", apitypes.Agent{ID: "agt_1", NamespaceID: "ns_1", Name: "a", ConfigurationID: "cfg_1",
			Status: apitypes.AgentActive, DesiredRuntimeState: apitypes.RuntimeStopped, CreatedAt: at, UpdatedAt: at},
			`{"data":{"id":"agt_1","namespaceId":"ns_1","name":"a","configurationId":"cfg_1","status":"active","desiredRuntimeState":"stopped","createdAt":"2026-12-03T11:00:00.12Z","updatedAt":"2026-12-03T11:00:00.12Z"},"meta":{"requestId":"req_1"}}` + "\n"},
		{"empty page", apitypes.List[apitypes.Agent]{Items: []apitypes.Agent{}},
			`{"data":{"items":[]},"meta":{"requestId":"req_1"}}` + "\n"},
		{"namespace page with a cursor", apitypes.List[apitypes.Namespace]{Items: []apitypes.Namespace{{ID: "ns_1", Name: "n",
			Status: apitypes.NamespaceReady, CreatedAt: at, UpdatedAt: at}}, NextCursor: "c1"},
			`{"data":{"items":[{"id":"ns_1","name":"n","status":"ready","createdAt":"2026-12-03T11:00:00.12Z","updatedAt":"2026-12-03T11:00:00.12Z"}],"nextCursor":"c1"},"meta":{"requestId":"req_1"}}` + "\n"},
		{"audit event, sorted details", apitypes.AuditPage{Items: []apitypes.AuditEvent{{ID: "aud_1", OccurredAt: at, Kind: "mutation",
			ActorID: "usr_1", Action: "openclaw.agents.create", Resource: apitypes.AuditResource{Kind: "agent"}, Outcome: "success",
			Details: map[string]string{"z": "1", "a": "<&>"}}}},
			`{"data":{"items":[{"id":"aud_1","occurredAt":"2026-12-03T11:00:00.12Z","kind":"mutation","actorId":"usr_1","action":"openclaw.agents.create","resource":{"kind":"agent"},"outcome":"success","details":{"a":"<&>","z":"1"}}]},"meta":{"requestId":"req_1"}}` + "\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := AppendEnvelope(nil, tt.data, "req_1")
			if !ok {
				t.Fatal("declined")
			}
			if diff := cmp.Diff(tt.want, string(got)); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
			same(t, tt.data, "req_1")
		})
	}
}

// TestDeclines: types it does not encode, and values encoding/json refuses
// (so the caller's fallback keeps refusing them), leave b unchanged.
func TestDeclines(t *testing.T) {
	y10000 := time.Date(10000, 1, 1, 0, 0, 0, 0, time.UTC)
	yMinus := time.Date(-1, 1, 1, 0, 0, 0, 0, time.UTC)
	dayZone := time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", 24*3600))
	minusDayZone := time.Date(2026, 1, 1, 0, 0, 0, 0, time.FixedZone("", -24*3600-59))
	tests := []struct {
		name     string
		data     any
		stdFails bool
	}{
		{"another type", apitypes.Health{Status: "ok"}, false},
		{"a pointer", &apitypes.Agent{}, false},
		{"a nil page", apitypes.List[apitypes.Agent]{}, false},
		{"year 10000", apitypes.Agent{CreatedAt: y10000}, true},
		{"year -1 in a page", apitypes.List[apitypes.Namespace]{Items: []apitypes.Namespace{{UpdatedAt: yMinus}}}, true},
		{"offset of a day", apitypes.AuditPage{Items: []apitypes.AuditEvent{{OccurredAt: dayZone}}}, true},
		{"offset of minus a day", apitypes.Agent{UpdatedAt: minusDayZone}, true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, ok := AppendEnvelope([]byte("prefix"), tt.data, "req_1")
			if ok || string(got) != "prefix" {
				t.Errorf("AppendEnvelope = %q, %v; want the prefix alone, false", got, ok)
			}
			if _, err := std(t, tt.data, "req_1"); (err != nil) != tt.stdFails {
				t.Errorf("encoding/json error = %v, want failure %v", err, tt.stdFails)
			}
		})
	}
}

// FuzzAppendString compares the string encoder with encoding/json's.
func FuzzAppendString(f *testing.F) {
	for _, s := range tricky {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		var buf bytes.Buffer
		enc := json.NewEncoder(&buf)
		enc.SetEscapeHTML(false)
		if err := enc.Encode(s); err != nil {
			t.Fatal(err)
		}
		want := bytes.TrimSuffix(buf.Bytes(), []byte("\n"))
		if got := appendString(nil, s); !bytes.Equal(got, want) {
			t.Fatalf("appendString(%q) = %s, want %s", s, got, want)
		}
	})
}

// FuzzAppendEnvelope compares whole replies built from fuzzed strings,
// times and zone offsets.
func FuzzAppendEnvelope(f *testing.F) {
	f.Add("agt_1", "name", "k", "v", int64(1764759600), int64(120000000), 0)
	f.Add("a\"b", "\xff", "", "\u2028", int64(-62135596800), int64(999999999), 19800)
	f.Add("x", "y", "z", "w", int64(253402300800), int64(0), 30)
	f.Add("x", "y", "z", "w", int64(0), int64(1), -24*3600)
	f.Fuzz(func(t *testing.T, id, name, key, value string, sec, nsec int64, offset int) {
		at := time.Unix(sec, nsec).In(time.FixedZone("", offset%(48*3600)))
		data := []any{
			apitypes.Agent{ID: id, NamespaceID: name, Name: name, ConfigurationID: id, Status: apitypes.AgentStatus(value),
				DesiredRuntimeState: apitypes.RuntimeState(key), ActiveRevisionID: value, CreatedAt: at, UpdatedAt: at},
			apitypes.List[apitypes.Namespace]{Items: []apitypes.Namespace{{ID: id, Name: name, CreatedAt: at, UpdatedAt: at}},
				NextCursor: value},
			apitypes.AuditPage{Items: []apitypes.AuditEvent{{ID: id, OccurredAt: at, Kind: key, ActorID: name,
				Credential: value, Resource: apitypes.AuditResource{Kind: apitypes.ResourceKind(key), ID: id},
				Details: map[string]string{key: value, name: id}}}},
		}
		for _, d := range data {
			want, err := std(t, d, name)
			got, ok := AppendEnvelope(nil, d, name)
			switch {
			case err != nil && ok:
				t.Fatalf("encoding/json refused %#v (%v) but AppendEnvelope wrote %s", d, err, got)
			case err == nil && !ok:
				t.Fatalf("AppendEnvelope declined %#v, which encoding/json encodes", d)
			case ok && !bytes.Equal(got, want):
				t.Fatalf("AppendEnvelope differs:\n got %s\nwant %s", got, want)
			}
		}
	})
}

// BenchmarkAgentPage compares a page of 100 Agents through encoding/json
// and through AppendEnvelope (the reply of GET /namespaces/{ns}/agents).
func BenchmarkAgentPage(b *testing.B) {
	at := time.Date(2026, 12, 3, 11, 0, 0, 123456000, time.UTC)
	page := apitypes.List[apitypes.Agent]{NextCursor: "eyJjIjoiMjAyNi0xMi0wM1QxMTowMDowMFoiLCJpIjoiYWd0In0"}
	for i := range 100 {
		page.Items = append(page.Items, apitypes.Agent{ID: "agt_01jbench0000000000000" + strconv.Itoa(1000+i),
			NamespaceID: "ns_01jbench000000000000000000", Name: "agent-" + strconv.Itoa(i),
			ConfigurationID: "cfg_01jbench00000000000000000", Status: apitypes.AgentActive,
			DesiredRuntimeState: apitypes.RuntimeRunning, CreatedAt: at, UpdatedAt: at})
	}
	b.Run("encoding-json", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			if _, err := std(b, page, "req_01jbench"); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("wirejson", func(b *testing.B) {
		b.ReportAllocs()
		buf := make([]byte, 0, 64<<10)
		for b.Loop() {
			var ok bool
			if buf, ok = AppendEnvelope(buf[:0], page, "req_01jbench"); !ok {
				b.Fatal("declined")
			}
		}
	})
}
