package server_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"syscall"
	"testing"
	"time"
)

// readyLog keeps the "after" of each "local: gateway ready" line of the
// local driver (the gateway's own start, from spawning the process to its
// first successful probe) and the pid of each "local: gateway started".
type readyLog struct {
	mu    sync.Mutex
	after []time.Duration
	pids  []int64
}

func (h *readyLog) Enabled(context.Context, slog.Level) bool { return true }
func (h *readyLog) WithAttrs([]slog.Attr) slog.Handler       { return h }
func (h *readyLog) WithGroup(string) slog.Handler            { return h }
func (h *readyLog) Handle(_ context.Context, r slog.Record) error {
	if r.Message == "local: gateway started" {
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "pid" {
				h.mu.Lock()
				h.pids = append(h.pids, a.Value.Int64())
				h.mu.Unlock()
			}
			return true
		})
		return nil
	}
	if r.Message != "local: gateway ready" {
		return nil
	}
	r.Attrs(func(a slog.Attr) bool {
		if a.Key == "after" {
			if d, ok := a.Value.Any().(time.Duration); ok {
				h.mu.Lock()
				h.after = append(h.after, d)
				h.mu.Unlock()
			}
		}
		return true
	})
	return nil
}

// lastPid is the pid of the gateway started last (0: none logged yet).
func (h *readyLog) lastPid() int64 {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.pids) == 0 {
		return 0
	}
	return h.pids[len(h.pids)-1]
}

func (h *readyLog) last() (time.Duration, int) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if len(h.after) == 0 {
		return 0, 0
	}
	return h.after[len(h.after)-1], len(h.after)
}

// BenchmarkLocalDeploy measures OCC's own share of a local deployment:
// from POST deploy to the deployment reading succeeded (polled every
// 10 ms), minus the gateway's own start as the local driver logs it (spawn
// to first successful probe). Each of the b.N operations deploys a new
// Agent on one real gateway and stops it afterwards, so at most one
// gateway runs at a time: the next deployment starts once the last one's
// gateway process has exited, so that no stop is part of a deployment's
// time. The worker claims a deployment queued through its own server at
// once (sqlstore's OnWorkQueued) and rechecks a starting gateway when the
// driver says it answers (compute.ReadyNotifier), else on its backoff
// (500 ms at first); what either wait costs is part of OCC's share.
//
//	go test ./internal/server -run '^$' -bench LocalDeploy -benchtime 3x
func BenchmarkLocalDeploy(b *testing.B) {
	log := &readyLog{}
	le := newLocalEnvWith(b, slog.New(log))
	var total, gateway time.Duration
	for i := range b.N {
		agent := le.createAgent(fmt.Sprintf("deploy-bench-%d", i), nil)
		_, before := log.last()
		start := time.Now()
		rev := le.deploy(agent)
		deadline := start.Add(5 * time.Minute)
		for {
			s := le.deployment(agent, rev).Status
			if s == "succeeded" {
				break
			}
			if s == "failed" || time.Now().After(deadline) {
				b.Fatalf("deployment %s: %s", rev, s)
			}
			time.Sleep(10 * time.Millisecond)
		}
		elapsed := time.Since(start)
		g, n := log.last()
		if n != before+1 {
			b.Fatalf("the driver logged %d gateway starts during the deployment; want 1", n-before)
		}
		total += elapsed
		gateway += g
		pid := log.lastPid()
		if pid == 0 {
			b.Fatal("the driver logged no gateway pid; cannot wait for the gateway to exit")
		}
		le.must("POST", "/namespaces/"+le.ns+"/agents/"+agent+"/stop", nil, le.admin, 202, nil)
		le.waitFor(3*time.Minute, func() bool {
			// Signal 0 checks existence only; ESRCH: exited and reaped.
			return errors.Is(syscall.Kill(int(pid), 0), syscall.ESRCH)
		})
	}
	occ := total - gateway
	b.ReportMetric(float64(total.Milliseconds())/float64(b.N), "deploy-ms")
	b.ReportMetric(float64(gateway.Milliseconds())/float64(b.N), "gateway-start-ms")
	b.ReportMetric(float64(occ.Milliseconds())/float64(b.N), "occ-ms")
	b.ReportMetric(100*float64(occ)/float64(total), "occ-share-%")
}
