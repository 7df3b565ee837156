package bench

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"runtime/pprof"
	"strings"
	"time"

	"github.com/openclaw/occ/internal/config"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/occ"
	"github.com/openclaw/occ/internal/server"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
)

// Scale is what the API benchmark seeds.
type Scale struct {
	Namespaces  int // in all, including the big one
	Agents      int // in the big Namespace
	AuditEvents int
}

// DefaultScale is issue 15's: 10,000 Agents in one Namespace, 1,000
// Namespaces.
var DefaultScale = Scale{Namespaces: 1000, Agents: 10_000, AuditEvents: 10_000}

const (
	benchOrigin   = "http://127.0.0.1"
	benchEmail    = "admin@bench.example"
	benchPassword = "bench-password-not-secret-0123456789"
)

// apiEnv is one engine's seeded store behind a loopback listener.
type apiEnv struct {
	engine  string
	st      *sqlstore.Store // for the store floor rows (floor.go)
	turns   int             // the server's --max-requests-in-flight
	base    string
	cookie  *http.Cookie
	client  *http.Client
	bigNS   string
	agents  []string
	close   func()
	seedDur time.Duration
}

// openAPIEnv opens the store (databaseURL "" is SQLite in dir), migrates
// it, seeds sc through the unwrapped store, bootstraps an administrator
// and signs it in over HTTP. readCacheItems sizes the read cache
// (negative: occ server's default).
func openAPIEnv(ctx context.Context, engine, databaseURL, dir string, sc Scale, readCacheItems int) (*apiEnv, error) {
	st, err := sqlstore.Open(ctx, databaseURL, dir)
	if err != nil {
		return nil, err
	}
	// The pool and read cache as occ server runs them
	// (--database-max-connections, --database-read-cache-items).
	st.SetMaxConnections(config.DefaultDatabaseMaxConnections)
	if readCacheItems < 0 {
		readCacheItems = config.DefaultDatabaseReadCacheItems
	}
	st.SetReadCacheItems(readCacheItems)
	cleanup := []func(){func() { st.Close() }}
	fail := func(err error) (*apiEnv, error) {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
		return nil, err
	}
	// Migrating and seeding are labelled, so that a CPU profile of the
	// measurements can leave them out: go tool pprof -tagignore phase=seed.
	// (Only this goroutine's work: the server's goroutines, started below,
	// carry no label.)
	var bigNS string
	var agents []string
	start := time.Now()
	pprof.Do(ctx, pprof.Labels("phase", "seed"), func(ctx context.Context) {
		if err = st.Migrate(ctx); err != nil {
			return
		}
		bigNS, agents, err = seed(ctx, st, sc)
	})
	if err != nil {
		return fail(fmt.Errorf("seed: %w", err))
	}
	seedDur := time.Since(start)
	// The seed leaves about 39 MB in SQLite's WAL, which the background
	// checkpoints would copy while the first row is measured (in the same
	// process: its CPU/op was 10-15 % higher): copy it now, and collect the
	// seed's garbage, so that every row starts from a settled store.
	if err := st.Checkpoint(ctx); err != nil {
		return fail(fmt.Errorf("checkpoint after seeding: %w", err))
	}
	runtime.GC()

	// The request turns as occ server sets them by default
	// (--max-requests-in-flight).
	turns := server.DefaultMaxRequestsInFlight(st.Engine(), st.OnThisHost(), config.DefaultDatabaseMaxConnections)
	srv := server.New(server.Options{Store: st, PublicOrigin: benchOrigin, MaxRequestsInFlight: turns})
	pw := filepath.Join(dir, "bootstrap-password")
	if err := os.WriteFile(pw, []byte(benchPassword+"\n"), 0o600); err != nil {
		return fail(err)
	}
	if _, err := srv.Service.Bootstrap(ctx, occ.BootstrapInput{AdminEmail: benchEmail, PasswordFile: pw, Out: io.Discard}); err != nil {
		return fail(fmt.Errorf("bootstrap: %w", err))
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return fail(err)
	}
	hs := &http.Server{Handler: srv.Handler(), ReadHeaderTimeout: 10 * time.Second}
	go hs.Serve(ln)
	cleanup = append(cleanup, func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	})
	e := &apiEnv{
		engine: engine, st: st, turns: turns, base: "http://" + ln.Addr().String(), bigNS: bigNS, agents: agents, seedDur: seedDur,
		client: newClient(),
	}
	e.close = func() {
		for i := len(cleanup) - 1; i >= 0; i-- {
			cleanup[i]()
		}
	}
	if e.cookie, err = signIn(ctx, e.client, e.base, benchOrigin); err != nil {
		e.close()
		return nil, err
	}
	return e, nil
}

