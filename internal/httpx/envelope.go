package httpx

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"unicode/utf16"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/wirejson"
)

// maxDetailPath caps one detail's JSON pointer in a reply. A pointer repeats
// every ancestor key, so without a cap a body of long nested keys could make
// the error reply many times larger than the request. Real pointers are far
// shorter; a capped one is cut on a rune boundary.
const maxDetailPath = 1024

// serverMessages are the only messages a 5xx reply can carry. A 5xx means
// the server failed, and whatever text came with the failure (driver
// errors, SQL, file paths) is for the log, not the client; so the message
// is fixed per public code and the client quotes meta.requestId instead.
var serverMessages = map[string]string{
	errkind.CodeInternal:       "An internal error occurred; quote the request ID when reporting it.",
	errkind.CodeNotImplemented: "This operation is not implemented.",
	errkind.CodeUnavailable:    "A service this request depends on is unavailable; try again later.",
	errkind.CodeUnknownOutcome: "The outcome of this write is unknown: it may or may not have been applied. Read the resource before retrying.",
}

const serverMessageOther = "The server could not complete the request; quote the request ID when reporting it."

// Write sends data as {"data": data, "meta": {"requestId": ...}} with the
// given status and the standard API headers. The envelopes are the wire
// types apitypes.Envelope and apitypes.ErrorEnvelope; data should be an
// apitypes value too (package api accepts nothing else).
//
// The body is encoded completely before anything is sent, so a value that
// cannot be encoded (a channel, a NaN) becomes a logged 500 envelope rather
// than a truncated 200. Errors writing to the connection are ignored: the
// client has gone and there is no one left to tell.
//
// The most frequent replies (an Agent, the Agent and Namespace pages, the
// audit page) are encoded by package wirejson into a pooled buffer, byte
// for byte as encoding/json would encode them; everything else, and any
// value wirejson declines, goes through encoding/json.
func Write(w http.ResponseWriter, r *http.Request, status int, data any) {
	id := requestIDFor(w, r)
	bp := replyBuffers.Get().(*[]byte)
	defer putReplyBuffer(bp)
	if b, ok := wirejson.AppendEnvelope((*bp)[:0], data, id); ok {
		*bp = b
		writeBytes(w, id, status, b)
		return
	}
	b, err := encode(apitypes.Envelope[any]{Data: data, Meta: apitypes.Meta{RequestID: id}})
	if err != nil {
		Logger(r.Context()).Error("response could not be encoded",
			"error", err, "type", fmt.Sprintf("%T", data), "method", r.Method, "path", r.URL.Path)
		writeErrorBody(w, r, &errkind.Error{Kind: errkind.Internal})
		return
	}
	writeBytes(w, id, status, b)
}

// WriteError maps err to a status and an error envelope and sends it. It is
// the one place in OCC where that mapping happens.
//
//   - The *errkind.Error in err's chain decides status, code, message,
//     details and data. Anything else (including nil) is 500 INTERNAL_ERROR.
//   - Every 5xx is logged with the full error text (causes included)
//     through the request's logger: a 500 at error level, a classified 5xx
//     (503, 501: documented, expected under a drain or an outage) at warn.
//     The reply carries only a fixed message for its code. An Internal
//     error's data is dropped too.
//   - 4xx messages are capped at errkind.MaxMessage characters (UTF-16
//     code units, as the reference counts them) on a rune
//     boundary, details at errkind.MaxDetails entries. A 4xx cause is
//     logged at debug level and never sent.
//   - 405 replies take their Allow header from data["allow"] (a string,
//     as set by Mux), which is not repeated in the body.
//   - A failure caused by the client going away (clientGone) is logged at
//     info as "client disconnected" with the error text and the code the
//     reply would have had, and answered 499 without a body.
func WriteError(w http.ResponseWriter, r *http.Request, err error) {
	e := errkind.As(err)
	if e == nil {
		e = &errkind.Error{Kind: errkind.Internal}
	}
	status, code := statusCode(e)
	log := Logger(r.Context())
	if clientGone(r, err) {
		log.Info("client disconnected",
			"status", statusClientClosedRequest, "code", code, "error", err.Error(), "method", r.Method, "path", r.URL.Path)
		w.Header().Set(headerRequestID, requestIDFor(w, r))
		w.WriteHeader(statusClientClosedRequest)
		return
	}
	switch {
	case status >= 500:
		text := "WriteError called with a nil error"
		if err != nil {
			text = err.Error()
		}
		// A classified 5xx (503 DEPENDENCY_UNAVAILABLE or UNKNOWN_OUTCOME,
		// 501) is a documented answer to a known condition: a drain, shed
		// password hashing, the database or a gateway out of reach. Under a
		// drain or a database outage every request gets one, so they are
		// warnings; error level is kept for 500, which no caller expects.
		level := slog.LevelWarn
		if status == http.StatusInternalServerError {
			level = slog.LevelError
		}
		log.Log(r.Context(), level, "request failed",
			"status", status, "code", code, "error", text, "method", r.Method, "path", r.URL.Path)
	case e.Cause != nil:
		log.Debug("request rejected",
			"status", status, "code", code, "error", err.Error(), "method", r.Method, "path", r.URL.Path)
	}
	writeErrorBody(w, r, e)
}

// statusClientClosedRequest is nginx's 499 "client closed request": the
// status of a request whose client disconnected before it was answered.
// Nobody reads it; it is what the request's metrics (occ_http_requests_total
// code="499") and log line record, so a disconnect is neither a 500 nor
// counted in the 5xx error rate.
const statusClientClosedRequest = 499

