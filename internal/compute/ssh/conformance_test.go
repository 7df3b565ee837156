package ssh_test

import (
	"context"
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/computetest"
	computessh "github.com/openclaw/occ/internal/compute/ssh"
	"github.com/openclaw/occ/internal/compute/ssh/sshtest"
)

// gatewaySlots keeps one real gateway running at a time across this
// package's tests (each takes about 1 GB).
var gatewaySlots = make(chan struct{}, 1)

func acquireGateway(t testing.TB) {
	gatewaySlots <- struct{}{}
	t.Cleanup(func() { <-gatewaySlots })
}

// newDriver opens a driver on cfg and closes it when the test ends.
func newDriver(t testing.TB, cfg computessh.Config) *computessh.Driver {
	t.Helper()
	d, err := computessh.New(computessh.Options{Config: cfg})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

func agentDir(root string, rev compute.Revision) string {
	return filepath.Join(root, "namespaces", rev.NamespaceID, "agents", hash12(rev.AgentID))
}

// TestConformance runs the driver conformance suite against the real sshd
// on 127.0.0.1 and real gateways run as the runtime account, one at a
// time. All cases share one root, so the binary is uploaded once.
func TestConformance(t *testing.T) {
	cfg := sshtest.Config(t)
	root := cfg.Root
	computetest.Run(t, computetest.Harness{
		New: func(t *testing.T) compute.Driver {
			// One case with gateways at a time, so at most two gateways
			// (Concurrency/TwoAgents; no NewPair needed).
			acquireGateway(t)
			// The case's cleanup removes the Agent's directory: show its
			// gateway log first when the case failed.
			return &logDriver{Driver: newDriver(t, cfg), t: t, root: root}
		},
		Timeout: 5 * time.Minute,
		Inspect: computetest.Inspect{
			WorkspaceFile: func(t *testing.T, _ compute.Driver, rev compute.Revision, name string) (string, bool) {
				b, err := os.ReadFile(filepath.Join(agentDir(root, rev), "state", "workspace", name))
				if err != nil {
					return "", false
				}
				return string(b), true
			},
			Serving: func(t *testing.T, _ compute.Driver, rev compute.Revision) bool {
				return isServing(agentDir(root, rev), rev)
			},
			SetupCopies: func(t *testing.T, _ compute.Driver, rev compute.Revision) map[string][]byte {
				dir := agentDir(root, rev)
				out := map[string][]byte{}
				err := filepath.WalkDir(dir, func(p string, e fs.DirEntry, err error) error {
					switch {
					case errors.Is(err, fs.ErrNotExist):
						return nil
					case err != nil:
						return err
					case e.IsDir() && p == filepath.Join(dir, "state", "workspace"):
						return filepath.SkipDir
					case !e.Type().IsRegular():
						return nil
					}
					b, err := os.ReadFile(p)
					if errors.Is(err, fs.ErrNotExist) {
						return nil
					}
					out[p] = b
					return err
				})
				if err != nil {
					t.Errorf("reading %s: %v", dir, err)
				}
				return out
			},
		},
	})
}

// isServing: the serving file names rev and its supervisor runs it.
func isServing(dir string, rev compute.Revision) bool {
	s, err := os.ReadFile(filepath.Join(dir, "serving"))
	if err != nil || strings.Fields(string(s))[0] != rev.ID {
		return false
	}
	return runsRevision(dir, rev)
}

// runsRevision: the supervisor's pid file names rev and the process is
// alive.
func runsRevision(dir string, rev compute.Revision) bool {
	p, err := os.ReadFile(filepath.Join(dir, "supervisor.pid"))
	if err != nil {
		return false
	}
	f := strings.Fields(string(p))
	if len(f) != 2 || f[1] != hash12(rev.ID) {
		return false
	}
	_, err = os.Stat("/proc/" + f[0])
	return err == nil
}

type logDriver struct {
	*computessh.Driver // the concrete driver, so its optional interfaces (compute.ReadyNotifier) show
	t                  *testing.T
	root               string
}

func (l *logDriver) DeleteAgent(ctx context.Context, a compute.Agent) error {
	dumpLogs(l.t, l.root)
	return l.Driver.DeleteAgent(ctx, a)
}

// dumpLogs copies every gateway.log under root to the test log when the
// test failed (the case's cleanup removes the Agent directories).
func dumpLogs(t *testing.T, root string) {
	if !t.Failed() {
		return
	}
	logs, _ := filepath.Glob(filepath.Join(root, "namespaces", "*", "agents", "*", "gateway.log"))
	for _, l := range logs {
		b, _ := os.ReadFile(l)
		if len(b) > 4000 {
			b = b[len(b)-4000:]
		}
		t.Logf("%s:\n%s", l, b)
	}
}
