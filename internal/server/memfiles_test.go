package server_test

import (
	"context"
	"crypto/sha256"
	"encoding/hex"
	"sync"

	"github.com/openclaw/occ/internal/agentgw"
)

// memFiles is an in-memory agentgw.FileClient keyed by gateway URL, for
// API tests that are about OCC's rules rather than the native protocol
// (those run against the real gateway in package agentgw and in
// files_test.go).
type memFiles struct {
	mu    sync.Mutex
	files map[string]string
	// next, when set, replaces the result of the next call.
	next func() (agentgw.File, error)
	sets int
}

func newMemFiles() *memFiles { return &memFiles{files: map[string]string{}} }

func hexSHA(s string) string {
	sum := sha256.Sum256([]byte(s))
	return hex.EncodeToString(sum[:])
}

func (m *memFiles) take() func() (agentgw.File, error) {
	n := m.next
	m.next = nil
	return n
}

func (m *memFiles) Get(ctx context.Context, t agentgw.Target, name string) (agentgw.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if n := m.take(); n != nil {
		return n()
	}
	c, ok := m.files[t.URL+name]
	if !ok {
		return agentgw.File{Name: name, Missing: true}, nil
	}
	return agentgw.File{Name: name, Content: c, Hash: hexSHA(c), Size: int64(len(c))}, nil
}

func (m *memFiles) Set(ctx context.Context, t agentgw.Target, name, content, expectedHash string) (agentgw.File, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.sets++
	if n := m.take(); n != nil {
		return n()
	}
	cur, ok := m.files[t.URL+name]
	if expectedHash != "" && (!ok || hexSHA(cur) != expectedHash) {
		h := ""
		if ok {
			h = hexSHA(cur)
		}
		return agentgw.File{}, &agentgw.Error{Kind: agentgw.Conflict, Reason: "answered_conflict", CurrentHash: h}
	}
	m.files[t.URL+name] = content
	return agentgw.File{Name: name, Content: content, Hash: hexSHA(content), Size: int64(len(content))}, nil
}
