package server_test

import (
	"context"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	"github.com/moby/moby/client"

	"github.com/openclaw/occ/internal/compute/docker"
	"github.com/openclaw/occ/internal/testdb"
	"github.com/openclaw/occ/internal/testutil"
)

// dockerEnv is the whole server over the Docker Compute driver on the
// real test engine, with real OpenClaw gateway containers.
type dockerEnv struct {
	*deployEnv
	driver *docker.Driver
	c      *client.Client
}

// labelServerTest marks this binary's Docker objects, removed (and
// reported) when the test ends.
const labelServerTest = "dev.openclaw.occ.test/server"

func newDockerEnv(t testing.TB) *dockerEnv {
	t.Helper()
	skip := t.Skipf
	if os.Getenv("CI") == "true" {
		skip = t.Fatalf
	}
	if os.Getenv("DOCKER_HOST") == "" {
		skip("DOCKER_HOST is not set: start the engine with scripts/testenv/docker.sh start (scripts/test.sh does)")
	}
	c, err := client.New(client.FromEnv)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	for img, tarball := range map[string]string{docker.DefaultGatewayImage: "gateway.tar", docker.DefaultOCCImage: "occ.tar"} {
		if _, err := c.ImageInspect(ctx, img); err == nil {
			continue
		}
		dir := os.Getenv("OCC_TEST_IMAGES_DIR")
		if dir == "" {
			skip("image %s is not loaded and OCC_TEST_IMAGES_DIR is not set (scripts/images.sh builds it)", img)
		}
		if out, err := exec.CommandContext(ctx, "docker", "load", "-i", filepath.Join(dir, tarball)).CombinedOutput(); err != nil {
			t.Fatalf("docker load %s: %v: %s", tarball, err, out)
		}
	}
	owner := map[string]string{labelServerTest: t.Name()}
	d, err := docker.New(docker.Options{DataDir: t.TempDir(), Labels: owner, StopGrace: 5 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		d.Close()
		ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
		defer cancel()
		f := make(client.Filters).Add("label", labelServerTest+"="+t.Name())
		cs, _ := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
		for _, x := range cs.Items {
			_, _ = c.ContainerRemove(ctx, x.ID, client.ContainerRemoveOptions{Force: true})
		}
		vs, _ := c.VolumeList(ctx, client.VolumeListOptions{Filters: f})
		for _, v := range vs.Items {
			_, _ = c.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
		}
	})
	return &dockerEnv{deployEnv: newRealEnv(t, testdb.SQLite(t), d), driver: d, c: c}
}

// workspaceDir is the Agent's workspace volume on this host (occ and the
// engine share it: the supported topology).
func (de *dockerEnv) workspaceDir(agent string) string {
	de.t.Helper()
	res, err := de.c.VolumeInspect(context.Background(), docker.WorkspaceVolume(agent), client.VolumeInspectOptions{})
	if err != nil {
		de.t.Fatalf("workspace volume: %v", err)
	}
	return res.Volume.Mountpoint
}

// gateway returns the id and host pid of the Agent's running gateway
// container.
func (de *dockerEnv) gateway(agent string) (string, int) {
	de.t.Helper()
	ctx := context.Background()
	f := make(client.Filters).Add("label", docker.LabelAgent+"="+agent, docker.LabelRole+"="+docker.RoleGateway).Add("status", "running")
	cs, err := de.c.ContainerList(ctx, client.ContainerListOptions{Filters: f})
	if err != nil || len(cs.Items) != 1 {
		de.t.Fatalf("running gateway containers of %s: %d, %v", agent, len(cs.Items), err)
	}
	res, err := de.c.ContainerInspect(ctx, cs.Items[0].ID, client.ContainerInspectOptions{})
	if err != nil {
		de.t.Fatal(err)
	}
	return cs.Items[0].ID, res.Container.State.Pid
}

