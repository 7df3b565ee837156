package telemetry

import (
	"bufio"
	"context"
	"net"
	"net/http"
	"strconv"
	"strings"
	"time"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// unmatchedRoute is the route label of requests no pattern matched (404s,
// 405s): one series for all of them, whatever path was asked for.
const unmatchedRoute = "unmatched"

const tracerName = "github.com/openclaw/occ/internal/telemetry"

type routeKey struct{}

// routeInfo carries the matched pattern from Route (inside the chain, next
// to the mux) back out to the middleware, which needs it after the handler
// returned and cannot see the request the mux set it on.
type routeInfo struct{ pattern string }

// HTTP returns middleware recording every request in m (nil: no metrics)
// and, when tp is not nil, a server span per request named after the
// route pattern, continuing a W3C traceparent the client sent. With both
// nil it returns next itself: no cost when observability is off.
//
// Put it outermost, so it sees the final status of every reply (including
// the 500 of a recovered panic), and wrap the ServeMux that routes the
// request with Route, which is what reports the pattern.
func HTTP(m *Metrics, tp trace.TracerProvider, next http.Handler) http.Handler {
	if m == nil && tp == nil {
		return next
	}
	var tracer trace.Tracer
	if tp != nil {
		tracer = tp.Tracer(tracerName)
	}
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		info := &routeInfo{}
		ctx := context.WithValue(r.Context(), routeKey{}, info)
		method := methodLabel(r.Method)
		var span trace.Span
		if tracer != nil {
			ctx = otel.GetTextMapPropagator().Extract(ctx, propagation.HeaderCarrier(r.Header))
			ctx, span = tracer.Start(ctx, method, trace.WithSpanKind(trace.SpanKindServer),
				trace.WithAttributes(attribute.String("http.request.method", method)))
		}
		sw := &statusWriter{ResponseWriter: w}
		if m != nil {
			m.httpInFlight.Inc()
		}
		defer func() {
			// Deferred so that an aborted reply (a re-panic with
			// http.ErrAbortHandler) is counted too; the panic continues.
			route := routeLabel(info.pattern)
			code := sw.status
			if code == 0 {
				code = http.StatusOK
			}
			if m != nil {
				m.httpInFlight.Dec()
				m.httpRequests.WithLabelValues(route, method, strconv.Itoa(code)).Inc()
				m.httpDuration.WithLabelValues(route, method).Observe(time.Since(start).Seconds())
			}
			if span != nil {
				span.SetName(method + " " + route)
				span.SetAttributes(attribute.String("http.route", route), attribute.Int("http.response.status_code", code))
				if code >= 500 {
					span.SetStatus(codes.Error, "")
				}
				span.End()
			}
		}()
		next.ServeHTTP(sw, r.WithContext(ctx))
	})
}

// Route wraps the ServeMux (or httpx.Mux) that routes a request: the mux
// sets r.Pattern on the request it was handed, and Route reports it to the
// HTTP middleware once the handler returned.
func Route(mux http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		info, _ := r.Context().Value(routeKey{}).(*routeInfo)
		if info == nil {
			mux.ServeHTTP(w, r)
			return
		}
		defer func() { info.pattern = r.Pattern }()
		mux.ServeHTTP(w, r)
	})
}

// routeLabel is the path part of a ServeMux pattern ("GET /a/{id}" ->
// "/a/{id}"), or unmatchedRoute.
func routeLabel(pattern string) string {
	if pattern == "" {
		return unmatchedRoute
	}
	if i := strings.IndexByte(pattern, ' '); i >= 0 {
		pattern = strings.TrimLeft(pattern[i+1:], " \t")
	}
	return pattern
}

// methodLabel bounds the method label: a client may send any token as a
// method.
func methodLabel(m string) string {
	switch m {
	case http.MethodGet, http.MethodHead, http.MethodPost, http.MethodPut, http.MethodPatch,
		http.MethodDelete, http.MethodOptions:
		return m
	}
	return "other"
}

// statusWriter records the status code. Unwrap lets
// http.ResponseController reach the real writer; Flush and Hijack are
// forwarded for code that type-asserts instead.
type statusWriter struct {
	http.ResponseWriter
	status int
}

func (s *statusWriter) WriteHeader(code int) {
	if s.status == 0 && (code >= 200 || code == http.StatusSwitchingProtocols) {
		s.status = code
	}
	s.ResponseWriter.WriteHeader(code)
}

func (s *statusWriter) Write(b []byte) (int, error) {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	return s.ResponseWriter.Write(b)
}

func (s *statusWriter) Unwrap() http.ResponseWriter { return s.ResponseWriter }

func (s *statusWriter) Flush() {
	if s.status == 0 {
		s.status = http.StatusOK
	}
	_ = http.NewResponseController(s.ResponseWriter).Flush()
}

func (s *statusWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(s.ResponseWriter).Hijack()
	if err == nil && s.status == 0 {
		s.status = http.StatusSwitchingProtocols
	}
	return c, rw, err
}
