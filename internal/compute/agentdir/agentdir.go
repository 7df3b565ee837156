// Package agentdir owns the files a Compute driver keeps in an Agent's
// directory on occ's own host (the local and Docker drivers): the
// directory's name, agent.json (which Agent it is, what Recover reads), the
// gateway token (0600, created once, never replaced: clients may hold
// it), the persisted port and the applied setup's identity, each written
// atomically. Where the drivers keep different things (the local driver's
// serving mark holds the revision id, the Docker driver's the id and
// number; their port allocation) the code stays in the driver. The SSH
// driver keeps its Agents' files on remote hosts through scripts, and
// names their directories with the same Hash.
//
// Failure semantics: errors never hold the token; a file that exists but
// is malformed is an error naming the path, except the port, which reads
// as unassigned so that the driver assigns another.
package agentdir

import (
	"bytes"
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
	"syscall"
	"time"

	"github.com/openclaw/occ/internal/digest"
	"github.com/openclaw/occ/internal/workspace"
)

// Names of the files in an Agent's directory.
const (
	FileAgent    = "agent.json"
	FileToken    = "token"
	FilePort     = "port"
	FileIdentity = "setup-identity.json"
)

// Hash names an Agent's (or a revision's) directory and objects: the
// first 12 hex digits of the id's SHA-256, so that ids never become paths
// or names.
func Hash(id string) string {
	sum := sha256.Sum256([]byte(id))
	return hex.EncodeToString(sum[:])[:12]
}

// Dir is one Agent's directory.
type Dir string

// Path is the named file in the directory.
func (d Dir) Path(name ...string) string {
	return filepath.Join(append([]string{string(d)}, name...)...)
}

// Info is agent.json.
type Info struct {
	AgentID     string `json:"agentId"`
	NamespaceID string `json:"namespaceId"`
}

// Exists says whether agent.json exists: the directory is an Agent's.
func (d Dir) Exists() bool {
	_, err := os.Stat(d.Path(FileAgent))
	return err == nil
}

// Ensure creates agent.json with info unless it exists, and the token
// file unless it exists (an existing one is checked). The caller creates
// the directory.
func (d Dir) Ensure(info Info) error {
	if !d.Exists() {
		b, err := json.Marshal(info)
		if err != nil {
			return err
		}
		if err := WriteFileAtomic(d.Path(FileAgent), b, 0o600); err != nil {
			return err
		}
	}
	_, err := d.EnsureToken()
	return err
}

// Info reads agent.json.
func (d Dir) Info() (Info, error) {
	var info Info
	b, err := os.ReadFile(d.Path(FileAgent))
	if err != nil {
		return info, err
	}
	if err := json.Unmarshal(b, &info); err != nil || info.AgentID == "" {
		return info, fmt.Errorf("%s is malformed", d.Path(FileAgent))
	}
	return info, nil
}

