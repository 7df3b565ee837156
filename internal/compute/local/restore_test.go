package local

import (
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/setuprunner"
	"github.com/openclaw/occ/internal/testutil"
	"github.com/openclaw/occ/internal/workspace"
)

// refuseMarker, in a revision's configuration, makes the stand-in gateway
// of restoreRuntime exit 78 (the gateway's "configuration refused").
const refuseMarker = "occTestRefuseConfiguration"

// restoreRuntime is a runtime whose gateway is this test binary
// (standInGateway, answering every request 200), except for revisions
// whose configuration holds refuseMarker: those exit 78 at once.
func restoreRuntime(t *testing.T) Runtime {
	t.Helper()
	self, err := os.Executable()
	mustDo(t, "find the test binary", err)
	return standIn(t, `grep -q `+refuseMarker+` "$OPENCLAW_CONFIG_PATH" && exit 78
`+envStandInGateway+"=1 exec '"+strings.ReplaceAll(self, "'", `'\''`)+`' "$@"`)
}

// failVerify, in a PrepareRevision's context, makes the test's verifier
// fail as a timeout would (transient) for the calls made within it.
type failVerify struct{}

// TestFailedRevisionRestoresServing, with stand-in gateway processes:
// revision 1 serves (with a setup, so every start of it verifies); a
// later revision that refuses its configuration fails for good
// (CONFIGURATION_INVALID) after preparing it stopped revision 1's gateway
// (one gateway per Agent), and revision 1's gateway must run and serve
// again without any call for it. When starting it again fails (here its
// setup cannot be verified, transiently), PrepareRevision must answer a
// retryable error instead of the permanent failure, which would leave the
// Agent down for good: the next attempt starts it and answers the
// failure again, without starting the failed revision anew.
func TestFailedRevisionRestoresServing(t *testing.T) {
	td := newTestDriver(t, restoreRuntime(t), "", func(o *Options) { o.StopGrace = time.Second })
	ta := newTestAgent()
	none := compute.RevisionContext{}
	dir := agentDirOf(td.dir, ta.agent.ID)
	a := td.agent(ta.agent.ID)
	mustDo(t, "ensureLayout", a.ensureLayout(ta.ns.ID))
	id := workspace.Setup{ID: ids.New(ids.WorkspaceSetup), NamespaceID: ta.ns.ID, AgentID: ta.agent.ID, Completed: true}
	mustDo(t, "write the setup identity", a.files().WriteIdentity(id))
	mustDo(t, "write the marker", os.WriteFile(filepath.Join(a.path(dirWorkspace), workspace.MarkerName), id.Identity().MarshalMarker(), 0o600))
	td.verifySetup = func(ctx context.Context, s workspace.Setup, o setuprunner.Options) error {
		if ctx.Value(failVerify{}) != nil {
			ended, cancel := context.WithDeadline(ctx, time.Now())
			defer cancel()
			return setuprunner.Verify(ended, s, o)
		}
		return setuprunner.Verify(ctx, s, o)
	}

	rev1 := ta.revision(1, "")
	waitReady(t, td, rev1, none, 30*time.Second)
	mustDo(t, "ActivateRevision", td.ActivateRevision(ctxT(t, 10*time.Second), rev1, none))

	// serves: revision 1's gateway runs again and answers on the
	// Endpoint's port, without PrepareRevision of revision 1 (which would
	// start it itself).
	serves := func(t *testing.T, failed compute.Revision) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), probeLimit)
			defer cancel()
			return isServing(td.dir, rev1) && td.http.ready(ctx, endpointPort(t, td, rev1))
		}, "revision 1 to serve again after #%d failed", failed.Number)
	}
	starts := func(rev compute.Revision) int {
		b, _ := os.ReadFile(filepath.Join(dir, fileLog))
		return strings.Count(string(b), "starting the gateway of revision "+rev.ID)
	}

	t.Run("Restored", func(t *testing.T) {
		rev := ta.revision(2, `{"`+refuseMarker+`":true}`)
		if code := waitPermanent(t, td, rev, none, 30*time.Second); code != compute.CodeConfigurationInvalid {
			t.Fatalf("code %s, want %s", code, compute.CodeConfigurationInvalid)
		}
		serves(t, rev)
	})

	t.Run("RestoreFailsThenRetried", func(t *testing.T) {
		rev := ta.revision(3, `{"`+refuseMarker+`":true}`)
		if res, err := td.PrepareRevision(ctxT(t, 10*time.Second), rev, none); err != nil || res.Ready {
			t.Fatalf("PrepareRevision(#3) = %+v, %v; want pending", res, err)
		}
		// Its gateway gives up after two exits 78, 1 s apart; the
		// restore that follows cannot verify revision 1's setup.
		ctx := context.WithValue(ctxT(t, 30*time.Second), failVerify{}, true)
		var err error
		testutil.Eventually(t, 30*time.Second, func() bool {
			var res compute.PrepareResult
			res, err = td.PrepareRevision(ctx, rev, none)
			return err != nil || res.Ready
		}, "PrepareRevision(#3) to end pending")
		if p, permanent := compute.AsPermanent(err); permanent {
			t.Fatalf("PrepareRevision(#3) while revision 1 cannot start = permanent %s (%v); want a retryable error", p.Code, err)
		}
		t.Logf("PrepareRevision(#3) while revision 1 cannot start = %v", err)
		if _, _, ok := runningPID(td.dir, ta.agent.ID); ok {
			t.Error("a gateway runs although revision 1's setup could not be verified")
		}
		before := starts(rev)
		_, err = td.PrepareRevision(ctxT(t, 10*time.Second), rev, none)
		if p, ok := compute.AsPermanent(err); !ok || p.Code != compute.CodeConfigurationInvalid {
			t.Fatalf("PrepareRevision(#3) again = %v; want permanent %s", err, compute.CodeConfigurationInvalid)
		}
		serves(t, rev)
		if n := starts(rev); n != before {
			t.Errorf("revision 3 was started %d more times by the retry, want none", n-before)
		}
	})
}
