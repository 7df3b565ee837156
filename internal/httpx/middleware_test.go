package httpx

import (
	"context"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/errkind"
)

func TestRequestID(t *testing.T) {
	log, buf := captureLogs()
	var ctxIDs []string
	h := RequestID(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctxIDs = append(ctxIDs, RequestIDFrom(r.Context()))
		Logger(r.Context()).Info("hello")
	}))
	var headerIDs []string
	for range 2 {
		r := httptest.NewRequest(http.MethodGet, "/x", nil)
		r.Header.Set("X-Request-Id", "req_chosen-by-the-client")
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r.WithContext(WithLogger(r.Context(), log)))
		headerIDs = append(headerIDs, w.Header().Get("X-Request-Id"))
	}
	if diff := cmp.Diff(headerIDs, ctxIDs); diff != "" {
		t.Errorf("RequestID: context IDs differ from header IDs (-header +context):\n%s", diff)
	}
	for _, id := range headerIDs {
		if !requestIDPattern.MatchString(id) {
			t.Errorf("RequestID: ID %q, want req_ and 32 hex digits (the client's ID must be ignored)", id)
		}
	}
	if headerIDs[0] == headerIDs[1] {
		t.Errorf("RequestID gave two requests the same ID %q", headerIDs[0])
	}
	var logged []string
	for _, l := range parseLogs(t, buf.String()) {
		logged = append(logged, l.RequestID)
	}
	if diff := cmp.Diff(headerIDs, logged); diff != "" {
		t.Errorf("RequestID: request_id in log lines (-want +got):\n%s", diff)
	}
}

func TestContextDefaults(t *testing.T) {
	ctx := context.Background()
	if got := RequestIDFrom(ctx); got != "" {
		t.Errorf("RequestIDFrom(empty context) = %q, want \"\"", got)
	}
	if got := Logger(ctx); got != slog.Default() {
		t.Errorf("Logger(empty context) = %p, want slog.Default()", got)
	}
	if got := Logger(WithLogger(ctx, nil)); got != slog.Default() {
		t.Errorf("Logger(context with nil logger) = %p, want slog.Default()", got)
	}
}

func TestRecover(t *testing.T) {
	const internalMsg = "An internal error occurred; quote the request ID when reporting it."
	log, buf := captureLogs()
	h := RequestID(Recover(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("ETag", `"abc"`)
		w.Header().Set("Content-Type", "text/plain")
		panic("boom: secret 10.0.0.3")
	})))
	r := httptest.NewRequest(http.MethodGet, "/x", nil)
	w := httptest.NewRecorder()
	h.ServeHTTP(w, r.WithContext(WithLogger(r.Context(), log)))

	var body wireError
	decodeWire(t, w.Body.Bytes(), &body)
	id := w.Header().Get("X-Request-Id")
	if w.Code != http.StatusInternalServerError || body.Error.Code != errkind.CodeInternal ||
		body.Error.Message != internalMsg || body.Meta.RequestID != id {
		t.Errorf("Recover: status %d body %s, want 500 INTERNAL_ERROR with request ID %s", w.Code, w.Body, id)
	}
	if diff := cmp.Diff(wantAPIHeaders(id), apiHeaders(w.Header())); diff != "" {
		t.Errorf("Recover headers (-want +got):\n%s", diff)
	}
	if got := w.Header().Get("ETag"); got != "" {
		t.Errorf("Recover: ETag %q set before the panic survived into the 500", got)
	}
	if strings.Contains(w.Body.String(), "boom") {
		t.Errorf("Recover: body %s leaks the panic value", w.Body)
	}
	logs := buf.String()
	for _, want := range []string{`"level":"ERROR"`, "panic serving request", "boom: secret", "runtime/debug.Stack", `"request_id":"` + id + `"`} {
		if !strings.Contains(logs, want) {
			t.Errorf("Recover: log lacks %q:\n%s", want, logs)
		}
	}
}

// recovered runs h and returns what it panicked with, if anything.
func recovered(h http.Handler, w http.ResponseWriter, r *http.Request) (v any) {
	defer func() { v = recover() }()
	h.ServeHTTP(w, r)
	return nil
}

func TestRecoverAfterCommit(t *testing.T) {
	tests := []struct {
		name    string
		handler http.HandlerFunc
		want    any
	}{
		{"after WriteHeader", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusOK)
			panic("late")
		}, http.ErrAbortHandler},
		{"after Write", func(w http.ResponseWriter, r *http.Request) {
			_, _ = w.Write([]byte("partial"))
			panic("late")
		}, http.ErrAbortHandler},
		{"after Flush", func(w http.ResponseWriter, r *http.Request) {
			if err := http.NewResponseController(w).Flush(); err != nil {
				t.Errorf("Flush through Recover: %v", err)
			}
			panic("late")
		}, http.ErrAbortHandler},
		{"after an informational status", func(w http.ResponseWriter, r *http.Request) {
			w.WriteHeader(http.StatusEarlyHints)
			panic("early")
		}, nil},
		{"deliberate abort", func(w http.ResponseWriter, r *http.Request) {
			panic(http.ErrAbortHandler)
		}, http.ErrAbortHandler},
		{"no panic", func(w http.ResponseWriter, r *http.Request) {}, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			log, _ := captureLogs()
			r := httptest.NewRequest(http.MethodGet, "/x", nil)
			r = r.WithContext(WithLogger(r.Context(), log))
			got := recovered(Recover(tt.handler), httptest.NewRecorder(), r)
			if got != tt.want {
				t.Errorf("Recover(%s) panicked with %v, want %v", tt.name, got, tt.want)
			}
		})
	}
}

func TestSecurityHeaders(t *testing.T) {
	w := httptest.NewRecorder()
	SecurityHeaders(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {})).
		ServeHTTP(w, httptest.NewRequest(http.MethodGet, "/x", nil))
	want := map[string]string{
		"Cache-Control":                "no-store",
		"Content-Security-Policy":      "default-src 'none'; frame-ancestors 'none'",
		"Cross-Origin-Resource-Policy": "same-origin",
		"Referrer-Policy":              "no-referrer",
		"X-Content-Type-Options":       "nosniff",
		"X-Frame-Options":              "DENY",
	}
	got := map[string]string{}
	for k := range want {
		got[k] = w.Header().Get(k)
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("SecurityHeaders (-want +got):\n%s", diff)
	}
}
