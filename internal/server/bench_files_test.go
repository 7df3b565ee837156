package server_test

import (
	"context"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"os"
	"runtime/debug"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw/occ/internal/agentgw"
	"github.com/openclaw/occ/internal/agentgw/gwtest"
	"github.com/openclaw/occ/internal/compute"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// switchFiles is the FileClient of real-gateway envs: a fresh connection
// per operation, as OCC runs by default, or, while mode says so, a pooled
// client (--gateway-pool), serialized or multiplexed, so one env
// benchmarks all three.
type switchFiles struct {
	plain, pooled, muxed *agentgw.Client
	mode                 atomic.Int32 // filesPlain, filesPooled, filesMuxed
}

const (
	filesPlain = iota
	filesPooled
	filesMuxed
)

func newSwitchFiles(t testing.TB) *switchFiles {
	pooled := agentgw.New(agentgw.Options{Pool: agentgw.PoolOptions{Enabled: true, MaxInFlight: 1}})
	muxed := agentgw.New(agentgw.Options{Pool: agentgw.PoolOptions{Enabled: true}}) // the default: multiplexed
	t.Cleanup(pooled.Close)
	t.Cleanup(muxed.Close)
	return &switchFiles{plain: agentgw.New(agentgw.Options{}), pooled: pooled, muxed: muxed}
}

func (s *switchFiles) client() *agentgw.Client {
	switch s.mode.Load() {
	case filesPooled:
		return s.pooled
	case filesMuxed:
		return s.muxed
	}
	return s.plain
}

func (s *switchFiles) Get(ctx context.Context, t agentgw.Target, name string) (agentgw.File, error) {
	return s.client().Get(ctx, t, name)
}

func (s *switchFiles) SetAdmitted(ctx context.Context, t agentgw.Target, name, content, expectedHash string, admit agentgw.Admit) (agentgw.File, error) {
	return s.client().SetAdmitted(ctx, t, name, content, expectedHash, admit)
}

// BenchmarkWorkspaceFiles measures OCC's file GET and PUT, over HTTP on
// loopback through the whole stack (admission, authorization, the active
// revision, the gateway client, audit), against the same operation done
// directly on the same real gateway with the native protocol, both opening
// a fresh gateway connection per operation. It reports p50 and p99 of each
// and their ratio, and each side's throughput and their ratio, at
// concurrency 1 and 16, both sides measured in interleaved rounds. Each
// sub-benchmark runs b.N operations of each kind, so every loop is bounded
// by the bench time.
//
// BenchmarkWorkspaceFiles runs it on the local driver's gateway process,
// BenchmarkWorkspaceFilesDocker on the Docker driver's gateway container,
// BenchmarkWorkspaceFilesSSH on the SSH driver's (below).
//
//	go test ./internal/server -run '^$' -bench WorkspaceFiles -benchtime 200x
func BenchmarkWorkspaceFiles(b *testing.B) {
	le := newLocalEnv(b)
	benchWorkspaceFiles(b, le.deployEnv, le.driver)
}

// BenchmarkWorkspaceFilesPostgres is BenchmarkWorkspaceFiles with OCC on
// PostgreSQL (OCC_TEST_POSTGRES_URL) instead of SQLite: a PUT's two audit
// records and the reads before them are round trips to the database
// server, on the same 2 cores here. Not part of make bench.
//
//	go test ./internal/server -run '^$' -bench WorkspaceFilesPostgres -benchtime 500x
func BenchmarkWorkspaceFilesPostgres(b *testing.B) {
	le := newLocalEnvOn(b, testdb.Postgres(b), nil, false)
	benchWorkspaceFiles(b, le.deployEnv, le.driver)
}

func BenchmarkWorkspaceFilesDocker(b *testing.B) {
	de := newDockerEnv(b)
	benchWorkspaceFiles(b, de.deployEnv, de.driver)
}

func benchWorkspaceFiles(b *testing.B, le *deployEnv, driver compute.Driver) {
	// OCC's side runs with occ server's collector target, as in production.
	prev := debug.SetGCPercent(100)
	b.Cleanup(func() { debug.SetGCPercent(prev) })
	debug.SetGCPercent(prev)
	server.TuneGC(slog.New(slog.DiscardHandler))
	agent := le.createAgent("bench", nil)
	le.deployed(agent)
	srv := httpTestServer(b, le.srv.Handler())
	gw, err := driver.Endpoint(context.Background(), revisionFor(b, le, agent))
	if err != nil {
		b.Fatal(err)
	}
	token, err := os.ReadFile(gw.TokenFile)
	if err != nil {
		b.Fatal(err)
	}
	benchFiles(b, le, srv.URL, agent, func(ctx context.Context) (*gwtest.Native, error) {
		return gwtest.DialNative(ctx, gw.URL, gwtest.NativeOptions{Token: string(token)})
	})
}

// BenchmarkWorkspaceFilesSSH is BenchmarkWorkspaceFiles on the SSH
// Compute driver (the real sshd of scripts/testenv/sshd.sh): OCC reads the
// token over SSH and opens a direct-tcpip channel per operation; the
// direct call uses the same tunnel with the token read once.
//
//	go test ./internal/server -run '^$' -bench WorkspaceFilesSSH -benchtime 100x
func BenchmarkWorkspaceFilesSSH(b *testing.B) {
	se := newSSHEnv(b)
	agent := se.createAgent("bench", nil)
	rev := se.deploy(agent)
	se.waitFor(6*time.Minute, se.finished(agent, rev))
	srv := httpTestServer(b, se.srv.Handler())
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	ep, err := se.ssh.Endpoint(ctx, revisionFor(b, se.deployEnv, agent))
	if err != nil || ep.Tunnel == nil {
		b.Fatalf("Endpoint = %+v, %v", ep, err)
	}
	token, err := ep.Tunnel.ReadToken(ctx)
	if err != nil {
		b.Fatal(err)
	}
	dial := func(ctx context.Context, _, _ string) (net.Conn, error) { return ep.Tunnel.DialGateway(ctx) }
	benchFiles(b, se.deployEnv, srv.URL, agent, func(ctx context.Context) (*gwtest.Native, error) {
		return gwtest.DialNative(ctx, ep.URL, gwtest.NativeOptions{Token: string(token), Dial: dial})
	})
}

// benchFiles measures OCC's GET and PUT of SOUL.md through the API at
// srvURL against dialNative's direct native call, at concurrency 1 and 16:
// first both with a fresh connection per operation, then ("pool/...")
// OCC with its pooled connection against the native call on one open
// connection (shared by the goroutines one call at a time, as the bare
// native client cannot match answers to concurrent requests).
func benchFiles(b *testing.B, le *deployEnv, srvURL, agent string, dialNative func(context.Context) (*gwtest.Native, error)) {
	url := srvURL + "/namespaces/" + le.ns + "/agents/" + agent + "/workspace/files/SOUL.md"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 64}}

	occOp := func(put bool) error {
		var req *http.Request
		if put {
			req, _ = http.NewRequest("PUT", url, strings.NewReader(`{"content":"bench soul"}`))
			req.Header.Set("Content-Type", "application/json")
			req.Header.Set("Origin", testOrigin)
		} else {
			req, _ = http.NewRequest("GET", url, nil)
		}
		req.AddCookie(le.admin.cookie)
		resp, err := client.Do(req)
		if err != nil {
			return err
		}
		defer resp.Body.Close()
		// Read the reply as a client does (the direct side reads the
		// file too): a body closed unread makes the transport drop the
		// connection, and every operation then paid a new TCP connection
		// to OCC on top of the gateway's.
		if _, err := io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20)); err != nil {
			return err
		}
		if resp.StatusCode != 200 {
			return fmt.Errorf("status %d", resp.StatusCode)
		}
		return nil
	}
	directOp := func(put bool) error {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		n, err := dialNative(ctx)
		if err != nil {
			return err
		}
		defer n.Close()
		if put {
			_, err = n.SetFile(ctx, "SOUL.md", "bench soul")
		} else {
			_, err = n.GetFile(ctx, "SOUL.md")
		}
		return err
	}
	if err := occOp(true); err != nil {
		b.Fatalf("warm-up PUT: %v", err)
	}
	runSides(b, "", occOp, directOp)

	var mu sync.Mutex
	var open *gwtest.Native
	defer func() {
		if open != nil {
			open.Close()
		}
	}()
	directOpen := func(put bool) error {
		mu.Lock()
		defer mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if open == nil {
			n, err := dialNative(ctx)
			if err != nil {
				return err
			}
			open = n
		}
		var err error
		if put {
			_, err = open.SetFile(ctx, "SOUL.md", "bench soul")
		} else {
			_, err = open.GetFile(ctx, "SOUL.md")
		}
		if err != nil {
			open.Close()
			open = nil
		}
		return err
	}
	defer le.files.mode.Store(filesPlain)
	// pool/: serialized (MaxInFlight 1); poolmux/: up to 16 operations
	// multiplexed by request id on the one connection (the default).
	for _, m := range []struct {
		prefix string
		mode   int32
	}{{"pool/", filesPooled}, {"poolmux/", filesMuxed}} {
		le.files.mode.Store(m.mode)
		if err := occOp(true); err != nil {
			b.Fatalf("warm-up %sPUT: %v", m.prefix, err)
		}
		runSides(b, m.prefix, occOp, directOpen)
	}
}

