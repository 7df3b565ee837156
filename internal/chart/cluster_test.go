package chart

// The chart on the real test API server (scripts/testenv/k8s.sh:
// kube-apiserver with RBAC, kwok, the Gateway API, Envoy Gateway and
// cert-manager CRDs, the real Envoy Gateway controller): helm install
// --wait, the controller's verdict on the chart's routing, the RBAC and the
// admission policy the worker is confined by, and a deployment through
// `occ worker` with nothing but the worker ServiceAccount's token.
// testkube.Env skips these tests without the environment, or fails them
// under CI=true.

import (
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"math/big"
	"net/http"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"github.com/google/go-cmp/cmp"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	clientcmdapi "k8s.io/client-go/tools/clientcmd/api"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/openclaw/occ/apitypes"
	occclient "github.com/openclaw/occ/client"
	"github.com/openclaw/occ/internal/cli"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/kube"
	"github.com/openclaw/occ/internal/compute/kube/kubecfg"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
	testkube "github.com/openclaw/occ/internal/testenv/kube"
	"github.com/openclaw/occ/internal/testutil"
)

// occEnv makes the test binary act as the occ binary: the deployment test
// re-executes os.Args[0] with it set, so `occ server` and `occ worker` run
// the real command tree in real processes, built from this tree, without
// a separate go build.
const occEnv = "OCC_CHART_TEST_RUN_OCC"

func TestMain(m *testing.M) {
	if os.Getenv(occEnv) == "1" {
		os.Exit(cli.Execute())
	}
	os.Exit(m.Run())
}

// testCtx is a context that ends with the test or after d.
func testCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

// cleanupCtx is a context for t.Cleanup, which runs after the test's own
// context has ended.
func cleanupCtx(t *testing.T, d time.Duration) context.Context {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// The Secrets the operator creates before installing (seed 003): the
// service key (key "occ") and the database URL. The names are those of
// the documented value sets in testdata.
const (
	apiKeySecretName   = "occ-private-gateway-key"
	databaseSecretName = "occ-database"
)

// serviceKey is a fresh service key as seed 003 makes it: 64 hex digits,
// no trailing newline.
func serviceKey(t *testing.T) []byte {
	t.Helper()
	b := make([]byte, 32)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return []byte(hex.EncodeToString(b))
}

func serviceKeySecret(namespace, name string, key []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Type:       corev1.SecretTypeOpaque,
		Data:       map[string][]byte{"occ": key},
	}
}

// testCA is a self-signed ECDSA P-256 root, what the chart's root
// Certificate asks cert-manager for.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newTestCA(t *testing.T, commonName string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial(t),
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             time.Now().Add(-time.Minute),
		NotAfter:              time.Now().Add(87600 * time.Hour), // the chart's root duration
		IsCA:                  true,
		BasicConstraintsValid: true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		t.Fatal(err)
	}
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

func serial(t *testing.T) *big.Int {
	t.Helper()
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		t.Fatal(err)
	}
	return n
}

func keyPEM(t *testing.T, key *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der})
}

// tlsSecret is a kubernetes.io/tls Secret as cert-manager writes it:
// tls.crt, tls.key and the issuing CA in ca.crt.
func tlsSecret(namespace, name string, cert, key, ca []byte) *corev1.Secret {
	return &corev1.Secret{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Secret"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: namespace},
		Type:       corev1.SecretTypeTLS,
		Data:       map[string][]byte{corev1.TLSCertKey: cert, corev1.TLSPrivateKeyKey: key, "ca.crt": ca},
	}
}

// rootSecret is the root CA's Secret: a self-signed certificate is its
// own ca.crt.
func (ca *testCA) rootSecret(t *testing.T, namespace, name string) *corev1.Secret {
	return tlsSecret(namespace, name, ca.certPEM, keyPEM(t, ca.key), ca.certPEM)
}

// leafSecret is the listener certificate for host, signed by ca, as the
// chart's listener Certificate asks for (ECDSA P-256, 2,160 h).
func (ca *testCA) leafSecret(t *testing.T, namespace, name, host string) *corev1.Secret {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: serial(t),
		DNSNames:     []string{host},
		NotBefore:    time.Now().Add(-time.Minute),
		NotAfter:     time.Now().Add(2160 * time.Hour),
		KeyUsage:     x509.KeyUsageDigitalSignature | x509.KeyUsageKeyEncipherment,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	return tlsSecret(namespace, name, pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM(t, key), ca.certPEM)
}

// deleteObject deletes obj when a test ends; absence is fine.
func deleteObject(t *testing.T, env *testkube.Cluster, obj client.Object) {
	t.Helper()
	if err := env.Client.Delete(cleanupCtx(t, time.Minute), obj); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete %T %s: %v", obj, obj.GetName(), err)
	}
}

// installOptions say how one test installs the chart.
type installOptions struct {
	// values are value files (testdata), sets --set arguments.
	values []string
	sets   []string
	// volumes is how many PersistentVolumes of a fresh StorageClass to
	// provide; with volumes, storageSet names the value that takes the
	// class ("compute.gatewayStorageClassName", ...).
	volumes    int
	storageSet string
}

// installation is one release of the chart on the test API server, in a
// release namespace of its own.
type installation struct {
	env                *testkube.Cluster
	release, namespace string
	fullname           string
	class              string // the GatewayClass the test created ("" without routing)
	storageClass       string
	key                []byte         // the service key in the operator's Secret
	ca                 *testCA        // the root cert-manager would have made; nil without routing
	kc                 kubecfg.Config // the driver configuration the chart renders
}

// workerSA and apiSA name the chart's ServiceAccounts.
func (in *installation) workerSA() string { return in.fullname + "-worker" }
func (in *installation) apiSA() string    { return in.fullname + "-api" }

// policyName is the chart's ValidatingAdmissionPolicy (admission-policy.yaml).
func (in *installation) policyName() string {
	return strings.TrimSuffix(in.kc.TenantAccess.ClusterRole, "-tenant") + "-worker-scope"
}

