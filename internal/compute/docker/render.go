package docker

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/nativeconfig"
	"github.com/openclaw/occ/internal/setuprunner"
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

// renderConfig merges rev's native configuration with what OCC controls
// and returns the document the gateway reads (0600 in its config volume:
// it holds the token). OCC sets gateway.mode "local", gateway.bind
// "loopback" (the container shares the host's network: loopback is the
// host's), gateway.port, gateway.auth {mode "token", token},
// agents.defaults.workspace and agents.defaults.heartbeat.every "0m". A
// document that asks for anything else there is refused with a permanent
// CONFIGURATION_INVALID naming the key, never a value.
func renderConfig(rev compute.Revision, token string, port int) ([]byte, error) {
	raw := bytes.TrimSpace(rev.Configuration)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	doc, err := nativeconfig.Decode(raw)
	if err != nil {
		return nil, err
	}
	if err := checkConflicts(doc); err != nil {
		return nil, err
	}
	if err := setuprunner.MainAgentSupported(raw); err != nil {
		return nil, nativeconfig.Invalid("docker: only the native main agent is supported: %v", err)
	}
	gateway := nativeconfig.Child(doc, "gateway")
	gateway["mode"] = "local"
	gateway["bind"] = "loopback"
	gateway["port"] = port
	auth := nativeconfig.Child(gateway, "auth")
	auth["mode"] = "token"
	auth["token"] = token
	defaults := nativeconfig.Child(nativeconfig.Child(doc, "agents"), "defaults")
	defaults["workspace"] = workspaceDir
	nativeconfig.Child(defaults, "heartbeat")["every"] = "0m"

	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("docker: render configuration: %w", err)
	}
	return buf.Bytes(), nil
}

// checkConflicts refuses documents that set what OCC controls to
// something else.
func checkConflicts(doc map[string]any) error {
	gateway, err := nativeconfig.Object(doc, "gateway", "gateway")
	if err != nil {
		return err
	}
	for k, want := range map[string]string{"mode": "local", "bind": "loopback"} {
		if err := wantString(gateway, "gateway."+k, k, want); err != nil {
			return err
		}
	}
	if _, ok := gateway["customBindHost"]; ok {
		return nativeconfig.Invalid("docker: gateway.customBindHost is not allowed: the gateway binds to loopback only")
	}
	ts, err := nativeconfig.Object(gateway, "tailscale", "gateway.tailscale")
	if err != nil {
		return err
	}
	if err := wantString(ts, "gateway.tailscale.mode", "mode", "off"); err != nil {
		return err
	}
	auth, err := nativeconfig.Object(gateway, "auth", "gateway.auth")
	if err != nil {
		return err
	}
	if err := wantString(auth, "gateway.auth.mode", "mode", "token"); err != nil {
		return err
	}
	for _, k := range []string{"token", "password", "trustedProxy"} {
		if _, ok := auth[k]; ok {
			return nativeconfig.Invalid("docker: gateway.auth.%s is not allowed: OCC generates and owns the gateway token", k)
		}
	}
	agents, err := nativeconfig.Object(doc, "agents", "agents")
	if err != nil {
		return err
	}
	defaults, err := nativeconfig.Object(agents, "defaults", "agents.defaults")
	if err != nil {
		return err
	}
	if err := wantPath(defaults, "agents.defaults.workspace"); err != nil {
		return err
	}
	entries, err := nativeconfig.Object(agents, "entries", "agents.entries")
	if err != nil {
		return err
	}
	if main, ok := entries["main"].(map[string]any); ok {
		if err := wantPath(main, "agents.entries.main.workspace"); err != nil {
			return err
		}
	}
	_, err = nativeconfig.Object(defaults, "heartbeat", "agents.defaults.heartbeat")
	return err
}

// wantString accepts an absent key or the one value OCC sets.
func wantString(obj map[string]any, name, key, want string) error {
	v, ok := obj[key]
	if !ok {
		return nil
	}
	if s, isString := v.(string); !isString || s != want {
		return nativeconfig.Invalid("docker: %s must be absent or %q", name, want)
	}
	return nil
}

// wantPath accepts an absent workspace or the container's own.
func wantPath(obj map[string]any, name string) error {
	v, ok := obj["workspace"]
	if !ok {
		return nil
	}
	if s, isString := v.(string); !isString || path.Clean(s) != workspaceDir {
		return nativeconfig.Invalid("docker: %s must be absent or %q: the workspace is the Agent's volume", name, workspaceDir)
	}
	return nil
}
