package docker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"time"

	"github.com/moby/moby/api/types/container"
	"github.com/moby/moby/client"

	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/compute/agentdir"
)

func bytesReader(b []byte) io.Reader { return bytes.NewReader(b) }

// ActivateRevision records rev as the Agent's serving revision, the one
// Recover starts. Its container must be running (it may be restarting);
// otherwise the call fails, retryably. Activating a revision older than
// the serving one changes nothing. A pending setup in rc leaves no copy:
// the one-shot container that carried it is already gone.
func (d *Driver) ActivateRevision(ctx context.Context, rev compute.Revision, rc compute.RevisionContext) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("docker: activate: %w", err)
	}
	if err := checkRevision(rev); err != nil {
		return err
	}
	unlock, err := d.lock(ctx, rev.AgentID)
	if err != nil {
		return fmt.Errorf("docker: activate: %w", err)
	}
	defer unlock()
	h := d.host(rev.AgentID)
	serving, n := h.serving()
	if serving == rev.ID || (serving != "" && n > rev.Number) {
		return nil
	}
	cs, err := d.containers(ctx, agentFilter(rev.AgentID, roleGateway, rev.ID))
	if err != nil {
		return err
	}
	if len(cs) == 0 || (cs[0].State != container.StateRunning && cs[0].State != container.StateRestarting) {
		return fmt.Errorf("docker: activate revision %s: its gateway container is not running; prepare it first", rev.ID)
	}
	if err := h.writeServing(rev.ID, rev.Number); err != nil {
		return err
	}
	d.log.Info("docker: revision serving", "agent", rev.AgentID, "revision", rev.ID, "number", rev.Number)
	return nil
}

// StopRevision stops rev's gateway container (found by its labels) and
// clears the serving mark when it names rev. Volumes, token and port are
// kept; other revisions are left alone.
func (d *Driver) StopRevision(ctx context.Context, rev compute.Revision) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("docker: stop: %w", err)
	}
	if err := checkRevision(rev); err != nil {
		return err
	}
	unlock, err := d.lock(ctx, rev.AgentID)
	if err != nil {
		return fmt.Errorf("docker: stop: %w", err)
	}
	defer unlock()
	return d.stopRevision(ctx, rev)
}

func (d *Driver) stopRevision(ctx context.Context, rev compute.Revision) error {
	h := d.host(rev.AgentID)
	if serving, _ := h.serving(); serving == rev.ID {
		if err := h.clearServing(); err != nil {
			return err
		}
	}
	return d.stopRevisionGateway(ctx, rev)
}

// stopRevisionGateway stops rev's gateway container(s), if any.
func (d *Driver) stopRevisionGateway(ctx context.Context, rev compute.Revision) error {
	cs, err := d.containers(ctx, agentFilter(rev.AgentID, roleGateway, rev.ID))
	if err != nil {
		return err
	}
	for _, c := range cs {
		if err := d.stopContainer(ctx, c.ID); err != nil {
			return err
		}
	}
	return nil
}

// RetireRevision stops rev like StopRevision, then removes its container
// and its configuration volume, by their revision label and id. It never
// touches another revision's objects.
func (d *Driver) RetireRevision(ctx context.Context, rev compute.Revision) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("docker: retire: %w", err)
	}
	if err := checkRevision(rev); err != nil {
		return err
	}
	unlock, err := d.lock(ctx, rev.AgentID)
	if err != nil {
		return fmt.Errorf("docker: retire: %w", err)
	}
	defer unlock()
	if err := d.stopRevision(ctx, rev); err != nil {
		return err
	}
	cs, err := d.containers(ctx, agentFilter(rev.AgentID, "", rev.ID))
	if err != nil {
		return err
	}
	for _, c := range cs {
		if err := d.removeContainer(ctx, c.ID); err != nil {
			return err
		}
	}
	vs, err := d.volumes(ctx, agentFilter(rev.AgentID, "", rev.ID))
	if err != nil {
		return err
	}
	for _, v := range vs {
		if err := d.removeVolume(ctx, v); err != nil {
			return err
		}
	}
	return nil
}

