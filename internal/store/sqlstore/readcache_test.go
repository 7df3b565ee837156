package sqlstore_test

import (
	"encoding/json"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// readCacheWorld is a PostgreSQL database with two stores on it, as two
// OCC processes: the one under test, whose read cache is warmed, and the
// other, which writes behind its back.
type readCacheWorld struct {
	s, other *sqlstore.Store
	ns       store.Namespace
	agent    store.Agent
	user     store.User
	binding  store.AccessBinding
	token    []byte
	key      store.APIKey
}

func newReadCacheWorld(t *testing.T, engine string) readCacheWorld {
	t.Helper()
	ctx := testCtx(t)
	var s, other *sqlstore.Store
	var err error
	switch engine {
	case sqlstore.EnginePostgres:
		var url string
		s, url = testdb.PostgresURL(t)
		other, err = sqlstore.Open(ctx, url, "")
	default:
		dir := t.TempDir()
		if s, err = sqlstore.Open(ctx, "", dir); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = s.Close() })
		if err := s.Migrate(ctx); err != nil {
			t.Fatal(err)
		}
		other, err = sqlstore.Open(ctx, "", dir) // the same file
	}
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = other.Close() })
	now := time.Date(2026, 12, 5, 7, 0, 0, 0, time.UTC)
	w := readCacheWorld{s: s, other: other,
		ns:   store.Namespace{ID: ids.New(ids.Namespace), Name: "cache", Status: store.NamespaceReady, CreatedAt: now, UpdatedAt: now},
		user: store.User{ID: ids.New(ids.User), Email: "cache@example.com", PasswordHash: "x", CreatedAt: now},
	}
	c := store.Configuration{ID: ids.New(ids.Configuration), NamespaceID: w.ns.ID, Name: "c", Kind: store.ConfigurationKindAgent,
		Document: json.RawMessage(`{}`), Generation: 1, CreatedAt: now, UpdatedAt: now}
	w.agent = store.Agent{ID: ids.New(ids.Agent), NamespaceID: w.ns.ID, Name: "before", ConfigurationID: c.ID,
		Status: store.AgentActive, DesiredRuntimeState: store.RuntimeRunning, CreatedAt: now, UpdatedAt: now}
	role := store.Role{ID: ids.New(ids.Role), Name: "reader", CreatedAt: now,
		Permissions: []store.Permission{{Action: store.ActionRead, ResourceKind: store.KindAgent}}}
	w.binding = store.AccessBinding{ID: ids.New(ids.Binding), SubjectID: w.user.ID, RoleID: role.ID, CreatedAt: now}
	w.token = []byte(strings.Repeat("t", 32))
	sp := store.ServicePrincipal{ID: ids.New(ids.ServicePrincipal), Name: "robot", CreatedAt: now}
	w.key = store.APIKey{ID: ids.New(ids.APIKey), ServicePrincipalID: sp.ID, Name: "k", SecretHash: make([]byte, 32),
		CreatedBy: w.user.ID, ExpiresAt: now.Add(24 * time.Hour), CreatedAt: now}
	for _, err := range []error{
		s.CreateNamespace(ctx, w.ns), s.CreateConfiguration(ctx, c), s.CreateAgent(ctx, w.agent, nil),
		s.CreateUser(ctx, w.user), s.CreateRole(ctx, role), s.CreateAccessBinding(ctx, w.binding),
		s.CreateSession(ctx, store.Session{ID: ids.New(ids.Session), TokenHash: w.token, UserID: w.user.ID,
			ExpiresAt: now.Add(24 * time.Hour), CreatedAt: now, LastUsedAt: now}),
		s.CreateServicePrincipal(ctx, sp), s.CreateAPIKey(ctx, w.key),
		s.AppendAuditEvent(ctx, store.AuditEvent{ID: ids.New(ids.Audit), OccurredAt: now, Kind: store.AuditMutation,
			ActorID: w.user.ID, Credential: "session", Action: "agents.create", Outcome: store.OutcomeSuccess,
			Resource: store.AuditResource{Kind: store.KindAgent, ID: w.agent.ID, NamespaceID: w.ns.ID}}),
	} {
		if err != nil {
			t.Fatal(err)
		}
	}
	return w
}

