// Package ids owns OCC's resource identifiers: a fixed prefix per resource
// kind followed by a lowercase UUIDv4, for example
// "agt_0b6f0a3c-2f1e-4c55-9a7d-1d2c3b4a5f60".
package ids

import (
	"crypto/rand"
	"fmt"
	"regexp"
)

// Prefixes, one per resource kind. The set is part of the API contract.
const (
	Namespace        = "ns_"
	Configuration    = "cfg_"
	Agent            = "agt_"
	Revision         = "rev_"
	ServicePrincipal = "sa_"
	Audit            = "aud_"
	User             = "usr_"
	APIKey           = "key_"
	Role             = "role_"
	Binding          = "bnd_"
	Restriction      = "rst_"
	WorkItem         = "wrk_"
	WorkspaceSetup   = "wss_"
	Installation     = "ins_"
	Session          = "ses_"
)

var uuidV4 = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-4[0-9a-f]{3}-[89ab][0-9a-f]{3}-[0-9a-f]{12}$`)

// New returns a fresh identifier with the given prefix. It panics only if
// the operating system's random source fails, which Go treats as fatal.
func New(prefix string) string {
	var b [16]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("ids: crypto/rand failed: %v", err))
	}
	b[6] = (b[6] & 0x0f) | 0x40 // version 4
	b[8] = (b[8] & 0x3f) | 0x80 // RFC 4122 variant
	return fmt.Sprintf("%s%x-%x-%x-%x-%x", prefix, b[0:4], b[4:6], b[6:8], b[8:10], b[10:16])
}

// Valid reports whether s is prefix followed by a lowercase UUIDv4.
func Valid(prefix, s string) bool {
	if len(s) != len(prefix)+36 || s[:len(prefix)] != prefix {
		return false
	}
	return uuidV4.MatchString(s[len(prefix):])
}
