package agentgw_test

import (
	"os"
	"testing"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
)

// TestMain stops the shared real gateways (one token-mode, one
// trusted-proxy) that the tests of this package start on first use, so at
// most two run at once and each starts only once per process.
func TestMain(m *testing.M) {
	code := m.Run()
	gwtest.StopShared()
	os.Exit(code)
}
