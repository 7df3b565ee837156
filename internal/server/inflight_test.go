package server

import (
	"bytes"
	"context"
	"encoding/json"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/config"
	"github.com/openclaw/occ/internal/httpx"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/telemetry"
	"github.com/openclaw/occ/internal/testutil"
)

// gathered is the value of the unlabelled gauge or counter name in m's
// registry.
func gathered(t *testing.T, m *telemetry.Metrics, name string) float64 {
	t.Helper()
	mfs, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name || len(mf.GetMetric()) != 1 {
			continue
		}
		if g := mf.GetMetric()[0].GetGauge(); g != nil {
			return g.GetValue()
		}
		return mf.GetMetric()[0].GetCounter().GetValue()
	}
	t.Fatalf("registry has no single %s", name)
	return 0
}

// gate is a handler that records the order requests reach it in and
// holds each until released.
type gate struct {
	mu      sync.Mutex
	entered []string
	arrived chan string
	release chan struct{}
	// writeFirst makes the handler start its reply before it waits.
	writeFirst bool
}

func newGate() *gate {
	return &gate{arrived: make(chan string, 100), release: make(chan struct{})}
}

func (g *gate) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	name := r.URL.Query().Get("name")
	g.mu.Lock()
	g.entered = append(g.entered, name)
	g.mu.Unlock()
	if g.writeFirst {
		w.WriteHeader(http.StatusOK)
	}
	g.arrived <- name
	<-g.release
}

func (g *gate) order() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return append([]string(nil), g.entered...)
}

// serve runs one request through h in the background and returns its
// recorder, done when the handler returned.
func serve(h http.Handler, r *http.Request) (*httptest.ResponseRecorder, <-chan struct{}) {
	rec := httptest.NewRecorder()
	done := make(chan struct{})
	go func() {
		defer close(done)
		h.ServeHTTP(rec, r)
	}()
	return rec, done
}

func get(name string) *http.Request {
	return httptest.NewRequest(http.MethodGet, "/namespaces?name="+name, nil)
}

// waitFor polls cond for up to 5 s: the waiting goroutines are parked in
// the runtime, so there is no event to wait on.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(5 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func arrive(t *testing.T, g *gate, want string) {
	t.Helper()
	select {
	case got := <-g.arrived:
		if got != want {
			t.Fatalf("request %q reached the handler, want %q", got, want)
		}
	case <-time.After(5 * time.Second):
		t.Fatalf("request %q never reached the handler", want)
	}
}

func TestInflightTurnsInArrivalOrder(t *testing.T) {
	g := newGate()
	m := telemetry.NewMetrics()
	l := newInflight(2, time.Minute, nil, m, nil)
	h := l.wrap(g)
	var dones []<-chan struct{}
	for _, name := range []string{"a", "b"} {
		_, done := serve(h, get(name))
		dones = append(dones, done)
		arrive(t, g, name)
	}
	// Both turns are held: the next ones wait, and come in as they queued.
	for i, name := range []string{"c", "d", "e"} {
		_, done := serve(h, get(name))
		dones = append(dones, done)
		waitFor(t, name+" to wait", func() bool { return l.waiting.Load() == int64(i+1) })
	}
	select {
	case name := <-g.arrived:
		t.Fatalf("request %q ran while both turns were held", name)
	case <-time.After(50 * time.Millisecond):
	}
	if turns, waiting := gathered(t, m, telemetry.MetricHTTPTurns), gathered(t, m, telemetry.MetricHTTPWaiting); turns != 2 || waiting != 3 {
		t.Errorf("metrics: %v turns, %v waiting; want 2, 3", turns, waiting)
	}
	for _, name := range []string{"c", "d", "e"} {
		g.release <- struct{}{} // one request ends, the longest waiting starts
		arrive(t, g, name)
	}
	close(g.release)
	for _, d := range dones {
		<-d
	}
	if diff := cmp.Diff([]string{"a", "b", "c", "d", "e"}, g.order()); diff != "" {
		t.Errorf("order the handler saw (-want +got):\n%s", diff)
	}
	if n := len(l.slots); n != 0 {
		t.Errorf("%d turns still held after every request ended", n)
	}
	if waiting, timeouts := gathered(t, m, telemetry.MetricHTTPWaiting), gathered(t, m, telemetry.MetricHTTPTurnTimeouts); waiting != 0 || timeouts != 0 {
		t.Errorf("metrics after: %v waiting, %v timed out; want 0, 0", waiting, timeouts)
	}
}

