package testutil_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/testutil"
)

// fakeT records Fatalf instead of failing the real test. Fatalf ends the
// calling goroutine, as testing.T's does, so each use runs in its own
// goroutine (run). Everything else goes to the real test.
type fakeT struct {
	testing.TB
	mu       sync.Mutex
	fatal    string
	cleanups []func()
}

func (f *fakeT) Helper() {}
func (f *fakeT) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}
func (f *fakeT) Cleanup(fn func()) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.cleanups = append(f.cleanups, fn)
}

// run calls fn with a fakeT on a new goroutine and returns the Fatalf
// message ("" when fn returned normally); the fake's cleanups run after.
func run(t *testing.T, fn func(testing.TB)) string {
	t.Helper()
	f := &fakeT{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(f)
	}()
	<-done
	for i := len(f.cleanups) - 1; i >= 0; i-- {
		f.cleanups[i]()
	}
	return f.fatal
}

func TestEventually(t *testing.T) {
	tests := []struct {
		name      string
		trueAfter int32 // cond turns true on this call; 0: never
		timeout   time.Duration
		wantFatal string // substring; "" means no failure
	}{
		{name: "true at once", trueAfter: 1, timeout: time.Second},
		{name: "true on the third check", trueAfter: 3, timeout: 5 * time.Second},
		{name: "never true", timeout: 300 * time.Millisecond, wantFatal: "waiting for the answer 42"},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			var calls atomic.Int32
			start := time.Now()
			got := run(t, func(tb testing.TB) {
				testutil.Eventually(tb, tc.timeout, func() bool {
					return calls.Add(1) == tc.trueAfter
				}, "the answer %d", 42)
			})
			elapsed := time.Since(start)
			if tc.wantFatal == "" {
				if got != "" {
					t.Fatalf("Eventually failed: %s", got)
				}
				if calls.Load() != tc.trueAfter {
					t.Errorf("cond called %d times, want %d", calls.Load(), tc.trueAfter)
				}
				// Two intervals per extra check at most, even on a loaded machine.
				if limit := time.Duration(tc.trueAfter) * 2 * testutil.PollInterval; elapsed > limit+time.Second {
					t.Errorf("took %v, want under %v", elapsed, limit+time.Second)
				}
				return
			}
			if !strings.Contains(got, tc.wantFatal) || !strings.Contains(got, "timed out after") {
				t.Errorf("Fatalf message %q, want one containing %q", got, tc.wantFatal)
			}
			if elapsed < tc.timeout {
				t.Errorf("gave up after %v, before the timeout %v", elapsed, tc.timeout)
			}
		})
	}
}

func TestPoll(t *testing.T) {
	boom := errors.New("boom")
	tests := []struct {
		name    string
		cond    func(n int) (bool, error)
		ctxLife time.Duration
		want    error // compared with errors.Is
		wantN   int   // calls, when not timing out
	}{
		{name: "done", cond: func(n int) (bool, error) { return n == 2, nil }, ctxLife: time.Minute, wantN: 2},
		{name: "error stops at once", cond: func(int) (bool, error) { return false, boom }, ctxLife: time.Minute, want: boom, wantN: 1},
		{name: "context ends", cond: func(int) (bool, error) { return false, nil }, ctxLife: 250 * time.Millisecond, want: context.DeadlineExceeded},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			ctx, cancel := context.WithTimeout(context.Background(), tc.ctxLife)
			defer cancel()
			n := 0
			err := testutil.Poll(ctx, func() (bool, error) { n++; return tc.cond(n) })
			if !errors.Is(err, tc.want) || (tc.want == nil) != (err == nil) {
				t.Fatalf("Poll = %v, want %v", err, tc.want)
			}
			if tc.wantN != 0 && n != tc.wantN {
				t.Errorf("cond called %d times, want %d", n, tc.wantN)
			}
		})
	}
}

func TestContext(t *testing.T) {
	ctx := testutil.Context(t)
	dl, ok := ctx.Deadline()
	if !ok {
		t.Fatal("Context has no deadline")
	}
	if tdl, ok := t.Deadline(); ok {
		if !dl.Before(tdl) {
			t.Errorf("Context deadline %v is not before the test's %v", dl, tdl)
		}
	} else if time.Until(dl) > 10*time.Minute {
		t.Errorf("Context deadline %v is more than 10 minutes away without a test deadline", dl)
	}

	// The context ends with the test: a subtest's context is done once
	// the subtest has returned.
	var sub context.Context
	t.Run("sub", func(t *testing.T) { sub = testutil.Context(t) })
	if sub.Err() == nil {
		t.Error("a subtest's Context is still live after the subtest ended")
	}
}

func TestClock(t *testing.T) {
	c := testutil.NewClock(time.Time{})
	if !c.Now().Equal(testutil.Epoch) {
		t.Fatalf("NewClock(zero).Now() = %v, want Epoch %v", c.Now(), testutil.Epoch)
	}
	var got []time.Time
	got = append(got, c.Advance(time.Minute), c.Advance(-30*time.Second))
	c.Set(time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC))
	got = append(got, c.Now())
	want := []time.Time{
		testutil.Epoch.Add(time.Minute),
		testutil.Epoch.Add(30 * time.Second),
		time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC),
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("clock readings (-want +got):\n%s", diff)
	}

	// Concurrent readers and one writer: the race detector is the check.
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for range 100 {
				_ = c.Now()
			}
		})
	}
	for range 100 {
		c.Advance(time.Millisecond)
	}
	wg.Wait()
	if want := time.Date(2030, 1, 2, 3, 4, 5, 0, time.UTC).Add(100 * time.Millisecond); !c.Now().Equal(want) {
		t.Errorf("after 100 advances of 1ms: %v, want %v", c.Now(), want)
	}
}
