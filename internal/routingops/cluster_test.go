package routingops_test

import (
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"encoding/pem"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"sigs.k8s.io/controller-runtime/pkg/client"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	"sigs.k8s.io/yaml"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/cli"
	"github.com/openclaw/occ/internal/compute/kube"
	"github.com/openclaw/occ/internal/routingops"
	kubeenv "github.com/openclaw/occ/internal/testenv/kube"
)

// occEnv makes the test binary act as occ: the test runs `occ server` and
// the client commands as real processes of the real command tree.
const occEnv = "OCC_ROUTINGOPS_TEST_RUN_OCC"

func TestMain(m *testing.M) {
	if os.Getenv(occEnv) == "1" {
		os.Exit(cli.Execute())
	}
	os.Exit(m.Run())
}

const (
	egController = "gateway.envoyproxy.io/gatewayclass-controller"
	egNamespace  = "envoy-gateway-system"
	chartDir     = "../../deploy/helm/occ"
	gatewayName  = "occ-agent-gateways"
)

// world is one test's installation: the Gateway namespace with the
// chart's routing objects, storage, an occ server (SQLite, embedded
// worker, the Kubernetes driver on the administrator's kubeconfig) and a
// client configuration directory for the occ client commands.
type world struct {
	t          *testing.T
	env        *kubeenv.Cluster
	dir        string
	gwNs       string
	class      string
	storage    string
	addr       string
	apiKey     []byte
	clientHome string
	server     *proc
	proxyPort  int
}

func newWorld(t *testing.T, volumes int) *world {
	env := kubeenv.Env(t)
	w := &world{t: t, env: env, dir: t.TempDir(), gwNs: env.NewNamespace(t), class: kubeenv.RandomName("occt-eg")}
	w.clientHome = filepath.Join(w.dir, "client")
	if err := os.Mkdir(w.clientHome, 0o700); err != nil {
		t.Fatal(err)
	}
	w.storage = env.NewStorage(t, volumes)
	w.apiKey = []byte(randomHex(t, 32))
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	w.addr = ln.Addr().String()
	ln.Close()
	return w
}

func randomHex(t *testing.T, n int) string {
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(t.Context(), d)
	t.Cleanup(cancel)
	return ctx
}

func cleanupCtx(t *testing.T) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	return ctx
}

func deleteObj(t *testing.T, env *kubeenv.Cluster, obj client.Object) {
	if err := env.Client.Delete(cleanupCtx(t), obj); err != nil && !apierrors.IsNotFound(err) {
		t.Errorf("delete %T %s: %v", obj, obj.GetName(), err)
	}
}

// driverSection is the drivers.compute.kubernetes section; routed adds
// gatewayRouting for the chart's Gateway on the routed host "localhost"
// at port (the test proxy's).
func (w *world) driverSection(routed bool, port int) map[string]any {
	k := map[string]any{
		"kubeconfig": w.env.Kubeconfig,
		"runtime": map[string]any{
			"gatewayImage": "registry.invalid/openclaw/gateway:2026.9.6", "occImage": "registry.invalid/occ:test",
			"gatewayStorageClassName": w.storage,
		},
	}
	if routed {
		k["gatewayRouting"] = map[string]any{"gatewayName": gatewayName, "gatewayNamespace": w.gwNs, "envoyNamespace": egNamespace,
			"hostname": "localhost", "endpointPort": port}
		k["network"] = map[string]any{"gatewayTrustedProxyCidrs": []string{"10.244.0.0/16"}}
	} else {
		k["network"] = map[string]any{"gatewayClients": []string{"10.0.0.0/8"}}
	}
	return k
}

