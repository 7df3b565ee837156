//go:build unix

package secretfile

import (
	"os"
	"syscall"
)

// openNoBlock opens path read-only with O_NONBLOCK, and with O_NOFOLLOW
// unless followSymlinks: the final path component must then not be a
// symlink (the open fails with ELOOP).
func openNoBlock(path string, followSymlinks bool) (*os.File, error) {
	flags := os.O_RDONLY | syscall.O_NONBLOCK | syscall.O_CLOEXEC
	if !followSymlinks {
		flags |= syscall.O_NOFOLLOW
	}
	return os.OpenFile(path, flags, 0)
}
