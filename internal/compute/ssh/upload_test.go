package ssh

import (
	"context"
	"crypto/sha256"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/testutil"
)

// TestUploadRemovesStaleTemps, against the real sshd: an upload occ gives
// up on (its deadline passes while the binary streams) is killed with
// SIGKILL, which skips its trap, and leaves its partial file in bin/. The
// next upload removes such a file once it is older than
// uploadStaleMinutes, while an upload still streaming at that moment
// (its file is younger) keeps its file and completes. Before, every
// killed upload left its file for good.
func TestUploadRemovesStaleTemps(t *testing.T) {
	cfg := testConfig(t)
	cfg.Root, cfg.RuntimeDir = traversableDir(t), fakeRuntime(t)
	d, err := New(Options{Config: cfg, Binary: os.Args[0]})
	if err != nil {
		t.Fatal(err)
	}
	defer d.Close()
	h := d.hosts[0]
	bin := filepath.Join(cfg.Root, "bin")
	temps := func() []string {
		m, err := filepath.Glob(filepath.Join(bin, ".occ.new.*"))
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	chunk := make([]byte, 1<<20)

	// An upload whose input stalls after 1 MiB is given up on at its
	// deadline and killed.
	pr, pw := io.Pipe()
	defer pw.Close()
	go func() { _, _ = pw.Write(chunk) }()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	_, err = h.runFor(ctx, d.cfg.CommandTimeout, "upload occ", h.uploadCmd(), pr)
	cancel()
	if err == nil {
		t.Fatal("the stalled upload succeeded")
	}
	killed := temps()
	if len(killed) != 1 {
		t.Fatalf("after the killed upload bin/ holds %q; want its one partial file (SIGKILL skips the trap)", killed)
	}

	// An upload still streaming (1 MiB so far) while the next one starts.
	f, err := os.Open(os.Args[0])
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	lr, lw := io.Pipe()
	defer lw.Close()
	resume := make(chan struct{})
	go func() {
		if _, err := io.CopyN(lw, f, int64(len(chunk))); err != nil {
			lw.CloseWithError(err)
			return
		}
		<-resume
		_, err := io.Copy(lw, f)
		lw.CloseWithError(err)
	}()
	ctx, cancel = context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	live := make(chan error, 1)
	go func() {
		_, err := h.runFor(ctx, d.cfg.CommandTimeout, "upload occ", h.uploadCmd(), lr)
		live <- err
	}()
	var liveFile string
	testutil.Eventually(t, 30*time.Second, func() bool {
		for _, p := range temps() {
			if fi, err := os.Stat(p); err == nil && p != killed[0] && fi.Size() >= int64(len(chunk)) {
				liveFile = p
				return true
			}
		}
		return false
	}, "the live upload to write its first MiB")
	// The live upload's own clean-up left the killed upload's file: it
	// was younger than the bound. Only now is it made older.
	old := time.Now().Add(-time.Duration(h.uploadStaleMinutes()+1) * time.Minute)
	if err := os.Chtimes(killed[0], old, old); err != nil {
		t.Errorf("the killed upload's file, younger than the bound, is gone: %v", err)
	}

	run := func(op, cmd string, stdin io.Reader) ([]byte, error) {
		return h.runFor(ctx, d.cfg.CommandTimeout, op, cmd, stdin)
	}
	if err := h.upload(run); err != nil {
		t.Fatalf("upload: %v", err)
	}
	if got := temps(); !cmp.Equal([]string{liveFile}, got) {
		t.Errorf("after the next upload bin/ holds %q; want only the live upload's file %s (the killed one, %s, removed)", got, filepath.Base(liveFile), filepath.Base(killed[0]))
	}
	close(resume)
	if err := <-live; err != nil {
		t.Errorf("the upload that was streaming during the clean-up: %v", err)
	}
	b, err := os.ReadFile(filepath.Join(bin, "occ"))
	if err != nil {
		t.Fatal(err)
	}
	if got := fmt.Sprintf("%x", sha256.Sum256(b)); got != d.binSum {
		t.Errorf("bin/occ has sha256 %s, want the binary's %s", got, d.binSum)
	}
	names := []string{}
	entries, err := os.ReadDir(bin)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		names = append(names, e.Name())
	}
	if diff := cmp.Diff([]string{"occ"}, names); diff != "" {
		t.Errorf("bin/ at the end (-want +got):\n%s", diff)
	}
}

// TestUploadStaleMinutes: the clean-up's bound covers a whole upload's
// life (commandTimeout plus ending it), in whole minutes.
func TestUploadStaleMinutes(t *testing.T) {
	for _, tc := range []struct {
		timeout time.Duration
		want    int
	}{
		{DefaultCommandTimeout, 3}, // 2m + 40 s
		{20 * time.Second, 1},
		{time.Hour, 61},
	} {
		h := &host{d: &Driver{cfg: Config{CommandTimeout: tc.timeout}}}
		if got := h.uploadStaleMinutes(); got != tc.want {
			t.Errorf("commandTimeout %s: %d minutes, want %d", tc.timeout, got, tc.want)
		}
	}
}
