package telemetry

import (
	"context"
	"database/sql"
	"net/http"
	"net/http/pprof"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// Metric names, one place: docs/operations.md describes each and the
// alert rules in deploy/prometheus/occ-rules.yaml may only name these (a
// test checks both against the registry).
const (
	MetricHTTPRequests       = "occ_http_requests_total"
	MetricHTTPDuration       = "occ_http_request_duration_seconds"
	MetricHTTPInFlight       = "occ_http_requests_in_flight"
	MetricHTTPTurns          = "occ_http_request_turns"
	MetricHTTPWaiting        = "occ_http_requests_waiting"
	MetricHTTPTurnTimeouts   = "occ_http_request_turn_timeouts_total"
	MetricGatewayOps         = "occ_gateway_operations_total"
	MetricGatewayDuration    = "occ_gateway_operation_duration_seconds"
	MetricWorkerClaims       = "occ_worker_claims_total"
	MetricWorkerLeaseLosses  = "occ_worker_lease_losses_total"
	MetricWorkerRetries      = "occ_worker_retries_total"
	MetricWorkerFinished     = "occ_worker_work_finished_total"
	MetricWorkerDeployments  = "occ_worker_deployment_duration_seconds"
	MetricWorkerDriverCalls  = "occ_worker_driver_call_duration_seconds"
	MetricWorkerQueueDepth   = "occ_worker_queue_depth"
	MetricWorkerQueueErrors  = "occ_worker_queue_depth_errors_total"
	MetricWorkerLoops        = "occ_worker_loops"
	MetricWorkerLoopsBusy    = "occ_worker_loops_busy"
	MetricWorkerReadyNotices = "occ_worker_ready_notices_total"
	MetricAuditWriteFailures = "occ_audit_write_failures_total"
	MetricStoreReadCache     = "occ_store_read_cache_lookups_total"
)

// queueDepthTimeout bounds the queue-depth query one scrape runs, so a
// slow database delays a scrape by at most this much.
const queueDepthTimeout = 2 * time.Second

// Metrics is OCC's Prometheus registry and the instruments in it. The zero
// value is not usable; a nil *Metrics is: every observer method on it does
// nothing, so callers need no "metrics on?" branches.
type Metrics struct {
	reg *prometheus.Registry

	httpRequests *prometheus.CounterVec   // route, method, code
	httpDuration *prometheus.HistogramVec // route, method
	httpInFlight prometheus.Gauge
	turns        prometheus.Gauge
	waiting      prometheus.Gauge
	turnTimeouts prometheus.Counter

	gwOps      *prometheus.CounterVec   // operation, transport, outcome
	gwDuration *prometheus.HistogramVec // operation, transport

	claims      *prometheus.CounterVec // kind
	leaseLosses prometheus.Counter
	retries     *prometheus.CounterVec   // kind, reason
	finished    *prometheus.CounterVec   // kind, state
	deployments *prometheus.HistogramVec // driver, outcome
	driverCalls *prometheus.HistogramVec // driver, call, outcome
	queueErrors prometheus.Counter
	loops       prometheus.Gauge
	loopsBusy   prometheus.Gauge
	notices     *prometheus.CounterVec // outcome

	auditFailures *prometheus.CounterVec // kind
}

// NewMetrics returns a fresh registry (never the global default one, so
// tests and several servers in one process do not collide) holding OCC's
// instruments and the Go runtime and process collectors.
func NewMetrics() *Metrics {
	reg := prometheus.NewRegistry()
	// Latency buckets from 1 ms to 30 s: API calls are milliseconds, a
	// workspace file operation through a gateway tens to hundreds of
	// milliseconds, and anything near the 30 s file deadline is a fault.
	latency := []float64{.001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5, 10, 30}
	m := &Metrics{
		reg: reg,
		httpRequests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricHTTPRequests,
			Help: "HTTP requests answered by the API listener, by ServeMux route pattern (\"unmatched\" when none matched), method and status code."},
			[]string{"route", "method", "code"}),
		httpDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricHTTPDuration,
			Help: "Time from receiving an API request to its handler returning, by route pattern and method.", Buckets: latency},
			[]string{"route", "method"}),
		httpInFlight: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricHTTPInFlight,
			Help: "API requests being served now."}),
		turns: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricHTTPTurns,
			Help: "API reads (GET, HEAD) this process works on at once (--max-requests-in-flight); 0: no limit."}),
		waiting: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricHTTPWaiting,
			Help: "API reads waiting for a turn, first come first served."}),
		turnTimeouts: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricHTTPTurnTimeouts,
			Help: "API reads answered 503 after waiting the whole queue wait (5 s) for a turn."}),
		gwOps: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricGatewayOps,
			Help: "Native gateway operations (workspace file get/set) by operation, transport (direct, routed) and outcome (ok, unavailable, conflict, outcome_unknown)."},
			[]string{"operation", "transport", "outcome"}),
		gwDuration: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricGatewayDuration,
			Help: "Duration of one native gateway operation, dial to answer, by operation and transport.", Buckets: latency},
			[]string{"operation", "transport"}),
		claims: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricWorkerClaims,
			Help: "Work items claimed by this worker, by work kind."}, []string{"kind"}),
		leaseLosses: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricWorkerLeaseLosses,
			Help: "Claims this worker lost because a lease renewal failed (another worker may own the item now)."}),
		retries: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricWorkerRetries,
			Help: "Work items requeued, by work kind and reason (pending: not ready yet; error: a retryable failure)."},
			[]string{"kind", "reason"}),
		finished: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricWorkerFinished,
			Help: "Work items ended by this worker, by work kind and final state."}, []string{"kind", "state"}),
		deployments: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricWorkerDeployments,
			Help:    "Time from enqueueing a revision deployment to its end, by Compute driver and outcome (the final work state).",
			Buckets: []float64{1, 2.5, 5, 10, 20, 30, 60, 120, 300, 600, 1800}},
			[]string{"driver", "outcome"}),
		driverCalls: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: MetricWorkerDriverCalls,
			Help:    "Duration of one Compute driver call by the worker, by driver, call and outcome (ok, error, permanent).",
			Buckets: []float64{.005, .025, .1, .5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600}},
			[]string{"driver", "call", "outcome"}),
		queueErrors: prometheus.NewCounter(prometheus.CounterOpts{Name: MetricWorkerQueueErrors,
			Help: "Scrapes whose queue-depth query failed (the depth series are then missing from that scrape)."}),
		loops: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricWorkerLoops,
			Help: "Loops this process's worker runs (--worker-concurrency); 0 when no worker runs in it."}),
		loopsBusy: prometheus.NewGauge(prometheus.GaugeOpts{Name: MetricWorkerLoopsBusy,
			Help: "Worker loops working on a claimed item now; equal to occ_worker_loops when every loop is busy."}),
		notices: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricWorkerReadyNotices,
			Help: "Compute driver readiness notices the worker acted on, by outcome (expedited: the Agent's waiting work was made due; none: nothing was waiting; dropped; error)."},
			[]string{"outcome"}),
		auditFailures: prometheus.NewCounterVec(prometheus.CounterOpts{Name: MetricAuditWriteFailures,
			Help: "Audit events the store refused to write, by event kind. A mutation whose audit write fails is not committed; a denial's is only logged."},
			[]string{"kind"}),
	}
	reg.MustRegister(m.httpRequests, m.httpDuration, m.httpInFlight, m.turns, m.waiting, m.turnTimeouts, m.gwOps, m.gwDuration,
		m.claims, m.leaseLosses, m.retries, m.finished, m.deployments, m.driverCalls, m.queueErrors,
		m.loops, m.loopsBusy, m.notices,
		m.auditFailures,
		collectors.NewGoCollector(),
		collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	// The series the alert rules count with increase() start at 0: a
	// series that first appears already at 1 has no increase to
	// Prometheus, so the first event (often the only one: an audit write
	// failure, an unknown outcome) would never fire its alert.
	for _, op := range GatewayOperations {
		for _, tr := range GatewayTransports {
			for _, oc := range GatewayOutcomes {
				m.gwOps.WithLabelValues(op, tr, oc)
			}
		}
	}
	for _, k := range AuditKinds {
		m.auditFailures.WithLabelValues(k)
	}
	return m
}

