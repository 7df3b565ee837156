// Package clientconfig owns the client side's saved state: the contexts
// `occ login` creates (a server URL, a credential and a default
// Namespace each) and which one is current, kept in one JSON file,
// config.json, under $XDG_CONFIG_HOME/occ (default ~/.config/occ).
//
// The file holds secrets (a session token or a service key), so the
// directory is created 0700 and the file is written 0600, atomically (a
// temporary file in the same directory, synced and renamed), so that a
// crash or a concurrent occ never leaves half a file and the secret is
// never readable by others, even for a moment. A file that exists with
// wider permissions is refused rather than silently used: someone else may
// already have read it. Nothing here prints or logs a credential.
package clientconfig

import (
	"encoding/json"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
)

// FileName is the name of the file in the directory.
const FileName = "config.json"

// Credential kinds.
const (
	KindSession = "session" // a browser-style session from sign-in
	KindKey     = "key"     // a service API key
)

// Credential is how a context authenticates. Exactly one of the secret
// forms is set, as Kind says.
type Credential struct {
	Kind string `json:"kind"`
	// Email is the signed-in user's (sessions only); not a secret, shown
	// by `occ context list`.
	Email string `json:"email,omitempty"`
	// CookieName and CookieValue are the session cookie sign-in set.
	CookieName  string `json:"cookieName,omitempty"`
	CookieValue string `json:"cookieValue,omitempty"`
	// Key is the service key (occk_…).
	Key string `json:"key,omitempty"`
	// SubjectID is who the credential authenticates as (usr_… or sa_…).
	SubjectID string `json:"subjectId,omitempty"`
}

// Context is one server and how to reach it.
type Context struct {
	Server     string     `json:"server"`
	Namespace  string     `json:"namespace,omitempty"`
	Credential Credential `json:"credential"`
}

// Config is the whole file.
type Config struct {
	Current  string             `json:"current,omitempty"`
	Contexts map[string]Context `json:"contexts"`
}

// Names returns the context names, sorted.
func (c Config) Names() []string {
	names := make([]string, 0, len(c.Contexts))
	for n := range c.Contexts {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// ErrNoContext is returned by Config.Resolve when no context is selected.
var ErrNoContext = errors.New("not logged in: run `occ login URL --email EMAIL` or `occ login URL --api-key-file FILE`")

// Resolve returns the context called name, or the current one when name
// is empty.
func (c Config) Resolve(name string) (string, Context, error) {
	if name == "" {
		name = c.Current
	}
	if name == "" {
		return "", Context{}, ErrNoContext
	}
	ctx, ok := c.Contexts[name]
	if !ok {
		return "", Context{}, fmt.Errorf("no context named %q (see `occ context list`)", name)
	}
	return name, ctx, nil
}

// Dir returns the configuration directory: $XDG_CONFIG_HOME/occ, or
// ~/.config/occ when the variable is unset or not absolute (as the XDG
// specification says a relative value must be ignored).
func Dir(getenv func(string) string) (string, error) {
	if x := getenv("XDG_CONFIG_HOME"); x != "" && filepath.IsAbs(x) {
		return filepath.Join(x, "occ"), nil
	}
	home := getenv("HOME")
	if home == "" {
		h, err := os.UserHomeDir()
		if err != nil {
			return "", fmt.Errorf("finding the configuration directory: %w", err)
		}
		home = h
	}
	return filepath.Join(home, ".config", "occ"), nil
}

// Load reads dir's file. A missing file is an empty Config, not an error.
func Load(dir string) (Config, error) {
	path := filepath.Join(dir, FileName)
	f, err := os.Open(path)
	if errors.Is(err, fs.ErrNotExist) {
		return Config{Contexts: map[string]Context{}}, nil
	}
	if err != nil {
		return Config{}, fmt.Errorf("reading %s: %w", path, err)
	}
	defer f.Close()
	st, err := f.Stat()
	if err != nil {
		return Config{}, fmt.Errorf("reading %s: %w", path, err)
	}
	if st.Mode().Perm()&0o077 != 0 {
		return Config{}, fmt.Errorf("%s has mode %04o; it holds credentials and must be 0600 (chmod 600 it)",
			path, st.Mode().Perm())
	}
	var c Config
	dec := json.NewDecoder(f)
	dec.DisallowUnknownFields()
	if err := dec.Decode(&c); err != nil {
		// The decoder's message never quotes a value, only offsets and
		// field names, so no secret can appear in it.
		return Config{}, fmt.Errorf("reading %s: not a valid occ configuration: %w", path, err)
	}
	if c.Contexts == nil {
		c.Contexts = map[string]Context{}
	}
	return c, nil
}

// Save writes c to dir's file, creating dir 0700 when missing.
func Save(dir string, c Config) error {
	if err := os.MkdirAll(dir, 0o700); err != nil {
		return fmt.Errorf("creating %s: %w", dir, err)
	}
	b, err := json.MarshalIndent(c, "", "  ")
	if err != nil {
		return fmt.Errorf("encoding the configuration: %w", err)
	}
	b = append(b, '\n')
	// CreateTemp makes the file 0600 from the start.
	tmp, err := os.CreateTemp(dir, ".config-*.tmp")
	if err != nil {
		return fmt.Errorf("writing the configuration in %s: %w", dir, err)
	}
	ok := false
	defer func() {
		if !ok {
			_ = tmp.Close()
			_ = os.Remove(tmp.Name())
		}
	}()
	if err := tmp.Chmod(0o600); err != nil {
		return fmt.Errorf("writing the configuration: %w", err)
	}
	if _, err := tmp.Write(b); err != nil {
		return fmt.Errorf("writing the configuration: %w", err)
	}
	if err := tmp.Sync(); err != nil {
		return fmt.Errorf("writing the configuration: %w", err)
	}
	if err := tmp.Close(); err != nil {
		return fmt.Errorf("writing the configuration: %w", err)
	}
	if err := os.Rename(tmp.Name(), filepath.Join(dir, FileName)); err != nil {
		return fmt.Errorf("writing the configuration: %w", err)
	}
	ok = true
	return nil
}
