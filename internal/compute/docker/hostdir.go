package docker

import (
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"net"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/workspace"
)

// Files of an Agent's host directory, DataDir/docker/<agentHash>.
const (
	fileAgent    = "agent.json"
	fileToken    = "token"
	filePort     = "port"
	fileServing  = "serving"
	fileIdentity = "setup-identity.json"
)

// hash names an Agent's (or a revision's) objects: the first 12 hex digits
// of the id's SHA-256, so ids never become names or paths.
func hash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])[:12]
}

// hostDir is one Agent's directory on occ's host.
type hostDir struct{ dir string }

func (h hostDir) path(name string) string { return filepath.Join(h.dir, name) }

// agentInfo is agent.json, what Recover reads.
type agentInfo struct {
	AgentID     string `json:"agentId"`
	NamespaceID string `json:"namespaceId"`
}

// ensure creates the directory (0700), agent.json and the token, once.
func (h hostDir) ensure(agentID, namespaceID string) error {
	if err := os.MkdirAll(h.dir, 0o700); err != nil {
		return fmt.Errorf("docker: create %s: %w", h.dir, err)
	}
	if err := os.Chmod(h.dir, 0o700); err != nil {
		return fmt.Errorf("docker: chmod %s: %w", h.dir, err)
	}
	if _, err := os.Stat(h.path(fileAgent)); errors.Is(err, fs.ErrNotExist) {
		b, _ := json.Marshal(agentInfo{AgentID: agentID, NamespaceID: namespaceID})
		if err := writeFileAtomic(h.path(fileAgent), b); err != nil {
			return err
		}
	}
	_, err := h.ensureToken()
	return err
}

// ensureToken creates the token file once (32 random bytes, hex, 0600)
// and returns the token; an existing one is checked, never replaced.
func (h hostDir) ensureToken() (string, error) {
	tok, err := h.token()
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("docker: token: %w", err)
	}
	tok = hex.EncodeToString(raw[:])
	f, err := os.OpenFile(h.path(fileToken), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("docker: create token file: %w", err)
	}
	_, werr := f.WriteString(tok)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(h.path(fileToken))
		return "", fmt.Errorf("docker: write token file: %w", err)
	}
	return tok, nil
}

// token reads and checks the token file; errors never hold its content.
func (h hostDir) token() (string, error) {
	p := h.path(fileToken)
	fi, err := os.Lstat(p)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("docker: token file %s must be a regular file of mode 0600", p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	if !digest.Valid(string(b)) {
		return "", fmt.Errorf("docker: token file %s is malformed", p)
	}
	return string(b), nil
}

// port is the persisted port, 0 when none.
func (h hostDir) port() int {
	b, err := os.ReadFile(h.path(filePort))
	if err != nil {
		return 0
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || p <= 0 || p > 65535 {
		return 0
	}
	return p
}

// serving returns the serving revision's id and number ("" when none).
func (h hostDir) serving() (string, int64) {
	b, err := os.ReadFile(h.path(fileServing))
	if err != nil {
		return "", 0
	}
	id, num, _ := strings.Cut(strings.TrimSpace(string(b)), " ")
	n, _ := strconv.ParseInt(num, 10, 64)
	return id, n
}

func (h hostDir) writeServing(id string, n int64) error {
	return writeFileAtomic(h.path(fileServing), []byte(id+" "+strconv.FormatInt(n, 10)+"\n"))
}

func (h hostDir) clearServing() error {
	if err := os.Remove(h.path(fileServing)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("docker: clear serving mark: %w", err)
	}
	return nil
}

// identity is the applied setup's identity (Completed set), nil when the
// Agent never had a setup applied.
func (h hostDir) identity() (*workspace.Setup, error) {
	b, err := os.ReadFile(h.path(fileIdentity))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var s workspace.Setup
	if err := json.Unmarshal(b, &s); err != nil || s.ID == "" {
		return nil, fmt.Errorf("docker: %s is malformed", h.path(fileIdentity))
	}
	s.Files, s.Completed = nil, true
	return &s, nil
}

func (h hostDir) writeIdentity(s workspace.Setup) error {
	b, err := json.Marshal(s.WithoutFiles())
	if err != nil {
		return err
	}
	return writeFileAtomic(h.path(fileIdentity), b)
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
		if p := (hostDir{filepath.Join(root, e.Name())}).port(); p != 0 {
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
		if err := writeFileAtomic(h.path(filePort), []byte(strconv.Itoa(p)+"\n")); err != nil {
			return 0, err
		}
		return p, nil
	}
	return 0, fmt.Errorf("docker: no free loopback port in %d-%d", lo, hi)
}

// writeFileAtomic replaces path with data (0600): a temporary file in the
// same directory, fsync, rename.
func writeFileAtomic(path string, data []byte) error {
	f, err := os.CreateTemp(filepath.Dir(path), "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("docker: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, werr := f.Write(data)
	if err := errors.Join(f.Chmod(0o600), werr, f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("docker: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("docker: write %s: %w", path, err)
	}
	return nil
}

func readAgentInfo(h hostDir) (agentInfo, error) {
	var info agentInfo
	b, err := os.ReadFile(h.path(fileAgent))
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil || info.AgentID == "" {
		return info, fmt.Errorf("docker: %s is malformed", h.path(fileAgent))
	}
	return info, nil
}