// measure measures sc on e's engine; with a read cache (the default), the
// row's note gives the share of its cached reads, warm-up included, that
// were served from the cache.
func (e *apiEnv) measure(ctx context.Context, sc scenario, lim Limits) (Result, error) {
	before, cached := e.st.ReadCacheStats()
	r, err := measure(ctx, e.engine, sc, lim)
	if after, _ := e.st.ReadCacheStats(); err == nil && cached {
		hits, misses := after.Hits-before.Hits, after.Misses-before.Misses
		if hits+misses > 0 {
			note := fmt.Sprintf("read cache %.1f%% hits", 100*float64(hits)/float64(hits+misses))
			r.Note = strings.TrimPrefix(r.Note+"; "+note, "; ")
		}
	}
	return r, err
}

// signIn signs the bench administrator in and returns its session cookie.
func signIn(ctx context.Context, c *http.Client, base, origin string) (*http.Cookie, error) {
	body := fmt.Sprintf(`{"email":%q,"password":%q}`, benchEmail, benchPassword)
	req, err := http.NewRequestWithContext(ctx, "POST", base+"/api/auth/sign-in/email", strings.NewReader(body))
	if err != nil {
		return nil, err
	}
	req.Header.Set("Content-Type", "application/json")
	req.Header.Set("Origin", origin)
	resp, err := c.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	io.Copy(io.Discard, io.LimitReader(resp.Body, 1<<20))
	if resp.StatusCode != 200 {
		return nil, fmt.Errorf("sign-in: status %d", resp.StatusCode)
	}
	for _, ck := range resp.Cookies() {
		if strings.Contains(ck.Name, "occ_session") {
			return ck, nil
		}
	}
	return nil, fmt.Errorf("sign-in: no session cookie")
}

// seed writes sc's rows through the unwrapped store, in transactions of
// 1,000, and returns the big Namespace and its Agents' ids.
func seed(ctx context.Context, st *sqlstore.Store, sc Scale) (string, []string, error) {
	base := time.Now().UTC().Add(-24 * time.Hour)
	at := func(i int) time.Time { return base.Add(time.Duration(i) * time.Millisecond) }
	big := store.Namespace{ID: ids.New(ids.Namespace), Name: "big", Status: store.NamespaceReady, CreatedAt: at(0), UpdatedAt: at(0)}
	cfg := store.Configuration{ID: ids.New(ids.Configuration), NamespaceID: big.ID, Name: "base", Kind: store.ConfigurationKindAgent,
		Document: json.RawMessage(`{}`), Generation: 1, CreatedAt: at(0), UpdatedAt: at(0)}
	if err := st.CreateNamespace(ctx, big); err != nil {
		return "", nil, err
	}
	if err := st.CreateConfiguration(ctx, cfg); err != nil {
		return "", nil, err
	}
	batches := func(n int, fn func(tx store.Store, i int) error) error {
		for start := 0; start < n; start += 1000 {
			err := st.InTx(ctx, func(tx store.Store) error {
				for i := start; i < min(n, start+1000); i++ {
					if err := fn(tx, i); err != nil {
						return err
					}
				}
				return nil
			})
			if err != nil {
				return err
			}
		}
		return nil
	}
	err := batches(sc.Namespaces-1, func(tx store.Store, i int) error {
		return tx.CreateNamespace(ctx, store.Namespace{ID: ids.New(ids.Namespace), Name: fmt.Sprintf("ns-%d", i),
			Status: store.NamespaceReady, CreatedAt: at(i + 1), UpdatedAt: at(i + 1)})
	})
	if err != nil {
		return "", nil, err
	}
	agents := make([]string, sc.Agents)
	err = batches(sc.Agents, func(tx store.Store, i int) error {
		agents[i] = ids.New(ids.Agent)
		return tx.CreateAgent(ctx, store.Agent{ID: agents[i], NamespaceID: big.ID, Name: fmt.Sprintf("agent-%d", i),
			ConfigurationID: cfg.ID, Status: store.AgentActive, DesiredRuntimeState: store.RuntimeStopped,
			CreatedAt: at(i), UpdatedAt: at(i)}, nil)
	})
	if err != nil {
		return "", nil, err
	}
	err = batches(sc.AuditEvents, func(tx store.Store, i int) error {
		return tx.AppendAuditEvent(ctx, store.AuditEvent{ID: ids.New(ids.Audit), OccurredAt: at(i), Kind: store.AuditMutation,
			ActorID: "usr_bench", Action: "openclaw.agents.create", Outcome: store.OutcomeSuccess,
			Resource: store.AuditResource{Kind: store.KindAgent, ID: agents[i%len(agents)], NamespaceID: big.ID}})
	})
	if err != nil {
		return "", nil, err
	}
	return big.ID, agents, nil
}

