package workspace

import (
	"strings"
	"testing"

	"github.com/openclaw/occ/internal/errkind"
)

func TestValidName(t *testing.T) {
	tests := []struct {
		name string
		want bool
	}{
		{"AGENTS.md", true},
		{"SOUL.md", true},
		{"IDENTITY.md", true},
		{"USER.md", true},
		{"agents.md", false}, // exact, no case folding
		{"AGENTS.MD", false},
		{"./AGENTS.md", false},
		{"AGENTS.md ", false},
		{"MEMORY.md", false}, // a real OpenClaw file, but not one of the four
		{"", false},
	}
	for _, tt := range tests {
		if got := ValidName(tt.name); got != tt.want {
			t.Errorf("ValidName(%q) = %v, want %v", tt.name, got, tt.want)
		}
	}
	diff(t, "Names", [4]string{"AGENTS.md", "SOUL.md", "IDENTITY.md", "USER.md"}, Names)
	for _, n := range Names {
		if !ValidName(n) {
			t.Errorf("ValidName(%q) = false for a member of Names", n)
		}
	}
}

func TestCheckContent(t *testing.T) {
	const (
		tooLong = errkind.DetailTooLong
		invalid = errkind.DetailInvalidValue
	)
	tests := []struct {
		name  string
		in    string
		codes []string
	}{
		{"empty", "", nil},
		{"markdown with CRLF and trailing spaces", "# T  \r\n\r\nbody \t\r\n", nil},
		{"U+FFFD itself", "a\uFFFDb", nil},
		{"U+FFFD at the limit", strings.Repeat("a", MaxFileBytes-3) + "\uFFFD", nil},
		{"other controls", "\x01\x1f\x7f\u0085\u2028\u2029\uFEFF", nil},
		{"supplementary plane", "😀𝄞", nil},
		{"16384 ASCII bytes", strings.Repeat("a", MaxFileBytes), nil},
		{"16385 ASCII bytes", strings.Repeat("a", MaxFileBytes+1), []string{tooLong}},
		// 5,461 × 3 bytes = 16,383; one more byte reaches the limit.
		{"16384 bytes of euros and one ASCII", euros(5461) + "a", nil},
		{"16385 bytes of euros and two ASCII", euros(5461) + "ab", []string{tooLong}},
		{"5462 euros (16386 bytes, 5462 runes)", euros(5462), []string{tooLong}},
		{"4096 four-byte runes", strings.Repeat("😀", 4096), nil},
		{"4096 four-byte runes and one byte", strings.Repeat("😀", 4096) + "a", []string{tooLong}},
		{"NUL alone", "\x00", []string{invalid}},
		{"NUL inside", "a\x00b", []string{invalid}},
		{"NUL at the end of a full file", strings.Repeat("a", MaxFileBytes-1) + "\x00", []string{invalid}},
		{"lone continuation byte", "a\x80b", []string{invalid}},
		{"truncated sequence", "\xe2\x82", []string{invalid}},
		{"overlong encoding", "\xc0\xaf", []string{invalid}},
		{"encoded surrogate (WTF-8)", "\xed\xa0\x80", []string{invalid}},
		{"beyond U+10FFFF", "\xf4\x90\x80\x80", []string{invalid}},
		{"0xFF", "\xff", []string{invalid}},
		{"too long and invalid", strings.Repeat("a", MaxFileBytes) + "\xff", []string{tooLong, invalid}},
		{"too long and NUL at the very end", strings.Repeat("a", 2*MaxFileBytes) + "\x00", []string{tooLong, invalid}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			err := CheckContent(tt.in)
			var got []string
			if err != nil {
				ce, isContent := err.(*ContentError)
				if !isContent {
					t.Fatalf("CheckContent error is %T, want *ContentError", err)
				}
				got = ce.Codes()
			}
			diff(t, "codes", tt.codes, got)

			var want []errkind.Detail
			for _, c := range tt.codes {
				want = append(want, errkind.Detail{Path: "/content", Code: c})
			}
			diff(t, "details", want, ContentDetails("/content", tt.in))
		})
	}
}

func TestContentErrorText(t *testing.T) {
	// The text is fixed per case and never repeats the content.
	tests := []struct {
		err  ContentError
		want string
	}{
		{ContentError{TooLong: true}, "workspace file content is longer than 16384 bytes"},
		{ContentError{Invalid: true}, "workspace file content is not valid UTF-8 without NUL"},
		{ContentError{TooLong: true, Invalid: true}, "workspace file content is longer than 16384 bytes and is not valid UTF-8 without NUL"},
	}
	for _, tt := range tests {
		diff(t, "Error()", tt.want, tt.err.Error())
	}
	secret := "top secret \x00" + strings.Repeat("x", MaxFileBytes)
	if err := CheckContent(secret); err == nil || strings.Contains(err.Error(), "secret") {
		t.Errorf("CheckContent error %v: want an error that does not quote the content", err)
	}
}
