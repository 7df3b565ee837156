package kube

import (
	"bufio"
	"bytes"
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"testing"
	"time"

	egv1a1 "github.com/envoyproxy/gateway/api/v1alpha1"
	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	storagev1 "k8s.io/api/storage/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/rest"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/utils/ptr"
	"sigs.k8s.io/controller-runtime/pkg/client"
	ctrllog "sigs.k8s.io/controller-runtime/pkg/log"
	gwv1 "sigs.k8s.io/gateway-api/apis/v1"
	gwv1beta1 "sigs.k8s.io/gateway-api/apis/v1beta1"
	"sigs.k8s.io/yaml"
)

// The variables scripts/testenv/k8s.sh env prints and Env reads.
const (
	// EnvKubeconfig names the kubeconfig file of the test environment.
	EnvKubeconfig = "OCC_TEST_KUBECONFIG"
	// EnvEgctl names the egctl binary built with the environment.
	EnvEgctl = "OCC_TEST_EGCTL"
	// EnvKubectl names the kubectl binary built with the environment.
	EnvKubectl = "OCC_TEST_KUBECTL"
	// EnvHelm names the helm binary built with the environment.
	EnvHelm = "OCC_TEST_HELM"
)

// DefaultWaitTimeout bounds WaitFor when the context has no earlier deadline.
const DefaultWaitTimeout = 60 * time.Second

// pollInterval is how often WaitFor asks again.
const pollInterval = 250 * time.Millisecond

// reachTimeout bounds the check that the API server answers.
const reachTimeout = 10 * time.Second

// Cluster is the running test environment.
type Cluster struct {
	// Config is the REST configuration of the administrator (system:masters).
	Config *rest.Config
	// Client is a controller-runtime client with Scheme() registered.
	Client client.Client
	// Egctl is the path of the egctl binary built for the environment
	// (OCC_TEST_EGCTL, else egctl on PATH), or "" when there is none.
	Egctl string
	// Kubectl is the path of the matching kubectl (OCC_TEST_KUBECTL, else
	// kubectl on PATH), or "".
	Kubectl string
	// Helm is the path of the helm binary built for the environment
	// (OCC_TEST_HELM, else helm on PATH), or "".
	Helm string
	// Kubeconfig is the administrator's kubeconfig file (OCC_TEST_KUBECONFIG),
	// for tools run as child processes (helm --kubeconfig).
	Kubeconfig string
}

var (
	mu       sync.Mutex
	clusters = map[string]*Cluster{} // by kubeconfig path; one per process
)

// Env returns the test environment named by OCC_TEST_KUBECONFIG. When the
// variable is unset or the API server does not answer, it skips the test, or
// fails it under CI=true.
func Env(t testing.TB) *Cluster {
	t.Helper()
	path := os.Getenv(EnvKubeconfig)
	if path == "" {
		unavailable(t, fmt.Sprintf("%s is not set", EnvKubeconfig))
	}
	mu.Lock()
	defer mu.Unlock()
	if c, ok := clusters[path]; ok {
		return c
	}
	c, err := connect(path)
	if err != nil {
		unavailable(t, err.Error())
	}
	clusters[path] = c
	return c
}

// unavailable skips the test, or fails it under CI=true.
func unavailable(t testing.TB, why string) {
	t.Helper()
	const how = "start it with scripts/testenv/k8s.sh start and eval \"$(scripts/testenv/k8s.sh env)\", " +
		"or run make test-kubernetes"
	if os.Getenv("CI") == "true" {
		t.Fatalf("kube: the Kubernetes test environment is unavailable (%s), and CI=true requires the Kubernetes tests to run: %s", why, how)
	}
	t.Skipf("kube: skipping, the Kubernetes test environment is unavailable (%s): %s", why, how)
}

