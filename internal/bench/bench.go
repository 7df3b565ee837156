package bench

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"io"
	"log/slog"
	"net/url"
	"os"
	"runtime"
	"runtime/debug"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store/sqlstore"
)

// Options are the bench command's flags.
type Options struct {
	Engines     string // comma-separated: sqlite, postgres
	PostgresURL string // server for the throw-away database; "" skips PostgreSQL
	Limits      Limits
	Scale       Scale
	OccBin      string // for the RSS rows; "" skips them
	FilesOps    int    // operations per side of the files benchmark; 0 skips it
	WorkerOps   int    // deployments per engine of the worker benchmark; 0 skips it
	SignIns     int    // sign-ins of the RSS burst (with OccBin); 0 skips it
	Baseline    bool   // measure the bare net/http rows (baseline.go) before the API rows
	Floor       bool   // measure each engine's store floor rows (floor.go) after its API rows
	// ReadCacheItems sizes the store's read cache as
	// --database-read-cache-items does (0: off); negative means the default.
	ReadCacheItems int
	ModuleDir      string // where `go test` runs the files benchmark
	CPUProfile     string
	MemProfile     string
}

// Run measures every engine of o and prints one table to w.
func Run(ctx context.Context, w io.Writer, o Options) error {
	if o.Scale == (Scale{}) {
		o.Scale = DefaultScale
	}
	if o.Limits.MaxTime == 0 {
		o.Limits.MaxTime = 60 * time.Second
	}
	if o.Limits.Warmup == 0 {
		o.Limits.Warmup = 50
	}
	work, err := os.MkdirTemp("", "occ-bench-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	// The API rows run the server in this process: with occ server's
	// collector target (or GOGC, as occ server would honour it).
	server.TuneGC(slog.New(slog.DiscardHandler))

	if o.CPUProfile != "" {
		f, err := os.Create(o.CPUProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		if err := pprof.StartCPUProfile(f); err != nil {
			return err
		}
		defer pprof.StopCPUProfile()
	}
	if o.MemProfile != "" {
		runtime.MemProfileRate = 64 << 10
	}
	var results []Result
	var notes []string
	if o.Baseline {
		rs, err := BaselineRows(ctx, o.Limits)
		if err != nil {
			return fmt.Errorf("baseline: %w", err)
		}
		results = append(results, rs...)
	}
	for _, engine := range strings.Split(o.Engines, ",") {
		var dbURL string
		dir := work + "/" + engine
		switch engine {
		case "": // -engines '': none (the RSS, files and worker rows only)
			continue
		case sqlstore.EngineSQLite:
		case sqlstore.EnginePostgres:
			if o.PostgresURL == "" {
				notes = append(notes, "postgres: skipped (no -postgres URL and no OCC_TEST_POSTGRES_URL)")
				continue
			}
			u, drop, err := throwAwayDatabase(ctx, o.PostgresURL)
			if err != nil {
				return fmt.Errorf("postgres: %w", err)
			}
			defer drop()
			dbURL = u
		default:
			return fmt.Errorf("unknown engine %q", engine)
		}
		if err := os.MkdirAll(dir, 0o700); err != nil {
			return err
		}
		e, err := openAPIEnv(ctx, engine, dbURL, dir, o.Scale, o.ReadCacheItems)
		if err != nil {
			return fmt.Errorf("%s: %w", engine, err)
		}
		notes = append(notes, fmt.Sprintf("%s: seeded %d Namespaces, %d Agents, %d audit events in %s",
			engine, o.Scale.Namespaces, o.Scale.Agents, o.Scale.AuditEvents, e.seedDur.Round(time.Millisecond)))
		scs, err := e.apiScenarios(ctx)
		if err != nil {
			e.close()
			return err
		}
		for _, sc := range scs {
			r, err := e.measure(ctx, sc, o.Limits)
			if err != nil {
				e.close()
				return err
			}
			results = append(results, r)
		}
		if o.Floor {
			rs, err := e.floorRows(ctx, o.Limits)
			if err != nil {
				e.close()
				return fmt.Errorf("%s store floor: %w", engine, err)
			}
			results = append(results, rs...)
		}
		e.close()
	}
	if o.MemProfile != "" {
		f, err := os.Create(o.MemProfile)
		if err != nil {
			return err
		}
		if err := pprof.Lookup("allocs").WriteTo(f, 0); err != nil {
			f.Close()
			return err
		}
		f.Close()
	}
	if o.FilesOps > 0 {
		rs, err := FilesBenchmark(ctx, o.ModuleDir, o.FilesOps)
		if err != nil {
			return err
		}
		results = append(results, rs...)
	}
	if o.WorkerOps > 0 {
		rs, err := WorkerBenchmark(ctx, o.ModuleDir, o.WorkerOps)
		if err != nil {
			return err
		}
		results = append(results, rs...)
	}
	if err := PrintTable(w, results); err != nil {
		return err
	}
	if o.OccBin != "" {
		rss, err := ServerRSS(ctx, o.OccBin, work, o.Scale)
		if err != nil {
			return fmt.Errorf("RSS: %w", err)
		}
		fmt.Fprintln(w)
		for _, r := range rss {
			fmt.Fprintf(w, "%-60s RSS %6.1f MB  peak %6.1f MB  (anonymous %5.1f MB, file %5.1f MB)\n", r.Name,
				float64(r.RSS)/1e6, float64(r.HWM)/1e6, float64(r.Anon)/1e6, float64(r.File)/1e6)
		}
		if o.SignIns > 0 {
			b, err := SignInBurstRSS(ctx, o.OccBin, work, o.SignIns)
			if err != nil {
				return fmt.Errorf("sign-in burst: %w", err)
			}
			under := "not within 10 s"
			if b.UnderLimitAt >= 0 {
				under = b.UnderLimitAt.Round(50*time.Millisecond).String() + " after it"
			}
			fmt.Fprintf(w, "occ server, burst of %d sign-ins (8 clients, %s, %d failed, %d retried after 503): RSS before %.1f MB, peak %.1f MB, 10 s after %.1f MB; under 100 MB %s\n",
				b.SignIns, b.Burst.Round(time.Millisecond), b.Failed, b.RetriedBusy, float64(b.Before)/1e6, float64(b.Peak)/1e6, float64(b.After)/1e6, under)
		}
	}
	fmt.Fprintln(w)
	for _, n := range notes {
		fmt.Fprintln(w, n)
	}
	gogc := debug.SetGCPercent(100)
	debug.SetGCPercent(gogc)
	fmt.Fprintf(w, "machine: %d CPUs (GOMAXPROCS %d), %s/%s, %s, GC percent %d\n", runtime.NumCPU(), runtime.GOMAXPROCS(0), runtime.GOOS, runtime.GOARCH, runtime.Version(), gogc)
	return nil
}

// throwAwayDatabase creates a database with a random name on the server
// of serverURL and returns its URL and how to drop it.
func throwAwayDatabase(ctx context.Context, serverURL string) (string, func(), error) {
	admin, err := sqlstore.Open(ctx, serverURL, "")
	if err != nil {
		return "", nil, err
	}
	var b [6]byte
	rand.Read(b[:])
	name := "occ_bench_" + hex.EncodeToString(b[:])
	if _, err := admin.DB().ExecContext(ctx, "CREATE DATABASE "+name); err != nil {
		admin.Close()
		return "", nil, err
	}
	u, err := url.Parse(serverURL)
	if err != nil {
		admin.Close()
		return "", nil, err
	}
	u.Path = "/" + name
	drop := func() {
		dctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		admin.DB().ExecContext(dctx, "DROP DATABASE IF EXISTS "+name+" WITH (FORCE)")
		admin.Close()
	}
	return u.String(), drop, nil
}
