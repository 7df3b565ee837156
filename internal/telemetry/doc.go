// Package telemetry owns OCC's process observability: the Prometheus
// registry and every metric OCC exports (HTTP requests, native gateway
// operations, the deployment worker, audit write failures, the database
// pool, Go runtime and process), the separate metrics listener that serves
// them together with pprof, the OpenTelemetry tracer provider configured
// from the standard OTEL_* environment variables, the HTTP middleware that
// records request metrics and spans, and the slog handler that puts trace
// ids on log lines.
//
// Domain packages never see the registry. Each declares the small observer
// interface it needs (agentgw.Observer, worker.Observer,
// audit.FailureObserver) and Metrics implements them; spans are started by
// the domain packages themselves through the global OpenTelemetry API,
// which is a no-op until SetupTracing installs a provider.
//
// Label values are bounded by construction: HTTP routes are ServeMux
// patterns (never raw paths or ids), methods are the standard ones or
// "other", and every other label comes from a fixed set of constants.
// Nothing recorded here carries file content, a token or a key.
package telemetry
