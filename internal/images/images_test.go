package images

import (
	"archive/tar"
	"bytes"
	"context"
	"crypto/rand"
	"crypto/x509"
	"encoding/hex"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/testutil"
)

// EnvImagesDir names the directory holding occ.tar and gateway.tar.
const EnvImagesDir = "OCC_TEST_IMAGES_DIR"

// The fixed tags scripts/images.sh gives the last build of each image.
const (
	occImage     = "openclaw/occ:local"
	gatewayImage = "openclaw/occ-gateway:local"
)

// labelOwner marks every container a test binary starts, with a value of
// its own, so its guard can remove exactly those.
const labelOwner = "dev.openclaw.occ.images-test"

// guardEnv makes the test binary act as the guard of its parent (its value
// is the parent's owner label value).
const guardEnv = "OCC_IMAGES_TEST_GUARD"

// owner is this test binary's label value.
var owner = func() string {
	b := make([]byte, 8)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}()

func TestMain(m *testing.M) {
	if o := os.Getenv(guardEnv); o != "" {
		os.Exit(guardMain(o))
	}
	os.Exit(m.Run())
}

// guardMain waits until its standard input, a pipe from the test binary,
// closes (the binary ended, however it ended), then removes the binary's
// containers. A test binary killed by go test -timeout or SIGKILL runs no
// cleanup, and a container does not die with the docker CLI that started
// it.
func guardMain(o string) int {
	_, _ = io.Copy(io.Discard, os.Stdin)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, "docker", "ps", "-aq", "--filter", "label="+labelOwner+"="+o).Output()
	if err != nil {
		return 1
	}
	if ids := strings.Fields(string(out)); len(ids) > 0 {
		if exec.CommandContext(ctx, "docker", append([]string{"rm", "-f"}, ids...)...).Run() != nil {
			return 1
		}
	}
	return 0
}

// guardPipe is the write end of the guard's standard input. It is never
// written and never closed: the kernel closes it when this process ends,
// which is the guard's signal. It must stay referenced, or the garbage
// collector would close it early.
var guardPipe *os.File

var guardOnce = sync.OnceValue(func() error {
	r, w, err := os.Pipe()
	if err != nil {
		return err
	}
	cmd := exec.Command(os.Args[0])
	cmd.Env = append(os.Environ(), guardEnv+"="+owner)
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
})

// unavailable skips the test, or fails it under CI=true.
func unavailable(t testing.TB, why string) {
	t.Helper()
	const how = "build the images with `make images`, start the engine with scripts/testenv/docker.sh start, " +
		"and set " + EnvImagesDir + " and DOCKER_HOST (scripts/test.sh does all of this)"
	if os.Getenv("CI") == "true" {
		t.Fatalf("images: the image tests cannot run (%s), and CI=true requires them: %s", why, how)
	}
	t.Skipf("images: skipping (%s): %s", why, how)
}

// loaded is what loadImages did, once per test binary: docker load of
// both tarballs.
type loaded struct {
	// Tags are the tags each tarball loaded, by tarball name.
	Tags map[string][]string
}

