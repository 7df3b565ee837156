// Package wirejson encodes the API's most frequent replies without
// reflection: the success envelope of one Agent, a page of Agents, one
// Namespace, a page of Namespaces and the audit page. encoding/json spends
// most of such a reply's encoding time on reflection, on time.Time's
// MarshalJSON and on re-validating that method's output; here each field is
// appended directly, at about a fifth of the cost (docs/performance.md).
//
// The output is byte for byte what httpx's encoder (encoding/json without
// HTML escaping, with its trailing newline) writes for the same value; the
// package's tests compare the two on generated and fuzzed values, with
// every field of every type filled, so a field added to one of these wire
// types and not here fails them. AppendEnvelope declines (ok false) every
// other type and every value that encoding/json would refuse (a time whose
// year is outside 0-9999 or whose zone offset is a day or more), so the caller falls back
// to encoding/json and keeps its behaviour, errors included.
package wirejson

import (
	"slices"
	"time"
	"unicode/utf8"

	"github.com/openclaw/occ/apitypes"
)

// AppendEnvelope appends {"data":data,"meta":{"requestId":requestID}} and a
// newline to b, when data is one of the types this package encodes. ok is
// false, and b returned unchanged, for any other type or a value that only
// encoding/json should decide about.
func AppendEnvelope(b []byte, data any, requestID string) (out []byte, ok bool) {
	start := len(b)
	b = append(b, `{"data":`...)
	switch v := data.(type) {
	case apitypes.Agent:
		b, ok = appendAgent(b, &v)
	case apitypes.List[apitypes.Agent]:
		b, ok = appendList(b, v.Items, v.NextCursor, appendAgent)
	case apitypes.Namespace:
		b, ok = appendNamespace(b, &v)
	case apitypes.List[apitypes.Namespace]:
		b, ok = appendList(b, v.Items, v.NextCursor, appendNamespace)
	case apitypes.AuditPage:
		b, ok = appendList(b, v.Items, v.NextCursor, appendAuditEvent)
	}
	if !ok {
		return b[:start], false
	}
	b = append(b, `,"meta":{"requestId":`...)
	b = appendString(b, requestID)
	return append(b, "}}\n"...), true
}

// appendList writes {"items":[…]} with nextCursor when set; nil items are
// [], as apitypes.List documents (and as the converters build them).
func appendList[T any](b []byte, items []T, next string, one func([]byte, *T) ([]byte, bool)) ([]byte, bool) {
	if items == nil {
		// encoding/json writes a nil slice as null; the wire types never
		// hold one (package api's converters build lists with make), so
		// leave that case to it rather than copy it.
		return b, false
	}
	b = append(b, `{"items":[`...)
	for i := range items {
		if i > 0 {
			b = append(b, ',')
		}
		var ok bool
		if b, ok = one(b, &items[i]); !ok {
			return b, false
		}
	}
	b = append(b, ']')
	if next != "" {
		b = append(b, `,"nextCursor":`...)
		b = appendString(b, next)
	}
	return append(b, '}'), true
}

func appendAgent(b []byte, a *apitypes.Agent) ([]byte, bool) {
	b = append(b, `{"id":`...)
	b = appendString(b, a.ID)
	b = append(b, `,"namespaceId":`...)
	b = appendString(b, a.NamespaceID)
	b = append(b, `,"name":`...)
	b = appendString(b, a.Name)
	b = append(b, `,"configurationId":`...)
	b = appendString(b, a.ConfigurationID)
	b = append(b, `,"status":`...)
	b = appendString(b, string(a.Status))
	b = append(b, `,"desiredRuntimeState":`...)
	b = appendString(b, string(a.DesiredRuntimeState))
	if a.ActiveRevisionID != "" {
		b = append(b, `,"activeRevisionId":`...)
		b = appendString(b, a.ActiveRevisionID)
	}
	b = append(b, `,"createdAt":`...)
	b, ok := appendTime(b, a.CreatedAt)
	if !ok {
		return b, false
	}
	b = append(b, `,"updatedAt":`...)
	if b, ok = appendTime(b, a.UpdatedAt); !ok {
		return b, false
	}
	return append(b, '}'), true
}

func appendNamespace(b []byte, n *apitypes.Namespace) ([]byte, bool) {
	b = append(b, `{"id":`...)
	b = appendString(b, n.ID)
	b = append(b, `,"name":`...)
	b = appendString(b, n.Name)
	b = append(b, `,"status":`...)
	b = appendString(b, string(n.Status))
	b = append(b, `,"createdAt":`...)
	b, ok := appendTime(b, n.CreatedAt)
	if !ok {
		return b, false
	}
	b = append(b, `,"updatedAt":`...)
	if b, ok = appendTime(b, n.UpdatedAt); !ok {
		return b, false
	}
	return append(b, '}'), true
}