// occConfig writes an occ configuration file with the driver section.
func (w *world) occConfig(name string, section map[string]any) (string, []byte) {
	b, err := yaml.Marshal(map[string]any{"drivers": map[string]any{"compute": map[string]any{"driver": "kubernetes", "kubernetes": section}}})
	if err != nil {
		w.t.Fatal(err)
	}
	return writeFile(w.t, w.dir, name, b), b
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// installRouting applies what the chart renders for the routing (Gateway,
// EnvoyProxy, SecurityPolicy, Issuers, Certificates) for the routed host
// localhost, the service-key Secret and the listener's TLS Secret (no
// cert-manager controller runs here), and a GatewayClass of the
// environment's Envoy Gateway.
func (w *world) installRouting(ctx context.Context) {
	t := w.t
	gc := &gwv1.GatewayClass{ObjectMeta: metav1.ObjectMeta{Name: w.class}, Spec: gwv1.GatewayClassSpec{ControllerName: egController}}
	if err := w.env.Client.Create(ctx, gc); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteObj(t, w.env, gc) })
	out, err := kubeenv.RunHelm(t, ctx, "template", "occ", chartDir, "--namespace", w.gwNs, "--kube-version", "1.37.2",
		"--set", "database.existingSecret=occ-database", "--set", "gatewayRouting.enabled=true",
		"--set", "gatewayRouting.gatewayClassName="+w.class, "--set", "gatewayRouting.apiKeySecretName=occ-gateway-key",
		"--set", "gatewayRouting.gatewayName="+gatewayName, "--set", "gatewayRouting.envoyNamespace="+egNamespace,
		"--set", "compute.gatewayTrustedProxyCidrs={10.244.0.0/16}")
	if err != nil {
		t.Fatal(err)
	}
	objs, err := kubeenv.Objects([]byte(out))
	if err != nil {
		t.Fatal(err)
	}
	ca, err := gwtest.NewCA()
	if err != nil {
		t.Fatal(err)
	}
	leaf, err := ca.Issue("localhost")
	if err != nil {
		t.Fatal(err)
	}
	keyDER, err := x509.MarshalPKCS8PrivateKey(leaf.PrivateKey)
	if err != nil {
		t.Fatal(err)
	}
	apply := []client.Object{
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "occ-gateway-key", Namespace: w.gwNs}, Data: map[string][]byte{"occ": w.apiKey}},
		&corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: gatewayName + "-tls", Namespace: w.gwNs}, Type: corev1.SecretTypeTLS,
			Data: map[string][]byte{
				corev1.TLSCertKey:       pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: leaf.Certificate[0]}),
				corev1.TLSPrivateKeyKey: pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: keyDER}),
			}},
	}
	for _, u := range objs {
		switch u.GroupVersionKind().Group {
		case gwv1.GroupName, "gateway.envoyproxy.io", "cert-manager.io":
			u.SetNamespace(w.gwNs)
			localhost(t, u)
			apply = append(apply, u)
		}
	}
	for _, o := range apply {
		if err := w.env.Client.Create(ctx, o); err != nil {
			t.Fatalf("create %T %s: %v", o, o.GetName(), err)
		}
	}
	// The chart's ConfigMap is the default source of occ routing enable.
	_, data := w.occConfig("chart-occ.yaml", w.driverSection(true, w.proxyPort))
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: routingops.ConfigMapName("oce"), Namespace: w.gwNs}, Data: map[string]string{"occ.yaml": string(data)}}
	if err := w.env.Client.Create(ctx, cm); err != nil {
		t.Fatal(err)
	}
}

// localhost moves the chart's routed host to localhost: the one name the
// test's occ may dial (traffic stays on loopback, where the test proxy
// plays Envoy), which the chart's schema refuses as a value because it
// asks for a dotted name. The driver's hostname is set to the same.
func localhost(t *testing.T, u *unstructured.Unstructured) {
	switch u.GetKind() {
	case "Gateway":
		ls, _, _ := unstructured.NestedSlice(u.Object, "spec", "listeners")
		for _, l := range ls {
			l.(map[string]any)["hostname"] = "localhost"
		}
		if err := unstructured.SetNestedSlice(u.Object, ls, "spec", "listeners"); err != nil {
			t.Fatal(err)
		}
	case "Certificate":
		if names, ok, _ := unstructured.NestedStringSlice(u.Object, "spec", "dnsNames"); ok && len(names) == 1 && strings.HasPrefix(names[0], "occ-gateway-") {
			if err := unstructured.SetNestedStringSlice(u.Object, []string{"localhost"}, "spec", "dnsNames"); err != nil {
				t.Fatal(err)
			}
		}
	}
}

// proc is a running occ child, in its own process group, killed with the
// test binary (Pdeathsig from a locked thread).
type proc struct {
	cmd  *exec.Cmd
	log  string
	done chan struct{}
}

