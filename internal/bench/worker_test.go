package bench

import (
	"testing"

	"github.com/google/go-cmp/cmp"
)

func TestParseWorkerBenchmark(t *testing.T) {
	out := `goos: linux
BenchmarkDeployments/sqlite-2         	     200	   5000000 ns/op	       123.4 bare-items/s	        45.60 deployments/s	         2.700 x-bare
BenchmarkDeployments/postgres-2       	     200	   6000000 ns/op	       300.0 bare-items/s	        30.00 deployments/s	        10.00 x-bare
BenchmarkLoops/sqlite-2         	      40	 162682947 ns/op	        23.41 loops1-deployments/s	        92.27 loops4-deployments/s	         3.941 loops4-x
PASS
`
	got, err := parseWorkerBenchmark(out)
	if err != nil {
		t.Fatal(err)
	}
	want := []Result{
		{Engine: "sqlite", Name: "worker deployments (fake driver)", Concurrency: 1, Ops: 200, PerSecond: 45.6,
			Note: "bare queue claim+finish 123/s; a deployment costs 2.7x a bare item"},
		{Engine: "postgres", Name: "worker deployments (fake driver)", Concurrency: 1, Ops: 200, PerSecond: 30,
			Note: "bare queue claim+finish 300/s; a deployment costs 10.0x a bare item"},
		{Engine: "sqlite", Name: "worker deployments, 20 ms driver calls, 1 loop", Concurrency: 1, Ops: 120, PerSecond: 23.41},
		{Engine: "sqlite", Name: "worker deployments, 20 ms driver calls, 4 loops", Concurrency: 4, Ops: 120, PerSecond: 92.27,
			Note: "3.94x one loop (3 rounds, alternating)"},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("parseWorkerBenchmark (-want +got):\n%s", diff)
	}
	if _, err := parseWorkerBenchmark("PASS\n"); err == nil {
		t.Error("no result lines: want an error")
	}
}
