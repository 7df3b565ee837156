package bench

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"regexp"
	"strconv"
	"strings"
	"time"
)

// FilesBenchmark runs internal/server's BenchmarkWorkspaceFiles (OCC's
// file GET and PUT against the same operation done directly on the same
// real gateway, interleaved in rounds, at concurrency 1 and 16) with `go
// test` in moduleDir, and turns its metrics into table rows. It needs the
// agent runtime (OCC_OPENCLAW_RUNTIME) and starts one real gateway; ops
// is the -benchtime count of each side. The run is bounded by a 15-minute
// timeout.
func FilesBenchmark(ctx context.Context, moduleDir string, ops int) ([]Result, error) {
	// Anchored: BenchmarkWorkspaceFilesDocker and BenchmarkWorkspaceFilesSSH
	// share the prefix and would start their own gateways (or fail under
	// CI=true without Docker or the test sshd).
	out, err := goBench(ctx, moduleDir, "./internal/server", "^BenchmarkWorkspaceFiles$", ops)
	if err != nil {
		return nil, err
	}
	return parseFilesBenchmark(out)
}

// goBench runs `go test -run ^$ -bench pattern -benchtime opsx` of pkg in
// moduleDir (no race detector: these are measurements) and returns its
// standard output, bounded by a 15-minute timeout; a failure carries the
// end of both outputs.
func goBench(ctx context.Context, moduleDir, pkg, pattern string, ops int) (string, error) {
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "go", "test", "-run", "^$", "-bench", pattern,
		"-benchtime", fmt.Sprintf("%dx", ops), "-count", "1", "-timeout", "15m", pkg)
	cmd.Dir = moduleDir
	cmd.Env = os.Environ()
	var out, errOut bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errOut
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("go test -bench %s %s: %w\n%s%s", pattern, pkg, err, tail(out.String()), tail(errOut.String()))
	}
	return out.String(), nil
}

var benchLine = regexp.MustCompile(`^BenchmarkWorkspaceFiles/(pool/|poolmux/)?(get|put)/conc=(\d+)\S*\s+(\d+)\s+(.*)$`)

// parseFilesBenchmark reads the benchmark's custom metrics ("1.23
// occ-p50-ms" pairs) into one row per side and sub-benchmark, plus the
// ratio row.
func parseFilesBenchmark(out string) ([]Result, error) {
	var rs []Result
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		pooled := m[1] != ""
		conc, _ := strconv.Atoi(m[3])
		metrics := map[string]float64{}
		n, _ := strconv.Atoi(m[4])
		f := strings.Fields(m[5])
		for i := 0; i+1 < len(f); i += 2 {
			v, err := strconv.ParseFloat(f[i], 64)
			if err == nil {
				metrics[f[i+1]] = v
			}
		}
		op := strings.ToUpper(m[2])
		occName, directName, ratioName := " through OCC", " direct (native)", " OCC / direct"
		if pooled {
			// OCC with --gateway-pool against the native call on one open
			// connection; poolmux/ multiplexes OCC's operations on it.
			mode := "pooled"
			if m[1] == "poolmux/" {
				mode = "pooled, multiplexed"
			}
			occName, directName, ratioName = " through OCC, "+mode, " direct, one open connection", " OCC "+mode+" / direct"
		}
		msd := func(v float64) time.Duration { return time.Duration(v * float64(time.Millisecond)) }
		rs = append(rs,
			Result{Engine: "gateway", Name: "file " + op + occName, Concurrency: conc, Ops: n,
				P50: msd(metrics["occ-p50-ms"]), P99: msd(metrics["occ-p99-ms"]), PerSecond: metrics["occ-ops/s"]},
			Result{Engine: "gateway", Name: "file " + op + directName, Concurrency: conc, Ops: n,
				P50: msd(metrics["direct-p50-ms"]), P99: msd(metrics["direct-p99-ms"]), PerSecond: metrics["direct-ops/s"]},
			Result{Engine: "gateway", Name: "file " + op + ratioName, Concurrency: conc,
				Note: fmt.Sprintf("p50 %.2fx, p99 %.2fx, throughput %.0f%%", metrics["p50-ratio"], metrics["p99-ratio"], 100*metrics["throughput-ratio"])})
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("no BenchmarkWorkspaceFiles results in:\n%s", tail(out))
	}
	return rs, nil
}

func tail(s string) string {
	if len(s) > 4000 {
		return "…" + s[len(s)-4000:]
	}
	return s
}