func connect(path string) (*Cluster, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", path)
	if err != nil {
		return nil, fmt.Errorf("%s=%s: %v", EnvKubeconfig, path, err)
	}
	// Tests create objects in bursts; client-side throttling would only slow them down.
	cfg.QPS, cfg.Burst = 100, 200
	cfg.Timeout = 30 * time.Second

	if err := ready(cfg); err != nil {
		return nil, fmt.Errorf("API server %s (from %s) is not ready: %v", cfg.Host, path, err)
	}

	// Tests build clients throughout a run, so give controller-runtime a
	// logger now: without one it prints a stack trace ("log.SetLogger(...)
	// was never called") at the first client built 30 s after start. Its
	// client logs nothing the tests need; the driver under test sets slog.
	ctrllog.SetLogger(logr.Discard())
	c, err := client.New(cfg, client.Options{Scheme: Scheme()})
	if err != nil {
		return nil, fmt.Errorf("client for %s: %v", cfg.Host, err)
	}
	return &Cluster{
		Config:     cfg,
		Client:     c,
		Egctl:      tool(EnvEgctl, "egctl"),
		Kubectl:    tool(EnvKubectl, "kubectl"),
		Helm:       tool(EnvHelm, "helm"),
		Kubeconfig: path,
	}, nil
}

// ready asks the API server's /readyz.
func ready(cfg *rest.Config) error {
	hc, err := rest.HTTPClientFor(cfg)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(context.Background(), reachTimeout)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, strings.TrimSuffix(cfg.Host, "/")+"/readyz", nil)
	if err != nil {
		return err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return err
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(io.LimitReader(resp.Body, 4096))
	if resp.StatusCode != http.StatusOK {
		return fmt.Errorf("GET /readyz: %s: %s", resp.Status, strings.TrimSpace(string(body)))
	}
	return nil
}

// tool returns the path in the variable env, else name's path on PATH, else "".
func tool(env, name string) string {
	if p := os.Getenv(env); p != "" {
		return p
	}
	p, err := exec.LookPath(name)
	if err != nil {
		return ""
	}
	return p
}

// Scheme returns a new scheme with the built-in Kubernetes types, Gateway API
// v1 and v1beta1, and Envoy Gateway v1alpha1 registered.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{
		clientgoscheme.AddToScheme,
		gwv1.Install,
		gwv1beta1.Install,
		egv1a1.AddToScheme,
	} {
		if err := add(s); err != nil {
			panic(fmt.Sprintf("kube: building the scheme: %v", err))
		}
	}
	return s
}