// newClient is the bench's HTTP client: keep-alive connections, enough
// for every concurrent client to keep its own.
func newClient() *http.Client {
	return &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{MaxIdleConnsPerHost: 64, MaxConnsPerHost: 64}}
}

// get sends one authenticated GET and drains the reply; anything but 200
// is an error.
func (e *apiEnv) get(ctx context.Context, path string) (int, error) {
	return getDrained(ctx, e.client, e.base+path, e.cookie)
}

// getDrained sends one GET, with cookie unless it is nil, and drains the
// reply (at most 64 MiB); anything but 200 is an error. The API rows and
// the baseline rows (baseline.go) both measure it, so that they differ only
// in the server.
func getDrained(ctx context.Context, c *http.Client, url string, cookie *http.Cookie) (int, error) {
	req, err := http.NewRequestWithContext(ctx, "GET", url, nil)
	if err != nil {
		return 0, err
	}
	if cookie != nil {
		req.AddCookie(cookie)
	}
	resp, err := c.Do(req)
	if err != nil {
		return 0, err
	}
	defer resp.Body.Close()
	n, _ := io.Copy(io.Discard, io.LimitReader(resp.Body, 64<<20))
	if resp.StatusCode != 200 {
		return int(n), fmt.Errorf("GET %s: status %d", req.URL.Path, resp.StatusCode)
	}
	return int(n), nil
}

// apiScenarios are the measured requests, each a function of the
// request's sequence number so that GET one Agent spreads over all of
// them.
func (e *apiEnv) apiScenarios(ctx context.Context) ([]scenario, error) {
	// A cursor from the middle of the list: a later page costs what the
	// first does only when the keyset index is used.
	var mid struct {
		Data struct {
			NextCursor string `json:"nextCursor"`
		} `json:"data"`
	}
	path := "/namespaces/" + e.bigNS + "/agents?limit=100"
	cursor := ""
	for range len(e.agents) / 200 {
		p := path
		if cursor != "" {
			p += "&cursor=" + cursor
		}
		req, _ := http.NewRequestWithContext(ctx, "GET", e.base+p, nil)
		req.AddCookie(e.cookie)
		resp, err := e.client.Do(req)
		if err != nil {
			return nil, err
		}
		err = json.NewDecoder(io.LimitReader(resp.Body, 64<<20)).Decode(&mid)
		resp.Body.Close()
		if err != nil {
			return nil, err
		}
		cursor = mid.Data.NextCursor
	}
	r := rand.New(rand.NewPCG(1, 2))
	picks := make([]string, 4096)
	for i := range picks {
		picks[i] = e.agents[r.IntN(len(e.agents))]
	}
	ns := "/namespaces/" + e.bigNS
	return []scenario{
		{name: "GET one Agent", op: func(ctx context.Context, i int) (int, error) {
			return e.get(ctx, ns+"/agents/"+picks[i%len(picks)])
		}},
		{name: "GET Agent list, first page (100)", op: func(ctx context.Context, _ int) (int, error) { return e.get(ctx, ns+"/agents") }},
		{name: "GET Agent list, middle page (100)", op: func(ctx context.Context, _ int) (int, error) {
			return e.get(ctx, ns+"/agents?cursor="+cursor)
		}},
		{name: "GET Namespace list (100)", op: func(ctx context.Context, _ int) (int, error) { return e.get(ctx, "/namespaces") }},
		{name: "GET audit page (50)", op: func(ctx context.Context, _ int) (int, error) { return e.get(ctx, "/audit-events") }},
	}, nil
}