func (w *world) environ(extra ...string) []string {
	var env []string
	for _, kv := range os.Environ() {
		if !strings.HasPrefix(kv, "OCC_") && !strings.HasPrefix(kv, "KUBECONFIG=") && !strings.HasPrefix(kv, "XDG_CONFIG_HOME=") {
			env = append(env, kv)
		}
	}
	return append(append(env, occEnv+"=1", "XDG_CONFIG_HOME="+w.clientHome), extra...)
}

func (w *world) start(name string, env []string, args ...string) *proc {
	t := w.t
	p := &proc{log: filepath.Join(w.dir, name+".log"), done: make(chan struct{})}
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	p.cmd = exec.Command(os.Args[0], args...)
	p.cmd.Env = env
	p.cmd.Stdout, p.cmd.Stderr = f, f
	started := make(chan error, 1)
	go func() {
		runtime.LockOSThread() // the parent-death signal belongs to this thread
		defer f.Close()
		p.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true, Pdeathsig: syscall.SIGKILL}
		if err := p.cmd.Start(); err != nil {
			started <- err
			close(p.done)
			return
		}
		started <- nil
		_ = p.cmd.Wait()
		close(p.done)
	}()
	if err := <-started; err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.stop(t) })
	return p
}

func (p *proc) exited() bool {
	select {
	case <-p.done:
		return true
	default:
		return false
	}
}

func (p *proc) stop(t *testing.T) {
	if p.exited() {
		return
	}
	_ = p.cmd.Process.Signal(syscall.SIGTERM)
	select {
	case <-p.done:
	case <-time.After(20 * time.Second):
		t.Errorf("occ did not stop within 20 s of SIGTERM; killing it")
		_ = syscall.Kill(-p.cmd.Process.Pid, syscall.SIGKILL)
		<-p.done
	}
}

func (p *proc) output() string {
	b, _ := os.ReadFile(p.log)
	return string(b)
}

// startServer runs occ server on the world's address and data directory
// with the configuration file cfg.
func (w *world) startServer(ctx context.Context, cfg string, extra ...string) {
	env := w.environ(append([]string{"OCC_CONFIG=" + cfg, "OCC_DATA_DIR=" + filepath.Join(w.dir, "data"), "OCC_LISTEN=" + w.addr,
		"OCC_PUBLIC_ORIGIN=http://" + w.addr, "OCC_BOOTSTRAP_ADMIN_PASSWORD_FILE=" + filepath.Join(w.dir, "admin-password")}, extra...)...)
	w.server = w.start("server", env, "server")
	kubeenv.WaitFor(w.t, ctx, func() (bool, error) {
		if w.server.exited() {
			return false, fmt.Errorf("occ server exited:\n%s", w.server.output())
		}
		c, err := net.DialTimeout("tcp", w.addr, time.Second)
		if err == nil {
			c.Close()
		}
		return err == nil, nil
	})
}

type result struct {
	stdout, stderr string
	code           int
}

func (r result) String() string {
	return fmt.Sprintf("exit %d\nstdout:\n%s\nstderr:\n%s", r.code, r.stdout, r.stderr)
}

// occ runs a client command to its end (bounded by the test's context).
func (w *world) occ(ctx context.Context, stdin string, args ...string) result {
	w.t.Helper()
	cmd := exec.CommandContext(ctx, os.Args[0], args...)
	cmd.Env = w.environ()
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	code := 0
	if ee, ok := err.(*exec.ExitError); ok {
		code = ee.ExitCode()
	} else if err != nil {
		w.t.Fatalf("occ %v: %v", args, err)
	}
	return result{out.String(), errb.String(), code}
}

func (w *world) must(ctx context.Context, args ...string) result {
	w.t.Helper()
	r := w.occ(ctx, "", args...)
	if r.code != 0 {
		w.t.Fatalf("occ %v: %s", args, r)
	}
	return r
}