func appendAuditEvent(b []byte, e *apitypes.AuditEvent) ([]byte, bool) {
	b = append(b, `{"id":`...)
	b = appendString(b, e.ID)
	b = append(b, `,"occurredAt":`...)
	b, ok := appendTime(b, e.OccurredAt)
	if !ok {
		return b, false
	}
	b = append(b, `,"kind":`...)
	b = appendString(b, e.Kind)
	b = append(b, `,"actorId":`...)
	b = appendString(b, e.ActorID)
	b = appendOptional(b, `,"credential":`, e.Credential)
	b = appendOptional(b, `,"requestId":`, e.RequestID)
	b = append(b, `,"action":`...)
	b = appendString(b, e.Action)
	b = append(b, `,"resource":{"kind":`...)
	b = appendString(b, string(e.Resource.Kind))
	b = appendOptional(b, `,"id":`, e.Resource.ID)
	b = appendOptional(b, `,"namespaceId":`, e.Resource.NamespaceID)
	b = append(b, `},"outcome":`...)
	b = appendString(b, e.Outcome)
	b = appendOptional(b, `,"reasonCode":`, e.ReasonCode)
	if len(e.Details) > 0 {
		b = append(b, `,"details":{`...)
		// encoding/json sorts map keys (as strings, byte-wise).
		keys := make([]string, 0, len(e.Details))
		for k := range e.Details {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for i, k := range keys {
			if i > 0 {
				b = append(b, ',')
			}
			b = appendString(b, k)
			b = append(b, ':')
			b = appendString(b, e.Details[k])
		}
		b = append(b, '}')
	}
	b = appendOptional(b, `,"attemptId":`, e.AttemptID)
	return append(b, '}'), true
}

// appendOptional writes an omitempty string member: nothing when s is "".
func appendOptional(b []byte, key, s string) []byte {
	if s == "" {
		return b
	}
	return appendString(append(b, key...), s)
}

// appendTime writes t as time.Time's MarshalJSON does (RFC 3339 with
// nanoseconds, trailing zeros trimmed, an offset's seconds dropped) and
// declines the values that MarshalJSON refuses: a year outside 0-9999, or
// a zone offset of 24 hours or more. Those go to encoding/json, which
// fails the reply as it always did.
func appendTime(b []byte, t time.Time) ([]byte, bool) {
	if y := t.Year(); y < 0 || y > 9999 {
		return b, false
	}
	if _, off := t.Zone(); off <= -24*3600 || off >= 24*3600 {
		return b, false
	}
	b = append(b, '"')
	b = t.AppendFormat(b, time.RFC3339Nano)
	return append(b, '"'), true
}

const hex = "0123456789abcdef"

// plain marks the bytes appendString copies as they are: ASCII from
// U+0020 up, except '"' and '\\'. Every other byte is escaped or starts a
// multi-byte sequence that must be checked.
var plain = func() (t [256]bool) {
	for c := 0x20; c < utf8.RuneSelf; c++ {
		t[c] = c != '"' && c != '\\'
	}
	return t
}()

// appendString writes s as a JSON string exactly as encoding/json does
// with HTML escaping off: '"' and '\\' and the control characters escaped
// (\b, \f, \n, \r and \t by name, the others as \u00XX), invalid UTF-8
// replaced by \ufffd, and U+2028 and U+2029 escaped, since JavaScript
// before ES2019 took them for line ends inside a string.
func appendString(b []byte, s string) []byte {
	b = append(b, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		// Most bytes (ids, names, states) need no escape: one table
		// lookup each, and runs of them are copied whole (a fifth less
		// time for a page of Agents than comparing each byte four times,
		// BenchmarkAgentPage).
		if plain[c] {
			i++
			continue
		}
		if c < utf8.RuneSelf {
			b = append(b, s[start:i]...)
			switch c {
			case '\\', '"':
				b = append(b, '\\', c)
			case '\b':
				b = append(b, '\\', 'b')
			case '\f':
				b = append(b, '\\', 'f')
			case '\n':
				b = append(b, '\\', 'n')
			case '\r':
				b = append(b, '\\', 'r')
			case '\t':
				b = append(b, '\\', 't')
			default:
				b = append(b, '\\', 'u', '0', '0', hex[c>>4], hex[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			b = append(b, s[start:i]...)
			b = append(b, `\ufffd`...)
			i += size
			start = i
			continue
		}
		if r == '\u2028' || r == '\u2029' {
			b = append(b, s[start:i]...)
			b = append(b, '\\', 'u', '2', '0', '2', hex[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	b = append(b, s[start:]...)
	return append(b, '"')
}
