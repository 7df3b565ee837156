package authn

import (
	"net/netip"
	"strings"
	"sync"
	"time"
)

// Sign-in throttling. Two independent counters judge every sign-in: one
// per account (the email as typed, case-folded, whether or not a user has
// it, so that throttling itself does not reveal which emails exist) and one
// per client address (IPv4 address or IPv6 /64, from the trusted-proxy
// rules of the admission layer). Each counts failed attempts within
// Window. After Free failures every further failure imposes a delay
// (BaseDelay, doubled per failure, at most MaxDelay) during which attempts
// on that key answer 429 with Retry-After and are not judged; at Lock
// failures the key is locked for Lockout. Attempts refused with 429 are not
// counted (they cost nothing: no hash, no store write). A success clears
// the account's counter and takes the attempt back from the address's.
//
// An attempt is counted when it starts (Begin), not when its hash is done,
// so that 50 concurrent guesses cannot all slip through before the first
// failure is recorded: at most Lock attempts are ever judged per lockout.
//
// The state lives in process memory. With several API replicas each keeps
// its own counters, so an attacker spreading guesses over N replicas gets
// up to N times the limits; docs/reliability.md says so. The maps are
// bounded (MaxKeys per scope): when one is full, expired entries are
// dropped first, then unlocked ones; locked entries are dropped last.

// ThrottlePolicy is the limits of one scope (account or address).
type ThrottlePolicy struct {
	// Free is how many failures within Window cost nothing.
	Free int
	// Lock is the failure count within Window that locks the key.
	Lock int
	// BaseDelay is the delay after failure Free+1; each further failure
	// doubles it, up to MaxDelay.
	BaseDelay, MaxDelay time.Duration
	// Lockout is how long a locked key stays locked.
	Lockout time.Duration
	// Window is how long a key's failures are remembered after its last
	// failure (or after its lockout ends).
	Window time.Duration
}

// Default throttle policies, documented in docs/reliability.md. An account
// is locked after 10 failures in 15 minutes; an address, which an office
// NAT may share among many users, after 50.
var (
	DefaultAccountPolicy = ThrottlePolicy{Free: 3, Lock: 10, BaseDelay: time.Second, MaxDelay: 30 * time.Second,
		Lockout: 15 * time.Minute, Window: 15 * time.Minute}
	DefaultAddressPolicy = ThrottlePolicy{Free: 20, Lock: 50, BaseDelay: time.Second, MaxDelay: 30 * time.Second,
		Lockout: 15 * time.Minute, Window: 15 * time.Minute}
)

// DefaultThrottleMaxKeys bounds each scope's map: 100,000 entries of about
// 100 bytes each, some 10 MB per scope at most.
const DefaultThrottleMaxKeys = 100_000

// Throttle scopes, as audit details name them.
const (
	ScopeAccount = "account"
	ScopeAddress = "address"
)

// Imposition is a delay or lockout that one failed attempt imposed on a
// key: what the sign-in audits.
type Imposition struct {
	Scope    string // ScopeAccount or ScopeAddress
	Locked   bool   // a lockout, not a delay
	Failures int
	Until    time.Time
}

type throttleEntry struct {
	failures int
	last     time.Time // last counted attempt
	until    time.Time // attempts refused before this time
	locked   bool
}

type throttleScope struct {
	policy  ThrottlePolicy
	maxKeys int
	entries map[string]*throttleEntry
}

// Throttle holds the sign-in counters of one process. It is safe for
// concurrent use.
type Throttle struct {
	mu      sync.Mutex
	account throttleScope
	address throttleScope
}

// NewThrottle returns a throttle with the given policies and per-scope key
// bound (maxKeys <= 0: DefaultThrottleMaxKeys).
func NewThrottle(account, address ThrottlePolicy, maxKeys int) *Throttle {
	if maxKeys <= 0 {
		maxKeys = DefaultThrottleMaxKeys
	}
	return &Throttle{
		account: throttleScope{policy: account, maxKeys: maxKeys, entries: map[string]*throttleEntry{}},
		address: throttleScope{policy: address, maxKeys: maxKeys, entries: map[string]*throttleEntry{}},
	}
}

// AttemptTicket is a started attempt; pass it back to exactly one of
// Fail, Succeed or Abandon.
type AttemptTicket struct {
	account, address ticketKey
	// impositions this attempt imposes if it fails.
	impositions []Imposition
}

// ticketKey is one counter an attempt touched: its key, the entry before
// the attempt and the entry the attempt left.
type ticketKey struct {
	key       string
	prev, set throttleEntry
}

// accountKey is the account counter's key for an email.
func accountKey(email string) string { return strings.ToLower(email) }

// addressKey is the address counter's key: the IPv4 address, or the /64 of
// an IPv6 address (one host usually holds a whole /64). An invalid address
// (no client address known) is one shared key.
func addressKey(a netip.Addr) string {
	a = a.Unmap()
	if a.Is6() {
		p, _ := a.Prefix(64)
		return p.String()
	}
	return a.String()
}

