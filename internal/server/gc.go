package server

import (
	"log/slog"
	"math"
	"os"
	"runtime/debug"

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

// MemoryLimitRatio is the share of the container's memory limit (its
// cgroup's) that occ server and occ worker give the Go runtime as its soft
// memory limit when GOMEMLIMIT is not set: near the limit the collector
// runs more often instead of letting the heap grow to GOGC's target and
// the container be killed for memory. The rest is for what the runtime
// does not count (the binary's pages, the kernel's buffers).
const MemoryLimitRatio = 0.9

// TuneGC sets the collector's target to DefaultGCPercent unless GOGC is
// set, which the operator's value then is (Go reads it at start), and the
// soft memory limit to MemoryLimitRatio of the cgroup's memory limit unless
// GOMEMLIMIT is set (or AUTOMEMLIMIT is "off", or a ratio of its own), and
// logs both. Without a cgroup memory limit (a plain process on a host) the
// runtime keeps no soft limit, as Go does by default; a cgroup that cannot
// be read is logged and changes nothing.
func TuneGC(logger *slog.Logger) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		logger.Info("garbage collector target from GOGC", "gogc", v)
	} else {
		debug.SetGCPercent(DefaultGCPercent)
		logger.Info("garbage collector target", "gogc", DefaultGCPercent)
	}
	tuneMemoryLimit(logger, memlimit.FromCgroup)
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
