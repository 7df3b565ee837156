package setuprunner

import (
	"io"
	"unicode/utf16"
	"unicode/utf8"

	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/exactjson"
	"github.com/openclaw/occ/internal/workspace"
)

// MaxPayloadBytes caps a payload. Four files of 16,384 bytes escaped as
// \u00XX take 393,216 bytes; the rest is room for the identity.
const MaxPayloadBytes = 400_000

// maxIDUnits caps id, namespaceId and agentId in UTF-16 code units, the
// unit of JavaScript's String.prototype.length that the reference counts.
const maxIDUnits = 256

// ParsePayload reads one payload from r (at most MaxPayloadBytes bytes)
// and checks it with the rules of the reference runner's steps 1 and 2:
//
//   - a JSON object whose keys are among id, namespaceId, agentId,
//     defaultsId, files and completed;
//   - id, namespaceId, agentId: non-empty strings of at most 256 UTF-16
//     code units, well-formed (no unpaired surrogate);
//   - completed: a boolean; defaultsId: absent or 64 lowercase hex digits;
//   - files: absent when completed is true; when completed is false an
//     object with at least one member, keys among the four workspace
//     names, values strings that satisfy workspace.CheckContent (empty
//     strings are valid: they create empty files).
//
// Two things are stricter than JSON.parse, on purpose: a payload holding
// invalid UTF-8 is refused (Node would have decoded it to U+FFFD and
// written that), and so is a repeated key (JavaScript keeps the last).
// OCC never produces either, and a runner that writes files should not
// guess which of two values was meant.
//
// Any failure wraps ErrFailed; the error never carries payload text.
func ParsePayload(r io.Reader) (workspace.Setup, error) {
	data, err := io.ReadAll(io.LimitReader(r, MaxPayloadBytes+1))
	if err != nil {
		return workspace.Setup{}, newFailure(stepPayload, "read", err)
	}
	if len(data) > MaxPayloadBytes {
		return workspace.Setup{}, newFailure(stepPayload, "too-large", nil)
	}
	if !utf8.Valid(data) {
		return workspace.Setup{}, newFailure(stepPayload, "invalid-utf8", nil)
	}
	v, err := decodeJSON(data)
	if err != nil {
		return workspace.Setup{}, newFailure(stepPayload, "invalid-json", nil)
	}
	if v.Kind != exactjson.Object {
		return workspace.Setup{}, newFailure(stepPayload, "not-an-object", nil)
	}
	var s workspace.Setup
	var seen [6]bool
	var filesValue *exactjson.Value
	for i := range v.Members {
		m := &v.Members[i]
		key := jsString(m.Key)
		slot := -1
		switch key {
		case "id":
			slot = 0
		case "namespaceId":
			slot = 1
		case "agentId":
			slot = 2
		case "defaultsId":
			slot = 3
		case "files":
			slot = 4
		case "completed":
			slot = 5
		default:
			return workspace.Setup{}, newFailure(stepPayload, "unknown-key", nil)
		}
		if seen[slot] {
			return workspace.Setup{}, newFailure(stepPayload, "duplicate-key", nil)
		}
		seen[slot] = true
		switch slot {
		case 0, 1, 2, 3:
			if m.Value.Kind != exactjson.String || isLone(m.Value) {
				return workspace.Setup{}, newFailure(stepPayload, "invalid-"+key, nil)
			}
			switch value := jsString(m.Value); slot {
			case 0:
				s.ID = value
			case 1:
				s.NamespaceID = value
			case 2:
				s.AgentID = value
			case 3:
				// An explicit "" is present and malformed; the struct
				// cannot tell it from absent, so check it here.
				if !digest.Valid(value) {
					return workspace.Setup{}, newFailure(stepPayload, "invalid-defaultsId", nil)
				}
				s.DefaultsID = value
			}
		case 4:
			filesValue = &m.Value
		case 5:
			if m.Value.Kind != exactjson.Bool {
				return workspace.Setup{}, newFailure(stepPayload, "invalid-completed", nil)
			}
			s.Completed = m.Value.True()
		}
	}
	if !seen[0] || !seen[1] || !seen[2] || !seen[5] {
		return workspace.Setup{}, newFailure(stepPayload, "missing-key", nil)
	}
	if filesValue != nil {
		if s.Completed {
			return workspace.Setup{}, newFailure(stepPayload, "files-with-completed", nil)
		}
		if filesValue.Kind != exactjson.Object {
			return workspace.Setup{}, newFailure(stepPayload, "invalid-files", nil)
		}
		s.Files = make(map[string]string, len(filesValue.Members))
		for _, m := range filesValue.Members {
			name := jsString(m.Key)
			if !workspace.ValidName(name) {
				return workspace.Setup{}, newFailure(stepPayload, "unknown-file", nil)
			}
			if _, dup := s.Files[name]; dup {
				return workspace.Setup{}, newFailure(stepPayload, "duplicate-file", nil)
			}
			if m.Value.Kind != exactjson.String {
				return workspace.Setup{}, newFailure(stepPayload, "invalid-file-content", nil)
			}
			s.Files[name] = jsString(m.Value)
		}
	}
	if err := validateSetup(s); err != nil {
		return workspace.Setup{}, err
	}
	return s, nil
}

// validateSetup applies the payload rules to a Setup built in process, so
// that Apply refuses exactly what ParsePayload refuses. A Go struct cannot
// say "files absent", so a completed setup must have no files at all.
func validateSetup(s workspace.Setup) error {
	for _, id := range [...]string{s.ID, s.NamespaceID, s.AgentID} {
		if !validIDString(id) {
			return newFailure(stepPayload, "invalid-identity", nil)
		}
	}
	if s.DefaultsID != "" && !digest.Valid(s.DefaultsID) {
		return newFailure(stepPayload, "invalid-defaultsId", nil)
	}
	if s.Completed {
		if len(s.Files) != 0 {
			return newFailure(stepPayload, "files-with-completed", nil)
		}
		return nil
	}
	if len(s.Files) == 0 {
		return newFailure(stepPayload, "no-files", nil)
	}
	for name, content := range s.Files {
		if !workspace.ValidName(name) {
			return newFailure(stepPayload, "unknown-file", nil)
		}
		// CheckContent refuses invalid UTF-8, which is how an unpaired
		// surrogate decodes, and NUL, and counts UTF-8 bytes as
		// Buffer.byteLength does.
		if workspace.CheckContent(content) != nil {
			return newFailure(stepPayload, "invalid-file-content", nil)
		}
	}
	return nil
}

// validIDString is the reference's check for id, namespaceId and agentId:
// a non-empty, well-formed string of at most 256 UTF-16 code units.
func validIDString(s string) bool {
	if s == "" || !utf8.ValidString(s) {
		return false
	}
	units := 0
	for _, r := range s {
		if units += utf16.RuneLen(r); units > maxIDUnits {
			return false
		}
	}
	return true
}
