package docker

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/computetest"
)

// TestConformance runs the driver conformance suite against the real
// engine and real OpenClaw gateways in the gateway image. Its cases run
// in parallel; each takes the one gateway slot in Harness.New (released
// after the case's cleanup), so one gateway container runs at a time.
func TestConformance(t *testing.T) {
	testEngine(t)
	var mu sync.Mutex
	drivers := map[compute.Driver]*Driver{}
	of := func(d compute.Driver) *Driver {
		mu.Lock()
		defer mu.Unlock()
		return drivers[d]
	}
	computetest.Run(t, computetest.Harness{
		New: func(t *testing.T) compute.Driver {
			// Before the case's deadline starts, and released after its
			// cleanup: one case with gateway containers at a time, so at
			// most two containers (Concurrency/TwoAgents; no NewPair
			// needed).
			acquireGateway(t)
			d := newTestDriver(t, "")
			mu.Lock()
			drivers[d] = d
			mu.Unlock()
			return d
		},
		// Two gateway starts and a native setup in containers on a loaded
		// 2-core machine.
		Timeout: 5 * time.Minute,
		Inspect: computetest.Inspect{
			WorkspaceFile: func(t *testing.T, d compute.Driver, rev compute.Revision, name string) (string, bool) {
				dir, ok := volumeDir(t, of(d), volumeName(rev.AgentID, "workspace"))
				if !ok {
					return "", false
				}
				b, err := os.ReadFile(filepath.Join(dir, name))
				if err != nil {
					return "", false
				}
				return string(b), true
			},
			Serving: func(t *testing.T, d compute.Driver, rev compute.Revision) bool {
				return isServing(t, of(d), rev)
			},
			// The host directory, the state volume and every revision's
			// configuration volume: everything outside the workspace.
			SetupCopies: func(t *testing.T, d compute.Driver, rev compute.Revision) map[string][]byte {
				drv := of(d)
				out := map[string][]byte{}
				dirs := []string{string(drv.host(rev.AgentID).Dir)}
				if dir, ok := volumeDir(t, drv, volumeName(rev.AgentID, "state")); ok {
					dirs = append(dirs, dir)
				}
				vs, err := drv.volumes(t.Context(), agentFilter(rev.AgentID, roleConfig, ""))
				if err != nil {
					t.Fatal(err)
				}
				for _, v := range vs {
					dirs = append(dirs, v.Mountpoint)
				}
				for _, dir := range dirs {
					readTree(t, dir, out)
				}
				if cs, err := drv.containers(t.Context(), agentFilter(rev.AgentID, roleSetup, "")); err != nil || len(cs) != 0 {
					t.Errorf("setup containers left: %d, %v", len(cs), err)
				}
				return out
			},
		},
	})
}

// readTree adds every regular file under dir to out, skipping a nested
// workspace directory.
func readTree(t *testing.T, dir string, out map[string][]byte) {
	t.Helper()
	err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
		switch {
		case errors.Is(err, fs.ErrNotExist):
			return nil
		case err != nil:
			return err
		case e.IsDir() && e.Name() == "workspace":
			return filepath.SkipDir
		case !e.Type().IsRegular():
			return nil
		}
		b, err := os.ReadFile(path)
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		out[path] = b
		return err
	})
	if err != nil {
		t.Errorf("reading %s: %v", dir, err)
	}
}
