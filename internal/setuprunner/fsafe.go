package setuprunner

import (
	"errors"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"syscall"
)

// Size limits of safe reads. The marker is a few hundred bytes; a
// workspace file may be up to 16,384 bytes, and the limit leaves room for
// a file native setup or a user made larger without letting a huge file
// be read into memory.
const (
	markerLimit = 4096
	fileLimit   = 32768
)

// TempName is the reserved temporary file, in the workspace directory,
// of every atomic write the runner makes. Exclusive startup owns it: a
// leftover from a crashed run must be a safe regular file and is removed.
const TempName = ".oce-workspace-setup.tmp"

// checkWorkspacePath applies the workspace rules: absolute, already clean
// (what path.resolve would return), and every component that exists,
// from / down, a real directory: not a symbolic link, not a file. A
// missing component ends nothing: mkdir -p creates it later.
//
// Why: the workspace is about to receive files as the runner's user; a
// link anywhere in the chain could redirect them outside the volume the
// operator chose.
func checkWorkspacePath(ws string) error {
	if ws == "" || !filepath.IsAbs(ws) || filepath.Clean(ws) != ws {
		return newFailure(stepWorkspace, "not-absolute-or-not-clean", nil)
	}
	current := "/"
	for _, part := range strings.Split(ws, "/") {
		if part == "" {
			continue
		}
		current = filepath.Join(current, part)
		info, err := os.Lstat(current)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return newFailure(stepWorkspace, "lstat: "+errClass(err), err)
		}
		if info.Mode()&fs.ModeSymlink != 0 {
			return newFailure(stepWorkspace, "symlink-component", nil)
		}
		if !info.IsDir() {
			return newFailure(stepWorkspace, "non-directory-component", nil)
		}
	}
	return nil
}

// safeRead reads a file the runner must trust to be the one in the
// workspace: lstat, then a regular file with one link and at most limit
// bytes, opened with O_NOFOLLOW (and O_NONBLOCK, so a FIFO swapped in
// cannot hang the run), then fstat must show the same file (device and
// inode), still regular, one link and the same size, and reading must
// return at most limit bytes. A missing file is (nil, false, nil).
//
// Why each check: a symbolic link could point anywhere; a hard link is
// another name for a file outside the workspace's control; the size cap
// bounds memory; the re-check after open closes the window between lstat
// and open.
func safeRead(path string, limit int64, step string) (content []byte, exists bool, err error) {
	// Failures name the file by its base name: one of the four names,
	// the marker or the reserved temp name, never a caller's path.
	fail := func(class string, cause error) error {
		return newFailure(step, filepath.Base(path)+": "+class, cause)
	}
	info, err := os.Lstat(path)
	if errors.Is(err, fs.ErrNotExist) {
		return nil, false, nil
	}
	if err != nil {
		return nil, false, fail("lstat: "+errClass(err), err)
	}
	if bad := checkRegular(info, limit); bad != "" {
		return nil, false, fail(bad, nil)
	}
	f, err := os.OpenFile(path, os.O_RDONLY|syscall.O_NOFOLLOW|syscall.O_NONBLOCK, 0)
	if err != nil {
		return nil, false, fail("open: "+errClass(err), err)
	}
	defer f.Close()
	opened, err := f.Stat()
	if err != nil {
		return nil, false, fail("fstat: "+errClass(err), err)
	}
	if bad := checkRegular(opened, limit); bad != "" {
		return nil, false, fail(bad, nil)
	}
	if !os.SameFile(info, opened) || opened.Size() != info.Size() {
		return nil, false, fail("changed-while-opening", nil)
	}
	content, err = io.ReadAll(io.LimitReader(f, limit+1))
	if err != nil {
		return nil, false, fail("read: "+errClass(err), err)
	}
	if int64(len(content)) > limit {
		return nil, false, fail("too-large", nil)
	}
	return content, true, nil
}

// checkRegular returns "" or the class of the broken rule.
func checkRegular(info fs.FileInfo, limit int64) string {
	if !info.Mode().IsRegular() {
		return "not-a-regular-file"
	}
	if st, ok := info.Sys().(*syscall.Stat_t); !ok || st.Nlink != 1 {
		return "link-count-not-1"
	}
	if info.Size() > limit {
		return "too-large"
	}
	return ""
}

// atomicWrite replaces file with content so that a crash leaves either the
// old file or the new one, never a torn mix: the content goes to the
// reserved TempName in the same directory (a leftover must pass safeRead
// and is removed first), created exclusively with mode 0600, synced,
// renamed over file, and the directory is synced so the rename itself is
// durable. The temp file is always removed afterwards, except when
// crash injection (AfterStep) stops the write after the sync: a real
// crash there leaves it behind, and the next run must cope.
func (r *run) atomicWrite(file string, content []byte, label string) (err error) {
	dir := filepath.Dir(file)
	temp := filepath.Join(dir, TempName)
	if _, _, err := safeRead(temp, fileLimit, stepWrite); err != nil {
		return err
	}
	if err := os.Remove(temp); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return newFailure(stepWrite, "remove-temp: "+errClass(err), err)
	}
	crashed := false
	defer func() {
		if crashed {
			return
		}
		if rerr := os.Remove(temp); rerr != nil && !errors.Is(rerr, fs.ErrNotExist) && err == nil {
			err = newFailure(stepCleanup, "remove-temp: "+errClass(rerr), rerr)
		}
	}()
	f, err := os.OpenFile(temp, os.O_WRONLY|os.O_CREATE|os.O_EXCL|syscall.O_NOFOLLOW, 0o600)
	if err != nil {
		return newFailure(stepWrite, "create-temp: "+errClass(err), err)
	}
	_, werr := f.Write(content)
	if werr == nil {
		werr = f.Sync()
	}
	if cerr := f.Close(); werr == nil {
		werr = cerr
	}
	if werr != nil {
		return newFailure(stepWrite, "write-temp: "+errClass(werr), werr)
	}
	if err := r.after(stepTempWritten + label); err != nil {
		crashed = true
		return err
	}
	if err := os.Rename(temp, file); err != nil {
		return newFailure(stepWrite, "rename: "+errClass(err), err)
	}
	if err := syncDir(dir); err != nil {
		return newFailure(stepWrite, "sync-dir: "+errClass(err), err)
	}
	return nil
}

func syncDir(dir string) error {
	d, err := os.Open(dir)
	if err != nil {
		return err
	}
	serr := d.Sync()
	if cerr := d.Close(); serr == nil {
		serr = cerr
	}
	return serr
}
