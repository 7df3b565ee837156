package ssh_test

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/openclaw/occ/internal/cli"
)

// TestMain makes the test binary the occ binary the driver uploads: on
// the host it runs as <root>/bin/occ, and under that name it is the real
// command tree (occ workspace-setup), so no separate build is needed.
func TestMain(m *testing.M) {
	if filepath.Base(os.Args[0]) == "occ" {
		os.Exit(cli.Execute())
	}
	os.Exit(m.Run())
}