// The label values whose series exist from the start (see NewMetrics and
// ExpectDriver). TestSeriesStartAtZero checks them against their sources.
var (
	GatewayOperations  = []string{"get", "set"}
	GatewayTransports  = []string{"direct", "routed"}
	GatewayOutcomes    = []string{"ok", "unavailable", "conflict", "outcome_unknown"}
	AuditKinds         = []string{"bootstrap", "mutation", "access", "authorization_denial"}
	DeploymentOutcomes = []string{"succeeded", "failed_permanent", "cancelled"}
)

// ExpectDriver starts the deployment series of the Compute driver this
// process's worker runs (its id is known only then) at 0, for the same
// reason as NewMetrics's.
func (m *Metrics) ExpectDriver(driver string) {
	if m == nil {
		return
	}
	for _, oc := range DeploymentOutcomes {
		m.deployments.WithLabelValues(driver, oc)
	}
}

// Registry is the registry, for tests that gather it directly.
func (m *Metrics) Registry() *prometheus.Registry { return m.reg }

// RegisterDB exports db's pool statistics (go_sql_* with db_name="occ").
func (m *Metrics) RegisterDB(db *sql.DB) {
	if m == nil || db == nil {
		return
	}
	m.reg.MustRegister(collectors.NewDBStatsCollector(db, "occ"))
}