func TestInflightWaitRunsOut(t *testing.T) {
	g := newGate()
	m := telemetry.NewMetrics()
	l := newInflight(1, 20*time.Millisecond, nil, m, nil)
	h := l.wrap(g)
	_, done := serve(h, get("holder"))
	arrive(t, g, "holder")

	rec := httptest.NewRecorder()
	start := time.Now()
	h.ServeHTTP(rec, get("late"))
	if waited := time.Since(start); waited < 20*time.Millisecond {
		t.Errorf("answered after %v, before the 20ms wait ran out", waited)
	}
	if rec.Code != http.StatusServiceUnavailable || rec.Header().Get("Retry-After") != "1" {
		t.Errorf("late request: %d, Retry-After %q; want 503, 1", rec.Code, rec.Header().Get("Retry-After"))
	}
	var env struct {
		Error struct{ Code, Message string }
	}
	if err := json.Unmarshal(rec.Body.Bytes(), &env); err != nil {
		t.Fatalf("503 body %q: %v", rec.Body, err)
	}
	if env.Error.Code != "DEPENDENCY_UNAVAILABLE" {
		t.Errorf("503 code %q, want DEPENDENCY_UNAVAILABLE", env.Error.Code)
	}
	close(g.release)
	<-done
	if got := g.order(); len(got) != 1 {
		t.Errorf("handler saw %v, want only the holder", got)
	}
	if waiting, timeouts := gathered(t, m, telemetry.MetricHTTPWaiting), gathered(t, m, telemetry.MetricHTTPTurnTimeouts); waiting != 0 || timeouts != 1 {
		t.Errorf("metrics: %v waiting, %v timed out; want 0, 1", waiting, timeouts)
	}
}

func TestInflightClientGoneWhileWaiting(t *testing.T) {
	g := newGate()
	l := newInflight(1, time.Minute, nil, nil, nil)
	h := l.wrap(g)
	_, done := serve(h, get("holder"))
	arrive(t, g, "holder")

	ctx, cancel := context.WithCancel(context.Background())
	rec, gone := serve(h, get("gone").WithContext(ctx))
	waitFor(t, "the second request to wait", func() bool { return l.waiting.Load() == 1 })
	cancel()
	<-gone
	// 499 with no body, as httpx answers a request whose client left, so
	// that the request metrics count it as that and not as a 200.
	if rec.Code != 499 || rec.Body.Len() != 0 || rec.Header().Get("Content-Type") != "" {
		t.Errorf("a request whose client left while waiting: %d %q %v; want 499 without a body", rec.Code, rec.Body, rec.Header())
	}
	close(g.release)
	<-done
	// The turn it never had is not lost: a new request runs at once.
	rec = httptest.NewRecorder()
	l.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })).ServeHTTP(rec, get("next"))
	if rec.Code != http.StatusNoContent {
		t.Errorf("next request: %d, want 204", rec.Code)
	}
}

func TestInflightTurnEndsAtTheReply(t *testing.T) {
	g := newGate()
	g.writeFirst = true
	l := newInflight(1, time.Minute, nil, nil, nil)
	h := l.wrap(g)
	_, first := serve(h, get("first"))
	arrive(t, g, "first") // it has started its reply and now waits
	_, second := serve(h, get("second"))
	arrive(t, g, "second") // so the one turn was free for this one
	close(g.release)
	<-first
	<-second
	if n := len(l.slots); n != 0 {
		t.Errorf("%d turns still held", n)
	}
}

// TestInflightFlushAndHijackEndTheTurn: a handler that flushes, or takes
// the connection over, holds no turn from then on.
func TestInflightFlushAndHijackEndTheTurn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		start func(w http.ResponseWriter)
	}{
		{"flush", func(w http.ResponseWriter) { _ = http.NewResponseController(w).Flush() }},
		{"flush by type assertion", func(w http.ResponseWriter) { w.(http.Flusher).Flush() }},
		// The recorder cannot be hijacked: the turn ends at the attempt.
		{"hijack", func(w http.ResponseWriter) { _, _, _ = w.(http.Hijacker).Hijack() }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			l := newInflight(1, 2*time.Second, nil, nil, nil) // a held turn: 503 after 2 s
			started, release := make(chan struct{}), make(chan struct{})
			_, done := serve(l.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				tc.start(w)
				close(started)
				<-release
			})), get("long"))
			<-started
			rec := httptest.NewRecorder()
			l.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { w.WriteHeader(http.StatusNoContent) })).ServeHTTP(rec, get("next"))
			if rec.Code != http.StatusNoContent {
				t.Errorf("next request: %d, want 204", rec.Code)
			}
			close(release)
			<-done
			if n := len(l.slots); n != 0 {
				t.Errorf("%d turns still held", n)
			}
		})
	}
}

func TestInflightUncounted(t *testing.T) {
	g := newGate()
	file := "GET /namespaces/{ns}/agents/{agentId}/workspace/files/{name}"
	l := newInflight(1, time.Minute, []string{file}, nil, nil)
	h := l.wrap(g)
	_, holder := serve(h, get("holder"))
	arrive(t, g, "holder")

	withBody := httptest.NewRequest(http.MethodPost, "/namespaces?name=body", strings.NewReader(`{"name":"x"}`))
	chunked := httptest.NewRequest(http.MethodPost, "/namespaces?name=chunked", strings.NewReader(`{}`))
	chunked.ContentLength = -1
	chunked.TransferEncoding = []string{"chunked"}
	for _, r := range []*http.Request{
		withBody,
		chunked,
		httptest.NewRequest(http.MethodPost, "/namespaces/n/agents/a/deploy?name=bodiless-post", nil),
		httptest.NewRequest(http.MethodDelete, "/namespaces/n?name=delete", nil),
		httptest.NewRequest(http.MethodGet, "/namespaces/n/agents/a/workspace/files/SOUL.md?name=file", nil),
		httptest.NewRequest(http.MethodHead, "/namespaces/n/agents/a/workspace/files/SOUL.md?name=file-head", nil),
	} {
		_, done := serve(h, r)
		defer func() { <-done }()
		arrive(t, g, r.URL.Query().Get("name"))
	}
	if n := l.waiting.Load(); n != 0 {
		t.Errorf("%d requests waiting, want none", n)
	}
	close(g.release)
	<-holder
}