// installChart creates what the operator provides (seed 003: the service
// key and database Secrets, an Envoy Gateway GatewayClass) and, standing
// in for cert-manager, the certificate Secrets; then runs helm install
// --wait. Everything goes when the test ends: helm uninstall first (it
// removes the cluster-scoped RBAC and policy), then the GatewayClass,
// storage and namespace.
func installChart(t *testing.T, o installOptions) *installation {
	t.Helper()
	env := testkube.Env(t)
	ctx := testCtx(t, 6*time.Minute)
	in := &installation{env: env, namespace: env.NewNamespace(t), release: testkube.RandomName("rel")}
	in.fullname = in.release + "-occ" // the release name holds no "occ" (hex digits have no o)
	var files, args []string
	for _, f := range o.values {
		files = append(files, valuesFile(f))
		args = append(args, "--values", valuesFile(f))
	}
	sets := slices.Clone(o.sets)
	if o.volumes > 0 {
		in.storageClass = env.NewStorage(t, o.volumes)
		sets = append(sets, o.storageSet+"="+in.storageClass)
	}

	// The configuration the chart renders tells whether routing is on and
	// every name derived from the release (the same function the driver
	// runs, which TestNamesAgree checks).
	out, err := renderAs(t, in.release, in.namespace, files, append(slices.Clone(sets), "gatewayRouting.gatewayClassName=any")...)
	if err != nil {
		t.Fatal(err)
	}
	_, in.kc = occConfig(t, objects(t, out), in.fullname+"-config")

	create := func(obj client.Object) {
		t.Helper()
		if err := env.Client.Create(ctx, obj); err != nil {
			t.Fatalf("create %T %s: %v", obj, obj.GetName(), err)
		}
	}
	// The database URL is never used: no container runs on kwok, and the
	// occ processes of TestDeployWithWorkerToken get their database from
	// the test. The Secret must exist for the Pods to be admissible.
	create(&corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: databaseSecretName, Namespace: in.namespace},
		StringData: map[string]string{"url": "postgres://occ@db.invalid:5432/occ"},
	})
	if r := in.kc.GatewayRouting; r != nil {
		in.key = serviceKey(t)
		create(serviceKeySecret(in.namespace, apiKeySecretName, in.key))
		in.class = testkube.RandomName("occt-eg")
		gc := &gwv1.GatewayClass{
			ObjectMeta: metav1.ObjectMeta{Name: in.class},
			Spec:       gwv1.GatewayClassSpec{ControllerName: egControllerName},
		}
		create(gc)
		t.Cleanup(func() { deleteObject(t, env, gc) })
		sets = append(sets, "gatewayRouting.gatewayClassName="+in.class)

		// What cert-manager would have issued for the chart's Certificates
		// (gateway-routing.yaml) had its controller run here: the root CA
		// (Certificate occ-gateway-<routeLabel>-root, self-signed, ECDSA
		// P-256) in occ-gateway-<routeLabel>-root, and the listener
		// certificate for the derived hostname, signed by that root, in
		// <gatewayName>-tls. The test creates both Secrets in its place.
		in.ca = newTestCA(t, r.EnvoyServiceName()+"-root")
		create(in.ca.rootSecret(t, in.namespace, r.EnvoyServiceName()+"-root"))
		create(in.ca.leafSecret(t, in.namespace, r.GatewayName+"-tls", r.Host()))
	}

	// Registered after the namespace's deletion, so it runs before it.
	t.Cleanup(func() {
		ctx := cleanupCtx(t, 3*time.Minute)
		if t.Failed() {
			t.Logf("release namespace %s at the end:\n%s", in.namespace, describe(ctx, env, in.namespace))
		}
		if _, err := testkube.RunHelm(t, ctx, "uninstall", in.release, "--namespace", in.namespace,
			"--kubeconfig", env.Kubeconfig, "--wait", "--timeout", "2m"); err != nil {
			t.Errorf("helm uninstall: %v", err)
		}
	})
	start := time.Now()
	installArgs := append([]string{"install", in.release, chartDir, "--namespace", in.namespace,
		"--kubeconfig", env.Kubeconfig, "--wait", "--timeout", "4m"}, args...)
	if _, err := testkube.RunHelm(t, ctx, append(installArgs, setArgs(sets)...)...); err != nil {
		t.Fatalf("helm install: %v\nrelease namespace:\n%s", err, describe(ctx, env, in.namespace))
	}
	t.Logf("helm install --wait of %s in %s took %v", in.release, in.namespace, time.Since(start).Round(time.Millisecond))
	return in
}

// setArgs are --set arguments, or --set-json for those prefixed "json:"
// (as in renderAs).
func setArgs(sets []string) []string {
	var out []string
	for _, s := range sets {
		if j, ok := strings.CutPrefix(s, "json:"); ok {
			out = append(out, "--set-json", j)
		} else {
			out = append(out, "--set", s)
		}
	}
	return out
}

// describe lists a namespace's Pods and Jobs with their states, for the
// log of a failed test.
func describe(ctx context.Context, env *testkube.Cluster, namespace string) string {
	var b strings.Builder
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(namespace)); err != nil {
		return err.Error()
	}
	for _, p := range pods.Items {
		fmt.Fprintf(&b, "  Pod %s: %s", p.Name, p.Status.Phase)
		for _, c := range p.Status.Conditions {
			fmt.Fprintf(&b, " %s=%s", c.Type, c.Status)
			if c.Message != "" {
				fmt.Fprintf(&b, " (%s)", c.Message)
			}
		}
		b.WriteString("\n")
	}
	var events corev1.EventList
	if err := env.Client.List(ctx, &events, client.InNamespace(namespace)); err == nil {
		for _, e := range events.Items {
			if e.Type != corev1.EventTypeNormal {
				fmt.Fprintf(&b, "  Event %s %s/%s: %s: %s\n", e.Type, e.InvolvedObject.Kind, e.InvolvedObject.Name, e.Reason, e.Message)
			}
		}
	}
	return b.String()
}

// deploymentReady reports whether the Deployment rolled out its one
// replica.
func deploymentReady(d *appsv1.Deployment) bool {
	return d.Status.ObservedGeneration == d.Generation && d.Status.ReadyReplicas == 1 && d.Status.AvailableReplicas == 1
}

// TestInstall installs the chart as seed 003 does (PostgreSQL from an
// existing Secret, routing with the chart's own CA) and checks that the
// API and worker run as their ServiceAccounts and that the real Envoy
// Gateway controller accepts the chart's Gateway and SecurityPolicy.
//
// helm install --wait also waits for the pre-install migration Job: kwok's
// pod-complete stage (pod/general, loaded by k8s.sh) moves a Running
// Pod owned by a Job to Succeeded, so the Job completes as if occ
// migrate had run, and helm removes it (hook-succeeded).
func TestInstall(t *testing.T) {
	in := installChart(t, installOptions{values: []string{"routing-auto-ca"}, sets: []string{"podDisruptionBudget.enabled=true"}})
	env, ctx := in.env, testCtx(t, 3*time.Minute)
	r := in.kc.GatewayRouting

	t.Run("API and worker run as their ServiceAccounts", func(t *testing.T) {
		got := map[string]string{}
		for _, name := range []string{in.fullname + "-api", in.fullname + "-worker"} {
			var d appsv1.Deployment
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: name}, &d); err != nil {
				t.Fatal(err)
			}
			if !deploymentReady(&d) {
				t.Errorf("Deployment %s not ready after helm install --wait: %+v", name, d.Status)
			}
			got[name] = d.Spec.Template.Spec.ServiceAccountName
		}
		want := map[string]string{in.fullname + "-api": in.apiSA(), in.fullname + "-worker": in.workerSA()}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("ServiceAccounts (-want +got):\n%s", diff)
		}
		// hook-succeeded: helm deletes the Job once it completed.
		var job batchv1.Job
		err := env.Client.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: in.fullname + "-migrate"}, &job)
		if err == nil && job.DeletionTimestamp == nil {
			t.Errorf("the migration hook Job is still there after a successful install: %+v", job.Status)
		} else if err != nil && !apierrors.IsNotFound(err) {
			t.Error(err)
		}
	})

	t.Run("Envoy Gateway accepts the Gateway and the SecurityPolicy", func(t *testing.T) {
		start := time.Now()
		var gw gwv1.Gateway
		testkube.WaitFor(t, ctx, func() (bool, error) {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: r.GatewayName}, &gw); err != nil {
				return false, err
			}
			if !meta.IsStatusConditionTrue(gw.Status.Conditions, string(gwv1.GatewayConditionAccepted)) {
				return false, nil
			}
			// The listener takes the certificate Secret (the one
			// cert-manager would issue) and the HTTPRoute kind.
			for _, l := range gw.Status.Listeners {
				if l.Name == "https" {
					return meta.IsStatusConditionTrue(l.Conditions, string(gwv1.ListenerConditionResolvedRefs)) &&
						meta.IsStatusConditionTrue(l.Conditions, string(gwv1.ListenerConditionAccepted)), nil
				}
			}
			return false, nil
		})
		t.Logf("Gateway %s Accepted after %v; conditions %s", gw.Name, time.Since(start).Round(time.Millisecond), conditions(gw.Status.Conditions))

		var sp egv1a1.SecurityPolicy
		testkube.WaitFor(t, ctx, func() (bool, error) {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: r.GatewayName + "-api-key"}, &sp); err != nil {
				return false, err
			}
			for _, a := range sp.Status.Ancestors {
				if string(a.ControllerName) == egControllerName && string(a.AncestorRef.Name) == r.GatewayName &&
					meta.IsStatusConditionTrue(a.Conditions, string(gwv1.PolicyConditionAccepted)) {
					return true, nil
				}
			}
			return false, nil
		})
		t.Logf("SecurityPolicy %s Accepted after %v", sp.Name, time.Since(start).Round(time.Millisecond))
	})

	t.Run("each Deployment's PodDisruptionBudget allows one eviction", func(t *testing.T) {
		waitBudgets(t, ctx, in, in.fullname+"-api", in.fullname+"-worker")
	})
}