// QueueDepthFunc counts the work items in each non-final state (queued,
// running).
type QueueDepthFunc func(context.Context) (map[string]int64, error)

// RegisterQueueDepth exports the work queue's depth, read by depth at
// every scrape with a deadline of queueDepthTimeout. states are always
// exported (zero when depth reports none) so that an empty queue is a 0,
// not a missing series an alert cannot tell from a broken scrape.
func (m *Metrics) RegisterQueueDepth(depth QueueDepthFunc, states ...string) {
	if m == nil || depth == nil {
		return
	}
	m.reg.MustRegister(&queueCollector{m: m, depth: depth, states: states,
		desc: prometheus.NewDesc(MetricWorkerQueueDepth, "Work items in the durable queue by state (queued: waiting or backing off; running: claimed).", []string{"state"}, nil)})
}

type queueCollector struct {
	m      *Metrics
	depth  QueueDepthFunc
	states []string
	desc   *prometheus.Desc
}

func (c *queueCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *queueCollector) Collect(ch chan<- prometheus.Metric) {
	ctx, cancel := context.WithTimeout(context.Background(), queueDepthTimeout)
	defer cancel()
	counts, err := c.depth(ctx)
	if err != nil {
		c.m.queueErrors.Inc()
		return
	}
	for _, s := range c.states {
		ch <- prometheus.MustNewConstMetric(c.desc, prometheus.GaugeValue, float64(counts[s]), s)
	}
}

// ReadCacheFunc reports the store's read cache lookups so far, and false
// when the store has none (turned off).
type ReadCacheFunc func() (hits, misses uint64, ok bool)

// RegisterReadCache exports the store's read cache lookups by result
// (hit: served from the cache; miss: read from the database), read at
// every scrape; no series when stats reports no cache.
func (m *Metrics) RegisterReadCache(stats ReadCacheFunc) {
	if m == nil || stats == nil {
		return
	}
	m.reg.MustRegister(&readCacheCollector{stats: stats,
		desc: prometheus.NewDesc(MetricStoreReadCache, "Cached store reads (the session and API key lookups, one Agent, an Agent with its Namespace and active revision, the Agent, Namespace and audit pages) by result: hit (the database's snapshot was unchanged, the kept result served) or miss (read from the database).", []string{"result"}, nil)})
}

type readCacheCollector struct {
	stats ReadCacheFunc
	desc  *prometheus.Desc
}

