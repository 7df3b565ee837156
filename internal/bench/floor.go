package bench

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/http"
	"time"

	"github.com/openclaw/occ/internal/authn"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
)

// floorEnv is the store floor of one engine: a bare net/http server on a
// loopback listener whose handlers make exactly the store calls that an
// API row's request makes (the session lookup, then the operation's
// read), on the same seeded store and pool, and write a 16-byte reply.
// Its requests take turns as the API server's do (the same number,
// server.DefaultMaxRequestsInFlight, a turn ending before the reply).
// No OCC handler, authentication, authorization or JSON encoding runs,
// so an API row against its floor row is what OCC adds to its database
// reads, and the floor row against the baseline rows is what the reads
// themselves cost at this concurrency on this machine. On PostgreSQL the
// database server's CPU is on the same two cores as the bench, and its
// share shows in the floor rows' latency but not in their CPU/op.
type floorEnv struct {
	base   string
	client *http.Client
	close  func()
}

// openFloorEnv serves the floor's operations, one route per API row, each
// answering 500 if a store call fails (so a floor row never measures an
// error), and "/select1", two `SELECT 1` statements on the same pool: the
// round-trip floor, what two statements cost whatever they read.
func openFloorEnv(st *sqlstore.Store, tokenHash []byte, bigNS string, middle *store.PageCursor, turns int) (*floorEnv, error) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, err
	}
	mux := http.NewServeMux()
	// A Go channel serves its waiting senders in arrival order, as the
	// API server's turns do.
	slots := make(chan struct{}, max(1, turns))
	handle := func(pattern string, read func(ctx context.Context, r *http.Request) error) {
		mux.HandleFunc(pattern, func(w http.ResponseWriter, r *http.Request) {
			ctx := r.Context()
			slots <- struct{}{}
			ctx = sqlstore.WithReadScope(ctx) // as the API server's requests
			_, _, err := st.GetSessionAccess(ctx, tokenHash)
			if err != nil {
				err = fmt.Errorf("session: %w", err)
			} else {
				err = read(ctx, r)
			}
			<-slots
			if err != nil {
				http.Error(w, err.Error(), http.StatusInternalServerError)
				return
			}
			w.Write([]byte(`{"x":"floor000"}`))
		})
	}
	handle("GET /agents/{id}", func(ctx context.Context, r *http.Request) error {
		_, err := st.GetAgent(ctx, bigNS, r.PathValue("id"))
		return err
	})
	handle("GET /agents", func(ctx context.Context, r *http.Request) error {
		p := store.PageRequest{Limit: 100}
		if r.URL.Query().Get("middle") != "" {
			p.After = middle
		}
		pg, err := st.ListAgents(ctx, bigNS, p)
		if err == nil && len(pg.Items) != 100 {
			err = fmt.Errorf("page of %d Agents, want 100", len(pg.Items))
		}
		return err
	})
	handle("GET /namespaces", func(ctx context.Context, r *http.Request) error {
		_, err := st.ListNamespaces(ctx, store.PageRequest{Limit: 100})
		return err
	})
	handle("GET /audit-events", func(ctx context.Context, r *http.Request) error {
		// 51: the Service asks for one more than the page's 50, to know
		// whether there is a next page.
		_, err := st.ListAuditEvents(ctx, store.AuditFilter{}, nil, 51)
		return err
	})
	mux.HandleFunc("GET /select1", func(w http.ResponseWriter, r *http.Request) {
		slots <- struct{}{}
		var err error
		for i := 0; i < 2 && err == nil; i++ {
			var one int
			err = st.DB().QueryRowContext(r.Context(), "SELECT 1").Scan(&one)
		}
		<-slots
		if err != nil {
			http.Error(w, err.Error(), http.StatusInternalServerError)
			return
		}
		w.Write([]byte(`{"x":"floor000"}`))
	})
	hs := &http.Server{ReadHeaderTimeout: 10 * time.Second, Handler: mux}
	go hs.Serve(ln)
	return &floorEnv{base: "http://" + ln.Addr().String(), client: newClient(), close: func() {
		sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		hs.Shutdown(sctx)
	}}, nil
}

// floorScenarios are the floor rows, named and ordered as the API rows
// they stand under, then the round-trip floor.
func (f *floorEnv) floorScenarios(agents []string) []scenario {
	get := func(path string) func(ctx context.Context, _ int) (int, error) {
		return func(ctx context.Context, _ int) (int, error) { return getDrained(ctx, f.client, f.base+path, nil) }
	}
	return []scenario{
		{name: "store floor: GET one Agent", op: func(ctx context.Context, i int) (int, error) {
			return getDrained(ctx, f.client, f.base+"/agents/"+agents[(i*7919)%len(agents)], nil)
		}},
		{name: "store floor: GET Agent list, first page (100)", op: get("/agents")},
		{name: "store floor: GET Agent list, middle page (100)", op: get("/agents?middle=1")},
		{name: "store floor: GET Namespace list (100)", op: get("/namespaces")},
		{name: "store floor: GET audit page (50)", op: get("/audit-events")},
		{name: "store floor: two SELECT 1 statements", op: get("/select1")},
	}
}

// middleCursor is the store cursor after the first half of the big
// Namespace's Agents: the same page as the API's middle-page row.
func middleCursor(ctx context.Context, st *sqlstore.Store, bigNS string, n int) (*store.PageCursor, error) {
	var after *store.PageCursor
	for range n / 200 {
		pg, err := st.ListAgents(ctx, bigNS, store.PageRequest{After: after, Limit: 100})
		if err != nil {
			return nil, err
		}
		after = pg.Next
	}
	return after, nil
}

// floorRows measures the store floor rows of e's engine with lim.
func (e *apiEnv) floorRows(ctx context.Context, lim Limits) ([]Result, error) {
	hash, ok := authn.SessionTokenHash(e.cookie.Value)
	if !ok {
		return nil, errors.New("the session cookie does not hold a well-formed token")
	}
	mid, err := middleCursor(ctx, e.st, e.bigNS, len(e.agents))
	if err != nil {
		return nil, err
	}
	f, err := openFloorEnv(e.st, hash, e.bigNS, mid, e.turns)
	if err != nil {
		return nil, err
	}
	defer f.close()
	var out []Result
	for _, sc := range f.floorScenarios(e.agents) {
		r, err := e.measure(ctx, sc, lim)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, nil
}
