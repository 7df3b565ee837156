package server

import (
	"bufio"
	"log/slog"
	"net"
	"net/http"
	"runtime"
	"sync/atomic"
	"time"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/httpx"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/telemetry"
)

// DefaultRequestQueueWait is how long a request waits for its turn
// (Options.MaxRequestsInFlight) before it answers 503.
const DefaultRequestQueueWait = 5 * time.Second

// DefaultMaxRequestsInFlight is --max-requests-in-flight's default for a
// database engine, and whether the database works on this machine's
// cores (sqlstore's OnThisHost). On SQLite a request's work is CPU in this
// process (the database is a library in it), so a few more turns than
// cores keep the cores busy: with 16 clients on two cores, 4 turns took
// the API's p99 under 5 ms where 8 or none did not (docs/performance.md).
// A PostgreSQL server on this host spends the same cores on each request,
// so it gets as many turns (at most the connection pool's size): with 16
// clients on two cores, 4 turns took the p99 of every API read about 15 %
// lower than 20. A PostgreSQL server elsewhere has its own cores, and a
// request mostly waits on it across the network, so the turns are the
// pool's size: a request beyond it would wait for a connection anyway, in
// no particular order.
func DefaultMaxRequestsInFlight(engine string, databaseOnThisHost bool, databaseMaxConnections int) int {
	cores := 2 * runtime.GOMAXPROCS(0)
	switch {
	case engine == sqlstore.EngineSQLite:
		return cores
	case databaseOnThisHost:
		return min(cores, databaseMaxConnections)
	}
	return databaseMaxConnections
}

// inflight gives requests their turns: at most cap(slots) counted
// requests run at once, and the others wait in arrival order (a Go
// channel hands a freed slot to its longest-waiting sender), each for at
// most wait. Without it, every request on a saturated server runs at once
// and they all slow each other down: the goroutines contend for the
// database pool, SQLite's and its allocator's locks, and the scheduler
// serves them in no fair order, so a few wait much longer than the rest.
//
// A request's turn ends when it starts its reply (its first WriteHeader
// or Write, by then its work is done) or when its handler returns,
// whichever comes first, so a client that reads slowly holds no turn.
// Only reads are counted: GET and HEAD requests without a body, except
// those exempt matches (the workspace file routes, which wait on an
// Agent's gateway, not on this process). A write is not: its body arrives
// at the client's pace, and on SQLite it waits for the one writer at a
// time (sqlstore's write gate), so turns held by waiting writes would
// stall the reads that SQLite serves alongside them. The probes never
// reach it.
type inflight struct {
	slots   chan struct{}
	wait    time.Duration
	exempt  *http.ServeMux
	metrics *telemetry.Metrics // nil: none
	// waiting counts the requests waiting for a turn, for tests.
	waiting atomic.Int64
	// log gets the shed requests' summary lines (noteShed); now is its
	// clock. shed counts the requests answered 503 since the last line,
	// logged at (Unix nanoseconds, 0: none yet).
	log    *slog.Logger
	now    func() time.Time
	shed   atomic.Int64
	logged atomic.Int64
}

// shedLogEvery is the least time between two lines about shed requests.
const shedLogEvery = time.Second

// quiet is the request logger of a shed request's reply: noteShed's
// summary line stands for it, so that a saturated process does not also
// spend its cores writing one warning per request it turns away.
var quiet = slog.New(slog.DiscardHandler)

// errBusy answers a request that waited its whole wait. Unavailable, like
// the password hashing bound's: the server is saturated, the caller did
// nothing wrong. (The message is for the log: a 503's public message is
// fixed by httpx.)
var errBusy = errkind.WithRetryAfter(errkind.Unavailable, "The server is busy; try again shortly.", time.Second)

