package server

import (
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"sync"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/openclaw/occ/internal/pageout"
)

// DefaultGCPercent is the garbage collector's target that occ server and
// occ worker run with when the GOGC environment variable is not set: the
// heap may grow to five times what is live before the next collection
// (Go's default, 100, lets it double). OCC's live heap is small (tens of
// MB), so at Go's default a busy server collected many times a second and
// the collector took a quarter to a third of each API request's CPU
// (make bench on SQLite: CPU per request 25-35 % lower at 400,
// docs/performance.md). The cost is memory between collections, bounded
// by five times the live heap; the idle figures are unchanged, since an
// idle server does not allocate and start-up ends with a collection.
const DefaultGCPercent = 400

// MinHeapGoal is the least heap size at which the collector starts a
// cycle when GOGC is not set: the target is DefaultGCPercent over the live
// heap, but never below this. OCC's live heap is a few MB, so at 400 alone
// a busy server still collected about 25 times a second (a heap goal of
// 25-29 MB against hundreds of MB allocated per second), and every
// request in flight during a cycle waited longer: at concurrency 16 on two
// cores the collector was most of the API's p99 beyond its CPU (the API
// rows of make bench: p99s 0.7-1.4 ms lower with this floor, about as much
// as with the collector off; docs/performance.md). The cost is up to this
// much heap between collections on a busy server; an idle one allocates
// nothing, and a memory limit (MemoryLimitRatio) still makes the collector
// run earlier.
const MinHeapGoal = 64 << 20

// maxGCPercent bounds the target the heap floor sets: a live heap under
// MinHeapGoal/100 (never OCC's) is collected at 100 times its size.
const maxGCPercent = 10_000

// MemoryLimitRatio is the share of the container's memory limit (its
// cgroup's) that occ server and occ worker give the Go runtime as its soft
// memory limit when GOMEMLIMIT is not set: near the limit the collector
// runs more often instead of letting the heap grow to GOGC's target and
// the container be killed for memory. The rest is for what the runtime
// does not count (the binary's pages, the kernel's buffers).
const MemoryLimitRatio = 0.9

// TuneGC sets the collector's target to DefaultGCPercent with a heap
// floor of MinHeapGoal unless GOGC is set, which the operator's value then
// is (Go reads it at start), and the soft memory limit to MemoryLimitRatio
// of the cgroup's memory limit unless GOMEMLIMIT is set (or AUTOMEMLIMIT
// is "off", or a ratio of its own), and logs both. Without a cgroup memory
// limit (a plain process on a host) the runtime keeps no soft limit, as Go
// does by default; a cgroup that cannot be read is logged and changes
// nothing. The heap floor is kept for the life of the process; a second
// call in the same process starts no second one.
func TuneGC(logger *slog.Logger) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		logger.Info("garbage collector target from GOGC", "gogc", v)
	} else {
		debug.SetGCPercent(DefaultGCPercent)
		floor.mu.Lock()
		if floor.stop == nil {
			floor.stop = startHeapFloor(DefaultGCPercent, MinHeapGoal)
		}
		floor.mu.Unlock()
		logger.Info("garbage collector target", "gogc", DefaultGCPercent, "minHeapGoalMB", MinHeapGoal>>20)
	}
	tuneMemoryLimit(logger, memlimit.FromCgroup)
}

// floor holds the stop function of the process's heap floor, nil while
// none runs.
var floor struct {
	mu   sync.Mutex
	stop func()
}

// stopHeapFloor stops the process's heap floor, if one runs, leaving the
// target at its last value; the next TuneGC starts a new one. For tests,
// which call TuneGC many times in one process.
func stopHeapFloor() {
	floor.mu.Lock()
	defer floor.mu.Unlock()
	if floor.stop != nil {
		floor.stop()
		floor.stop = nil
	}
}