// objectVersions is the resourceVersion of the tenant namespace and of
// every object in it a routing change could touch or must not.
func objectVersions(t *testing.T, ctx context.Context, env *kubeenv.Cluster, tenant string) map[string]string {
	t.Helper()
	out := map[string]string{}
	var ns corev1.Namespace
	if err := env.Client.Get(ctx, client.ObjectKey{Name: tenant}, &ns); err != nil {
		t.Fatal(err)
	}
	out["Namespace/"+tenant] = ns.ResourceVersion
	for _, kind := range []string{"NetworkPolicyList", "PersistentVolumeClaimList", "ConfigMapList", "ServiceList", "SecretList", "RoleBindingList"} {
		l := &unstructured.UnstructuredList{}
		gv := "v1"
		switch kind {
		case "NetworkPolicyList":
			gv = "networking.k8s.io/v1"
		case "RoleBindingList":
			gv = "rbac.authorization.k8s.io/v1"
		}
		l.SetAPIVersion(gv)
		l.SetKind(kind)
		if err := env.Client.List(ctx, l, client.InNamespace(tenant)); err != nil {
			t.Fatal(err)
		}
		for _, o := range l.Items {
			out[strings.TrimSuffix(kind, "List")+"/"+o.GetName()] = o.GetResourceVersion()
		}
	}
	dl := &unstructured.UnstructuredList{}
	dl.SetAPIVersion("apps/v1")
	dl.SetKind("DeploymentList")
	if err := env.Client.List(ctx, dl, client.InNamespace(tenant)); err != nil {
		t.Fatal(err)
	}
	for _, o := range dl.Items {
		out["Deployment/"+o.GetName()] = o.GetResourceVersion()
	}
	rl := &unstructured.UnstructuredList{}
	rl.SetAPIVersion(gwv1.GroupVersion.String())
	rl.SetKind("HTTPRouteList")
	if err := env.Client.List(ctx, rl, client.InNamespace(tenant)); err != nil {
		t.Fatal(err)
	}
	for _, o := range rl.Items {
		out["HTTPRoute/"+o.GetName()] = o.GetResourceVersion()
	}
	return out
}

