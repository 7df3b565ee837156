package workspace

import (
	"strings"
	"unicode/utf8"

	"github.com/openclaw/occ/internal/errkind"
)

// ContentError says how a text breaks the content rule. Both fields can be
// set. It never carries the text: callers log and return it freely.
type ContentError struct {
	TooLong bool // more than MaxFileBytes UTF-8 bytes
	Invalid bool // not well-formed UTF-8, or contains U+0000
}

func (e *ContentError) Error() string {
	switch {
	case e.TooLong && e.Invalid:
		return "workspace file content is longer than 16384 bytes and is not valid UTF-8 without NUL"
	case e.TooLong:
		return "workspace file content is longer than 16384 bytes"
	default:
		return "workspace file content is not valid UTF-8 without NUL"
	}
}

// Codes returns the detail codes for the broken parts of the rule:
// TOO_LONG before INVALID_VALUE.
func (e *ContentError) Codes() []string {
	codes := make([]string, 0, 2)
	if e.TooLong {
		codes = append(codes, errkind.DetailTooLong)
	}
	if e.Invalid {
		codes = append(codes, errkind.DetailInvalidValue)
	}
	return codes
}

// CheckContent applies the content rule to s and returns nil or a
// *ContentError. The rule is the reference's "well-formed Unicode, no NUL,
// at most 16,384 UTF-8 bytes" for Go strings: a string holding invalid
// UTF-8 (including encoded surrogates, which is how an unpaired surrogate
// would arrive as bytes) breaks it; U+FFFD itself is an ordinary character.
//
// The whole string is always examined, even when it is already too long, so
// that a client learns about both problems at once.
func CheckContent(s string) error {
	tooLong := len(s) > MaxFileBytes
	// Two library passes beat one hand-written loop: IndexByte is
	// vectorized and ValidString has a word-at-a-time ASCII path.
	invalid := strings.IndexByte(s, 0) >= 0 || !utf8.ValidString(s)
	if !tooLong && !invalid {
		return nil
	}
	return &ContentError{TooLong: tooLong, Invalid: invalid}
}

// ContentDetails returns the field details for s at the JSON pointer path
// (for example "/content"), or nil when s satisfies the content rule.
func ContentDetails(path, s string) []errkind.Detail {
	err := CheckContent(s)
	if err == nil {
		return nil
	}
	codes := err.(*ContentError).Codes()
	details := make([]errkind.Detail, len(codes))
	for i, c := range codes {
		details[i] = errkind.Detail{Path: path, Code: c}
	}
	return details
}