// warm reads until a read is served from the cache: a PostgreSQL server
// is shared with other tests, whose commits change the snapshot, so the
// first read after a miss may miss again. Bounded: 200 reads.
func warm(t *testing.T, s *sqlstore.Store, what string, read func() error) {
	t.Helper()
	for range 200 {
		before, _ := s.ReadCacheStats()
		if err := read(); err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if after, _ := s.ReadCacheStats(); after.Hits > before.Hits {
			return
		}
	}
	t.Fatalf("%s: 200 reads, none served from the read cache", what)
}

// TestReadCacheSeesOtherProcessesWrites: every cached read, once served
// from the cache, sees a write committed by another process (another
// store on the same database) on the very next read, with no wait.
func TestReadCacheSeesOtherProcessesWrites(t *testing.T) {
	ctx := testCtx(t)
	tests := []struct {
		name  string
		read  func(w readCacheWorld, s *sqlstore.Store) (any, error)
		write func(w readCacheWorld) error
	}{
		{"GetAgent after a rename",
			func(w readCacheWorld, s *sqlstore.Store) (any, error) {
				a, err := s.GetAgent(ctx, w.ns.ID, w.agent.ID)
				return a.Name, err
			},
			func(w readCacheWorld) error {
				a := w.agent
				a.Name, a.UpdatedAt = "after", a.UpdatedAt.Add(time.Second)
				_, err := w.other.UpdateAgent(ctx, a)
				return err
			}},
		{"GetAgentFor after a rename",
			func(w readCacheWorld, s *sqlstore.Store) (any, error) {
				a, err := s.GetAgentFor(ctx, store.ActionOperate, w.ns.ID, w.agent.ID)
				return a.Agent.Name, err
			},
			func(w readCacheWorld) error {
				a := w.agent
				a.Name, a.UpdatedAt = "after", a.UpdatedAt.Add(time.Second)
				_, err := w.other.UpdateAgent(ctx, a)
				return err
			}},
		{"ListAgents after a create",
			func(w readCacheWorld, s *sqlstore.Store) (any, error) {
				p, err := s.ListAgents(ctx, w.ns.ID, store.PageRequest{Limit: 10})
				return len(p.Items), err
			},
			func(w readCacheWorld) error {
				a := w.agent
				a.ID, a.Name = ids.New(ids.Agent), "second"
				return w.other.CreateAgent(ctx, a, nil)
			}},
		{"ListNamespaces after a create",
			func(w readCacheWorld, s *sqlstore.Store) (any, error) {
				p, err := s.ListNamespaces(ctx, store.PageRequest{Limit: 10})
				return len(p.Items), err
			},
			func(w readCacheWorld) error {
				ns := w.ns
				ns.ID, ns.Name = ids.New(ids.Namespace), "second"
				return w.other.CreateNamespace(ctx, ns)
			}},
		{"ListAuditEvents after an append",
			func(w readCacheWorld, s *sqlstore.Store) (any, error) {
				events, err := s.ListAuditEvents(ctx, store.AuditFilter{}, nil, 10)
				return len(events), err
			},
			func(w readCacheWorld) error {
				return w.other.AppendAuditEvent(ctx, store.AuditEvent{ID: ids.New(ids.Audit), OccurredAt: w.ns.CreatedAt.Add(time.Minute),
					Kind: store.AuditMutation, ActorID: w.user.ID, Credential: "session", Action: "agents.delete",
					Outcome: store.OutcomeSuccess, Resource: store.AuditResource{Kind: store.KindAgent, ID: w.agent.ID, NamespaceID: w.ns.ID}})
			}},
		{"GetSessionAccess after a sign-out",
			func(w readCacheWorld, s *sqlstore.Store) (any, error) {
				_, _, err := s.GetSessionAccess(ctx, w.token)
				if errkind.Is(err, errkind.NotFound) {
					return "signed out", nil
				}
				return "signed in", err
			},
			func(w readCacheWorld) error { return w.other.DeleteSession(ctx, w.token) }},
		{"GetSessionAccess after a grant is removed",
			func(w readCacheWorld, s *sqlstore.Store) (any, error) {
				_, acc, err := s.GetSessionAccess(ctx, w.token)
				return len(acc.Grants), err
			},
			func(w readCacheWorld) error { return w.other.DeleteAccessBinding(ctx, w.binding.ID) }},
		{"GetAPIKeyAccess after a revocation",
			func(w readCacheWorld, s *sqlstore.Store) (any, error) {
				k, _, _, err := s.GetAPIKeyAccess(ctx, w.key.ID)
				return k.RevokedAt != nil, err
			},
			func(w readCacheWorld) error {
				return w.other.RevokeAPIKey(ctx, w.key.ID, w.key.CreatedAt.Add(time.Minute))
			}},
	}
	for _, engine := range readCacheEngines {
		for _, tt := range tests {
			t.Run(engine+"/"+tt.name, func(t *testing.T) {
				w := newReadCacheWorld(t, engine)
				var before any
				warm(t, w.s, tt.name, func() (err error) { before, err = tt.read(w, w.s); return err })
				if err := tt.write(w); err != nil {
					t.Fatalf("the other process's write: %v", err)
				}
				got, err := tt.read(w, w.s)
				if err != nil {
					t.Fatal(err)
				}
				want, err := tt.read(w, w.other) // the other process reads the database
				if err != nil {
					t.Fatal(err)
				}
				if got == before {
					t.Fatalf("after the other process's write the cached read still returns %v", got)
				}
				if diff := cmp.Diff(want, got); diff != "" {
					t.Errorf("read after the other process's write (-database +cached store):\n%s", diff)
				}
			})
		}
	}
}