// TestDockerEndToEnd: an Agent with four files deployed through the API
// onto a real gateway container; the files in its volume, live reads and
// writes with compare-and-swap and the permission rules (the local
// driver's cases), a dead gateway answering 503 quickly, the restart
// policy bringing it back, and deletion removing its volumes.
func TestDockerEndToEnd(t *testing.T) {
	de := newDockerEnv(t)
	marker := "E2E-DOCKER-7a2f"
	files := map[string]string{
		"AGENTS.md":   "# Agents " + marker + "\r\nCRLF kept\r\n",
		"SOUL.md":     "",
		"IDENTITY.md": "name: Ünïcode " + marker,
		"USER.md":     "user  " + marker + "  \n",
	}
	agent := de.createAgent("docker-e2e", files)
	de.deployed(agent)
	ws := de.workspaceDir(agent)
	for name, want := range files {
		if got, err := os.ReadFile(filepath.Join(ws, name)); err != nil || string(got) != want {
			t.Errorf("volume %s = %q, %v; want %q", name, got, err, want)
		}
	}
	base := "/namespaces/" + de.ns + "/agents/" + agent + "/workspace/files/"
	var got struct {
		Content string `json:"content"`
	}
	de.must("GET", base+"IDENTITY.md", nil, de.admin, 200, &got)
	if got.Content != files["IDENTITY.md"] {
		t.Errorf("GET IDENTITY.md = %q", got.Content)
	}

	t.Run("files", func(t *testing.T) { liveFileCases(t, de.deployEnv, ws, agent) })

	t.Run("DeadGatewayAnswers503Quickly", func(t *testing.T) {
		id, _ := de.gateway(agent)
		grace := 2
		if _, err := de.c.ContainerStop(context.Background(), id, client.ContainerStopOptions{Timeout: &grace}); err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		code, env, _ := de.do("GET", base+"AGENTS.md", nil, de.admin)
		if code != 503 {
			t.Errorf("GET with the gateway stopped: %d %+v; want 503", code, env.Error)
		}
		if d := time.Since(start); d > 5*time.Second {
			t.Errorf("the 503 took %v", d)
		}
		if _, err := de.c.ContainerStart(context.Background(), id, client.ContainerStartOptions{}); err != nil {
			t.Fatal(err)
		}
		de.waitFiles(base)
	})

	t.Run("RestartPolicyRestartsTheGateway", func(t *testing.T) {
		_, pid := de.gateway(agent)
		if err := syscall.Kill(pid, syscall.SIGKILL); err != nil {
			t.Fatal(err)
		}
		de.waitFiles(base)
	})

	t.Run("permissions", func(t *testing.T) { liveFilePermissions(t, de.deployEnv, agent) })

	de.must("DELETE", "/namespaces/"+de.ns+"/agents/"+agent, nil, de.admin, 202, nil)
	testutil.Eventually(t, 2*time.Minute, func() bool {
		code, _, _ := de.do("GET", "/namespaces/"+de.ns+"/agents/"+agent, nil, de.admin)
		return code == 404
	}, "the Agent is deleted")
	f := make(client.Filters).Add("label", docker.LabelAgent+"="+agent)
	cs, _ := de.c.ContainerList(context.Background(), client.ContainerListOptions{All: true, Filters: f})
	vs, _ := de.c.VolumeList(context.Background(), client.VolumeListOptions{Filters: f})
	if len(cs.Items)+len(vs.Items) != 0 {
		t.Errorf("after delete: %d containers, %d volumes of the Agent", len(cs.Items), len(vs.Items))
	}
}

// waitFiles waits (2 min at most) until GET of AGENTS.md answers 200
// again: the gateway is back.
func (de *dockerEnv) waitFiles(base string) {
	de.t.Helper()
	testutil.Eventually(de.t, 2*time.Minute, func() bool {
		code, _, _ := de.do("GET", base+"AGENTS.md", nil, de.admin)
		return code == 200
	}, "the gateway serves files again")
}
