package testutil

import (
	"context"
	"fmt"
	"net"
	"sync"
	"testing"
	"time"
)

// PollInterval is how often Eventually and Poll re-check their condition:
// short next to anything worth waiting for (a gateway start, a lease), long
// enough that a polled HTTP call or /proc scan does not load the machine.
const PollInterval = 100 * time.Millisecond

// cleanupMargin is kept between the end of Context and the test binary's
// own deadline (go test -timeout), so a test that runs out of time fails
// with its own message and still runs its cleanups (stopping gateways)
// instead of being killed by the testing package's panic.
const cleanupMargin = 30 * time.Second

// noDeadline bounds Context when the test binary has no deadline
// (go test -timeout 0, or a benchmark).
const noDeadline = 10 * time.Minute

// deadliner is the part of *testing.T that knows the binary's deadline;
// testing.TB does not include it (a *testing.B has none).
type deadliner interface {
	Deadline() (time.Time, bool)
}

// Context returns a context that is cancelled when the test ends and
// expires cleanupMargin before the test binary's deadline (or a quarter of
// the time left, when less than four margins remain), or after 10 minutes
// when there is no deadline. Use it, or a shorter context.WithTimeout of
// it, for every network call a test makes.
func Context(t testing.TB) context.Context {
	t.Helper()
	ctx, cancel := context.WithDeadline(context.Background(), deadlineOf(t, time.Now()))
	t.Cleanup(cancel)
	return ctx
}

func deadlineOf(t testing.TB, now time.Time) time.Time {
	if d, ok := t.(deadliner); ok {
		if dl, ok := d.Deadline(); ok {
			left := dl.Sub(now)
			if left > 4*cleanupMargin {
				return dl.Add(-cleanupMargin)
			}
			return now.Add(left * 3 / 4)
		}
	}
	return now.Add(noDeadline)
}

// Poll calls cond every PollInterval, first at once, until it reports true
// (nil), returns an error (that error), or ctx ends (ctx's error together
// with the last error-free "not yet" count). It is the building block for
// waits that must not end the test, such as inside a helper process.
func Poll(ctx context.Context, cond func() (bool, error)) error {
	tick := time.NewTicker(PollInterval)
	defer tick.Stop()
	tries := 0
	for {
		tries++
		done, err := cond()
		if err != nil {
			return err
		}
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("condition still false after %d checks: %w", tries, context.Cause(ctx))
		case <-tick.C:
		}
	}
}

// Eventually waits until cond holds, checking every PollInterval, and
// fails the test (t.Fatalf, so from the test's goroutine only) when
// timeout passes first or the test's Context ends. The failure message is
// "timed out after <timeout> waiting for <format, args>".
func Eventually(t testing.TB, timeout time.Duration, cond func() bool, format string, args ...any) {
	t.Helper()
	ctx, cancel := context.WithTimeout(Context(t), timeout)
	defer cancel()
	start := time.Now()
	if err := Poll(ctx, func() (bool, error) { return cond(), nil }); err != nil {
		t.Fatalf("timed out after %v (limit %v) waiting for %s", time.Since(start).Round(time.Millisecond), timeout, fmt.Sprintf(format, args...))
	}
}

// Clock is a settable clock for code that takes a func() time.Time. The
// zero value is not usable; NewClock starts it. It is safe for concurrent
// use: the code under test may read it from its own goroutines while the
// test advances it.
type Clock struct {
	mu  sync.Mutex
	now time.Time
}

// Epoch is where NewClock starts when given the zero time: a fixed instant
// in UTC, so times in assertions are reproducible.
var Epoch = time.Date(2026, 11, 29, 12, 0, 0, 0, time.UTC)

// NewClock returns a clock showing start (Epoch when start is zero).
func NewClock(start time.Time) *Clock {
	if start.IsZero() {
		start = Epoch
	}
	return &Clock{now: start}
}

// Now returns the clock's time; it moves only by Advance and Set.
func (c *Clock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// Advance moves the clock by d (which may be negative) and returns the new
// time.
func (c *Clock) Advance(d time.Duration) time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = c.now.Add(d)
	return c.now
}

// Set puts the clock at t.
func (c *Clock) Set(t time.Time) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.now = t
}

// FreeAddr returns a loopback address ("127.0.0.1:port") whose port was
// free a moment ago, for a server a test starts: another process may take
// the port in between, which tests accept.
func FreeAddr(t testing.TB) string {
	t.Helper()
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatalf("listen on a free loopback port: %v", err)
	}
	addr := l.Addr().String()
	if err := l.Close(); err != nil {
		t.Fatalf("close the listener: %v", err)
	}
	return addr
}

// RefusingAddr returns a loopback address on which nothing listens
// (FreeAddr's), so a dial to it is refused (unless another process took
// the port since, which tests accept).
func RefusingAddr(t testing.TB) string {
	t.Helper()
	return FreeAddr(t)
}

// Serve accepts connections on l until the test ends and runs handle on
// each in a goroutine of its own: the stand-in for a peer that misbehaves
// on purpose (one that never answers). At cleanup it closes l, then every
// accepted connection, and waits for the handlers, which must return once
// their connection is closed.
func Serve(t testing.TB, l net.Listener, handle func(net.Conn)) {
	var (
		mu       sync.Mutex
		conns    []net.Conn
		handlers sync.WaitGroup
	)
	accepting := make(chan struct{})
	go func() {
		defer close(accepting)
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			mu.Lock()
			conns = append(conns, c)
			mu.Unlock()
			handlers.Add(1)
			go func() {
				defer handlers.Done()
				defer c.Close()
				handle(c)
			}()
		}
	}()
	t.Cleanup(func() {
		_ = l.Close()
		<-accepting // no connection is accepted after this
		mu.Lock()
		for _, c := range conns {
			_ = c.Close()
		}
		mu.Unlock()
		handlers.Wait()
	})
}
