package telemetry_test

import (
	"bytes"
	"context"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"regexp"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"

	"github.com/openclaw/occ/internal/httpx"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/telemetry"
)

// chain is the order server.New uses: telemetry outermost, Route next to
// the mux.
func chain(m *telemetry.Metrics, tp *sdktrace.TracerProvider) http.Handler {
	mux := httpx.NewMux()
	mux.HandleFunc("GET /api/v1/namespaces/{namespace}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusOK)
	})
	mux.HandleFunc("PUT /api/v1/namespaces/{namespace}", func(w http.ResponseWriter, r *http.Request) {
		w.WriteHeader(http.StatusConflict)
	})
	var h http.Handler = telemetry.Route(mux)
	h = httpx.RequestID(h)
	if tp == nil {
		return telemetry.HTTP(m, nil, h)
	}
	return telemetry.HTTP(m, tp, h)
}

func listen(t *testing.T, m *telemetry.Metrics) string {
	t.Helper()
	ln, err := telemetry.Listen("127.0.0.1:0", m, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		if err := ln.Close(ctx); err != nil {
			t.Errorf("close metrics listener: %v", err)
		}
	})
	return "http://" + ln.Addr()
}

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 10*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 8<<20))
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// series returns the sample lines of one metric name (without value).
func series(body, name string) []string {
	var out []string
	for _, l := range strings.Split(body, "\n") {
		if strings.HasPrefix(l, name+"{") || strings.HasPrefix(l, name+" ") {
			out = append(out, l[:strings.LastIndexByte(l, ' ')])
		}
	}
	slices.Sort(out)
	return out
}

func TestHTTPMetricsUseRoutePatterns(t *testing.T) {
	m := telemetry.NewMetrics()
	h := chain(m, nil)
	const id = "ns_7f3a9c2e"
	for _, r := range []struct{ method, path string }{
		{"GET", "/api/v1/namespaces/" + id},
		{"GET", "/api/v1/namespaces/" + id + "x"},
		{"PUT", "/api/v1/namespaces/" + id},
		{"GET", "/no/such/" + id},
		{"DELETE", "/api/v1/namespaces/" + id}, // 405
		{"BREW", "/api/v1/namespaces/" + id},   // any token is a method
	} {
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, httptest.NewRequest(r.method, r.path, nil))
	}
	code, body := get(t, listen(t, m)+"/metrics")
	if code != 200 {
		t.Fatalf("GET /metrics: %d", code)
	}
	if strings.Contains(body, id) {
		t.Errorf("a raw id reached the metrics:\n%s", body)
	}
	want := []string{
		`occ_http_requests_total{code="200",method="GET",route="/api/v1/namespaces/{namespace}"}`,
		`occ_http_requests_total{code="404",method="GET",route="unmatched"}`,
		`occ_http_requests_total{code="405",method="DELETE",route="unmatched"}`,
		`occ_http_requests_total{code="405",method="other",route="unmatched"}`,
		`occ_http_requests_total{code="409",method="PUT",route="/api/v1/namespaces/{namespace}"}`,
	}
	if diff := cmp.Diff(want, series(body, "occ_http_requests_total")); diff != "" {
		t.Errorf("request series (-want +got):\n%s", diff)
	}
	if !strings.Contains(body, `occ_http_requests_total{code="200",method="GET",route="/api/v1/namespaces/{namespace}"} 2`) {
		t.Errorf("want two GETs counted on the pattern:\n%s", strings.Join(series(body, "occ_http_requests_total"), "\n"))
	}
	for _, name := range []string{"occ_http_request_duration_seconds_bucket", "occ_http_requests_in_flight", "go_goroutines", "process_resident_memory_bytes"} {
		if len(series(body, name)) == 0 {
			t.Errorf("no %s series", name)
		}
	}
}

func TestMetricsListenerServesPprof(t *testing.T) {
	base := listen(t, telemetry.NewMetrics())
	for _, tc := range []struct {
		path string
		want int
		body string
	}{
		{"/debug/pprof/", 200, "goroutine"},
		// Not served: it would answer the process's arguments, which
		// can hold a --database-url with its password.
		{"/debug/pprof/cmdline", 404, ""},
		{"/debug/pprof/heap?debug=1", 200, "heap profile"},
		{"/metrics", 200, "go_goroutines"},
		{"/", 404, ""},
	} {
		code, body := get(t, base+tc.path)
		if code != tc.want || !strings.Contains(body, tc.body) {
			t.Errorf("GET %s = %d (%d bytes); want %d containing %q", tc.path, code, len(body), tc.want, tc.body)
		}
		if strings.Contains(body, os.Args[0]) {
			t.Errorf("GET %s answers the process's command line", tc.path)
		}
	}
}

