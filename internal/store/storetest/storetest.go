// Package storetest is the one test suite every store.Store implementation
// must pass. It checks each Store method (results and error kinds) through
// the interface, and, with raw SQL through Harness.DB, the rules the schema
// itself enforces: workspace setup CHECKs and lifecycle triggers, the
// append-only audit log and immutable revisions. Every case runs on a fresh
// database from the caller's harness.
//
// Inputs use times in a non-UTC zone with nanoseconds; the suite expects
// them back in UTC, truncated to microseconds.
package storetest

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// Harness is one fresh, migrated database.
type Harness struct {
	Store  store.Store
	DB     *sql.DB // the same database, for raw SQL
	Engine string  // "sqlite" or "postgres"
}

// testCase is one independent check.
type testCase struct {
	name string
	run  func(t *testing.T, h Harness)
}

// caseTimeout bounds one case; a hung database should fail, not stall CI.
const caseTimeout = time.Minute

// Run runs every case as a parallel subtest, each on the database returned
// by newHarness.
func Run(t *testing.T, newHarness func(t *testing.T) Harness) {
	groups := [][]testCase{
		installationCases, identityCases, iamCases, namespaceCases, configurationCases,
		agentCases, workspaceSetupCases, revisionCases, workCases, activationCases,
		auditCases, txCases, schemaCases, pageCases, pageListCases,
	}
	seen := map[string]bool{}
	for _, g := range groups {
		for _, c := range g {
			if seen[c.name] {
				t.Fatalf("storetest: duplicate case name %q", c.name)
			}
			seen[c.name] = true
			t.Run(c.name, func(t *testing.T) {
				t.Parallel()
				c.run(t, newHarness(t))
			})
		}
	}
}

// ctx is the context of one case.
func ctx(t *testing.T) context.Context {
	c, cancel := context.WithTimeout(t.Context(), caseTimeout)
	t.Cleanup(cancel)
	return c
}

// ---- times ----

// inputZone is deliberately not UTC and not a whole number of hours away.
var inputZone = time.FixedZone("OCC+0530", 5*3600+30*60)

// at returns the n-th test instant: one minute apart, in inputZone, with
// nanoseconds that the store must truncate.
func at(n int) time.Time {
	return time.Date(2026, 3, 8, 7, 0, 0, 123456789, inputZone).Add(time.Duration(n) * time.Minute)
}

// stored is what the store must return for an input time.
func stored(t time.Time) time.Time { return t.UTC().Truncate(time.Microsecond) }

// storedPtr is stored for an optional time.
func storedPtr(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	v := stored(*t)
	return &v
}

// exactTime makes cmp require the same instant and the same location, so a
// time returned in a non-UTC zone or with sub-microsecond digits fails.
var exactTime = cmp.Comparer(func(a, b time.Time) bool {
	return a.Equal(b) && a.Location() == b.Location() && a.Nanosecond() == b.Nanosecond()
})

// diff is cmp.Diff with the suite's options.
func diff(want, got any) string { return cmp.Diff(want, got, exactTime) }

// check fails the case when got differs from want.
func check(t *testing.T, what string, want, got any) {
	t.Helper()
	if d := diff(want, got); d != "" {
		t.Errorf("%s mismatch (-want +got):\n%s", what, d)
	}
}

// ---- errors ----

var kindNames = map[errkind.Kind]string{
	errkind.Internal: "Internal", errkind.Invalid: "Invalid", errkind.NotFound: "NotFound",
	errkind.Conflict: "Conflict", errkind.Unavailable: "Unavailable", errkind.OutcomeUnknown: "OutcomeUnknown",
}

func kindName(k errkind.Kind) string {
	if n, ok := kindNames[k]; ok {
		return n
	}
	return fmt.Sprintf("Kind(%d)", k)
}

// must fails the case on a setup error.
func must(t *testing.T, what string, err error) {
	t.Helper()
	if err != nil {
		t.Fatalf("%s: %v", what, err)
	}
}

// wantErr checks that err is classified as kind (and, when code is not
// empty, carries that public code).
func wantErr(t *testing.T, what string, err error, kind errkind.Kind, code string) {
	t.Helper()
	e := errkind.As(err)
	switch {
	case err == nil:
		t.Errorf("%s: got no error, want %s %s", what, kindName(kind), code)
	case e == nil:
		t.Errorf("%s: got unclassified error %v, want %s %s", what, err, kindName(kind), code)
	case e.Kind != kind:
		t.Errorf("%s: got %s (%v), want %s %s", what, kindName(e.Kind), err, kindName(kind), code)
	case code != "" && e.PublicCode() != code:
		t.Errorf("%s: got code %s (%v), want %s", what, e.PublicCode(), err, code)
	}
}

// ---- raw SQL ----

// rebind turns "?" placeholders into "$n" for PostgreSQL. The suite's raw
// statements have no "?" inside literals.
func rebind(engine, q string) string {
	if engine != "postgres" {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			fmt.Fprintf(&b, "$%d", n)
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// rawExec runs one statement through Harness.DB.
func rawExec(t *testing.T, h Harness, q string, args ...any) error {
	t.Helper()
	_, err := h.DB.ExecContext(ctx(t), rebind(h.Engine, q), args...)
	return err
}

// dbRule is the engine-level class a refused statement must have.
type dbRule int

const (
	ruleCheck   dbRule = iota // a CHECK constraint (PostgreSQL 23514, SQLite CONSTRAINT_CHECK)
	ruleTrigger               // a trigger (PostgreSQL 23514, SQLite CONSTRAINT_TRIGGER)
	ruleUnique                // a unique key (PostgreSQL 23505, SQLite CONSTRAINT_UNIQUE/PRIMARYKEY)
)

func (r dbRule) String() string {
	return [...]string{"CHECK violation", "trigger refusal", "unique violation"}[r]
}

// wantRefused checks that a raw statement failed with the engine's error for
// rule.
func wantRefused(t *testing.T, h Harness, what string, err error, rule dbRule) {
	t.Helper()
	if err == nil {
		t.Errorf("%s: statement succeeded, want %s", what, rule)
		return
	}
	var pe *pgconn.PgError
	var se *sqlite.Error
	switch {
	case errors.As(err, &pe):
		want := map[dbRule]string{ruleCheck: "23514", ruleTrigger: "23514", ruleUnique: "23505"}[rule]
		if pe.Code != want {
			t.Errorf("%s: SQLSTATE %s (%v), want %s (%s)", what, pe.Code, err, want, rule)
		}
	case errors.As(err, &se):
		ok := false
		switch rule {
		case ruleCheck:
			ok = se.Code() == sqlite3.SQLITE_CONSTRAINT_CHECK
		case ruleTrigger:
			ok = se.Code() == sqlite3.SQLITE_CONSTRAINT_TRIGGER
		case ruleUnique:
			ok = se.Code() == sqlite3.SQLITE_CONSTRAINT_UNIQUE || se.Code() == sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY
		}
		if !ok {
			t.Errorf("%s: SQLite code %d (%v), want %s", what, se.Code(), err, rule)
		}
	default:
		t.Errorf("%s: unexpected error type %T: %v, want %s", what, err, err, rule)
	}
}

// rawCount returns SELECT count(*) ... for a raw query.
func rawCount(t *testing.T, h Harness, q string, args ...any) int {
	t.Helper()
	var n int
	if err := h.DB.QueryRowContext(ctx(t), rebind(h.Engine, q), args...).Scan(&n); err != nil {
		t.Fatalf("count %q: %v", q, err)
	}
	return n
}
