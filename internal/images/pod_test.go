package images

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	corev1 "k8s.io/api/core/v1"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/kube"
	"github.com/openclaw/occ/internal/testutil"
	"github.com/openclaw/occ/internal/workspace"
)

// Bounds of the Pod test's waits. A gateway starts in 10-60 s in a
// container on two cores; native setup runs twice in the setup container
// (5-15 s each).
const (
	initTimeout    = 3 * time.Minute
	gatewayTimeout = 3 * time.Minute
)

// TestGatewayPodInImages renders the gateway Deployment of a revision with
// a pending workspace setup, exactly as the Kubernetes driver does with
// runtime.occImage and runtime.gatewayImage set to the built images, and
// runs its containers in order with docker, as the Pod spec says: the
// occ-binary init container copies occ with install-self (no cp), the
// workspace-setup init container applies the setup, and the gateway
// container's verifier execs the real gateway (no shell). A gateway start
// over a foreign identity must fail with WORKSPACE_SETUP_FAILED and never
// start the gateway. The gateway then answers /readyz, and OCC's client,
// through the test proxy that plays the Envoy route, reads the file the
// setup wrote.
//
// Two changes keep the test on loopback: the init containers run with
// --network none and the gateway with --network host, so its configuration
// binds 127.0.0.1 (the rendered "lan" would listen on every interface of
// this machine) and trusts the loopback proxy; and the gateway gets
// OPENCLAW_SKIP_CHANNELS and OPENCLAW_OFFLINE, as every test gateway does.
func TestGatewayPodInImages(t *testing.T) {
	loadImages(t)
	if os.Getuid() != 0 {
		unavailable(t, "the volumes must be given to the Pod's uid, which needs root")
	}
	port := freePort(t)
	cfg := kube.Config{
		GatewayRouting: &kube.GatewayRouting{GatewayName: "occ-agent-gateways", GatewayNamespace: "occ-system", EnvoyNamespace: "envoy-gateway-system"},
		Network:        kube.Network{GatewayPort: port, GatewayTrustedProxyCIDRs: []string{"10.244.0.0/16"}},
		Runtime:        kube.Runtime{GatewayImage: gatewayImage, OCCImage: occImage},
	}
	if err := cfg.WithDefaults().Validate(); err != nil {
		t.Fatalf("driver configuration: %v", err)
	}
	rev := compute.Revision{
		ID: "rev_00000000-0000-4000-8000-000000000001", NamespaceID: "ns_00000000-0000-4000-8000-000000000002",
		AgentID: "agt_00000000-0000-4000-8000-000000000003", AgentName: "images", Number: 1,
		ConfigurationID: "cfg_00000000-0000-4000-8000-000000000004", ConfigurationGeneration: 1,
		Configuration: json.RawMessage(`{"agents":{"defaults":{"heartbeat":{"every":"0m"}}},"plugins":{"enabled":false}}`),
	}
	soul := "# Soul\nwritten by the setup init container in the gateway image ✓\n"
	setup := &compute.WorkspaceSetup{
		ID: "wss_00000000-0000-4000-8000-000000000005", NamespaceID: rev.NamespaceID, AgentID: rev.AgentID,
		Files: map[string]string{"SOUL.md": soul},
	}
	objs, err := kube.Render(cfg, rev, setup)
	if err != nil {
		t.Fatalf("Render: %v", err)
	}
	spec := objs.Deployment.Spec.Template.Spec
	if len(spec.InitContainers) != 2 || len(spec.Containers) != 1 {
		t.Fatalf("the rendered Pod has %d init containers and %d containers, want 2 and 1", len(spec.InitContainers), len(spec.Containers))
	}

	pod := newPod(t, spec)
	pod.configMap = map[string][]byte{kube.ConfigKey: loopbackConfig(t, []byte(objs.ConfigMap.Data[kube.ConfigKey]))}
	pod.secret = objs.SetupSecret.Data
	pod.makeVolumes(t)

	// The init containers, in order, without a network.
	for _, c := range spec.InitContainers {
		start := time.Now()
		res := pod.run(t, initTimeout, c, "none")
		if res.Code != 0 {
			t.Fatalf("init container %s: exit %d\nstdout:\n%s\nstderr:\n%s", c.Name, res.Code, res.Stdout, res.Stderr)
		}
		t.Logf("init container %s: done in %v %s", c.Name, time.Since(start).Round(time.Millisecond), strings.TrimSpace(res.Stdout))
	}
	if got, err := os.ReadFile(filepath.Join(pod.volumes["state"], "workspace", "SOUL.md")); err != nil || string(got) != soul {
		t.Fatalf("SOUL.md after the setup init container: %q, %v; want the submitted text", got, err)
	}
	if _, err := os.Stat(filepath.Join(pod.volumes["state"], "workspace", workspace.MarkerName)); err != nil {
		t.Fatalf("no marker after the setup init container: %v", err)
	}

	gw := spec.Containers[0]
	gw.Env = append(gw.Env, corev1.EnvVar{Name: "OPENCLAW_SKIP_CHANNELS", Value: "1"}, corev1.EnvVar{Name: "OPENCLAW_OFFLINE", Value: "1"})

	// A foreign identity: the verifier refuses, the gateway never starts.
	t.Run("foreign identity", func(t *testing.T) {
		foreign := *setup
		foreign.ID, foreign.Files, foreign.Completed = "wss_00000000-0000-4000-8000-000000000099", nil, true
		b, err := json.Marshal(foreign)
		if err != nil {
			t.Fatal(err)
		}
		other := pod.withSecret(t, map[string][]byte{kube.SetupIdentityKey: b, kube.SetupPayloadKey: b})
		got := other.run(t, initTimeout, gw, "none")
		if diff := cmp.Diff(runResult{Stderr: "WORKSPACE_SETUP_FAILED\n", Code: 1}, got); diff != "" {
			t.Errorf("gateway container over a foreign identity (-want +got):\n%s", diff)
		}
	})

	// The real gateway, on this machine's loopback.
	name := "occ-images-gateway-" + owner
	args := append([]string{"--detach", "--name", name}, pod.dockerArgs(gw, "host")...)
	ctx := testutil.Context(t)
	if _, err := docker(ctx, runArgs(t, args...)...); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			// The container's standard error is the log's too.
			logs, _ := exec.Command("docker", "logs", "--tail", "40", name).CombinedOutput()
			t.Logf("gateway container log (last lines):\n%s", logs)
		}
		if _, err := docker(context.Background(), "rm", "-f", name); err != nil {
			t.Errorf("removing the gateway container: %v", err)
		}
	})
	upstream := fmt.Sprintf("http://127.0.0.1:%d", port)
	start := time.Now()
	waitReady(t, name, upstream)
	t.Logf("the gateway in %s answered /readyz after %v", gatewayImage, time.Since(start).Round(time.Millisecond))

	// OCC reads the file the setup wrote, through the route's stand-in.
	proxy := gwtest.NewProxy(t, gwtest.ProxyOptions{Upstream: upstream, Namespace: rev.NamespaceID, Agent: rev.AgentID})
	rctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	got, err := agentgw.New(agentgw.Options{}).Get(rctx, proxy.Target(t), "SOUL.md")
	if err != nil {
		t.Fatalf("Get SOUL.md from the gateway in the image: %v", err)
	}
	if got.Content != soul || got.Missing {
		t.Errorf("SOUL.md from the gateway: %+v, want the submitted text", got)
	}
}