// EnsureToken creates the token file once (32 random bytes, hex, 0600)
// and returns the token. An existing file is checked, never replaced.
//
// The file appears whole or not at all: the token is written and synced
// to a temporary file of its own, which is then hard-linked to the token's
// name (link, unlike rename, fails when the name exists, so a token once
// there is never replaced) and the directory synced. A crash or a full
// disk mid-write leaves at most a stray temporary file, never a short
// token that every later start would refuse as malformed; and callers
// racing on a new Agent all get the one token that won. Stray temporary
// files (after the link, a second copy of the secret) are removed by a
// later call (removeStaleTokenTemps).
//
// On a filesystem without hard links (link fails with EPERM, ENOTSUP,
// ENOSYS or EXDEV, as on some FUSE filesystems) the token is
// created as before the link: exclusively under its own name, written
// whole and synced (createTokenExclusive).
func (d Dir) EnsureToken() (string, error) {
	d.removeStaleTokenTemps()
	tok, err := d.Token()
	if err != nil && !errors.Is(err, fs.ErrNotExist) {
		tok, err = d.awaitToken() // perhaps being written (createTokenExclusive)
	}
	if err == nil || !errors.Is(err, fs.ErrNotExist) {
		return tok, err
	}
	var raw [32]byte
	if _, err := rand.Read(raw[:]); err != nil {
		return "", fmt.Errorf("token: %w", err)
	}
	tok = hex.EncodeToString(raw[:])
	p := d.Path(FileToken)
	f, err := os.CreateTemp(filepath.Dir(p), tokenTempPrefix+"*")
	if err != nil {
		return "", fmt.Errorf("create token file: %w", err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, werr := f.WriteString(tok)
	if err := errors.Join(werr, f.Chmod(0o600), f.Sync(), f.Close()); err != nil {
		return "", fmt.Errorf("write token file: %w", err)
	}
	switch err := link(tmp, p); {
	case errors.Is(err, fs.ErrExist):
		return d.Token() // another caller's, whole
	case noHardLinks(err):
		return d.createTokenExclusive(tok)
	case err != nil:
		return "", fmt.Errorf("create token file: %w", err)
	}
	syncDir(filepath.Dir(p)) // the link survives a crash
	return tok, nil
}

// link is os.Link. Tests replace it to stand for a filesystem without
// hard links, which the test machine does not have.
var link = os.Link

// noHardLinks reports whether err, from link, says the filesystem cannot
// make hard links at all, rather than that this one failed.
func noHardLinks(err error) bool {
	for _, e := range []syscall.Errno{syscall.EPERM, syscall.ENOTSUP, syscall.EOPNOTSUPP, syscall.ENOSYS, syscall.EXDEV} {
		if errors.Is(err, e) {
			return true
		}
	}
	return false
}

// createTokenExclusive is EnsureToken without hard links: tok is written
// to the token's own name, created exclusively (so a token once there is
// never replaced), and synced; a failed write removes the file. A crash
// mid-write can leave a short file, which Token refuses as malformed
// until someone removes it. A caller that loses the exclusive create
// waits, at most tokenWait, for the winner's write to complete, and
// returns the winner's token.
func (d Dir) createTokenExclusive(tok string) (string, error) {
	p := d.Path(FileToken)
	f, err := os.OpenFile(p, os.O_WRONLY|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return d.awaitToken()
	}
	if err != nil {
		return "", fmt.Errorf("create token file: %w", err)
	}
	_, werr := f.WriteString(tok)
	if err := errors.Join(werr, f.Sync(), f.Close()); err != nil {
		os.Remove(p)
		return "", fmt.Errorf("write token file: %w", err)
	}
	syncDir(filepath.Dir(p))
	return tok, nil
}

// tokenWait bounds how long a caller that lost the exclusive create waits
// for the winner to write the token (one write and an fsync).
const tokenWait = 2 * time.Second

// awaitToken is Token, after waiting while the file is a regular file
// shorter than a token and modified less than tokenWait ago: another
// caller's exclusive create (createTokenExclusive) whose write is under
// way. A short file that is older is a crash's, refused at once.
func (d Dir) awaitToken() (string, error) {
	for deadline := time.Now().Add(tokenWait); time.Now().Before(deadline); time.Sleep(10 * time.Millisecond) {
		fi, err := os.Lstat(d.Path(FileToken))
		if err != nil || !fi.Mode().IsRegular() || fi.Size() >= tokenLen || time.Since(fi.ModTime()) > tokenWait {
			break
		}
	}
	return d.Token()
}

// tokenLen is a token's length: 32 bytes in hex.
const tokenLen = 64

// tokenTempPrefix begins the names of EnsureToken's temporary files.
const tokenTempPrefix = "." + FileToken + ".tmp-"

// staleTokenTemp is the age past which a temporary token file is no live
// caller's.
const staleTokenTemp = time.Minute

// removeStaleTokenTemps removes the temporary token files EnsureToken
// left when the process died between creating one and its deferred
// removal: before the link it holds a token no one uses, after it a
// second copy of the Agent's secret, which nothing else would ever
// remove. Only files last modified more than staleTokenTemp ago go: a
// live caller (another goroutine, or another occ process on the same
// directory) keeps its file from its creation to its removal, one write
// and a few fsyncs later, and removing it before its link would fail that
// caller (should a sync ever take longer, the caller's link fails and it
// returns an error; no token is lost or replaced). Anything but a regular
// file of that name is not ours and is left alone. Best effort: a file
// that cannot be removed now is tried again on the next call.
func (d Dir) removeStaleTokenTemps() {
	entries, err := os.ReadDir(string(d))
	if err != nil {
		return
	}
	cutoff := time.Now().Add(-staleTokenTemp)
	for _, e := range entries {
		if !strings.HasPrefix(e.Name(), tokenTempPrefix) || !e.Type().IsRegular() {
			continue
		}
		if fi, err := e.Info(); err == nil && fi.ModTime().Before(cutoff) {
			_ = os.Remove(d.Path(e.Name()))
		}
	}
}

// syncDir syncs the directory dir, so a new name in it survives a crash;
// best effort.
func syncDir(dir string) {
	if f, err := os.Open(dir); err == nil {
		_ = f.Sync()
		_ = f.Close()
	}
}

// Token reads and checks the token file: a regular file no one but its
// owner can read, holding 64 hex digits. A missing file is
// fs.ErrNotExist.
func (d Dir) Token() (string, error) {
	p := d.Path(FileToken)
	fi, err := os.Lstat(p)
	if err != nil {
		return "", err
	}
	if !fi.Mode().IsRegular() || fi.Mode().Perm()&0o077 != 0 {
		return "", fmt.Errorf("token file %s must be a regular file of mode 0600", p)
	}
	b, err := os.ReadFile(p)
	if err != nil {
		return "", err
	}
	if !digest.Valid(string(b)) {
		return "", fmt.Errorf("token file %s is malformed", p)
	}
	return string(b), nil
}

// Port returns the persisted port, 0 when none or when the file is
// malformed (the driver assigns another); an error only when the file
// exists and cannot be read.
func (d Dir) Port() (int, error) {
	b, err := os.ReadFile(d.Path(FilePort))
	if errors.Is(err, fs.ErrNotExist) {
		return 0, nil
	}
	if err != nil {
		return 0, err
	}
	p, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil || p <= 0 || p > 65535 {
		return 0, nil
	}
	return p, nil
}

// WritePort persists the port.
func (d Dir) WritePort(p int) error {
	return WriteFileAtomic(d.Path(FilePort), []byte(strconv.Itoa(p)+"\n"), 0o600)
}

// identityFile is setup-identity.json: the setup identity without files.
// Files written with the whole workspace.Setup (files omitted, a
// "completed" field) read the same.
type identityFile struct {
	ID          string `json:"id"`
	NamespaceID string `json:"namespaceId"`
	AgentID     string `json:"agentId"`
	DefaultsID  string `json:"defaultsId,omitempty"`
}

// Identity returns the applied setup's identity (Completed set, for the
// verifier), nil when the Agent never had a setup applied.
func (d Dir) Identity() (*workspace.Setup, error) {
	b, err := os.ReadFile(d.Path(FileIdentity))
	if errors.Is(err, fs.ErrNotExist) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	var f identityFile
	if err := json.Unmarshal(b, &f); err != nil || f.ID == "" {
		return nil, fmt.Errorf("%s is malformed", d.Path(FileIdentity))
	}
	return &workspace.Setup{ID: f.ID, NamespaceID: f.NamespaceID, AgentID: f.AgentID, DefaultsID: f.DefaultsID, Completed: true}, nil
}

// WriteIdentity records s's identity as applied; an unchanged identity
// is not rewritten.
func (d Dir) WriteIdentity(s workspace.Setup) error {
	b, err := json.Marshal(identityFile{ID: s.ID, NamespaceID: s.NamespaceID, AgentID: s.AgentID, DefaultsID: s.DefaultsID})
	if err != nil {
		return err
	}
	if cur, err := os.ReadFile(d.Path(FileIdentity)); err == nil && bytes.Equal(cur, b) {
		return nil
	}
	return WriteFileAtomic(d.Path(FileIdentity), b, 0o600)
}

// WriteFileAtomic replaces path with data of mode perm: a temporary file
// in the same directory, fsync, rename, then a best-effort fsync of the
// directory. Readers see the old or the new content, never a part.
func WriteFileAtomic(path string, data []byte, perm os.FileMode) error {
	dir := filepath.Dir(path)
	f, err := os.CreateTemp(dir, "."+filepath.Base(path)+".tmp-*")
	if err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	tmp := f.Name()
	defer os.Remove(tmp)
	_, werr := f.Write(data)
	if err := errors.Join(f.Chmod(perm), werr, f.Sync(), f.Close()); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("write %s: %w", path, err)
	}
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync() // best effort: the rename is already visible
		d.Close()
	}
	return nil
}