// DeleteAgent removes every container and volume labelled with the Agent
// (workspace and state included) and its host directory. Absence is
// success.
func (d *Driver) DeleteAgent(ctx context.Context, a compute.Agent) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("docker: delete agent: %w", err)
	}
	if a.ID == "" {
		return compute.Permanent(compute.CodeRuntimeFailed, errors.New("docker: agent id is empty"))
	}
	unlock, err := d.lock(ctx, a.ID)
	if err != nil {
		return fmt.Errorf("docker: delete agent: %w", err)
	}
	defer unlock()
	h := d.host(a.ID)
	if err := h.clearServing(); err != nil {
		return err
	}
	cs, err := d.containers(ctx, agentFilter(a.ID, "", ""))
	if err != nil {
		return err
	}
	for _, c := range cs {
		if err := d.removeContainer(ctx, c.ID); err != nil {
			return err
		}
	}
	vs, err := d.volumes(ctx, agentFilter(a.ID, "", ""))
	if err != nil {
		return err
	}
	for _, v := range vs {
		if err := d.removeVolume(ctx, v); err != nil {
			return err
		}
	}
	if err := os.RemoveAll(string(h.Dir)); err != nil {
		return fmt.Errorf("docker: delete agent %s: %w", a.ID, err)
	}
	d.log.Info("docker: agent deleted", "agent", a.ID)
	return nil
}

// Endpoint returns ws://127.0.0.1:<port>/ and the Agent's token file. It
// needs the port the first PrepareRevision assigns; it says nothing about
// readiness.
func (d *Driver) Endpoint(ctx context.Context, rev compute.Revision) (compute.Endpoint, error) {
	if err := ctx.Err(); err != nil {
		return compute.Endpoint{}, fmt.Errorf("docker: endpoint: %w", err)
	}
	if err := checkRevision(rev); err != nil {
		return compute.Endpoint{}, err
	}
	h := d.host(rev.AgentID)
	port := h.port()
	if port == 0 {
		return compute.Endpoint{}, fmt.Errorf("docker: endpoint of agent %s: no port assigned yet (the revision was never prepared)", rev.AgentID)
	}
	return compute.Endpoint{
		URL:       fmt.Sprintf("ws://127.0.0.1:%d/", port),
		Transport: compute.Direct,
		TokenFile: h.Path(agentdir.FileToken),
	}, nil
}

// Recover re-attaches after an occ restart. The containers never depended
// on occ (the engine runs and restarts them), so it only starts the
// serving revision's container of each Agent when it is not running (the
// engine restarted, or it was stopped behind occ's back). A problem with
// one Agent is logged and does not stop the others.
func (d *Driver) Recover(ctx context.Context) error {
	entries, err := os.ReadDir(d.root)
	if err != nil {
		return fmt.Errorf("docker: recover: %w", err)
	}
	for _, e := range entries {
		if err := ctx.Err(); err != nil {
			return fmt.Errorf("docker: recover: %w", err)
		}
		h := hostDir{agentdir.Dir(filepath.Join(d.root, e.Name()))}
		info, err := h.Info()
		if err != nil || agentdir.Hash(info.AgentID) != e.Name() {
			continue
		}
		serving, _ := h.serving()
		if serving == "" {
			continue
		}
		// Each Agent's engine calls are bounded: Recover runs at start,
		// on a context with no deadline, and an engine that accepts
		// connections but never answers would otherwise hold occ's start
		// for ever. One that runs out is logged like any other failure.
		actx, cancel := context.WithTimeout(ctx, recoverAgentTimeout)
		err = d.recoverAgent(actx, info.AgentID, serving)
		cancel()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("docker: recover: %w", ctx.Err())
			}
			d.log.Warn("docker: recover agent", "agent", info.AgentID, "error", err)
		}
	}
	return nil
}

// recoverAgentTimeout bounds one Agent's recovery: listing its
// containers, stopping the others (each within its stop grace) and
// starting the serving one. A variable for the test of a silent engine.
var recoverAgentTimeout = 2 * time.Minute

func (d *Driver) recoverAgent(ctx context.Context, agentID, serving string) error {
	unlock, err := d.lock(ctx, agentID)
	if err != nil {
		return err
	}
	defer unlock()
	return d.startServing(ctx, agentID, serving)
}

// startServing starts the serving revision's container when it is not
// running, after stopping the Agent's other gateways. The caller holds the
// Agent's lock.
func (d *Driver) startServing(ctx context.Context, agentID, serving string) error {
	cs, err := d.containers(ctx, agentFilter(agentID, roleGateway, serving))
	if err != nil {
		return err
	}
	if len(cs) == 0 {
		return fmt.Errorf("docker: the serving revision %s has no container", serving)
	}
	c := cs[0]
	if c.State == container.StateRunning || c.State == container.StateRestarting {
		d.log.Info("docker: re-attached gateway", "agent", agentID, "revision", serving, "container", c.ID)
		return nil
	}
	if err := d.stopGateways(ctx, agentID, c.ID); err != nil {
		return err
	}
	if _, err := d.c.ContainerStart(ctx, c.ID, client.ContainerStartOptions{}); err != nil {
		return fmt.Errorf("docker: start the serving gateway: %w", err)
	}
	d.log.Info("docker: started the serving gateway", "agent", agentID, "revision", serving, "container", c.ID)
	return nil
}