// gcPercentFor is the collector's target for a live heap of live bytes:
// percent, or more when that would start the next cycle below floor
// bytes of heap, at most maxGCPercent.
func gcPercentFor(live uint64, percent int, floor uint64) int {
	if live == 0 {
		return maxGCPercent
	}
	if live >= floor {
		return percent
	}
	// The next cycle starts at live * (1 + p/100): p = (floor - live) *
	// 100 / live, rounded up.
	p := (floor - live) * 100
	need := p / live
	if p%live != 0 {
		need++
	}
	return max(percent, int(min(need, maxGCPercent)))
}

// heapFloor re-sets the collector's target after every cycle from the
// heap that cycle found live (gcPercentFor). It learns of a cycle from the
// cleanup of an object it allocates and drops each time (runtime.AddCleanup
// runs it once a cycle has found the object unreachable), so it costs
// nothing between cycles and never runs on an idle process.
type heapFloor struct {
	percent int
	floor   uint64
	// mu serializes the cycles' updates (cleanups may run concurrently)
	// and stop: once stop returns, no update is in progress or to come.
	mu      sync.Mutex
	stopped bool
	sample  []metrics.Sample
}

// sentinel is the object whose cleanup marks a cycle. It holds a pointer
// so that it is never batched with other objects by the tiny allocator,
// whose batches may keep a dropped object from being reported.
type sentinel struct{ _ *int }

// startHeapFloor starts a heapFloor and returns its stop function, after
// which the target stays at its last value.
func startHeapFloor(percent int, floor uint64) (stop func()) {
	h := &heapFloor{percent: percent, floor: floor, sample: []metrics.Sample{{Name: "/gc/heap/live:bytes"}}}
	h.arm()
	return func() {
		h.mu.Lock()
		h.stopped = true
		h.mu.Unlock()
	}
}

func (h *heapFloor) arm() {
	runtime.AddCleanup(&sentinel{}, func(h *heapFloor) { h.cycled() }, h)
}

func (h *heapFloor) cycled() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.stopped {
		return
	}
	metrics.Read(h.sample)
	live := h.sample[0].Value.Uint64()
	// SetGCPercent recomputes the goal under the heap lock, without
	// stopping the world: a few microseconds once per cycle.
	want := gcPercentFor(live, h.percent, h.floor)
	if got := debug.SetGCPercent(want); got < 0 {
		// The collector was switched off meanwhile (debug.SetGCPercent(-1)
		// by a test or a profile): leave it so and stop.
		debug.SetGCPercent(got)
		return
	}
	h.arm()
}

// tuneMemoryLimit is TuneGC's memory half, with the limit's source as a
// parameter for tests.
func tuneMemoryLimit(logger *slog.Logger, source memlimit.Provider) {
	limit, err := memlimit.Set(memlimit.WithRatio(MemoryLimitRatio), memlimit.WithProvider(source))
	switch {
	case err != nil:
		logger.Info("memory limit unchanged: the cgroup's limit could not be read", "err", err)
	case limit == math.MaxInt64:
		logger.Info("memory limit: none (no GOMEMLIMIT and no cgroup memory limit)")
	default:
		logger.Info("memory limit", "gomemlimit", limit)
	}
}

// releaseStartupPages gives the kernel back the pages of the occ binary
// that start-up touched (package pageout): once occ server is listening or
// occ worker is about to run, what the process keeps resident of its 80 MB
// binary is what it uses from then on, faulted back in on first use
// (measured: file-backed RSS of an idle server about 40 MB before, 8-18
// MB two seconds after; docs/performance.md). It changes nothing the process computes,
// so a kernel that refuses (before Linux 5.4, or not Linux) is logged and
// ignored.
func releaseStartupPages(logger *slog.Logger) {
	r, err := pageout.Executable()
	if err != nil {
		logger.Info("start-up pages of the binary kept resident", "err", err)
		return
	}
	logger.Info("start-up pages of the binary returned to the kernel",
		"advisedMB", mb(r.Advised), "fileRSSBeforeMB", mb(r.Before), "fileRSSAfterMB", mb(r.After))
}

// mb is n bytes in megabytes with one decimal, for log lines.
func mb(n int64) float64 { return math.Round(float64(n)/1e5) / 10 }
