// Package exactjson owns OCC's one hand-written reading of JSON text: the
// lexical scan (whitespace, strings, numbers, literals), the decoding of
// string literals, and a small tree parser for documents whose strings
// must be seen exactly.
//
// encoding/json is not enough for three readers: httpx's strict request
// body checker, workspace's initial-file rules and the setup runner's
// payload and marker. encoding/json silently turns invalid UTF-8 and
// unpaired surrogate escapes into U+FFFD, so a string that JavaScript
// treats as ill-formed (and the reference refuses, or never matches)
// would look legitimate. Here every string reports what it held (Flags)
// and is decoded in the Mode its reader needs:
//
//   - ReplaceInvalid: exactly as encoding/json decodes it;
//   - ReplaceSurrogates: unpaired surrogate escapes become U+FFFD, raw
//     bytes are kept as they are;
//   - JavaScript: as JSON.parse sees it, written in generalized UTF-8 (an
//     unpaired surrogate as its 3-byte form), so that the length in bytes
//     is what Node's Buffer.byteLength counts for it.
//
// Failure semantics: scanning functions return a *SyntaxError that names
// a byte offset and never quotes the input, so its text is safe to show a
// client. Functions documented as working on text already accepted (by
// ScanString, Parse or json.Valid) do not check syntax again and may panic
// on other input. Nothing here allocates for strings without escapes.
package exactjson
