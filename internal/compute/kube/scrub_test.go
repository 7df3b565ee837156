package kube

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/types"
	"sigs.k8s.io/controller-runtime/pkg/client"

	"github.com/openclaw/occ/internal/compute"
	kubeenv "github.com/openclaw/occ/internal/testenv/kube"
)

// kwok's pod-ready stage reads its delay from these Pod annotations; with
// the jitter as long as the delay, a Pod stays unready for exactly that
// long (kwok's stage takes the jitter when it is not longer than the
// delay).
const (
	kwokReadyDelay  = "pod-ready.stage.kwok.x-k8s.io/delay"
	kwokReadyJitter = "pod-ready.stage.kwok.x-k8s.io/jitter-delay"
)

// TestActivationLeavesNoSetupBytes: once ActivateRevision has returned, no
// byte of the delivered workspace files is left in any Secret, ConfigMap,
// Pod, Deployment or ReplicaSet of the tenant namespace, whether the
// gateway is Ready at that moment or its Pod is being replaced. The
// worker's retry after a crash between the driver's activation and the
// activation transaction (PrepareRevision and ActivateRevision again, with
// the still-pending setup) must not bring the bytes back.
func TestActivationLeavesNoSetupBytes(t *testing.T) {
	env := kubeenv.Env(t)
	sc := env.NewStorage(t, 2)
	in := newInstallation(t, env, sc, false)
	for _, tc := range []struct {
		name string
		// unready replaces the gateway Pod by one that kwok keeps
		// unready, between PrepareRevision's Ready and ActivateRevision.
		unready bool
	}{
		{name: "gateway Ready at activation"},
		{name: "gateway not Ready at activation", unready: true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Parallel()
			ctx := testCtx(t, 3*time.Minute)
			d := newDriver(t, env, in.cfg)
			f := newFixture()
			tenant := TenantNamespace(f.ns.ID)
			t.Cleanup(func() {
				ctx := cleanupCtx(t)
				if err := d.DeleteAgent(ctx, f.agent); err != nil {
					t.Errorf("cleanup: DeleteAgent: %v", err)
				}
				if err := d.DeleteNamespace(ctx, f.ns); err != nil {
					t.Errorf("cleanup: DeleteNamespace: %v", err)
				}
			})
			if err := d.EnsureNamespace(ctx, f.ns); err != nil {
				t.Fatalf("EnsureNamespace: %v", err)
			}
			marker := kubeenv.RandomName("occ-setup-marker")
			setup := f.pendingSetup()
			for name := range setup.Files {
				setup.Files[name] = fmt.Sprintf("%s: %s\n", name, marker)
			}
			rc := compute.RevisionContext{WorkspaceSetup: setup}
			rev := f.revision(1, `{}`)

			prepareReady(t, ctx, d, rev, rc)
			// The search finds the bytes while they are meant to be there.
			if where := findMarker(t, ctx, env, tenant, marker); len(where) == 0 {
				t.Fatalf("before activation the marker is in no object of %s; the search cannot be trusted", tenant)
			}
			if tc.unready {
				holdUnready(t, ctx, env, d, rev)
			}

			if err := d.ActivateRevision(ctx, rev, rc); err != nil {
				t.Fatalf("ActivateRevision: %v", err)
			}
			if where := findMarker(t, ctx, env, tenant, marker); len(where) > 0 {
				t.Errorf("after ActivateRevision the file contents remain in %v", where)
			}
			checkCompletedSecret(t, ctx, env, tenant, f.agent.ID, setup.ID)

			// The worker crashed before recording the activation: it
			// prepares and activates again with the pending setup.
			if _, err := d.PrepareRevision(ctx, rev, rc); err != nil {
				t.Fatalf("PrepareRevision again: %v", err)
			}
			if where := findMarker(t, ctx, env, tenant, marker); len(where) > 0 {
				t.Errorf("a retried PrepareRevision brought the file contents back into %v", where)
			}
			if err := d.ActivateRevision(ctx, rev, rc); err != nil {
				t.Fatalf("ActivateRevision again: %v", err)
			}
			if where := findMarker(t, ctx, env, tenant, marker); len(where) > 0 {
				t.Errorf("after the second ActivateRevision the file contents remain in %v", where)
			}
			checkCompletedSecret(t, ctx, env, tenant, f.agent.ID, setup.ID)
		})
	}
}

