package workspace

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// benchInputs are 16 KiB texts at the limit: Markdown like the defaults
// (mostly ASCII, some multi-byte punctuation) and text that is all
// three-byte runes, where the ASCII fast paths do not help.
func benchInputs() map[string]string {
	var md strings.Builder
	for md.Len() < MaxFileBytes {
		md.WriteString(Defaults()[SoulMD])
	}
	markdown := md.String()[:MaxFileBytes]
	for !utf8.ValidString(markdown) { // do not cut a rune in half
		markdown = markdown[:len(markdown)-1]
	}
	return map[string]string{
		"markdown": markdown,
		"euros":    euros(5461) + "a",
	}
}

var sinkErr error
var sinkBool bool

func BenchmarkCheckContent16KiB(b *testing.B) {
	for name, s := range benchInputs() {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				sinkErr = CheckContent(s)
			}
			if sinkErr != nil {
				b.Fatal(sinkErr)
			}
		})
	}
}

// BenchmarkValidString16KiB is the floor: CheckContent cannot be faster
// than the UTF-8 validation it includes.
func BenchmarkValidString16KiB(b *testing.B) {
	for name, s := range benchInputs() {
		b.Run(name, func(b *testing.B) {
			b.SetBytes(int64(len(s)))
			for b.Loop() {
				sinkBool = utf8.ValidString(s)
			}
		})
	}
}
