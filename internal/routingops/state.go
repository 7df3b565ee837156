package routingops

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
)

// The backup directory:
//
//	DIR/progress.json                 what is done (this file)
//	DIR/<nsId>/namespace.json         the tenant namespace and its NetworkPolicies as read before any change
//	DIR/<nsId>/plan.json              the reconciliation's plan (each object, action, changed fields)
//	DIR/<nsId>/agents/<agentId>.json  the Agent, its active revision (with the native configuration it runs) and its Configuration
//
// The directory is 0700 and every file 0600, written atomically; a backup
// file that exists is never rewritten, so a second run keeps the state
// from before the first run's changes.
const progressFile = "progress.json"

// progress is what a run has finished, saved after each step.
type progress struct {
	Version    int                    `json:"version"`
	Namespaces map[string]*nsProgress `json:"namespaces"`
}

type nsProgress struct {
	BackedUp       bool                      `json:"backedUp"`
	Reconciliation string                    `json:"reconciliation,omitempty"`
	Reconciled     bool                      `json:"reconciled"`
	Agents         map[string]*agentProgress `json:"agents"`
}

// agentProgress: Requested is saved before DeployAgent is called, with
// the Agent's revisions at that moment; a run that finds Requested
// without a Deployment (interrupted around the call) looks for a newer
// revision before deploying again, so an Agent is never deployed twice.
type agentProgress struct {
	BackedUp       bool   `json:"backedUp"`
	FromRevision   string `json:"fromRevision,omitempty"`
	Requested      bool   `json:"requested"`
	RevisionsSeen  int    `json:"revisionsSeen"`
	LastRevisionID string `json:"lastRevisionId,omitempty"`
	Deployment     string `json:"deployment,omitempty"`
	Done           bool   `json:"done"`
	Skipped        string `json:"skipped,omitempty"`
}

func (p *progress) ns(id string) *nsProgress {
	if p.Namespaces == nil {
		p.Namespaces = map[string]*nsProgress{}
	}
	n := p.Namespaces[id]
	if n == nil {
		n = &nsProgress{}
		p.Namespaces[id] = n
	}
	if n.Agents == nil {
		n.Agents = map[string]*agentProgress{}
	}
	return n
}

func (n *nsProgress) agent(id string) *agentProgress {
	a := n.Agents[id]
	if a == nil {
		a = &agentProgress{}
		n.Agents[id] = a
	}
	return a
}

// backupDir is an opened backup directory.
type backupDir struct{ path string }

// openBackupDir creates dir (0700) or opens it; a directory that others
// may read or enter is refused, as is a symlink or a file.
func openBackupDir(dir string) (*backupDir, error) {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return nil, fmt.Errorf("backup directory: %w", err)
	}
	fi, err := os.Lstat(dir)
	if err != nil {
		return nil, fmt.Errorf("backup directory: %w", err)
	}
	if !fi.IsDir() {
		return nil, fmt.Errorf("backup directory %s is not a directory", dir)
	}
	if fi.Mode().Perm()&0o077 != 0 {
		return nil, fmt.Errorf("backup directory %s has mode %04o; it must be 0700 (chmod 700 %s)", dir, fi.Mode().Perm(), dir)
	}
	return &backupDir{path: dir}, nil
}

func (b *backupDir) loadProgress() (*progress, error) {
	data, err := os.ReadFile(filepath.Join(b.path, progressFile))
	if errors.Is(err, fs.ErrNotExist) {
		return &progress{Version: 1}, nil
	}
	if err != nil {
		return nil, fmt.Errorf("read the progress: %w", err)
	}
	var p progress
	if err := json.Unmarshal(data, &p); err != nil {
		return nil, fmt.Errorf("%s: %w", filepath.Join(b.path, progressFile), err)
	}
	if p.Version != 1 {
		return nil, fmt.Errorf("%s: unknown version %d", filepath.Join(b.path, progressFile), p.Version)
	}
	return &p, nil
}

func (b *backupDir) saveProgress(p *progress) error {
	return b.write(progressFile, p, true)
}

// write saves v as indented JSON at rel (0600, atomically). Without
// replace an existing file is kept: backups are written once.
func (b *backupDir) write(rel string, v any, replace bool) error {
	path := filepath.Join(b.path, rel)
	if !replace {
		if _, err := os.Lstat(path); err == nil {
			return nil
		}
	}
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		return err
	}
	data, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	f, err := os.CreateTemp(filepath.Dir(path), ".tmp-*")
	if err != nil {
		return err
	}
	defer os.Remove(f.Name())
	if err := f.Chmod(0o600); err != nil {
		f.Close()
		return err
	}
	if _, err := f.Write(append(data, '\n')); err != nil {
		f.Close()
		return err
	}
	if err := f.Sync(); err != nil {
		f.Close()
		return err
	}
	if err := f.Close(); err != nil {
		return err
	}
	if err := os.Rename(f.Name(), path); err != nil {
		return fmt.Errorf("save %s: %w", path, err)
	}
	return nil
}
