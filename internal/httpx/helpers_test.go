package httpx

import (
	"bytes"
	"encoding/json"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/openclaw/occ/internal/errkind"
)

// outcome is what a test compares about an error returned by this package:
// the reply WriteError would produce, minus the message.
type outcome struct {
	Status  int
	Code    string
	Details []errkind.Detail
}

// outcomeOf classifies err the way WriteError does; nil is 200.
func outcomeOf(err error) outcome {
	if err == nil {
		return outcome{Status: http.StatusOK}
	}
	e := errkind.As(err)
	if e == nil {
		return outcome{Status: http.StatusInternalServerError, Code: errkind.CodeInternal}
	}
	status, code := statusCode(e)
	return outcome{Status: status, Code: code, Details: e.Details}
}

func invalid(details ...errkind.Detail) outcome {
	return outcome{Status: http.StatusBadRequest, Code: errkind.CodeInvalidRequest, Details: details}
}

func detail(path, code string) errkind.Detail { return errkind.Detail{Path: path, Code: code} }

// jsonRequest builds a POST with a JSON content type and a body whose
// length is known (Content-Length set).
func jsonRequest(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/x", strings.NewReader(body))
	r.Header.Set("Content-Type", "application/json")
	return r
}

// onlyReader hides the concrete type of a reader so that httptest leaves
// Content-Length unknown (-1), as for a chunked request.
type onlyReader struct{ io.Reader }

// chunkedRequest builds a POST with a JSON content type and a body of
// unknown length.
func chunkedRequest(body string) *http.Request {
	r := httptest.NewRequest(http.MethodPost, "/x", onlyReader{strings.NewReader(body)})
	r.Header.Set("Content-Type", "application/json")
	return r
}

// wireError is the error envelope as a client sees it; decoding with
// DisallowUnknownFields proves there is nothing else in it.
type wireError struct {
	Error struct {
		Code    string           `json:"code"`
		Message string           `json:"message"`
		Details []errkind.Detail `json:"details"`
		Data    map[string]any   `json:"data"`
	} `json:"error"`
	Meta wireMeta `json:"meta"`
}

type wireMeta struct {
	RequestID string `json:"requestId"`
}

func decodeWire(t *testing.T, body []byte, v any) {
	t.Helper()
	dec := json.NewDecoder(bytes.NewReader(body))
	dec.DisallowUnknownFields()
	if err := dec.Decode(v); err != nil {
		t.Fatalf("reply body %q: %v", body, err)
	}
}

// captureLogs returns a logger writing JSON lines to the returned buffer.
func captureLogs() (*slog.Logger, *bytes.Buffer) {
	var buf bytes.Buffer
	return slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug})), &buf
}

// apiHeaders picks the headers every API reply must carry.
func apiHeaders(h http.Header) map[string]string {
	return map[string]string{
		"Cache-Control":          h.Get("Cache-Control"),
		"Content-Type":           h.Get("Content-Type"),
		"X-Content-Type-Options": h.Get("X-Content-Type-Options"),
		"X-Request-Id":           h.Get("X-Request-Id"),
	}
}

func wantAPIHeaders(id string) map[string]string {
	return map[string]string{
		"Cache-Control":          "no-store",
		"Content-Type":           "application/json; charset=utf-8",
		"X-Content-Type-Options": "nosniff",
		"X-Request-Id":           id,
	}
}
