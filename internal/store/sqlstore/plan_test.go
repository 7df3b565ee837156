package sqlstore_test

import (
	"context"
	"encoding/json"
	"fmt"
	"regexp"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/openclaw/occ/internal/ids"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/sqlstore"
	"github.com/openclaw/occ/internal/testdb"
)

// planScale is what the seed writes. PostgreSQL gets the scale of issue 15
// (10,000 Agents in one Namespace, 1,000 Namespaces): its planner weighs
// table statistics, so that it chooses, with fresh statistics, the plan it
// would choose in production. SQLite's planner picks indexes by the
// shape of the query and schema, so a tenth of that shows the same plans
// and keeps the test short under -race (35 s at full scale).
type planScale struct{ agents, namespaces, audit, sessions int }

func planScaleFor(engine string) planScale {
	if engine == sqlstore.EngineSQLite {
		return planScale{agents: 1_000, namespaces: 100, audit: 1_000, sessions: 200}
	}
	return planScale{agents: 10_000, namespaces: 1_000, audit: 10_000, sessions: 2_000}
}

// bigTables are the tables the seed fills and no hot query may read in
// full. (A planner rightly scans a table of a few rows, so the small ones
// are not judged.)
var bigTables = []string{"agents", "namespaces", "audit_events", "sessions", "agent_revisions",
	"service_principals", "iam_roles", "iam_access_bindings", "iam_restrictions", "api_keys"}