// runSides runs the get and put sub-benchmarks at concurrency 1 and 16,
// both sides in interleaved rounds.
func runSides(b *testing.B, prefix string, occOp, directOp func(put bool) error) {
	for _, conc := range []int{1, 16} {
		for _, put := range []bool{false, true} {
			name := fmt.Sprintf("%sget/conc=%d", prefix, conc)
			if put {
				name = fmt.Sprintf("%sput/conc=%d", prefix, conc)
			}
			b.Run(name, func(b *testing.B) {
				// Both sides in interleaved rounds (the order alternating),
				// so that a change in the machine's load during the run
				// falls on both alike.
				var occ, direct []float64
				var occWall, directWall time.Duration
				per := max(1, b.N/benchRounds)
				for round := range benchRounds {
					sides := []func(){
						func() {
							o, w := measure(b, conc, per, func() error { return occOp(put) })
							occ, occWall = append(occ, o...), occWall+w
						},
						func() {
							d, w := measure(b, conc, per, func() error { return directOp(put) })
							direct, directWall = append(direct, d...), directWall+w
						},
					}
					if round%2 == 1 {
						sides[0], sides[1] = sides[1], sides[0]
					}
					for _, side := range sides {
						side()
					}
				}
				slices.Sort(occ)
				slices.Sort(direct)
				occRate, directRate := float64(len(occ))/occWall.Seconds(), float64(len(direct))/directWall.Seconds()
				b.ReportMetric(pct(occ, 50), "occ-p50-ms")
				b.ReportMetric(pct(occ, 99), "occ-p99-ms")
				b.ReportMetric(pct(direct, 50), "direct-p50-ms")
				b.ReportMetric(pct(direct, 99), "direct-p99-ms")
				b.ReportMetric(pct(occ, 50)/pct(direct, 50), "p50-ratio")
				b.ReportMetric(pct(occ, 99)/pct(direct, 99), "p99-ratio")
				b.ReportMetric(occRate, "occ-ops/s")
				b.ReportMetric(directRate, "direct-ops/s")
				b.ReportMetric(occRate/directRate, "throughput-ratio")
			})
		}
	}
}

