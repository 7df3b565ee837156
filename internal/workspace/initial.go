package workspace

import (
	"encoding/json"
	"maps"
	"slices"
	"strings"

	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/exactjson"
)

// Request fields, as JSON pointers, that the errors below point at.
const (
	initialFilesPath = "/initialWorkspaceFiles"
	defaultsIDPath   = "/workspaceDefaultsId"
)

const initialFilesMessage = "Initial workspace files must use the four allowed names, valid Unicode without NUL, within 16 KiB per file."

// NormalizeInitialFiles validates the initialWorkspaceFiles of an Agent
// create request that was already decoded into a map. present says whether
// the field was in the request at all, because a decoded map cannot tell
// an absent field from an empty one:
//
//   - !present → (nil, nil): no setup;
//   - present with a nil map (the field was null) → error;
//   - an empty map → (nil, nil): no setup, no record;
//   - otherwise every key must be one of Names and every value must satisfy
//     the content rule; empty strings are valid (they create empty files).
//
// The result is a new map holding the same strings, byte for byte (no
// trimming, no line-ending changes). A failure is an errkind.Invalid with
// one message and details at /initialWorkspaceFiles/<key>, sorted by key:
// UNKNOWN_FIELD for a name outside Names (it is a closed object, and
// httpx reports keys outside a closed object that way), TOO_LONG and/or
// INVALID_VALUE for content. A null field is INVALID_TYPE at
// /initialWorkspaceFiles. At most errkind.MaxDetails details are kept.
//
// A map decoded by encoding/json has lost unpaired surrogates and invalid
// UTF-8 (both became U+FFFD), so this form is safe only behind a reader
// that rejects them, as httpx.ReadJSON does; NormalizeInitialFilesJSON
// checks them itself.
func NormalizeInitialFiles(raw map[string]string, present bool) (map[string]string, error) {
	if !present {
		return nil, nil
	}
	if raw == nil {
		return nil, invalidFiles(errkind.Detail{Path: initialFilesPath, Code: errkind.DetailInvalidType})
	}
	if len(raw) == 0 {
		return nil, nil
	}
	var c collector
	for _, key := range slices.Sorted(maps.Keys(raw)) {
		c.member(key, raw[key])
	}
	return c.result()
}

// NormalizeInitialFilesJSON is NormalizeInitialFiles for the raw JSON of
// the field, for a request type that declares it as json.RawMessage. It
// reads the JSON text itself, so nothing the reference would refuse is
// lost in decoding:
//
//   - empty or whitespace-only raw → (nil, nil): the field was absent;
//   - null, an array, a string, a number or a boolean → INVALID_TYPE at
//     /initialWorkspaceFiles; text that is not JSON → INVALID_VALUE there;
//   - {} → (nil, nil);
//   - per key (compared after unescaping), in document order: a name
//     outside Names → UNKNOWN_FIELD (its value is not looked at); a name
//     seen before → INVALID_VALUE, as httpx reports duplicate keys; a
//     value that is not a string (null included) → INVALID_TYPE; a string
//     whose raw bytes are invalid UTF-8, whose escapes leave an unpaired
//     surrogate (encoding/json would silently turn either into U+FFFD) or
//     that holds U+0000 → INVALID_VALUE; one longer than MaxFileBytes →
//     TOO_LONG, counting an unpaired surrogate as 3 bytes as Node's
//     Buffer.byteLength does. Both codes can apply to one string.
//
// Strings are decoded exactly: "\r\n" stays CRLF, "\u00e9" and a raw "é"
// give the same bytes.
func NormalizeInitialFilesJSON(raw json.RawMessage) (map[string]string, error) {
	s := string(raw)
	if exactjson.SkipSpace(s, 0) == len(s) {
		return nil, nil
	}
	// json.Valid decides what is JSON, as it always has (its nesting
	// limit included); Parse, given the same limit, then cannot fail.
	if !json.Valid(raw) {
		return nil, invalidFiles(errkind.Detail{Path: initialFilesPath, Code: errkind.DetailInvalidValue})
	}
	v, err := exactjson.Parse(s, jsonValidDepth)
	if err != nil {
		return nil, invalidFiles(errkind.Detail{Path: initialFilesPath, Code: errkind.DetailInvalidValue})
	}
	if v.Kind != exactjson.Object {
		return nil, invalidFiles(errkind.Detail{Path: initialFilesPath, Code: errkind.DetailInvalidType})
	}
	var c collector
	seen := make(map[string]bool, len(Names))
	for _, m := range v.Members {
		// A key is decoded as encoding/json decodes it, so that a
		// detail's path names an odd key (one with an unpaired surrogate,
		// say) the way httpx would. Names are plain ASCII, so comparing
		// them is unaffected.
		key := m.Key.Str(exactjson.ReplaceInvalid)
		switch {
		case !ValidName(key):
			c.add(key, errkind.DetailUnknownField)
		case seen[key]:
			c.add(key, errkind.DetailInvalidValue)
		case m.Value.Kind != exactjson.String:
			seen[key] = true
			c.add(key, errkind.DetailInvalidType)
		default:
			seen[key] = true
			// JavaScript mode keeps the bytes the reference would count
			// and refuse: invalid UTF-8 stays, an unpaired surrogate is
			// its 3-byte form, so CheckContent refuses both and counts
			// them as Buffer.byteLength does.
			c.member(key, m.Value.Str(exactjson.JavaScript))
		}
	}
	return c.result()
}

