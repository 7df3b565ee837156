package gwtest

import (
	"context"
	"sync"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/digest"
)

// MemFiles is an in-memory agentgw.FileClient keyed by gateway URL and file
// name, for tests of OCC's own rules above the native protocol (API
// handlers, the Go client). Tests of the protocol itself run against the
// real gateway. It is safe for concurrent use.
type MemFiles struct {
	mu    sync.Mutex
	files map[string]string
	next  func() (agentgw.File, error)
	sets  int
}

// NewMemFiles returns an empty MemFiles: every file is missing.
func NewMemFiles() *MemFiles { return &MemFiles{files: map[string]string{}} }

// FailNext makes the next Get or Set return f's result instead of doing
// its work (for example an agentgw.Error of kind Unknown).
func (m *MemFiles) FailNext(f func() (agentgw.File, error)) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.next = f
}

// Sets is the number of Set calls so far, including failed ones.
func (m *MemFiles) Sets() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.sets
}

func (m *MemFiles) take() func() (agentgw.File, error) {
	n := m.next
	m.next = nil
	return n
}

// Get implements agentgw.FileClient.
func (m *MemFiles) Get(ctx context.Context, t agentgw.Target, name string) (agentgw.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := m.take(); n != nil {
		return n()
	}
	c, ok := m.files[t.URL+name]
	if !ok {
		return agentgw.File{Name: name, Missing: true}, nil
	}
	return agentgw.File{Name: name, Content: c, Hash: digest.Of(c), Size: int64(len(c))}, nil
}

// Set is SetAdmitted without an admission.
func (m *MemFiles) Set(ctx context.Context, t agentgw.Target, name, content, expectedHash string) (agentgw.File, error) {
	return m.SetAdmitted(ctx, t, name, content, expectedHash, nil)
}

// SetAdmitted implements agentgw.FileClient: admit first (a refused
// admission is Unavailable "not_admitted" and counts as no set), then a
// compare-and-swap when expectedHash is set, answering agentgw.Conflict
// with the current hash on a mismatch.
func (m *MemFiles) SetAdmitted(ctx context.Context, t agentgw.Target, name, content, expectedHash string, admit agentgw.Admit) (agentgw.File, error) {
	if admit != nil {
		if err := admit(ctx); err != nil {
			return agentgw.File{}, &agentgw.Error{Kind: agentgw.Unavailable, Reason: "not_admitted", Err: err}
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sets++
	if n := m.take(); n != nil {
		return n()
	}
	cur, ok := m.files[t.URL+name]
	if expectedHash != "" && (!ok || digest.Of(cur) != expectedHash) {
		h := ""
		if ok {
			h = digest.Of(cur)
		}
		return agentgw.File{}, &agentgw.Error{Kind: agentgw.Conflict, Reason: "answered_conflict", CurrentHash: h}
	}
	m.files[t.URL+name] = content
	return agentgw.File{Name: name, Content: content, Hash: digest.Of(content), Size: int64(len(content))}, nil
}

// Seed stores a file as if the gateway at gatewayURL already had it.
func (m *MemFiles) Seed(gatewayURL, name, content string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.files[gatewayURL+name] = content
}
