package secretfile_test

import (
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/secretfile"
)

// secretValue is the content of the good files; no error may contain it.
const secretValue = "s3cret-VALUE_0123456789"

// result is what a read returned: the content, or only whether it failed
// (error texts name paths and are checked for secret bytes separately).
type result struct {
	Content string
	Err     bool
}

func writeFile(t *testing.T, dir, name, content string) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// TestReaders: every reader applies the path, file-type and size rules;
// the secret readers also apply the content rule; only ReadMountedSecret
// and ReadCABundle follow a symlink; no error quotes the file.
func TestReaders(t *testing.T) {
	dir := t.TempDir()
	good := writeFile(t, dir, "good", secretValue)
	link := filepath.Join(dir, "link")
	if err := os.Symlink(good, link); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(dir, "fifo")
	if err := syscall.Mkfifo(fifo, 0o600); err != nil {
		t.Fatal(err)
	}
	fifoLink := filepath.Join(dir, "fifolink")
	if err := os.Symlink(fifo, fifoLink); err != nil {
		t.Fatal(err)
	}
	maxSecret := strings.Repeat("k", secretfile.MaxSecretBytes)
	paths := map[string]string{
		"good":                good,
		"relative":            "good",
		"symlink":             link,
		"directory":           dir,
		"FIFO":                fifo,
		"symlink to a FIFO":   fifoLink,
		"missing":             filepath.Join(dir, "nope"),
		"empty":               writeFile(t, dir, "empty", ""),
		"trailing newline":    writeFile(t, dir, "nl", secretValue+"\n"),
		"space inside":        writeFile(t, dir, "space", secretValue[:4]+" "+secretValue[4:]),
		"non-ASCII":           writeFile(t, dir, "utf8", secretValue+"é"),
		"secret at the max":   writeFile(t, dir, "max", maxSecret),
		"secret one past":     writeFile(t, dir, "big", maxSecret+"k"),
		"CA at the max":       writeFile(t, dir, "ca-max", strings.Repeat("c", secretfile.MaxCABytes)),
		"CA one past the max": writeFile(t, dir, "ca-big", strings.Repeat("c", secretfile.MaxCABytes+1)),
	}
	ok := func(s string) result { return result{Content: s} }
	fail := result{Err: true}
	readers := []struct {
		name string
		read func(string) ([]byte, error)
		want map[string]result // cases not listed fail
	}{
		{"ReadSecret", secretfile.ReadSecret, map[string]result{
			"good":              ok(secretValue),
			"secret at the max": ok(maxSecret),
		}},
		{"ReadMountedSecret", secretfile.ReadMountedSecret, map[string]result{
			"good":              ok(secretValue),
			"symlink":           ok(secretValue),
			"secret at the max": ok(maxSecret),
		}},
		{"ReadCABundle", secretfile.ReadCABundle, map[string]result{
			"good":              ok(secretValue),
			"symlink":           ok(secretValue),
			"empty":             ok(""),
			"trailing newline":  ok(secretValue + "\n"),
			"space inside":      ok(secretValue[:4] + " " + secretValue[4:]),
			"non-ASCII":         ok(secretValue + "é"),
			"secret at the max": ok(maxSecret),
			"secret one past":   ok(maxSecret + "k"),
			"CA at the max":     ok(strings.Repeat("c", secretfile.MaxCABytes)),
		}},
	}
	for _, r := range readers {
		for name, p := range paths {
			t.Run(r.name+"/"+name, func(t *testing.T) {
				want, listed := r.want[name]
				if !listed {
					want = fail
				}
				b, err := r.read(p)
				got := result{Content: string(b), Err: err != nil}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("%s(%s) (-want +got):\n%s", r.name, name, diff)
				}
				if err != nil && strings.Contains(err.Error(), secretValue[:6]) {
					t.Errorf("%s(%s) error quotes the file: %v", r.name, name, err)
				}
			})
		}
	}
}

// TestCheckSecret: the content rule on bytes read some other way.
func TestCheckSecret(t *testing.T) {
	for _, tt := range []struct {
		name string
		in   string
		ok   bool
	}{
		{"printable ASCII", "!abc~", true},
		{"at the max", strings.Repeat("k", secretfile.MaxSecretBytes), true},
		{"empty", "", false},
		{"one past the max", strings.Repeat("k", secretfile.MaxSecretBytes+1), false},
		{"space", "ab cd", false},
		{"trailing newline", "abcd\n", false},
		{"tab", "ab\tcd", false},
		{"DEL", "abcd\x7f", false},
		{"non-ASCII", "abcdé", false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			err := secretfile.CheckSecret([]byte(tt.in))
			if (err == nil) != tt.ok {
				t.Errorf("CheckSecret(%.20q) = %v, want ok %v", tt.in, err, tt.ok)
			}
			if err != nil && len(tt.in) > 0 && strings.Contains(err.Error(), tt.in) {
				t.Errorf("CheckSecret(%.20q) error quotes the input: %v", tt.in, err)
			}
		})
	}
}
