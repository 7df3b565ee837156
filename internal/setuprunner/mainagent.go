package setuprunner

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
)

// ErrMainAgentUnsupported is wrapped by MainAgentSupported's failures.
// Drivers report it as a configuration failure of the deployment.
var ErrMainAgentUnsupported = errors.New("workspace setup needs a native configuration with only the main agent")

// MainAgentSupported applies the main-agent constraint to a native
// OpenClaw configuration document (JSON): native setup seeds, and the
// runner writes, the workspace of the agent "main" only, so a
// configuration that defines other agents could start an agent whose
// workspace never received the submitted files.
//
//   - no "agents" key: supported (native defaults give one main agent);
//   - "agents" not an object, or holding "list": unsupported;
//   - no "agents.entries": supported;
//   - "agents.entries" must be an object with exactly one key, "main",
//     whose value is an object.
//
// A document that is not a JSON object is unsupported too. Duplicate keys
// count once, the last value winning, as with JSON.parse.
func MainAgentSupported(nativeConfig []byte) error {
	top, ok := asRecord(nativeConfig)
	if !ok {
		return fmt.Errorf("%w: the configuration is not a JSON object", ErrMainAgentUnsupported)
	}
	rawAgents, ok := top["agents"]
	if !ok {
		return nil
	}
	agents, ok := asRecord(rawAgents)
	if !ok {
		return fmt.Errorf("%w: agents is not an object", ErrMainAgentUnsupported)
	}
	if _, ok := agents["list"]; ok {
		return fmt.Errorf("%w: agents.list is set", ErrMainAgentUnsupported)
	}
	rawEntries, ok := agents["entries"]
	if !ok {
		return nil
	}
	entries, ok := asRecord(rawEntries)
	if !ok || len(entries) != 1 {
		return fmt.Errorf("%w: agents.entries must hold only main", ErrMainAgentUnsupported)
	}
	main, ok := entries["main"]
	if !ok {
		return fmt.Errorf("%w: agents.entries must hold only main", ErrMainAgentUnsupported)
	}
	if _, ok := asRecord(main); !ok {
		return fmt.Errorf("%w: agents.entries.main is not an object", ErrMainAgentUnsupported)
	}
	return nil
}

// asRecord decodes raw when it is a JSON object (not null, not an array).
func asRecord(raw []byte) (map[string]json.RawMessage, bool) {
	trimmed := bytes.TrimLeft(raw, " \t\r\n")
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return nil, false
	}
	var m map[string]json.RawMessage
	if err := json.Unmarshal(trimmed, &m); err != nil {
		return nil, false
	}
	return m, true
}