// jsonValidDepth is the nesting json.Valid accepts (encoding/json's
// limit of 10000 containers), so Parse accepts all it does.
const jsonValidDepth = 10000

// collector gathers valid files and the details of invalid ones.
type collector struct {
	files   map[string]string
	details []errkind.Detail
}

func (c *collector) member(key, value string) {
	if !ValidName(key) {
		c.add(key, errkind.DetailUnknownField)
		return
	}
	if err := CheckContent(value); err != nil {
		for _, code := range err.(*ContentError).Codes() {
			c.add(key, code)
		}
		return
	}
	if c.files == nil {
		c.files = make(map[string]string, len(Names))
	}
	c.files[key] = value
}

func (c *collector) add(key, code string) {
	if len(c.details) < errkind.MaxDetails {
		c.details = append(c.details, errkind.Detail{Path: filePath(key), Code: code})
	}
}

func (c *collector) result() (map[string]string, error) {
	if len(c.details) > 0 {
		return nil, invalidFiles(c.details...)
	}
	return c.files, nil // nil when there were no members
}

func invalidFiles(details ...errkind.Detail) error {
	return errkind.InvalidDetails(initialFilesMessage, details...)
}

// filePath is the JSON pointer (RFC 6901) of one key of the field. An
// unknown key may hold anything the client sent; the pointer is made valid
// UTF-8 so that the error body stays well-formed.
func filePath(key string) string {
	return initialFilesPath + "/" + pointerEscaper.Replace(strings.ToValidUTF8(key, "\uFFFD"))
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// ValidateDefaultsID checks the form of a workspaceDefaultsId the client
// sent: exactly 64 lowercase hexadecimal characters. An absent field is the
// caller's business; an empty string is refused.
func ValidateDefaultsID(s string) error {
	if !digest.Valid(s) {
		return errkind.InvalidDetails("Workspace defaults identity must be 64 lowercase hexadecimal characters.",
			errkind.Detail{Path: defaultsIDPath, Code: errkind.DetailInvalidFormat})
	}
	return nil
}

// CheckDefaultsID is ValidateDefaultsID followed by a comparison with
// DefaultsID: a well-formed identity of other defaults means the form was
// rendered from another OCC release, so the operator saw other texts than
// the ones setup would keep; 409 RESOURCE_CONFLICT asks for a reload.
func CheckDefaultsID(s string) error {
	if err := ValidateDefaultsID(s); err != nil {
		return err
	}
	if s != DefaultsID {
		return errkind.WithCode(errkind.Conflict, errkind.CodeResourceConflict,
			"Workspace defaults changed. Reload the create form before submitting.")
	}
	return nil
}
