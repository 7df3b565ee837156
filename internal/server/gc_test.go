package server

import (
	"errors"
	"log/slog"
	"math"
	"os"
	"runtime/debug"
	"testing"

	"github.com/KimMachineGun/automemlimit/memlimit"
)

// TestTuneGC: without GOGC the collector's target becomes
// DefaultGCPercent; with GOGC set (which Go applied at start) TuneGC
// leaves the target alone.
func TestTuneGC(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
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
			TuneGC(logger)
			if got := debug.SetGCPercent(tc.before); got != tc.want {
				t.Errorf("GC percent = %d, want %d", got, tc.want)
			}
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
