package agentdir

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/workspace"
)

func TestHash(t *testing.T) {
	// sha256("agent-1") begins 6ff3b3bd11c4 (printf agent-1 | sha256sum).
	if got := Hash("agent-1"); got != "6ff3b3bd11c4" {
		t.Errorf("Hash(agent-1) = %q", got)
	}
}

func TestEnsureIsOnceAndKeepsTheToken(t *testing.T) {
	d := Dir(t.TempDir())
	if err := d.Ensure(Info{AgentID: "a1", NamespaceID: "n1"}); err != nil {
		t.Fatal(err)
	}
	tok, err := d.Token()
	if err != nil {
		t.Fatal(err)
	}
	fi, err := os.Stat(d.Path(FileToken))
	if err != nil || fi.Mode().Perm() != 0o600 {
		t.Fatalf("token file: %v, mode %v; want 0600", err, fi.Mode())
	}
	// A second Ensure with other values changes neither file.
	if err := d.Ensure(Info{AgentID: "other", NamespaceID: "other"}); err != nil {
		t.Fatal(err)
	}
	info, err := d.Info()
	if diff := cmp.Diff(Info{AgentID: "a1", NamespaceID: "n1"}, info); err != nil || diff != "" {
		t.Errorf("Info() = %v, (-want +got):\n%s", err, diff)
	}
	again, err := d.EnsureToken()
	if err != nil || again != tok {
		t.Errorf("EnsureToken replaced the token (err %v)", err)
	}
}

// TestEnsureTokenRace: callers racing to create a new Agent's token all
// get the one token that was created, whole (before, a loser could read
// the file between its creation and its write, and refuse it as
// malformed, or fail on its exclusive create), and no temporary file is
// left beside it. The same holds on a filesystem without hard links,
// where the token is created exclusively under its own name and losers
// wait for the winner's write.
func TestEnsureTokenRace(t *testing.T) {
	t.Run("link", func(t *testing.T) { ensureTokenRace(t) })
	t.Run("no hard links", func(t *testing.T) {
		withoutHardLinks(t)
		ensureTokenRace(t)
	})
}

func ensureTokenRace(t *testing.T) {
	for round := range 20 {
		d := Dir(t.TempDir())
		const n = 8
		type result struct {
			tok string
			err error
		}
		results := make(chan result, n)
		start := make(chan struct{})
		for range n {
			go func() {
				<-start
				tok, err := d.EnsureToken()
				results <- result{tok, err}
			}()
		}
		close(start)
		var first string
		for range n {
			r := <-results
			if r.err != nil {
				t.Fatalf("round %d: EnsureToken: %v", round, r.err)
			}
			if first == "" {
				first = r.tok
			}
			if r.tok != first {
				t.Fatalf("round %d: two tokens for one Agent", round)
			}
		}
		if names := dirNames(t, string(d)); !cmp.Equal([]string{FileToken}, names) {
			t.Fatalf("round %d: the directory after the race holds %q, want only %s", round, names, FileToken)
		}
	}
}

// withoutHardLinks makes link fail as it does on a filesystem without
// hard links (FAT answers EPERM), for the rest of t. A seam, because the
// test machine has no such filesystem (its kernel has no FAT driver); the
// real link path is what the other tests run.
func withoutHardLinks(t *testing.T) {
	t.Helper()
	saved := link
	link = func(oldname, newname string) error {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EPERM}
	}
	t.Cleanup(func() { link = saved })
}

// TestEnsureTokenWithoutHardLinks: where link(2) is refused for the
// filesystem (EPERM, ENOTSUP, ENOSYS, EXDEV), the token is still created,
// whole, 0600, once, with no temporary file left; before, every new Agent
// failed there with "create token file". Another link failure is still an
// error.
func TestEnsureTokenWithoutHardLinks(t *testing.T) {
	saved := link
	t.Cleanup(func() { link = saved })
	for _, errno := range []syscall.Errno{syscall.EPERM, syscall.ENOTSUP, syscall.ENOSYS, syscall.EXDEV} {
		link = func(oldname, newname string) error {
			return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: errno}
		}
		d := Dir(t.TempDir())
		tok, err := d.EnsureToken()
		if err != nil {
			t.Fatalf("%v: EnsureToken: %v", errno, err)
		}
		if got, err := d.Token(); err != nil || got != tok {
			t.Errorf("%v: Token() after EnsureToken = %v (same token: %t)", errno, err, got == tok)
		}
		if fi, err := os.Lstat(d.Path(FileToken)); err != nil || fi.Mode() != 0o600 {
			t.Errorf("%v: token file: %v, mode %v; want a regular file, 0600", errno, err, fi.Mode())
		}
		if again, err := d.EnsureToken(); err != nil || again != tok {
			t.Errorf("%v: a second EnsureToken replaced the token (err %v)", errno, err)
		}
		if names := dirNames(t, string(d)); !cmp.Equal([]string{FileToken}, names) {
			t.Errorf("%v: the directory holds %q, want only %s", errno, names, FileToken)
		}
	}
	link = func(oldname, newname string) error {
		return &os.LinkError{Op: "link", Old: oldname, New: newname, Err: syscall.EIO}
	}
	d := Dir(t.TempDir())
	if _, err := d.EnsureToken(); !errors.Is(err, syscall.EIO) {
		t.Errorf("EnsureToken with link failing EIO = %v, want that error", err)
	}
	if names := dirNames(t, string(d)); len(names) != 0 {
		t.Errorf("after a failed EnsureToken the directory holds %q", names)
	}
}

