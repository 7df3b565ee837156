package local

import (
	"encoding/json"
	"fmt"
	"os"
	"path/filepath"

	"github.com/openclaw/occ/internal/compute/agentdir"
	"github.com/openclaw/occ/internal/compute/nativeconfig"

	"github.com/openclaw/occ/internal/compute"
)

// renderConfig merges rev's native configuration with what OCC controls
// for a local gateway and returns the document to write. What OCC
// controls wins; a document that asks for something else where that would
// break the local contract (auth other than OCC's token, binding beyond
// loopback, a remote gateway, another workspace, more than the main agent)
// is refused with a permanent CONFIGURATION_INVALID
// (nativeconfig.Direct.Check has the rules). Messages name keys, never
// values: a configuration may carry secrets.
//
// OCC sets (nativeconfig.Direct.Apply): gateway.mode "local", gateway.bind
// "loopback", gateway.port, gateway.auth {mode "token", token},
// agents.defaults.workspace, agents.defaults.heartbeat.every "0m",
// logging.file and logging.maxFileBytes (per Agent, capped). Every other
// key passes through unchanged, and the gateway validates it at start (an
// unknown key makes it exit with status 78).
func (d *Driver) renderConfig(a *agent, rev compute.Revision, port int) ([]byte, error) {
	direct := nativeconfig.Direct{
		Driver:       "local",
		Workspace:    a.path(dirWorkspace),
		WorkspaceWhy: "the local driver places the workspace in the Agent's directory",
		LogFile:      a.path(dirLogs, "openclaw.log"),
		MaxLogBytes:  d.o.MaxLogBytes,
	}
	doc, err := direct.Parse(rev.Configuration)
	if err != nil {
		return nil, err
	}
	// Read after the checks: a refused document is permanent whatever the
	// token's state.
	token, err := a.files().Token()
	if err != nil {
		return nil, fmt.Errorf("local: token: %w", err)
	}
	direct.Apply(doc, port, token)
	out, err := nativeconfig.Encode(doc)
	if err != nil {
		return nil, fmt.Errorf("local: %w", err)
	}
	return out, nil
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
	if err := agentdir.WriteFileAtomic(filepath.Join(dir, fileRevision), info, 0o600); err != nil {
		return "", err
	}
	p := filepath.Join(dir, fileConfig)
	if err := agentdir.WriteFileAtomic(p, cfg, 0o600); err != nil {
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
	out, err := nativeconfig.Encode(doc)
	if err != nil {
		return err
	}
	return agentdir.WriteFileAtomic(path, out, 0o600)
}
