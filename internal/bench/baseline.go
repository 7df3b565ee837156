package bench

import (
	"context"
	"fmt"
	"net"
	"net/http"
	"runtime"
	"strconv"
	"time"
)

// BaselineWork is the CPU that the bare server's handler spends per
// request in the baseline rows: none (the harness's floor), and amounts
// around what OCC's rows spend in all.
var BaselineWork = []time.Duration{0, 100 * time.Microsecond, 200 * time.Microsecond, 300 * time.Microsecond}

// baselineEnv is a bare net/http server on a loopback listener, with no
// OCC code in it: its handler spins for the CPU time in its path, then
// writes a 16-byte reply. Measured with the same client and concurrency
// as the API rows, its p99 at a given CPU per request is what that much
// work costs at this concurrency on this machine whatever the server
// does, so OCC's rows can be read against it.
type baselineEnv struct {
	base   string
	client *http.Client
	perUS  int // spin iterations per microsecond
	close  func()
}

func openBaselineEnv() (*baselineEnv, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	e := &baselineEnv{
		base:   "http://" + ln.Addr().String(),
		client: newClient(),
		perUS:  calibrateSpin(),
	}
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		us, err := strconv.Atoi(r.URL.Path[1:])
		if err != nil || us < 0 || us > 100_000 {
			http.Error(w, "want /<microseconds of CPU>, at most 100000", http.StatusBadRequest)
			return
		}
		// The spin's result goes into the reply, so the loop cannot be
		// optimised away.
		fmt.Fprintf(w, `{"x":%010d}`, spin(us*e.perUS)%1e10)
	})}
	go hs.Serve(ln)
	e.close = func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}
	return e, nil
}

// spin runs n rounds of a 64-bit linear congruential step: CPU only, no
// memory traffic, no allocation.
func spin(n int) uint64 {
	x := uint64(1)
	for range n {
		x = x*6364136223846793005 + 1442695040888963407
	}
	return x
}

// calibrateSpin returns spin's rounds per microsecond: the fastest of
// five timed runs, the one least disturbed by anything else on the
// machine.
func calibrateSpin() int {
	const n = 2_000_000
	best := time.Duration(1 << 62)
	var x uint64
	for range 5 {
		start := time.Now()
		x ^= spin(n)
		best = min(best, time.Since(start))
	}
	runtime.KeepAlive(x) // the loops' result is used, so they run
	return max(1, int(int64(n)*int64(time.Microsecond)/int64(max(best, 1))))
}

// scenarios are the baseline rows, one per BaselineWork.
func (e *baselineEnv) scenarios() []scenario {
	var out []scenario
	for _, d := range BaselineWork {
		us := int(d / time.Microsecond)
		name := fmt.Sprintf("bare net/http server, %d µs of CPU per request", us)
		if us == 0 {
			name = "bare net/http server, no work (the floor)"
		}
		path := e.base + "/" + strconv.Itoa(us)
		out = append(out, scenario{name: name, op: func(ctx context.Context, _ int) (int, error) {
			return getDrained(ctx, e.client, path, nil)
		}})
	}
	return out
}

// BaselineRows measures the baseline rows with lim.
func BaselineRows(ctx context.Context, lim Limits) ([]Result, error) {
	e, err := openBaselineEnv()
	if err != nil {
		return nil, err
	}
	defer e.close()
	var out []Result
	for _, sc := range e.scenarios() {
		r, err := measure(ctx, "baseline", sc, lim)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