// benchRounds is how many interleaved rounds each side's b.N operations
// are split into.
const benchRounds = 5

// measure runs n operations on conc goroutines and returns each one's
// latency in milliseconds, sorted, and the wall time of the whole batch.
func measure(b *testing.B, conc, n int, op func() error) ([]float64, time.Duration) {
	b.Helper()
	var mu sync.Mutex
	lat := make([]float64, 0, n)
	var wg sync.WaitGroup
	next := make(chan struct{}, n)
	for range n {
		next <- struct{}{}
	}
	close(next)
	var failed error
	begin := time.Now()
	for range conc {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range next {
				start := time.Now()
				err := op()
				d := float64(time.Since(start).Microseconds()) / 1000
				mu.Lock()
				if err != nil && failed == nil {
					failed = err
				}
				lat = append(lat, d)
				mu.Unlock()
			}
		}()
	}
	wg.Wait()
	wall := time.Since(begin)
	if failed != nil {
		b.Fatalf("operation failed: %v", failed)
	}
	slices.Sort(lat)
	return lat, wall
}

func pct(sorted []float64, p int) float64 {
	if len(sorted) == 0 {
		return 0
	}
	i := (len(sorted)*p + 99) / 100
	return sorted[max(0, min(i-1, len(sorted)-1))]
}

