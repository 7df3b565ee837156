package gwtest

import (
	"os"
	"path/filepath"
	"testing"
)

// WriteFile writes content to a new 0600 file in a fresh t.TempDir() and
// returns its absolute path: key, token and CA files for Targets.
func WriteFile(t testing.TB, name string, content []byte) string {
	t.Helper()
	p := filepath.Join(t.TempDir(), name)
	if err := os.WriteFile(p, content, 0o600); err != nil {
		t.Fatalf("gwtest: write %s: %v", name, err)
	}
	return p
}

// ReplaceFile atomically replaces the file at path (write a sibling, then
// rename), the way a projected Secret update or a careful operator rotates
// a key: a reader sees the old bytes or the new ones, never a mix.
func ReplaceFile(t testing.TB, path string, content []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, content, 0o600); err != nil {
		t.Fatalf("gwtest: write %s: %v", tmp, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatalf("gwtest: rename %s: %v", tmp, err)
	}
}
