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
)

// envGuardChild turns this test binary into a child that starts processes
// in a GuardedDir, reports them (ReportChild), then waits to be killed. Its
// value is the mode: "sleep" or "gateway".
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
		line, _ := bufio.NewReader(out).ReadString('\n')
		member, err := strconv.Atoi(strings.TrimSpace(line))
		if err != nil {
			fmt.Fprintf(os.Stderr, "sh printed %q\n", line)
			return 1
		}
		ReportChild(dir, cmd.Process.Pid, member)
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
		ReportChild(dir, g.pid)
	default:
		fmt.Fprintf(os.Stderr, "unknown mode %q\n", mode)
		return 2
	}
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
			dir, pids := RunKilledChild(t, []string{envGuardChild + "=" + tc.mode}, tc.startMax)
			CheckSwept(t, dir, pids)
		})
	}
}