// TestRoutingEnable is issue 14's evidence on the real API server with
// the real Envoy Gateway controller: a Namespace with two Agents made
// while routing was off; routing configured (the chart's objects, the
// driver configuration, occ restarted); occ routing enable's refusals
// and --dry-run change nothing; a run interrupted after the first Agent
// and a second run finish the job without redoing it; the label, the
// policy and the HTTPRoutes appear, the Agents keep their ids and PVCs;
// occ doctor routing passes with the probes through gwtest's Envoy-like
// proxy and names the check it could not make here (certificate-ready:
// no cert-manager controller runs).
func TestRoutingEnable(t *testing.T) {
	w := newWorld(t, 2)
	ctx := testCtx(t, 12*time.Minute)
	env := w.env
	password := randomHex(t, 16)
	writeFile(t, w.dir, "admin-password", []byte(password))

	// 1. Routing off.
	offCfg, _ := w.occConfig("off.yaml", w.driverSection(false, 0))
	w.startServer(ctx, offCfg)
	w.occLogin(ctx, password)
	w.must(ctx, "namespace", "create", "team")
	waitReady(t, ctx, w)
	writeFile(t, w.dir, "cfg.json", []byte(`{}`))
	w.must(ctx, "configuration", "create", "base", "-f", filepath.Join(w.dir, "cfg.json"), "-n", "team")
	persona := filepath.Join(w.dir, "persona")
	if err := os.Mkdir(persona, 0o700); err != nil {
		t.Fatal(err)
	}
	writeFile(t, persona, "SOUL.md", []byte("Calm and brief.\n"))
	var agents []apitypes.Agent
	for _, name := range []string{"a1", "a2"} {
		r := w.must(ctx, "agent", "create", name, "--configuration", "base", "--files", persona, "-n", "team", "--output", "json")
		var a apitypes.Agent
		if err := json.Unmarshal([]byte(r.stdout), &a); err != nil {
			t.Fatal(err)
		}
		agents = append(agents, a)
		w.must(ctx, "agent", "deploy", name, "--wait", "--timeout", "4m", "-n", "team")
	}
	// Their active revisions, from before routing.
	var listed struct{ Items []apitypes.Agent }
	if err := json.Unmarshal([]byte(w.must(ctx, "agent", "list", "-n", "team", "--output", "json").stdout), &listed); err != nil {
		t.Fatal(err)
	}
	for i := range agents {
		for _, x := range listed.Items {
			if x.ID == agents[i].ID {
				agents[i] = x
			}
		}
		if agents[i].ActiveRevisionID == "" {
			t.Fatalf("Agent %s has no active revision after its deployment", agents[i].Name)
		}
	}
	nsID := agents[0].NamespaceID
	tenant := kube.TenantNamespace(nsID)
	t.Cleanup(func() { deleteObj(t, env, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: tenant}}) })
	pvcs := map[string]string{}
	for _, a := range agents {
		var pvc corev1.PersistentVolumeClaim
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: kube.StatePVCName(a.ID)}, &pvc); err != nil {
			t.Fatal(err)
		}
		pvcs[a.ID] = string(pvc.UID)
	}
	w.server.stop(t)

	// 2. Routing configured: the chart's objects, the test proxy in front
	// of a fake gateway holding the Agents' files, occ restarted.
	gw := gwtest.NewFakeGateway(t, gwtest.FakeOptions{Files: map[string]string{"SOUL.md": "Calm and brief.\n"}})
	proxy := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: gw.HTTPURL, Key: string(w.apiKey), Namespace: nsID, Agent: agents[0].ID,
		MoreRoutes: []string{nsID + "/" + agents[1].ID}})
	port, err := strconv.Atoi(proxy.URL[strings.LastIndex(proxy.URL, ":")+1:])
	if err != nil {
		t.Fatal(err)
	}
	w.proxyPort = port
	w.installRouting(ctx)
	onCfg, _ := w.occConfig("on.yaml", w.driverSection(true, port))
	keyFile := writeFile(t, w.dir, "gateway-api-key", w.apiKey)
	caFile := writeFile(t, w.dir, "gateway-ca.crt", proxy.CAPEM)
	w.startServer(ctx, onCfg, "OCC_GATEWAY_API_KEY_PATH="+keyFile, "OCC_GATEWAY_CA_FILE="+caFile)

	kc := env.Kubeconfig
	backup := filepath.Join(w.dir, "routing-backup")
	enable := []string{"routing", "enable", "--namespace", "team", "--backup-dir", backup, "--kubeconfig", kc,
		"--release", "oce", "--release-namespace", w.gwNs, "--interval", "250ms", "--timeout", "4m"}

	refuse := func(t *testing.T, code, name string) {
		t.Helper()
		before := objectVersions(t, ctx, env, tenant)
		r := w.occ(ctx, "", enable...)
		if r.code != 1 || !strings.Contains(r.stderr, code) || !strings.Contains(r.stderr, name) {
			t.Errorf("routing enable: %s\nwant exit 1 naming %s and %s", r, code, name)
		}
		t.Logf("refused: %s", strings.TrimSpace(r.stderr))
		if diff := cmp.Diff(before, objectVersions(t, ctx, env, tenant)); diff != "" {
			t.Errorf("a refused run changed objects (-before +after):\n%s", diff)
		}
		if _, err := os.Stat(backup); !os.IsNotExist(err) {
			t.Errorf("a refused run created the backup directory: %v", err)
		}
	}
	t.Run("an extra permissive NetworkPolicy is refused by name", func(t *testing.T) {
		extra := &networkingv1.NetworkPolicy{
			ObjectMeta: metav1.ObjectMeta{Name: "allow-office", Namespace: tenant},
			Spec: networkingv1.NetworkPolicySpec{
				PodSelector: metav1.LabelSelector{MatchLabels: map[string]string{kube.LabelWorkloadRole: kube.WorkloadRoleGateway}},
				PolicyTypes: []networkingv1.PolicyType{networkingv1.PolicyTypeIngress},
				Ingress:     []networkingv1.NetworkPolicyIngressRule{{From: []networkingv1.NetworkPolicyPeer{{IPBlock: &networkingv1.IPBlock{CIDR: "192.168.0.0/16"}}}}},
			},
		}
		if err := env.Client.Create(ctx, extra); err != nil {
			t.Fatal(err)
		}
		refuse(t, "PERMISSIVE_NETWORK_POLICY", "allow-office")
		if err := env.Client.Delete(ctx, extra); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a changed gateway Pod selector is refused", func(t *testing.T) {
		var p networkingv1.NetworkPolicy
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: kube.PolicyGatewayIngress}, &p); err != nil {
			t.Fatal(err)
		}
		orig := p.Spec.PodSelector
		p.Spec.PodSelector = metav1.LabelSelector{}
		if err := env.Client.Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
		refuse(t, "GATEWAY_SELECTOR_CHANGED", kube.PolicyGatewayIngress)
		p.Spec.PodSelector = orig
		if err := env.Client.Update(ctx, &p); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("a namespace that is not OCC's is refused", func(t *testing.T) {
		var ns corev1.Namespace
		if err := env.Client.Get(ctx, client.ObjectKey{Name: tenant}, &ns); err != nil {
			t.Fatal(err)
		}
		ns.Annotations[kube.AnnotationNamespaceID] = "ns_someone-else"
		if err := env.Client.Update(ctx, &ns); err != nil {
			t.Fatal(err)
		}
		refuse(t, "NAMESPACE_NOT_OWNED", tenant)
		ns.Annotations[kube.AnnotationNamespaceID] = nsID
		if err := env.Client.Update(ctx, &ns); err != nil {
			t.Fatal(err)
		}
	})
	if t.Failed() {
		t.FailNow()
	}

	t.Run("--dry-run prints the plan and changes nothing", func(t *testing.T) {
		before := objectVersions(t, ctx, env, tenant)
		revsBefore := w.must(ctx, "agent", "revisions", "a1", "-n", "team", "--output", "json").stdout
		r := w.must(ctx, append(enable, "--dry-run")...)
		for _, want := range []string{"update    Namespace " + tenant, "change metadata.labels." + kube.LabelRouteAttachment,
			"update    NetworkPolicy " + tenant + "/" + kube.PolicyGatewayIngress, "redeploy  Agent a1 (" + agents[0].ID + ")",
			"redeploy  Agent a2 (" + agents[1].ID + ")", "nothing was changed"} {
			if !strings.Contains(r.stdout, want) {
				t.Errorf("the dry run's output lacks %q:\n%s", want, r.stdout)
			}
		}
		if diff := cmp.Diff(before, objectVersions(t, ctx, env, tenant)); diff != "" {
			t.Errorf("--dry-run changed objects (-before +after):\n%s", diff)
		}
		if got := w.must(ctx, "agent", "revisions", "a1", "-n", "team", "--output", "json").stdout; got != revsBefore {
			t.Errorf("--dry-run deployed: revisions %s, were %s", got, revsBefore)
		}
		if _, err := os.Stat(backup); !os.IsNotExist(err) {
			t.Errorf("--dry-run created the backup directory: %v", err)
		}
	})

	// 3. A run killed once the first Agent is done, then a second run.
	first := w.start("enable-1", w.environ(), enable...)
	waitUntil(t, ctx, 5*time.Minute, "the first run to finish Agent a1", func() (bool, error) {
		b, err := os.ReadFile(filepath.Join(backup, "progress.json"))
		if err != nil {
			return first.exited(), nil
		}
		var p struct {
			Namespaces map[string]struct {
				Agents map[string]struct{ Done bool }
			}
		}
		if err := json.Unmarshal(b, &p); err != nil {
			return false, nil // being replaced; read again
		}
		return p.Namespaces[nsID].Agents[agents[0].ID].Done || first.exited(), nil
	})
	_ = syscall.Kill(-first.cmd.Process.Pid, syscall.SIGKILL)
	<-first.done
	t.Logf("first run, killed:\n%s", first.output())
	second := w.must(ctx, enable...)
	t.Logf("second run:\n%s", second.stderr)
	if !strings.Contains(second.stderr, "Agent a1 ("+agents[0].ID+") already redeployed") {
		t.Errorf("the second run did not skip the finished Agent a1:\n%s", second.stderr)
	}
	for _, a := range agents {
		r := w.must(ctx, "agent", "revisions", a.Name, "-n", "team", "--output", "json")
		var revs struct{ Items []apitypes.Revision }
		if err := json.Unmarshal([]byte(r.stdout), &revs); err != nil {
			t.Fatal(err)
		}
		if len(revs.Items) != 2 {
			t.Errorf("Agent %s has %d revisions after the two runs, want 2 (one redeployment):\n%s", a.Name, len(revs.Items), r.stdout)
		}
		got := w.must(ctx, "agent", "list", "-n", "team", "--output", "json")
		var list struct{ Items []apitypes.Agent }
		if err := json.Unmarshal([]byte(got.stdout), &list); err != nil {
			t.Fatal(err)
		}
		var now apitypes.Agent
		for _, x := range list.Items {
			if x.Name == a.Name {
				now = x
			}
		}
		if now.ID != a.ID || now.ActiveRevisionID == a.ActiveRevisionID || now.ActiveRevisionID == "" {
			t.Errorf("Agent %s after enable: id %s active %s; want the same id on a new revision (was %s)", a.Name, now.ID, now.ActiveRevisionID, a.ActiveRevisionID)
		}
		var pvc corev1.PersistentVolumeClaim
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: kube.StatePVCName(a.ID)}, &pvc); err != nil {
			t.Fatal(err)
		}
		if string(pvc.UID) != pvcs[a.ID] {
			t.Errorf("Agent %s's PVC was replaced: UID %s, was %s", a.Name, pvc.UID, pvcs[a.ID])
		}
		var route gwv1.HTTPRoute
		if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: kube.GatewayName(a.ID)}, &route); err != nil {
			t.Errorf("Agent %s has no HTTPRoute: %v", a.Name, err)
		}
	}
	var ns corev1.Namespace
	if err := env.Client.Get(ctx, client.ObjectKey{Name: tenant}, &ns); err != nil {
		t.Fatal(err)
	}
	if ns.Labels[kube.LabelRouteAttachment] == "" {
		t.Errorf("the tenant namespace has no %s label: %v", kube.LabelRouteAttachment, ns.Labels)
	}
	var pol networkingv1.NetworkPolicy
	if err := env.Client.Get(ctx, client.ObjectKey{Namespace: tenant, Name: kube.PolicyGatewayIngress}, &pol); err != nil {
		t.Fatal(err)
	}
	if len(pol.Spec.Ingress) != 1 || len(pol.Spec.Ingress[0].From) != 1 || pol.Spec.Ingress[0].From[0].IPBlock != nil ||
		pol.Spec.Ingress[0].From[0].PodSelector.MatchLabels[kube.LabelOwningGatewayName] != gatewayName {
		t.Errorf("allow-gateway-ingress admits %+v; want only the Envoy peer", pol.Spec.Ingress)
	}

	t.Run("the backup holds the state before the change, private", func(t *testing.T) {
		_ = filepath.Walk(backup, func(path string, fi os.FileInfo, err error) error {
			if err != nil {
				t.Error(err)
				return nil
			}
			want := os.FileMode(0o600)
			if fi.IsDir() {
				want = 0o700
			}
			if fi.Mode().Perm() != want {
				t.Errorf("%s: mode %04o, want %04o", path, fi.Mode().Perm(), want)
			}
			return nil
		})
		var b kube.NamespaceBackup
		readJSON(t, filepath.Join(backup, nsID, "namespace.json"), &b)
		var bns corev1.Namespace
		if err := json.Unmarshal(b.Namespace, &bns); err != nil {
			t.Fatal(err)
		}
		if _, ok := bns.Labels[kube.LabelRouteAttachment]; ok || bns.Name != tenant {
			t.Errorf("the backed-up namespace %s has labels %v; want the state before the change", bns.Name, bns.Labels)
		}
		found := false
		for _, raw := range b.NetworkPolicies {
			var p networkingv1.NetworkPolicy
			if err := json.Unmarshal(raw, &p); err != nil {
				t.Fatal(err)
			}
			if p.Name == kube.PolicyGatewayIngress {
				found = len(p.Spec.Ingress) == 1 && p.Spec.Ingress[0].From[0].IPBlock != nil
			}
		}
		if !found {
			t.Errorf("the backup lacks the old allow-gateway-ingress (the gatewayClients rule)")
		}
		for _, a := range agents {
			var ab struct {
				ActiveRevision *apitypes.Revision
				Configuration  apitypes.Configuration
			}
			readJSON(t, filepath.Join(backup, nsID, "agents", a.ID+".json"), &ab)
			if ab.ActiveRevision == nil || ab.ActiveRevision.ID != a.ActiveRevisionID || ab.Configuration.ID == "" {
				t.Errorf("the backup of %s has revision %+v, Configuration %q; want its revision before the run", a.Name, ab.ActiveRevision, ab.Configuration.ID)
			}
		}
	})

	t.Run("occ doctor routing passes on what this environment can show", func(t *testing.T) {
		// No cert-manager controller runs here, so the Certificate never
		// becomes Ready (its Secret is the test's); everything else is
		// reported by the real Envoy Gateway controller.
		skip := "certificate-ready"
		forwarded := proxy.Forwarded()
		r := w.occ(ctx, "", "doctor", "routing", "--kubeconfig", kc, "--config", onCfg, "--route-address", "127.0.0.1:"+strconv.Itoa(port),
			"--ca-file", caFile, "--skip", skip, "--output", "json")
		var rep routingops.Report
		if err := json.Unmarshal([]byte(r.stdout), &rep); err != nil {
			t.Fatalf("doctor: %s: %v", r, err)
		}
		if r.code != 0 || !rep.Passed {
			t.Errorf("doctor: %s", r)
		}
		table := w.occ(ctx, "", "doctor", "routing", "--kubeconfig", kc, "--config", onCfg, "--route-address", "127.0.0.1:"+strconv.Itoa(port),
			"--ca-file", caFile, "--skip", skip)
		t.Logf("occ doctor routing:\n%s", table)
		got := map[string]int{}
		for _, c := range rep.Checks {
			got[c.Name+" "+c.Result]++
			if c.Result == kube.CheckSkipped && !strings.Contains(c.Detail, "not checked here") {
				t.Errorf("skipped check %s does not say so: %s", c.Name, c.Detail)
			}
		}
		want := map[string]int{
			"gateway-accepted passed": 1, "gateway-programmed passed": 1, "certificate-ready skipped": 1,
			"certificate-hostname passed": 1, "securitypolicy-accepted passed": 1,
			"route-accepted passed": 2, "namespace-label passed": 2, "ingress-policy passed": 2,
			"probe-no-key passed": 2, "probe-wrong-key passed": 2, "probe-spoofed-identity passed": 2, "file-read passed": 2,
		}
		if diff := cmp.Diff(want, got); diff != "" {
			t.Errorf("doctor's checks (-want +got):\n%s\n%s", diff, r.stdout)
		}
		if diff := cmp.Diff([]string{"certificate-ready"}, rep.Skipped); diff != "" {
			t.Errorf("skipped (-want +got):\n%s", diff)
		}
		if !strings.Contains(r.stderr, "not checked here: [certificate-ready]") {
			t.Errorf("doctor does not list what it could not check:\n%s", r.stderr)
		}
		// Only the two file reads reached the gateway; every probe was
		// refused in front of it.
		if n := proxy.Forwarded() - forwarded; n != 4 {
			t.Errorf("%d requests reached the gateway during the two doctor runs, want 4 (the file reads)", n)
		}
		if h := gw.LastHeader(); h.Get(gwtest.IdentityHeader) != gwtest.Identity {
			t.Errorf("the gateway saw identity %q", h.Get(gwtest.IdentityHeader))
		}

		// Without --skip the same environment fails, with the remedies.
		r = w.occ(ctx, "", "doctor", "routing", "--kubeconfig", kc, "--config", onCfg, "--skip", "probes")
		if r.code != 1 || !strings.Contains(r.stdout, "certificate-ready") || !strings.Contains(r.stdout, "REMEDY") {
			t.Errorf("doctor without skips: %s; want exit 1 and the failing checks with remedies", r)
		}
	})
	for _, s := range []string{password, string(w.apiKey)} {
		if strings.Contains(w.server.output(), s) {
			t.Errorf("occ server's output holds a secret")
		}
	}
}