// waitBudgets waits until the disruption controller has counted the one
// Ready Pod of each named PodDisruptionBudget's Deployment and allows its
// eviction (maxUnavailable 1, or a percentage, of one replica), so a drain
// would not wait.
func waitBudgets(t *testing.T, ctx context.Context, in *installation, names ...string) {
	t.Helper()
	for _, name := range names {
		var pdb policyv1.PodDisruptionBudget
		testkube.WaitFor(t, ctx, func() (bool, error) {
			if err := in.env.Client.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: name}, &pdb); err != nil {
				return false, err
			}
			st := pdb.Status
			return st.ObservedGeneration == pdb.Generation && st.ExpectedPods == 1 && st.CurrentHealthy == 1 &&
				st.DesiredHealthy == 0 && st.DisruptionsAllowed == 1, nil
		})
	}
}

func conditions(cs []metav1.Condition) string {
	var parts []string
	for _, c := range cs {
		parts = append(parts, c.Type+"="+string(c.Status))
	}
	return strings.Join(parts, ", ")
}

// TestInstallSQLite installs the evaluation mode: one API replica that
// embeds the worker (so it runs as the worker's ServiceAccount), the
// database on a PVC, no worker Deployment and no migration Job.
func TestInstallSQLite(t *testing.T) {
	in := installChart(t, installOptions{
		values: []string{"routing-off"},
		// Metrics on: the metrics Service must resolve to the API Pod's
		// named port on a real API server (kwok gives the Pod an IP).
		// A PodDisruptionBudget as a percentage: the API server takes the
		// string, and 50% of one replica still lets its Pod be evicted.
		sets: []string{"database.mode=sqlite", "database.existingSecret=", "metrics.enabled=true",
			`json:networkPolicy.metricsIngressFrom=[{"namespaceSelector":{"matchLabels":{"kubernetes.io/metadata.name":"monitoring"}}}]`,
			"podDisruptionBudget.enabled=true", "podDisruptionBudget.maxUnavailable=50%"},
		volumes: 1, storageSet: "database.sqlite.storageClassName",
	})
	env, ctx := in.env, testCtx(t, time.Minute)
	var api appsv1.Deployment
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: in.fullname + "-api"}, &api); err != nil {
		t.Fatal(err)
	}
	var pvc corev1.PersistentVolumeClaim
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: in.fullname + "-data"}, &pvc); err != nil {
		t.Fatal(err)
	}
	var deployments appsv1.DeploymentList
	if err := env.Client.List(ctx, &deployments, client.InNamespace(in.namespace)); err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, d := range deployments.Items {
		names = append(names, d.Name)
	}
	var embedded string
	for _, e := range api.Spec.Template.Spec.Containers[0].Env {
		if e.Name == "OCC_EMBEDDED_WORKER" {
			embedded = e.Value
		}
	}
	got := map[string]any{
		"Deployments":         names,
		"API ready":           deploymentReady(&api),
		"API ServiceAccount":  api.Spec.Template.Spec.ServiceAccountName,
		"OCC_EMBEDDED_WORKER": embedded,
		"PVC phase":           pvc.Status.Phase,
	}
	want := map[string]any{
		"Deployments":         []string{in.fullname + "-api"},
		"API ready":           true,
		"API ServiceAccount":  in.workerSA(),
		"OCC_EMBEDDED_WORKER": "true",
		"PVC phase":           corev1.ClaimBound,
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("sqlite installation (-want +got):\n%s", diff)
	}

	// The EndpointSlice controller resolves the metrics Service to the API
	// Pod's port "metrics", 9464.
	var endpoints string
	testkube.WaitFor(t, ctx, func() (bool, error) {
		var slices discoveryv1.EndpointSliceList
		if err := env.Client.List(ctx, &slices, client.InNamespace(in.namespace),
			client.MatchingLabels{discoveryv1.LabelServiceName: in.fullname + "-api-metrics"}); err != nil {
			return false, err
		}
		for _, s := range slices.Items {
			for _, p := range s.Ports {
				for _, e := range s.Endpoints {
					if ptr.Deref(p.Name, "") == "metrics" && ptr.Deref(p.Port, 0) == 9464 && ptr.Deref(e.Conditions.Ready, false) && len(e.Addresses) > 0 {
						endpoints = fmt.Sprintf("%s:%d", e.Addresses[0], *p.Port)
						return true, nil
					}
				}
			}
		}
		return false, nil
	})
	t.Logf("metrics Service endpoint %s", endpoints)

	// The API's one Pod may be evicted, as a node drain would.
	waitBudgets(t, ctx, in, in.fullname+"-api")
	var pods corev1.PodList
	if err := env.Client.List(ctx, &pods, client.InNamespace(in.namespace), client.MatchingLabels(api.Spec.Selector.MatchLabels)); err != nil || len(pods.Items) != 1 {
		t.Fatalf("API Pods: %d, %v; want 1", len(pods.Items), err)
	}
	if err := env.Client.SubResource("eviction").Create(ctx, &pods.Items[0], &policyv1.Eviction{
		ObjectMeta: metav1.ObjectMeta{Name: pods.Items[0].Name, Namespace: in.namespace},
	}); err != nil {
		t.Errorf("evict the API's one Pod under maxUnavailable 50%%: %v", err)
	}
}

// serviceAccount is a chart ServiceAccount with a real token from the
// TokenRequest API, as its Pod would mount it.
type serviceAccount struct {
	namespace, name string
	token           string
	config          *rest.Config // the test API server with only that token
	client          client.Client
}

func (s *serviceAccount) user() string {
	return "system:serviceaccount:" + s.namespace + ":" + s.name
}

func (s *serviceAccount) groups() []string {
	return []string{"system:serviceaccounts", "system:serviceaccounts:" + s.namespace, "system:authenticated"}
}

// tokenFor requests a one-hour token for the ServiceAccount and builds a
// client that authenticates with it alone (no client certificate).
func tokenFor(t *testing.T, env *testkube.Cluster, namespace, name string) *serviceAccount {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	cs, err := kubernetes.NewForConfig(env.Config)
	if err != nil {
		t.Fatal(err)
	}
	tr, err := cs.CoreV1().ServiceAccounts(namespace).CreateToken(ctx, name, &authenticationv1.TokenRequest{
		Spec: authenticationv1.TokenRequestSpec{ExpirationSeconds: ptr.To[int64](3600)},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", namespace, name, err)
	}
	cfg := &rest.Config{
		Host:            env.Config.Host,
		TLSClientConfig: rest.TLSClientConfig{CAFile: env.Config.CAFile, CAData: env.Config.CAData},
		BearerToken:     tr.Status.Token,
		Timeout:         30 * time.Second,
	}
	c, err := client.New(cfg, client.Options{Scheme: testkube.Scheme()})
	if err != nil {
		t.Fatal(err)
	}
	return &serviceAccount{namespace: namespace, name: name, token: tr.Status.Token, config: cfg, client: c}
}

// access is one request a SubjectAccessReview asks about. scope is
// "cluster" (cluster-scoped resources, or all namespaces for namespaced
// ones), "release", "tenant" or "default"; the test maps it to a
// namespace.
type access struct {
	verb, group, resource, subresource, name, scope string
}

func (a access) String() string {
	r := a.resource
	if a.group != "" {
		r = a.group + "/" + r
	}
	if a.subresource != "" {
		r += "/" + a.subresource
	}
	if a.name != "" {
		r += " " + a.name
	}
	return a.verb + " " + r + " @" + a.scope
}

// allowedFor asks the API server's authorizer (RBAC) whether sa may do a.
func allowedFor(t *testing.T, ctx context.Context, env *testkube.Cluster, sa *serviceAccount, scopes map[string]string, a access) bool {
	t.Helper()
	ns, ok := scopes[a.scope]
	if !ok {
		t.Fatalf("unknown scope %q", a.scope)
	}
	sar := &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
		User: sa.user(), Groups: sa.groups(),
		ResourceAttributes: &authorizationv1.ResourceAttributes{
			Namespace: ns, Verb: a.verb, Group: a.group, Resource: a.resource, Subresource: a.subresource, Name: a.name,
		},
	}}
	if err := env.Client.Create(ctx, sar); err != nil {
		t.Fatalf("SubjectAccessReview %s: %v", a, err)
	}
	if sar.Status.EvaluationError != "" {
		t.Errorf("SubjectAccessReview %s: evaluation error %s", a, sar.Status.EvaluationError)
	}
	return sar.Status.Allowed
}

