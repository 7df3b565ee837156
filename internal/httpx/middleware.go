package httpx

import (
	"bufio"
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"log/slog"
	"maps"
	"net"
	"net/http"
	"runtime/debug"

	"github.com/openclaw/occ/internal/errkind"
)

// headerRequestID is the response header that carries the request ID. The
// same ID appears in the envelope's meta.requestId and in every log line the
// request's logger writes, so one value ties a client report to the logs.
const headerRequestID = "X-Request-Id"

type ctxKey int

const (
	requestIDKey ctxKey = iota
	loggerKey
)

// RequestID gives every request a fresh random ID, stores it and a logger
// carrying it (attribute request_id) in the request context, and sets the
// X-Request-Id response header before the next handler runs, so even replies
// not written by this package carry it.
//
// An incoming X-Request-Id header is ignored: a client-chosen ID could
// collide with another request's or forge log lines that appear to belong to
// someone else. The logger is derived from the one already in the context
// (see WithLogger), else slog.Default().
func RequestID(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		id := newRequestID()
		ctx := context.WithValue(r.Context(), requestIDKey, id)
		ctx = WithLogger(ctx, Logger(ctx).With("request_id", id))
		w.Header().Set(headerRequestID, id)
		next.ServeHTTP(w, r.WithContext(ctx))
	})
}

// RequestIDFrom returns the ID that RequestID stored in ctx, or "" if the
// request did not pass through RequestID.
func RequestIDFrom(ctx context.Context) string {
	id, _ := ctx.Value(requestIDKey).(string)
	return id
}

// WithLogger returns a context carrying l; Logger(ctx) returns it. Servers
// put their base logger in the request context (http.Server.BaseContext or
// a middleware) so that RequestID can derive the per-request one from it.
func WithLogger(ctx context.Context, l *slog.Logger) context.Context {
	return context.WithValue(ctx, loggerKey, l)
}

// Logger returns the logger stored in ctx, or slog.Default() if there is
// none. It never returns nil.
func Logger(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey).(*slog.Logger); ok && l != nil {
		return l
	}
	return slog.Default()
}

// newRequestID returns "req_" followed by 16 random bytes in hex: unique
// without coordination between replicas, and unguessable so an ID says
// nothing about traffic volume. crypto/rand.Read never fails since Go 1.24
// (it crashes the program instead), so its error is not checked.
func newRequestID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return "req_" + hex.EncodeToString(b[:])
}

// requestIDFor returns the request's ID, making one up for requests that
// did not pass through RequestID (tests, or a handler mounted outside the
// chain) so that the X-Request-Id promise holds for every reply.
func requestIDFor(w http.ResponseWriter, r *http.Request) string {
	if id := RequestIDFrom(r.Context()); id != "" {
		return id
	}
	if id := w.Header().Get(headerRequestID); id != "" {
		return id
	}
	return newRequestID()
}

// Recover turns a panic in next into a logged stack trace and a 500
// INTERNAL_ERROR envelope, so one bad request neither kills the connection
// silently nor leaks the panic value to the client.
//
// If the handler had already started its reply, a well-formed error can no
// longer be sent; Recover then re-panics with http.ErrAbortHandler so the
// server drops the connection and the client sees a truncated reply rather
// than one that looks complete. A panic with http.ErrAbortHandler itself is
// a deliberate abort and passes through without logging.
//
// Put Recover inside RequestID so the reply and the log line carry the ID.
func Recover(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		tw := &trackingWriter{ResponseWriter: w}
		// Headers the handler set before panicking (an ETag, a Location)
		// must not decorate the 500, so the ones set before it are restored.
		before := w.Header().Clone()
		defer func() {
			v := recover()
			if v == nil {
				return
			}
			if v == http.ErrAbortHandler {
				panic(v)
			}
			Logger(r.Context()).Error("panic serving request",
				"panic", fmt.Sprint(v),
				"method", r.Method,
				"path", r.URL.Path,
				"stack", string(debug.Stack()))
			if tw.committed {
				panic(http.ErrAbortHandler)
			}
			h := w.Header()
			clear(h)
			maps.Copy(h, before)
			writeErrorBody(w, r, &errkind.Error{Kind: errkind.Internal})
		}()
		next.ServeHTTP(tw, r)
	})
}

// trackingWriter records whether the reply has been committed (status line
// or body sent, or the connection hijacked), which decides what Recover can
// still do. Unwrap lets http.ResponseController reach the real writer; Flush
// and Hijack are forwarded explicitly for code that type-asserts instead.
type trackingWriter struct {
	http.ResponseWriter
	committed bool
}

func (t *trackingWriter) WriteHeader(code int) {
	// 1xx informational responses do not commit the final reply.
	if code >= 200 || code == http.StatusSwitchingProtocols {
		t.committed = true
	}
	t.ResponseWriter.WriteHeader(code)
}

func (t *trackingWriter) Write(b []byte) (int, error) {
	t.committed = true
	return t.ResponseWriter.Write(b)
}

func (t *trackingWriter) Unwrap() http.ResponseWriter { return t.ResponseWriter }

// Flush forwards to the underlying writer; if that cannot flush, nothing
// happens, as with any buffered writer.
func (t *trackingWriter) Flush() {
	t.committed = true
	_ = http.NewResponseController(t.ResponseWriter).Flush()
}

// Hijack forwards to the underlying writer (WebSocket upgrades need it).
func (t *trackingWriter) Hijack() (net.Conn, *bufio.ReadWriter, error) {
	c, rw, err := http.NewResponseController(t.ResponseWriter).Hijack()
	if err == nil {
		t.committed = true
	}
	return c, rw, err
}

// SecurityHeaders sets response headers that make API replies inert in a
// browser: never sniffed, framed, cached, sent as a referrer, embedded by
// other origins or allowed to load anything. Handlers may override a header
// after it runs. It is meant for API routes; the console sets its own
// policy. Strict-Transport-Security belongs to whatever terminates TLS.
func SecurityHeaders(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		h := w.Header()
		h.Set("Cache-Control", "no-store")
		h.Set("Content-Security-Policy", "default-src 'none'; frame-ancestors 'none'")
		h.Set("Cross-Origin-Resource-Policy", "same-origin")
		h.Set("Referrer-Policy", "no-referrer")
		h.Set("X-Content-Type-Options", "nosniff")
		h.Set("X-Frame-Options", "DENY")
		next.ServeHTTP(w, r)
	})
}
