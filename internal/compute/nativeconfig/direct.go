package nativeconfig

import (
	"bytes"
	"encoding/json"
	"fmt"
	"path"

	"github.com/openclaw/occ/internal/setuprunner"
)

// Direct is what OCC controls in the native configuration of a gateway
// that a driver runs itself on one host (the local, Docker and SSH
// drivers): the gateway is a local one listening on that host's loopback,
// it authenticates with OCC's token and nothing else, its workspace is
// the one the driver places, it runs no heartbeat and, where the driver
// owns the native file log, its log file and size are the driver's. What
// differs between those drivers is a field; the rules are the same. (The
// Kubernetes driver's gateway listens on the Pod network behind a proxy
// and has rules of its own.)
type Direct struct {
	// Driver names the driver; it begins every message ("local: ...").
	Driver string
	// Workspace is the one workspace the document may state, absolute,
	// clean and slash-separated (the gateway's view of it). A stated
	// workspace is compared after path.Clean, so a trailing slash is the
	// same workspace.
	Workspace string
	// WorkspaceWhy ends the message refusing another workspace: why the
	// workspace is the driver's.
	WorkspaceWhy string
	// LogFile, when not empty, is the native file log the driver owns:
	// Apply sets logging.file to it and caps logging.maxFileBytes by
	// MaxLogBytes, and Check requires logging to be an object. Empty
	// leaves logging to the document.
	LogFile     string
	MaxLogBytes int64
}

// Parse reads a revision's native configuration (empty is {}) and
// refuses it when it conflicts with what d controls or configures more
// than the native main agent. Every error is a permanent
// CONFIGURATION_INVALID naming keys, never values: a document can hold
// secrets.
func (d Direct) Parse(raw []byte) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	doc, err := Decode(raw)
	if err != nil {
		return nil, err
	}
	if err := d.Check(doc); err != nil {
		return nil, err
	}
	if err := setuprunner.MainAgentSupported(raw); err != nil {
		return nil, d.invalid("only the native main agent is supported: %v", err)
	}
	return doc, nil
}

// Check refuses a document that sets what d controls to something else:
// gateway.mode other than "local", gateway.bind other than "loopback", any
// gateway.customBindHost, gateway.tailscale.mode other than "off" (serve
// or funnel would expose the loopback listener), gateway.auth.mode other
// than "token", any of gateway.auth.token, .password or .trustedProxy
// (OCC generates and owns the token), a workspace in agents.defaults or
// agents.entries.main other than d.Workspace, and a non-object where d
// writes into an object (gateway, gateway.tailscale, gateway.auth, agents,
// agents.defaults, agents.entries, agents.defaults.heartbeat, and logging
// when d owns the log). Absent keys, and the values OCC sets, are
// accepted.
func (d Direct) Check(doc map[string]any) error {
	gateway, err := d.object(doc, "gateway", "gateway")
	if err != nil {
		return err
	}
	if err := d.wantString(gateway, "gateway", "mode", "local"); err != nil {
		return err
	}
	if err := d.wantString(gateway, "gateway", "bind", "loopback"); err != nil {
		return err
	}
	if _, ok := gateway["customBindHost"]; ok {
		return d.invalid("gateway.customBindHost is not allowed: the gateway listens on loopback only")
	}
	tailscale, err := d.object(gateway, "tailscale", "gateway.tailscale")
	if err != nil {
		return err
	}
	if err := d.wantString(tailscale, "gateway.tailscale", "mode", "off"); err != nil {
		return err
	}
	auth, err := d.object(gateway, "auth", "gateway.auth")
	if err != nil {
		return err
	}
	if err := d.wantString(auth, "gateway.auth", "mode", "token"); err != nil {
		return err
	}
	for _, k := range []string{"token", "password", "trustedProxy"} {
		if _, ok := auth[k]; ok {
			return d.invalid("gateway.auth.%s is not allowed: OCC generates and owns the gateway token", k)
		}
	}
	agents, err := d.object(doc, "agents", "agents")
	if err != nil {
		return err
	}
	defaults, err := d.object(agents, "defaults", "agents.defaults")
	if err != nil {
		return err
	}
	if err := d.wantWorkspace(defaults, "agents.defaults.workspace"); err != nil {
		return err
	}
	entries, err := d.object(agents, "entries", "agents.entries")
	if err != nil {
		return err
	}
	if main, ok := entries["main"].(map[string]any); ok {
		if err := d.wantWorkspace(main, "agents.entries.main.workspace"); err != nil {
			return err
		}
	}
	if d.LogFile != "" {
		if _, err := d.object(doc, "logging", "logging"); err != nil {
			return err
		}
	}
	_, err = d.object(defaults, "heartbeat", "agents.defaults.heartbeat")
	return err
}

// Apply sets what d controls in a document Check accepted: gateway.mode
// "local", gateway.bind "loopback", gateway.port, gateway.auth {mode
// "token", token}, agents.defaults.workspace, agents.defaults.heartbeat
// .every "0m" (a heartbeat would run agent turns nobody asked for) and,
// when d owns the log, logging.file and logging.maxFileBytes: the
// document's value when it is a positive integer below the cap, else the
// cap, MaxLogBytes/6 (the native file log keeps five archives next to the
// active file: six files must fit) and at least 4096. Every other key
// passes through unchanged; the gateway validates it at start.
func (d Direct) Apply(doc map[string]any, port int, token string) {
	gateway := Child(doc, "gateway")
	gateway["mode"] = "local"
	gateway["bind"] = "loopback"
	gateway["port"] = port
	auth := Child(gateway, "auth")
	auth["mode"] = "token"
	auth["token"] = token
	defaults := Child(Child(doc, "agents"), "defaults")
	defaults["workspace"] = d.Workspace
	Child(defaults, "heartbeat")["every"] = "0m"
	if d.LogFile == "" {
		return
	}
	logging := Child(doc, "logging")
	logging["file"] = d.LogFile
	limit := max(d.MaxLogBytes/6, 4096)
	if n, ok := logging["maxFileBytes"].(json.Number); ok {
		if v, err := n.Int64(); err == nil && v > 0 && v < limit {
			limit = v
		}
	}
	logging["maxFileBytes"] = limit
}

// Encode writes a document as the gateway reads it: indented, with
// numbers as they were decoded and no HTML escaping.
func Encode(doc map[string]any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return nil, fmt.Errorf("encode the native configuration: %w", err)
	}
	return buf.Bytes(), nil
}

func (d Direct) invalid(format string, args ...any) error {
	return Invalid(d.Driver+": "+format, args...)
}

// object is Object with the driver's name in the message.
func (d Direct) object(obj map[string]any, key, name string) (map[string]any, error) {
	m, err := Object(obj, key, name)
	if err != nil {
		return nil, d.invalid("%s must be an object", name)
	}
	return m, nil
}

// wantString accepts an absent key or the one value OCC sets.
func (d Direct) wantString(obj map[string]any, at, key, want string) error {
	v, ok := obj[key]
	if !ok {
		return nil
	}
	if s, isString := v.(string); !isString || s != want {
		return d.invalid("%s.%s must be absent or %q", at, key, want)
	}
	return nil
}

// wantWorkspace accepts an absent workspace or d's own.
func (d Direct) wantWorkspace(obj map[string]any, name string) error {
	v, ok := obj["workspace"]
	if !ok {
		return nil
	}
	if s, isString := v.(string); !isString || path.Clean(s) != d.Workspace {
		return d.invalid("%s must be absent or the Agent's own: %s", name, d.WorkspaceWhy)
	}
	return nil
}
