package gwtest

import (
	"bufio"
	"errors"
	"fmt"
	"io/fs"
	"os"
	"os/exec"
	"os/signal"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/testutil"
)

// The guard: a watchdog process that outlives the test binary just long
// enough to kill what the binary's tests started.
//
// A test binary can end without running a single cleanup: go test
// -timeout panics it, a crash or SIGKILL ends it at once. Gateways started
// by StartGateway carry a parent-death signal, but the local Compute
// driver's gateways deliberately do not (they must survive an occ restart),
// and a lost gateway holds about 1 GB and a core for as long as the
// machine lives. So every test directory that processes run in is a
// GuardedDir, and the guard, a copy of the test binary started once per
// test process (see init), waits for its standard input to close, which
// happens when the test binary ends for any reason, then kills every
// process whose working directory lies under a guarded directory (with its
// process group when it leads one) and removes the directories.
//
// The guard runs in its own process group, so the terminal's Ctrl-C, which
// goes to the test binary's group, does not kill it before it sweeps. Its
// output goes nowhere: holding the test binary's stdout open would keep
// go test waiting.

// envGuard turns a test binary into the guard (see init).
const envGuard = "OCC_GWTEST_GUARD"

// sweepRounds bounds the guard's kill passes: a process may fork while the
// first pass runs.
const sweepRounds = 20

func init() {
	if os.Getenv(envGuard) == "1" {
		os.Exit(guardMain())
	}
}

var guard struct {
	mu  sync.Mutex
	w   *os.File // the guard's standard input; never closed, ends with the process
	err error
}

// GuardedDir creates a new directory under the system temp dir (named with
// prefix, as os.MkdirTemp) and registers it with this process's guard:
// when the test binary ends, however it ends, every process still running
// with its working directory under dir is killed (SIGKILL, with its
// process group if it leads one) and dir is removed. Tests that start
// processes, directly or through a driver, run them in such a directory.
func GuardedDir(prefix string) (string, error) {
	guard.mu.Lock()
	defer guard.mu.Unlock()
	if guard.w == nil && guard.err == nil {
		guard.w, guard.err = startGuard()
	}
	if guard.err != nil {
		return "", fmt.Errorf("gwtest: start the process guard: %w", guard.err)
	}
	dir, err := os.MkdirTemp("", prefix)
	if err != nil {
		return "", err
	}
	// Resolve symlinks: /proc/<pid>/cwd shows the real path.
	if real, err := filepath.EvalSymlinks(dir); err == nil {
		dir = real
	}
	if _, err := fmt.Fprintln(guard.w, dir); err != nil {
		_ = os.Remove(dir)
		return "", fmt.Errorf("gwtest: register %s with the process guard: %w", dir, err)
	}
	return dir, nil
}

// startGuard starts the guard and returns the write end of its standard
// input. The descriptor is close-on-exec, so no other child inherits it
// and it closes exactly when this process ends.
func startGuard() (*os.File, error) {
	exe, err := os.Executable()
	if err != nil {
		return nil, err
	}
	r, w, err := os.Pipe()
	if err != nil {
		return nil, err
	}
	defer r.Close()
	cmd := exec.Command(exe)
	cmd.Env = append(os.Environ(), envGuard+"=1")
	cmd.Stdin = r
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		w.Close()
		return nil, err
	}
	// Not waited for: it exits after this process does. Release lets the
	// runtime forget it.
	_ = cmd.Process.Release()
	return w, nil
}

// guardMain is the guard: read directories until standard input closes,
// then sweep them.
func guardMain() int {
	signalIgnore()
	var dirs []string
	sc := bufio.NewScanner(os.Stdin)
	for sc.Scan() {
		if d := strings.TrimSpace(sc.Text()); d != "" {
			dirs = append(dirs, d)
		}
	}
	Sweep(dirs)
	for _, d := range dirs {
		_ = os.RemoveAll(d)
	}
	return 0
}

// signalIgnore keeps the guard alive through the hang-up and interrupt a
// closing terminal sends, so it can still sweep.
func signalIgnore() { signal.Ignore(syscall.SIGHUP, syscall.SIGINT) }

