package workspace

// MarkerName is the file, in the workspace directory, whose content is the
// setup identity of the workspace: it records that setup completed, and
// for which setup.
const MarkerName = ".oce-workspace-setup.json"

// Identity names one workspace setup. DefaultsID is empty when the create
// request named no defaults identity.
type Identity struct {
	ID          string `json:"id"`
	NamespaceID string `json:"namespaceId"`
	AgentID     string `json:"agentId"`
	DefaultsID  string `json:"defaultsId,omitempty"`
}

// MarshalMarker returns the marker content for id: JSON.stringify of
// {id, namespaceId, agentId, defaultsId} in that key order, defaultsId left
// out when empty. The runner decides whether an existing marker matches by
// comparing this serialization as a string (the reference compares
// JSON.stringify of the parsed marker with it), so key order and escaping
// are part of the on-disk contract.
func (id Identity) MarshalMarker() []byte {
	b := make([]byte, 0, 64+len(id.ID)+len(id.NamespaceID)+len(id.AgentID)+len(id.DefaultsID))
	b = append(b, `{"id":`...)
	b = AppendJSString(b, id.ID)
	b = append(b, `,"namespaceId":`...)
	b = AppendJSString(b, id.NamespaceID)
	b = append(b, `,"agentId":`...)
	b = AppendJSString(b, id.AgentID)
	if id.DefaultsID != "" {
		b = append(b, `,"defaultsId":`...)
		b = AppendJSString(b, id.DefaultsID)
	}
	return append(b, '}')
}
