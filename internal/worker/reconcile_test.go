package worker_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/fake"
	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/testutil"
	"github.com/openclaw/occ/internal/worker"
)

// reconciling is the fake driver with a NamespaceReconciler whose answers
// the test scripts.
type reconciling struct {
	*fake.Driver
	errs  []error
	calls int
}

func (r *reconciling) PlanNamespace(context.Context, compute.Namespace) (compute.NamespacePlan, error) {
	return compute.NamespacePlan{}, nil
}

func (r *reconciling) ReconcileNamespace(context.Context, compute.Namespace) (compute.NamespacePlan, error) {
	r.calls++
	if len(r.errs) > 0 {
		err := r.errs[0]
		r.errs = r.errs[1:]
		return compute.NamespacePlan{}, err
	}
	return compute.NamespacePlan{}, nil
}

// TestNamespaceRepair: a reconciliation of a ready Namespace goes to the
// driver's NamespaceReconciler; a refusal fails it with the driver's public
// message and leaves the Namespace ready; a conflict is retried.
func TestNamespaceRepair(t *testing.T) {
	refusal := compute.Refusal(compute.CodePermissivePolicy, "NetworkPolicy occ-x/extra admits every source to the gateway Pods.")
	tests := []struct {
		name       string
		errs       []error
		wantStatus string
		wantError  *occ.DeploymentError
		wantCalls  int
	}{
		{name: "succeeds", wantStatus: occ.DeploymentSucceeded, wantCalls: 1},
		{name: "conflict retried", errs: []error{errors.New("kube: NetworkPolicy changed since it was read")},
			wantStatus: occ.DeploymentSucceeded, wantCalls: 2},
		{name: "refused", errs: []error{refusal}, wantStatus: occ.DeploymentFailed, wantCalls: 1,
			wantError: &occ.DeploymentError{Code: compute.CodePermissivePolicy, Message: "NetworkPolicy occ-x/extra admits every source to the gateway Pods."}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx := testutil.Context(t)
			clock := testutil.NewClock(time.Time{})
			drv := &reconciling{Driver: fake.New(fake.Options{}), errs: tc.errs}
			st := testdb.SQLite(t)
			srv := server.New(server.Options{Store: st, PublicOrigin: testOrigin, Driver: drv, Now: clock.Now,
				Worker: worker.Options{Now: clock.Now, Logger: quietLogger()}})
			admin := bootstrapAdmin(t, ctx, srv, st)
			ns, err := srv.Service.CreateNamespace(admin, "ns")
			if err != nil {
				t.Fatal(err)
			}
			if _, err := srv.Service.ReconcileNamespace(admin, ns.ID); err == nil {
				t.Fatal("ReconcileNamespace of a provisioning Namespace: want NAMESPACE_NOT_READY")
			}
			if did, err := srv.Worker.RunOnce(ctx); err != nil || !did {
				t.Fatalf("RunOnce = %v, %v", did, err)
			}
			rc, err := srv.Service.ReconcileNamespace(admin, ns.ID)
			if err != nil {
				t.Fatal(err)
			}
			for range 5 {
				clock.Advance(time.Minute)
				if did, err := srv.Worker.RunOnce(ctx); err != nil || !did {
					break
				}
			}
			got, err := srv.Service.GetReconciliation(admin, ns.ID, rc.ID)
			if err != nil {
				t.Fatal(err)
			}
			if got.Status != tc.wantStatus || drv.calls != tc.wantCalls {
				t.Errorf("status %q after %d calls, want %q after %d", got.Status, drv.calls, tc.wantStatus, tc.wantCalls)
			}
			if diff := cmp.Diff(tc.wantError, got.Error); diff != "" {
				t.Errorf("error (-want +got):\n%s", diff)
			}
			if ns, err = st.GetNamespace(ctx, ns.ID); err != nil || ns.Status != store.NamespaceReady {
				t.Errorf("Namespace status %q (%v), want ready", ns.Status, err)
			}
		})
	}
}