// Sweep kills every live process whose working directory is one of dirs or
// lies under one, with its process group when the process leads one (a
// gateway's helpers are in its group), and returns the pids it killed.
// It repeats until a pass finds nothing (at most 20 passes, 100 ms apart).
// The guard calls it; tests use it to check for leftovers.
func Sweep(dirs []string) []int {
	var killed []int
	for range sweepRounds {
		found := ProcessesUnder(dirs)
		if len(found) == 0 {
			break
		}
		for _, pid := range found {
			if pgrp, err := pgrpOf(pid); err == nil && pgrp == pid {
				_ = syscall.Kill(-pid, syscall.SIGKILL)
			}
			_ = syscall.Kill(pid, syscall.SIGKILL)
			killed = append(killed, pid)
		}
		time.Sleep(100 * time.Millisecond)
	}
	return killed
}

// ProcessesUnder lists the live (not zombie) processes, other than this
// one, whose working directory is one of dirs or lies under one. It reads
// /proc; elsewhere it finds nothing.
func ProcessesUnder(dirs []string) []int {
	entries, err := os.ReadDir("/proc")
	if err != nil {
		return nil
	}
	self := os.Getpid()
	var out []int
	for _, e := range entries {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || pid == self {
			continue
		}
		cwd, err := os.Readlink("/proc/" + e.Name() + "/cwd")
		// A removed working directory reads as "<path> (deleted)".
		cwd = strings.TrimSuffix(cwd, " (deleted)")
		if err != nil || !under(cwd, dirs) {
			continue
		}
		if ProcessAlive(pid) {
			out = append(out, pid)
		}
	}
	return out
}

func under(path string, dirs []string) bool {
	for _, d := range dirs {
		if path == d || strings.HasPrefix(path, d+"/") {
			return true
		}
	}
	return false
}

// ProcessAlive reports whether pid exists and has not exited: a zombie
// (exited, not yet reaped, as the children of a killed test binary may
// stay where PID 1 does not reap) counts as gone.
func ProcessAlive(pid int) bool {
	state, _, err := procState(pid)
	return err == nil && state != 'Z' && state != 'X'
}

// CheckPIDsGone fails t unless every pid listed in pidFile (separated by
// white space, written by processes the code under test was to end) has
// ended. The process was ended before the check is made; the bounded wait
// only lets a killed process finish dying (a zombie counts as gone) and
// keeps a failure from waiting for it. A pid still alive when the test
// ends is killed with SIGKILL.
func CheckPIDsGone(t *testing.T, pidFile string) {
	t.Helper()
	b, err := os.ReadFile(pidFile)
	if err != nil {
		t.Fatalf("pid file: %v", err)
	}
	var pids []int
	for _, f := range strings.Fields(string(b)) {
		pid, err := strconv.Atoi(f)
		if err != nil || pid <= 1 {
			t.Fatalf("pid file %s holds %q", pidFile, b)
		}
		pids = append(pids, pid)
		t.Cleanup(func() {
			if ProcessAlive(pid) {
				_ = syscall.Kill(pid, syscall.SIGKILL)
			}
		})
	}
	for _, pid := range pids {
		testutil.Eventually(t, 10*time.Second, func() bool { return !ProcessAlive(pid) }, "process %d to be gone", pid)
	}
}

func pgrpOf(pid int) (int, error) {
	_, pgrp, err := procState(pid)
	return pgrp, err
}

// procState reads the state and process group from /proc/<pid>/stat.
func procState(pid int) (state byte, pgrp int, err error) {
	b, err := os.ReadFile("/proc/" + strconv.Itoa(pid) + "/stat")
	if err != nil {
		return 0, 0, err
	}
	// The command name (field 2) is parenthesized and may hold anything.
	i := strings.LastIndexByte(string(b), ')')
	if i < 0 {
		return 0, 0, errors.New("malformed stat")
	}
	f := strings.Fields(string(b[i+1:]))
	if len(f) < 3 || len(f[0]) != 1 {
		return 0, 0, errors.New("malformed stat")
	}
	pgrp, err = strconv.Atoi(f[2])
	return f[0][0], pgrp, err
}

