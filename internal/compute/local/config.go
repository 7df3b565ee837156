package local

import (
	"bytes"
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/openclaw/occ/internal/compute/nativeconfig"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/setuprunner"
)

// renderConfig merges rev's native configuration with what OCC controls
// for a local gateway and returns the document to write. What OCC
// controls wins; a document that asks for something else where that would
// break the local contract (auth other than OCC's token, binding beyond
// loopback, a remote gateway, another workspace, more than the main agent)
// is refused with a permanent CONFIGURATION_INVALID. Messages name keys,
// never values: a configuration may carry secrets.
//
// OCC sets: gateway.mode "local", gateway.bind "loopback", gateway.port,
// gateway.auth {mode "token", token}, agents.defaults.workspace,
// agents.defaults.heartbeat.every "0m" (a heartbeat would run agent turns
// nobody asked for), logging.file and logging.maxFileBytes (per Agent,
// capped). Every other key passes through unchanged, and the gateway
// validates it at start (an unknown key makes it exit with status 78).
func (d *Driver) renderConfig(a *agent, rev compute.Revision, port int) ([]byte, error) {
	raw := bytes.TrimSpace(rev.Configuration)
	if len(raw) == 0 {
		raw = []byte("{}")
	}
	doc, err := nativeconfig.Decode(raw)
	if err != nil {
		return nil, err
	}
	workspace := a.path(dirWorkspace)
	if err := checkConflicts(doc, workspace); err != nil {
		return nil, err
	}
	if err := setuprunner.MainAgentSupported(raw); err != nil {
		return nil, invalidConfig("only the native main agent is supported: %v", err)
	}
	token, err := a.readToken()
	if err != nil {
		return nil, fmt.Errorf("local: token: %w", err)
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
	defaults["workspace"] = workspace
	nativeconfig.Child(defaults, "heartbeat")["every"] = "0m"
	logging := nativeconfig.Child(doc, "logging")
	logging["file"] = a.path(dirLogs, "openclaw.log")
	// The native file log keeps five archives next to the active file:
	// six files of maxFileBytes must fit in MaxLogBytes.
	limit := max(d.o.MaxLogBytes/6, 4096)
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
		return nil, fmt.Errorf("local: render configuration: %w", err)
	}
	return buf.Bytes(), nil
}

// checkConflicts refuses documents that set what OCC controls to
// something else.
func checkConflicts(doc map[string]any, workspace string) error {
	gateway, err := nativeconfig.Object(doc, "gateway", "gateway")
	if err != nil {
		return err
	}
	if err := wantString(gateway, "gateway", "mode", "local"); err != nil {
		return err
	}
	if err := wantString(gateway, "gateway", "bind", "loopback"); err != nil {
		return err
	}
	if _, ok := gateway["customBindHost"]; ok {
		return invalidConfig("gateway.customBindHost is not allowed: the local driver binds to loopback only")
	}
	// Tailscale serve or funnel would expose the loopback listener.
	ts, err := nativeconfig.Object(gateway, "tailscale", "tailscale")
	if err != nil {
		return err
	}
	if err := wantString(ts, "gateway.tailscale", "mode", "off"); err != nil {
		return err
	}
	auth, err := nativeconfig.Object(gateway, "auth", "auth")
	if err != nil {
		return err
	}
	if err := wantString(auth, "gateway.auth", "mode", "token"); err != nil {
		return err
	}
	for _, k := range []string{"token", "password", "trustedProxy"} {
		if _, ok := auth[k]; ok {
			return invalidConfig("gateway.auth.%s is not allowed: OCC generates and owns the gateway token", k)
		}
	}
	agents, err := nativeconfig.Object(doc, "agents", "agents")
	if err != nil {
		return err
	}
	defaults, err := nativeconfig.Object(agents, "defaults", "defaults")
	if err != nil {
		return err
	}
	if err := wantPath(defaults, "agents.defaults.workspace", workspace); err != nil {
		return err
	}
	entries, err := nativeconfig.Object(agents, "entries", "entries")
	if err != nil {
		return err
	}
	if main, ok := entries["main"].(map[string]any); ok {
		if err := wantPath(main, "agents.entries.main.workspace", workspace); err != nil {
			return err
		}
	}
	if _, err := nativeconfig.Object(doc, "logging", "logging"); err != nil {
		return err
	}
	_, err = nativeconfig.Object(defaults, "heartbeat", "heartbeat")
	return err
}

// wantString accepts an absent key or the one value OCC sets.
func wantString(obj map[string]any, at, key, want string) error {
	v, ok := obj[key]
	if !ok {
		return nil
	}
	if s, isString := v.(string); !isString || s != want {
		return invalidConfig("%s.%s must be absent or %q on the local driver", at, key, want)
	}
	return nil
}

// wantPath accepts an absent workspace or the Agent's own.
func wantPath(obj map[string]any, name, want string) error {
	v, ok := obj[lastKey(name)]
	if !ok {
		return nil
	}
	if s, isString := v.(string); !isString || !filepath.IsAbs(s) || filepath.Clean(s) != want {
		return invalidConfig("%s must be absent: the local driver places the workspace in the Agent's directory", name)
	}
	return nil
}

func lastKey(name string) string {
	for i := len(name) - 1; i >= 0; i-- {
		if name[i] == '.' {
			return name[i+1:]
		}
	}
	return name
}

func invalidConfig(format string, args ...any) error {
	return compute.Permanent(compute.CodeConfigurationInvalid, fmt.Errorf("local: "+format, args...))
}

// writeRevision writes the rendered configuration (0600: it holds the
// token) and revision.json into the revision's directory, returning the
// configuration path.
func (a *agent) writeRevision(rev compute.Revision, cfg []byte) (string, error) {
	dir := a.revisionDir(rev.ID)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return "", fmt.Errorf("local: create %s: %w", dir, err)
	}
	info, err := json.Marshal(revisionInfo{ID: rev.ID, AgentID: rev.AgentID, NamespaceID: rev.NamespaceID, Number: rev.Number})
	if err != nil {
		return "", err
	}
	if err := writeFileAtomic(filepath.Join(dir, fileRevision), info, 0o600); err != nil {
		return "", err
	}
	p := filepath.Join(dir, fileConfig)
	if err := writeFileAtomic(p, cfg, 0o600); err != nil {
		return "", err
	}
	return p, nil
}

// repointConfig sets gateway.port in an already rendered configuration,
// for restarting a revision after its Agent's port moved. The gateway
// also gets --port, which wins; this keeps the file truthful.
func repointConfig(path string, port int) error {
	b, err := os.ReadFile(path)
	if err != nil {
		return err
	}
	doc, err := nativeconfig.Decode(b)
	if err != nil {
		return fmt.Errorf("local: %s: %w", path, err)
	}
	gw := nativeconfig.Child(doc, "gateway")
	if n, ok := gw["port"].(json.Number); ok && n.String() == fmt.Sprint(port) {
		return nil
	}
	gw["port"] = port
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	if err := enc.Encode(doc); err != nil {
		return err
	}
	return writeFileAtomic(path, buf.Bytes(), 0o600)
}
