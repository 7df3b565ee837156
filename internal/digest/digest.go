// Package digest owns the text form of OCC's SHA-256 digests and 256-bit
// tokens: exactly 64 lowercase hexadecimal digits. The workspace defaults
// identity, file hashes and ETags, and the local driver's gateway tokens
// all use it, and every check of that form is Valid. It has no failure
// modes: Valid only answers yes or no.
package digest

import (
	"crypto/sha256"
	"encoding/hex"
)

// Len is the length of a digest's text: 32 bytes as two hex digits each.
const Len = 64

// Valid reports whether s matches /^[0-9a-f]{64}$/. Uppercase digits are
// refused; a reader that accepts them (a peer's protocol, say) lowercases
// first.
func Valid(s string) bool {
	if len(s) != Len {
		return false
	}
	for i := 0; i < len(s); i++ {
		if c := s[i]; (c < '0' || c > '9') && (c < 'a' || c > 'f') {
			return false
		}
	}
	return true
}

// Of returns the digest of b: SHA-256 as 64 lowercase hex digits, the form
// Valid accepts. File hashes, ETags and the defaults identity are Of their
// bytes.
func Of[T ~string | ~[]byte](b T) string {
	sum := sha256.Sum256([]byte(b))
	return hex.EncodeToString(sum[:])
}
