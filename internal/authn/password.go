package authn

import (
	"context"
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"errors"
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"strings"
	"sync/atomic"
	"time"

	"golang.org/x/crypto/argon2"

	"github.com/openclaw/occ/internal/errkind"
)

// Argon2id parameters for new hashes.
//
// OCC's reference server has 2 cores. RFC 9106 §4 recommends t=3, m=64 MiB
// for memory-constrained use; we keep that and set p=2 so one hash uses
// both cores (argon2 splits the memory into p lanes hashed in parallel).
// Measured on the 2-core build machine (AMD EPYC, shared): 60-90 ms and
// 64 MiB per hash (BenchmarkHashPassword, BenchmarkVerifyPassword), which
// is slow enough to make offline guessing expensive and fast enough for an
// interactive sign-in. Raising m or t later is safe: verification reads
// the parameters from each stored hash, so old hashes keep working.
const (
	argonMemoryKiB = 64 * 1024
	argonTime      = 3
	argonThreads   = 2
	argonSaltLen   = 16
	argonKeyLen    = 32
)

// Bounds on parameters read back from a stored hash. A tampered or corrupt
// hash must not be able to make one sign-in allocate gigabytes or run for
// minutes; the ceilings allow four times today's memory and about three
// times today's passes.
const (
	minArgonMemoryKiB = 1024
	maxArgonMemoryKiB = 256 * 1024
	maxArgonTime      = 10
	maxArgonThreads   = 16
	minArgonSaltLen   = 8
	maxArgonSaltLen   = 64
	minArgonKeyLen    = 16
	maxArgonKeyLen    = 64
)

// Password policy for new passwords, in bytes (not characters): the upper
// bound keeps the hash input, and the request that carries it, small.
const (
	MinPasswordLen = 12
	MaxPasswordLen = 1024
)

// Password hashing admission. Each argon2 run holds argonMemoryKiB (64 MiB)
// for its duration, so the number of runs in flight, not the number of
// requests, decides the server's memory: without a bound a burst of
// sign-ins is a cheap way to exhaust the host. At most HashConcurrency()
// runs proceed at once; a caller beyond that waits up to HashWait() for a
// slot and then fails with 503 DEPENDENCY_UNAVAILABLE and a Retry-After,
// so waiting callers cannot pile up without bound either (each holds only
// its goroutine and request, a few KiB).
//
// The bound is per process, which is what memory is: it is a package
// setting (SetHashing) rather than a field of Sessions so that every
// hashing path shares it (sign-in, user creation, bootstrap).
const (
	// DefaultHashWait is how long a caller waits for a hashing slot.
	DefaultHashWait = 2 * time.Second
	// MaxHashConcurrency caps the configurable bound (64 × 64 MiB = 4 GiB).
	MaxHashConcurrency = 64
)

// DefaultHashConcurrency is the bound when none is configured: GOMAXPROCS,
// at most 4. One argon2 run with p=2 already keeps two cores busy, so more
// concurrent runs than cores only add memory, not throughput.
func DefaultHashConcurrency() int { return min(runtime.GOMAXPROCS(0), 4) }

type hashLimiter struct {
	slots chan struct{}
	wait  time.Duration
	// inFlight and peak count runs for HashStats.
	inFlight, peak atomic.Int64
}

var hashing atomic.Pointer[hashLimiter]

func init() { SetHashing(0, 0) }

// SetHashing sets how many password hashes may run at once (n <= 0: the
// default; capped at MaxHashConcurrency) and how long a caller waits for
// a slot (wait <= 0: DefaultHashWait). Runs already holding a slot of the
// previous setting finish under it. The server calls it once at start.
func SetHashing(n int, wait time.Duration) {
	if n <= 0 {
		n = DefaultHashConcurrency()
	}
	n = min(n, MaxHashConcurrency)
	if wait <= 0 {
		wait = DefaultHashWait
	}
	hashing.Store(&hashLimiter{slots: make(chan struct{}, n), wait: wait})
}

// HashStats reports the current bound and the most runs that were ever in
// flight at once under it (for tests and the reliability figures).
func HashStats() (limit, peak int) {
	l := hashing.Load()
	return cap(l.slots), int(l.peak.Load())
}

// errHashBusy answers a caller that found no hashing slot in time. It is
// Unavailable (503), not TooManyRequests: the server is saturated, not the
// caller misbehaving.
func errHashBusy() error {
	return errkind.WithRetryAfter(errkind.Unavailable, "The server is busy verifying passwords; try again shortly.", time.Second)
}