// Begin starts an attempt for email from addr at now. When either key is
// delayed or locked it returns the time to wait and false, and counts
// nothing. Otherwise it counts the attempt as a failure on both keys and
// returns a ticket.
func (t *Throttle) Begin(email string, addr netip.Addr, now time.Time) (*AttemptTicket, time.Duration, bool) {
	ak, ik := accountKey(email), addressKey(addr)
	t.mu.Lock()
	defer t.mu.Unlock()
	ae := t.account.get(ak, now)
	ie := t.address.get(ik, now)
	wait := max(blockedFor(ae, now), blockedFor(ie, now))
	if wait > 0 {
		return nil, wait, false
	}
	tk := &AttemptTicket{}
	for _, c := range []struct {
		sc    *throttleScope
		key   string
		scope string
		tk    *ticketKey
	}{{&t.account, ak, ScopeAccount, &tk.account}, {&t.address, ik, ScopeAddress, &tk.address}} {
		e := c.sc.ensure(c.key, now)
		c.tk.key, c.tk.prev = c.key, *e
		if imp, ok := c.sc.count(e, now); ok {
			imp.Scope = c.scope
			tk.impositions = append(tk.impositions, imp)
		}
		c.tk.set = *e
	}
	return tk, 0, true
}

// Fail ends a failed attempt and returns the delays and lockouts it
// imposed, for the audit.
func (t *Throttle) Fail(tk *AttemptTicket) []Imposition { return tk.impositions }

// Succeed ends a successful attempt: the account's counter is cleared and
// the attempt is taken back from the address's.
func (t *Throttle) Succeed(tk *AttemptTicket) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.account.entries, tk.account.key)
	t.address.takeBack(tk.address)
}

// Abandon ends an attempt that was never judged (the store or the hashing
// slots failed): it is taken back from both counters.
func (t *Throttle) Abandon(tk *AttemptTicket) {
	t.mu.Lock()
	defer t.mu.Unlock()
	t.account.takeBack(tk.account)
	t.address.takeBack(tk.address)
}

// takeBack undoes one counted attempt: the entry returns to what it was
// before, unless another attempt changed it meanwhile; then only the count
// goes down (a delay that other attempt imposed stays).
func (s *throttleScope) takeBack(tk ticketKey) {
	e, ok := s.entries[tk.key]
	if !ok {
		return
	}
	if *e == tk.set {
		if tk.prev == (throttleEntry{}) {
			delete(s.entries, tk.key)
			return
		}
		*e = tk.prev
		return
	}
	if e.failures > 0 {
		e.failures--
	}
}

// blockedFor is how long e still refuses attempts at now.
func blockedFor(e *throttleEntry, now time.Time) time.Duration {
	if e == nil || !now.Before(e.until) {
		return 0
	}
	return e.until.Sub(now)
}

// get returns the live entry for key, dropping it when its window passed.
func (s *throttleScope) get(key string, now time.Time) *throttleEntry {
	e, ok := s.entries[key]
	if !ok {
		return nil
	}
	if s.expired(e, now) {
		delete(s.entries, key)
		return nil
	}
	return e
}

// expired reports whether e no longer matters: no block in force and no
// counted attempt within Window of the later of its last attempt and the
// end of its block.
func (s *throttleScope) expired(e *throttleEntry, now time.Time) bool {
	if now.Before(e.until) {
		return false
	}
	ref := e.last
	if e.until.After(ref) {
		ref = e.until
	}
	return !now.Before(ref.Add(s.policy.Window))
}

// ensure returns key's entry, creating it (and making room) if needed.
func (s *throttleScope) ensure(key string, now time.Time) *throttleEntry {
	if e, ok := s.entries[key]; ok {
		return e
	}
	if len(s.entries) >= s.maxKeys {
		s.evict(now)
	}
	e := &throttleEntry{}
	s.entries[key] = e
	return e
}

// evict makes room for one entry: expired entries go first, then any
// entry that is not locked, then any entry. Go's map order is random, so
// an attacker cannot choose which entries fall out.
func (s *throttleScope) evict(now time.Time) {
	for k, e := range s.entries {
		if s.expired(e, now) {
			delete(s.entries, k)
		}
	}
	if len(s.entries) < s.maxKeys {
		return
	}
	for k, e := range s.entries {
		if !e.locked {
			delete(s.entries, k)
			return
		}
	}
	for k := range s.entries {
		delete(s.entries, k)
		return
	}
}

// count records one attempt on e and returns the delay or lockout it
// imposes, if any.
func (s *throttleScope) count(e *throttleEntry, now time.Time) (Imposition, bool) {
	p := s.policy
	if e.locked && !now.Before(e.until) {
		// A lockout that ended starts a fresh count.
		*e = throttleEntry{}
	}
	e.failures++
	e.last = now
	switch {
	case p.Lock > 0 && e.failures >= p.Lock:
		e.until, e.locked = now.Add(p.Lockout), true
		return Imposition{Locked: true, Failures: e.failures, Until: e.until}, true
	case e.failures > p.Free:
		d := p.BaseDelay
		for i := p.Free + 1; i < e.failures && d < p.MaxDelay; i++ {
			d *= 2
		}
		d = min(d, p.MaxDelay)
		e.until = now.Add(d)
		return Imposition{Failures: e.failures, Until: e.until}, true
	}
	return Imposition{}, false
}