// TestHotQueryPlans runs every read an API request makes on the hot paths
// (session lookup, authorization, GET of one Agent or Namespace, a page of
// each list, the audit page with each filter) on a seeded database (see
// planScaleFor), records
// the SQL the store really sends, and asks each engine for its plan: a full
// scan of a big table, or a sort of one (SQLite's temporary B-tree for ORDER
// BY), fails the test.
func TestHotQueryPlans(t *testing.T) {
	testdb.Engines(t, func(t *testing.T, s *sqlstore.Store) {
		ctx := testCtx(t)
		seed := seedPlanDatabase(t, ctx, s)

		type rec struct {
			q    string
			args []any
		}
		var mu sync.Mutex
		var recorded []rec
		rs := sqlstore.RecordQueriesForTest(s, func(q string, args []any) {
			mu.Lock()
			defer mu.Unlock()
			recorded = append(recorded, rec{q, append([]any(nil), args...)})
		})
		after := &store.PageCursor{CreatedAt: seed.midAgent.CreatedAt, ID: seed.midAgent.ID}
		calls := []struct {
			name string
			run  func() error
		}{
			// Calls named "… after" page from a cursor; their plan must
			// seek to it (see seeksToCursor).
			{"GetSession", func() error { _, err := rs.GetSession(ctx, seed.session.TokenHash); return err }},
			{"GetSessionAccess", func() error { _, _, err := rs.GetSessionAccess(ctx, seed.session.TokenHash); return err }},
			{"GetAPIKeyAccess", func() error { _, _, _, err := rs.GetAPIKeyAccess(ctx, seed.midKey); return err }},
			{"GetUser", func() error { _, err := rs.GetUser(ctx, seed.user.ID); return err }},
			{"ListGrants", func() error { _, err := rs.ListGrants(ctx, seed.user.ID); return err }},
			{"ListSubjectRestrictions", func() error { _, err := rs.ListSubjectRestrictions(ctx, seed.user.ID); return err }},
			{"ListAccess", func() error { _, err := rs.ListAccess(ctx, seed.user.ID); return err }},
			{"GetNamespace", func() error { _, err := rs.GetNamespace(ctx, seed.ns.ID); return err }},
			{"ListNamespaces", func() error { _, err := rs.ListNamespaces(ctx, store.PageRequest{Limit: 50}); return err }},
			{"ListNamespaces after", func() error {
				_, err := rs.ListNamespaces(ctx, store.PageRequest{Limit: 50, After: &store.PageCursor{CreatedAt: seed.ns.CreatedAt, ID: seed.ns.ID}})
				return err
			}},
			{"GetAgent", func() error { _, err := rs.GetAgent(ctx, seed.ns.ID, seed.midAgent.ID); return err }},
			{"GetAgentFor", func() error {
				_, err := rs.GetAgentFor(ctx, store.ActionRead, seed.ns.ID, seed.midAgent.ID)
				return err
			}},
			{"ListAgents", func() error { _, err := rs.ListAgents(ctx, seed.ns.ID, store.PageRequest{Limit: 50}); return err }},
			{"ListAgents after", func() error {
				_, err := rs.ListAgents(ctx, seed.ns.ID, store.PageRequest{Limit: 50, After: after})
				return err
			}},
			{"ListConfigurations", func() error {
				_, err := rs.ListConfigurations(ctx, seed.ns.ID, store.PageRequest{Limit: 50})
				return err
			}},
			{"ListRevisions", func() error {
				_, err := rs.ListRevisions(ctx, seed.ns.ID, seed.midAgent.ID, store.PageRequest{Limit: 50})
				return err
			}},
			{"ListRevisions after", func() error {
				_, err := rs.ListRevisions(ctx, seed.ns.ID, seed.midAgent.ID, store.PageRequest{Limit: 50, After: &store.PageCursor{CreatedAt: seed.midRev.CreatedAt, ID: seed.midRev.ID}})
				return err
			}},
			{"ListServicePrincipals", func() error {
				_, err := rs.ListServicePrincipals(ctx, store.PageRequest{Limit: 50})
				return err
			}},
			{"ListServicePrincipals after", func() error {
				_, err := rs.ListServicePrincipals(ctx, store.PageRequest{Limit: 50, After: after})
				return err
			}},
			{"ListRoles", func() error { _, err := rs.ListRoles(ctx, store.PageRequest{Limit: 50}); return err }},
			{"ListRoles after", func() error { _, err := rs.ListRoles(ctx, store.PageRequest{Limit: 50, After: after}); return err }},
			{"ListAccessBindings", func() error { _, err := rs.ListAccessBindings(ctx, store.PageRequest{Limit: 50}); return err }},
			{"ListAccessBindings after", func() error {
				_, err := rs.ListAccessBindings(ctx, store.PageRequest{Limit: 50, After: after})
				return err
			}},
			{"ListRestrictions", func() error { _, err := rs.ListRestrictions(ctx, store.PageRequest{Limit: 50}); return err }},
			{"ListRestrictions after", func() error {
				_, err := rs.ListRestrictions(ctx, store.PageRequest{Limit: 50, After: after})
				return err
			}},
			{"ListAuditEvents", func() error { _, err := rs.ListAuditEvents(ctx, store.AuditFilter{}, nil, 51); return err }},
			{"ListAuditEvents after", func() error {
				_, err := rs.ListAuditEvents(ctx, store.AuditFilter{}, &store.AuditCursor{OccurredAt: seed.midAudit, ID: "aud_m"}, 51)
				return err
			}},
			{"ListAuditEvents namespace", func() error {
				_, err := rs.ListAuditEvents(ctx, store.AuditFilter{NamespaceID: seed.ns.ID}, nil, 51)
				return err
			}},
			{"ListAuditEvents resource", func() error {
				_, err := rs.ListAuditEvents(ctx, store.AuditFilter{ResourceKind: store.KindAgent, ResourceID: seed.midAgent.ID}, nil, 51)
				return err
			}},
			{"ListAuditEvents actor", func() error {
				_, err := rs.ListAuditEvents(ctx, store.AuditFilter{ActorID: seed.user.ID}, nil, 51)
				return err
			}},
		}
		for _, c := range calls {
			mu.Lock()
			recorded = recorded[:0]
			mu.Unlock()
			if err := c.run(); err != nil {
				t.Fatalf("%s: %v", c.name, err)
			}
			mu.Lock()
			qs := append([]rec(nil), recorded...)
			mu.Unlock()
			if len(qs) == 0 {
				t.Fatalf("%s sent no query", c.name)
			}
			// A packed page read again column by column sends a second
			// query: on these seeded rows it must never need to.
			if packedPage(s.Engine(), c.name) && (len(qs) != 1 || !strings.Contains(qs[0].q, "group_concat(packed_row")) {
				t.Errorf("%s sent %d queries, want one reading the page as one value (packed.go); the first:\n%s", c.name, len(qs), qs[0].q)
			}
			// The read cache's snapshot query (PostgreSQL) reads no table.
			qs = slices.DeleteFunc(qs, func(r rec) bool { return r.q == sqlstore.SnapshotQueryForTest })
			if len(qs) == 0 {
				t.Fatalf("%s sent only the snapshot query", c.name)
			}
			for _, r := range qs {
				plan := explain(t, ctx, s, r.q, r.args)
				if bad := badPlanStep(s.Engine(), plan); bad != "" {
					t.Errorf("%s: plan %q of\n%s\nhas %q", c.name, plan, r.q, bad)
				}
				if idx := sqliteCovering[strings.TrimSuffix(c.name, " after")]; idx != "" && s.Engine() == sqlstore.EngineSQLite &&
					!regexp.MustCompile(`USING COVERING INDEX `+idx+`\b`).MatchString(plan) {
					t.Errorf("%s: plan %q of\n%s\ndoes not read the page from the covering index %s alone: its expression no longer matches the packed select list (sqlite migration 00006)", c.name, plan, r.q, idx)
				}
				if strings.HasSuffix(c.name, " after") && !seeksToCursor(s.Engine(), plan) {
					t.Errorf("%s: plan %q of\n%s\ndoes not seek to the cursor in an index (it would walk every earlier row)", c.name, plan, r.q)
				}
			}
		}
	})
}

