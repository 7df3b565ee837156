package secretfile

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Limits of the files read here. They are read again for every operation,
// so the bounds keep a misplaced path (a log file, a device) from costing
// more than one small read.
const (
	// MaxSecretBytes caps a secret file: the service key and the gateway
	// token.
	MaxSecretBytes = 4096
	// MaxCABytes caps a CA bundle.
	MaxCABytes = 1 << 20
)

// errSecretContent is the only thing said about a secret whose bytes break
// the rule: which byte, or where, would leak part of it.
var errSecretContent = errors.New("content must be printable ASCII without spaces or a line break (^[!-~]+$)")

// ReadSecret reads a secret file that OCC itself created, such as a gateway
// token, under these rules:
//   - the path is absolute (a relative path would depend on the working
//     directory of whoever started OCC);
//   - the path names a regular file, not a symlink, checked with Lstat
//     before opening, opened with O_NOFOLLOW, and checked again on the open
//     descriptor (fstat, same file as the Lstat) so that a swap between the
//     two is caught; O_NONBLOCK keeps a FIFO planted at the path from
//     blocking the open;
//   - at most MaxSecretBytes bytes: MaxSecretBytes+1 are read so that an
//     oversize file is detected rather than silently truncated;
//   - the content passes CheckSecret.
//
// The error never contains any byte of the file.
func ReadSecret(path string) ([]byte, error) {
	return readSecret(path, false)
}

// ReadMountedSecret is ReadSecret for a secret an operator provides, such as
// the gateway service key, whose path may be a symlink: Kubernetes presents
// a mounted Secret item as one (key -> ..data/key) and swaps ..data
// atomically on rotation, so the path must resolve through it. The resolved
// file must still be a regular file, checked on the descriptor.
func ReadMountedSecret(path string) ([]byte, error) {
	return readSecret(path, true)
}

func readSecret(path string, followSymlinks bool) ([]byte, error) {
	b, err := readBoundedFile(path, MaxSecretBytes, followSymlinks)
	if err != nil {
		return nil, err
	}
	if err := CheckSecret(b); err != nil {
		return nil, err
	}
	return b, nil
}

// CheckSecret is the content rule of ReadSecret, for a secret read some
// other way (through a tunnel, from a remote host): non-empty, at most
// MaxSecretBytes, every byte in '!'..'~', so no spaces and no line break.
// Nothing is trimmed, because a key with a trailing newline would be sent
// with it (or, if trimmed here, differ from what the proxy was given); a
// file written with `echo` fails loudly instead. The error never contains a
// byte of b.
func CheckSecret(b []byte) error {
	if len(b) == 0 {
		return errors.New("file is empty")
	}
	if len(b) > MaxSecretBytes {
		return fmt.Errorf("file is larger than %d bytes", MaxSecretBytes)
	}
	for _, c := range b {
		if c < '!' || c > '~' {
			return errSecretContent
		}
	}
	return nil
}

// ReadCABundle reads a PEM CA bundle: absolute, regular, at most MaxCABytes.
// A CA bundle is public material and is usually a mounted Secret or
// ConfigMap item, which Kubernetes presents as a symlink, so symlinks are
// followed; its content is not checked here (the caller parses it).
func ReadCABundle(path string) ([]byte, error) {
	return readBoundedFile(path, MaxCABytes, true)
}

// readBoundedFile opens path read-only and non-blocking and returns at most
// limit bytes, failing when the file holds more.
func readBoundedFile(path string, limit int, followSymlinks bool) ([]byte, error) {
	if !filepath.IsAbs(path) {
		return nil, errors.New("path is not absolute")
	}
	var before os.FileInfo
	var err error
	if followSymlinks {
		before, err = os.Stat(path)
	} else {
		before, err = os.Lstat(path)
	}
	if err != nil {
		return nil, err // *PathError: names the path, which is not secret
	}
	if !before.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file (%s)", path, before.Mode().Type())
	}
	f, err := openNoBlock(path, followSymlinks)
	if err != nil {
		return nil, err
	}
	defer f.Close()
	after, err := f.Stat()
	if err != nil {
		return nil, err
	}
	if !after.Mode().IsRegular() || !os.SameFile(before, after) {
		return nil, fmt.Errorf("%s changed while it was opened", path)
	}
	buf := make([]byte, limit+1)
	n, err := io.ReadFull(f, buf)
	if err != nil && !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
		return nil, fmt.Errorf("read %s: %w", path, err)
	}
	if n > limit {
		return nil, fmt.Errorf("%s is larger than %d bytes", path, limit)
	}
	return buf[:n], nil
}
