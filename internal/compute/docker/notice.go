package docker

import (
	"context"
	"sync"
	"time"

	"github.com/openclaw/occ/internal/compute"
)

// Readiness notices (compute.ReadyNotifier). The driver keeps no
// supervisor, so when PrepareRevision answers pending for a gateway
// container it started or found starting, a watcher probes the gateway's
// /readyz every watchInterval and tells the worker when it first answers.
// One watcher per Agent runs at a time; it gives up after watchTimeout (a
// later pending PrepareRevision starts another) and ends with Close. A
// watcher only sends a hint: it changes nothing, and the worker's own
// recheck still comes if no notice does.

const (
	watchInterval = 250 * time.Millisecond
	watchTimeout  = 5 * time.Minute
)

type watchers struct {
	mu     sync.Mutex
	notify func(namespaceID, agentID string)
	active map[string]bool // Agent ids being watched
	ctx    context.Context // ends with Close
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

func newWatchers() *watchers {
	ctx, cancel := context.WithCancel(context.Background())
	return &watchers{active: map[string]bool{}, ctx: ctx, cancel: cancel}
}

// NotifyReady registers the callback told when a starting gateway first
// answers its readiness probe (compute.ReadyNotifier). It is called from
// a watcher's goroutine and must not block.
func (d *Driver) NotifyReady(notify func(namespaceID, agentID string)) {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	d.w.notify = notify
}

// watchReady starts the watcher of rev's gateway on port, unless no one
// listens for notices, the Agent is watched already or the driver closed.
func (d *Driver) watchReady(rev compute.Revision, port int) {
	d.w.mu.Lock()
	defer d.w.mu.Unlock()
	if d.w.notify == nil || d.w.active[rev.AgentID] || d.w.ctx.Err() != nil {
		return
	}
	d.w.active[rev.AgentID] = true
	d.w.wg.Add(1)
	go func() {
		defer d.w.wg.Done()
		defer func() {
			d.w.mu.Lock()
			delete(d.w.active, rev.AgentID)
			d.w.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(d.w.ctx, watchTimeout)
		defer cancel()
		t := time.NewTicker(watchInterval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if d.ready(ctx, port) { // bounded by d.http's 2 s timeout
				d.w.mu.Lock()
				notify := d.w.notify
				d.w.mu.Unlock()
				if notify != nil {
					notify(rev.NamespaceID, rev.AgentID)
				}
				return
			}
		}
	}()
}

// closeWatchers stops every watcher and waits for them.
func (d *Driver) closeWatchers() {
	d.w.cancel()
	d.w.wg.Wait()
}