// packedPage reports whether the call named name reads its page (or, for
// GetSessionAccess, the session and its grants) as one packed value on
// engine.
func packedPage(engine, name string) bool {
	return engine == sqlstore.EngineSQLite &&
		(strings.HasPrefix(name, "ListAgents") || strings.HasPrefix(name, "ListNamespaces") || strings.HasPrefix(name, "ListAuditEvents") ||
			name == "GetSessionAccess")
}

// sqliteCovering names the index each packed page must be read from on
// SQLite, with no table lookup: the index holds the packed row
// (migrations/sqlite/00006_page_covering_indexes.sql).
var sqliteCovering = map[string]string{
	"ListAgents":     "agents_page_idx",
	"ListNamespaces": "namespaces_page_idx",
}

type planSeed struct {
	ns       store.Namespace
	midAgent store.Agent
	user     store.User
	session  store.Session
	midAudit time.Time
	midRev   store.Revision
	midKey   string
}

// seedPlanDatabase fills the big tables with multi-row INSERTs of literal
// values (fast on both engines), then refreshes the planner statistics.
func seedPlanDatabase(t *testing.T, ctx context.Context, s *sqlstore.Store) planSeed {
	t.Helper()
	sc := planScaleFor(s.Engine())
	planAgents, planNamespaces, planAudit, planSessions := sc.agents, sc.namespaces, sc.audit, sc.sessions
	base := time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)
	ts := func(i int) string {
		return base.Add(time.Duration(i) * time.Millisecond).Format("2006-01-02T15:04:05.000000Z")
	}
	ns := store.Namespace{ID: ids.New(ids.Namespace), Name: "big", Status: store.NamespaceReady, CreatedAt: base, UpdatedAt: base}
	if err := s.CreateNamespace(ctx, ns); err != nil {
		t.Fatal(err)
	}
	cfg := store.Configuration{ID: ids.New(ids.Configuration), NamespaceID: ns.ID, Name: "cfg", Kind: store.ConfigurationKindAgent,
		Document: json.RawMessage(`{}`), Generation: 1, CreatedAt: base, UpdatedAt: base}
	if err := s.CreateConfiguration(ctx, cfg); err != nil {
		t.Fatal(err)
	}
	u := store.User{ID: ids.New(ids.User), Email: "plan@example.com", PasswordHash: "x", CreatedAt: base}
	if err := s.CreateUser(ctx, u); err != nil {
		t.Fatal(err)
	}
	se := store.Session{ID: ids.New(ids.Session), TokenHash: make([]byte, 32), UserID: u.ID, ExpiresAt: base.Add(time.Hour), CreatedAt: base}
	se.TokenHash[0] = 1
	if err := s.CreateSession(ctx, se); err != nil {
		t.Fatal(err)
	}
	bulk := func(head string, n int, row func(i int) string) {
		t.Helper()
		for start := 0; start < n; start += 500 {
			var b strings.Builder
			b.WriteString(head)
			for i := start; i < min(n, start+500); i++ {
				if i > start {
					b.WriteString(",")
				}
				b.WriteString(row(i))
			}
			if _, err := s.DB().ExecContext(ctx, b.String()); err != nil {
				t.Fatalf("seed: %v", err)
			}
		}
	}
	agentID := func(i int) string { return fmt.Sprintf("agt_%08d", i) }
	bulk(`INSERT INTO agents (id, namespace_id, name, configuration_id, status, desired_runtime_state, created_at, updated_at) VALUES `,
		planAgents, func(i int) string {
			return fmt.Sprintf("('%s', '%s', 'a%d', '%s', 'active', 'stopped', '%s', '%s')", agentID(i), ns.ID, i, cfg.ID, ts(i), ts(i))
		})
	bulk(`INSERT INTO namespaces (id, name, status, created_at, updated_at) VALUES `,
		planNamespaces-1, func(i int) string { return fmt.Sprintf("('ns_%08d', 'n%d', 'ready', '%s', '%s')", i, i, ts(i), ts(i)) })
	bulk(`INSERT INTO audit_events (id, occurred_at, kind, actor_id, action, namespace_id, resource_kind, resource_id, outcome) VALUES `,
		planAudit, func(i int) string {
			actor := "usr_other"
			if i%100 == 0 {
				actor = u.ID
			}
			return fmt.Sprintf("('aud_%08d', '%s', 'mutation', '%s', 'openclaw.agents.create', '%s', 'agent', '%s', 'success')",
				i, ts(i), actor, ns.ID, agentID(i%planAgents))
		})
	bulk(`INSERT INTO sessions (id, token_hash, user_id, expires_at, created_at, last_used_at) VALUES `,
		planSessions, func(i int) string {
			h := fmt.Sprintf("%064x", i+2)
			lit := "X'" + h + "'"
			if s.Engine() == sqlstore.EnginePostgres {
				lit = `'\x` + h + `'::bytea`
			}
			return fmt.Sprintf("('ses_%08d', %s, '%s', '%s', '%s', '%s')", i, lit, u.ID, ts(i), ts(i), ts(i))
		})
	// One Agent's revisions and the IAM lists, as many rows as Namespaces.
	planIAM := planNamespaces
	bulk(`INSERT INTO agent_revisions (id, namespace_id, agent_id, revision_number, configuration_id, configuration_kind,
		configuration_generation, configuration, compute_driver_id, created_by, created_at) VALUES `,
		planIAM, func(i int) string {
			return fmt.Sprintf("('rev_%08d', '%s', '%s', %d, '%s', 'agent', 1, '{}', 'fake', 'usr_x', '%s')",
				i, ns.ID, agentID(planAgents/2), i+1, cfg.ID, ts(i))
		})
	bulk(`INSERT INTO service_principals (id, name, created_at) VALUES `,
		planIAM, func(i int) string { return fmt.Sprintf("('sa_%08d', 'sp%d', '%s')", i, i, ts(i)) })
	bulk(`INSERT INTO iam_roles (id, name, permissions, created_at) VALUES `,
		planIAM, func(i int) string { return fmt.Sprintf("('role_%08d', 'r%d', '[]', '%s')", i, i, ts(i)) })
	bulk(`INSERT INTO iam_access_bindings (id, subject_id, role_id, created_at) VALUES `,
		planIAM, func(i int) string { return fmt.Sprintf("('rb_%08d', 'sa_%08d', 'role_%08d', '%s')", i, i, i, ts(i)) })
	bulk(`INSERT INTO iam_restrictions (id, subject_id, action, resource_kind, created_at) VALUES `,
		planIAM, func(i int) string { return fmt.Sprintf("('rs_%08d', 'sa_%08d', 'delete', 'agent', '%s')", i, i, ts(i)) })
	keyHash := "X'" + strings.Repeat("ab", 32) + "'"
	if s.Engine() == sqlstore.EnginePostgres {
		keyHash = `'\x` + strings.Repeat("ab", 32) + `'::bytea`
	}
	bulk(`INSERT INTO api_keys (id, service_principal_id, name, secret_hash, created_by, expires_at, created_at) VALUES `,
		planIAM, func(i int) string {
			return fmt.Sprintf("('ak_%08d', 'sa_%08d', 'k%d', %s, 'usr_x', '%s', '%s')", i, i, i, keyHash, ts(planIAM+i), ts(i))
		})
	analyze := "ANALYZE"
	if _, err := s.DB().ExecContext(ctx, analyze); err != nil {
		t.Fatalf("ANALYZE: %v", err)
	}
	mid := planAgents / 2
	return planSeed{
		ns: ns, user: u, session: se, midAudit: base.Add(time.Duration(planAudit/2) * time.Millisecond),
		midAgent: store.Agent{ID: agentID(mid), CreatedAt: base.Add(time.Duration(mid) * time.Millisecond)},
		midRev:   store.Revision{ID: fmt.Sprintf("rev_%08d", planIAM/2), CreatedAt: base.Add(time.Duration(planIAM/2) * time.Millisecond)},
		midKey:   fmt.Sprintf("ak_%08d", planIAM/2),
	}
}