// TestEnsureTokenWaitsForAWriteUnderWay: without hard links the token is
// created under its own name and then written, so a caller may find it
// empty; a fresh short file is waited on (tokenWait) and its token
// returned, not refused as malformed.
func TestEnsureTokenWaitsForAWriteUnderWay(t *testing.T) {
	const content = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	d := Dir(t.TempDir())
	write(t, d.Path(FileToken), "", 0o600)
	go func() {
		time.Sleep(200 * time.Millisecond)
		f, err := os.OpenFile(d.Path(FileToken), os.O_WRONLY, 0)
		if err == nil {
			_, _ = f.WriteString(content)
			_ = f.Close()
		}
	}()
	if tok, err := d.EnsureToken(); err != nil || tok != content {
		t.Errorf("EnsureToken during another caller's write = %v (the writer's token: %t)", err, tok == content)
	}
}

// TestEnsureTokenRemovesStaleTemps: a temporary token file a crash left
// (between the link and its removal it is a second copy of the secret) is
// removed by the next EnsureToken, whether the token exists or not, once
// it is older than staleTokenTemp; a fresh one, which may be a live
// concurrent caller's, and files of other names are kept.
func TestEnsureTokenRemovesStaleTemps(t *testing.T) {
	const content = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	for _, withToken := range []bool{true, false} {
		d := Dir(t.TempDir())
		if withToken {
			write(t, d.Path(FileToken), content, 0o600)
		}
		old := time.Now().Add(-staleTokenTemp - time.Minute)
		for _, name := range []string{".token.tmp-123", ".token.tmp-456", ".other.tmp-1"} {
			write(t, d.Path(name), content, 0o600)
			if err := os.Chtimes(d.Path(name), old, old); err != nil {
				t.Fatal(err)
			}
		}
		write(t, d.Path(".token.tmp-789"), content, 0o600) // fresh
		tok, err := d.EnsureToken()
		if err != nil {
			t.Fatalf("token present %t: EnsureToken: %v", withToken, err)
		}
		if withToken && tok != content {
			t.Errorf("EnsureToken replaced the existing token")
		}
		want := []string{".other.tmp-1", ".token.tmp-789", FileToken}
		if names := dirNames(t, string(d)); !cmp.Equal(want, names) {
			t.Errorf("token present %t: the directory holds %q, want %q", withToken, names, want)
		}
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	names := []string{}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	return names
}

// TestTokenRefusals: a token file that is not the driver's own is an
// error that never repeats its content, and is never replaced.
func TestTokenRefusals(t *testing.T) {
	const content = "0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef"
	tests := []struct {
		name  string
		setup func(t *testing.T, p string)
		want  string
	}{
		{"readable by others", func(t *testing.T, p string) { write(t, p, content, 0o644) }, "must be a regular file of mode 0600"},
		{"a symlink", func(t *testing.T, p string) {
			target := filepath.Join(t.TempDir(), "t")
			write(t, target, content, 0o600)
			if err := os.Symlink(target, p); err != nil {
				t.Fatal(err)
			}
		}, "must be a regular file of mode 0600"},
		{"a directory", func(t *testing.T, p string) {
			if err := os.Mkdir(p, 0o700); err != nil {
				t.Fatal(err)
			}
		}, "must be a regular file of mode 0600"},
		{"one digit short", func(t *testing.T, p string) { write(t, p, content[1:], 0o600) }, "is malformed"},
		{"upper case", func(t *testing.T, p string) { write(t, p, strings.ToUpper(content), 0o600) }, "is malformed"},
		{"a trailing newline", func(t *testing.T, p string) { write(t, p, content+"\n", 0o600) }, "is malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d := Dir(t.TempDir())
			tt.setup(t, d.Path(FileToken))
			// Older than tokenWait: a short file just written would be
			// waited on as another caller's write under way.
			old := time.Now().Add(-time.Hour)
			_ = os.Chtimes(d.Path(FileToken), old, old)
			for _, f := range []func() (string, error){d.Token, d.EnsureToken} {
				_, err := f()
				if err == nil || !strings.Contains(err.Error(), tt.want) {
					t.Errorf("error %v, want one containing %q", err, tt.want)
				}
				if err != nil && strings.Contains(strings.ToLower(err.Error()), content[1:20]) {
					t.Errorf("the error repeats the file's content: %v", err)
				}
			}
		})
	}
	if _, err := Dir(t.TempDir()).Token(); !errors.Is(err, fs.ErrNotExist) {
		t.Errorf("Token() without a file = %v, want fs.ErrNotExist", err)
	}
}

