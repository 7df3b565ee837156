package server

import (
	"context"
	"io"
	"net"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestGracefulDrainUnderLoad: while 20 slow requests are in flight the
// drain starts; each of them finishes with 200, every request that
// arrives after the start answers 503 with Retry-After and
// Connection: close (liveness still 200), wait returns once the in-flight
// requests are done, and http.Server.Shutdown then completes within the
// shutdown timeout. Real loopback HTTP, bounded counts.
func TestGracefulDrainUnderLoad(t *testing.T) {
	release := make(chan struct{})
	var started atomic.Int64
	slow := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path == "/slow" {
			started.Add(1)
			<-release
		}
		w.WriteHeader(200)
	})
	d := &drainer{}
	srv := httptest.NewServer(d.wrap(slow))
	defer srv.Close()

	const inFlight = 20
	results := make(chan int, inFlight)
	for range inFlight {
		go func() {
			resp, err := http.Get(srv.URL + "/slow")
			if err != nil {
				results <- -1
				return
			}
			_, _ = io.Copy(io.Discard, resp.Body)
			_ = resp.Body.Close()
			results <- resp.StatusCode
		}()
	}
	deadline := time.Now().Add(10 * time.Second)
	for started.Load() < inFlight && time.Now().Before(deadline) {
		time.Sleep(5 * time.Millisecond)
	}
	if started.Load() != inFlight {
		t.Fatalf("%d of %d slow requests started", started.Load(), inFlight)
	}

	d.start()
	waited := make(chan struct{})
	go func() {
		d.wait(context.Background())
		close(waited)
	}()

	type reply struct {
		Status     int
		RetryAfter string
		Close      bool // the server asked to close the connection
	}
	get := func(path string) reply {
		resp, err := http.Get(srv.URL + path)
		if err != nil {
			t.Fatalf("GET %s: %v", path, err)
		}
		_ = resp.Body.Close()
		return reply{resp.StatusCode, resp.Header.Get("Retry-After"), resp.Close}
	}
	if diff := cmp.Diff(reply{503, "1", true}, get("/namespaces")); diff != "" {
		t.Errorf("a new request while draining (-want +got):\n%s", diff)
	}
	if diff := cmp.Diff(reply{503, "1", true}, get("/readyz")); diff != "" {
		t.Errorf("readiness while draining (-want +got):\n%s", diff)
	}
	if got := get("/healthz"); got.Status != 200 {
		t.Errorf("liveness while draining: %d; want 200", got.Status)
	}
	select {
	case <-waited:
		t.Fatal("wait returned with requests still in flight")
	default:
	}

	close(release)
	for range inFlight {
		if code := <-results; code != 200 {
			t.Errorf("an in-flight request ended with %d; want 200", code)
		}
	}
	select {
	case <-waited:
	case <-time.After(10 * time.Second):
		t.Fatal("wait did not return after the in-flight requests finished")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	if err := srv.Config.Shutdown(ctx); err != nil {
		t.Errorf("Shutdown after the drain: %v", err)
	}
}

// TestStopServingEndsWhatOutlivesTheTimeout: a request still running when
// the shutdown timeout ends has its context cancelled, and stopServing
// returns only once it has returned (the store it uses closes after), or
// after the grace; the error says the shutdown was not graceful.
func TestStopServingEndsWhatOutlivesTheTimeout(t *testing.T) {
	hctx, cancelHandlers := context.WithCancel(context.Background())
	defer cancelHandlers()
	var returned atomic.Bool
	entered := make(chan struct{})
	d := &drainer{}
	srv := httptest.NewUnstartedServer(d.wrap(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		close(entered)
		select {
		case <-r.Context().Done():
		case <-time.After(3 * time.Second):
			return // never cancelled: the failure below says so
		}
		time.Sleep(100 * time.Millisecond) // recording an outcome, say
		returned.Store(true)
	})))
	srv.Config.BaseContext = func(net.Listener) context.Context { return hctx }
	srv.Start()
	defer srv.Close()
	go func() {
		if resp, err := http.Get(srv.URL + "/stuck"); err == nil {
			_ = resp.Body.Close()
		}
	}()
	select {
	case <-entered:
	case <-time.After(10 * time.Second):
		t.Fatal("the request did not start")
	}
	start := time.Now()
	err := stopServing(srv.Config, d, cancelHandlers, 200*time.Millisecond, 10*time.Second)
	if err == nil {
		t.Error("stopServing = nil with a request past the timeout; want the Shutdown error")
	}
	if !returned.Load() {
		t.Errorf("stopServing returned after %v with the request still running", time.Since(start))
	}
	if took := time.Since(start); took > 5*time.Second {
		t.Errorf("stopServing took %v; the cancelled request returned within 0.1 s of its cancellation", took)
	}
}
