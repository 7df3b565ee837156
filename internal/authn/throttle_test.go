package authn

import (
	"context"
	"fmt"
	"net/netip"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/errkind"
)

var (
	addrA = netip.MustParseAddr("192.0.2.1")
	addrB = netip.MustParseAddr("192.0.2.2")
)

// step is one attempt in a throttle scenario: after advancing the clock by
// advance, an attempt for email from addr; fail says how it ends.
type step struct {
	advance time.Duration
	email   string
	addr    netip.Addr
	succeed bool
}

// outcome is what one step observed.
type outcome struct {
	Admitted    bool
	Wait        time.Duration
	Impositions []Imposition
}

func runThrottle(th *Throttle, start time.Time, steps []step) []outcome {
	now := start
	var out []outcome
	for _, s := range steps {
		now = now.Add(s.advance)
		tk, wait, ok := th.Begin(s.email, s.addr, now)
		o := outcome{Admitted: ok, Wait: wait}
		if ok {
			if s.succeed {
				th.Succeed(tk)
			} else {
				o.Impositions = th.Fail(tk)
			}
		}
		out = append(out, o)
	}
	return out
}

func repeat(n int, s step) []step {
	out := make([]step, n)
	for i := range out {
		out[i] = s
	}
	return out
}

func TestThrottleLimits(t *testing.T) {
	acct := ThrottlePolicy{Free: 3, Lock: 7, BaseDelay: time.Second, MaxDelay: 3 * time.Second, Lockout: time.Minute, Window: 10 * time.Minute}
	addr := ThrottlePolicy{Free: 100, Lock: 200, BaseDelay: time.Second, MaxDelay: time.Second, Lockout: time.Minute, Window: 10 * time.Minute}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	at := func(d time.Duration) time.Time { return start.Add(d) }
	fail := step{email: "a@x", addr: addrA}
	tests := []struct {
		name  string
		steps []step
		// want is the outcome of the last step.
		want outcome
	}{
		{"at the free limit: no delay", repeat(3, fail), outcome{Admitted: true}},
		{"one past the free limit: first delay", repeat(4, fail),
			outcome{Admitted: true, Impositions: []Imposition{{Scope: ScopeAccount, Failures: 4, Until: at(time.Second)}}}},
		{"during the delay: refused, not counted", repeat(5, fail), outcome{Wait: time.Second}},
		{"delays double", append(repeat(4, fail), step{advance: time.Second, email: "a@x", addr: addrA}),
			outcome{Admitted: true, Impositions: []Imposition{{Scope: ScopeAccount, Failures: 5, Until: at(3 * time.Second)}}}},
		{"delays stop at MaxDelay", append(repeat(4, fail), step{advance: time.Second, email: "a@x", addr: addrA},
			step{advance: 2 * time.Second, email: "a@x", addr: addrA}),
			outcome{Admitted: true, Impositions: []Imposition{{Scope: ScopeAccount, Failures: 6, Until: at(6 * time.Second)}}}},
		{"at the lock limit: locked", append(repeat(4, fail), step{advance: time.Second, email: "a@x", addr: addrA},
			step{advance: 2 * time.Second, email: "a@x", addr: addrA}, step{advance: 3 * time.Second, email: "a@x", addr: addrA}),
			outcome{Admitted: true, Impositions: []Imposition{{Scope: ScopeAccount, Locked: true, Failures: 7, Until: at(6*time.Second + time.Minute)}}}},
		{"one instant before the lockout ends: refused", append(repeat(4, fail), step{advance: time.Second, email: "a@x", addr: addrA},
			step{advance: 2 * time.Second, email: "a@x", addr: addrA}, step{advance: 3 * time.Second, email: "a@x", addr: addrA},
			step{advance: time.Minute - time.Nanosecond, email: "a@x", addr: addrA}),
			outcome{Wait: time.Nanosecond}},
		{"after the lockout: a fresh count", append(repeat(4, fail), step{advance: time.Second, email: "a@x", addr: addrA},
			step{advance: 2 * time.Second, email: "a@x", addr: addrA}, step{advance: 3 * time.Second, email: "a@x", addr: addrA},
			step{advance: time.Minute, email: "a@x", addr: addrA}),
			outcome{Admitted: true}},
		{"email case does not matter", append(repeat(3, fail), step{email: "A@X", addr: addrB}),
			outcome{Admitted: true, Impositions: []Imposition{{Scope: ScopeAccount, Failures: 4, Until: at(time.Second)}}}},
		{"another account is not affected", append(repeat(5, fail), step{email: "b@x", addr: addrA}), outcome{Admitted: true}},
		{"success clears the account", append(repeat(3, fail), step{email: "a@x", addr: addrA, succeed: true}, fail), outcome{Admitted: true}},
		{"failures are forgotten after the window", append(repeat(3, fail), step{advance: 10 * time.Minute, email: "a@x", addr: addrA}),
			outcome{Admitted: true}},
		{"one instant before the window ends they still count", append(repeat(3, fail), step{advance: 10*time.Minute - time.Nanosecond, email: "a@x", addr: addrA}),
			outcome{Admitted: true, Impositions: []Imposition{{Scope: ScopeAccount, Failures: 4, Until: at(10*time.Minute - time.Nanosecond + time.Second)}}}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			th := NewThrottle(acct, addr, 0)
			got := runThrottle(th, start, tc.steps)
			if diff := cmp.Diff(tc.want, got[len(got)-1]); diff != "" {
				t.Errorf("last step (-want +got):\n%s\nall: %+v", diff, got)
			}
		})
	}
}

