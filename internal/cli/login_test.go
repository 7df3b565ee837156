package cli

import (
	"errors"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"
)

// TestSecretInputLimits: a password on standard input and a key file are
// read up to 4096 bytes; one byte more is a usage error that says so and
// quotes nothing of the input.
func TestSecretInputLimits(t *testing.T) {
	dir := t.TempDir()
	keyFile := func(name string, n int) string { return sizedFile(t, dir, name, "k", n) }
	password := func(n int) func() (string, error) {
		return func() (string, error) {
			return readPassword(deps{stdin: strings.NewReader(strings.Repeat("p", n))}, true)
		}
	}
	key := func(path string) func() (string, error) {
		return func() (string, error) { return readSecretFile(path) }
	}
	type result struct {
		Len  int
		Exit int // 0: read
		Msg  string
	}
	past := keyFile("past", maxSecretBytes+1)
	tests := []struct {
		name string
		read func() (string, error)
		want result
	}{
		{"password at the limit", password(maxSecretBytes), result{Len: maxSecretBytes}},
		{"password one past", password(maxSecretBytes + 1), result{Exit: exitUsage, Msg: "the password on standard input is longer than 4096 bytes"}},
		{"key file at the limit", key(keyFile("at", maxSecretBytes)), result{Len: maxSecretBytes}},
		{"key file one past", key(past), result{Exit: exitUsage, Msg: "the key file " + past + " is longer than 4096 bytes"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			s, err := tc.read()
			got := result{Len: len(s)}
			var ee *exitError
			if errors.As(err, &ee) {
				got.Exit, got.Msg = ee.code, ee.err.Error()
			} else if err != nil {
				t.Fatalf("read: %v, want an exit error", err)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("(-want +got):\n%s", diff)
			}
		})
	}
}
