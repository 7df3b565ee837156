package local

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"sync"

	"github.com/openclaw/occ/internal/compute/agentdir"
)

// Names inside an Agent's directory (see the package documentation);
// agentdir names the files it owns (agent.json, token, port,
// setup-identity.json).
const (
	filePID      = "pid"
	fileServing  = "serving"
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

// agent is the driver's record of one Agent. Its lock serializes every
// verb and Recover for the Agent; a.sup is only read or replaced under it.
// Lock order: agent lock, then Driver.mu (never the reverse while waiting).
type agent struct {
	d   *Driver
	id  string
	dir string

	sem chan struct{} // the lock: a one-slot semaphore, so waiting honours a context

	// portMu serializes reading and moving the Agent's port (the port
	// file and its claim in the port table). Verbs take it under the
	// Agent's lock; a supervisor restarting a crashed gateway takes it
	// alone, since it never takes the Agent's lock.
	portMu sync.Mutex

	loaded bool        // load ran since the record was created or reset
	sup    *supervisor // the Agent's gateway generation, nil when none

	// unrestored is the revision (its id) that failed for good while the
	// serving revision could not be started again, and unrestoredErr its
	// failure: the next PrepareRevision of it starts the serving revision
	// and answers that failure, instead of preparing the failed revision
	// anew (restoreServing). In memory only: after occ restarts, Recover
	// starts the serving revision.
	unrestored    string
	unrestoredErr error
}

func newAgent(d *Driver, id string) *agent {
	return &agent{d: d, id: id, dir: filepath.Join(d.agentsDir, agentdir.Hash(id)), sem: make(chan struct{}, 1)}
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
	a.unrestored, a.unrestoredErr = "", nil
}

func (a *agent) path(elem ...string) string {
	return filepath.Join(append([]string{a.dir}, elem...)...)
}

func (a *agent) revisionDir(revID string) string {
	return a.path(dirRevisions, agentdir.Hash(revID))
}

func (a *agent) configPath(revID string) string {
	return filepath.Join(a.revisionDir(revID), fileConfig)
}

// files is the Agent's directory as agentdir reads and writes it.
func (a *agent) files() agentdir.Dir { return agentdir.Dir(a.dir) }

func (a *agent) exists() bool { return a.files().Exists() }

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
	if err := a.files().Ensure(agentdir.Info{AgentID: a.id, NamespaceID: namespaceID}); err != nil {
		return fmt.Errorf("local: %w", err)
	}
	return nil
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
	return agentdir.WriteFileAtomic(a.path(fileServing), []byte(revID+"\n"), 0o600)
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
	if json.Unmarshal(b, &info) != nil || info.ID == "" || agentdir.Hash(info.ID) != filepath.Base(dir) {
		return "", false
	}
	return info.ID, true
}
