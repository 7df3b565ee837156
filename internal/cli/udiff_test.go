package cli

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestUnifiedDiff(t *testing.T) {
	tests := []struct {
		name, a, b, want string
	}{
		{"equal", "x\n", "x\n", ""},
		{"one line changed", "a\nb\nc\n", "a\nB\nc\n", "--- theirs\n+++ yours\n@@ -1,3 +1,3 @@\n a\n-b\n+B\n c\n"},
		{"added to empty", "", "new\n", "--- theirs\n+++ yours\n@@ -0,0 +1 @@\n+new\n"},
		{"no final newline", "a\n", "a\nb", "--- theirs\n+++ yours\n@@ -1 +1,2 @@\n a\n+b\n\\ No newline at end of file\n"},
		{"two hunks", "1\n2\n3\n4\n5\n6\n7\n8\n9\n10\n11\n12\n", "1\nX\n3\n4\n5\n6\n7\n8\n9\n10\nY\n12\n",
			"--- theirs\n+++ yours\n@@ -1,5 +1,5 @@\n 1\n-2\n+X\n 3\n 4\n 5\n@@ -8,5 +8,5 @@\n 8\n 9\n 10\n-11\n+Y\n 12\n"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			if diff := cmp.Diff(tt.want, unifiedDiff("theirs", "yours", tt.a, tt.b)); diff != "" {
				t.Errorf("unifiedDiff(%q, %q) (-want +got):\n%s", tt.a, tt.b, diff)
			}
		})
	}
}
