package docker

import (
	"archive/tar"
	"bytes"
	"context"
	"errors"
	"fmt"
	"time"

	cerrdefs "github.com/containerd/errdefs"
	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/api/types/mount"
	"github.com/moby/moby/api/types/volume"
	"github.com/moby/moby/client"
)

// Labels on every object the driver creates. Objects are found by these
// labels (and ids), never by name alone.
const (
	LabelManagedBy = "dev.openclaw.occ/managed-by"
	LabelNamespace = "dev.openclaw.occ/namespace"
	LabelAgent     = "dev.openclaw.occ/agent"
	LabelRevision  = "dev.openclaw.occ/revision"
	// LabelRevisionNumber is on gateway containers only.
	LabelRevisionNumber = "dev.openclaw.occ/revision-number"
	LabelRole           = "dev.openclaw.occ/role"

	// ManagedBy is LabelManagedBy's value.
	ManagedBy = "occ-docker"
)

// Roles (LabelRole).
const (
	roleState     = "state"
	roleWorkspace = "workspace"
	roleOCC       = "occ-binary"
	roleConfig    = "config"
	roleGateway   = "gateway"
	roleSetup     = "setup"
	roleInstall   = "install"
	roleFiles     = "files"
)

// labels returns the ownership labels of one object, plus the driver's
// extra labels.
func (d *Driver) labels(nsID, agentID, role, revID string) map[string]string {
	l := map[string]string{LabelManagedBy: ManagedBy, LabelNamespace: nsID, LabelAgent: agentID, LabelRole: role}
	if revID != "" {
		l[LabelRevision] = revID
	}
	for k, v := range d.o.Labels {
		l[k] = v
	}
	return l
}

// owned reports whether have carries every label of want.
func owned(have, want map[string]string) bool {
	for k, v := range want {
		if have[k] != v {
			return false
		}
	}
	return true
}

// agentFilter matches the Agent's objects, optionally of one role and
// revision.
func agentFilter(agentID, role, revID string) client.Filters {
	f := make(client.Filters).Add("label", LabelManagedBy+"="+ManagedBy, LabelAgent+"="+agentID)
	if role != "" {
		f.Add("label", LabelRole+"="+role)
	}
	if revID != "" {
		f.Add("label", LabelRevision+"="+revID)
	}
	return f
}

// containers lists the Agent's containers (running or not) matching the
// filter.
func (d *Driver) containers(ctx context.Context, f client.Filters) ([]container.Summary, error) {
	res, err := d.c.ContainerList(ctx, client.ContainerListOptions{All: true, Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker: list containers: %w", err)
	}
	return res.Items, nil
}

// volumes lists the volumes matching the filter.
func (d *Driver) volumes(ctx context.Context, f client.Filters) ([]volume.Volume, error) {
	res, err := d.c.VolumeList(ctx, client.VolumeListOptions{Filters: f})
	if err != nil {
		return nil, fmt.Errorf("docker: list volumes: %w", err)
	}
	return res.Items, nil
}

// removeContainer removes a container by id, running or not; absence is
// success.
func (d *Driver) removeContainer(ctx context.Context, id string) error {
	_, err := d.c.ContainerRemove(ctx, id, client.ContainerRemoveOptions{Force: true})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: remove container %s: %w", id, err)
	}
	return nil
}

// stopContainer stops a running container (SIGTERM, SIGKILL after the
// grace); a stopped or absent one is success. A container stopped this
// way is not restarted by its unless-stopped policy, not even when the
// engine restarts.
func (d *Driver) stopContainer(ctx context.Context, id string) error {
	grace := int(d.o.StopGrace / time.Second)
	_, err := d.c.ContainerStop(ctx, id, client.ContainerStopOptions{Timeout: &grace})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: stop container %s: %w", id, err)
	}
	return nil
}

// removeVolume removes a volume by name after checking it is the one
// expected (its labels); absence is success.
func (d *Driver) removeVolume(ctx context.Context, v volume.Volume) error {
	_, err := d.c.VolumeRemove(ctx, v.Name, client.VolumeRemoveOptions{Force: false})
	if err != nil && !cerrdefs.IsNotFound(err) {
		return fmt.Errorf("docker: remove volume %s: %w", v.Name, err)
	}
	return nil
}

// errMissing says a volume that must exist does not.
var errMissing = errors.New("missing")

// ensureVolume returns the volume called name, creating it with labels
// when absent unless create is false (then errMissing). A volume of that
// name without the labels belongs to someone else and is refused
// permanently.
func (d *Driver) ensureVolume(ctx context.Context, name string, labels map[string]string, create bool) error {
	res, err := d.c.VolumeInspect(ctx, name, client.VolumeInspectOptions{})
	switch {
	case err == nil:
		if !owned(res.Volume.Labels, labels) {
			return refusal(fmt.Sprintf("Docker volume %s exists but is not this Agent's (its labels differ); remove or rename it", name))
		}
		return nil
	case !cerrdefs.IsNotFound(err):
		return fmt.Errorf("docker: inspect volume %s: %w", name, err)
	case !create:
		return errMissing
	}
	if _, err := d.c.VolumeCreate(ctx, client.VolumeCreateOptions{Name: name, Labels: labels}); err != nil {
		return fmt.Errorf("docker: create volume %s: %w", name, err)
	}
	return nil
}

// tarEntry is one entry of an archive copied into a container.
type tarEntry struct {
	name string
	dir  bool
	mode int64
	uid  int
	data []byte
}

