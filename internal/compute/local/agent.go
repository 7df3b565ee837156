package local

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/sha256"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strconv"
	"strings"

	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/workspace"
)

// Names inside an Agent's directory (see the package documentation).
const (
	fileAgent    = "agent.json"
	fileToken    = "token"
	filePort     = "port"
	filePID      = "pid"
	fileServing  = "serving"
	fileIdentity = "setup-identity.json"
	fileLog      = "gateway.log"
	fileConfig   = "openclaw.json"
	fileRevision = "revision.json"

	dirHome      = "home"
	dirState     = "state"
	dirWorkspace = "workspace"
	dirRevisions = "revisions"
	dirLogs      = "logs"
	// dirTmp is TMPDIR of the Agent's gateway and setup runs, so their
	// temporary files stay in the Agent's own directory.
	dirTmp = "tmp"
)

// agentHash names an Agent's (or a revision's) directory: the first 12 hex
// digits of the id's SHA-256, so that ids never become paths.
func agentHash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])[:12]
}

// agent is the driver's record of one Agent. Its lock serializes every
// verb and Recover for the Agent; a.sup is only read or replaced under it.
// Lock order: agent lock, then Driver.mu (never the reverse while waiting).
type agent struct {
	d   *Driver
	id  string
	dir string

	sem chan struct{} // the lock: a one-slot semaphore, so waiting honours a context

	loaded bool        // load ran since the record was created or reset
	sup    *supervisor // the Agent's gateway generation, nil when none
}

func newAgent(d *Driver, id string) *agent {
	return &agent{d: d, id: id, dir: filepath.Join(d.agentsDir, agentHash(id)), sem: make(chan struct{}, 1)}
}