func (c *readCacheCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

func (c *readCacheCollector) Collect(ch chan<- prometheus.Metric) {
	hits, misses, ok := c.stats()
	if !ok {
		return
	}
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(hits), "hit")
	ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(misses), "miss")
}

// Handler serves /metrics (this registry only) and the pprof endpoints
// under /debug/pprof/, registered explicitly on a mux of its own: nothing
// reaches http.DefaultServeMux, so importing net/http/pprof exposes
// nothing on any other listener.
func (m *Metrics) Handler() http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(m.reg, promhttp.HandlerOpts{
		Registry:      m.reg,
		ErrorHandling: promhttp.ContinueOnError,
		Timeout:       10 * time.Second,
	}))
	// No /debug/pprof/cmdline: it answers os.Args verbatim, and a
	// --database-url given as a flag carries its password there.
	mux.HandleFunc("/debug/pprof/", pprof.Index)
	mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
	return mux
}

// RequestTurns records the number of turns API reads get (0: none).
func (m *Metrics) RequestTurns(n int) {
	if m != nil {
		m.turns.Set(float64(n))
	}
}

// RequestWaiting records that a read started (+1) or stopped (-1)
// waiting for a turn.
func (m *Metrics) RequestWaiting(delta int) {
	if m != nil {
		m.waiting.Add(float64(delta))
	}
}

// RequestTurnTimedOut records a read answered 503 after waiting for a
// turn.
func (m *Metrics) RequestTurnTimedOut() {
	if m != nil {
		m.turnTimeouts.Inc()
	}
}

// GatewayOperation implements agentgw.Observer.
func (m *Metrics) GatewayOperation(operation, transport, outcome string, d time.Duration) {
	if m == nil {
		return
	}
	m.gwOps.WithLabelValues(operation, transport, outcome).Inc()
	m.gwDuration.WithLabelValues(operation, transport).Observe(d.Seconds())
}

// WorkClaimed implements worker.Observer.
func (m *Metrics) WorkClaimed(kind string) {
	if m != nil {
		m.claims.WithLabelValues(kind).Inc()
	}
}

// WorkerLoops implements worker.Observer.
func (m *Metrics) WorkerLoops(n int) {
	if m != nil {
		m.loops.Set(float64(n))
	}
}

// LoopBusy implements worker.Observer.
func (m *Metrics) LoopBusy(busy bool) {
	if m == nil {
		return
	}
	if busy {
		m.loopsBusy.Inc()
	} else {
		m.loopsBusy.Dec()
	}
}

// LeaseLost implements worker.Observer.
func (m *Metrics) LeaseLost() {
	if m != nil {
		m.leaseLosses.Inc()
	}
}

// WorkRetried implements worker.Observer.
func (m *Metrics) WorkRetried(kind, reason string) {
	if m != nil {
		m.retries.WithLabelValues(kind, reason).Inc()
	}
}

// WorkFinished implements worker.Observer.
func (m *Metrics) WorkFinished(kind, state string) {
	if m != nil {
		m.finished.WithLabelValues(kind, state).Inc()
	}
}

// DeploymentFinished implements worker.Observer.
func (m *Metrics) DeploymentFinished(driver, outcome string, d time.Duration) {
	if m != nil {
		m.deployments.WithLabelValues(driver, outcome).Observe(d.Seconds())
	}
}

// DriverCall implements worker.Observer.
func (m *Metrics) DriverCall(driver, call, outcome string, d time.Duration) {
	if m != nil {
		m.driverCalls.WithLabelValues(driver, call, outcome).Observe(d.Seconds())
	}
}

// ReadyNotice implements worker.Observer.
func (m *Metrics) ReadyNotice(outcome string) {
	if m != nil {
		m.notices.WithLabelValues(outcome).Inc()
	}
}

// AuditWriteFailed implements audit.FailureObserver.
func (m *Metrics) AuditWriteFailed(kind string) {
	if m != nil {
		m.auditFailures.WithLabelValues(kind).Inc()
	}
}
