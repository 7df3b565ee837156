// Package readywatch owns the readiness watchers of the Compute drivers
// that keep no supervisor of their own (Docker, SSH): after such a driver's
// PrepareRevision answered pending for a gateway it started or found
// starting, a watcher probes the gateway until it first answers and then
// sends the driver's compute.ReadyNotifier notice, so the worker rechecks
// at once instead of at its backoff.
//
// Failure semantics: a watcher only sends a hint. It changes nothing, a
// probe that fails is tried again at the next tick, and a watcher that
// gives up (its timeout, Stop) costs only the worker's own recheck wait.
package readywatch

import (
	"context"
	"sync"
	"time"
)

// Watchers runs at most one watcher per Agent. The zero value is not
// usable; create it with New.
type Watchers struct {
	interval, timeout time.Duration

	mu     sync.Mutex
	notify func(namespaceID, agentID string)
	active map[string]bool // Agent ids being watched
	ctx    context.Context // ends with Stop
	cancel context.CancelFunc
	wg     sync.WaitGroup
}

// New returns watchers that probe every interval and give up after
// timeout.
func New(interval, timeout time.Duration) *Watchers {
	ctx, cancel := context.WithCancel(context.Background())
	return &Watchers{interval: interval, timeout: timeout, active: map[string]bool{}, ctx: ctx, cancel: cancel}
}

// SetNotify registers the callback a watcher calls when its probe first
// succeeds (a driver's compute.ReadyNotifier.NotifyReady); nil turns the
// watchers off. It is called from a watcher's goroutine and must not
// block.
func (w *Watchers) SetNotify(notify func(namespaceID, agentID string)) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.notify = notify
}

// Watch starts the Agent's watcher, unless no callback is set, the Agent
// is watched already or Stop was called. probe must honour its context
// and bound itself; it is called every interval until it reports true.
func (w *Watchers) Watch(namespaceID, agentID string, probe func(context.Context) bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.notify == nil || w.active[agentID] || w.ctx.Err() != nil {
		return
	}
	w.active[agentID] = true
	w.wg.Add(1)
	go func() {
		defer w.wg.Done()
		defer func() {
			w.mu.Lock()
			delete(w.active, agentID)
			w.mu.Unlock()
		}()
		ctx, cancel := context.WithTimeout(w.ctx, w.timeout)
		defer cancel()
		t := time.NewTicker(w.interval)
		defer t.Stop()
		for {
			select {
			case <-ctx.Done():
				return
			case <-t.C:
			}
			if probe(ctx) {
				w.mu.Lock()
				notify := w.notify
				w.mu.Unlock()
				if notify != nil {
					notify(namespaceID, agentID)
				}
				return
			}
		}
	}()
}

// Stop ends every watcher and waits for them; later Watch calls do
// nothing.
func (w *Watchers) Stop() {
	w.cancel()
	w.wg.Wait()
}