// acquireHashSlot waits for a free argon2 slot, at most the configured
// wait and never past ctx. A context that ends first returns its error.
func acquireHashSlot(ctx context.Context) (release func(), err error) {
	l := hashing.Load()
	got := func() func() {
		n := l.inFlight.Add(1)
		for {
			p := l.peak.Load()
			if n <= p || l.peak.CompareAndSwap(p, n) {
				break
			}
		}
		return func() {
			// The finished hash's 64 MiB buffer is garbage now: collect
			// it before the slot is free, so the next hash reuses that
			// memory instead of adding another buffer to the heap. Left to
			// the collector's own pace (occ server runs it at GOGC=400) a
			// burst of 100 sign-ins peaked at 860 MB instead of about
			// 320 MB. The buffers hold no pointers, so the collection costs
			// little next to the hash.
			runtime.GC()
			if l.inFlight.Add(-1) == 0 {
				scheduleRelease()
			}
			<-l.slots
		}
	}
	select {
	case l.slots <- struct{}{}:
		return got(), nil
	default:
	}
	t := time.NewTimer(l.wait)
	defer t.Stop()
	select {
	case l.slots <- struct{}{}:
		return got(), nil
	case <-t.C:
		return nil, errHashBusy()
	case <-ctx.Done():
		return nil, ctx.Err()
	}
}

// releaseDelay is how long hashing must have stopped before its memory
// is handed back: a burst of sign-ins returns it once, at its end.
const releaseDelay = 250 * time.Millisecond

// releasePending is set while a release is scheduled, so a burst
// schedules one at a time.
var releasePending atomic.Bool

// scheduleRelease returns the argon2 memory to the operating system once
// no hash has run for releaseDelay. Each hash allocates a 64 MiB buffer
// that x/crypto/argon2 does not let a caller reuse (so a sync.Pool cannot
// hold it); after a burst the heap held several of them as garbage, and an
// idle server allocates too little to trigger the collection that would
// free them, so a burst of 100 sign-ins left the server at 326 MB for good
// (docs/performance.md). debug.FreeOSMemory collects and returns the
// pages at once; it costs one collection of the (small) live heap.
func scheduleRelease() {
	if !releasePending.CompareAndSwap(false, true) {
		return
	}
	time.AfterFunc(releaseDelay, func() {
		releasePending.Store(false)
		if hashing.Load().inFlight.Load() != 0 {
			// Still hashing: the run that ends last schedules again.
			return
		}
		debug.FreeOSMemory()
	})
}

var b64 = base64.RawStdEncoding.Strict()

// ValidatePassword checks a new password against the policy. The error is
// errkind.Invalid with a detail at /password; it never echoes the password.
func ValidatePassword(pw string) error {
	switch {
	case len(pw) < MinPasswordLen:
		return errkind.InvalidDetails(
			fmt.Sprintf("password must be at least %d bytes", MinPasswordLen),
			errkind.Detail{Path: "/password", Code: errkind.DetailInvalidValue})
	case len(pw) > MaxPasswordLen:
		return errkind.InvalidDetails(
			fmt.Sprintf("password must be at most %d bytes", MaxPasswordLen),
			errkind.Detail{Path: "/password", Code: errkind.DetailTooLong})
	}
	return nil
}

// HashPassword validates pw against the policy and returns its argon2id
// hash as a PHC string:
//
//	$argon2id$v=19$m=65536,t=3,p=2$<salt>$<hash>
//
// with salt and hash in unpadded standard base64. It may wait for a free
// hashing slot (see SetHashing) and fails with 503 if none frees in time,
// or with ctx's error once ctx is done: a caller that went away frees its
// place in the queue.
func HashPassword(ctx context.Context, pw string) (string, error) {
	if err := ValidatePassword(pw); err != nil {
		return "", err
	}
	return hashPassword(ctx, pw)
}

// hashPassword hashes without the policy check.
func hashPassword(ctx context.Context, pw string) (string, error) {
	salt := make([]byte, argonSaltLen)
	if _, err := rand.Read(salt); err != nil {
		return "", fmt.Errorf("authn: read salt: %w", err)
	}
	release, err := acquireHashSlot(ctx)
	if err != nil {
		return "", err
	}
	defer release()
	key := argon2.IDKey([]byte(pw), salt, argonTime, argonMemoryKiB, argonThreads, argonKeyLen)
	return encodeHash(argonParams{memory: argonMemoryKiB, time: argonTime, threads: argonThreads}, salt, key), nil
}

