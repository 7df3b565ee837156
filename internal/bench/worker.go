package bench

import (
	"bufio"
	"context"
	"fmt"
	"regexp"
	"strconv"
	"strings"
)

// WorkerBenchmark runs internal/worker's BenchmarkDeployments (ops
// deployments, one per Agent, through the real worker and the fake
// driver, then the same number of bare ClaimWork+FinishWork calls on a
// second store of the same engine, in the same run) and BenchmarkLoops
// (ops deployments by Worker.Run with one loop and with four, alternating
// for three rounds, the fake driver's PrepareRevision and ActivateRevision
// taking 20 ms each) with `go test` in moduleDir, on both engines
// (PostgreSQL needs OCC_TEST_POSTGRES_URL), and turns their metrics into
// rows. The run is bounded by a 15-minute timeout.
func WorkerBenchmark(ctx context.Context, moduleDir string, ops int) ([]Result, error) {
	out, err := goBench(ctx, moduleDir, "./internal/worker", "^(BenchmarkDeployments|BenchmarkLoops)$", ops)
	if err != nil {
		return nil, err
	}
	return parseWorkerBenchmark(out)
}

var workerBenchLine = regexp.MustCompile(`^Benchmark(Deployments|Loops)/(\w+)\S*\s+(\d+)\s+(.*)$`)

// parseWorkerBenchmark reads the "deployments/s", "bare-items/s" and
// "x-bare" metrics of each engine's BenchmarkDeployments, and the
// "loops1-deployments/s", "loops4-deployments/s" and "loops4-x" of its
// BenchmarkLoops.
func parseWorkerBenchmark(out string) ([]Result, error) {
	var rs []Result
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := workerBenchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		engine := m[2]
		n, _ := strconv.Atoi(m[3])
		metrics := map[string]float64{}
		f := strings.Fields(m[4])
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				metrics[f[i+1]] = v
			}
		}
		if m[1] == "Loops" {
			rs = append(rs,
				Result{Engine: engine, Name: "worker deployments, 20 ms driver calls, 1 loop", Concurrency: 1, Ops: 3 * n,
					PerSecond: metrics["loops1-deployments/s"]},
				Result{Engine: engine, Name: "worker deployments, 20 ms driver calls, 4 loops", Concurrency: 4, Ops: 3 * n,
					PerSecond: metrics["loops4-deployments/s"],
					Note:      fmt.Sprintf("%.2fx one loop (3 rounds, alternating)", metrics["loops4-x"])})
			continue
		}
		rs = append(rs, Result{Engine: engine, Name: "worker deployments (fake driver)", Concurrency: 1, Ops: n,
			PerSecond: metrics["deployments/s"],
			Note:      fmt.Sprintf("bare queue claim+finish %.0f/s; a deployment costs %.1fx a bare item", metrics["bare-items/s"], metrics["x-bare"])})
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("no BenchmarkDeployments results in:\n%s", tail(out))
	}
	return rs, nil
}
