// Command occ is the OpenClaw control plane: `occ server` runs it, `occ
// migrate` prepares its database, `occ version` says what was built. The
// command tree lives in internal/cli.
package main

import (
	"os"

	"github.com/openclaw/occ/internal/cli"
)

func main() {
	os.Exit(cli.Execute())
}