func revisionFor(b testing.TB, le *deployEnv, agent string) compute.Revision {
	b.Helper()
	var a struct {
		ActiveRevisionID string `json:"activeRevisionId"`
	}
	le.must("GET", "/namespaces/"+le.ns+"/agents/"+agent, nil, le.admin, 200, &a)
	return compute.Revision{ID: a.ActiveRevisionID, NamespaceID: le.ns, AgentID: agent}
}

// BenchmarkWorkspaceFilePhases shows where a file PUT's time goes inside
// OCC: b.N PUTs at concurrency 1 through the server on the local driver's
// gateway, traced, and for each step the median time from the request's
// start (the server span's) at which it ended, in µs, from the spans of
// the request: the session lookup, the domain call's start, the gateway
// call's start, the write-ahead audit record's commit, the gateway's
// answer, the outcome record's start and commit, the server's reply, and
// the client's whole round trip. Tracing adds its own cost to every
// step (recording a span); compare the steps with one another, and the
// figures of BenchmarkWorkspaceFiles for the totals. It runs with the
// package's trace pipeline and turns it off when done.
//
//	go test ./internal/server -run '^$' -bench WorkspaceFilePhases -benchtime 300x
func BenchmarkWorkspaceFilePhases(b *testing.B) { benchFilePhases(b, nil) }

// BenchmarkWorkspaceFilePhasesPostgres is BenchmarkWorkspaceFilePhases with
// OCC on PostgreSQL (OCC_TEST_POSTGRES_URL).
//
//	go test ./internal/server -run '^$' -bench WorkspaceFilePhasesPostgres -benchtime 300x
func BenchmarkWorkspaceFilePhasesPostgres(b *testing.B) { benchFilePhases(b, testdb.Postgres(b)) }

// benchFilePhases is BenchmarkWorkspaceFilePhases over st (nil: SQLite).
func benchFilePhases(b *testing.B, st *sqlstore.Store) {
	exp, _ := testTraces()
	tracesOff.Store(false) // a phases benchmark before this one turned it off
	b.Cleanup(func() { tracesOff.Store(true) })
	le := newLocalEnvOn(b, st, nil, true)
	agent := le.createAgent("phases", nil)
	le.deployed(agent)
	srv := httpTestServer(b, le.srv.Handler())
	url := srv.URL + "/namespaces/" + le.ns + "/agents/" + agent + "/workspace/files/SOUL.md"
	client := &http.Client{Transport: &http.Transport{MaxIdleConnsPerHost: 4}}
	put := func() {
		req, _ := http.NewRequest("PUT", url, strings.NewReader(`{"content":"phases soul"}`))
		req.Header.Set("Content-Type", "application/json")
		req.Header.Set("Origin", testOrigin)
		req.AddCookie(le.admin.cookie)
		resp, err := client.Do(req)
		if err != nil {
			b.Fatal(err)
		}
		_, _ = io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
		resp.Body.Close()
		if resp.StatusCode != 200 {
			b.Fatalf("PUT: status %d", resp.StatusCode)
		}
	}
	put() // warm-up, not counted
	exp.Reset()
	var round []float64
	for b.Loop() {
		start := time.Now()
		put()
		round = append(round, float64(time.Since(start).Microseconds()))
	}
	b.StopTimer()
	steps := putPhases(b, exp.GetSpans())
	for _, st := range steps {
		b.ReportMetric(st.median, st.name+"-µs")
	}
	slices.Sort(round)
	b.ReportMetric(pct(round, 50), "client-round-trip-µs")
}

