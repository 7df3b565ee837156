package docker

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/client"

	"github.com/openclaw/occ/internal/compute"
)

// labelTestOwner marks every object this test binary creates, so that
// TestMain removes whatever a failed test left behind.
const labelTestOwner = "dev.openclaw.occ.test/owner"

var testOwner = func() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

// One gateway takes about 1 GB and a core for 10-20 s to start: the
// tests of this package run one gateway container at a time. Every test
// that starts one takes the slot first.
var gatewaySlot = make(chan struct{}, 1)

func acquireGateway(t testing.TB) {
	t.Helper()
	gatewaySlot <- struct{}{}
	t.Cleanup(func() { <-gatewaySlot })
}

// guardEnv makes the test binary act as the guard of its parent: it
// waits until its standard input (a pipe from the parent) closes, however
// the parent ended (go test -timeout, SIGKILL), then removes the parent's
// containers and volumes. Gateway containers restart on failure and do
// not die with the binary, so nothing else would.
const guardEnv = "OCC_DOCKER_TEST_GUARD"

func TestMain(m *testing.M) {
	if o := os.Getenv(guardEnv); o != "" {
		_, _ = io.Copy(io.Discard, os.Stdin)
		testOwner = o
		_ = removeTestObjects()
		os.Exit(0)
	}
	if os.Getenv("DOCKER_HOST") != "" {
		if err := startGuard(); err != nil {
			fmt.Fprintln(os.Stderr, "docker: starting the guard:", err)
			os.Exit(1)
		}
	}
	code := m.Run()
	if err := removeTestObjects(); err != nil {
		fmt.Fprintln(os.Stderr, "docker: cleanup:", err)
		code = 1
	}
	os.Exit(code)
}

// guardPipe is the write end of the guard's standard input, never written
// nor closed: the kernel closes it when this process ends. It must stay
// referenced, or the garbage collector would close it early.
var guardPipe *os.File

func startGuard() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), guardEnv+"="+testOwner)
	cmd.Stdin = r
	// Its own process group: a Ctrl-C of the test does not reach it.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		r.Close()
		w.Close()
		return err
	}
	r.Close()
	guardPipe = w
	go func() { _ = cmd.Wait() }()
	return nil
}

// removeTestObjects removes the containers and volumes of this binary;
// a leftover is reported as a failure (stop, retire and delete must leave
// nothing).
func removeTestObjects() error {
	if os.Getenv("DOCKER_HOST") == "" {
		return nil
	}
	c, err := client.New(client.FromEnv)
	if err != nil {
		return err
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	f := make(client.Filters).Add("label", labelTestOwner+"="+testOwner)
	var leftovers []string
	cs, err := c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return err
	}
	for _, x := range cs.Items {
		leftovers = append(leftovers, "container "+x.Names[0])
		_, _ = c.ContainerRemove(ctx, x.ID, client.ContainerRemoveOptions{Force: true})
	}
	vs, err := c.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return err
	}
	for _, v := range vs.Items {
		leftovers = append(leftovers, "volume "+v.Name)
		_, _ = c.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: true})
	}
	if len(leftovers) > 0 {
		return fmt.Errorf("the tests left %v behind (removed now)", leftovers)
	}
	return nil
}

// unavailable skips the test, or fails it under CI=true.
func unavailable(t testing.TB, why string) {
	t.Helper()
	const how = "start the engine with scripts/testenv/docker.sh start, build the images with scripts/images.sh, " +
		"and set DOCKER_HOST and OCC_TEST_IMAGES_DIR (scripts/test.sh does all of this)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("docker: the Docker driver tests cannot run (%s), and CI=true requires them: %s", why, how)
	}
	t.Skipf("docker: skipping (%s): %s", why, how)
}

// engine is the test engine's client with both images present (loaded
// from OCC_TEST_IMAGES_DIR when missing), once per binary.
var engine = sync.OnceValues(func() (*client.Client, error) {
	if os.Getenv("DOCKER_HOST") == "" {
		return nil, errUnavailable("DOCKER_HOST is not set")
	}
	c, err := client.New(client.FromEnv)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	if _, err := c.Ping(ctx, client.PingOptions{NegotiateAPIVersion: true}); err != nil {
		return nil, errUnavailable(fmt.Sprintf("no engine answers at %s: %v", os.Getenv("DOCKER_HOST"), err))
	}
	for img, tarball := range map[string]string{DefaultGatewayImage: "gateway.tar", DefaultOCCImage: "occ.tar"} {
		if _, err := c.ImageInspect(ctx, img); err == nil {
			continue
		} else if !cerrdefs.IsNotFound(err) {
			return nil, err
		}
		dir := os.Getenv("OCC_TEST_IMAGES_DIR")
		if dir == "" {
			return nil, errUnavailable(img + " is not loaded and OCC_TEST_IMAGES_DIR is not set")
		}
		f, err := os.Open(filepath.Join(dir, tarball))
		if err != nil {
			return nil, errUnavailable(err.Error())
		}
		res, err := c.ImageLoad(ctx, f, client.ImageLoadWithQuiet(true))
		if err == nil {
			_, _ = io.Copy(io.Discard, res)
			res.Close()
		}
		f.Close()
		if err != nil {
			return nil, fmt.Errorf("loading %s: %w", tarball, err)
		}
	}
	return c, nil
})

type errUnavailable string

func (e errUnavailable) Error() string { return string(e) }

func testEngine(t testing.TB) *client.Client {
	t.Helper()
	c, err := engine()
	if u, ok := err.(errUnavailable); ok {
		unavailable(t, string(u))
	}
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// newTestDriver returns a driver over a fresh DataDir (or dataDir), with
// this binary's owner label.
func newTestDriver(t testing.TB, dataDir string) *Driver {
	t.Helper()
	testEngine(t)
	if dataDir == "" {
		dataDir = t.TempDir()
	}
	d, err := New(Options{
		DataDir: dataDir,
		Labels:  map[string]string{labelTestOwner: testOwner},
		// A gateway start on a loaded 2-core machine.
		SetupTimeout: 3 * time.Minute,
		StopGrace:    5 * time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(d.Close)
	return d
}

// volumeDir is the host directory of one of the Agent's volumes (occ and
// the engine share the host: the supported topology).
func volumeDir(t testing.TB, d *Driver, name string) (string, bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	res, err := d.c.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return "", false
	}
	if err != nil {
		t.Fatalf("inspect volume %s: %v", name, err)
	}
	return res.Volume.Mountpoint, true
}

// isServing: the serving mark names rev and its container runs.
func isServing(t testing.TB, d *Driver, rev compute.Revision) bool {
	t.Helper()
	if id, _ := d.host(rev.AgentID).serving(); id != rev.ID {
		return false
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	cs, err := d.containers(ctx, agentFilter(rev.AgentID, roleGateway, rev.ID))
	if err != nil {
		t.Fatal(err)
	}
	return len(cs) == 1 && cs[0].State == "running"
}
