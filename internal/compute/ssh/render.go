package ssh

import (
	"bytes"
	"encoding/json"
	"path"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/nativeconfig"
	"github.com/openclaw/occ/internal/setuprunner"
)

// renderConfig merges rev's native configuration with what the driver
// controls: gateway.mode local, bind loopback, the Agent's port, token
// auth with OCC's token, the workspace <dir>/state/workspace, no
// heartbeat, and the native file log under <dir>/logs, capped. A document
// that sets any of those to something else (or exposes the listener
// through Tailscale, or configures more than the main agent) is a
// permanent CONFIGURATION_INVALID; messages name keys, never values.
func (d *Driver) renderConfig(rev compute.Revision, dir string, port int, token string) ([]byte, error) {
	raw := bytes.TrimSpace(rev.Configuration)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	doc, err := nativeconfig.Decode(raw)
	if err != nil {
		return nil, err
	}
	ws := path.Join(dir, "state", "workspace")
	if err := checkConflicts(doc, ws); err != nil {
		return nil, err
	}
	if err := setuprunner.MainAgentSupported(raw); err != nil {
		return nil, nativeconfig.Invalid("ssh: only the native main agent is supported: %v", err)
	}
	gateway := nativeconfig.Child(doc, "gateway")
	gateway["mode"] = "local"
	gateway["bind"] = "loopback"
	gateway["port"] = port
	auth := nativeconfig.Child(gateway, "auth")
	auth["mode"] = "token"
	auth["token"] = token
	agents := nativeconfig.Child(doc, "agents")
	defaults := nativeconfig.Child(agents, "defaults")
	defaults["workspace"] = ws
	nativeconfig.Child(defaults, "heartbeat")["every"] = "0m"
	logging := nativeconfig.Child(doc, "logging")
	logging["file"] = path.Join(dir, "logs", "openclaw.log")
	limit := max(d.maxLog/6, 4096)
	if n, ok := logging["maxFileBytes"].(json.Number); ok {
		if v, err := n.Int64(); err == nil && v > 0 && v < limit {
			limit = v
		}
	}
	logging["maxFileBytes"] = limit
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// checkConflicts refuses documents that set what the driver controls.
func checkConflicts(doc map[string]any, ws string) error {
	gateway, err := nativeconfig.Object(doc, "gateway", "gateway")
	if err != nil {
		return err
	}
	want := func(obj map[string]any, at, key, v string) error {
		got, ok := obj[key]
		if !ok {
			return nil
		}
		if s, isString := got.(string); !isString || s != v {
			return nativeconfig.Invalid("ssh: %s.%s must be absent or %q on the SSH driver", at, key, v)
		}
		return nil
	}
	if err := want(gateway, "gateway", "mode", "local"); err != nil {
		return err
	}
	if err := want(gateway, "gateway", "bind", "loopback"); err != nil {
		return err
	}
	if _, ok := gateway["customBindHost"]; ok {
		return nativeconfig.Invalid("ssh: gateway.customBindHost is not allowed: the gateway listens on loopback only")
	}
	ts, err := nativeconfig.Object(gateway, "tailscale", "gateway.tailscale")
	if err != nil {
		return err
	}
	if err := want(ts, "gateway.tailscale", "mode", "off"); err != nil {
		return err
	}
	auth, err := nativeconfig.Object(gateway, "auth", "gateway.auth")
	if err != nil {
		return err
	}
	if err := want(auth, "gateway.auth", "mode", "token"); err != nil {
		return err
	}
	for _, k := range []string{"token", "password", "trustedProxy"} {
		if _, ok := auth[k]; ok {
			return nativeconfig.Invalid("ssh: gateway.auth.%s is not allowed: OCC generates and owns the gateway token", k)
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
	samePath := func(obj map[string]any, name string) error {
		v, ok := obj["workspace"]
		if !ok {
			return nil
		}
		if s, isString := v.(string); !isString || path.Clean(s) != ws {
			return nativeconfig.Invalid("ssh: %s must be absent: the driver places the workspace in the Agent's directory", name)
		}
		return nil
	}
	if err := samePath(defaults, "agents.defaults.workspace"); err != nil {
		return err
	}
	entries, err := nativeconfig.Object(agents, "entries", "agents.entries")
	if err != nil {
		return err
	}
	if main, ok := entries["main"].(map[string]any); ok {
		if err := samePath(main, "agents.entries.main.workspace"); err != nil {
			return err
		}
	}
	if _, err := nativeconfig.Object(doc, "logging", "logging"); err != nil {
		return err
	}
	_, err = nativeconfig.Object(defaults, "heartbeat", "agents.defaults.heartbeat")
	return err
}
