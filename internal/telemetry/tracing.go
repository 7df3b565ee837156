package telemetry

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"strings"

	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracehttp"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
)

// TracingEnabled reports whether the standard OpenTelemetry environment
// asks for traces: OTEL_TRACES_EXPORTER names an exporter other than
// "none", or an OTLP endpoint is set (OTEL_EXPORTER_OTLP_ENDPOINT or
// OTEL_EXPORTER_OTLP_TRACES_ENDPOINT); OTEL_SDK_DISABLED=true turns it
// off whatever else is set.
func TracingEnabled(env func(string) string) bool {
	if strings.EqualFold(strings.TrimSpace(env("OTEL_SDK_DISABLED")), "true") {
		return false
	}
	if e := strings.TrimSpace(env("OTEL_TRACES_EXPORTER")); e != "" {
		return e != "none"
	}
	return env("OTEL_EXPORTER_OTLP_ENDPOINT") != "" || env("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT") != ""
}

// SetupTracing installs the global tracer provider and W3C trace-context
// propagator when TracingEnabled, exporting with OTLP over HTTP/protobuf
// (otlptracehttp reads the OTEL_EXPORTER_OTLP_* endpoint, headers,
// timeout and TLS variables itself; the SDK reads OTEL_TRACES_SAMPLER and
// the OTEL_BSP_* batch settings; OTEL_SERVICE_NAME and
// OTEL_RESOURCE_ATTRIBUTES name the service, "occ" by default).
//
// It returns the provider (nil when tracing is off: the global provider
// stays the no-op one, and spans cost a context lookup) and a shutdown
// function that flushes pending spans within ctx's deadline. An exporter
// or protocol this build does not support is an error, so a configured
// but silently missing trace pipeline cannot happen.
func SetupTracing(ctx context.Context, env func(string) string, logger *slog.Logger) (trace.TracerProvider, func(context.Context) error, error) {
	noop := func(context.Context) error { return nil }
	if !TracingEnabled(env) {
		return nil, noop, nil
	}
	if e := strings.TrimSpace(env("OTEL_TRACES_EXPORTER")); e != "" && e != "otlp" {
		return nil, noop, fmt.Errorf("OTEL_TRACES_EXPORTER=%q: only otlp (or none) is supported", e)
	}
	proto := env("OTEL_EXPORTER_OTLP_TRACES_PROTOCOL")
	if proto == "" {
		proto = env("OTEL_EXPORTER_OTLP_PROTOCOL")
	}
	if proto != "" && proto != "http/protobuf" {
		return nil, noop, fmt.Errorf("OTLP protocol %q: only http/protobuf is supported", proto)
	}
	exp, err := otlptracehttp.New(ctx)
	if err != nil {
		return nil, noop, fmt.Errorf("OTLP trace exporter: %w", err)
	}
	res, err := resource.New(ctx,
		resource.WithAttributes(attribute.String("service.name", "occ")),
		resource.WithFromEnv(), resource.WithTelemetrySDK())
	if err != nil && !errors.Is(err, resource.ErrPartialResource) {
		return nil, noop, fmt.Errorf("trace resource: %w", err)
	}
	tp := sdktrace.NewTracerProvider(sdktrace.WithBatcher(exp), sdktrace.WithResource(res))
	otel.SetTracerProvider(tp)
	otel.SetTextMapPropagator(propagation.NewCompositeTextMapPropagator(propagation.TraceContext{}, propagation.Baggage{}))
	otel.SetErrorHandler(otel.ErrorHandlerFunc(func(err error) {
		logger.Warn("opentelemetry", "error", err)
	}))
	logger.Info("tracing on: exporting spans with OTLP over HTTP")
	return tp, tp.Shutdown, nil
}

// LogHandler wraps h so that a record logged with a context gets the
// request id (from requestID, which may be nil) and the trace_id and
// span_id of a valid span in it, tying the lines a request or worker step
// writes through any logger to the request and its trace. A logger that
// already carries one of these attributes (the per-request logger gets
// request_id and trace_id when the request starts, so that lines logged
// without a context have them too) does not get it twice.
func LogHandler(h slog.Handler, requestID func(context.Context) string) slog.Handler {
	if th, ok := h.(*traceHandler); ok {
		return th
	}
	return &traceHandler{next: h, requestID: requestID}
}

type traceHandler struct {
	next      slog.Handler
	requestID func(context.Context) string
	hasTrace  bool // trace_id already among the logger's attributes
	hasReq    bool // request_id already among them
}

func (t *traceHandler) Enabled(ctx context.Context, l slog.Level) bool { return t.next.Enabled(ctx, l) }

func (t *traceHandler) Handle(ctx context.Context, r slog.Record) error {
	if ctx == nil {
		return t.next.Handle(ctx, r)
	}
	var add []slog.Attr
	if !t.hasReq && t.requestID != nil {
		if id := t.requestID(ctx); id != "" {
			add = append(add, slog.String("request_id", id))
		}
	}
	if !t.hasTrace {
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			add = append(add, slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
		}
	}
	if len(add) > 0 {
		r = r.Clone()
		r.AddAttrs(add...)
	}
	return t.next.Handle(ctx, r)
}

func (t *traceHandler) WithAttrs(as []slog.Attr) slog.Handler {
	n := *t
	n.next = t.next.WithAttrs(as)
	for _, a := range as {
		switch a.Key {
		case "trace_id":
			n.hasTrace = true
		case "request_id":
			n.hasReq = true
		}
	}
	return &n
}

func (t *traceHandler) WithGroup(name string) slog.Handler {
	n := *t
	n.next = t.next.WithGroup(name)
	return &n
}

// LogAttrs returns trace_id and span_id of the span in ctx as logger
// arguments, or nil when ctx has no valid span.
func LogAttrs(ctx context.Context) []any {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() {
		return nil
	}
	return []any{"trace_id", sc.TraceID().String(), "span_id", sc.SpanID().String()}
}
