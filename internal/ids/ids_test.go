package ids

import (
	"strings"
	"testing"
)

func TestNewIsValid(t *testing.T) {
	seen := map[string]bool{}
	for range 1000 {
		id := New(Agent)
		if !Valid(Agent, id) {
			t.Fatalf("New(%q) = %q is not Valid", Agent, id)
		}
		if seen[id] {
			t.Fatalf("New returned %q twice", id)
		}
		seen[id] = true
	}
}

func TestValid(t *testing.T) {
	const good = "0b6f0a3c-2f1e-4c55-9a7d-1d2c3b4a5f60"
	tests := []struct {
		name, prefix, id string
		want             bool
	}{
		{"valid", Namespace, Namespace + good, true},
		{"wrong prefix", Agent, Namespace + good, false},
		{"no prefix", Namespace, good, false},
		{"uppercase", Namespace, Namespace + strings.ToUpper(good), false},
		{"version 1", Namespace, Namespace + "0b6f0a3c-2f1e-1c55-9a7d-1d2c3b4a5f60", false},
		{"bad variant", Namespace, Namespace + "0b6f0a3c-2f1e-4c55-7a7d-1d2c3b4a5f60", false},
		{"too short", Namespace, Namespace + good[:35], false},
		{"too long", Namespace, Namespace + good + "0", false},
		{"trailing newline", Namespace, Namespace + good + "\n", false},
		{"empty", Namespace, "", false},
	}
	for _, tc := range tests {
		if got := Valid(tc.prefix, tc.id); got != tc.want {
			t.Errorf("%s: Valid(%q, %q) = %v, want %v", tc.name, tc.prefix, tc.id, got, tc.want)
		}
	}
}

func FuzzValid(f *testing.F) {
	f.Add("ns_0b6f0a3c-2f1e-4c55-9a7d-1d2c3b4a5f60")
	f.Add("ns_")
	f.Fuzz(func(t *testing.T, s string) {
		if Valid(Namespace, s) && (len(s) != 39 || !strings.HasPrefix(s, Namespace) || strings.ToLower(s) != s) {
			t.Fatalf("Valid accepted %q", s)
		}
	})
}
