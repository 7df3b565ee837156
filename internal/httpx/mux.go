package httpx

import (
	"net/http"

	"github.com/openclaw/occ/internal/errkind"
)

// Mux is an http.ServeMux (Go 1.22 patterns such as
// "GET /namespaces/{ns}") whose own replies are JSON envelopes: 404
// NOT_FOUND when no pattern matches the path, and 405 METHOD_NOT_ALLOWED
// with the Allow header the ServeMux computed when the path matches only
// for other methods. HEAD is served by GET routes, as by ServeMux.
//
// ServeMux would also redirect non-canonical paths ("//a", "/a/../b", or
// "/a" when only "/a/" is registered) with an HTML body; Mux answers them
// 404 instead. API paths are canonical, and a redirect invites clients to
// re-send writes somewhere they did not intend.
//
// The zero value is ready to use. A Mux must not be copied after first use.
type Mux struct {
	mux http.ServeMux
}

// NewMux returns an empty Mux.
func NewMux() *Mux { return &Mux{} }

// route marks handlers registered through Mux, telling them apart from the
// ServeMux's internal not-found, not-allowed and redirect handlers.
type route struct{ http.Handler }

// Handle registers h for pattern. Like http.ServeMux.Handle it panics if the
// pattern is invalid or conflicts with a registered one, or if h is nil.
func (m *Mux) Handle(pattern string, h http.Handler) {
	if h == nil {
		panic("httpx: nil handler for " + pattern)
	}
	m.mux.Handle(pattern, route{h})
}

// HandleFunc registers f for pattern.
func (m *Mux) HandleFunc(pattern string, f func(http.ResponseWriter, *http.Request)) {
	if f == nil {
		panic("httpx: nil handler for " + pattern)
	}
	m.Handle(pattern, http.HandlerFunc(f))
}

// ServeHTTP dispatches r to the handler registered for it, or answers 404
// or 405. A matched request is looked up twice (once here, once by the
// ServeMux, which also sets r.Pattern and the path values); the lookup is
// cheap next to any handler.
func (m *Mux) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	h, _ := m.mux.Handler(r)
	if _, ok := h.(route); ok {
		m.mux.ServeHTTP(w, r)
		return
	}
	// Run the ServeMux's own handler against a recorder to learn what it
	// decided (405 and the Allow list, or anything else) without sending
	// its plain-text or HTML reply.
	rec := recorder{header: http.Header{}}
	h.ServeHTTP(&rec, r)
	if rec.status == http.StatusMethodNotAllowed {
		e := errkind.New(errkind.MethodNotAllowed, "The method is not allowed for this path.")
		e.Data = map[string]any{"allow": rec.header.Get("Allow")}
		WriteError(w, r, e)
		return
	}
	WriteError(w, r, errkind.New(errkind.NotFound, "No API route matches the request path."))
}

// recorder is a ResponseWriter that keeps the header and status and
// discards the body.
type recorder struct {
	header http.Header
	status int
}

func (r *recorder) Header() http.Header { return r.header }

func (r *recorder) WriteHeader(status int) {
	if r.status == 0 {
		r.status = status
	}
}

func (r *recorder) Write(b []byte) (int, error) {
	if r.status == 0 {
		r.status = http.StatusOK
	}
	return len(b), nil
}
