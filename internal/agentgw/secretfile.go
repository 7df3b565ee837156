package agentgw

import (
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
)

// Limits of the files a Target names. They are read again for every
// operation so that a rotated key, token or CA bundle takes effect on the
// next operation without a restart; the bounds keep a misplaced path (a log
// file, a device) from costing more than one small read.
const (
	// MaxSecretFileBytes caps the service key and the gateway token files.
	MaxSecretFileBytes = 4096
	// MaxCAFileBytes caps the CA bundle.
	MaxCAFileBytes = 1 << 20
)

// errSecretContent is the only thing said about a secret whose bytes break
// the rule: which byte, or where, would leak part of it.
var errSecretContent = errors.New("content must be printable ASCII without spaces or a line break (^[!-~]+$)")

// readSecretFile reads a service key or gateway token under the rules the
// reference applies to the service key:
//   - the path is absolute (a relative path would depend on the working
//     directory of whoever started OCC);
//   - the path names a regular file, not a symlink, checked with Lstat
//     before opening, opened with O_NOFOLLOW, and checked again on the open
//     descriptor (fstat, same file as the Lstat) so that a swap between the
//     two is caught; O_NONBLOCK keeps a FIFO planted at the path from
//     blocking the open;
//   - at most MaxSecretFileBytes bytes: MaxSecretFileBytes+1 are read so
//     that an oversize file is detected rather than silently truncated;
//   - every byte is in '!'..'~': no spaces, no line break. Nothing is
//     trimmed, because a key with a trailing newline would be sent with it
//     (or, if trimmed here, differ from what the proxy was given); a file
//     written with `echo` fails loudly instead.
//
// followSymlinks is true for the service key only: Kubernetes presents a
// mounted Secret item as a symlink (key -> ..data/key) and swaps ..data
// atomically on rotation, so the key path must resolve through it; the
// resolved file must still be a regular file, checked on the descriptor.
// The gateway token is a file OCC itself created and never a symlink.
//
// The error never contains any byte of the file.
func readSecretFile(path string, followSymlinks bool) ([]byte, error) {
	b, err := readBoundedFile(path, MaxSecretFileBytes, followSymlinks)
	if err != nil {
		return nil, err
	}
	if err := checkSecret(b); err != nil {
		return nil, err
	}
	return b, nil
}

// ReadTokenFile reads a gateway token file under readSecretFile's rules
// (no symlink). The SSH driver's reader on a remote host uses it, so a
// token read there passes the same checks as one read here.
func ReadTokenFile(path string) ([]byte, error) {
	return readSecretFile(path, false)
}

// checkSecret applies readSecretFile's content rule to a secret read some
// other way (through a tunnel): non-empty, at most MaxSecretFileBytes,
// every byte in '!'..'~'. The error never contains a byte of it.
func checkSecret(b []byte) error {
	if len(b) == 0 {
		return errors.New("file is empty")
	}
	if len(b) > MaxSecretFileBytes {
		return fmt.Errorf("file is larger than %d bytes", MaxSecretFileBytes)
	}
	for _, c := range b {
		if c < '!' || c > '~' {
			return errSecretContent
		}
	}
	return nil
}

// readCAFile reads a PEM bundle. A CA bundle is public material and is
// usually a mounted Secret or ConfigMap item, which Kubernetes presents as a
// symlink, so symlinks are followed here; the file must still be regular and
// bounded.
func readCAFile(path string) ([]byte, error) {
	return readBoundedFile(path, MaxCAFileBytes, true)
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