// TestSeriesStartAtZero: the series the alert rules count with increase()
// exist at 0 before their first event, so that the first one is an
// increase; and the label values started are the ones their sources use.
func TestSeriesStartAtZero(t *testing.T) {
	m := telemetry.NewMetrics()
	m.ExpectDriver("local")
	fams, err := m.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range fams {
		for _, mt := range f.GetMetric() {
			var labels []string
			for _, l := range mt.GetLabel() {
				labels = append(labels, l.GetName()+"="+l.GetValue())
			}
			key := f.GetName() + "{" + strings.Join(labels, ",") + "}"
			switch {
			case mt.Counter != nil:
				got[key] = mt.GetCounter().GetValue()
			case mt.Histogram != nil:
				got[key] = float64(mt.GetHistogram().GetSampleCount())
			}
		}
	}
	for _, key := range []string{
		`occ_gateway_operations_total{operation=set,outcome=outcome_unknown,transport=routed}`,
		`occ_gateway_operations_total{operation=get,outcome=unavailable,transport=direct}`,
		`occ_audit_write_failures_total{kind=mutation}`,
		`occ_audit_write_failures_total{kind=authorization_denial}`,
		`occ_worker_deployment_duration_seconds{driver=local,outcome=failed_permanent}`,
	} {
		v, ok := got[key]
		if !ok || v != 0 {
			t.Errorf("%s = %v (present %v), want a series at 0", key, v, ok)
		}
	}
	wantKinds := []string{store.AuditBootstrap, store.AuditMutation, store.AuditAccess, store.AuditAuthorizationDenial}
	if diff := cmp.Diff(wantKinds, telemetry.AuditKinds); diff != "" {
		t.Errorf("audit kinds started (-store +telemetry):\n%s", diff)
	}
	wantOutcomes := []string{string(store.WorkSucceeded), string(store.WorkFailedPermanent), string(store.WorkCancelled)}
	if diff := cmp.Diff(wantOutcomes, telemetry.DeploymentOutcomes); diff != "" {
		t.Errorf("deployment outcomes started (-store +telemetry):\n%s", diff)
	}
}

func TestReadCacheCollector(t *testing.T) {
	m := telemetry.NewMetrics()
	var on atomic.Bool // read by the scrape's collector goroutine
	m.RegisterReadCache(func() (uint64, uint64, bool) { return 7, 3, on.Load() })
	base := listen(t, m)
	if _, body := get(t, base+"/metrics"); len(series(body, telemetry.MetricStoreReadCache)) != 0 {
		t.Errorf("read cache series without a read cache: %v", series(body, telemetry.MetricStoreReadCache))
	}
	on.Store(true)
	_, body := get(t, base+"/metrics")
	for _, want := range []string{`occ_store_read_cache_lookups_total{result="hit"} 7`, `occ_store_read_cache_lookups_total{result="miss"} 3`} {
		if !strings.Contains(body, want+"\n") {
			t.Errorf("no %q in:\n%s", want, strings.Join(series(body, telemetry.MetricStoreReadCache), "\n"))
		}
	}
}

func TestQueueDepthCollector(t *testing.T) {
	m := telemetry.NewMetrics()
	var fail atomic.Bool // read by the scrape's collector goroutine
	m.RegisterQueueDepth(func(ctx context.Context) (map[string]int64, error) {
		if _, ok := ctx.Deadline(); !ok {
			t.Error("queue depth called without a deadline")
		}
		if fail.Load() {
			return nil, context.DeadlineExceeded
		}
		return map[string]int64{"queued": 3}, nil
	}, "queued", "running")
	base := listen(t, m)
	_, body := get(t, base+"/metrics")
	if diff := cmp.Diff([]string{`occ_worker_queue_depth{state="queued"}`, `occ_worker_queue_depth{state="running"}`},
		series(body, "occ_worker_queue_depth")); diff != "" {
		t.Errorf("depth series (-want +got):\n%s", diff)
	}
	if !strings.Contains(body, `occ_worker_queue_depth{state="queued"} 3`) || !strings.Contains(body, `occ_worker_queue_depth{state="running"} 0`) {
		t.Errorf("depth values wrong:\n%s", strings.Join(series(body, "occ_worker_queue_depth"), "\n"))
	}
	fail.Store(true)
	code, body := get(t, base+"/metrics")
	if code != 200 || len(series(body, "occ_worker_queue_depth")) != 0 {
		t.Errorf("failed depth query: status %d, depth %v, want no depth series", code, series(body, "occ_worker_queue_depth"))
	}
	// The registry gathers its collectors concurrently, so the scrape that
	// failed may show the error counter from before or after its
	// increment; the next scrape (succeeding) shows it counted once.
	fail.Store(false)
	if _, body := get(t, base+"/metrics"); !strings.Contains(body, "occ_worker_queue_depth_errors_total 1\n") {
		t.Errorf("after one failed depth query, want occ_worker_queue_depth_errors_total 1:\n%s", strings.Join(series(body, "occ_worker_queue_depth_errors_total"), "\n"))
	}
}