// TestRBAC checks the chart's RBAC and admission policy on the real API
// server (RBAC authorization on): the API's ServiceAccount can write
// nothing and read no Secret; the worker's can do what a deployment needs
// and no more, which with imagePullSecrets includes reading exactly those
// Secrets of the release namespace, enough for the driver to copy them
// into a tenant namespace with its token; and, with the worker's real
// token, the ValidatingAdmissionPolicy narrows its cluster-wide namespace
// and RoleBinding verbs to the namespaces OCC manages and the one
// RoleBinding the driver applies; and with that token the driver replaces
// a RoleBinding left binding a renamed tenant role.
func TestRBAC(t *testing.T) {
	const pullSecret = "occt-regcred"
	in := installChart(t, installOptions{values: []string{"routing-auto-ca"}, sets: []string{"imagePullSecrets[0].name=" + pullSecret}})
	env, ctx := in.env, testCtx(t, 3*time.Minute)
	worker := tokenFor(t, env, in.namespace, in.workerSA())
	api := tokenFor(t, env, in.namespace, in.apiSA())
	tenantRole := in.kc.TenantAccess.ClusterRole
	policy := in.policyName()

	// The tenant namespace, created by the driver with the worker's token:
	// the namespace, then the RoleBinding of the tenant role, then the
	// NetworkPolicies (which only that binding allows). This is the
	// admission policy's allowed path. The RBAC authorizer learns of the
	// new binding from its informer, so the first NetworkPolicy may be
	// refused for a moment; the worker retries such errors, and so does
	// the test.
	d, err := kube.New(in.kc, worker.client, kube.Options{CallTimeout: 20 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	ns := compute.Namespace{ID: ids.New(ids.Namespace), Name: "rbac"}
	tenant := kube.TenantNamespace(ns.ID)
	t.Cleanup(func() {
		// Deleting a namespace it manages is the worker's to do, too.
		if err := d.DeleteNamespace(cleanupCtx(t, time.Minute), ns); err != nil {
			t.Errorf("DeleteNamespace with the worker's token: %v", err)
			deleteObject(t, env, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}})
		}
	})
	var lastErr error
	testkube.WaitFor(t, ctx, func() (bool, error) {
		lastErr = d.EnsureNamespace(ctx, ns)
		return lastErr == nil, nil
	})
	scopes := map[string]string{"cluster": "", "release": in.namespace, "tenant": tenant, "default": "default"}

	t.Run("the API's ServiceAccount can write nothing", func(t *testing.T) {
		type res struct{ group, resource string }
		namespaced := []res{{"", "secrets"}, {"", "configmaps"}, {"apps", "deployments"}, {"", "services"},
			{gwv1.GroupName, "httproutes"}, {rbacv1.GroupName, "rolebindings"}}
		clusterScoped := []res{{"", "namespaces"}, {rbacv1.GroupName, "clusterroles"}}
		var checks []access
		for _, verb := range []string{"create", "update", "patch", "delete"} {
			for _, r := range namespaced {
				for _, scope := range []string{"release", "tenant", "cluster"} {
					checks = append(checks, access{verb: verb, group: r.group, resource: r.resource, scope: scope})
				}
			}
			for _, r := range clusterScoped {
				checks = append(checks, access{verb: verb, group: r.group, resource: r.resource, scope: "cluster"})
			}
		}
		for _, verb := range []string{"get", "list", "watch"} {
			for _, scope := range []string{"release", "tenant", "cluster"} {
				checks = append(checks, access{verb: verb, resource: "secrets", scope: scope})
			}
		}
		checks = append(checks, access{verb: "get", resource: "secrets", name: pullSecret, scope: "release"})
		got, want := map[string]bool{}, map[string]bool{}
		for _, a := range checks {
			got[a.String()] = allowedFor(t, ctx, env, api, scopes, a)
			want[a.String()] = false
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the API's ServiceAccount %s (-want +got):\n%s", api.user(), diff)
		}
		// And with its real token: the service key's Secret is not readable.
		var s corev1.Secret
		if err := api.client.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: apiKeySecretName}, &s); !apierrors.IsForbidden(err) {
			t.Errorf("reading the service-key Secret with the API's token: %v, want Forbidden", err)
		}
	})

	t.Run("the worker's ServiceAccount: what a deployment needs and no more", func(t *testing.T) {
		type check struct {
			access
			want bool
		}
		var checks []check
		allow := func(a access) { checks = append(checks, check{a, true}) }
		deny := func(a access) { checks = append(checks, check{a, false}) }
		for _, v := range []string{"get", "create", "patch", "delete"} {
			allow(access{verb: v, resource: "namespaces", scope: "cluster"})
		}
		for _, v := range []string{"list", "watch", "update", "deletecollection"} {
			deny(access{verb: v, resource: "namespaces", scope: "cluster"})
		}
		// RBAC cannot name a namespace that does not exist yet, so these
		// two hold cluster-wide; the admission policy narrows them (the
		// next subtest).
		allow(access{verb: "create", group: rbacv1.GroupName, resource: "rolebindings", scope: "cluster"})
		allow(access{verb: "bind", group: rbacv1.GroupName, resource: "clusterroles", name: tenantRole, scope: "tenant"})
		// Delete only the driver's own RoleBinding, which it replaces when
		// the tenant role's name changes (a roleRef cannot change).
		allow(access{verb: "delete", group: rbacv1.GroupName, resource: "rolebindings", name: kube.TenantAccessBinding, scope: "tenant"})
		deny(access{verb: "delete", group: rbacv1.GroupName, resource: "rolebindings", name: "admin", scope: "tenant"})
		for _, v := range []string{"update", "delete", "deletecollection"} {
			deny(access{verb: v, group: rbacv1.GroupName, resource: "rolebindings", scope: "tenant"})
		}
		for _, role := range []string{"cluster-admin", "admin", "edit", strings.TrimSuffix(tenantRole, "-tenant") + "-worker"} {
			deny(access{verb: "bind", group: rbacv1.GroupName, resource: "clusterroles", name: role, scope: "tenant"})
		}
		deny(access{verb: "escalate", group: rbacv1.GroupName, resource: "clusterroles", name: tenantRole, scope: "cluster"})
		for _, v := range []string{"create", "patch", "delete"} {
			deny(access{verb: v, group: rbacv1.GroupName, resource: "clusterroles", scope: "cluster"})
			deny(access{verb: v, group: rbacv1.GroupName, resource: "clusterrolebindings", scope: "cluster"})
			deny(access{verb: v, group: rbacv1.GroupName, resource: "roles", scope: "tenant"})
			deny(access{verb: v, group: "admissionregistration.k8s.io", resource: "validatingadmissionpolicies", scope: "cluster"})
			deny(access{verb: v, group: "admissionregistration.k8s.io", resource: "validatingadmissionpolicybindings", scope: "cluster"})
		}
		// In a tenant namespace, through the RoleBinding occ-worker: the
		// driver's objects, read and written with server-side apply
		// (patch), never update.
		for _, r := range []struct{ group, resource string }{
			{"", "configmaps"}, {"", "secrets"}, {"", "persistentvolumeclaims"}, {"", "services"},
			{"apps", "deployments"}, {"networking.k8s.io", "networkpolicies"}, {gwv1.GroupName, "httproutes"},
		} {
			for _, v := range []string{"get", "list", "create", "patch", "delete"} {
				allow(access{verb: v, group: r.group, resource: r.resource, scope: "tenant"})
			}
			deny(access{verb: "update", group: r.group, resource: r.resource, scope: "tenant"})
			// Outside tenant namespaces, nothing of it.
			for _, scope := range []string{"release", "default", "cluster"} {
				for _, v := range []string{"get", "create", "patch"} {
					deny(access{verb: v, group: r.group, resource: r.resource, scope: scope})
				}
			}
		}
		for _, v := range []string{"get", "list"} {
			allow(access{verb: v, resource: "pods", scope: "tenant"})
		}
		// The image pull Secret of imagePullSecrets, which the driver
		// copies into tenant namespaces: get, by name, in the release
		// namespace only; no other Secret there.
		allow(access{verb: "get", resource: "secrets", name: pullSecret, scope: "release"})
		for _, v := range []string{"list", "watch", "update", "patch", "delete"} {
			deny(access{verb: v, resource: "secrets", name: pullSecret, scope: "release"})
		}
		deny(access{verb: "get", resource: "secrets", name: apiKeySecretName, scope: "release"})
		deny(access{verb: "get", resource: "secrets", name: databaseSecretName, scope: "release"})
		deny(access{verb: "get", resource: "secrets", name: pullSecret, scope: "default"})
		deny(access{verb: "get", resource: "secrets", name: pullSecret, scope: "cluster"})
		for _, a := range []access{
			{verb: "create", resource: "pods", scope: "tenant"},
			{verb: "delete", resource: "pods", scope: "tenant"},
			{verb: "create", resource: "pods", subresource: "exec", scope: "tenant"},
			{verb: "get", resource: "pods", subresource: "exec", scope: "tenant"},
			{verb: "create", resource: "pods", subresource: "portforward", scope: "tenant"},
			{verb: "get", resource: "pods", subresource: "log", scope: "tenant"},
			{verb: "create", resource: "pods", subresource: "exec", scope: "release"},
			{verb: "create", resource: "serviceaccounts", subresource: "token", scope: "release"},
			{verb: "create", resource: "serviceaccounts", scope: "tenant"},
			{verb: "get", resource: "nodes", scope: "cluster"},
			{verb: "list", resource: "nodes", scope: "cluster"},
			{verb: "patch", resource: "nodes", scope: "cluster"},
			{verb: "create", resource: "persistentvolumes", scope: "cluster"},
			{verb: "patch", group: gwv1.GroupName, resource: "gateways", scope: "release"},
			{verb: "patch", group: "gateway.envoyproxy.io", resource: "securitypolicies", scope: "release"},
			{verb: "create", group: "apiextensions.k8s.io", resource: "customresourcedefinitions", scope: "cluster"},
			{verb: "impersonate", resource: "serviceaccounts", scope: "release"},
		} {
			deny(a)
		}
		got, want := map[string]bool{}, map[string]bool{}
		for _, c := range checks {
			got[c.String()] = allowedFor(t, ctx, env, worker, scopes, c.access)
			want[c.String()] = c.want
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("the worker's ServiceAccount %s (-want +got):\n%s", worker.user(), diff)
		}
	})

	t.Run("the worker copies the image pull Secret with its token", func(t *testing.T) {
		if diff := cmp.Diff([]string{pullSecret}, in.kc.Runtime.ImagePullSecrets); diff != "" || in.kc.Runtime.ImagePullSecretsNamespace != in.namespace {
			t.Fatalf("the rendered configuration's image pull Secrets: %v in %q, want [%s] in %s", in.kc.Runtime.ImagePullSecrets, in.kc.Runtime.ImagePullSecretsNamespace, pullSecret, in.namespace)
		}
		src := &corev1.Secret{
			ObjectMeta: metav1.ObjectMeta{Name: pullSecret, Namespace: in.namespace},
			Type:       corev1.SecretTypeDockerConfigJson,
			Data:       map[string][]byte{corev1.DockerConfigJsonKey: []byte(`{"auths":{"registry.example":{"auth":"` + hex.EncodeToString(serviceKey(t)) + `"}}}`)},
		}
		if err := env.Client.Create(ctx, src); err != nil {
			t.Fatal(err)
		}
		rev := compute.Revision{
			ID: ids.New(ids.Revision), NamespaceID: ns.ID, AgentID: ids.New(ids.Agent), AgentName: "pull", Number: 1,
			ConfigurationID: ids.New(ids.Configuration), ConfigurationGeneration: 1, Configuration: []byte(`{}`),
		}
		// The first answer is pending (no Pod is ready yet), not an error.
		if res, err := d.PrepareRevision(ctx, rev, compute.RevisionContext{}); err != nil {
			t.Fatalf("PrepareRevision with the worker's token: %v", err)
		} else if res.PendingReason == kube.PendingKubernetesAPIUnavailable {
			t.Fatalf("PrepareRevision with the worker's token: %+v", res)
		}
		var cp corev1.Secret
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: kube.ImagePullSecretName(pullSecret)}, &cp); err != nil {
			t.Fatalf("the copy in the tenant namespace: %v", err)
		}
		if cp.Type != src.Type || !cmp.Equal(cp.Data, src.Data) {
			t.Errorf("the copy %s/%s has type %q and other data than its source (type %q)", tenant, cp.Name, cp.Type, src.Type)
		}
	})

	t.Run("the admission policy confines the worker's token", func(t *testing.T) {
		// A ClusterRole the worker holds every permission of in a tenant
		// namespace (through the tenant role), so RBAC's escalation check
		// lets it bind it there and only the policy can say no.
		subset := &rbacv1.ClusterRole{
			ObjectMeta: metav1.ObjectMeta{Name: testkube.RandomName("occt-configmap-reader")},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get"}}},
		}
		if err := env.Client.Create(ctx, subset); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteObject(t, env, subset) })

		binding := func(namespace, role string, subject rbacv1.Subject) *rbacv1.RoleBinding {
			return &rbacv1.RoleBinding{
				ObjectMeta: metav1.ObjectMeta{Name: testkube.RandomName("occt-binding"), Namespace: namespace},
				RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role},
				Subjects:   []rbacv1.Subject{subject},
			}
		}
		self := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: worker.name, Namespace: worker.namespace}
		apiSubject := rbacv1.Subject{Kind: rbacv1.ServiceAccountKind, Name: api.name, Namespace: api.namespace}
		labels := func(l map[string]string) client.Patch {
			b, err := json.Marshal(map[string]any{"metadata": map[string]any{"labels": l}})
			if err != nil {
				t.Fatal(err)
			}
			return client.RawPatch(types.MergePatchType, b)
		}
		nsObj := func(name string, l map[string]string) *corev1.Namespace {
			return &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: l}}
		}
		managed := map[string]string{kube.LabelManagedBy: kube.ManagedBy}
		c := worker.client
		dry := client.DryRunAll

		// The driver's own shape of a tenant namespace that does not exist
		// yet, and variations of it the policy must refuse.
		const psaEnforce = "pod-security.kubernetes.io/enforce"
		driverShape := func(edit func(*corev1.Namespace)) *corev1.Namespace {
			n, _ := kube.RenderNamespace(in.kc, compute.Namespace{ID: ids.New(ids.Namespace), Name: "shape"})
			if edit != nil {
				edit(n)
			}
			return n
		}
		// A namespace an administrator labelled managed-by whose name is not
		// a tenant namespace's: the worker may not delete it or bind there.
		foreign := nsObj(testkube.RandomName("occt-managed"), managed)
		if err := env.Client.Create(ctx, foreign); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { deleteObject(t, env, foreign) })

		// The policy's bindings reach the API server's admission through
		// an informer too; until it denies the first case, the table would
		// test nothing.
		start := time.Now()
		testkube.WaitFor(t, ctx, func() (bool, error) {
			err := c.Create(ctx, nsObj(testkube.RandomName("occt-unmanaged"), nil), client.DryRunAll)
			return err != nil && strings.Contains(err.Error(), policy), nil
		})
		t.Logf("the admission policy denies after %v", time.Since(start).Round(time.Millisecond))

		tests := []struct {
			name string
			do   func() error
			want string
		}{
			{"create a namespace without the managed-by label", func() error {
				return c.Create(ctx, nsObj(testkube.RandomName("occt-unmanaged"), nil), dry)
			}, deniedByPolicy},
			{"create a namespace of another name labelled managed-by openclaw-enterprise", func() error {
				return c.Create(ctx, nsObj(testkube.RandomName("occt-managed"), managed), dry)
			}, deniedByPolicy},
			{"create a tenant namespace as the driver renders it", func() error {
				return c.Create(ctx, driverShape(nil), dry)
			}, allowed},
			{"create the driver's namespace under another name", func() error {
				return c.Create(ctx, driverShape(func(n *corev1.Namespace) { n.Name = testkube.RandomName("occt-managed") }), dry)
			}, deniedByPolicy},
			{"create the driver's namespace with the name of a tenant namespace and a suffix", func() error {
				return c.Create(ctx, driverShape(func(n *corev1.Namespace) { n.Name += "-x" }), dry)
			}, deniedByPolicy},
			{"create the driver's namespace with Pod Security enforce=privileged", func() error {
				return c.Create(ctx, driverShape(func(n *corev1.Namespace) { n.Labels[psaEnforce] = "privileged" }), dry)
			}, deniedByPolicy},
			{"create the driver's namespace without the Pod Security label", func() error {
				return c.Create(ctx, driverShape(func(n *corev1.Namespace) { delete(n.Labels, psaEnforce) }), dry)
			}, deniedByPolicy},
			{"create the driver's namespace with Pod Security enforce-version pinned", func() error {
				return c.Create(ctx, driverShape(func(n *corev1.Namespace) { n.Labels[psaEnforce+"-version"] = "v1.0" }), dry)
			}, deniedByPolicy},
			{"create the driver's namespace with Pod Security warn=baseline", func() error {
				return c.Create(ctx, driverShape(func(n *corev1.Namespace) { n.Labels["pod-security.kubernetes.io/warn"] = "baseline" }), dry)
			}, allowed},
			{"adopt the default namespace (label it managed-by openclaw-enterprise)", func() error {
				return c.Patch(ctx, nsObj("default", nil), labels(managed), dry)
			}, deniedByPolicy},
			{"label the default namespace", func() error {
				return c.Patch(ctx, nsObj("default", nil), labels(map[string]string{"example.com/x": "y"}), dry)
			}, deniedByPolicy},
			{"delete the release namespace", func() error {
				return c.Delete(ctx, nsObj(in.namespace, nil), dry)
			}, deniedByPolicy},
			{"take the managed-by label off a tenant namespace", func() error {
				return c.Patch(ctx, nsObj(tenant, nil), labels(map[string]string{kube.LabelManagedBy: "someone-else"}), dry)
			}, deniedByPolicy},
			{"label a tenant namespace it manages", func() error {
				return c.Patch(ctx, nsObj(tenant, nil), labels(map[string]string{"example.com/x": "y"}), dry)
			}, allowed},
			{"patch a tenant namespace to Pod Security enforce=privileged", func() error {
				return c.Patch(ctx, nsObj(tenant, nil), labels(map[string]string{psaEnforce: "privileged"}), dry)
			}, deniedByPolicy},
			{"take the Pod Security label off a tenant namespace", func() error {
				return c.Patch(ctx, nsObj(tenant, nil), client.RawPatch(types.MergePatchType, []byte(`{"metadata":{"labels":{"`+psaEnforce+`":null}}}`)), dry)
			}, deniedByPolicy},
			{"pin a tenant namespace's Pod Security enforce-version", func() error {
				return c.Patch(ctx, nsObj(tenant, nil), labels(map[string]string{psaEnforce + "-version": "v1.0"}), dry)
			}, deniedByPolicy},
			{"delete a managed namespace that is not a tenant namespace", func() error {
				return c.Delete(ctx, nsObj(foreign.Name, nil), dry)
			}, deniedByPolicy},
			{"bind the tenant role to itself in a managed namespace that is not a tenant namespace", func() error {
				return c.Create(ctx, binding(foreign.Name, tenantRole, self), dry)
			}, deniedByPolicy},
			{"bind the tenant role to itself in default", func() error {
				return c.Create(ctx, binding("default", tenantRole, self), dry)
			}, deniedByPolicy},
			{"bind the tenant role to itself in the release namespace (the service key's)", func() error {
				return c.Create(ctx, binding(in.namespace, tenantRole, self), dry)
			}, deniedByPolicy},
			{"bind the tenant role to the API's ServiceAccount in a tenant namespace", func() error {
				return c.Create(ctx, binding(tenant, tenantRole, apiSubject), dry)
			}, deniedByPolicy},
			{"bind another role it holds in a tenant namespace", func() error {
				return c.Create(ctx, binding(tenant, subset.Name, self), dry)
			}, deniedByPolicy},
			{"bind cluster-admin in a tenant namespace", func() error {
				return c.Create(ctx, binding(tenant, "cluster-admin", self), dry)
			}, deniedByRBAC},
			{"bind the tenant role to itself in a tenant namespace", func() error {
				return c.Create(ctx, binding(tenant, tenantRole, self), dry)
			}, allowed},
			{"create a ConfigMap in the tenant namespace", func() error {
				return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "occt-probe", Namespace: tenant}})
			}, allowed},
			{"create a ConfigMap in the release namespace", func() error {
				return c.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "occt-probe", Namespace: in.namespace}}, dry)
			}, deniedByRBAC},
			{"read the service-key Secret", func() error {
				return c.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: apiKeySecretName}, &corev1.Secret{})
			}, deniedByRBAC},
		}
		got, want := map[string]string{}, map[string]string{}
		for _, tt := range tests {
			got[tt.name] = outcome(tt.do(), policy)
			want[tt.name] = tt.want
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("requests with the worker's token (-want +got):\n%s", diff)
		}
	})

	t.Run("the worker replaces its binding of a renamed tenant role with its token", func(t *testing.T) {
		// What an upgrade that renames the tenant ClusterRole leaves in a
		// tenant namespace: OCC's RoleBinding of a role that is gone.
		key := client.ObjectKey{Namespace: tenant, Name: kube.TenantAccessBinding}
		var rb rbacv1.RoleBinding
		if err := env.Client.Get(ctx, key, &rb); err != nil {
			t.Fatal(err)
		}
		if err := env.Client.Delete(ctx, &rb); err != nil {
			t.Fatal(err)
		}
		stale := &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: rb.Name, Namespace: tenant, Labels: rb.Labels, Annotations: rb.Annotations},
			RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: testkube.RandomName("occt-old-tenant")},
			Subjects:   rb.Subjects,
		}
		if err := env.Client.Create(ctx, stale); err != nil {
			t.Fatal(err)
		}
		// The new binding reaches the RBAC authorizer through its
		// informer, so the NetworkPolicies after it may be refused for a
		// moment; any other error fails at once.
		testkube.WaitFor(t, ctx, func() (bool, error) {
			err := d.EnsureNamespace(ctx, ns)
			if apierrors.IsForbidden(err) && strings.Contains(err.Error(), "networkpolicies") {
				return false, nil
			}
			return err == nil, err
		})
		var got rbacv1.RoleBinding
		if err := env.Client.Get(ctx, key, &got); err != nil {
			t.Fatal(err)
		}
		if got.RoleRef.Name != tenantRole || got.UID == stale.UID {
			t.Errorf("RoleBinding %s binds %s (UID %s), want %s in a new object (the stale one was %s)", key, got.RoleRef.Name, got.UID, tenantRole, stale.UID)
		}
	})
	if lastErr != nil {
		t.Logf("last EnsureNamespace error: %v", lastErr)
	}
}