// explain returns the engine's plan of q as one line per step.
func explain(t *testing.T, ctx context.Context, s *sqlstore.Store, q string, args []any) string {
	t.Helper()
	prefix := "EXPLAIN "
	if s.Engine() == sqlstore.EngineSQLite {
		prefix = "EXPLAIN QUERY PLAN "
	}
	rows, err := s.DB().QueryContext(ctx, prefix+q, args...)
	if err != nil {
		t.Fatalf("explain %s: %v", q, err)
	}
	defer rows.Close()
	cols, err := rows.Columns()
	if err != nil {
		t.Fatal(err)
	}
	var lines []string
	for rows.Next() {
		vals := make([]any, len(cols))
		ptrs := make([]any, len(cols))
		for i := range vals {
			ptrs[i] = &vals[i]
		}
		if err := rows.Scan(ptrs...); err != nil {
			t.Fatal(err)
		}
		// The step text is the last column on both engines (SQLite's
		// detail, PostgreSQL's QUERY PLAN).
		lines = append(lines, fmt.Sprint(vals[len(vals)-1]))
	}
	if err := rows.Err(); err != nil {
		t.Fatal(err)
	}
	return strings.Join(lines, " | ")
}

var (
	sqliteFullScan = regexp.MustCompile(`\bSCAN (\w+)( AS \w+)?$`)
	pgSeqScan      = regexp.MustCompile(`Seq Scan on (\w+)`)
)