func (a *agent) lock(ctx context.Context) error {
	select {
	case a.sem <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (a *agent) lockNoCtx() { a.sem <- struct{}{} }
func (a *agent) unlock()    { <-a.sem }

// reset forgets everything after DeleteAgent; the caller holds the lock.
func (a *agent) reset() {
	a.loaded = false
	a.sup = nil
}

func (a *agent) path(elem ...string) string {
	return filepath.Join(append([]string{a.dir}, elem...)...)
}

func (a *agent) revisionDir(revID string) string {
	return a.path(dirRevisions, agentHash(revID))
}

func (a *agent) configPath(revID string) string {
	return filepath.Join(a.revisionDir(revID), fileConfig)
}

func (a *agent) exists() bool {
	_, err := os.Stat(a.path(fileAgent))
	return err == nil
}

// load adopts a gateway left running by an earlier process (or by this
// one before Close), once per record. The caller holds the lock.
func (a *agent) load() error {
	if a.loaded {
		return nil
	}
	if !a.exists() {
		a.loaded = true
		return nil
	}
	p, rev, err := a.findRunning()
	if err != nil {
		return err
	}
	if p != nil {
		a.d.adopt(a, p, rev)
	}
	a.loaded = true
	return nil
}

// agentInfo is agent.json.
type agentInfo struct {
	AgentID     string `json:"agentId"`
	NamespaceID string `json:"namespaceId"`
}

func readAgentInfo(dir string) (agentInfo, error) {
	var info agentInfo
	b, err := os.ReadFile(filepath.Join(dir, fileAgent))
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil || info.AgentID == "" {
		return info, fmt.Errorf("local: %s is malformed", filepath.Join(dir, fileAgent))
	}
	return info, nil
}

// ensureLayout creates the Agent's directories, agent.json and token. It is
// idempotent and never rewrites the token.
func (a *agent) ensureLayout(namespaceID string) error {
	for _, dir := range []string{a.dir, a.path(dirHome), a.path(dirState), a.path(dirWorkspace),
		a.path(dirRevisions), a.path(dirLogs), a.path(dirTmp)} {
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return fmt.Errorf("local: create %s: %w", dir, err)
		}
		// MkdirAll leaves an existing directory's mode alone; the Agent's
		// directory must stay private even if someone widened it.
		if err := os.Chmod(dir, 0o700); err != nil {
			return fmt.Errorf("local: chmod %s: %w", dir, err)
		}
	}
	if !a.exists() {
		b, err := json.Marshal(agentInfo{AgentID: a.id, NamespaceID: namespaceID})
		if err != nil {
			return err
		}
		if err := writeFileAtomic(a.path(fileAgent), b, 0o600); err != nil {
			return err
		}
	}
	_, err := a.ensureToken()
	return err
}

// ensureToken creates the token file once (32 random bytes, hex, 0600)
// and returns the token. An existing file is validated, never replaced:
// clients may hold it.
func (a *agent) ensureToken() (string, error) {
	tok, err := a.readToken()
	if err == nil {
		return tok, nil
	}
	if !errors.Is(err, fs.ErrNotExist) {
		return "", err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("local: token: %w", err)
	}
	tok = hex.EncodeToString(raw[:])
	f, err := os.OpenFile(a.path(fileToken), os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if err != nil {
		return "", fmt.Errorf("local: create token file: %w", err)
	}
	if _, err := f.WriteString(tok); err != nil {
		f.Close()
		os.Remove(a.path(fileToken))
		return "", fmt.Errorf("local: write token file: %w", err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		os.Remove(a.path(fileToken))
		return "", fmt.Errorf("local: write token file: %w", err)
	}
	if err := f.Close(); err != nil {
		return "", fmt.Errorf("local: write token file: %w", err)
	}
	return tok, nil
}

// readToken reads and checks the token file. Errors never include the
// content.
func (a *agent) readToken() (string, error) {
	p := a.path(fileToken)
	fi, err := os.Lstat(p)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("local: token file %s must be a regular file of mode 0600", p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	tok := string(b)
	if !digest.Valid(tok) {
		return "", fmt.Errorf("local: token file %s is malformed", p)
	}
	return tok, nil
}

// readPort returns the persisted port, 0 when none.
func (a *agent) readPort() (int, error) {
	b, err := os.ReadFile(a.path(filePort))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || p <= 0 || p > 65535 {
		return 0, nil // malformed: treated as unassigned, reassigned on start
	}
	return p, nil
}

func (a *agent) writePort(p int) error {
	return writeFileAtomic(a.path(filePort), []byte(strconv.Itoa(p)+"\n"), 0o600)
}

// serving returns the serving revision id, "" when none.
func (a *agent) serving() string {
	b, err := os.ReadFile(a.path(fileServing))
	if err != nil {
		return ""
	}
	return strings.TrimSpace(string(b))
}

func (a *agent) writeServing(revID string) error {
	return writeFileAtomic(a.path(fileServing), []byte(revID+"\n"), 0o600)
}

func (a *agent) clearServing() error {
	if err := os.Remove(a.path(fileServing)); err != nil && !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("local: clear serving mark: %w", err)
	}
	return nil
}

// revisionInfo is revisions/<hash>/revision.json: what Recover needs to
// restart a revision and what guards against rolling back.
type revisionInfo struct {
	ID          string `json:"id"`
	AgentID     string `json:"agentId"`
	NamespaceID string `json:"namespaceId"`
	Number      int64  `json:"number"`
}

func (a *agent) readRevisionInfo(revID string) (revisionInfo, error) {
	var info revisionInfo
	b, err := os.ReadFile(filepath.Join(a.revisionDir(revID), fileRevision))
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil || info.ID != revID {
		return info, fmt.Errorf("local: %s of revision %s is malformed", fileRevision, revID)
	}
	if _, err := os.Stat(a.configPath(revID)); err != nil {
		return info, err
	}
	return info, nil
}

func (a *agent) revisionNumber(revID string) (int64, bool) {
	info, err := a.readRevisionInfo(revID)
	if err != nil {
		return 0, false
	}
	return info.Number, true
}

// revisionOfConfig maps a configuration path (as found in a gateway's
// environment) back to the revision id, if it is one of this Agent's.
func (a *agent) revisionOfConfig(cfgPath string) (string, bool) {
	dir := filepath.Dir(cfgPath)
	if filepath.Base(cfgPath) != fileConfig || filepath.Dir(dir) != a.path(dirRevisions) {
		return "", false
	}
	b, err := os.ReadFile(filepath.Join(dir, fileRevision))
	if err != nil {
		return "", false
	}
	var info revisionInfo
	if json.Unmarshal(b, &info) != nil || info.ID == "" || agentHash(info.ID) != filepath.Base(dir) {
		return "", false
	}
	return info.ID, true
}

// identityFile is setup-identity.json: the setup identity without files.
type identityFile struct {
	ID          string `json:"id"`
	NamespaceID string `json:"namespaceId"`
	AgentID     string `json:"agentId"`
	DefaultsID  string `json:"defaultsId,omitempty"`
}

// readIdentity returns the persisted setup identity (Completed set, for
// the verifier), nil when the Agent never had a setup applied.
func (a *agent) readIdentity() (*workspace.Setup, error) {
	b, err := os.ReadFile(a.path(fileIdentity))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f identityFile
	if err := json.Unmarshal(b, &f); err != nil || f.ID == "" {
		return nil, fmt.Errorf("local: %s is malformed", a.path(fileIdentity))
	}
	return &workspace.Setup{ID: f.ID, NamespaceID: f.NamespaceID, AgentID: f.AgentID, DefaultsID: f.DefaultsID, Completed: true}, nil
}

func (a *agent) writeIdentity(s workspace.Setup) error {
	b, err := json.Marshal(identityFile{ID: s.ID, NamespaceID: s.NamespaceID, AgentID: s.AgentID, DefaultsID: s.DefaultsID})
	if err != nil {
		return err
	}
	if cur, err := os.ReadFile(a.path(fileIdentity)); err == nil && bytes.Equal(cur, b) {
		return nil
	}
	return writeFileAtomic(a.path(fileIdentity), b, 0o600)
}

// writeFileAtomic replaces path with data: a temporary file in the same
// directory, fsync, rename. Readers see the old or the new content.
func writeFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("local: write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	if err := f.Chmod(perm); err != nil {
		f.Close()
		return fmt.Errorf("local: write %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		f.Close()
		return fmt.Errorf("local: write %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return fmt.Errorf("local: write %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("local: write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("local: write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // best effort: the rename is already visible
		d.Close()
	}
	return nil
}
