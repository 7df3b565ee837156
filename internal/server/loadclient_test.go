package server_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"sort"
	"strings"
	"sync"
	"time"
)

// loadClient sends API requests over real loopback HTTP for the load
// tests, as a signed-in browser would (session cookie, Origin on
// mutations). It never fails the test itself: every outcome is a sample.
type loadClient struct {
	base   string
	hc     *http.Client
	cookie *http.Cookie
}

// reply is what a load test needs of one response.
type reply struct {
	status int
	code   string // error code, "" on success
	etag   string
	data   json.RawMessage // the envelope's data, or the error's data
	err    error           // transport error (status 0)
}

func newLoadClient(base string, cookie *http.Cookie, conns int) *loadClient {
	tr := &http.Transport{MaxIdleConnsPerHost: conns, MaxConnsPerHost: conns}
	return &loadClient{base: base, cookie: cookie, hc: &http.Client{Transport: tr, Timeout: 60 * time.Second}}
}

func (c *loadClient) close() { c.hc.CloseIdleConnections() }

func (c *loadClient) do(ctx context.Context, method, path string, body any, hdr map[string]string) reply {
	var rd io.Reader
	if body != nil {
		b, err := json.Marshal(body)
		if err != nil {
			return reply{err: err}
		}
		rd = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(ctx, method, c.base+path, rd)
	if err != nil {
		return reply{err: err}
	}
	if body != nil {
		req.Header.Set("Content-Type", "application/json")
	}
	if method != http.MethodGet {
		req.Header.Set("Origin", testOrigin)
	}
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	if c.cookie != nil {
		req.AddCookie(c.cookie)
	}
	resp, err := c.hc.Do(req)
	if err != nil {
		return reply{err: err}
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	if err != nil {
		return reply{status: resp.StatusCode, err: err}
	}
	var env struct {
		Data  json.RawMessage `json:"data"`
		Error *struct {
			Code string          `json:"code"`
			Data json.RawMessage `json:"data"`
		} `json:"error"`
	}
	if err := json.Unmarshal(b, &env); err != nil {
		return reply{status: resp.StatusCode, err: fmt.Errorf("reply is not JSON: %.200q", b)}
	}
	r := reply{status: resp.StatusCode, etag: resp.Header.Get("ETag"), data: env.Data}
	if env.Error != nil {
		r.code, r.data = env.Error.Code, env.Error.Data
	}
	return r
}

// sample is one request of a load test.
type sample struct {
	op         string
	status     int
	code       string
	start, end time.Time
	err        error
}

func (s sample) took() time.Duration { return s.end.Sub(s.start) }

// outcome is how a sample is counted: "200", "503 DEPENDENCY_UNAVAILABLE",
// "transport error".
func (s sample) outcome() string {
	switch {
	case s.status == 0:
		return "transport error"
	case s.code != "":
		return fmt.Sprintf("%d %s", s.status, s.code)
	}
	return fmt.Sprint(s.status)
}

// samples collects the samples of concurrent clients.
type samples struct {
	mu  sync.Mutex
	all []sample
}

// time runs one request as op and records it.
func (ss *samples) time(op string, f func() reply) reply {
	s := sample{op: op, start: time.Now()}
	r := f()
	s.end, s.status, s.code, s.err = time.Now(), r.status, r.code, r.err
	ss.mu.Lock()
	ss.all = append(ss.all, s)
	ss.mu.Unlock()
	return r
}

func (ss *samples) list() []sample {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return slices.Clone(ss.all)
}

// percentile is the p-th percentile (0 < p <= 1) of ds by the nearest-rank
// method; 0 for none.
func percentile(ds []time.Duration, p float64) time.Duration {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(float64(len(s))*p+0.999999) - 1
	return s[max(0, min(i, len(s)-1))]
}

// summarize prints one line per operation: count, p50, p99, max and the
// count of each outcome, in a stable order.
func summarize(ss []sample) string {
	byOp := map[string][]sample{}
	for _, s := range ss {
		byOp[s.op] = append(byOp[s.op], s)
	}
	ops := make([]string, 0, len(byOp))
	for op := range byOp {
		ops = append(ops, op)
	}
	sort.Strings(ops)
	var b strings.Builder
	fmt.Fprintf(&b, "%-14s %7s %9s %9s %9s  %s\n", "operation", "count", "p50", "p99", "max", "outcomes")
	for _, op := range ops {
		var ds []time.Duration
		counts := map[string]int{}
		for _, s := range byOp[op] {
			ds = append(ds, s.took())
			counts[s.outcome()]++
		}
		keys := make([]string, 0, len(counts))
		for k := range counts {
			keys = append(keys, k)
		}
		sort.Strings(keys)
		var parts []string
		for _, k := range keys {
			parts = append(parts, fmt.Sprintf("%s: %d", k, counts[k]))
		}
		fmt.Fprintf(&b, "%-14s %7d %9s %9s %9s  %s\n", op, len(ds), percentile(ds, 0.5).Round(100*time.Microsecond),
			percentile(ds, 0.99).Round(100*time.Microsecond), percentile(ds, 1).Round(100*time.Microsecond), strings.Join(parts, ", "))
	}
	return b.String()
}

// lockedBuffer is a bytes.Buffer safe for a logger shared by goroutines.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