// waitReady polls /readyz until it answers 200, failing at once when the
// container stops.
func waitReady(t *testing.T, container, upstream string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(testutil.Context(t), gatewayTimeout)
	defer cancel()
	hc := &http.Client{Timeout: 2 * time.Second, Transport: &http.Transport{Proxy: nil}}
	defer hc.CloseIdleConnections()
	err := testutil.Poll(ctx, func() (bool, error) {
		state, err := docker(ctx, "inspect", "--format", "{{.State.Status}} {{.State.ExitCode}}", container)
		if err != nil {
			return false, err
		}
		if s := strings.TrimSpace(state); !strings.HasPrefix(s, "running ") {
			return false, fmt.Errorf("the gateway container stopped (%s)", s)
		}
		resp, err := hc.Get(upstream + "/readyz")
		if err != nil {
			return false, nil
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK, nil
	})
	if err != nil {
		t.Fatalf("the gateway container never answered %s/readyz with 200 (limit %v): %v", upstream, gatewayTimeout, err)
	}
}

// loopbackConfig adjusts the rendered openclaw.json for a gateway on this
// machine's network: bind 127.0.0.1 and trust the loopback proxy.
func loopbackConfig(t *testing.T, native []byte) []byte {
	t.Helper()
	var doc map[string]any
	if err := json.Unmarshal(native, &doc); err != nil {
		t.Fatal(err)
	}
	gw := doc["gateway"].(map[string]any)
	gw["bind"] = "loopback"
	gw["trustedProxies"] = []string{"127.0.0.1"}
	gw["auth"].(map[string]any)["trustedProxy"].(map[string]any)["allowLoopback"] = true
	out, err := json.MarshalIndent(doc, "", "  ")
	if err != nil {
		t.Fatal(err)
	}
	return out
}

// pod runs a rendered Pod's containers with docker: each volume is a
// directory of the test, bind-mounted where the container mounts it.
type pod struct {
	spec      corev1.PodSpec
	root      string
	uid, gid  int64
	fsGroup   int64
	configMap map[string][]byte
	secret    map[string][]byte
	// volumes maps a volume's name to its directory.
	volumes map[string]string
}

func newPod(t *testing.T, spec corev1.PodSpec) *pod {
	t.Helper()
	sc := spec.SecurityContext
	if sc == nil || sc.RunAsUser == nil || sc.RunAsGroup == nil {
		t.Fatalf("the rendered Pod sets no user and group: %+v", sc)
	}
	p := &pod{spec: spec, root: t.TempDir(), uid: *sc.RunAsUser, gid: *sc.RunAsGroup, fsGroup: *sc.RunAsGroup, volumes: map[string]string{}}
	if sc.FSGroup != nil {
		p.fsGroup = *sc.FSGroup
	}
	return p
}

// makeVolumes creates a directory per volume with what the kubelet would
// put there: the ConfigMap's and the Secret's keys as files (mode as the
// volume says, group fsGroup), empty directories owned by the Pod's user
// for emptyDirs and the PVC (with the sub-paths the containers mount).
// The directories are the test's own, so the kubelet's fsGroup ownership
// change is done by owning them.
func (p *pod) makeVolumes(t *testing.T) {
	t.Helper()
	for _, v := range p.spec.Volumes {
		dir := filepath.Join(p.root, v.Name)
		switch {
		case v.ConfigMap != nil:
			p.writeKeys(t, dir, p.configMap, v.ConfigMap.DefaultMode)
		case v.Secret != nil:
			p.writeKeys(t, dir, p.secret, v.Secret.DefaultMode)
		case v.EmptyDir != nil:
			p.mkdir(t, dir, 0o777)
		case v.PersistentVolumeClaim != nil:
			p.mkdir(t, dir, 0o755)
		default:
			t.Fatalf("volume %s: a source this test does not know", v.Name)
		}
		p.volumes[v.Name] = dir
	}
	// The kubelet creates a mount's sub-path in its volume when missing.
	for _, c := range append(append([]corev1.Container{}, p.spec.InitContainers...), p.spec.Containers...) {
		for _, m := range c.VolumeMounts {
			if m.SubPath == "" {
				continue
			}
			if _, err := os.Stat(filepath.Join(p.volumes[m.Name], m.SubPath)); os.IsNotExist(err) {
				p.mkdir(t, filepath.Join(p.volumes[m.Name], m.SubPath), 0o755)
			}
		}
	}
}

// withSecret returns a copy of p whose Secret volume holds data instead.
func (p *pod) withSecret(t *testing.T, data map[string][]byte) *pod {
	t.Helper()
	q := *p
	q.volumes = map[string]string{}
	for k, v := range p.volumes {
		q.volumes[k] = v
	}
	for _, v := range p.spec.Volumes {
		if v.Secret != nil {
			dir := filepath.Join(p.root, v.Name+"-other")
			q.writeKeys(t, dir, data, v.Secret.DefaultMode)
			q.volumes[v.Name] = dir
		}
	}
	return &q
}

func (p *pod) mkdir(t *testing.T, dir string, mode os.FileMode) {
	t.Helper()
	if err := os.MkdirAll(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chmod(dir, mode); err != nil {
		t.Fatal(err)
	}
	if err := os.Chown(dir, int(p.uid), int(p.gid)); err != nil {
		t.Fatal(err)
	}
}

func (p *pod) writeKeys(t *testing.T, dir string, data map[string][]byte, mode *int32) {
	t.Helper()
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	m := os.FileMode(0o644)
	if mode != nil {
		m = os.FileMode(*mode)
	}
	for k, v := range data {
		path := filepath.Join(dir, k)
		if err := os.WriteFile(path, v, m); err != nil {
			t.Fatal(err)
		}
		// Owned by root, group fsGroup: what a Secret or ConfigMap volume
		// looks like to the Pod.
		if err := os.Chown(path, 0, int(p.fsGroup)); err != nil {
			t.Fatal(err)
		}
		if err := os.Chmod(path, m); err != nil {
			t.Fatal(err)
		}
	}
}

// dockerArgs is `docker run` for container c of the Pod on network:
// image, command (as the entry point: a Pod's command replaces it), the
// environment, user and group, read-only root, dropped capabilities, no
// privilege escalation, the memory limit and the volume mounts.
func (p *pod) dockerArgs(c corev1.Container, network string) []string {
	uid, gid := p.uid, p.gid
	if sc := c.SecurityContext; sc != nil && sc.RunAsUser != nil {
		uid = *sc.RunAsUser
	}
	if sc := c.SecurityContext; sc != nil && sc.RunAsGroup != nil {
		gid = *sc.RunAsGroup
	}
	args := []string{"--network", network, "--user", fmt.Sprintf("%d:%d", uid, gid)}
	if p.fsGroup != gid {
		args = append(args, "--group-add", strconv.FormatInt(p.fsGroup, 10))
	}
	if sc := c.SecurityContext; sc != nil {
		if sc.ReadOnlyRootFilesystem != nil && *sc.ReadOnlyRootFilesystem {
			args = append(args, "--read-only")
		}
		if sc.AllowPrivilegeEscalation != nil && !*sc.AllowPrivilegeEscalation {
			args = append(args, "--security-opt", "no-new-privileges")
		}
		if sc.Capabilities != nil {
			for _, drop := range sc.Capabilities.Drop {
				args = append(args, "--cap-drop", string(drop))
			}
		}
	}
	if mem, ok := c.Resources.Limits[corev1.ResourceMemory]; ok {
		args = append(args, "--memory", strconv.FormatInt(mem.Value(), 10))
	}
	for _, m := range c.VolumeMounts {
		src := p.volumes[m.Name]
		if m.SubPath != "" {
			src = filepath.Join(src, m.SubPath)
		}
		spec := src + ":" + m.MountPath
		if m.ReadOnly {
			spec += ":ro"
		}
		args = append(args, "--volume", spec)
	}
	// The values are paths and switches of the rendered spec; nothing
	// secret is in a Pod's environment (TestRenderDeployment checks that).
	for _, e := range c.Env {
		args = append(args, "--env", e.Name+"="+e.Value)
	}
	args = append(args, "--entrypoint", c.Command[0], c.Image)
	return append(append(args, c.Command[1:]...), c.Args...)
}

// runResult is what a container that ran to its end did.
type runResult struct {
	Stdout, Stderr string
	Code           int
}

// run runs container c to its end (docker run --rm) within timeout. The
// exit code is the container's (docker's own failures are 125-127).
func (p *pod) run(t *testing.T, timeout time.Duration, c corev1.Container, network string) runResult {
	t.Helper()
	ctx, cancel := context.WithTimeout(testutil.Context(t), timeout)
	defer cancel()
	name := fmt.Sprintf("occ-images-%s-%s", c.Name, owner)
	// Should the deadline pass, the CLI is killed but the container would
	// run on: remove it.
	defer func() { _, _ = docker(context.Background(), "rm", "-f", name) }()
	cmd := exec.CommandContext(ctx, "docker", runArgs(t, append([]string{"--rm", "--name", name}, p.dockerArgs(c, network)...)...)...)
	var stdout, stderr strings.Builder
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	err := cmd.Run()
	res := runResult{Stdout: stdout.String(), Stderr: stderr.String()}
	var exit *exec.ExitError
	switch {
	case errors.As(err, &exit):
		res.Code = exit.ExitCode()
	case err != nil:
		t.Fatalf("docker run of container %s: %v", c.Name, err)
	}
	if ctx.Err() != nil {
		t.Fatalf("container %s did not finish within %v", c.Name, timeout)
	}
	return res
}

func freePort(t *testing.T) int {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port
}