func TestThrottleAddressLimits(t *testing.T) {
	acct := ThrottlePolicy{Free: 100, Lock: 200, BaseDelay: time.Second, MaxDelay: time.Second, Lockout: time.Minute, Window: time.Hour}
	addr := ThrottlePolicy{Free: 2, Lock: 3, BaseDelay: time.Second, MaxDelay: time.Second, Lockout: time.Minute, Window: time.Hour}
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	spray := func(i int, a netip.Addr) step {
		return step{advance: time.Second, email: fmt.Sprintf("u%d@x", i), addr: a}
	}
	v6 := func(s string) netip.Addr { return netip.MustParseAddr(s) }
	tests := []struct {
		name  string
		steps []step
		want  outcome
	}{
		{"at the free limit", []step{spray(1, addrA), spray(2, addrA)}, outcome{Admitted: true}},
		{"past it: locked", []step{spray(1, addrA), spray(2, addrA), spray(3, addrA)},
			outcome{Admitted: true, Impositions: []Imposition{{Scope: ScopeAddress, Locked: true, Failures: 3, Until: start.Add(3*time.Second + time.Minute)}}}},
		{"locked address refuses any email", []step{spray(1, addrA), spray(2, addrA), spray(3, addrA), spray(4, addrA)},
			outcome{Wait: time.Minute - time.Second}},
		{"another address is free", []step{spray(1, addrA), spray(2, addrA), spray(3, addrA), spray(4, addrB)}, outcome{Admitted: true}},
		{"IPv6 counts per /64", []step{spray(1, v6("2001:db8::1")), spray(2, v6("2001:db8::2")), spray(3, v6("2001:db8::ffff")), spray(4, v6("2001:db8::3"))},
			outcome{Wait: time.Minute - time.Second}},
		{"another /64 is free", []step{spray(1, v6("2001:db8::1")), spray(2, v6("2001:db8::2")), spray(3, v6("2001:db8::ffff")), spray(4, v6("2001:db8:0:1::3"))},
			outcome{Admitted: true}},
		{"a success is taken back from the address", []step{spray(1, addrA), {advance: time.Second, email: "ok@x", addr: addrA, succeed: true}, spray(3, addrA)},
			outcome{Admitted: true}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			got := runThrottle(NewThrottle(acct, addr, 0), start, tc.steps)
			if diff := cmp.Diff(tc.want, got[len(got)-1]); diff != "" {
				t.Errorf("last step (-want +got):\n%s\nall: %+v", diff, got)
			}
		})
	}
}

// TestDefaultPolicies runs the shipped limits: at Free failures no delay,
// past it delays, at Lock a lockout of Lockout, for each scope.
func TestDefaultPolicies(t *testing.T) {
	start := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for _, tc := range []struct {
		name   string
		policy ThrottlePolicy
		step   func(i int) step
	}{
		{"account", DefaultAccountPolicy, func(i int) step {
			return step{advance: time.Minute, email: "a@x", addr: netip.AddrFrom4([4]byte{10, 0, 0, byte(i)})}
		}},
		{"address", DefaultAddressPolicy, func(i int) step { return step{advance: time.Minute, email: fmt.Sprintf("u%d@x", i), addr: addrA} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var steps []step
			for i := range tc.policy.Lock + 1 {
				steps = append(steps, tc.step(i))
			}
			got := runThrottle(NewThrottle(DefaultAccountPolicy, DefaultAddressPolicy, 0), start, steps)
			if got[tc.policy.Free-1].Impositions != nil {
				t.Errorf("failure %d (at Free) imposed %v; want nothing", tc.policy.Free, got[tc.policy.Free-1].Impositions)
			}
			if imp := got[tc.policy.Free].Impositions; len(imp) != 1 || imp[0].Locked {
				t.Errorf("failure %d (past Free) imposed %v; want one delay", tc.policy.Free+1, imp)
			}
			lock := got[tc.policy.Lock-1].Impositions
			if len(lock) != 1 || !lock[0].Locked || lock[0].Until.Sub(start) != time.Duration(tc.policy.Lock)*time.Minute+tc.policy.Lockout {
				t.Errorf("failure %d (at Lock) imposed %v; want a lockout of %s", tc.policy.Lock, lock, tc.policy.Lockout)
			}
			if last := got[tc.policy.Lock]; last.Admitted {
				t.Errorf("attempt past Lock was admitted; want refused")
			}
		})
	}
}

