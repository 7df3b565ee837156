package digest

import (
	"strings"
	"testing"
)

func TestValid(t *testing.T) {
	hex := strings.Repeat("0123456789abcdef", 4)
	for _, tc := range []struct {
		name string
		s    string
		want bool
	}{
		{"lowercase", hex, true},
		{"all zero", strings.Repeat("0", 64), true},
		{"empty", "", false},
		{"one short", hex[:63], false},
		{"one long", hex + "0", false},
		{"uppercase", strings.ToUpper(hex), false},
		{"one uppercase digit", "A" + hex[1:], false},
		{"not hex", "g" + hex[1:], false},
		{"slash before 0", "/" + hex[1:], false},
		{"colon after 9", ":" + hex[1:], false},
		{"backquote before a", "`" + hex[1:], false},
		{"multi-byte", "é" + hex[2:], false},
	} {
		if got := Valid(tc.s); got != tc.want {
			t.Errorf("%s: Valid(%q) = %v, want %v", tc.name, tc.s, got, tc.want)
		}
	}
}
