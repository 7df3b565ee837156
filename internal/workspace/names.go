package workspace

// The four workspace files an Agent has. These are the only names the API
// accepts, in requests and in paths.
const (
	AgentsMD   = "AGENTS.md"
	SoulMD     = "SOUL.md"
	IdentityMD = "IDENTITY.md"
	UserMD     = "USER.md"
)

// Names lists the workspace files in their canonical order, the order of the
// defaults identity and of every listing. It is an array so that ranging
// over it never allocates; do not modify it (ValidName does not read it).
var Names = [4]string{AgentsMD, SoulMD, IdentityMD, UserMD}

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
