package clientconfig_test

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/clientconfig"
)

func TestDir(t *testing.T) {
	tests := []struct {
		name string
		env  map[string]string
		want string
	}{
		{"xdg", map[string]string{"XDG_CONFIG_HOME": "/x/cfg", "HOME": "/home/u"}, "/x/cfg/occ"},
		{"relative xdg is ignored", map[string]string{"XDG_CONFIG_HOME": "cfg", "HOME": "/home/u"}, "/home/u/.config/occ"},
		{"home", map[string]string{"HOME": "/home/u"}, "/home/u/.config/occ"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			got, err := clientconfig.Dir(func(k string) string { return tt.env[k] })
			if err != nil || got != tt.want {
				t.Errorf("Dir = %q, %v; want %q", got, err, tt.want)
			}
		})
	}
}

func TestSaveLoadRoundTripAndModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "occ")
	if c, err := clientconfig.Load(dir); err != nil || len(c.Contexts) != 0 {
		t.Fatalf("Load of a missing file = %+v, %v; want empty", c, err)
	}
	want := clientconfig.Config{Current: "a", Contexts: map[string]clientconfig.Context{
		"a": {Server: "http://127.0.0.1:1", Namespace: "team",
			Credential: clientconfig.Credential{Kind: clientconfig.KindSession, Email: "e@x", CookieName: "occ_session", CookieValue: "s"}},
		"b": {Server: "http://127.0.0.1:2", Credential: clientconfig.Credential{Kind: clientconfig.KindKey, Key: "occk_x"}},
	}}
	if err := clientconfig.Save(dir, want); err != nil {
		t.Fatal(err)
	}
	got, err := clientconfig.Load(dir)
	if err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("Load after Save (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff([]string{"a", "b"}, got.Names()); diff != "" {
		t.Errorf("Names (-want +got):\n%s", diff)
	}
	for path, mode := range map[string]os.FileMode{dir: 0o700, filepath.Join(dir, clientconfig.FileName): 0o600} {
		st, err := os.Stat(path)
		if err != nil || st.Mode().Perm() != mode {
			t.Errorf("%s: mode %v, %v; want %04o", path, st.Mode().Perm(), err, mode)
		}
	}
	entries, _ := os.ReadDir(dir)
	if len(entries) != 1 {
		t.Errorf("dir holds %d entries; want only the file (no temporary left)", len(entries))
	}
}

func TestLoadRefuses(t *testing.T) {
	tests := []struct {
		name    string
		content string
		mode    os.FileMode
		want    string
	}{
		{"readable by others", `{"contexts":{}}`, 0o644, "must be 0600"},
		{"unknown member", `{"contexts":{},"extra":1}`, 0o600, "not a valid occ configuration"},
		{"not json", `{`, 0o600, "not a valid occ configuration"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, clientconfig.FileName)
			if err := os.WriteFile(path, []byte(tt.content), tt.mode); err != nil {
				t.Fatal(err)
			}
			if err := os.Chmod(path, tt.mode); err != nil {
				t.Fatal(err)
			}
			_, err := clientconfig.Load(dir)
			if err == nil || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("Load = %v; want an error containing %q", err, tt.want)
			}
		})
	}
}

func TestResolve(t *testing.T) {
	c := clientconfig.Config{Current: "a", Contexts: map[string]clientconfig.Context{"a": {Server: "A"}, "b": {Server: "B"}}}
	tests := []struct {
		name, arg, wantName, wantErr string
	}{
		{"current", "", "a", ""},
		{"named", "b", "b", ""},
		{"unknown", "z", "", `no context named "z"`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			n, _, err := c.Resolve(tt.arg)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Errorf("Resolve(%q) = %v; want %q", tt.arg, err, tt.wantErr)
				}
				return
			}
			if err != nil || n != tt.wantName {
				t.Errorf("Resolve(%q) = %q, %v; want %q", tt.arg, n, err, tt.wantName)
			}
		})
	}
	if _, _, err := (clientconfig.Config{}).Resolve(""); err != clientconfig.ErrNoContext {
		t.Errorf("Resolve with nothing current = %v; want ErrNoContext", err)
	}
}
