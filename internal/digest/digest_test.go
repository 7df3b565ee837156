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

func TestOf(t *testing.T) {
	// Known SHA-256 values (FIPS 180-2 examples); the string and byte
	// forms must agree, and the result must be what Valid accepts.
	for _, tc := range []struct{ in, want string }{
		{"", "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855"},
		{"abc", "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"},
	} {
		if got := Of(tc.in); got != tc.want || !Valid(got) {
			t.Errorf("Of(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got := Of([]byte(tc.in)); got != tc.want {
			t.Errorf("Of([]byte(%q)) = %q, want %q", tc.in, got, tc.want)
		}
	}
}
