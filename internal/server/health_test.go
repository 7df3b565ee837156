package server_test

import (
	"context"
	"errors"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strings"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/httpx"
	"github.com/openclaw/occ/internal/server"
)

// TestWorkerProbesAnswerAStuckLoop: with Loops set (occ worker's probes),
// both probes answer 503 DEPENDENCY_UNAVAILABLE while it reports an error,
// /readyz also when the database does not answer, and the reply never
// carries the error's own text (it is logged); without Loops (the API's
// probes) /healthz answers 200 whatever the database does.
func TestWorkerProbesAnswerAStuckLoop(t *testing.T) {
	stuck := errors.New("worker loop 1 of 1 has taken no step for 12m1s (more than 12m0s)")
	down := errors.New("dial tcp 127.0.0.1:5432: connect: connection refused")
	const unavailable = `{"error":{"code":"DEPENDENCY_UNAVAILABLE","message":"A service this request depends on is unavailable; try again later."},"meta":{"requestId":"req_…"}}`
	type reply struct {
		Status int
		Body   string
	}
	for _, tt := range []struct {
		name        string
		loops, ping error
		api         bool // Loops nil, as on the API listener
		healthz     reply
		readyz      reply
	}{
		{name: "loops progressing, database up",
			healthz: reply{200, `{"data":{"status":"ok"},"meta":{"requestId":"req_…"}}`},
			readyz:  reply{200, `{"data":{"status":"ready"},"meta":{"requestId":"req_…"}}`}},
		{name: "a loop stuck", loops: stuck,
			healthz: reply{503, unavailable}, readyz: reply{503, unavailable}},
		{name: "database down", ping: down,
			healthz: reply{200, `{"data":{"status":"ok"},"meta":{"requestId":"req_…"}}`}, readyz: reply{503, unavailable}},
		{name: "API probes, database down", api: true, ping: down,
			healthz: reply{200, `{"data":{"status":"ok"},"meta":{"requestId":"req_…"}}`}, readyz: reply{503, unavailable}},
	} {
		t.Run(tt.name, func(t *testing.T) {
			h := &server.Health{Ping: func(context.Context) error { return tt.ping }}
			if !tt.api {
				h.Loops = func() error { return tt.loops }
			}
			reqID := regexp.MustCompile(`"requestId":"req_[0-9a-f]{32}"`)
			serve := func(handler http.HandlerFunc, path string) reply {
				rec := httptest.NewRecorder()
				httpx.RequestID(handler).ServeHTTP(rec, httptest.NewRequest(http.MethodGet, path, nil))
				return reply{rec.Code, reqID.ReplaceAllString(strings.TrimSpace(rec.Body.String()), `"requestId":"req_…"`)}
			}
			got := map[string]reply{"/healthz": serve(h.Live, "/healthz"), "/readyz": serve(h.Ready, "/readyz")}
			want := map[string]reply{"/healthz": tt.healthz, "/readyz": tt.readyz}
			if diff := cmp.Diff(want, got); diff != "" {
				t.Errorf("probes (-want +got):\n%s", diff)
			}
		})
	}
}
