package server

import (
	"context"
	"errors"
	"log/slog"
	"math"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/metrics"
	"testing"
	"time"

	"github.com/KimMachineGun/automemlimit/memlimit"

	"github.com/openclaw/occ/internal/testutil"
)

// TestTuneGC: without GOGC the collector's target becomes
// DefaultGCPercent; with GOGC set (which Go applied at start) TuneGC
// leaves the target alone.
func TestTuneGC(t *testing.T) {
	stopHeapFloor() // one started by an earlier test's server would change the target
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { stopHeapFloor(); debug.SetGCPercent(orig) })
	origLimit := debug.SetMemoryLimit(-1) // TuneGC also sets the memory limit
	t.Cleanup(func() { debug.SetMemoryLimit(origLimit) })
	prev, had := os.LookupEnv("GOGC")
	t.Cleanup(func() {
		if had {
			os.Setenv("GOGC", prev)
		} else {
			os.Unsetenv("GOGC")
		}
	})
	logger := slog.New(slog.DiscardHandler)
	for _, tc := range []struct {
		name   string
		gogc   string // "" unsets it
		before int
		want   int
	}{
		{"GOGC unset", "", 100, DefaultGCPercent},
		{"GOGC set", "150", 150, 150},
		{"GOGC off", "off", -1, -1},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.gogc == "" {
				os.Unsetenv("GOGC")
			} else {
				os.Setenv("GOGC", tc.gogc)
			}
			debug.SetGCPercent(tc.before)
			cycles := gcCycles()
			TuneGC(logger)
			got := debug.SetGCPercent(tc.before)
			// The heap floor TuneGC starts without GOGC raises the target
			// after the next collection (TestHeapFloor): only if none ran
			// meanwhile must it still be the one TuneGC set.
			raised := tc.gogc == "" && gcCycles() != cycles && got > tc.want
			if got != tc.want && !raised {
				t.Errorf("GC percent = %d, want %d", got, tc.want)
			}
			floor.mu.Lock()
			running := floor.stop != nil
			floor.mu.Unlock()
			if running != (tc.gogc == "") {
				t.Errorf("heap floor running: %v, want %v", running, tc.gogc == "")
			}
			stopHeapFloor()
		})
	}
}

// TestTuneMemoryLimit: the soft memory limit is MemoryLimitRatio of the
// cgroup's limit, unless GOMEMLIMIT is set (the operator's value stands) or
// AUTOMEMLIMIT is off; without a cgroup limit there is none; a cgroup that
// cannot be read changes nothing.
func TestTuneMemoryLimit(t *testing.T) {
	orig := debug.SetMemoryLimit(-1)
	t.Cleanup(func() { debug.SetMemoryLimit(orig) })
	const gib = 1 << 30
	const before = 7 * gib
	ratio := MemoryLimitRatio // a variable: the product is not a whole number
	ninety := int64(float64(gib) * ratio)
	unreadable := func() (uint64, error) { return 0, errors.New("no cgroup here") }
	for _, tc := range []struct {
		name   string
		env    map[string]string
		source memlimit.Provider
		want   int64
	}{
		{"cgroup limit 1 GiB", nil, memlimit.Limit(gib), ninety},
		{"GOMEMLIMIT set", map[string]string{"GOMEMLIMIT": "7GiB"}, memlimit.Limit(gib), before},
		{"AUTOMEMLIMIT off", map[string]string{"AUTOMEMLIMIT": "off"}, memlimit.Limit(gib), before},
		{"AUTOMEMLIMIT 0.5", map[string]string{"AUTOMEMLIMIT": "0.5"}, memlimit.Limit(gib), gib / 2},
		{"no cgroup limit", nil, func() (uint64, error) { return 0, memlimit.ErrNoLimit }, math.MaxInt64},
		{"cgroup unreadable", nil, unreadable, before},
	} {
		t.Run(tc.name, func(t *testing.T) {
			t.Setenv("GOMEMLIMIT", "")
			t.Setenv("AUTOMEMLIMIT", "")
			os.Unsetenv("AUTOMEMLIMIT")
			for k, v := range tc.env {
				t.Setenv(k, v)
			}
			debug.SetMemoryLimit(before)
			tuneMemoryLimit(slog.New(slog.DiscardHandler), tc.source)
			if got := debug.SetMemoryLimit(-1); got != tc.want {
				t.Errorf("memory limit = %d, want %d", got, tc.want)
			}
		})
	}
}

// gcCycles is the number of collections the runtime has completed.
func gcCycles() uint64 {
	s := []metrics.Sample{{Name: "/gc/cycles/total:gc-cycles"}}
	metrics.Read(s)
	return s[0].Value.Uint64()
}

func TestGCPercentFor(t *testing.T) {
	const mib = 1 << 20
	for _, tc := range []struct {
		name  string
		live  uint64
		floor uint64
		want  int
	}{
		{"nothing live", 0, 64 * mib, maxGCPercent},
		{"a tiny heap: capped", 1024, 64 * mib, maxGCPercent},
		{"4 MiB live: the next cycle at 64 MiB", 4 * mib, 64 * mib, 1500},
		{"rounded up, never below the floor", 3 * mib, 64 * mib, 2034},
		{"at the floor over the percent", 100 * mib / 5, 100 * mib, 400},
		{"just below it", 100*mib/5 - 1, 100 * mib, 401},
		{"a heap at the floor", 64 * mib, 64 * mib, 400},
		{"a heap above it", 200 * mib, 64 * mib, 400},
	} {
		if got := gcPercentFor(tc.live, 400, tc.floor); got != tc.want {
			t.Errorf("%s: gcPercentFor(%d, 400, %d) = %d, want %d", tc.name, tc.live, tc.floor, got, tc.want)
		}
		if got := gcPercentFor(tc.live, 400, tc.floor); tc.live > 0 && tc.live*uint64(100+got)/100 < min(tc.floor, tc.live*uint64(100+maxGCPercent)/100) {
			t.Errorf("%s: a target of %d starts the next cycle below the floor", tc.name, got)
		}
	}
}

// TestHeapFloor: after a collection the heap floor has set the target
// so that the next cycle starts at about the floor, not at
// DefaultGCPercent over this test binary's few MB; once stopped it
// changes the target no more.
func TestHeapFloor(t *testing.T) {
	stopHeapFloor()
	orig := debug.SetGCPercent(DefaultGCPercent)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
	const floor = 256 << 20
	stop := startHeapFloor(DefaultGCPercent, floor)
	t.Cleanup(stop)
	goal := []metrics.Sample{{Name: "/gc/heap/goal:bytes"}, {Name: "/gc/heap/live:bytes"}}
	var g, live uint64
	ctx, cancel := context.WithTimeout(testutil.Context(t), 10*time.Second)
	defer cancel()
	err := testutil.Poll(ctx, func() (bool, error) {
		runtime.GC()
		metrics.Read(goal)
		g, live = goal[0].Value.Uint64(), goal[1].Value.Uint64()
		// The goal also counts the stacks and globals (Go 1.18+), so it
		// is at least the floor, where the live heap alone would give far
		// less at DefaultGCPercent.
		return g >= floor && live*(100+DefaultGCPercent)/100 < floor, nil
	})
	if err != nil {
		t.Fatalf("heap goal %d bytes with %d live, want at least %d: %v", g, live, floor, err)
	}
	stop()
	debug.SetGCPercent(DefaultGCPercent)
	runtime.GC()
	runtime.GC()
	if got := debug.SetGCPercent(DefaultGCPercent); got != DefaultGCPercent {
		t.Errorf("after stop the target is %d, want %d as set", got, DefaultGCPercent)
	}
}
