package local

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/computetest"
)

// TestConformance runs the driver conformance suite against real
// gateways. Its cases run in parallel; each takes one gateway slot in
// Harness.New (released after the case's cleanup), so at most
// maxGateways run at once whatever -parallel says.
func TestConformance(t *testing.T) {
	rt := testRuntime(t)
	dataDirs := map[compute.Driver]string{}
	var mu = make(chan struct{}, 1)
	dirOf := func(d compute.Driver) string {
		mu <- struct{}{}
		defer func() { <-mu }()
		return dataDirs[d]
	}
	// newDriver reserves slots gateways, then opens a driver on a data
	// directory of its own.
	newDriver := func(t *testing.T, slots int) compute.Driver {
		acquireGateways(t, slots)
		td := newTestDriver(t, rt, "", nil)
		mu <- struct{}{}
		dataDirs[td.Driver] = td.dir
		<-mu
		return td.Driver
	}
	computetest.Run(t, computetest.Harness{
		New: func(t *testing.T) compute.Driver { return newDriver(t, 1) },
		// Concurrency/TwoAgents runs two gateways.
		NewPair: func(t *testing.T) compute.Driver { return newDriver(t, 2) },
		// Two gateway starts and a native setup on a loaded 2-CPU box.
		Timeout: 5 * time.Minute,
		Inspect: computetest.Inspect{
			WorkspaceFile: func(t *testing.T, d compute.Driver, rev compute.Revision, name string) (string, bool) {
				b, err := os.ReadFile(filepath.Join(agentDirOf(dirOf(d), rev.AgentID), "workspace", name))
				if err != nil {
					return "", false
				}
				return string(b), true
			},
			Serving: func(t *testing.T, d compute.Driver, rev compute.Revision) bool {
				return isServing(dirOf(d), rev)
			},
			// Every regular file of the Agent's directory outside its
			// workspace: state, revisions, logs, identity and token files.
			SetupCopies: func(t *testing.T, d compute.Driver, rev compute.Revision) map[string][]byte {
				dir := agentDirOf(dirOf(d), rev.AgentID)
				out := map[string][]byte{}
				err := filepath.WalkDir(dir, func(path string, e fs.DirEntry, err error) error {
					switch {
					case errors.Is(err, fs.ErrNotExist):
						return nil
					case err != nil:
						return err
					case e.IsDir() && path == filepath.Join(dir, "workspace"):
						return filepath.SkipDir
					case !e.Type().IsRegular():
						return nil
					}
					b, err := os.ReadFile(path)
					if errors.Is(err, fs.ErrNotExist) {
						return nil // the running gateway removed it meanwhile
					}
					out[path] = b
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
