package server

import (
	"log/slog"
	"os"
	"runtime/debug"
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

// TuneGC sets the collector's target to DefaultGCPercent unless GOGC is
// set, which the operator's value then is (Go reads it at start, and
// GOMEMLIMIT keeps working as documented by Go either way), and logs
// the target in force.
func TuneGC(logger *slog.Logger) {
	if v, ok := os.LookupEnv("GOGC"); ok {
		logger.Info("garbage collector target from GOGC", "gogc", v)
		return
	}
	debug.SetGCPercent(DefaultGCPercent)
	logger.Info("garbage collector target", "gogc", DefaultGCPercent)
}