// readCacheEngines: both engines have a read cache; SQLite's "other
// process" is a second store on the same file.
var readCacheEngines = []string{sqlstore.EngineSQLite, sqlstore.EnginePostgres}

// forReadCacheEngines runs fn once per engine, as a subtest.
func forReadCacheEngines(t *testing.T, fn func(t *testing.T, engine string)) {
	for _, engine := range readCacheEngines {
		t.Run(engine, func(t *testing.T) { fn(t, engine) })
	}
}

// TestReadCacheResultsAreCopies: a caller that changes what a cached read
// returned (the authorizing store filters pages in place) does not change
// what the next caller gets.
func TestReadCacheResultsAreCopies(t *testing.T) {
	forReadCacheEngines(t, func(t *testing.T, engine string) {
		ctx := testCtx(t)
		w := newReadCacheWorld(t, engine)
		rev, err := w.s.CreateRevision(ctx, store.Revision{ID: ids.New(ids.Revision), NamespaceID: w.ns.ID, AgentID: w.agent.ID,
			ConfigurationID: w.agent.ConfigurationID, ConfigurationKind: store.ConfigurationKindAgent, ConfigurationGeneration: 1,
			Configuration: json.RawMessage(`{"a":1}`), ComputeDriverID: "local", CreatedBy: w.user.ID, CreatedAt: w.ns.CreatedAt})
		if err != nil {
			t.Fatal(err)
		}
		if err := sqlstore.SetActiveRevisionForTest(ctx, w.s, w.ns.ID, w.agent.ID, rev.ID); err != nil {
			t.Fatal(err)
		}
		var page store.Page[store.Agent]
		warm(t, w.s, "ListAgents", func() (err error) {
			page, err = w.s.ListAgents(ctx, w.ns.ID, store.PageRequest{Limit: 10})
			return err
		})
		page.Items[0].Name = "changed by a caller"
		var acc store.Access
		warm(t, w.s, "GetSessionAccess", func() (err error) { _, acc, err = w.s.GetSessionAccess(ctx, w.token); return err })
		acc.Grants[0].Permissions[0].Action = store.ActionDelete
		var events []store.AuditEvent
		warm(t, w.s, "ListAuditEvents", func() (err error) {
			events, err = w.s.ListAuditEvents(ctx, store.AuditFilter{}, nil, 10)
			return err
		})
		events[0].Action = "changed"
		events[0].Details = map[string]string{"changed": "yes"}
		var scope store.AgentScope
		warm(t, w.s, "GetAgentFor", func() (err error) {
			scope, err = w.s.GetAgentFor(ctx, store.ActionRead, w.ns.ID, w.agent.ID)
			return err
		})
		scope.ActiveRevision.Configuration[2] = 'b'
		scope.ActiveRevision.ComputeDriverID = "changed"

		// Read again until served from the cache, then compare with the
		// database as the other process reads it.
		var (
			gotPage   store.Page[store.Agent]
			gotAcc    store.Access
			gotEvents []store.AuditEvent
		)
		warm(t, w.s, "ListAgents again", func() (err error) {
			gotPage, err = w.s.ListAgents(ctx, w.ns.ID, store.PageRequest{Limit: 10})
			return err
		})
		warm(t, w.s, "GetSessionAccess again", func() (err error) { _, gotAcc, err = w.s.GetSessionAccess(ctx, w.token); return err })
		warm(t, w.s, "ListAuditEvents again", func() (err error) {
			gotEvents, err = w.s.ListAuditEvents(ctx, store.AuditFilter{}, nil, 10)
			return err
		})
		var gotScope store.AgentScope
		warm(t, w.s, "GetAgentFor again", func() (err error) {
			gotScope, err = w.s.GetAgentFor(ctx, store.ActionRead, w.ns.ID, w.agent.ID)
			return err
		})
		wantPage, err1 := w.other.ListAgents(ctx, w.ns.ID, store.PageRequest{Limit: 10})
		_, wantAcc, err2 := w.other.GetSessionAccess(ctx, w.token)
		wantEvents, err3 := w.other.ListAuditEvents(ctx, store.AuditFilter{}, nil, 10)
		wantScope, err4 := w.other.GetAgentFor(ctx, store.ActionRead, w.ns.ID, w.agent.ID)
		for _, err := range []error{err1, err2, err3, err4} {
			if err != nil {
				t.Fatal(err)
			}
		}
		if diff := cmp.Diff(wantPage, gotPage); diff != "" {
			t.Errorf("ListAgents (-database +cached):\n%s", diff)
		}
		if diff := cmp.Diff(wantAcc, gotAcc); diff != "" {
			t.Errorf("GetSessionAccess (-database +cached):\n%s", diff)
		}
		if diff := cmp.Diff(wantEvents, gotEvents); diff != "" {
			t.Errorf("ListAuditEvents (-database +cached):\n%s", diff)
		}
		if diff := cmp.Diff(wantScope, gotScope); diff != "" {
			t.Errorf("GetAgentFor (-database +cached):\n%s", diff)
		}
	})
}

