package workspace

// Setup is one Agent's workspace setup: the one type the Compute driver
// contract delivers with a revision (compute.WorkspaceSetup names it) and
// the setup runner applies. A pending setup (Completed false) carries the
// submitted files; a completed one is only its identity, and drivers and
// the runner then only verify the marker.
//
// As the runner's JSON payload it is a closed object with the keys id,
// namespaceId, agentId, defaultsId (optional), files (optional; absent
// when completed) and completed, in that order; the field order and tags
// below are that wire format (setuprunner.ParsePayload reads it).
type Setup struct {
	ID          string            `json:"id"`
	NamespaceID string            `json:"namespaceId"`
	AgentID     string            `json:"agentId"`
	DefaultsID  string            `json:"defaultsId,omitempty"`
	Files       map[string]string `json:"files,omitempty"`
	Completed   bool              `json:"completed"`
}

// Identity returns the setup's identity, the content of its marker.
func (s Setup) Identity() Identity {
	return Identity{ID: s.ID, NamespaceID: s.NamespaceID, AgentID: s.AgentID, DefaultsID: s.DefaultsID}
}

// WithoutFiles returns the setup without its files, Completed kept: what a
// completed setup record carries once its files are gone.
func (s Setup) WithoutFiles() Setup {
	s.Files = nil
	return s
}