// The outcomes of a request in TestRBAC.
const (
	allowed        = "allowed"
	deniedByPolicy = "denied by the admission policy"
	deniedByRBAC   = "denied by RBAC"
)

// outcome says who decided a request: nobody (allowed), the chart's
// admission policy (its name is in the message), or RBAC (Forbidden,
// also for RBAC's escalation check on RoleBindings).
func outcome(err error, policy string) string {
	switch {
	case err == nil:
		return allowed
	case strings.Contains(err.Error(), "ValidatingAdmissionPolicy '"+policy+"'"):
		return deniedByPolicy
	case apierrors.IsForbidden(err):
		return deniedByRBAC
	default:
		return "error: " + err.Error()
	}
}

// TestDeployWithWorkerToken runs OCC as the chart installs it, out of
// cluster: `occ server --embedded-worker=false` with a kubeconfig holding
// only the API ServiceAccount's token (which grants nothing: the API needs
// no Kubernetes permission) and `occ worker` with only the worker
// ServiceAccount's token, both on the configuration file the chart
// renders and one PostgreSQL database. Through the public Go client it
// signs in as the bootstrap administrator, creates a Namespace, a
// Configuration and an Agent with an initial SOUL.md, deploys it and
// waits for the deployment to succeed on kwok: the tenant namespace with
// its RoleBinding occ-worker, the gateway Deployment with a Ready Pod,
// and the Agent's HTTPRoute accepted by the chart's Gateway.
func TestDeployWithWorkerToken(t *testing.T) {
	in := installChart(t, installOptions{
		values:  []string{"routing-auto-ca"},
		volumes: 1, storageSet: "compute.gatewayStorageClassName",
	})
	env := in.env
	ctx := testCtx(t, 8*time.Minute)
	dbURL := childDatabaseURL(t, ctx, testdb.Postgres(t))
	dir := t.TempDir()
	worker := tokenFor(t, env, in.namespace, in.workerSA())
	api := tokenFor(t, env, in.namespace, in.apiSA())

	// The configuration file the chart renders, as its Pods mount it.
	var cm corev1.ConfigMap
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: in.fullname + "-config"}, &cm); err != nil {
		t.Fatal(err)
	}
	apiConfig := configWithKubeconfig(t, dir, "api", cm.Data["occ.yaml"], writeKubeconfig(t, env, dir, "api", api.token))
	workerConfig := configWithKubeconfig(t, dir, "worker", cm.Data["occ.yaml"], writeKubeconfig(t, env, dir, "worker", worker.token))

	// The files the chart mounts into both Pods: the service key and, in
	// automatic CA mode, the root's public certificate only (read back
	// from the Secret the Pods would project it from).
	var root corev1.Secret
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: in.namespace, Name: in.kc.GatewayRouting.EnvoyServiceName() + "-root"}, &root); err != nil {
		t.Fatal(err)
	}
	keyFile := writeFile(t, dir, "gateway-api-key", in.key)
	caFile := writeFile(t, dir, "gateway-ca.crt", root.Data[corev1.TLSCertKey])
	password := string(serviceKey(t)[:32])
	passwordFile := writeFile(t, dir, "admin-password", []byte(password))

	origin := "http://" + testutil.FreeAddr(t)
	u, _ := url.Parse(origin)
	// What the chart's Pods get from their environment (occ.podEnv),
	// with a database, a listener and a data directory of this test.
	base := occEnviron(
		"OCC_DATABASE_URL="+dbURL,
		"OCC_LISTEN="+u.Host,
		"OCC_PUBLIC_ORIGIN="+origin,
		"OCC_GATEWAY_API_KEY_PATH="+keyFile,
		"OCC_GATEWAY_CA_FILE="+caFile,
	)
	server := startOCC(t, "server", append(base, "OCC_CONFIG="+apiConfig, "OCC_DATA_DIR="+filepath.Join(dir, "api-data"),
		"OCC_BOOTSTRAP_ADMIN_PASSWORD_FILE="+passwordFile), "server", "--embedded-worker=false")
	c, err := occclient.New(origin)
	if err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	testkube.WaitFor(t, ctx, func() (bool, error) {
		if server.exited() {
			return false, fmt.Errorf("occ server exited: %v\n%s", server.err, server.logTail())
		}
		_, err := c.Ready(ctx)
		return err == nil, nil
	})
	t.Logf("occ server ready after %v", time.Since(start).Round(time.Millisecond))
	// The worker starts after the server has migrated the database (occ
	// worker does not migrate; the chart's migration Job does, before
	// both).
	// Its probes on a loopback port of this test instead of the chart's
	// 0.0.0.0:8081; they answer once its loops run.
	health := "http://" + testutil.FreeAddr(t)
	wk := startOCC(t, "worker", append(base, "OCC_CONFIG="+workerConfig, "OCC_DATA_DIR="+filepath.Join(dir, "worker-data"),
		"OCC_WORKER_HEALTH_LISTEN="+strings.TrimPrefix(health, "http://")), "worker")
	waitUntil(t, ctx, time.Minute, "the worker's /readyz to answer 200", []*occProcess{wk}, func() (bool, error) {
		rctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		defer cancel()
		req, err := http.NewRequestWithContext(rctx, http.MethodGet, health+"/readyz", nil)
		if err != nil {
			return false, err
		}
		resp, err := http.DefaultClient.Do(req)
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})

	if _, err := c.SignIn(ctx, "admin@localhost", password); err != nil {
		t.Fatalf("SignIn: %v", err)
	}
	ns, err := c.CreateNamespace(ctx, apitypes.CreateNamespaceRequest{Name: "chart"})
	if err != nil {
		t.Fatal(err)
	}
	tenant := kube.TenantNamespace(ns.ID)
	t.Cleanup(func() { deleteObject(t, env, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}) })
	start = time.Now()
	waitUntil(t, ctx, 2*time.Minute, "the Namespace to be ready", []*occProcess{server, wk}, func() (bool, error) {
		got, err := c.GetNamespace(ctx, ns.ID)
		if err != nil {
			return false, err
		}
		if got.Status == apitypes.NamespaceFailed {
			return false, fmt.Errorf("the Namespace failed: %+v", got)
		}
		return got.Status == apitypes.NamespaceReady, nil
	})
	t.Logf("Namespace ready after %v", time.Since(start).Round(time.Millisecond))

	cfg, err := c.CreateConfiguration(ctx, ns.ID, apitypes.CreateConfigurationRequest{Name: "cfg", Kind: "agent", Document: []byte(`{}`)})
	if err != nil {
		t.Fatal(err)
	}
	defs, err := c.WorkspaceDefaults(ctx)
	if err != nil {
		t.Fatal(err)
	}
	ag, err := c.CreateAgent(ctx, ns.ID, apitypes.CreateAgentRequest{Name: "a1", ConfigurationID: cfg.ID,
		InitialWorkspaceFiles: []byte(`{"SOUL.md":"Calm and brief.\n"}`), WorkspaceDefaultsID: &defs.ID})
	if err != nil {
		t.Fatal(err)
	}
	rev, err := c.DeployAgent(ctx, ns.ID, ag.ID)
	if err != nil {
		t.Fatal(err)
	}
	start = time.Now()
	deployCtx, cancel := context.WithTimeout(ctx, 5*time.Minute)
	defer cancel()
	var lastWhy string
	d, err := c.WaitForDeployment(deployCtx, ns.ID, ag.ID, rev.ID, time.Second, func(d apitypes.Deployment) {
		// The pending reasons say what the worker waits for (kwok's
		// staged Pod start, the PVC binding); each is logged once.
		why := string(d.Status)
		if p := d.Progress; p != nil && p.LastAttempt != nil {
			why = p.LastAttempt.Code + ": " + p.LastAttempt.Message
		}
		if why != lastWhy {
			t.Logf("deployment %s after %v: %s", d.ID, time.Since(start).Round(time.Millisecond), why)
			lastWhy = why
		}
	})
	if err != nil || d.Status != apitypes.DeploymentSucceeded {
		t.Fatalf("WaitForDeployment = %+v (error %+v), %v\nserver:\n%s\nworker:\n%s\ntenant namespace:\n%s",
			d, d.Error, err, server.logTail(), wk.logTail(), describe(ctx, env, tenant))
	}

	t.Run("the tenant namespace binds the tenant role to the worker", func(t *testing.T) {
		var rb rbacv1.RoleBinding
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: kube.TenantAccessBinding}, &rb); err != nil {
			t.Fatal(err)
		}
		want := []rbacv1.Subject{{Kind: rbacv1.ServiceAccountKind, Name: in.workerSA(), Namespace: in.namespace}}
		if diff := cmp.Diff(want, rb.Subjects); diff != "" || rb.RoleRef.Name != in.kc.TenantAccess.ClusterRole {
			t.Errorf("RoleBinding %s: role %s, subjects (-want +got):\n%s", rb.Name, rb.RoleRef.Name, diff)
		}
	})
	t.Run("the gateway Deployment's Pod is Ready on kwok", func(t *testing.T) {
		name := kube.GatewayName(ag.ID)
		var dep appsv1.Deployment
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: name}, &dep); err != nil {
			t.Fatal(err)
		}
		if !deploymentReady(&dep) {
			t.Errorf("Deployment %s/%s: %+v", tenant, name, dep.Status)
		}
		var pods corev1.PodList
		if err := env.Client.List(ctx, &pods, client.InNamespace(tenant), client.MatchingLabels{kube.LabelAgent: ag.ID}); err != nil {
			t.Fatal(err)
		}
		var ready []string
		for _, p := range pods.Items {
			for _, c := range p.Status.Conditions {
				if c.Type == corev1.PodReady && c.Status == corev1.ConditionTrue && p.DeletionTimestamp == nil {
					ready = append(ready, p.Spec.NodeName)
				}
			}
		}
		if diff := cmp.Diff([]string{"kwok-node-0"}, ready); diff != "" {
			t.Errorf("Ready gateway Pods of the Agent, by node (-want +got):\n%s", diff)
		}
	})
	t.Run("the chart's Gateway accepts the Agent's route", func(t *testing.T) {
		// The listener admits routes only from namespaces carrying the
		// route-attachment label, for the hostname the chart derived: the
		// driver's label and hostname must be the chart's.
		var route gwv1.HTTPRoute
		testkube.WaitFor(t, ctx, func() (bool, error) {
			if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: kube.GatewayName(ag.ID)}, &route); err != nil {
				return false, err
			}
			for _, p := range route.Status.Parents {
				if string(p.ControllerName) == egControllerName && string(p.ParentRef.Name) == in.kc.GatewayRouting.GatewayName {
					return meta.IsStatusConditionTrue(p.Conditions, string(gwv1.RouteConditionAccepted)) &&
						meta.IsStatusConditionTrue(p.Conditions, string(gwv1.RouteConditionResolvedRefs)), nil
				}
			}
			return false, nil
		})
	})
	t.Run("no secret in the processes' output", func(t *testing.T) {
		for _, p := range []*occProcess{server, wk} {
			out := p.output()
			for what, secret := range map[string]string{
				"the service key": string(in.key), "the worker token": worker.token, "the API token": api.token,
				"the administrator password": password,
			} {
				if strings.Contains(out, secret) {
					t.Errorf("occ %s's output holds %s", p.name, what)
				}
			}
		}
	})
}