// TestReadCacheConcurrentReadersAndWriter: readers on the cached store
// and a writer on the other run at once; every read returns a name the
// Agent has had, and a reader that starts after the writer returned sees
// the last name (no read goes back in time). Bounded: 50 writes.
func TestReadCacheConcurrentReadersAndWriter(t *testing.T) {
	forReadCacheEngines(t, func(t *testing.T, engine string) {
		ctx := testCtx(t)
		w := newReadCacheWorld(t, engine)
		const writes = 50
		names := map[string]int{w.agent.Name: 0}
		for i := 1; i <= writes; i++ {
			names[nameAt(i)] = i
		}
		var mu sync.Mutex
		committed := 0 // the last write the writer saw return
		stop := make(chan struct{})
		var wg sync.WaitGroup
		errs := make(chan error, 4)
		for range 3 {
			wg.Go(func() {
				for {
					select {
					case <-stop:
						return
					default:
					}
					mu.Lock()
					floor := committed
					mu.Unlock()
					a, err := w.s.GetAgent(ctx, w.ns.ID, w.agent.ID)
					if err != nil {
						errs <- err
						return
					}
					n, ok := names[a.Name]
					if !ok || n < floor {
						errs <- fmt.Errorf("read the name %q after write %d had returned: a stale read", a.Name, floor)
						return
					}
				}
			})
		}
		a := w.agent
		for i := 1; i <= writes; i++ {
			a.Name, a.UpdatedAt = nameAt(i), a.UpdatedAt.Add(time.Second)
			if _, err := w.other.UpdateAgent(ctx, a); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			committed = i
			mu.Unlock()
			time.Sleep(2 * time.Millisecond) // let the readers warm the cache
		}
		close(stop)
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if st, _ := w.s.ReadCacheStats(); st.Hits == 0 {
			t.Errorf("no read was served from the cache (%+v): the test proves nothing", st)
		}
	})
}

func nameAt(i int) string { return fmt.Sprintf("name-%d", i) }

