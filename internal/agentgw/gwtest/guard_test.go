package gwtest

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/testutil"
)

// envGuardChild turns this test binary into a child that starts processes
// in a GuardedDir, prints "dir <path>" and "pid <n>" for each, then waits to
// be killed. Its value is the mode: "sleep" or "gateway".
const envGuardChild = "OCC_GWTEST_GUARD_CHILD"

// childLife bounds a child that nobody kills (the parent failed).
const childLife = 5 * time.Minute

func TestMain(m *testing.M) {
	if mode := os.Getenv(envGuardChild); mode != "" {
		os.Exit(guardChild(mode))
	}
	os.Exit(m.Run())
}

func guardChild(mode string) int {
	dir, err := GuardedDir("occ-guard-child-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	fmt.Printf("dir %s\n", dir)
	switch mode {
	case "sleep":
		// A process group leader with a second member, neither tied to
		// this process: what the local driver's gateway and its helpers
		// look like.
		cmd := exec.Command("sh", "-c", "sleep 600 & echo $!; exec sleep 601")
		cmd.Dir = dir
		cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
		out, err := cmd.StdoutPipe()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		if err := cmd.Start(); err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		member, _ := bufio.NewReader(out).ReadString('\n')
		fmt.Printf("pid %d\npid %s\n", cmd.Process.Pid, strings.TrimSpace(member))
	case "gateway":
		rt, err := FindRuntime()
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		g, err := start(rt, dir, GatewayOptions{})
		if err != nil {
			fmt.Fprintln(os.Stderr, err)
			return 1
		}
		fmt.Printf("pid %d\n", g.pid)
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", mode)
		return 2
	}
	fmt.Println("ready")
	time.Sleep(childLife)
	return 1
}

// TestGuardKillsLeftovers starts processes in a child test binary, kills
// the child with SIGKILL (as go test does to a binary that overruns its
// timeout; the testing package's own timeout panic likewise skips every
// cleanup), and checks that the guard killed the processes and removed
// their directory. The "sleep" case has no parent-death signal, like the
// local Compute driver's gateways; the "gateway" case is a real gateway
// started as StartGateway does.
func TestGuardKillsLeftovers(t *testing.T) {
	for _, tc := range []struct {
		mode      string
		needsNode bool
		startMax  time.Duration
	}{
		{mode: "sleep", startMax: 30 * time.Second},
		{mode: "gateway", needsNode: true, startMax: readyTimeout + 30*time.Second},
	} {
		t.Run(tc.mode, func(t *testing.T) {
			if tc.needsNode {
				requireRuntime(t)
			}
			dir, pids := runGuardChild(t, tc.mode, tc.startMax)
			if len(pids) == 0 {
				t.Fatal("the child started no process")
			}
			testutil.Eventually(t, 20*time.Second, func() bool {
				return len(ProcessesUnder([]string{dir})) == 0
			}, "every process under %s to be gone after the child was killed", dir)
			for _, pid := range pids {
				if ProcessAlive(pid) {
					t.Errorf("pid %d outlived the killed test binary", pid)
				}
			}
			testutil.Eventually(t, 10*time.Second, func() bool {
				_, err := os.Stat(dir)
				return os.IsNotExist(err)
			}, "the guard to remove %s", dir)
		})
	}
}

// runGuardChild runs the child, reads what it started, SIGKILLs it and
// returns the directory and pids. Whatever happens, the pids are killed
// when the test ends, so a failing guard does not leak.
func runGuardChild(t *testing.T, mode string, startMax time.Duration) (string, []int) {
	t.Helper()
	exe, err := os.Executable()
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.Command(exe, "-test.run=^$")
	cmd.Env = append(os.Environ(), envGuardChild+"="+mode)
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
	var dir string
	var pids []int
	t.Cleanup(func() {
		_ = cmd.Process.Kill()
		_ = cmd.Wait()
		Sweep([]string{dir})
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
			case len(f) == 2 && f[0] == "dir":
				dir = f[1]
			case len(f) == 2 && f[0] == "pid":
				pid, err := strconv.Atoi(f[1])
				if err != nil {
					t.Fatalf("child printed %q", l)
				}
				pids = append(pids, pid)
			case l == "ready":
				ready = true
			}
		case <-timeout:
			t.Fatalf("child not ready within %v; stderr:\n%s", startMax, tail(stderr.Name()))
		}
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

func tail(path string) string {
	b, _ := os.ReadFile(path)
	return lastLines(string(b), 30)
}