func TestInflightNone(t *testing.T) {
	m := telemetry.NewMetrics()
	if l := newInflight(0, 0, nil, m, nil); l != nil {
		t.Fatalf("newInflight(0) = %v, want nil", l)
	}
	if turns := gathered(t, m, telemetry.MetricHTTPTurns); turns != 0 {
		t.Errorf("metrics: %v turns with none, want 0", turns)
	}
	next := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})
	var l *inflight
	if got := l.wrap(next); got == nil {
		t.Fatal("a nil inflight's wrap returned nil")
	}
	if l := newInflight(3, 0, nil, nil, nil); l.wait != DefaultRequestQueueWait || cap(l.slots) != 3 {
		t.Errorf("newInflight(3, 0) = wait %v, %d turns; want %v, 3", l.wait, cap(l.slots), DefaultRequestQueueWait)
	}
}

// TestReadCacheDefaultsAgree: the flag's default (config) is the store's
// own (sqlstore), which the store tests run with.
func TestReadCacheDefaultsAgree(t *testing.T) {
	if config.DefaultDatabaseReadCacheItems != sqlstore.DefaultReadCacheItems {
		t.Errorf("config.DefaultDatabaseReadCacheItems = %d, sqlstore.DefaultReadCacheItems = %d",
			config.DefaultDatabaseReadCacheItems, sqlstore.DefaultReadCacheItems)
	}
}

func TestDefaultMaxRequestsInFlight(t *testing.T) {
	procs := runtime.GOMAXPROCS(0)
	big := 2*procs + 16 // a pool larger than the turns on this host
	for _, tc := range []struct {
		engine string
		local  bool
		pool   int
		want   int
	}{
		{sqlstore.EngineSQLite, true, 20, 2 * procs},
		{sqlstore.EngineSQLite, true, 1, 2 * procs},
		{sqlstore.EnginePostgres, false, 20, 20},
		{sqlstore.EnginePostgres, false, 7, 7},
		{sqlstore.EnginePostgres, true, big, 2 * procs},
		{sqlstore.EnginePostgres, true, 1, 1},
	} {
		if got := DefaultMaxRequestsInFlight(tc.engine, tc.local, tc.pool); got != tc.want {
			t.Errorf("DefaultMaxRequestsInFlight(%s, %v, %d) = %d, want %d", tc.engine, tc.local, tc.pool, got, tc.want)
		}
	}
}

// TestInflightShedLoggedOncePerSecond: requests answered 503 for want of a
// turn log no line each (their request logger gets nothing) but one
// warning at most per second, counting those since the previous one: on
// the settable clock, the first of five at once logs 1; the next four, and
// one 999 ms later, log nothing; the first a second after the first line
// logs 6, and the one after it nothing.
func TestInflightShedLoggedOncePerSecond(t *testing.T) {
	var buf bytes.Buffer // written only by this goroutine's requests
	logger := slog.New(slog.NewJSONHandler(&buf, nil))
	clock := testutil.NewClock(time.Time{})
	g := newGate()
	l := newInflight(1, time.Millisecond, nil, nil, logger)
	l.now = clock.Now
	h := l.wrap(g)
	_, done := serve(h, get("holder"))
	arrive(t, g, "holder")
	late := func(n int) {
		for range n {
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, get("late").WithContext(httpx.WithLogger(context.Background(), logger)))
			if rec.Code != http.StatusServiceUnavailable {
				t.Fatalf("late request: %d, want 503", rec.Code)
			}
		}
	}
	late(5)
	clock.Advance(999 * time.Millisecond)
	late(1)
	clock.Advance(time.Millisecond)
	late(2)
	close(g.release)
	<-done
	type line struct {
		Level, Msg string
		Requests   int
		Turns      int
		QueueWait  time.Duration // nanoseconds in JSON
	}
	var got []line
	for _, raw := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		var ln line
		if err := json.Unmarshal([]byte(raw), &ln); err != nil {
			t.Fatalf("log line %q: %v", raw, err)
		}
		got = append(got, ln)
	}
	const msg = "requests answered 503: no turn came free within the queue wait"
	want := []line{
		{Level: "WARN", Msg: msg, Requests: 1, Turns: 1, QueueWait: time.Millisecond},
		{Level: "WARN", Msg: msg, Requests: 6, Turns: 1, QueueWait: time.Millisecond},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("log lines (-want +got):\n%s", diff)
	}
}
