package routingops

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/kube"
)

// fakeAPI is an in-memory OCC API: Agents with revisions, deployments
// that succeed unless failDeploy names the Agent.
type fakeAPI struct {
	agents     []apitypes.Agent
	revs       map[string][]apitypes.Revision
	calls      []string
	failWait   map[string]bool // WaitForDeployment errors (an interruption)
	reconcileE *apitypes.DeploymentError
}

func (f *fakeAPI) ListAgents(_ context.Context, ns string) ([]apitypes.Agent, error) {
	return f.agents, nil
}

func (f *fakeAPI) ListRevisions(_ context.Context, _, a string) ([]apitypes.Revision, error) {
	return f.revs[a], nil
}

func (f *fakeAPI) GetConfiguration(_ context.Context, ns, id string) (apitypes.Configuration, error) {
	return apitypes.Configuration{ID: id, NamespaceID: ns, Document: json.RawMessage(`{"gateway":{}}`)}, nil
}

func (f *fakeAPI) ReconcileNamespace(_ context.Context, ns string) (apitypes.Reconciliation, error) {
	f.calls = append(f.calls, "reconcile "+ns)
	return apitypes.Reconciliation{ID: "wrk_1", NamespaceID: ns, Status: apitypes.DeploymentQueued}, nil
}

func (f *fakeAPI) WaitForReconciliation(_ context.Context, ns, id string, _ time.Duration) (apitypes.Reconciliation, error) {
	if f.reconcileE != nil {
		return apitypes.Reconciliation{ID: id, Status: apitypes.DeploymentFailed, Error: f.reconcileE}, nil
	}
	return apitypes.Reconciliation{ID: id, NamespaceID: ns, Status: apitypes.DeploymentSucceeded}, nil
}

func (f *fakeAPI) DeployAgent(_ context.Context, ns, a string) (apitypes.Revision, error) {
	f.calls = append(f.calls, "deploy "+a)
	n := int64(len(f.revs[a]) + 1)
	r := apitypes.Revision{ID: fmt.Sprintf("rev_%s_%d", a, n), AgentID: a, NamespaceID: ns, Number: n}
	f.revs[a] = append(f.revs[a], r)
	return r, nil
}

func (f *fakeAPI) WaitForDeployment(_ context.Context, _, a, id string, _ time.Duration, _ func(apitypes.Deployment)) (apitypes.Deployment, error) {
	f.calls = append(f.calls, "wait "+id)
	if f.failWait[a] {
		return apitypes.Deployment{}, context.DeadlineExceeded
	}
	return apitypes.Deployment{ID: id, Status: apitypes.DeploymentSucceeded}, nil
}

func (f *fakeAPI) GetFile(context.Context, string, string, string) (client.File, error) {
	return client.File{}, errors.New("not used")
}

type fakeCluster struct {
	planErr error
}

func (c *fakeCluster) Config() kube.Config {
	return kube.Config{GatewayRouting: &kube.GatewayRouting{GatewayName: "gw", GatewayNamespace: "gwns", EnvoyNamespace: "eg"}}
}

func (c *fakeCluster) PlanNamespace(context.Context, compute.Namespace) (compute.NamespacePlan, error) {
	return compute.NamespacePlan{Changes: []compute.ObjectChange{
		{Kind: "NetworkPolicy", Namespace: "occ-x", Name: kube.PolicyGatewayIngress, ResourceVersion: "7", Action: compute.ActionUpdate,
			Fields: []string{"spec.ingress"}, Desired: json.RawMessage(`{"spec":{"ingress":[]}}`)},
		{Kind: "Namespace", Name: "occ-x", ResourceVersion: "5", Action: compute.ActionUpdate, Fields: []string{"metadata.labels.openclaw-enterprise.io/gateway"}},
	}}, c.planErr
}

