package kube

import (
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/pem"
	"strings"
	"testing"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"

	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/ids"
	kubeenv "github.com/openclaw/occ/internal/testenv/kube"
)

// egControllerName is the controller name the test environment's Envoy
// Gateway serves.
const egControllerName = "gateway.envoyproxy.io/gatewayclass-controller"

// egNamespace is where the test environment's Envoy Gateway runs proxies.
const egNamespace = "envoy-gateway-system"

// testCtx is a context that ends with the test or after d.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// cleanupCtx is a context for t.Cleanup, which runs after the test's own
// context is cancelled.
func cleanupCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

// baseConfig is a routed configuration for the test environment: the
// Gateway in gatewayNamespace, Envoy in the environment's namespace,
// images that kwok never pulls, PVCs of storageClass.
func baseConfig(gatewayNamespace, storageClass string) Config {
	return Config{
		GatewayRouting: &GatewayRouting{
			GatewayName: "occ-agent-gateways", GatewayNamespace: gatewayNamespace, EnvoyNamespace: egNamespace,
		},
		Network: Network{GatewayTrustedProxyCIDRs: []string{"10.244.0.0/16"},
			ModelEgressExcept: []string{"203.0.113.0/24", "2001:db8::/64"}},
		Runtime: Runtime{
			GatewayImage: "registry.invalid/openclaw/gateway:2026.9.6", OCCImage: "registry.invalid/occ:test",
			GatewayStorageClassName: storageClass,
		},
	}
}

// newDriver returns a driver on the environment's client.
func newDriver(t *testing.T, env *kubeenv.Cluster, cfg Config) *Driver {
	t.Helper()
	d, err := New(cfg, env.Client, Options{CallTimeout: 20 * time.Second})
	if err != nil {
		t.Fatalf("New: %v", err)
	}
	return d
}

// chartDir is OCC's Helm chart, the one source of the installation-level
// routing objects.
const chartDir = "../../../deploy/helm/occ"

// installation is the routing of one test: a Gateway namespace with the
// chart's Gateway, EnvoyProxy, SecurityPolicy and cert-manager objects,
// their Secrets, and a GatewayClass of the environment's Envoy Gateway.
type installation struct {
	cfg   Config
	class string
	// routing is what the chart renders for the routing
	// (gateway-routing.yaml), with the Gateway's namespace set.
	routing []client.Object
	// apiKey and tlsSecret are the Secrets the installation refers to.
	apiKey, tlsSecret *corev1.Secret
	gatewayClass      *gwv1.GatewayClass
}

// newInstallation makes the routing for cfg's Gateway (with the Gateway
// namespace created here) and, when apply is set, renders the chart's
// routing objects for it and applies them with server-side apply.
// Everything is deleted when the test ends.
func newInstallation(t *testing.T, env *kubeenv.Cluster, storageClass string, apply bool) *installation {
	t.Helper()
	ctx := testCtx(t, time.Minute)
	gwNs := env.NewNamespace(t)
	in := &installation{cfg: baseConfig(gwNs, storageClass), class: kubeenv.RandomName("occt-eg")}
	in.gatewayClass = &gwv1.GatewayClass{
		TypeMeta:   metav1.TypeMeta{APIVersion: gwv1.GroupVersion.String(), Kind: "GatewayClass"},
		ObjectMeta: metav1.ObjectMeta{Name: in.class},
		Spec:       gwv1.GatewayClassSpec{ControllerName: egControllerName},
	}
	key := make([]byte, 32)
	if _, err := rand.Read(key); err != nil {
		t.Fatal(err)
	}
	in.apiKey = &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: "occ-gateway-key", Namespace: gwNs},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"occ": []byte(hex.EncodeToString(key))},
	}
	ca, err := gwtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue(in.cfg.GatewayRouting.Host())
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	// The listener certificate cert-manager would issue for the chart's
	// Certificate (no cert-manager controller runs here).
	in.tlsSecret = &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: in.cfg.GatewayRouting.GatewayName + "-tls", Namespace: gwNs},
		Type:       corev1.SecretTypeTLS,
		Data: map[string][]byte{
			corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]}),
			corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
		},
	}
	if !apply {
		return in
	}
	in.routing = chartRouting(t, ctx, in.cfg, in.class, in.apiKey.Name)
	d := newDriver(t, env, in.cfg)
	if err := d.apply(ctx, in.gatewayClass, ""); err != nil {
		t.Fatalf("apply GatewayClass: %v", err)
	}
	t.Cleanup(func() { deleteCluster(t, env, in.gatewayClass) })
	for _, obj := range append([]client.Object{in.apiKey, in.tlsSecret}, in.routing...) {
		if err := d.apply(ctx, obj, ""); err != nil {
			t.Fatalf("apply: %v", err)
		}
	}
	return in
}