// TestReadCacheOff: with 0 items there is no read cache and no snapshot
// query; by default both engines have one.
func TestReadCacheOff(t *testing.T) {
	ctx := testCtx(t)
	for _, s := range []*sqlstore.Store{testdb.SQLite(t), testdb.Postgres(t)} {
		if _, ok := s.ReadCacheStats(); !ok {
			t.Errorf("%s has no read cache by default", s.Engine())
		}
		s.SetReadCacheItems(0)
		if _, ok := s.ReadCacheStats(); ok {
			t.Errorf("%s: SetReadCacheItems(0) left the read cache on", s.Engine())
		}
		var sent []string
		rs := sqlstore.RecordQueriesForTest(s, func(q string, _ []any) { sent = append(sent, q) })
		for range 2 {
			if _, err := rs.ListNamespaces(ctx, store.PageRequest{Limit: 5}); err != nil {
				t.Fatal(err)
			}
		}
		for _, q := range sent {
			if q == sqlstore.SnapshotQueryForTest {
				t.Errorf("%s without a read cache sent the snapshot query", s.Engine())
			}
		}
		if len(sent) != 2 {
			t.Errorf("%s without a read cache sent %d queries for the same page twice, want 2", s.Engine(), len(sent))
		}
	}
}

// TestReadScope: the cached reads of one scope (one API request) ask for
// the snapshot once; a write the scope makes ends its snapshot, so the
// scope reads its own write; a new scope sees another process's write.
func TestReadScope(t *testing.T) {
	forReadCacheEngines(t, func(t *testing.T, engine string) {
		ctx := testCtx(t)
		w := newReadCacheWorld(t, engine)
		rs := w.s
		last := sqlstore.SnapshotsForTest(rs)
		count := func() uint64 { n := sqlstore.SnapshotsForTest(rs); d := n - last; last = n; return d }

		scope := sqlstore.WithReadScope(ctx)
		if _, _, err := rs.GetSessionAccess(scope, w.token); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.ListAgents(scope, w.ns.ID, store.PageRequest{Limit: 10}); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.GetAgent(scope, w.ns.ID, w.agent.ID); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 1 {
			t.Errorf("three cached reads in one scope asked for the snapshot %d times, want 1", n)
		}
		if _, err := rs.GetAgent(ctx, w.ns.ID, w.agent.ID); err != nil {
			t.Fatal(err)
		}
		if n := count(); n != 1 {
			t.Errorf("a cached read outside a scope asked for the snapshot %d times, want 1", n)
		}

		// Warm the cache in a scope, write in the same scope, read again.
		scope = sqlstore.WithReadScope(ctx)
		warm(t, w.s, "GetAgent in a scope", func() error { _, err := rs.GetAgent(sqlstore.WithReadScope(ctx), w.ns.ID, w.agent.ID); return err })
		if _, err := rs.GetAgent(scope, w.ns.ID, w.agent.ID); err != nil {
			t.Fatal(err)
		}
		a := w.agent
		a.Name, a.UpdatedAt = "renamed in the scope", a.UpdatedAt.Add(time.Second)
		if _, err := rs.UpdateAgent(scope, a); err != nil {
			t.Fatal(err)
		}
		got, err := rs.GetAgent(scope, w.ns.ID, w.agent.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != a.Name {
			t.Errorf("after its own write (a transaction) the scope reads the name %q, want %q", got.Name, a.Name)
		}
		// A write outside a transaction (exec) ends it too.
		if _, err := rs.GetAgent(scope, w.ns.ID, w.agent.ID); err != nil {
			t.Fatal(err)
		}
		if _, err := rs.TouchSession(scope, w.token, a.UpdatedAt.Add(time.Hour), a.UpdatedAt.Add(59*time.Minute)); err != nil {
			t.Fatal(err)
		}
		se, _, err := rs.GetSessionAccess(scope, w.token)
		if err != nil {
			t.Fatal(err)
		}
		if !se.LastUsedAt.Equal(a.UpdatedAt.Add(time.Hour)) {
			t.Errorf("after its own TouchSession the scope reads last use %v, want %v", se.LastUsedAt, a.UpdatedAt.Add(time.Hour))
		}

		// Another process's write: a new scope (the next request) sees it.
		a.Name, a.UpdatedAt = "renamed elsewhere", a.UpdatedAt.Add(time.Second)
		if _, err := w.other.UpdateAgent(ctx, a); err != nil {
			t.Fatal(err)
		}
		got, err = rs.GetAgent(sqlstore.WithReadScope(ctx), w.ns.ID, w.agent.ID)
		if err != nil {
			t.Fatal(err)
		}
		if got.Name != a.Name {
			t.Errorf("a new scope after another process's write reads the name %q, want %q", got.Name, a.Name)
		}
	})
}