// newInflight returns the limiter for n turns (n <= 0: none, nil) and
// wait (<= 0: DefaultRequestQueueWait), exempting the routes in exempt
// (method and path patterns, as the mux has them), and records the turns,
// the waiting requests and those that waited in vain in m (nil: nowhere).
func newInflight(n int, wait time.Duration, exempt []string, m *telemetry.Metrics, logger *slog.Logger) *inflight {
	m.RequestTurns(max(n, 0))
	if n <= 0 {
		return nil
	}
	if wait <= 0 {
		wait = DefaultRequestQueueWait
	}
	if logger == nil {
		logger = slog.Default()
	}
	l := &inflight{slots: make(chan struct{}, n), wait: wait, exempt: http.NewServeMux(), metrics: m, log: logger, now: time.Now}
	for _, p := range exempt {
		l.exempt.Handle(p, http.NotFoundHandler())
	}
	return l
}

// counted reports whether r takes a turn.
func (l *inflight) counted(r *http.Request) bool {
	if r.Method != http.MethodGet && r.Method != http.MethodHead || r.ContentLength != 0 || len(r.TransferEncoding) > 0 {
		return false
	}
	_, pattern := l.exempt.Handler(r)
	return pattern == ""
}

func (l *inflight) wrap(next http.Handler) http.Handler {
	if l == nil {
		return next
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if !l.counted(r) {
			next.ServeHTTP(w, r)
			return
		}
		if !l.acquire(w, r) {
			return
		}
		tw := &turnWriter{ResponseWriter: w, slots: l.slots}
		defer tw.end()
		next.ServeHTTP(tw, r)
	})
}

// acquire waits for a turn. It reports false, having answered 503 when the
// wait ran out, or 499 when the client went away first.
func (l *inflight) acquire(w http.ResponseWriter, r *http.Request) bool {
	select {
	case l.slots <- struct{}{}:
		return true
	default:
	}
	l.waiting.Add(1)
	l.metrics.RequestWaiting(1)
	defer func() {
		l.waiting.Add(-1)
		l.metrics.RequestWaiting(-1)
	}()
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return true
	case <-t.C:
		l.metrics.RequestTurnTimedOut()
		l.noteShed()
		httpx.WriteError(w, r.WithContext(httpx.WithLogger(r.Context(), quiet)), errBusy)
		return false
	case <-r.Context().Done():
		// Answered 499 (the client left; nobody reads it) so that the
		// request metrics count it as one, not as the 200 an unanswered
		// request would default to. Silent like the 503 above: a burst
		// of clients giving up must not become a burst of log lines.
		httpx.WriteError(w, r.WithContext(httpx.WithLogger(r.Context(), quiet)),
			errkind.Wrap(errkind.Unavailable, errBusy.Message, r.Context().Err()))
		return false
	}
}

// noteShed counts a request answered 503 for want of a turn and, at most
// once per shedLogEvery, logs one warning with how many were since the
// previous one (this one included). A count left after the last line of
// a burst goes into the next line, whenever that comes;
// occ_http_request_turn_timeouts_total counts every one as it happens.
func (l *inflight) noteShed() {
	l.shed.Add(1)
	now := l.now().UnixNano()
	last := l.logged.Load()
	if last != 0 && now-last < int64(shedLogEvery) || !l.logged.CompareAndSwap(last, now) {
		return
	}
	l.log.Warn("requests answered 503: no turn came free within the queue wait",
		"requests", l.shed.Swap(0), "queueWait", l.wait, "turns", cap(l.slots))
}

// turnWriter ends its request's turn at the first byte of the reply.
type turnWriter struct {
	http.ResponseWriter
	slots chan struct{}
	ended bool
}

// end gives the turn back, once.
func (t *turnWriter) end() {
	if !t.ended {
		t.ended = true
		<-t.slots
	}
}

func (t *turnWriter) WriteHeader(code int) {
	t.end()
	t.ResponseWriter.WriteHeader(code)
}

func (t *turnWriter) Write(b []byte) (int, error) {
	t.end()
	return t.ResponseWriter.Write(b)
}

// Unwrap lets http.ResponseController reach the connection's writer;
// Flush and Hijack are forwarded explicitly, as httpx's writers do, and end
// the turn too: a flushed reply has started, and a hijacked connection (a
// WebSocket) may stay open for as long as its client likes.
func (t *turnWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

func (t *turnWriter) Flush() {
	t.end()
	_ = http.NewResponseController(t.ResponseWriter).Flush()
}

func (t *turnWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	t.end()
	return http.NewResponseController(t.ResponseWriter).Hijack()
}