// chartRouting renders the chart (helm template) with routing for cfg's
// Gateway and returns the routing objects it renders, the Gateway API,
// Envoy Gateway and cert-manager kinds, with the Gateway's namespace set
// (helm sets it only when it installs). The release is the Gateway
// namespace's "occ"; the values are those an operator sets, plus the
// Gateway and Envoy names of cfg. The chart's Gateway must be cfg's: the
// driver's routes attach to it by name, and the chart's own tests prove
// that the hostname and route label it derives are the driver's.
func chartRouting(t *testing.T, ctx context.Context, cfg Config, class, apiKeySecret string) []client.Object {
	t.Helper()
	r := cfg.GatewayRouting
	out, err := kubeenv.RunHelm(t, ctx, "template", "occ", chartDir, "--namespace", r.GatewayNamespace, "--kube-version", "1.37.2",
		"--set", "database.existingSecret=occ-database",
		"--set", "gatewayRouting.enabled=true",
		"--set", "gatewayRouting.gatewayClassName="+class,
		"--set", "gatewayRouting.apiKeySecretName="+apiKeySecret,
		"--set", "gatewayRouting.gatewayName="+r.GatewayName,
		"--set", "gatewayRouting.envoyNamespace="+r.EnvoyNamespace,
		"--set", "compute.gatewayTrustedProxyCidrs={"+strings.Join(cfg.Network.GatewayTrustedProxyCIDRs, ",")+"}",
	)
	if err != nil {
		t.Fatal(err)
	}
	objs, err := kubeenv.Objects([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	var routing []client.Object
	var gateway string
	for _, u := range objs {
		switch u.GroupVersionKind().Group {
		case gwv1.GroupName, egv1a1.GroupName, "cert-manager.io":
			u.SetNamespace(r.GatewayNamespace)
			routing = append(routing, u)
			if u.GetKind() == "Gateway" {
				gateway = u.GetName()
			}
		}
	}
	if gateway != r.GatewayName {
		t.Fatalf("the chart renders Gateway %q, the driver's configuration names %q", gateway, r.GatewayName)
	}
	return routing
}

// deleteCluster deletes a cluster-scoped object at the end of a test.
func deleteCluster(t *testing.T, env *kubeenv.Cluster, obj client.Object) {
	t.Helper()
	if err := env.Client.Delete(cleanupCtx(t), obj); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete %T %s: %v", obj, obj.GetName(), err)
	}
}

// fixture is one OCC Namespace and Agent with fresh ids.
type fixture struct {
	ns    compute.Namespace
	agent compute.Agent
	cfgID string
}

func newFixture() fixture {
	ns := compute.Namespace{ID: ids.New(ids.Namespace), Name: "kube-test"}
	return fixture{ns: ns, agent: compute.Agent{ID: ids.New(ids.Agent), NamespaceID: ns.ID, Name: "agent"}, cfgID: ids.New(ids.Configuration)}
}

func (f fixture) revision(n int64, config string) compute.Revision {
	return compute.Revision{
		ID: ids.New(ids.Revision), NamespaceID: f.ns.ID, AgentID: f.agent.ID, AgentName: f.agent.Name, Number: n,
		ConfigurationID: f.cfgID, ConfigurationGeneration: n, Configuration: []byte(config),
	}
}

func (f fixture) pendingSetup() *compute.WorkspaceSetup {
	return &compute.WorkspaceSetup{
		ID: ids.New(ids.WorkspaceSetup), NamespaceID: f.ns.ID, AgentID: f.agent.ID,
		Files: map[string]string{"AGENTS.md": "# Agents\n", "SOUL.md": "calm\n", "IDENTITY.md": "", "USER.md": "user\n"},
	}
}

// prepareReady polls PrepareRevision until it reports Ready.
func prepareReady(t *testing.T, ctx context.Context, d *Driver, rev compute.Revision, rc compute.RevisionContext) {
	t.Helper()
	var last string
	start := time.Now()
	tick := time.NewTicker(250 * time.Millisecond)
	defer tick.Stop()
	for {
		res, err := d.PrepareRevision(ctx, rev, rc)
		if p, ok := compute.AsPermanent(err); ok {
			t.Fatalf("PrepareRevision(#%d): permanent failure %s: %v", rev.Number, p.Code, err)
		}
		if err == nil && res.Ready {
			t.Logf("revision #%d ready after %v", rev.Number, time.Since(start).Round(time.Millisecond))
			return
		}
		if err != nil {
			last = err.Error()
		} else {
			last = res.PendingReason + ": " + res.Message
		}
		select {
		case <-ctx.Done():
			t.Fatalf("PrepareRevision(#%d) not ready after %v; last answer: %s", rev.Number, time.Since(start).Round(time.Millisecond), last)
		case <-tick.C:
		}
	}
}

// routeConditions returns the conditions Envoy Gateway reported on route.
func routeConditions(route *gwv1.HTTPRoute) []metav1.Condition {
	for _, p := range route.Status.Parents {
		if string(p.ControllerName) == egControllerName {
			return p.Conditions
		}
	}
	return nil
}

func conditionsTrue(cs []metav1.Condition, types ...string) bool {
	for _, typ := range types {
		if !meta.IsStatusConditionTrue(cs, typ) {
			return false
		}
	}
	return true
}
