// Command cmd is `make bench` (docs/performance.md): it runs package
// bench's measurements and prints one table.
//
//	go run ./internal/bench/cmd [-engines sqlite,postgres] [-ops 2000] [-concurrency 16] [-occ bin/occ] [-signins 100] [-files 200] [-worker 200]
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"os/signal"

	"github.com/openclaw/occ/internal/bench"
)

func main() {
	var o bench.Options
	flag.StringVar(&o.Engines, "engines", "sqlite,postgres", "engines to measure, comma-separated")
	flag.StringVar(&o.PostgresURL, "postgres", os.Getenv("OCC_TEST_POSTGRES_URL"), "PostgreSQL server URL (a throw-away database is created and dropped on it)")
	flag.IntVar(&o.Limits.Ops, "ops", 2000, "measured operations per row")
	flag.IntVar(&o.Limits.Concurrency, "concurrency", 16, "concurrent clients")
	flag.StringVar(&o.OccBin, "occ", "", "occ binary for the RSS rows (none: no RSS rows)")
	flag.IntVar(&o.FilesOps, "files", 0, "operations per side of the workspace files benchmark (needs OCC_OPENCLAW_RUNTIME; 0: skip)")
	flag.IntVar(&o.WorkerOps, "worker", 0, "deployments per engine of the worker benchmark (0: skip)")
	flag.IntVar(&o.SignIns, "signins", 100, "sign-ins of the RSS burst, with -occ (0: skip)")
	flag.BoolVar(&o.Baseline, "baseline", true, "measure a bare net/http server spending fixed CPU per request, with the API rows' client and concurrency")
	flag.BoolVar(&o.Floor, "floor", true, "after each engine's API rows, measure its store floor: the same store calls behind a bare net/http server")
	flag.IntVar(&o.ReadCacheItems, "read-cache-items", -1, "read cache size as --database-read-cache-items (0: off; negative: occ server's default)")
	flag.StringVar(&o.ModuleDir, "module", ".", "module root, where the files benchmark runs")
	flag.StringVar(&o.CPUProfile, "cpuprofile", "", "write a CPU profile of the API measurements to this file")
	flag.StringVar(&o.MemProfile, "memprofile", "", "write an allocation profile of the API measurements to this file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := bench.Run(ctx, os.Stdout, o); err != nil {
		fmt.Fprintln(os.Stderr, "bench:", err)
		os.Exit(1)
	}
}