// childDatabaseURL is the URL of st's PostgreSQL database for a child
// process: testdb owns the database (clone, drop, sweep); only its name
// goes into OCC_TEST_POSTGRES_URL's server URL.
func childDatabaseURL(t *testing.T, ctx context.Context, st *sqlstore.Store) string {
	t.Helper()
	var name string
	if err := st.DB().QueryRowContext(ctx, `SELECT current_database()`).Scan(&name); err != nil {
		t.Fatalf("current_database: %v", err)
	}
	u, err := url.Parse(os.Getenv(testdb.EnvPostgresURL))
	if err != nil {
		t.Fatalf("%s is not a valid URL", testdb.EnvPostgresURL) // the error would quote the password
	}
	u.Path, u.RawPath = "/"+name, ""
	return u.String()
}

// writeKubeconfig writes a kubeconfig for the test API server (its CA
// from the administrator's configuration) whose only credential is token,
// kept in a file of its own: never in an argument or the environment.
func writeKubeconfig(t *testing.T, env *testkube.Cluster, dir, name, token string) string {
	t.Helper()
	ca := env.Config.CAData
	if len(ca) == 0 {
		var err error
		if ca, err = os.ReadFile(env.Config.CAFile); err != nil {
			t.Fatal(err)
		}
	}
	kc := clientcmdapi.NewConfig()
	kc.Clusters["occ-test"] = &clientcmdapi.Cluster{Server: env.Config.Host, CertificateAuthorityData: ca}
	kc.AuthInfos[name] = &clientcmdapi.AuthInfo{TokenFile: writeFile(t, dir, name+".token", []byte(token))}
	kc.Contexts[name] = &clientcmdapi.Context{Cluster: "occ-test", AuthInfo: name}
	kc.CurrentContext = name
	path := filepath.Join(dir, name+".kubeconfig")
	if err := clientcmd.WriteToFile(*kc, path); err != nil {
		t.Fatal(err)
	}
	return path
}

