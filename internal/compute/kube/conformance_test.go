package kube

import (
	"testing"
	"time"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/computetest"
	kubeenv "github.com/openclaw/occ/internal/testenv/kube"
)

// TestConformance runs the compute conformance suite against the real API
// server. The cases that need a runtime which really runs are skipped
// (SkipRunning): kwok marks Pods Running, but no gateway container runs,
// so nothing could serve a file. Those paths (Ready on kwok, activation,
// retirement order) are covered by TestDeployLifecycle.
func TestConformance(t *testing.T) {
	env := kubeenv.Env(t)
	in := newInstallation(t, env, "", false)
	computetest.Run(t, computetest.Harness{
		New: func(t *testing.T) compute.Driver {
			return newDriver(t, env, in.cfg)
		},
		Timeout:     time.Minute,
		SkipRunning: true,
		Inspect: computetest.Inspect{
			Serving: func(t *testing.T, d compute.Driver, rev compute.Revision) bool {
				ok, err := d.(*Driver).Serving(testCtx(t, 30*time.Second), rev)
				if err != nil {
					t.Errorf("Serving(#%d): %v", rev.Number, err)
				}
				return ok
			},
		},
	})
}

// TestConformanceOnKwok runs the whole suite, the "running" cases
// included, with kwok standing in for the kubelet: Ready means the
// Deployment became available, and serving means the Service and route
// name the revision. No container runs, so this checks the driver's
// bookkeeping against the real controllers (Deployment rollouts,
// Recreate, garbage collection), not a gateway.
func TestConformanceOnKwok(t *testing.T) {
	env := kubeenv.Env(t)
	// One volume per Agent that is prepared: three running cases and three
	// that prepare once (retained volumes are not reused), and spares.
	sc := env.NewStorage(t, 8)
	in := newInstallation(t, env, sc, false)
	computetest.Run(t, computetest.Harness{
		New: func(t *testing.T) compute.Driver {
			return newDriver(t, env, in.cfg)
		},
		// kwok marks Pods ready after staged delays, and a loaded 2-core
		// machine stretches them; a case waits this long for readiness.
		Timeout: 5 * time.Minute,
		Inspect: computetest.Inspect{
			Serving: func(t *testing.T, d compute.Driver, rev compute.Revision) bool {
				ok, err := d.(*Driver).Serving(testCtx(t, 30*time.Second), rev)
				if err != nil {
					t.Errorf("Serving(#%d): %v", rev.Number, err)
				}
				return ok
			},
			// Every Secret, ConfigMap, Pod, Deployment and ReplicaSet of
			// the tenant namespace.
			SetupCopies: func(t *testing.T, _ compute.Driver, rev compute.Revision) map[string][]byte {
				return namespaceContents(t, testCtx(t, 30*time.Second), env, TenantNamespace(rev.NamespaceID))
			},
		},
	})
}

// TestConformanceWithoutRouting runs the suite (SkipRunning) with a driver
// that has no gatewayRouting: no live files (Endpoint answers
// ErrNoEndpoint), gateway ingress from network.gatewayClients.
func TestConformanceWithoutRouting(t *testing.T) {
	env := kubeenv.Env(t)
	cfg := baseConfig("unused", "")
	cfg.GatewayRouting = nil
	cfg.Network = Network{GatewayClients: []string{"10.0.0.0/8"}}
	computetest.Run(t, computetest.Harness{
		New:         func(t *testing.T) compute.Driver { return newDriver(t, env, cfg) },
		Timeout:     time.Minute,
		SkipRunning: true,
	})
}
