package bench

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"text/tabwriter"
	"time"
)

// scenario is one measured operation; op gets the operation's sequence
// number and returns the bytes it read.
type scenario struct {
	name string
	op   func(ctx context.Context, i int) (int, error)
}

// Limits bound one measurement: at most Ops operations and at most
// MaxTime, after Warmup unmeasured ones on each of the Concurrency
// clients.
type Limits struct {
	Ops int
	// Warmup operations run on every client, all clients at once, before
	// the measured ones: the measurement is of a server in its steady
	// state, whose keep-alive connections and database connections (a
	// new SQLite connection runs its pragmas and reads the schema) are
	// already open. Warmed one client at a time, the other 15 opened
	// theirs during the first measured requests, which were then among
	// the slowest 1 % of a 2,000-request row.
	Warmup      int
	MaxTime     time.Duration
	Concurrency int
}

// Result is one row of the table.
type Result struct {
	Engine, Name  string
	Concurrency   int
	Ops           int
	P50, P99      time.Duration
	PerSecond     float64
	BytesPerReply int
	// CPUPerOp is this process's user+system CPU time per operation
	// (server and client both run in it; PostgreSQL's own is not in it):
	// less sensitive than latency to other load on the machine.
	CPUPerOp time.Duration
	Note     string
}

// measure runs sc's op lim.Ops times over lim.Concurrency workers and
// reports the latency quantiles and the throughput over the wall time.
// The first error stops the run and is returned.
func measure(ctx context.Context, engine string, sc scenario, lim Limits) (Result, error) {
	if err := warmUp(ctx, sc, lim); err != nil {
		return Result{}, err
	}
	ctx, cancel := context.WithTimeout(ctx, lim.MaxTime)
	defer cancel()
	var next atomic.Int64
	lat := make([]time.Duration, lim.Ops)
	var done atomic.Int64
	var bytes atomic.Int64
	var firstErr error
	var once sync.Once
	var wg sync.WaitGroup
	cpu0 := processCPU()
	start := time.Now()
	for range lim.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for ctx.Err() == nil {
				i := int(next.Add(1)) - 1
				if i >= lim.Ops {
					return
				}
				t0 := time.Now()
				n, err := sc.op(ctx, i)
				if err != nil {
					if ctx.Err() == nil {
						once.Do(func() { firstErr = fmt.Errorf("%s: %w", sc.name, err); cancel() })
					}
					return
				}
				lat[i] = time.Since(t0)
				done.Add(1)
				bytes.Add(int64(n))
			}
		}()
	}
	wg.Wait()
	wall := time.Since(start)
	cpu := processCPU() - cpu0
	if firstErr != nil {
		return Result{}, firstErr
	}
	n := int(done.Load())
	got := make([]time.Duration, 0, n)
	for _, d := range lat {
		if d > 0 {
			got = append(got, d)
		}
	}
	slices.Sort(got)
	r := Result{Engine: engine, Name: sc.name, Concurrency: lim.Concurrency, Ops: len(got)}
	if len(got) > 0 {
		r.P50, r.P99 = quantile(got, 0.50), quantile(got, 0.99)
		r.PerSecond = float64(len(got)) / wall.Seconds()
		r.BytesPerReply = int(bytes.Load()) / len(got)
		r.CPUPerOp = cpu / time.Duration(len(got))
	}
	if len(got) < lim.Ops {
		r.Note = fmt.Sprintf("stopped at the %s time bound", lim.MaxTime)
	}
	return r, nil
}

// warmUp runs lim.Warmup unmeasured operations on each of
// lim.Concurrency clients at once; the first error is returned.
func warmUp(ctx context.Context, sc scenario, lim Limits) error {
	var wg sync.WaitGroup
	errs := make([]error, lim.Concurrency)
	for c := range lim.Concurrency {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range lim.Warmup {
				if _, err := sc.op(ctx, c*lim.Warmup+i); err != nil {
					errs[c] = fmt.Errorf("%s warm-up: %w", sc.name, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// quantile of sorted durations (nearest rank).
func quantile(sorted []time.Duration, q float64) time.Duration {
	i := int(q*float64(len(sorted)) + 0.5)
	if i >= len(sorted) {
		i = len(sorted) - 1
	}
	if i > 0 {
		i--
	}
	return sorted[i]
}

// PrintTable writes the results as one aligned table.
func PrintTable(w io.Writer, rs []Result) error {
	tw := tabwriter.NewWriter(w, 0, 0, 2, ' ', 0)
	fmt.Fprintln(tw, "engine\tmeasurement\tconc\tops\tp50\tp99\tops/s\tbytes/reply\tCPU/op\tnote")
	for _, r := range rs {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n", r.Engine, r.Name, r.Concurrency, count(float64(r.Ops)),
			ms(r.P50), ms(r.P99), count(r.PerSecond), count(float64(r.BytesPerReply)), us(r.CPUPerOp), r.Note)
	}
	return tw.Flush()
}

func ms(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.2fms", float64(d)/float64(time.Millisecond))
}

func us(d time.Duration) string {
	if d == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0fµs", float64(d)/float64(time.Microsecond))
}

// processCPU is this process's user plus system CPU time so far (0 when
// the operating system does not tell).
func processCPU() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// count prints a whole number, or "-" for none.
func count(v float64) string {
	if v == 0 {
		return "-"
	}
	return fmt.Sprintf("%.0f", v)
}