// configWithKubeconfig writes the chart's configuration file with one
// change: drivers.compute.kubernetes.kubeconfig set to kubeconfig, because
// the processes run outside the cluster (in a Pod the driver takes the
// in-cluster ServiceAccount). Everything else is exactly as rendered.
func configWithKubeconfig(t *testing.T, dir, name, rendered, kubeconfig string) string {
	t.Helper()
	var cfg map[string]any
	if err := yaml.Unmarshal([]byte(rendered), &cfg); err != nil {
		t.Fatal(err)
	}
	k8s, ok := cfg["drivers"].(map[string]any)["compute"].(map[string]any)["kubernetes"].(map[string]any)
	if !ok {
		t.Fatalf("the chart's configuration has no drivers.compute.kubernetes:\n%s", rendered)
	}
	k8s["kubeconfig"] = kubeconfig
	b, err := yaml.Marshal(cfg)
	if err != nil {
		t.Fatal(err)
	}
	return writeFile(t, dir, name+".yaml", b)
}

func writeFile(t *testing.T, dir, name string, content []byte) string {
	t.Helper()
	path := filepath.Join(dir, name)
	if err := os.WriteFile(path, content, 0o600); err != nil {
		t.Fatal(err)
	}
	return path
}

// occEnviron is this process's environment without any OCC_* or
// KUBECONFIG variable (the developer's settings must not leak into the
// children), plus extra and the switch that makes the test binary occ.
func occEnviron(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OCC_") && !strings.HasPrefix(kv, "KUBECONFIG=") {
			env = append(env, kv)
		}
	}
	return append(append(env, occEnv+"=1"), extra...)
}

