package agentgw_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/workspace"
)

// BenchmarkGetSet compares the client with a bare native get/set on the
// same real gateway (token mode, direct transport). Both open a fresh
// connection per operation and do the full challenge/connect handshake; the
// client additionally reads its token file, validates, checks scopes and
// hashes, and completes a close handshake. Each iteration does one get and
// one set with each, interleaved so machine noise hits both alike.
//
// Reported per implementation and operation: p50 and p99 latency in ms,
// the count of operations the gateway answered with an error (excluded
// from the latencies), and the client/native ratio of the medians. ns/op is the wall time of one
// iteration (four operations) divided by the concurrency and is of little
// use here. Run with a fixed count, e.g.:
//
//	go test ./internal/agentgw -run '^$' -bench GetSet -benchtime 200x
func BenchmarkGetSet(b *testing.B) {
	g := gwtest.Shared(b, gwtest.TokenMode)
	for _, name := range workspace.Names {
		preserve(b, g.Workspace, name)
	}
	for _, conc := range []int{1, 16} {
		b.Run(fmt.Sprintf("conc=%d", conc), func(b *testing.B) {
			c := agentgw.New(agentgw.Options{})
			target := g.DirectTarget()
			var mu sync.Mutex
			lat := map[string][]time.Duration{}
			record := func(key string, d time.Duration) {
				mu.Lock()
				lat[key] = append(lat[key], d)
				mu.Unlock()
			}
			var next atomic.Int64
			var failed atomic.Value
			fail := func(err error) { failed.CompareAndSwap(nil, err) }
			// The gateway sometimes answers a get that races a set of the
			// same file with INVALID_REQUEST "unsafe workspace file" (seen at
			// concurrency 16, by both implementations). An answered error is
			// a clean, retryable failure; it is counted, not timed.
			var answered sync.Map // key → *atomic.Int64
			countAnswered := func(key string) {
				v, _ := answered.LoadOrStore(key, new(atomic.Int64))
				v.(*atomic.Int64).Add(1)
			}

			b.ResetTimer()
			var wg sync.WaitGroup
			for w := range conc {
				name := workspace.Names[w%len(workspace.Names)]
				wg.Go(func() {
					for i := next.Add(1); i <= int64(b.N); i = next.Add(1) {
						content := fmt.Sprintf("bench %d\n", i)
						ops := []func(ctx context.Context) (string, error){
							func(ctx context.Context) (string, error) {
								_, err := c.Get(ctx, target, name)
								return "client-get", err
							},
							func(ctx context.Context) (string, error) {
								_, err := c.Set(ctx, target, name, content, "")
								return "client-set", err
							},
							func(ctx context.Context) (string, error) {
								return "native-get", nativeOp(ctx, g, func(n *gwtest.Native) error {
									_, err := n.GetFile(ctx, name)
									return err
								})
							},
							func(ctx context.Context) (string, error) {
								return "native-set", nativeOp(ctx, g, func(n *gwtest.Native) error {
									_, err := n.SetFile(ctx, name, content)
									return err
								})
							},
						}
						if i%2 == 0 { // alternate who goes first
							ops = append(ops[2:], ops[:2]...)
						}
						for _, op := range ops {
							ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
							start := time.Now()
							key, err := op(ctx)
							d := time.Since(start)
							cancel()
							switch {
							case err == nil:
								record(key, d)
							case isAnsweredError(err):
								countAnswered(key)
							default:
								fail(fmt.Errorf("%s: %w", key, err))
								return
							}
						}
					}
				})
			}
			wg.Wait()
			b.StopTimer()
			if err, _ := failed.Load().(error); err != nil {
				b.Fatal(err)
			}
			p50 := map[string]float64{}
			for _, key := range []string{"client-get", "native-get", "client-set", "native-set"} {
				p50[key] = percentileMS(lat[key], 0.50)
				b.ReportMetric(p50[key], key+"-p50-ms")
				b.ReportMetric(percentileMS(lat[key], 0.99), key+"-p99-ms")
				if v, ok := answered.Load(key); ok {
					b.ReportMetric(float64(v.(*atomic.Int64).Load()), key+"-answered-errors")
				}
			}
			if p50["native-get"] > 0 && p50["native-set"] > 0 {
				b.ReportMetric(p50["client-get"]/p50["native-get"], "get-p50-ratio")
				b.ReportMetric(p50["client-set"]/p50["native-set"], "set-p50-ratio")
			}
		})
	}
}

// isAnsweredError: the gateway answered the request with an error (the
// client's Unavailable answered_error, or the bare client's ResponseError).
func isAnsweredError(err error) bool {
	var re *gwtest.ResponseError
	var e *agentgw.Error
	return errors.As(err, &re) || errors.As(err, &e) && e.Kind == agentgw.Unavailable && e.Reason == "answered_error"
}

// nativeOp is the baseline: dial, handshake, one request, close.
func nativeOp(ctx context.Context, g *gwtest.Gateway, fn func(*gwtest.Native) error) error {
	n, err := gwtest.DialNative(ctx, g.URL, gwtest.NativeOptions{Token: g.Token})
	if err != nil {
		return err
	}
	defer n.Close()
	if !n.Hello.OK {
		return n.Hello.Error
	}
	return fn(n)
}

// percentileMS is the nearest-rank percentile in milliseconds.
func percentileMS(ds []time.Duration, p float64) float64 {
	if len(ds) == 0 {
		return 0
	}
	s := slices.Clone(ds)
	slices.Sort(s)
	i := int(p*float64(len(s))+0.999999) - 1
	i = max(0, min(i, len(s)-1))
	return float64(s[i]) / float64(time.Millisecond)
}