func (c *fakeCluster) BackupNamespace(context.Context, string) (kube.NamespaceBackup, error) {
	return kube.NamespaceBackup{Namespace: json.RawMessage(`{"kind":"Namespace"}`), NetworkPolicies: []json.RawMessage{}}, nil
}

func (c *fakeCluster) CheckInstallationRouting(context.Context) []kube.Check { return nil }

func (c *fakeCluster) CheckAgentRouting(context.Context, string, string) []kube.Check {
	return []kube.Check{{Name: kube.CheckRouteAccepted, Result: kube.CheckPassed}}
}

func newFakeAPI() *fakeAPI {
	api := &fakeAPI{revs: map[string][]apitypes.Revision{}, failWait: map[string]bool{}}
	for _, a := range []struct {
		id    string
		state apitypes.RuntimeState
	}{{"agt_a", apitypes.RuntimeRunning}, {"agt_b", apitypes.RuntimeRunning}, {"agt_c", apitypes.RuntimeStopped}} {
		api.revs[a.id] = []apitypes.Revision{{ID: "rev_" + a.id + "_1", Number: 1, AgentID: a.id}}
		api.agents = append(api.agents, apitypes.Agent{ID: a.id, Name: strings.TrimPrefix(a.id, "agt_"), NamespaceID: "ns_1",
			ConfigurationID: "cfg_1", Status: apitypes.AgentActive, DesiredRuntimeState: a.state, ActiveRevisionID: "rev_" + a.id + "_1"})
	}
	return api
}

func options(api API, c Cluster, dir string, dry bool) EnableOptions {
	return EnableOptions{API: api, Cluster: c, Namespaces: []apitypes.Namespace{{ID: "ns_1", Name: "team"}},
		BackupDir: dir, DryRun: dry, Out: io.Discard, Log: io.Discard, Interval: time.Millisecond, Timeout: time.Second}
}

func TestEnableResumes(t *testing.T) {
	api, cl := newFakeAPI(), &fakeCluster{}
	dir := filepath.Join(t.TempDir(), "backup")
	api.failWait["agt_b"] = true
	if err := Enable(t.Context(), options(api, cl, dir, false)); err == nil {
		t.Fatal("Enable with an interrupted deployment succeeded")
	}
	first := []string{"reconcile ns_1", "deploy agt_a", "wait rev_agt_a_2", "deploy agt_b", "wait rev_agt_b_2"}
	if diff := cmp.Diff(first, api.calls); diff != "" {
		t.Errorf("first run's calls (-want +got):\n%s", diff)
	}
	api.failWait["agt_b"], api.calls = false, nil
	if err := Enable(t.Context(), options(api, cl, dir, false)); err != nil {
		t.Fatalf("second run: %v", err)
	}
	// Only agt_b's deployment is followed again: nothing is redeployed.
	if diff := cmp.Diff([]string{"wait rev_agt_b_2"}, api.calls); diff != "" {
		t.Errorf("second run's calls (-want +got):\n%s", diff)
	}
	api.calls = nil
	if err := Enable(t.Context(), options(api, cl, dir, false)); err != nil || len(api.calls) != 0 {
		t.Errorf("third run: %v, calls %v; want nothing redone", err, api.calls)
	}
	checkModes(t, dir)
	var bk agentFile
	readJSON(t, filepath.Join(dir, "ns_1", "agents", "agt_a.json"), &bk)
	var doc bytes.Buffer
	if err := json.Compact(&doc, bk.Configuration.Document); err != nil {
		t.Fatal(err)
	}
	if bk.ActiveRevision == nil || bk.ActiveRevision.ID != "rev_agt_a_1" || doc.String() != `{"gateway":{}}` {
		t.Errorf("backup of agt_a = %+v; want the revision and Configuration from before the run", bk)
	}
}