func TestTracingEnabled(t *testing.T) {
	for _, tc := range []struct {
		env  map[string]string
		want bool
	}{
		{nil, false},
		{map[string]string{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, true},
		{map[string]string{"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://127.0.0.1:4318/v1/traces"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "otlp"}, true},
		{map[string]string{"OTEL_TRACES_EXPORTER": "none", "OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4318"}, false},
		{map[string]string{"OTEL_SDK_DISABLED": "true", "OTEL_TRACES_EXPORTER": "otlp"}, false},
		{map[string]string{"OTEL_SERVICE_NAME": "occ"}, false},
	} {
		if got := telemetry.TracingEnabled(func(k string) string { return tc.env[k] }); got != tc.want {
			t.Errorf("TracingEnabled(%v) = %v, want %v", tc.env, got, tc.want)
		}
	}
}

func TestSetupTracingRefusesUnsupported(t *testing.T) {
	for _, env := range []map[string]string{
		{"OTEL_TRACES_EXPORTER": "zipkin"},
		{"OTEL_EXPORTER_OTLP_ENDPOINT": "http://127.0.0.1:4317", "OTEL_EXPORTER_OTLP_PROTOCOL": "grpc"},
	} {
		tp, _, err := telemetry.SetupTracing(t.Context(), func(k string) string { return env[k] }, slog.New(slog.DiscardHandler))
		if err == nil || tp != nil {
			t.Errorf("SetupTracing(%v) = %v, %v; want an error", env, tp, err)
		}
	}
	tp, shutdown, err := telemetry.SetupTracing(t.Context(), func(string) string { return "" }, slog.New(slog.DiscardHandler))
	if err != nil || tp != nil || shutdown(t.Context()) != nil {
		t.Errorf("SetupTracing(no env) = %v, %v; want off", tp, err)
	}
}

// TestRequestSpanAndLogIDs: the server span is named after the pattern,
// and a line logged with the request's context carries the request id and
// the span's trace and span ids, once each.
func TestRequestSpanAndLogIDs(t *testing.T) {
	exp := tracetest.NewInMemoryExporter()
	tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(exp))
	var buf bytes.Buffer
	logger := slog.New(telemetry.LogHandler(slog.NewJSONHandler(&buf, nil), httpx.RequestIDFrom))
	mux := httpx.NewMux()
	mux.HandleFunc("GET /things/{id}", func(w http.ResponseWriter, r *http.Request) {
		logger.InfoContext(r.Context(), "with context")
		httpx.Logger(r.Context()).Info("request logger, no context")
		httpx.Logger(r.Context()).InfoContext(r.Context(), "request logger with context")
	})
	var h http.Handler = telemetry.Route(mux)
	h = httpx.RequestID(h)
	inner := h
	h = http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		l := logger.With(telemetry.LogAttrs(r.Context())...)
		inner.ServeHTTP(w, r.WithContext(httpx.WithLogger(r.Context(), l)))
	})
	h = telemetry.HTTP(nil, tp, h)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, httptest.NewRequest("GET", "/things/secret-id-1", nil))

	spans := exp.GetSpans()
	if len(spans) != 1 {
		t.Fatalf("%d spans, want 1", len(spans))
	}
	sp := spans[0]
	if sp.Name != "GET /things/{id}" {
		t.Errorf("span name %q, want the pattern", sp.Name)
	}
	for _, a := range sp.Attributes {
		if strings.Contains(a.Value.String(), "secret-id-1") {
			t.Errorf("span attribute %s holds the raw path", a.Key)
		}
	}
	reqID := rec.Header().Get("X-Request-Id")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 3 {
		t.Fatalf("%d log lines, want 3:\n%s", len(lines), buf.String())
	}
	for _, l := range lines {
		if n := strings.Count(l, `"trace_id"`); n != 1 {
			t.Errorf("line has %d trace_id keys, want 1: %s", n, l)
		}
		if n := strings.Count(l, `"request_id"`); n != 1 {
			t.Errorf("line has %d request_id keys, want 1: %s", n, l)
		}
		var rec map[string]any
		if err := json.Unmarshal([]byte(l), &rec); err != nil {
			t.Fatal(err)
		}
		if rec["trace_id"] != sp.SpanContext.TraceID().String() || rec["request_id"] != reqID {
			t.Errorf("line ids %v/%v, want trace %s request %s", rec["trace_id"], rec["request_id"], sp.SpanContext.TraceID(), reqID)
		}
	}
	if !regexp.MustCompile(`^req_[0-9a-f]{32}$`).MatchString(reqID) {
		t.Errorf("request id %q", reqID)
	}
}

func serveOnce(h http.Handler) {
	h.ServeHTTP(httptest.NewRecorder(), httptest.NewRequest("GET", "/api/v1/namespaces/x", nil))
}

func readFile(t *testing.T, path string) string {
	t.Helper()
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	return string(b)
}