type argonParams struct {
	memory  uint32
	time    uint32
	threads uint8
}

func encodeHash(p argonParams, salt, key []byte) string {
	return fmt.Sprintf("$argon2id$v=%d$m=%d,t=%d,p=%d$%s$%s",
		argon2.Version, p.memory, p.time, p.threads, b64.EncodeToString(salt), b64.EncodeToString(key))
}

// errBadHash is returned for a stored hash that is not one this package
// would accept. It describes the format, never the content.
var errBadHash = errors.New("authn: malformed or unsupported password hash")

// parseHash parses a PHC argon2id string strictly: exact field order,
// canonical decimal numbers, canonical base64, and every parameter within
// the bounds above.
func parseHash(encoded string) (argonParams, []byte, []byte, error) {
	var p argonParams
	parts := strings.Split(encoded, "$")
	if len(parts) != 6 || parts[0] != "" || parts[1] != "argon2id" ||
		parts[2] != "v="+strconv.Itoa(argon2.Version) {
		return p, nil, nil, errBadHash
	}
	fields := strings.Split(parts[3], ",")
	if len(fields) != 3 {
		return p, nil, nil, errBadHash
	}
	m, ok1 := parseParam(fields[0], "m=", minArgonMemoryKiB, maxArgonMemoryKiB)
	t, ok2 := parseParam(fields[1], "t=", 1, maxArgonTime)
	th, ok3 := parseParam(fields[2], "p=", 1, maxArgonThreads)
	// argon2 needs at least 8 KiB of memory per lane.
	if !ok1 || !ok2 || !ok3 || m < 8*th {
		return p, nil, nil, errBadHash
	}
	salt, err := b64.DecodeString(parts[4])
	if err != nil || len(salt) < minArgonSaltLen || len(salt) > maxArgonSaltLen {
		return p, nil, nil, errBadHash
	}
	key, err := b64.DecodeString(parts[5])
	if err != nil || len(key) < minArgonKeyLen || len(key) > maxArgonKeyLen {
		return p, nil, nil, errBadHash
	}
	return argonParams{memory: uint32(m), time: uint32(t), threads: uint8(th)}, salt, key, nil
}

// parseParam parses "<name><decimal>" with no sign, no leading zeros and a
// value in [lo, hi].
func parseParam(s, name string, lo, hi uint64) (uint64, bool) {
	digits, ok := strings.CutPrefix(s, name)
	if !ok {
		return 0, false
	}
	v, err := strconv.ParseUint(digits, 10, 32)
	if err != nil || strconv.FormatUint(v, 10) != digits || v < lo || v > hi {
		return 0, false
	}
	return v, true
}

// VerifyPassword reports whether pw matches the argon2id hash encoded. The
// parameters come from encoded, within fixed bounds. A wrong password is
// (false, nil); a hash that cannot be parsed is an error (stored data is
// corrupt or was tampered with), never a match. The comparison is constant
// time. A password longer than MaxPasswordLen never matches and is not
// hashed: no stored hash can be of such a password.
func VerifyPassword(encoded, pw string) (bool, error) {
	return verifyPassword(context.Background(), encoded, pw)
}

func verifyPassword(ctx context.Context, encoded, pw string) (bool, error) {
	p, salt, want, err := parseHash(encoded)
	if err != nil {
		return false, err
	}
	if len(pw) > MaxPasswordLen {
		return false, nil
	}
	release, err := acquireHashSlot(ctx)
	if err != nil {
		return false, err
	}
	defer release()
	got := argon2.IDKey([]byte(pw), salt, p.time, p.memory, p.threads, uint32(len(want)))
	return subtle.ConstantTimeCompare(got, want) == 1, nil
}

// GeneratePassword returns a random password for bootstrap: 18 bytes from
// crypto/rand as 24 URL-safe base64 characters (144 bits), which satisfies
// the password policy. Like ids.New it panics only if the operating
// system's random source fails.
func GeneratePassword() string {
	var b [18]byte
	if _, err := rand.Read(b[:]); err != nil {
		panic(fmt.Sprintf("authn: crypto/rand failed: %v", err))
	}
	return base64.RawURLEncoding.EncodeToString(b[:])
}
