package docker

import (
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/openclaw/occ/internal/compute/agentdir"
)

// fileServing is the serving mark in an Agent's host directory,
// DataDir/docker/<agentdir.Hash(agent)>; agentdir owns the other files
// (agent.json, the token, the port, the setup identity). The mark holds the
// revision's id and number: the driver keeps no revision.json, and the
// number guards against rolling back.
const fileServing = "serving"

// hostDir is one Agent's directory on occ's host.
type hostDir struct{ agentdir.Dir }

// ensure creates the directory (0700, narrowed again if someone widened
// it), agent.json and the token, once.
func (h hostDir) ensure(agentID, namespaceID string) error {
	dir := string(h.Dir)
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("docker: create %s: %w", dir, err)
	}
	if err := os.Chmod(dir, 0o700); err != nil {
		return fmt.Errorf("docker: chmod %s: %w", dir, err)
	}
	if err := h.Ensure(agentdir.Info{AgentID: agentID, NamespaceID: namespaceID}); err != nil {
		return fmt.Errorf("docker: %w", err)
	}
	return nil
}

// port is the persisted port, 0 when none or unreadable (a new one is
// allocated).
func (h hostDir) port() int {
	p, _ := h.Port()
	return p
}

// serving returns the serving revision's id and number ("" when none).
func (h hostDir) serving() (string, int64) {
	b, err := os.ReadFile(h.Path(fileServing))
	if err != nil {
		return "", 0
	}
	id, num, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	n, _ := strconv.ParseInt(num, 10, 64)
	return id, n
}

func (h hostDir) writeServing(id string, n int64) error {
	return agentdir.WriteFileAtomic(h.Path(fileServing), []byte(id+" "+strconv.FormatInt(n, 10)+"\n"), 0o600)
}

func (h hostDir) clearServing() error {
	if err := os.Remove(h.Path(fileServing)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("docker: clear serving mark: %w", err)
	}
	return nil
}

// allocatePort returns the Agent's port: the persisted one, else the first
// port of [lo, hi] that no other Agent under root holds and nothing
// listens on, which it persists. The caller serializes allocations.
func (h hostDir) allocatePort(root string, lo, hi int) (int, error) {
	if p := h.port(); p != 0 {
		return p, nil
	}
	taken := map[int]bool{}
	entries, _ := os.ReadDir(root)
	for _, e := range entries {
		if p := (hostDir{agentdir.Dir(filepath.Join(root, e.Name()))}).port(); p != 0 {
			taken[p] = true
		}
	}
	for p := lo; p <= hi; p++ {
		if taken[p] {
			continue
		}
		l, err := net.Listen("tcp", net.JoinHostPort("127.0.0.1", strconv.Itoa(p)))
		if err != nil {
			continue
		}
		l.Close()
		if err := h.WritePort(p); err != nil {
			return 0, fmt.Errorf("docker: %w", err)
		}
		return p, nil
	}
	return 0, fmt.Errorf("docker: no free loopback port in %d-%d", lo, hi)
}
