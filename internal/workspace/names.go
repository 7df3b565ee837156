package workspace

// The four workspace files an Agent has. These are the only names the API
// accepts, in requests and in paths.
const (
	AgentsMD   = "AGENTS.md"
	SoulMD     = "SOUL.md"
	IdentityMD = "IDENTITY.md"
	UserMD     = "USER.md"
)

// canonical is the order of the defaults identity. The package reads only
// this copy, so a caller that writes to Names cannot change an identity.
var canonical = [4]string{AgentsMD, SoulMD, IdentityMD, UserMD}

// Names lists the workspace files in their canonical order, the order of the
// defaults identity and of every listing. It is an array so that ranging
// over it never allocates and len(Names) is a constant; do not modify it.
var Names = canonical

// ValidName reports whether name is one of the four workspace file names,
// compared exactly (no case folding, no path cleaning).
func ValidName(name string) bool {
	switch name {
	case AgentsMD, SoulMD, IdentityMD, UserMD:
		return true
	}
	return false
}

// MaxFileBytes caps one workspace file, in UTF-8 bytes.
const MaxFileBytes = 16384