// archive builds a ustar archive. Ownership and modes come from the
// headers: the engine keeps them when copyUIDGID is off.
func archive(entries ...tarEntry) ([]byte, error) {
	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, e := range entries {
		h := &tar.Header{Name: e.name, Mode: e.mode, Uid: e.uid, Gid: e.uid, Format: tar.FormatUSTAR, ModTime: time.Unix(0, 0)}
		if e.dir {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(e.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, err
		}
		if !e.dir {
			if _, err := tw.Write(e.data); err != nil {
				return nil, err
			}
		}
	}
	if err := tw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// oneShot is a container that runs once to completion.
type oneShot struct {
	name   string
	create client.ContainerCreateOptions
	// files, when set, is copied to "/" before the start.
	files []byte
}

// oneShotExit is how a one-shot container ended.
type oneShotExit struct {
	code      int
	oomKilled bool
}

// runOnce creates the container, copies its files in, starts it and waits
// for its exit (bounded by timeout and ctx), and removes it whatever
// happened, on a context of its own so that a cancelled caller still
// removes it. It returns the exit status and whether the OOM killer hit it. A leftover container of the same
// name and labels that is not running is removed first; a running one is
// a retryable error (another occ may be using it).
func (d *Driver) runOnce(ctx context.Context, o oneShot, timeout time.Duration) (oneShotExit, error) {
	if err := d.clearLeftover(ctx, o.name, o.create.Config.Labels); err != nil {
		return oneShotExit{}, err
	}
	o.create.Name = o.name
	created, err := d.c.ContainerCreate(ctx, o.create)
	if err != nil {
		return oneShotExit{}, fmt.Errorf("docker: create container %s: %w", o.name, err)
	}
	defer func() {
		rctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := d.removeContainer(rctx, created.ID); err != nil {
			d.log.Warn("docker: could not remove a one-shot container", "container", o.name, "error", err)
		}
	}()
	if o.files != nil {
		if _, err := d.c.CopyToContainer(ctx, created.ID, client.CopyToContainerOptions{
			DestinationPath: "/", Content: bytes.NewReader(o.files),
		}); err != nil {
			return oneShotExit{}, fmt.Errorf("docker: copy into container %s: %w", o.name, err)
		}
	}
	wctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	wait := d.c.ContainerWait(wctx, created.ID, client.ContainerWaitOptions{Condition: container.WaitConditionNextExit})
	if _, err := d.c.ContainerStart(ctx, created.ID, client.ContainerStartOptions{}); err != nil {
		return oneShotExit{}, fmt.Errorf("docker: start container %s: %w", o.name, err)
	}
	select {
	case r := <-wait.Result:
		if r.Error != nil {
			return oneShotExit{}, fmt.Errorf("docker: wait for container %s: %s", o.name, r.Error.Message)
		}
		exit := oneShotExit{code: int(r.StatusCode)}
		// Before the deferred removal: the state goes with the container.
		if res, err := d.c.ContainerInspect(ctx, created.ID, client.ContainerInspectOptions{}); err == nil && res.Container.State != nil {
			exit.oomKilled = res.Container.State.OOMKilled
		}
		return exit, nil
	case err := <-wait.Error:
		if ctx.Err() != nil {
			return oneShotExit{}, fmt.Errorf("docker: container %s: %w", o.name, ctx.Err())
		}
		return oneShotExit{}, fmt.Errorf("docker: container %s did not finish within %s: %w", o.name, timeout, err)
	}
}

// clearLeftover removes a stopped container called name that carries
// labels (a one-shot an earlier occ could not remove).
func (d *Driver) clearLeftover(ctx context.Context, name string, labels map[string]string) error {
	res, err := d.c.ContainerInspect(ctx, name, client.ContainerInspectOptions{})
	if cerrdefs.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("docker: inspect container %s: %w", name, err)
	}
	c := res.Container
	if c.Config == nil || !owned(c.Config.Labels, map[string]string{LabelManagedBy: ManagedBy, LabelAgent: labels[LabelAgent], LabelRole: labels[LabelRole]}) {
		return refusal(fmt.Sprintf("Docker container %s exists but is not this Agent's; remove or rename it", name))
	}
	if c.State != nil && c.State.Running {
		return fmt.Errorf("docker: container %s is still running (another occ may be using it); retrying", name)
	}
	return d.removeContainer(ctx, c.ID)
}

// hardened is the host configuration every container of the driver
// shares: no capabilities, no privilege gain, bounded memory and
// processes.
func (d *Driver) hardened(network string, mounts []mount.Mount) *container.HostConfig {
	pids := int64(1024)
	return &container.HostConfig{
		NetworkMode: container.NetworkMode(network),
		CapDrop:     []string{"ALL"},
		SecurityOpt: []string{"no-new-privileges"},
		Mounts:      mounts,
		Resources: container.Resources{
			Memory:    int64(d.o.Config.MemoryMiB) << 20,
			PidsLimit: &pids,
		},
	}
}

func volumeMount(name, target string, readOnly bool) mount.Mount {
	return mount.Mount{Type: mount.TypeVolume, Source: name, Target: target, ReadOnly: readOnly}
}

// RoleGateway is LabelRole's value on gateway containers.
const RoleGateway = roleGateway

// WorkspaceVolume names the Agent's workspace volume.
func WorkspaceVolume(agentID string) string { return volumeName(agentID, "workspace") }