// clientGone reports whether err is the request's own cancellation: the
// request context was canceled and err wraps context.Canceled. While a
// handler runs, net/http cancels that context only when the client's
// connection closes (or, over HTTP/2, the client resets the stream); OCC's
// server gives requests a base context that is never canceled, so a
// shutdown does not look like a disconnect. A
// server-side deadline (context.DeadlineExceeded, on the request context or
// one derived from it) is a failure of the server and keeps its mapping, as
// does any other failure that happens to end after the client left.
func clientGone(r *http.Request, err error) bool {
	return errors.Is(err, context.Canceled) && errors.Is(r.Context().Err(), context.Canceled)
}

// statusCode returns the status and public code for e, treating a kind the
// errkind table does not know as internal.
func statusCode(e *errkind.Error) (int, string) {
	status := e.Status()
	code := e.PublicCode()
	if status == 0 || code == "" {
		return http.StatusInternalServerError, errkind.CodeInternal
	}
	return status, code
}

// writeErrorBody sends the envelope for e without logging; callers have
// logged already (WriteError, Recover).
func writeErrorBody(w http.ResponseWriter, r *http.Request, e *errkind.Error) {
	id := requestIDFor(w, r)
	status, code := statusCode(e)
	fields := apitypes.Error{Code: code}
	data := e.Data
	if status == http.StatusMethodNotAllowed {
		if allow, ok := data["allow"].(string); ok {
			w.Header().Set("Allow", allow)
			data = without(data, "allow")
		}
	}
	// A throttled or overloaded reply says when to come back, in the
	// header HTTP clients honour as well as in the body.
	if secs, ok := data[errkind.RetryAfterKey].(int); ok && secs > 0 {
		w.Header().Set("Retry-After", strconv.Itoa(secs))
	}
	if status >= 500 {
		fields.Message = serverMessages[code]
		if fields.Message == "" {
			fields.Message = serverMessageOther
		}
		if status != http.StatusInternalServerError {
			fields.Data = data
		}
	} else {
		fields.Message = e.Message
		if fields.Message == "" {
			fields.Message = http.StatusText(status) + "."
		}
		fields.Message = clip(fields.Message, errkind.MaxMessage)
		fields.Details = publicDetails(e.Details)
		fields.Data = data
	}
	b, err := encode(apitypes.ErrorEnvelope{Error: fields, Meta: apitypes.Meta{RequestID: id}})
	if err != nil {
		// Only Data can fail to encode; the error's author put something
		// unencodable in it. Send the same error without it.
		Logger(r.Context()).Error("error data could not be encoded", "error", err, "code", code)
		fields.Data = nil
		b, _ = encode(apitypes.ErrorEnvelope{Error: fields, Meta: apitypes.Meta{RequestID: id}})
	}
	writeBytes(w, id, status, b)
}

// publicDetails converts details to their wire type, capping their number
// and the length of each pointer.
func publicDetails(ds []errkind.Detail) []apitypes.ErrorDetail {
	if len(ds) == 0 {
		return nil
	}
	out := make([]apitypes.ErrorDetail, 0, min(len(ds), errkind.MaxDetails))
	for _, d := range ds[:min(len(ds), errkind.MaxDetails)] {
		out = append(out, apitypes.ErrorDetail{Path: clip(d.Path, maxDetailPath), Code: d.Code})
	}
	return out
}

// without returns a copy of m lacking key; nil if nothing remains.
func without(m map[string]any, key string) map[string]any {
	var out map[string]any
	for k, v := range m {
		if k == key {
			continue
		}
		if out == nil {
			out = make(map[string]any, len(m))
		}
		out[k] = v
	}
	return out
}

// clip cuts s to at most n characters as the reference counts them, in
// UTF-16 code units (a JavaScript string's length): a character beyond the
// Basic Multilingual Plane counts two, and one that would not fit whole is
// left out, never split. Invalid bytes become U+FFFD first, because the
// JSON encoder would otherwise expand each one after the cut.
func clip(s string, n int) string {
	s = strings.ToValidUTF8(s, "\uFFFD")
	if len(s) <= n {
		return s // n bytes are at most n units
	}
	units := 0
	for i, r := range s {
		if units += utf16.RuneLen(r); units > n {
			return s[:i]
		}
	}
	return s
}

// replyBuffers holds the buffers of wirejson's replies. writeBytes has
// handed a reply's bytes to the connection (copied or sent) when it
// returns, so its buffer can go back then.
var replyBuffers = sync.Pool{New: func() any { b := make([]byte, 0, 4096); return &b }}

// maxPooledReply bounds the buffers kept for reuse: a reply of the largest
// page (500 Agents, about 160 KB) fits, and a rare larger one does not pin
// its memory in the pool.
const maxPooledReply = 256 << 10

func putReplyBuffer(bp *[]byte) {
	if cap(*bp) <= maxPooledReply {
		*bp = (*bp)[:0]
		replyBuffers.Put(bp)
	}
}

// encode marshals v without HTML escaping: replies are JSON for API
// clients, never HTML, and escaping <, > and & would only make messages and
// data harder to read and compare.
func encode(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}

// writeBytes sets the standard API headers and sends b.
func writeBytes(w http.ResponseWriter, id string, status int, b []byte) {
	h := w.Header()
	h.Set("Cache-Control", "no-store")
	h.Set("Content-Type", "application/json; charset=utf-8")
	h.Set("X-Content-Type-Options", "nosniff")
	h.Set(headerRequestID, id)
	if !bodyAllowed(status) {
		h.Del("Content-Length")
		w.WriteHeader(status)
		return
	}
	h.Set("Content-Length", strconv.Itoa(len(b)))
	w.WriteHeader(status)
	_, _ = w.Write(b)
}

// bodyAllowed reports whether HTTP permits a body with status.
func bodyAllowed(status int) bool {
	return status >= 200 && status != http.StatusNoContent && status != http.StatusNotModified
}