// An interruption between saving the request and saving the deployment
// id: the next run adopts the revision made meanwhile.
func TestEnableAdoptsARequestedDeployment(t *testing.T) {
	api, cl := newFakeAPI(), &fakeCluster{}
	dir := filepath.Join(t.TempDir(), "backup")
	if err := Enable(t.Context(), options(api, cl, dir, false)); err != nil {
		t.Fatal(err)
	}
	b, _ := openBackupDir(dir)
	p, err := b.loadProgress()
	if err != nil {
		t.Fatal(err)
	}
	ap := p.Namespaces["ns_1"].Agents["agt_b"]
	ap.Done, ap.Deployment, ap.Requested, ap.RevisionsSeen, ap.LastRevisionID = false, "", true, 1, "rev_agt_b_1"
	if err := b.saveProgress(p); err != nil {
		t.Fatal(err)
	}
	api.calls = nil
	if err := Enable(t.Context(), options(api, cl, dir, false)); err != nil {
		t.Fatal(err)
	}
	if diff := cmp.Diff([]string{"wait rev_agt_b_2"}, api.calls); diff != "" {
		t.Errorf("calls (-want +got):\n%s", diff)
	}
}

func TestEnableChangesNothing(t *testing.T) {
	for _, tc := range []struct {
		name    string
		dry     bool
		planErr error
		wantErr string
	}{
		{"dry run", true, nil, ""},
		{"refusal", false, compute.Refusal(compute.CodePermissivePolicy, "NetworkPolicy occ-x/allow-office admits other callers."), "PERMISSIVE_NETWORK_POLICY"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			api, cl := newFakeAPI(), &fakeCluster{planErr: tc.planErr}
			dir := filepath.Join(t.TempDir(), "backup")
			o := options(api, cl, dir, tc.dry)
			var out strings.Builder
			o.Out = &out
			err := Enable(t.Context(), o)
			if tc.wantErr == "" && err != nil || tc.wantErr != "" && (err == nil || !strings.Contains(err.Error(), tc.wantErr)) {
				t.Fatalf("Enable = %v, want %q", err, tc.wantErr)
			}
			if len(api.calls) != 0 {
				t.Errorf("API calls %v; want none", api.calls)
			}
			if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
				t.Errorf("the backup directory was created: %v", err)
			}
			if tc.dry {
				for _, want := range []string{"update    NetworkPolicy occ-x/allow-gateway-ingress (at resourceVersion 7)",
					"change metadata.labels.openclaw-enterprise.io/gateway", "redeploy  Agent a (agt_a)", "skip      Agent c (agt_c): not running",
					"nothing was changed"} {
					if !strings.Contains(out.String(), want) {
						t.Errorf("dry-run output lacks %q:\n%s", want, out.String())
					}
				}
			}
		})
	}
}

func TestBackupDirModes(t *testing.T) {
	dir := filepath.Join(t.TempDir(), "open")
	if err := os.Mkdir(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	err := Enable(t.Context(), options(newFakeAPI(), &fakeCluster{}, dir, false))
	if err == nil || !strings.Contains(err.Error(), "must be 0700") {
		t.Errorf("Enable into a 0755 directory = %v; want a refusal", err)
	}
}

func TestConfigMapName(t *testing.T) {
	for in, want := range map[string]string{"oce": "oce-occ-config", "myocc": "myocc-config", strings.Repeat("a", 60): strings.Repeat("a", 50) + "-config"} {
		if got := ConfigMapName(in); got != want {
			t.Errorf("ConfigMapName(%q) = %q, want %q", in, got, want)
		}
	}
}

func checkModes(t *testing.T, dir string) {
	t.Helper()
	err := filepath.Walk(dir, func(path string, fi os.FileInfo, err error) error {
		if err != nil {
			return err
		}
		want := os.FileMode(0o600)
		if fi.IsDir() {
			want = 0o700
		}
		if fi.Mode().Perm() != want {
			t.Errorf("%s has mode %04o, want %04o", path, fi.Mode().Perm(), want)
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatal(err)
	}
}