// WaitFor calls cond every 250ms until it reports true, and fails the test
// when cond returns an error or when ctx ends; it never waits longer than
// DefaultWaitTimeout. A cond that meets a passing problem (a 404 while a
// controller catches up, say) should return false, nil.
func WaitFor(t testing.TB, ctx context.Context, cond func() (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, DefaultWaitTimeout)
	defer cancel()
	start := time.Now()
	tick := time.NewTicker(pollInterval)
	defer tick.Stop()
	for {
		done, err := cond()
		if err != nil {
			t.Fatalf("kube: WaitFor: after %v: %v", time.Since(start).Round(time.Millisecond), err)
		}
		if done {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("kube: WaitFor: condition not met after %v: %v", time.Since(start).Round(time.Millisecond), context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// NewNamespace creates a namespace with a random name, returns the name and
// deletes the namespace (and so everything in it) when the test ends.
func (c *Cluster) NewNamespace(t testing.TB) string {
	t.Helper()
	name := RandomName("occt")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{
		Name:   name,
		Labels: map[string]string{"occ.openclaw.dev/test": "true"},
	}}
	if err := c.Client.Create(ctx, ns); err != nil {
		t.Fatalf("kube: create namespace %s: %v", name, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		// The namespace controller removes the contents in the background; nobody waits for it.
		err := c.Client.Delete(ctx, ns, client.PropagationPolicy(metav1.DeletePropagationBackground))
		if err != nil && !apierrors.IsNotFound(err) {
			t.Errorf("kube: delete namespace %s: %v", name, err)
		}
	})
	return name
}

// RandomName returns prefix-<8 random hex digits>, a valid DNS-1123 label for
// a prefix of lower-case letters, digits and dashes up to 54 characters.
func RandomName(prefix string) string {
	b := make([]byte, 4)
	if _, err := rand.Read(b); err != nil {
		panic(errors.New("kube: crypto/rand failed: " + err.Error()))
	}
	return prefix + "-" + hex.EncodeToString(b)
}

// Helm returns the helm binary built with the environment (OCC_TEST_HELM,
// else helm on PATH) for tests that need only helm, not the API server
// (lint and template). Without one it skips the test, or fails it under
// CI=true.
func Helm(t testing.TB) string {
	t.Helper()
	p := tool(EnvHelm, "helm")
	if p == "" {
		unavailable(t, fmt.Sprintf("%s is not set and no helm is on PATH", EnvHelm))
	}
	return p
}

// RunHelm runs the helm binary of Helm(t) with args under ctx and returns
// its standard output; an error carries its standard error. HOME and
// helm's cache, configuration and data directories are a fresh temporary
// directory, so a test never reads or writes the developer's repositories,
// plugins or caches. Commands that reach a cluster need --kubeconfig
// (Cluster.Kubeconfig): KUBECONFIG is whatever the caller's shell holds.
func RunHelm(t testing.TB, ctx context.Context, args ...string) (string, error) {
	t.Helper()
	bin := Helm(t)
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, args...)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	home := t.TempDir()
	cmd.Env = append(os.Environ(), "HOME="+home, "HELM_CACHE_HOME="+home+"/cache",
		"HELM_CONFIG_HOME="+home+"/config", "HELM_DATA_HOME="+home+"/data")
	// A helm killed by ctx leaves no one holding its pipes for long.
	cmd.WaitDelay = 10 * time.Second
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("helm %s: %w\n%s", strings.Join(args, " "), err, stderr.String())
	}
	return stdout.String(), nil
}

// Objects splits a multi-document YAML stream (helm template's output, a
// manifest) into its objects, in order; documents that hold only comments
// are skipped. Numbers come out as int64, as the API machinery expects.
func Objects(manifest []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(manifest)))
	var out []*unstructured.Unstructured
	for {
		doc, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, fmt.Errorf("kube: reading document %d: %w", len(out)+1, err)
		}
		j, err := yaml.YAMLToJSON(doc)
		if err != nil {
			return nil, fmt.Errorf("kube: document %d: %w\n%s", len(out)+1, err, doc)
		}
		if s := strings.TrimSpace(string(j)); s == "null" || s == "{}" {
			continue
		}
		u := &unstructured.Unstructured{}
		if err := u.UnmarshalJSON(j); err != nil {
			return nil, fmt.Errorf("kube: document %d: %w\n%s", len(out)+1, err, doc)
		}
		out = append(out, u)
	}
}

// NewStorage creates a StorageClass without a provisioner and n
// PersistentVolumes of it, so that claims bind (the environment has no
// volume provisioner) and their Pods schedule; it returns the class's name
// and deletes all of it when the test ends. kwok never mounts the volumes.
func (c *Cluster) NewStorage(t testing.TB, n int) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	sc := &storagev1.StorageClass{
		ObjectMeta:        metav1.ObjectMeta{Name: RandomName("occt-sc")},
		Provisioner:       "kubernetes.io/no-provisioner",
		VolumeBindingMode: ptr.To(storagev1.VolumeBindingImmediate),
		ReclaimPolicy:     ptr.To(corev1.PersistentVolumeReclaimRetain),
	}
	objs := []client.Object{sc}
	for range n {
		objs = append(objs, &corev1.PersistentVolume{
			ObjectMeta: metav1.ObjectMeta{Name: RandomName("occt-pv")},
			Spec: corev1.PersistentVolumeSpec{
				Capacity:                      corev1.ResourceList{corev1.ResourceStorage: resource.MustParse("10Gi")},
				AccessModes:                   []corev1.PersistentVolumeAccessMode{corev1.ReadWriteOnce},
				PersistentVolumeReclaimPolicy: corev1.PersistentVolumeReclaimRetain,
				StorageClassName:              sc.Name,
				PersistentVolumeSource: corev1.PersistentVolumeSource{HostPath: &corev1.HostPathVolumeSource{
					Path: "/var/lib/occ-test/" + sc.Name,
				}},
			},
		})
	}
	for _, obj := range objs {
		if err := c.Client.Create(ctx, obj); err != nil {
			t.Fatalf("kube: create %T %s: %v", obj, obj.GetName(), err)
		}
		t.Cleanup(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := c.Client.Delete(ctx, obj); err != nil && !apierrors.IsNotFound(err) {
				t.Errorf("kube: delete %T %s: %v", obj, obj.GetName(), err)
			}
		})
	}
	return sc.Name
}
