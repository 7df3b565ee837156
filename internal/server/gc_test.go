package server

import (
	"log/slog"
	"os"
	"runtime/debug"
	"testing"
)

// TestTuneGC: without GOGC the collector's target becomes
// DefaultGCPercent; with GOGC set (which Go applied at start) TuneGC
// leaves the target alone.
func TestTuneGC(t *testing.T) {
	orig := debug.SetGCPercent(100)
	t.Cleanup(func() { debug.SetGCPercent(orig) })
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
