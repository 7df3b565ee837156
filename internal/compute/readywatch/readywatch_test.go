package readywatch

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// recorder collects notices.
type recorder struct {
	mu  sync.Mutex
	got []string
	ch  chan struct{}
}

func newRecorder() *recorder { return &recorder{ch: make(chan struct{}, 16)} }

func (r *recorder) notify(namespaceID, agentID string) {
	r.mu.Lock()
	r.got = append(r.got, namespaceID+"/"+agentID)
	r.mu.Unlock()
	r.ch <- struct{}{}
}

func (r *recorder) await(t *testing.T) {
	t.Helper()
	select {
	case <-r.ch:
	case <-time.After(30 * time.Second):
		t.Fatal("no notice in 30 s")
	}
}

func (r *recorder) notices() []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]string(nil), r.got...)
}

// TestNoticeOnceReady: the probe is retried until it succeeds, then the
// notice is sent once, with the Agent's ids, and the watcher ends.
func TestNoticeOnceReady(t *testing.T) {
	w := New(time.Millisecond, time.Minute)
	defer w.Stop()
	r := newRecorder()
	w.SetNotify(r.notify)
	var probes atomic.Int32
	w.Watch("ns_1", "agt_1", func(context.Context) bool { return probes.Add(1) >= 3 })
	r.await(t)
	w.Stop() // waits for the watcher: no probe after this
	if diff := cmp.Diff([]string{"ns_1/agt_1"}, r.notices()); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
	if n := probes.Load(); n != 3 {
		t.Errorf("probes = %d, want 3 (until the first success)", n)
	}
}

// TestOneWatcherPerAgent: a second Watch of a watched Agent starts
// nothing; another Agent gets its own watcher; once a watcher ended, the
// Agent can be watched again.
func TestOneWatcherPerAgent(t *testing.T) {
	w := New(time.Millisecond, time.Minute)
	defer w.Stop()
	r := newRecorder()
	w.SetNotify(r.notify)
	release := make(chan struct{})
	var firstProbes, secondProbes atomic.Int32
	w.Watch("ns", "a", func(ctx context.Context) bool {
		firstProbes.Add(1)
		select {
		case <-release:
			return true
		default:
			return false
		}
	})
	w.Watch("ns", "a", func(context.Context) bool { secondProbes.Add(1); return true })
	w.Watch("ns", "b", func(context.Context) bool { return true })
	r.await(t) // b's
	close(release)
	r.await(t) // a's, from the first watcher
	if n := secondProbes.Load(); n != 0 {
		t.Errorf("the second watcher of a probed %d times, want never started", n)
	}
	// a's watcher has ended (or is about to): watching again works.
	deadline := time.Now().Add(30 * time.Second)
	for {
		w.Watch("ns", "a", func(context.Context) bool { secondProbes.Add(1); return true })
		if secondProbes.Load() > 0 || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	r.await(t)
	got := r.notices()
	if diff := cmp.Diff([]string{"ns/b", "ns/a", "ns/a"}, got); diff != "" {
		t.Errorf("notices (-want +got):\n%s", diff)
	}
}

// watching reports whether w runs a watcher for agentID.
func watching(w *Watchers, agentID string) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.active[agentID]
}

// TestNoNotifyNoWatcher: without a callback, Watch starts nothing; with
// one, the same call does.
func TestNoNotifyNoWatcher(t *testing.T) {
	w := New(time.Millisecond, time.Minute)
	defer w.Stop()
	never := func(context.Context) bool { return false }
	w.Watch("ns", "a", never)
	if watching(w, "a") {
		t.Error("Watch without a callback started a watcher")
	}
	w.SetNotify(newRecorder().notify)
	w.Watch("ns", "a", never)
	if !watching(w, "a") {
		t.Error("Watch with a callback started no watcher")
	}
}

// TestStopAndTimeoutEndWatchers: Stop ends a watcher whose probe never
// succeeds (and returns only then); a watcher past its timeout ends by
// itself; neither sends a notice, and Watch after Stop does nothing.
func TestStopAndTimeoutEndWatchers(t *testing.T) {
	r := newRecorder()
	never := func(ctx context.Context) bool { return false }

	w := New(time.Millisecond, time.Hour)
	w.SetNotify(r.notify)
	w.Watch("ns", "a", never)
	w.Stop() // returns once a's watcher ended
	if watching(w, "a") {
		t.Error("a's watcher still runs after Stop returned")
	}
	w.Watch("ns", "b", never)
	if watching(w, "b") {
		t.Error("Watch after Stop started a watcher")
	}

	short := New(time.Millisecond, 20*time.Millisecond)
	short.SetNotify(r.notify)
	var probes atomic.Int32
	short.Watch("ns", "c", func(context.Context) bool { probes.Add(1); return false })
	deadline := time.Now().Add(30 * time.Second)
	for { // the watcher ends at its timeout
		active := watching(short, "c")
		if !active || time.Now().After(deadline) {
			if active {
				t.Fatal("the watcher was still running 30 s after its 20 ms timeout")
			}
			break
		}
		time.Sleep(time.Millisecond)
	}
	short.Stop()
	if got := r.notices(); len(got) != 0 {
		t.Errorf("notices from watchers that never saw the gateway ready: %q", got)
	}
	if probes.Load() == 0 {
		t.Error("the short watcher never probed")
	}
}
