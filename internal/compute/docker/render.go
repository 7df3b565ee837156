package docker

import (
	"fmt"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/nativeconfig"
)

// Paths inside the containers.
const (
	homeDir      = "/home/node"
	stateDir     = "/home/node/.openclaw"
	workspaceDir = "/home/node/.openclaw/workspace"
	occBinDir    = "/opt/occ/bin"
	occBin       = "/opt/occ/bin/occ"
	configDir    = "/run/occ/config"
	configPath   = "/run/occ/config/openclaw.json"
	identityPath = "/run/occ/config/identity.json"
	payloadDir   = "/run/occ/setup"
	payloadPath  = "/run/occ/setup/payload.json"
	// In the images scripts/images.sh builds.
	nodePath         = "/usr/local/bin/node"
	openclawPath     = "/app/openclaw.mjs"
	occImageBinary   = "/usr/local/bin/occ"
	runtimeUID       = 1000
	exitConfigRefuse = 78
)

// direct is what OCC controls in the gateway's configuration
// (nativeconfig.Direct): loopback is the host's, since the container
// shares the host's network; the workspace is the Agent's volume; the
// gateway's output is the container's log, so the native file log is the
// document's.
var direct = nativeconfig.Direct{
	Driver:       "docker",
	Workspace:    workspaceDir,
	WorkspaceWhy: "the workspace is the Agent's volume at " + workspaceDir,
}

// renderConfig merges rev's native configuration with what OCC controls
// and returns the document the gateway reads (0600 in its config volume:
// it holds the token). OCC sets gateway.mode "local", gateway.bind
// "loopback", gateway.port, gateway.auth {mode "token", token},
// agents.defaults.workspace and agents.defaults.heartbeat.every "0m". A
// document that asks for anything else there is refused with a permanent
// CONFIGURATION_INVALID naming the key, never a value.
func renderConfig(rev compute.Revision, token string, port int) ([]byte, error) {
	doc, err := direct.Parse(rev.Configuration)
	if err != nil {
		return nil, err
	}
	direct.Apply(doc, port, token)
	out, err := nativeconfig.Encode(doc)
	if err != nil {
		return nil, fmt.Errorf("docker: %w", err)
	}
	return out, nil
}