// appendsOnKnownHead reports whether s is the store's one-statement audit
// append (it moves audit_chain), not another WITH query.
func appendsOnKnownHead(s tracetest.SpanStub) bool {
	for _, a := range s.Attributes {
		if a.Key == "db.query.text" {
			return strings.Contains(a.Value.AsString(), "UPDATE audit_chain")
		}
	}
	return false
}

type phase struct {
	name   string
	median float64
}

// putPhases groups spans by trace and returns, for each step of a PUT,
// the median of its end (or start) in µs after its trace's server span
// started. A trace without every step fails the benchmark.
func putPhases(b *testing.B, spans tracetest.SpanStubs) []phase {
	b.Helper()
	byTrace := map[trace.TraceID][]tracetest.SpanStub{}
	for _, s := range spans {
		byTrace[s.SpanContext.TraceID()] = append(byTrace[s.SpanContext.TraceID()], s)
	}
	names := []string{"session-read", "domain-start", "gateway-start", "write-ahead-committed", "gateway-answer",
		"outcome-start", "outcome-committed", "reply"}
	at := map[string][]float64{}
	for _, ss := range byTrace {
		slices.SortFunc(ss, func(x, y tracetest.SpanStub) int { return x.StartTime.Compare(y.StartTime) })
		var root *tracetest.SpanStub
		var db []tracetest.SpanStub
		// The two audit records, each a transaction (db.begin to
		// db.commit) or, on PostgreSQL on a known chain head, one
		// statement (db.with).
		var records [][2]time.Time
		var begun time.Time
		got := map[string]time.Time{}
		for i, s := range ss {
			switch {
			case !s.Parent.IsValid():
				root = &ss[i]
			case s.Name == "occ.PutWorkspaceFile":
				got["domain-start"] = s.StartTime
			case s.Name == "agentgw.set":
				got["gateway-start"], got["gateway-answer"] = s.StartTime, s.EndTime
			case s.Name == "db.begin":
				begun = s.StartTime
			case s.Name == "db.commit":
				records = append(records, [2]time.Time{begun, s.EndTime})
			case s.Name == "db.with" && appendsOnKnownHead(s):
				records = append(records, [2]time.Time{s.StartTime, s.EndTime})
			case strings.HasPrefix(s.Name, "db."):
				db = append(db, s)
			}
		}
		if root == nil || len(db) == 0 || len(records) != 2 {
			names := make([]string, len(ss))
			for i, s := range ss {
				names[i] = s.Name
			}
			b.Fatalf("a PUT's trace has the spans %q, not the steps expected (2 audit records)", names)
		}
		got["session-read"] = db[0].EndTime
		got["write-ahead-committed"], got["outcome-start"], got["outcome-committed"] = records[0][1], records[1][0], records[1][1]
		got["reply"] = root.EndTime
		for _, n := range names {
			t, ok := got[n]
			if !ok {
				b.Fatalf("a PUT's trace has no %s", n)
			}
			at[n] = append(at[n], float64(t.Sub(root.StartTime).Microseconds()))
		}
	}
	out := make([]phase, 0, len(names))
	for _, n := range names {
		v := at[n]
		slices.Sort(v)
		out = append(out, phase{n, pct(v, 50)})
	}
	return out
}
