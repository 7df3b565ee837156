//go:build !unix

package secretfile

import (
	"errors"
	"os"
)

// openNoBlock is not implemented where O_NOFOLLOW and O_NONBLOCK are not
// available: files cannot be read there under the rules, so every read
// fails rather than read them unsafely (the gateway client reports it as
// Unavailable).
func openNoBlock(path string, followSymlinks bool) (*os.File, error) {
	return nil, errors.New("credential files are only supported on unix")
}