// occProcess is a running `occ` child: this test binary re-executed as
// occ (TestMain), in its own process group, its standard output and error
// in one log file.
type occProcess struct {
	name string
	cmd  *exec.Cmd
	log  string
	done chan struct{}
	err  error // Wait's result, set before done closes
}

// stopTimeout bounds a graceful stop (occ's own shutdown timeout is 15 s).
const stopTimeout = 20 * time.Second

// startOCC starts occ with args and env, and stops it when the test ends:
// SIGTERM, then SIGKILL to its process group after stopTimeout. It dies
// with the test binary even when no cleanup runs (childProcAttr).
func startOCC(t *testing.T, name string, env []string, args ...string) *occProcess {
	t.Helper()
	p := &occProcess{name: name, log: filepath.Join(t.TempDir(), name+".log"), done: make(chan struct{})}
	f, err := os.Create(p.log)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = f, f
	p.cmd.SysProcAttr = childProcAttr()
	started := make(chan error, 1)
	go func() {
		// Never unlocked: the parent-death signal is tied to the thread
		// that started the child, which must live as long as the child.
		runtime.LockOSThread()
		defer f.Close()
		if err := p.cmd.Start(); err != nil {
			started <- err
			close(p.done)
			return
		}
		started <- nil
		p.err = p.cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		t.Fatalf("start occ %s: %v", name, err)
	}
	t.Cleanup(func() {
		p.stop(t)
		if t.Failed() {
			t.Logf("occ %s output (last lines):\n%s", name, p.logTail())
		}
	})
	return p
}

func (p *occProcess) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *occProcess) stop(t *testing.T) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
		return
	case <-time.After(stopTimeout):
	}
	t.Errorf("occ %s did not stop within %v of SIGTERM; killing its process group", p.name, stopTimeout)
	_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
	select {
	case <-p.done:
	case <-time.After(10 * time.Second):
		t.Errorf("occ %s (pid %d) survived SIGKILL for 10 s", p.name, p.cmd.Process.Pid)
	}
}

func (p *occProcess) output() string {
	b, err := os.ReadFile(p.log)
	if err != nil {
		return err.Error()
	}
	return string(b)
}

// logTail is the last 40 lines of the output.
func (p *occProcess) logTail() string {
	lines := strings.Split(strings.TrimRight(p.output(), "\n"), "\n")
	return strings.Join(lines[max(0, len(lines)-40):], "\n")
}

// waitUntil polls cond every second for at most d, failing when cond
// returns an error or one of procs exits; unlike testkube.WaitFor it
// allows more than 60 s.
func waitUntil(t *testing.T, ctx context.Context, d time.Duration, what string, procs []*occProcess, cond func() (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
		for _, p := range procs {
			if p.exited() {
				t.Fatalf("waiting for %s: occ %s exited: %v\n%s", what, p.name, p.err, p.logTail())
			}
		}
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out after %v waiting for %s", d, what)
		case <-time.After(time.Second):
		}
	}
}