// RunKilledChild runs this test binary again as a child, with env added to
// the environment and -test.run=^$ (so only its TestMain runs, which must
// recognize env), waits up to startMax for the child to report with
// ReportChild the guarded directory it started processes in and their
// pids, then kills the child with SIGKILL, as go test does to a binary
// that overruns its timeout, and returns what it reported. Whatever
// happens, those processes are killed when the test ends, so a failing
// guard leaks nothing.
func RunKilledChild(t *testing.T, env []string, startMax time.Duration) (dir string, pids []int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), env...)
	// A file, not a buffer: the child's stderr is read only on failure,
	// after the child is gone or while it may still write.
	stderr, err := os.Create(t.TempDir() + "/child.stderr")
	if err != nil {
		t.Fatal(err)
	}
	defer stderr.Close()
	cmd.Stderr = stderr
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		if dir != "" {
			Sweep([]string{dir})
		}
		for _, pid := range pids {
			_ = syscall.Kill(pid, syscall.SIGKILL)
		}
	})
	lines := make(chan string)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	timeout := time.After(startMax)
	for ready := false; !ready; {
		select {
		case l, ok := <-lines:
			if !ok {
				t.Fatalf("child ended before it was ready; stderr:\n%s", tail(stderr.Name()))
			}
			switch f := strings.Fields(l); {
			case len(f) == 2 && f[0] == childDir:
				dir = f[1]
			case len(f) == 2 && f[0] == childPID:
				pid, err := strconv.Atoi(f[1])
				if err != nil {
					t.Fatalf("child printed %q", l)
				}
				pids = append(pids, pid)
			case l == childReady:
				ready = true
			}
		case <-timeout:
			t.Fatalf("child not ready within %v; stderr:\n%s", startMax, tail(stderr.Name()))
		}
	}
	if dir == "" || len(pids) == 0 {
		t.Fatalf("the child reported dir %q and pids %v, want a directory and at least one pid", dir, pids)
	}
	for _, pid := range pids {
		if !ProcessAlive(pid) {
			t.Fatalf("pid %d is not running before the kill", pid)
		}
	}
	if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	_ = cmd.Wait()
	return dir, pids
}

// The lines of ReportChild.
const (
	childDir   = "gwtest-child-dir"
	childPID   = "gwtest-child-pid"
	childReady = "gwtest-child-ready"
)

// ReportChild is what a child of RunKilledChild prints on standard output
// once its processes run in dir; the child then waits to be killed.
func ReportChild(dir string, pids ...int) {
	fmt.Printf("%s %s\n", childDir, dir)
	for _, pid := range pids {
		fmt.Printf("%s %d\n", childPID, pid)
	}
	fmt.Println(childReady)
}

// CheckSwept fails t unless, shortly after a RunKilledChild, no process
// runs under dir, none of pids is alive, and dir is gone: what the guard
// promises.
func CheckSwept(t *testing.T, dir string, pids []int) {
	t.Helper()
	testutil.Eventually(t, 20*time.Second, func() bool {
		return len(ProcessesUnder([]string{dir})) == 0
	}, "every process under %s to be gone after the child was killed", dir)
	// A killed process leaves "under dir" (its cwd and command line go)
	// early in its exit, before it stops running: a 1 GB gateway takes a
	// moment to tear down its memory on a busy machine. So each reported
	// process gets a bounded wait to finish dying, not a one-shot check.
	for _, pid := range pids {
		deadline := time.Now().Add(10 * time.Second)
		for ProcessAlive(pid) && time.Now().Before(deadline) {
			time.Sleep(20 * time.Millisecond)
		}
		if ProcessAlive(pid) {
			t.Errorf("pid %d outlived the killed test binary", pid)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() bool {
		_, err := os.Stat(dir)
		return errors.Is(err, fs.ErrNotExist)
	}, "the guard to remove %s", dir)
}

func tail(path string) string {
	b, _ := os.ReadFile(path)
	return lastLines(string(b), 30)
}