func TestPort(t *testing.T) {
	tests := []struct {
		content string // "-" leaves the file absent
		want    int
	}{
		{"-", 0},
		{"18801\n", 18801},
		{" 1 ", 1},
		{"65535\n", 65535},
		{"65536\n", 0},
		{"0\n", 0},
		{"-1\n", 0},
		{"port\n", 0},
	}
	for _, tt := range tests {
		d := Dir(t.TempDir())
		if tt.content != "-" {
			write(t, d.Path(FilePort), tt.content, 0o600)
		}
		got, err := d.Port()
		if err != nil || got != tt.want {
			t.Errorf("Port() of %q = %d, %v; want %d", tt.content, got, err, tt.want)
		}
	}
	d := Dir(t.TempDir())
	if err := d.WritePort(65535); err != nil {
		t.Fatal(err)
	}
	if got, err := d.Port(); err != nil || got != 65535 {
		t.Errorf("Port() after WritePort(65535) = %d, %v", got, err)
	}
}

func TestIdentity(t *testing.T) {
	d := Dir(t.TempDir())
	if got, err := d.Identity(); got != nil || err != nil {
		t.Fatalf("Identity() without a file = %v, %v; want nil, nil", got, err)
	}
	s := workspace.Setup{ID: "s1", NamespaceID: "n1", AgentID: "a1", DefaultsID: "d1", Files: map[string]string{"AGENTS.md": "x"}}
	if err := d.WriteIdentity(s); err != nil {
		t.Fatal(err)
	}
	want := &workspace.Setup{ID: "s1", NamespaceID: "n1", AgentID: "a1", DefaultsID: "d1", Completed: true}
	got, err := d.Identity()
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("Identity() = %v (-want +got):\n%s", err, diff)
	}
	b, _ := os.ReadFile(d.Path(FileIdentity))
	if strings.Contains(string(b), "AGENTS.md") {
		t.Errorf("the identity file holds the setup's files: %s", b)
	}
	// The Docker driver's earlier files held the whole setup without its
	// files; they read the same.
	write(t, d.Path(FileIdentity), `{"id":"s1","namespaceId":"n1","agentId":"a1","defaultsId":"d1","completed":false}`, 0o600)
	got, err = d.Identity()
	if diff := cmp.Diff(want, got); err != nil || diff != "" {
		t.Errorf("Identity() of an earlier file = %v (-want +got):\n%s", err, diff)
	}
	for _, bad := range []string{`{}`, `{"id":""}`, `not json`} {
		write(t, d.Path(FileIdentity), bad, 0o600)
		if _, err := d.Identity(); err == nil || !strings.Contains(err.Error(), "is malformed") {
			t.Errorf("Identity() of %s = %v, want malformed", bad, err)
		}
	}
}

func TestInfoMalformed(t *testing.T) {
	for _, bad := range []string{`{}`, `{"agentId":""}`, `[`} {
		d := Dir(t.TempDir())
		write(t, d.Path(FileAgent), bad, 0o600)
		if _, err := d.Info(); err == nil || !strings.Contains(err.Error(), "is malformed") {
			t.Errorf("Info() of %s = %v, want malformed", bad, err)
		}
		if !d.Exists() {
			t.Errorf("Exists() = false with %s present", FileAgent)
		}
	}
}

// TestWriteFileAtomic: the new content, the mode asked for (replacing the
// old file's), and no temporary file left behind.
func TestWriteFileAtomic(t *testing.T) {
	dir := t.TempDir()
	p := filepath.Join(dir, "f")
	write(t, p, "old", 0o644)
	if err := WriteFileAtomic(p, []byte("new"), 0o600); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(p)
	fi, _ := os.Stat(p)
	if err != nil || string(b) != "new" || fi.Mode().Perm() != 0o600 {
		t.Errorf("after WriteFileAtomic: %q, %v, mode %v", b, err, fi.Mode())
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("the directory holds %d entries, want only the file", len(entries))
	}
	if err := WriteFileAtomic(filepath.Join(dir, "missing", "f"), nil, 0o600); err == nil {
		t.Error("WriteFileAtomic into a missing directory succeeded")
	}
}

func write(t *testing.T, p, content string, mode os.FileMode) {
	t.Helper()
	if err := os.WriteFile(p, []byte(content), mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(p, mode); err != nil {
		t.Fatal(err)
	}
}