func (w *world) occLogin(ctx context.Context, password string) {
	r := w.occ(ctx, password+"\n", "login", "http://"+w.addr, "--email", "admin@localhost", "--password-stdin", "--name", "admin")
	if r.code != 0 {
		w.t.Fatalf("login: %s\nserver:\n%s", r, w.server.output())
	}
}

func waitReady(t *testing.T, ctx context.Context, w *world) {
	deadline := time.Now().Add(2 * time.Minute)
	for {
		r := w.must(ctx, "namespace", "get", "team", "--output", "json")
		var ns apitypes.Namespace
		if err := json.Unmarshal([]byte(r.stdout), &ns); err != nil {
			t.Fatal(err)
		}
		if ns.Status == apitypes.NamespaceReady {
			return
		}
		if ns.Status == apitypes.NamespaceFailed || time.Now().After(deadline) {
			t.Fatalf("Namespace team is %s\nserver:\n%s", ns.Status, w.server.output())
		}
		time.Sleep(500 * time.Millisecond)
	}
}

// waitUntil polls cond every 250 ms for at most d.
func waitUntil(t *testing.T, ctx context.Context, d time.Duration, what string, cond func() (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, d)
	defer cancel()
	for {
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
		case <-time.After(250 * time.Millisecond):
		}
	}
}

func readJSON(t *testing.T, path string, v any) {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal(b, v); err != nil {
		t.Fatalf("%s: %v", path, err)
	}
}
