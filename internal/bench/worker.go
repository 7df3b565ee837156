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
// second store of the same engine, in the same run) with `go test` in
// moduleDir, on both engines (PostgreSQL needs OCC_TEST_POSTGRES_URL), and
// turns its metrics into one row per engine. The run is bounded by a
// 15-minute timeout.
func WorkerBenchmark(ctx context.Context, moduleDir string, ops int) ([]Result, error) {
	out, err := goBench(ctx, moduleDir, "./internal/worker", "^BenchmarkDeployments$", ops)
	if err != nil {
		return nil, err
	}
	return parseWorkerBenchmark(out)
}

var workerBenchLine = regexp.MustCompile(`^BenchmarkDeployments/(\w+)\S*\s+(\d+)\s+(.*)$`)

// parseWorkerBenchmark reads the "deployments/s", "bare-items/s" and
// "x-bare" metrics of each engine's sub-benchmark.
func parseWorkerBenchmark(out string) ([]Result, error) {
	var rs []Result
	sc := bufio.NewScanner(strings.NewReader(out))
	for sc.Scan() {
		m := workerBenchLine.FindStringSubmatch(strings.TrimSpace(sc.Text()))
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		metrics := map[string]float64{}
		f := strings.Fields(m[3])
		for i := 0; i+1 < len(f); i += 2 {
			if v, err := strconv.ParseFloat(f[i], 64); err == nil {
				metrics[f[i+1]] = v
			}
		}
		rs = append(rs, Result{Engine: m[1], Name: "worker deployments (fake driver)", Concurrency: 1, Ops: n,
			PerSecond: metrics["deployments/s"],
			Note:      fmt.Sprintf("bare queue claim+finish %.0f/s; a deployment costs %.1fx a bare item", metrics["bare-items/s"], metrics["x-bare"])})
	}
	if len(rs) == 0 {
		return nil, fmt.Errorf("no BenchmarkDeployments results in:\n%s", tail(out))
	}
	return rs, nil
}