var loadOnce = sync.OnceValues(func() (loaded, error) {
	dir := os.Getenv(EnvImagesDir)
	if dir == "" {
		return loaded{}, errUnavailable{EnvImagesDir + " is not set"}
	}
	if os.Getenv("DOCKER_HOST") == "" {
		return loaded{}, errUnavailable{"DOCKER_HOST is not set"}
	}
	if _, err := exec.LookPath("docker"); err != nil {
		return loaded{}, errUnavailable{"no docker command: " + err.Error()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if out, err := exec.CommandContext(ctx, "docker", "version", "--format", "{{.Server.Version}}").CombinedOutput(); err != nil {
		return loaded{}, errUnavailable{fmt.Sprintf("no engine answers at DOCKER_HOST=%s: %v: %s", os.Getenv("DOCKER_HOST"), err, bytes.TrimSpace(out))}
	}
	l := loaded{Tags: map[string][]string{}}
	for _, name := range []string{"occ", "gateway"} {
		path := filepath.Join(dir, name+".tar")
		if _, err := os.Stat(path); err != nil {
			return loaded{}, errUnavailable{err.Error()}
		}
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
		out, err := exec.CommandContext(ctx, "docker", "load", "-i", path).CombinedOutput()
		cancel()
		if err != nil {
			return loaded{}, fmt.Errorf("docker load -i %s: %v: %s", path, err, out)
		}
		for _, line := range strings.Split(string(out), "\n") {
			if tag, ok := strings.CutPrefix(line, "Loaded image: "); ok {
				l.Tags[name] = append(l.Tags[name], strings.TrimSpace(tag))
			}
		}
	}
	return l, nil
})

type errUnavailable struct{ why string }

func (e errUnavailable) Error() string { return e.why }

// loadImages loads both tarballs (once per test binary) and returns what
// they held; it skips or fails the test when the images or the engine are
// missing.
func loadImages(t *testing.T) loaded {
	t.Helper()
	l, err := loadOnce()
	var u errUnavailable
	if errors.As(err, &u) {
		unavailable(t, u.why)
	}
	if err != nil {
		t.Fatal(err)
	}
	return l
}

// docker runs the docker CLI and returns its standard output; a failure
// carries its standard error.
func docker(ctx context.Context, args ...string) (string, error) {
	cmd := exec.CommandContext(ctx, "docker", args...)
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return stdout.String(), fmt.Errorf("docker %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return stdout.String(), nil
}

// runArgs starts a `docker run` argument list with this binary's label;
// the guard is started first, so the container cannot outlive the binary.
func runArgs(t *testing.T, args ...string) []string {
	t.Helper()
	if err := guardOnce(); err != nil {
		t.Fatalf("starting the container guard: %v", err)
	}
	return append([]string{"run", "--label", labelOwner + "=" + owner}, args...)
}

// TestImageConfig checks each image's configuration: its user, entry
// point, working directory and environment, and that the tarballs carry
// the documented tags.
func TestImageConfig(t *testing.T) {
	l := loadImages(t)
	type config struct {
		User       string
		Entrypoint []string
		Cmd        []string
		WorkingDir string
		Env        []string
	}
	tests := []struct {
		image string
		want  config
	}{
		{occImage, config{
			User:       "65532:65532",
			Entrypoint: []string{"/usr/local/bin/occ"},
			WorkingDir: "/home/occ",
			Env:        []string{"PATH=/usr/local/bin", "HOME=/home/occ"},
		}},
		{gatewayImage, config{
			User:       "1000:1000",
			Entrypoint: []string{"/usr/local/bin/node", "/app/openclaw.mjs"},
			WorkingDir: "/home/node",
			Env:        []string{"PATH=/usr/local/bin:/usr/bin:/bin", "HOME=/home/node"},
		}},
	}
	for _, tt := range tests {
		out, err := docker(testutil.Context(t), "image", "inspect", "--format", "{{json .Config}}", tt.image)
		if err != nil {
			t.Fatal(err)
		}
		var got config
		if err := json.Unmarshal([]byte(out), &got); err != nil {
			t.Fatalf("docker image inspect %s: %v: %s", tt.image, err, out)
		}
		if diff := cmp.Diff(tt.want, got); diff != "" {
			t.Errorf("configuration of %s (-want +got):\n%s", tt.image, diff)
		}
	}

	// occ.tar: openclaw/occ:<version> and :local; gateway.tar: the
	// OpenClaw version and :local.
	if tags := l.Tags["occ"]; len(tags) != 2 || !contains(tags, occImage) || versionTag(tags) == "" {
		t.Errorf("occ.tar loaded %q, want openclaw/occ:<version> and %s", tags, occImage)
	}
	if diff := cmp.Diff([]string{"openclaw/occ-gateway:2026.9.6", gatewayImage}, l.Tags["gateway"]); diff != "" {
		t.Errorf("gateway.tar loaded tags (-want +got):\n%s", diff)
	}
}

func contains(list []string, s string) bool {
	for _, v := range list {
		if v == s {
			return true
		}
	}
	return false
}

// versionTag returns the version of the tags' openclaw/occ:<version>.
func versionTag(tags []string) string {
	for _, tag := range tags {
		if v, ok := strings.CutPrefix(tag, "openclaw/occ:"); ok && tag != occImage {
			return v
		}
	}
	return ""
}

// TestOCCImageRunsVersion runs `occ version` in the occ image, without a
// network: it prints the version the image is tagged with.
func TestOCCImageRunsVersion(t *testing.T) {
	l := loadImages(t)
	out, err := docker(testutil.Context(t), runArgs(t, "--rm", "--network", "none", occImage, "version")...)
	if err != nil {
		t.Fatal(err)
	}
	first, _, _ := strings.Cut(out, "\n")
	if want := "occ " + versionTag(l.Tags["occ"]); first != want {
		t.Errorf("docker run %s version: first line %q, want %q (all output %q)", occImage, first, want, out)
	}
}

// TestNoShell: neither image can start a shell.
func TestNoShell(t *testing.T) {
	loadImages(t)
	for _, image := range []string{occImage, gatewayImage} {
		for _, shell := range []string{"/bin/sh", "/usr/bin/sh", "/bin/bash", "/bin/dash", "/bin/busybox"} {
			out, err := docker(testutil.Context(t), runArgs(t, "--rm", "--network", "none", "--entrypoint", shell, image, "-c", "true")...)
			if err == nil || !strings.Contains(err.Error(), "no such file or directory") {
				t.Errorf("docker run --entrypoint %s %s: %v, output %q; want the start to fail: no such file", shell, image, err, out)
			}
		}
	}
}

// TestOCCImageFiles lists the occ image's file system (docker export of a
// created container): exactly occ, the two account files, the CA bundle,
// the user's home and /tmp, with their owners and modes.
func TestOCCImageFiles(t *testing.T) {
	loadImages(t)
	ctx := testutil.Context(t)
	if err := guardOnce(); err != nil {
		t.Fatalf("starting the container guard: %v", err)
	}
	id, err := docker(ctx, "create", "--label", labelOwner+"="+owner, "--network", "none", occImage)
	if err != nil {
		t.Fatal(err)
	}
	id = strings.TrimSpace(id)
	t.Cleanup(func() { _, _ = docker(context.Background(), "rm", "-f", id) })

	cmd := exec.CommandContext(ctx, "docker", "export", id)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	files := map[string][]byte{}
	tr := tar.NewReader(stdout)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatalf("reading docker export: %v", err)
		}
		name := strings.TrimSuffix(strings.TrimPrefix(h.Name, "./"), "/")
		if dockerAdded[name] || name == "" {
			continue
		}
		got[name] = fmt.Sprintf("%v %d:%d", h.FileInfo().Mode(), h.Uid, h.Gid)
		if h.Typeflag == tar.TypeReg && name != "usr/local/bin/occ" {
			b, err := io.ReadAll(tr)
			if err != nil {
				t.Fatal(err)
			}
			files[name] = b
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("docker export: %v: %s", err, stderr.String())
	}
	want := map[string]string{
		"etc":                               "drwxr-xr-x 0:0",
		"etc/group":                         "-rw-r--r-- 0:0",
		"etc/passwd":                        "-rw-r--r-- 0:0",
		"etc/ssl":                           "drwxr-xr-x 0:0",
		"etc/ssl/certs":                     "drwxr-xr-x 0:0",
		"etc/ssl/certs/ca-certificates.crt": "-rw-r--r-- 0:0",
		"home":                              "drwxr-xr-x 0:0",
		"home/occ":                          "drwx------ 65532:65532",
		"tmp":                               "dtrwxrwxrwx 0:0",
		"usr":                               "drwxr-xr-x 0:0",
		"usr/local":                         "drwxr-xr-x 0:0",
		"usr/local/bin":                     "drwxr-xr-x 0:0",
		"usr/local/bin/occ":                 "-rwxr-xr-x 0:0",
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("files of %s (-want +got):\n%s", occImage, diff)
	}
	if diff := cmp.Diff("root:x:0:0:root:/root:/sbin/nologin\nocc:x:65532:65532:occ:/home/occ:/sbin/nologin\n", string(files["etc/passwd"])); diff != "" {
		t.Errorf("/etc/passwd (-want +got):\n%s", diff)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(files["etc/ssl/certs/ca-certificates.crt"]) || strings.Count(string(files["etc/ssl/certs/ca-certificates.crt"]), "BEGIN CERTIFICATE") < 100 {
		t.Errorf("the CA bundle holds %d bytes, not the Debian bundle (100+ certificates)", len(files["etc/ssl/certs/ca-certificates.crt"]))
	}
}

// dockerAdded are the paths the engine adds to every container's file
// system (mount points and files it manages), which docker export lists.
var dockerAdded = map[string]bool{
	".dockerenv": true, "dev": true, "dev/console": true, "dev/pts": true, "dev/shm": true,
	"etc/hostname": true, "etc/hosts": true, "etc/mtab": true, "etc/resolv.conf": true,
	"proc": true, "sys": true,
}
