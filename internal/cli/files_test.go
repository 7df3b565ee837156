package cli

import (
	"errors"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestReadContentLimit: occ files put reads at most 1 MiB of content, from
// standard input or a file; one byte more is a usage error, never content
// cut to size.
func TestReadContentLimit(t *testing.T) {
	dir := t.TempDir()
	file := func(name string, n int) string { return sizedFile(t, dir, name, "f", n) }
	type result struct {
		Len  int
		Exit int // 0: read
		Msg  string
	}
	tooLarge := result{Exit: exitUsage, Msg: "the content is larger than 1048576 bytes; a workspace file holds at most 16,384"}
	tests := []struct {
		name, path, stdin string
		want              result
	}{
		{"stdin at the limit", "-", strings.Repeat("s", maxFileBytes), result{Len: maxFileBytes}},
		{"stdin one past", "-", strings.Repeat("s", maxFileBytes+1), tooLarge},
		{"file at the limit", file("at", maxFileBytes), "", result{Len: maxFileBytes}},
		{"file one past", file("past", maxFileBytes+1), "", tooLarge},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			content, err := readContent(deps{stdin: strings.NewReader(tc.stdin)}, tc.path)
			got := result{Len: len(content)}
			var ee *exitError
			if errors.As(err, &ee) {
				got.Exit, got.Msg = ee.code, ee.err.Error()
			} else if err != nil {
				t.Fatalf("readContent: %v, want an exit error", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("readContent (-want +got):\n%s", diff)
			}
		})
	}
}

// sizedFile writes n copies of fill to dir/name (mode 0600) and returns
// its path: the inputs of the size limit tests.
func sizedFile(t *testing.T, dir, name, fill string, n int) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(strings.Repeat(fill, n)), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}
