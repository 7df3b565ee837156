package local

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/testutil"
)

// The environment of the child of TestGatewaysDieWithTheTestBinary.
const (
	envKilledChild   = "OCC_LOCAL_TEST_KILLED_CHILD" // "1": TestMain runs killedChild
	envChildNode     = "OCC_LOCAL_TEST_CHILD_NODE"
	envChildOpenClaw = "OCC_LOCAL_TEST_CHILD_OPENCLAW"
)

// TestGatewaysDieWithTheTestBinary proves that a test binary that dies
// without its cleanups (killed, or panicked by go test -timeout) leaves no
// gateway of the driver behind. The driver starts gateways without any tie
// to its own process, on purpose (they keep serving across an occ
// restart); in tests the guard of gwtest.GuardedDir (testRoot) kills them.
// A child test binary starts one through the driver and is killed with
// SIGKILL.
func TestGatewaysDieWithTheTestBinary(t *testing.T) {
	t.Parallel()
	rt := testRuntime(t)
	acquireGateways(t, 1)
	dir, pids := gwtest.RunKilledChild(t, []string{
		envKilledChild + "=1", envChildNode + "=" + rt.Node, envChildOpenClaw + "=" + rt.OpenClaw,
	}, startTimeout)
	gwtest.CheckSwept(t, dir, pids)
}

// killedChild starts one Agent's gateway through the driver, reports it
// and waits to be killed. It never stops the gateway itself.
func killedChild() int {
	fail := func(err error) int {
		fmt.Fprintln(os.Stderr, "killed child:", err)
		return 1
	}
	dataDir, err := os.MkdirTemp(testRoot, "killed-child-")
	if err != nil {
		return fail(err)
	}
	d, err := New(Options{DataDir: dataDir, PortRange: testPorts,
		Runtime: Runtime{Node: os.Getenv(envChildNode), OpenClaw: os.Getenv(envChildOpenClaw)},
		Logger:  slog.New(slog.NewTextHandler(os.Stderr, nil))})
	if err != nil {
		return fail(err)
	}
	ta := newTestAgent()
	rev := ta.revision(1, "")
	ctx, cancel := context.WithTimeout(context.Background(), startTimeout)
	defer cancel()
	err = testutil.Poll(ctx, func() (bool, error) {
		res, err := d.PrepareRevision(ctx, rev, compute.RevisionContext{})
		if _, ok := compute.AsPermanent(err); ok {
			return false, err
		}
		return err == nil && res.Ready, nil
	})
	if err != nil {
		return fail(err)
	}
	pid, _, ok := runningPID(dataDir, ta.agent.ID)
	if !ok {
		return fail(errors.New("ready, but no gateway process"))
	}
	gwtest.ReportChild(testRoot, pid)
	time.Sleep(startTimeout)
	return 1
}