// holdUnready makes rev's gateway unready the way a Pod restart does: the
// Deployment's Pod template gets kwok annotations (under another field
// manager, so the driver's applies keep them) that keep the replacement Pod
// unready for an hour, and the Recreate rollout removes the ready Pod. It
// returns once the driver itself sees the gateway as not Ready.
func holdUnready(t *testing.T, ctx context.Context, env *kubeenv.Cluster, d *Driver, rev compute.Revision) {
	t.Helper()
	dep := &appsv1.Deployment{}
	dep.Namespace, dep.Name = TenantNamespace(rev.NamespaceID), GatewayName(rev.AgentID)
	patch := fmt.Appendf(nil, `{"spec":{"template":{"metadata":{"annotations":{%q:"1h",%q:"1h"}}}}}`, kwokReadyDelay, kwokReadyJitter)
	if err := env.Client.Patch(ctx, dep, client.RawPatch(types.MergePatchType, patch), client.FieldOwner("occ-test")); err != nil {
		t.Fatalf("patch the gateway Pod template: %v", err)
	}
	kubeenv.WaitFor(t, ctx, func() (bool, error) {
		res, err := d.gatewayStatus(ctx, refOf(rev))
		if err != nil {
			return false, err
		}
		return !res.Ready, nil
	})
}

// findMarker returns the objects of namespace (namespaceContents) whose
// content holds marker.
func findMarker(t *testing.T, ctx context.Context, env *kubeenv.Cluster, namespace, marker string) []string {
	t.Helper()
	var where []string
	for name, content := range namespaceContents(t, ctx, env, namespace) {
		if bytes.Contains(content, []byte(marker)) {
			where = append(where, name)
		}
	}
	slices.Sort(where)
	return where
}

// namespaceContents reads every Secret, ConfigMap, Pod, Deployment and
// ReplicaSet of namespace and returns each one's JSON by "Kind name";
// Secret data is appended decoded (in JSON it is base64).
func namespaceContents(t *testing.T, ctx context.Context, env *kubeenv.Cluster, namespace string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for kind, list := range map[string]client.ObjectList{
		"Secret": &corev1.SecretList{}, "ConfigMap": &corev1.ConfigMapList{}, "Pod": &corev1.PodList{},
		"Deployment": &appsv1.DeploymentList{}, "ReplicaSet": &appsv1.ReplicaSetList{},
	} {
		if err := env.Client.List(ctx, list, client.InNamespace(namespace)); err != nil {
			t.Fatalf("list %s in %s: %v", kind, namespace, err)
		}
		items, err := meta.ExtractList(list)
		if err != nil {
			t.Fatal(err)
		}
		for _, item := range items {
			obj := item.(client.Object)
			b, err := json.Marshal(obj)
			if err != nil {
				t.Fatal(err)
			}
			if s, ok := obj.(*corev1.Secret); ok {
				for _, v := range s.Data {
					b = append(append(b, '\n'), v...)
				}
			}
			out[kind+" "+obj.GetName()] = b
		}
	}
	return out
}

// checkCompletedSecret checks that the setup Secret still exists and
// carries the completed identity of setupID in both keys, so that a Pod
// started later verifies the workspace marker.
func checkCompletedSecret(t *testing.T, ctx context.Context, env *kubeenv.Cluster, namespace, agentID, setupID string) {
	t.Helper()
	var s corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: namespace, Name: SetupSecretName(agentID)}, &s); err != nil {
		t.Fatalf("read the setup Secret: %v", err)
	}
	for _, key := range []string{SetupPayloadKey, SetupIdentityKey} {
		var got struct {
			ID        string          `json:"id"`
			Completed bool            `json:"completed"`
			Files     json.RawMessage `json:"files"`
		}
		if err := json.Unmarshal(s.Data[key], &got); err != nil {
			t.Fatalf("setup Secret key %s: %v", key, err)
		}
		if got.ID != setupID || !got.Completed || got.Files != nil {
			t.Errorf("setup Secret key %s = %s; want the completed identity of %s without files", key, s.Data[key], setupID)
		}
	}
}
