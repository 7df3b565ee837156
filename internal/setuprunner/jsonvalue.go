package setuprunner

import "github.com/openclaw/occ/internal/exactjson"

// The runner reads three JSON documents whose strings must be compared
// exactly as the reference runner (JavaScript's JSON.parse) sees them: the
// payload, the marker and an OpenClaw package.json. encoding/json cannot
// be used for the first two because it silently replaces invalid UTF-8 and
// unpaired surrogate escapes with U+FFFD, which would make a string that
// JavaScript treats as ill-formed (and refuses, or never matches) look
// like a legitimate one. exactjson keeps strings exact, keeps object
// members in document order (duplicates included) and says whether a
// string held an unpaired surrogate.

// maxJSONDepth bounds nesting. Every document the runner reads is flat
// (the payload nests one object); a deeper one is refused by the schema
// anyway, so refusing it early changes no outcome and bounds recursion.
const maxJSONDepth = 64

// decodeJSON parses data, which must hold exactly one JSON value with
// optional surrounding whitespace (space, tab, LF, CR, as JSON.parse
// allows; a BOM is not whitespace there either).
func decodeJSON(data []byte) (exactjson.Value, error) {
	return exactjson.Parse(string(data), maxJSONDepth)
}

// jsString is a string value as JSON.parse produces it, in generalized
// UTF-8: an unpaired surrogate escape is its 3-byte form (ED A0 80–ED BF
// BF), which is invalid UTF-8.
func jsString(v exactjson.Value) string { return v.Str(exactjson.JavaScript) }

// isLone reports whether a string value came with an unpaired surrogate
// escape.
func isLone(v exactjson.Value) bool { return v.Flags&exactjson.LoneSurrogate != 0 }
