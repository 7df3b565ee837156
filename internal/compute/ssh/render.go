package ssh

import (
	"path"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/nativeconfig"
)

// renderConfig merges rev's native configuration with what the driver
// controls (nativeconfig.Direct): gateway.mode local, bind loopback, the
// Agent's port, token auth with OCC's token, the workspace
// <dir>/state/workspace, no heartbeat, and the native file log under
// <dir>/logs, capped. A document that sets any of those to something else
// (or exposes the listener through Tailscale, or configures more than the
// main agent) is a permanent CONFIGURATION_INVALID; messages name keys,
// never values.
func (d *Driver) renderConfig(rev compute.Revision, dir string, port int, token string) ([]byte, error) {
	direct := nativeconfig.Direct{
		Driver:       "ssh",
		Workspace:    path.Join(dir, "state", "workspace"),
		WorkspaceWhy: "the driver places the workspace in the Agent's directory",
		LogFile:      path.Join(dir, "logs", "openclaw.log"),
		MaxLogBytes:  d.maxLog,
	}
	doc, err := direct.Parse(rev.Configuration)
	if err != nil {
		return nil, err
	}
	direct.Apply(doc, port, token)
	return nativeconfig.Encode(doc)
}
