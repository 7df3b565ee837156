package server_test

import (
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"

	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/testdb"
)

// TestRequestTurnsThroughTheServer: with one turn, concurrent requests
// through the whole stack all get their answers, in turn.
func TestRequestTurnsThroughTheServer(t *testing.T) {
	e := newEnvWith(t, testdb.SQLite(t), server.Options{MaxRequestsInFlight: 1})
	h := e.srv.Handler()
	const n = 16
	codes := make([]int, n)
	var wg sync.WaitGroup
	for i := range n {
		wg.Go(func() {
			path := "/namespaces"
			if i%4 == 3 {
				path = "/healthz" // a probe, never counted
			}
			r := httptest.NewRequest(http.MethodGet, path, nil)
			r.AddCookie(e.admin.cookie)
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, r)
			codes[i] = rec.Code
		})
	}
	wg.Wait()
	for i, c := range codes {
		if c != http.StatusOK {
			t.Errorf("request %d: status %d, want 200", i, c)
		}
	}
}