// badPlanStep names the first step of plan that reads a big table in full
// or sorts it, or returns "".
func badPlanStep(engine, plan string) string {
	big := func(name string) bool {
		for _, b := range bigTables {
			if b == name {
				return true
			}
		}
		return false
	}
	for _, step := range strings.Split(plan, " | ") {
		step = strings.TrimSpace(step)
		switch engine {
		case sqlstore.EngineSQLite:
			if m := sqliteFullScan.FindStringSubmatch(step); m != nil && big(m[1]) {
				return step
			}
			if strings.Contains(step, "USE TEMP B-TREE FOR ORDER BY") {
				return step
			}
		default:
			if m := pgSeqScan.FindStringSubmatch(step); m != nil && big(m[1]) {
				return step
			}
		}
	}
	return ""
}

var cursorBound = regexp.MustCompile(`\b(created_at|occurred_at|revision_number)(, ?id\))? ?[<>]`)

// seeksToCursor reports whether the plan bounds an index search by the
// cursor's time: SQLite's SEARCH … (… AND created_at>?), PostgreSQL's
// Index Cond with created_at >= … (a Filter is not a seek).
func seeksToCursor(engine, plan string) bool {
	for _, step := range strings.Split(plan, " | ") {
		step = strings.TrimSpace(step)
		if engine == sqlstore.EngineSQLite && !strings.HasPrefix(step, "SEARCH") {
			continue
		}
		if engine != sqlstore.EngineSQLite && !strings.Contains(step, "Index Cond") {
			continue
		}
		if cursorBound.MatchString(step) {
			return true
		}
	}
	return false
}