// TestThrottleConcurrentAttemptsAreCounted: attempts that start together
// cannot all pass before the first failure is recorded.
func TestThrottleConcurrentAttemptsAreCounted(t *testing.T) {
	th := NewThrottle(DefaultAccountPolicy, DefaultAddressPolicy, 0)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	var mu sync.Mutex
	admitted := 0
	var wg sync.WaitGroup
	for i := range 200 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			a := netip.AddrFrom4([4]byte{10, 0, byte(i / 250), byte(i % 250)})
			if tk, _, ok := th.Begin("victim@x", a, now); ok {
				th.Fail(tk)
				mu.Lock()
				admitted++
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	// Free failures plus the one that imposes the first delay.
	if want := DefaultAccountPolicy.Free + 1; admitted != want {
		t.Errorf("admitted %d of 200 simultaneous attempts; want %d", admitted, want)
	}
}

func TestThrottleMemoryBound(t *testing.T) {
	p := ThrottlePolicy{Free: 0, Lock: 1, BaseDelay: time.Second, MaxDelay: time.Second, Lockout: time.Hour, Window: time.Hour}
	th := NewThrottle(p, DefaultAddressPolicy, 10)
	now := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	for i := range 1000 {
		if tk, _, ok := th.Begin(fmt.Sprintf("u%d@x", i), addrA, now); ok {
			th.Abandon(tk)
		}
		if tk, _, ok := th.Begin(fmt.Sprintf("locked%d@x", i), netip.AddrFrom4([4]byte{10, 1, byte(i >> 8), byte(i)}), now); ok {
			th.Fail(tk)
		}
	}
	if n := len(th.account.entries); n > 10 {
		t.Errorf("account entries = %d; want at most 10", n)
	}
	if n := len(th.address.entries); n > 10 {
		t.Errorf("address entries = %d; want at most 10", n)
	}
}

// TestHashingBound: beyond the configured number of concurrent hashes a
// caller waits, then gets 503 with a Retry-After; the bound is never
// exceeded.
func TestHashingBound(t *testing.T) {
	t.Cleanup(func() { SetHashing(0, 0) })
	SetHashing(1, 50*time.Millisecond)
	release, err := acquireHashSlot(context.Background())
	if err != nil {
		t.Fatal(err)
	}
	_, err = acquireHashSlot(context.Background())
	e := errkind.As(err)
	if e == nil || e.Kind != errkind.Unavailable || e.Data[errkind.RetryAfterKey] != 1 {
		t.Fatalf("second acquire with the only slot taken = %v; want Unavailable with retryAfterSeconds 1", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if _, err := acquireHashSlot(ctx); err != context.Canceled {
		t.Errorf("acquire with an ended context = %v; want context.Canceled", err)
	}
	release()
	r2, err := acquireHashSlot(context.Background())
	if err != nil {
		t.Fatalf("acquire after release: %v", err)
	}
	r2()
	if limit, peak := HashStats(); limit != 1 || peak != 1 {
		t.Errorf("HashStats = %d, %d; want 1, 1", limit, peak)
	}

	// At the limit: n callers hashing at once all proceed; the peak is n.
	SetHashing(3, 10*time.Second)
	var wg sync.WaitGroup
	for range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := VerifyPassword(cheapHash("pw"), "pw"); err != nil {
				t.Error(err)
			}
		}()
	}
	wg.Wait()
	if limit, peak := HashStats(); limit != 3 || peak > 3 || peak < 1 {
		t.Errorf("HashStats = %d, %d; want limit 3 and a peak in [1, 3]", limit, peak)
	}
}
