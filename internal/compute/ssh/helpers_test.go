package ssh_test

import (
	"crypto/sha256"
	"encoding/hex"
)

func hash12(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])[:12]
}
