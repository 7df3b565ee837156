//go:build !unix

package agentgw

import (
	"errors"
	"os"
)

// openNoBlock is not implemented where O_NOFOLLOW and O_NONBLOCK are not
// available: credential files cannot be read there under the rules, so
// every operation fails as Unavailable rather than read them unsafely.
func openNoBlock(path string, followSymlinks bool) (*os.File, error) {
	return nil, errors.New("credential files are only supported on unix")
}
