package ssh

import (
	"fmt"
	"os"
	"sync"

	xssh "golang.org/x/crypto/ssh"
	"golang.org/x/crypto/ssh/knownhosts"
)

// maxKnownHostsBytes caps the known_hosts file occ parses: far above a
// fleet's worth of lines (about 100 bytes each), far below what would
// hurt occ's memory. A larger file is refused like an unreadable one.
const maxKnownHostsBytes = 8 << 20

// knownHosts is the known_hosts file as a host key callback, parsed again
// whenever the file has changed since it was last parsed (another file,
// as after a rename or a Kubernetes Secret update, or another size or
// modification time), so that a key the operator adds to pin a refused
// host, or removes, applies to the next connection without restarting
// occ. It is asked once per dial (a host keeps one connection), so the
// stat costs nothing that matters. A connection already open keeps the
// key it was opened with.
//
// Failure semantics: fail closed. A file that cannot be read, is not a
// regular file, is larger than maxKnownHostsBytes, has no valid line
// among invalid ones (knownhosts.New's rule; invalid lines among valid
// ones are skipped, as OpenSSH does), or changes while it is parsed makes
// that dial fail ("refusing to connect", retryable) instead of falling
// back to what was parsed before: the previous contents may hold a key
// the operator has just removed, and nothing unknown is ever accepted.
// Such a failure is not remembered: the next dial reads the file again.
type knownHosts struct {
	path string

	mu   sync.Mutex
	seen os.FileInfo // the file cb was parsed from; nil: none
	cb   xssh.HostKeyCallback
}

func newKnownHosts(path string) (*knownHosts, error) {
	k := &knownHosts{path: path}
	if _, err := k.callback(); err != nil {
		return nil, err
	}
	return k, nil
}

// callback returns the host key callback of the file as it is now.
func (k *knownHosts) callback() (xssh.HostKeyCallback, error) {
	k.mu.Lock()
	defer k.mu.Unlock()
	before, err := os.Stat(k.path)
	if err == nil && k.seen != nil && sameVersion(k.seen, before) {
		return k.cb, nil
	}
	k.seen, k.cb = nil, nil
	if err != nil {
		return nil, err
	}
	if !before.Mode().IsRegular() {
		return nil, fmt.Errorf("%s is not a regular file", k.path)
	}
	if before.Size() > maxKnownHostsBytes {
		return nil, fmt.Errorf("%s is larger than %d bytes", k.path, maxKnownHostsBytes)
	}
	// knownhosts parses files by name only, so the size is checked on the
	// file's state just before and the parse is kept only if the file is
	// still that one after it: a file written meanwhile may have been
	// read half old, half new.
	cb, err := knownhosts.New(k.path)
	if err != nil {
		return nil, err
	}
	after, err := os.Stat(k.path)
	if err != nil {
		return nil, err
	}
	if !sameVersion(before, after) {
		return nil, fmt.Errorf("%s changed while it was read; it is read again at the next connection", k.path)
	}
	k.seen, k.cb = after, cb
	return cb, nil
}

// sameVersion reports whether a and b, two stats of the known_hosts path,
// are of the same file with the same size and modification time.
func sameVersion(a, b os.FileInfo) bool {
	return os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}
