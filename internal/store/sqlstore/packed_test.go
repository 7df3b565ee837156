package sqlstore

import (
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

func TestPackQuery(t *testing.T) {
	for _, tc := range []struct {
		in, want string
		ok       bool
	}{
		{
			in: `SELECT ` + packed(`id, name,
				created_at`) + ` FROM t WHERE a = ? ORDER BY created_at, id LIMIT ?`,
			want: `SELECT concat_ws(char(31), ifnull(id, ''), ifnull(name, ''), ifnull(created_at, '')) AS packed_row FROM t WHERE a = ? ORDER BY created_at, id LIMIT ?`,
			ok:   true,
		},
		{in: `SELECT ` + packed(`id`) + ` FROM t`, want: `SELECT concat_ws(char(31), ifnull(id, '')) AS packed_row FROM t`, ok: true},
		{
			in: `SELECT ` + packedIndexed(`id, name,
				created_at`) + ` FROM t WHERE a = ? ORDER BY created_at, id LIMIT ?`,
			want: `SELECT ifnull(id, '') || char(31) || ifnull(name, '') || char(31) || ifnull(created_at, '') AS packed_row FROM t WHERE a = ? ORDER BY created_at, id LIMIT ?`,
			ok:   true,
		},
		{in: `SELECT ` + packedIndexed(`id`) + ` FROM t`, want: `SELECT ifnull(id, '') AS packed_row FROM t`, ok: true},
		{in: `SELECT id, name FROM t`, want: `SELECT id, name FROM t`},
		{in: `SELECT ` + packOpen + `id FROM t`, want: `SELECT ` + packOpen + `id FROM t`}, // no end marker: as written
		{in: `SELECT ` + packOpenChain + `id FROM t`, want: `SELECT ` + packOpenChain + `id FROM t`},
	} {
		got, ok := packQuery(tc.in)
		if diff := cmp.Diff(tc.want, got); diff != "" || ok != tc.ok {
			t.Errorf("packQuery(%q): ok %v, want %v; (-want +got):\n%s", tc.in, ok, tc.ok, diff)
		}
	}
}

// TestPageQuery: the memoized rewrite is the rewrite, for a marked query
// and an unmarked one, on the first call and on a repeated one, and still
// after more texts than it keeps.
func TestPageQuery(t *testing.T) {
	marked := `SELECT ` + packed(`id, name`) + ` FROM t WHERE a = ? ORDER BY id LIMIT ?`
	pq, _ := packQuery(marked)
	want := packPage(pq)
	for i := range 2 {
		got, ok := pageQuery(marked)
		if diff := cmp.Diff(want, got); diff != "" || !ok {
			t.Errorf("pageQuery(marked), call %d: ok %v, want true; (-want +got):\n%s", i+1, ok, diff)
		}
		if got, ok := pageQuery(`SELECT id FROM t`); got != "" || ok {
			t.Errorf("pageQuery(unmarked), call %d = %q, %v, want \"\", false", i+1, got, ok)
		}
	}
	for i := range maxPageQueries + 10 {
		q := fmt.Sprintf("/* %d */ %s", i, marked)
		pq, _ := packQuery(q)
		for range 2 {
			if got, ok := pageQuery(q); got != packPage(pq) || !ok {
				t.Fatalf("pageQuery(text %d) = %q, %v, want %q, true", i, got, ok, packPage(pq))
			}
		}
	}
	if n := pageQueryKept.Load(); n > maxPageQueries {
		t.Errorf("pageQuery kept %d texts, want at most %d", n, maxPageQueries)
	}
}

func TestPackedRow(t *testing.T) {
	at := time.Date(2026, 12, 4, 17, 0, 0, 123456000, time.UTC)
	stamp := at.Format(sqliteTimeLayout)
	type row struct {
		ID, Opt   string
		At        time.Time
		OptAt     *time.Time
		Permitted []string
	}
	read := func(v string) (row, error) {
		var r row
		err := (&pageRow{v}).Scan(&r.ID, optStringCol{&r.Opt}, timeCol{&r.At}, optTimeCol{&r.OptAt}, jsonCol{&r.Permitted})
		return r, err
	}
	for _, tc := range []struct {
		name    string
		in      string
		want    row
		wantErr error // errUnpacked
		fails   bool  // another error: a field that does not convert
	}{
		{name: "all set", in: "a\x1fb\x1f" + stamp + "\x1f" + stamp + "\x1f[\"x\"]",
			want: row{ID: "a", Opt: "b", At: at, OptAt: &at, Permitted: []string{"x"}}},
		{name: "optional columns NULL", in: "a\x1f\x1f" + stamp + "\x1f\x1f", want: row{ID: "a", At: at}},
		{name: "a value holding the separator", in: "a\x1fb\x1fc\x1f" + stamp + "\x1f\x1f", wantErr: errUnpacked},
		{name: "too few fields", in: "a\x1f" + stamp, wantErr: errUnpacked},
		{name: "NULL in a NOT NULL time", in: "a\x1fb\x1f\x1f\x1f", fails: true},
		{name: "malformed time", in: "a\x1fb\x1fyesterday\x1f\x1f", fails: true},
	} {
		got, err := read(tc.in)
		switch {
		case tc.wantErr != nil || tc.fails:
			if !errors.Is(err, errUnpacked) != tc.fails || err == nil {
				t.Errorf("%s: error %v, want errUnpacked %v, another error %v", tc.name, err, tc.wantErr != nil, tc.fails)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		default:
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
			}
		}
	}
	var n int
	if err := (&pageRow{"1"}).Scan(&n); err == nil || !strings.Contains(err.Error(), "*int") {
		t.Errorf("Scan into *int: %v, want a refusal naming the type", err)
	}
}

// FuzzPackedRow checks that a packed row reads back exactly the values it
// was joined from, or, when one of them holds the separator, reports
// errUnpacked (and never a wrong split).
func FuzzPackedRow(f *testing.F) {
	f.Add("agt_1", "name", "")
	f.Add("a\x1fb", "", "c")
	f.Add("", "\x1f", "\x00\x1e")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		var got [3]string
		err := (&pageRow{a + packSep + b + packSep + c}).Scan(&got[0], &got[1], &got[2])
		if strings.Contains(a+b+c, packSep) {
			if !errors.Is(err, errUnpacked) {
				t.Fatalf("%q, %q, %q: got %q, %v; want errUnpacked", a, b, c, got, err)
			}
			return
		}
		if err != nil || got != [3]string{a, b, c} {
			t.Fatalf("%q, %q, %q: got %q, %v", a, b, c, got, err)
		}
	})
}

// pair is a row of two columns, for the page tests.
type pair [2]string

func scanPair(r rowScanner) (pair, error) {
	var p pair
	err := r.Scan(&p[0], &p[1])
	return p, err
}

// anyOrder accepts every order: the page tests that are not about order.
func anyOrder(pair, pair) bool { return true }

// joinPage joins rows as SQLite's packPage query does.
func joinPage(rows ...pair) string {
	var packed []string
	for _, r := range rows {
		packed = append(packed, r[0]+packSep+r[1])
	}
	return strings.Join(packed, pageSep)
}

func TestUnpackPage(t *testing.T) {
	byFirst := func(a, b pair) bool { return a[0] < b[0] }
	for _, tc := range []struct {
		name  string
		count int
		all   string
		after func(a, b pair) bool
		want  []pair // nil: errUnpacked
	}{
		{name: "empty", count: 0, all: "", after: byFirst, want: []pair{}},
		{name: "one row", count: 1, all: joinPage(pair{"a", "1"}), after: byFirst, want: []pair{{"a", "1"}}},
		{name: "in order", count: 3, all: joinPage(pair{"a", ""}, pair{"b", "2"}, pair{"c", "3"}), after: byFirst,
			want: []pair{{"a", ""}, {"b", "2"}, {"c", "3"}}},
		{name: "out of order", count: 2, all: joinPage(pair{"b", "1"}, pair{"a", "2"}), after: byFirst},
		{name: "a repeated key", count: 2, all: joinPage(pair{"a", "1"}, pair{"a", "2"}), after: byFirst},
		{name: "fewer rows than counted", count: 3, all: joinPage(pair{"a", "1"}, pair{"b", "2"}), after: byFirst},
		{name: "more rows than counted", count: 1, all: joinPage(pair{"a", "1"}, pair{"b", "2"}), after: byFirst},
		// The second column of the first row is shaped like the end of a
		// row and a whole row: every piece has two fields, and only the
		// count shows that there are two rows, not three.
		{name: "a value forging a row", count: 2, all: joinPage(pair{"a", "x" + pageSep + "forged" + packSep + "row"}, pair{"b", "2"}),
			after: anyOrder},
		{name: "a value holding the column separator", count: 1, all: joinPage(pair{"a" + packSep, "1"}), after: anyOrder},
	} {
		got, err := unpackPage(tc.count, tc.all, scanPair, tc.after)
		switch {
		case tc.want == nil:
			if !errors.Is(err, errUnpacked) {
				t.Errorf("%s: got %q, %v; want errUnpacked", tc.name, got, err)
			}
		case err != nil:
			t.Errorf("%s: %v", tc.name, err)
		default:
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("%s: (-want +got):\n%s", tc.name, diff)
			}
		}
	}
}

// FuzzPackedPage checks that a page of two packed rows reads back exactly
// the values it was joined from, or, when any of them holds either
// separator, reports errUnpacked: never a wrong split, a lost row or a
// forged one.
func FuzzPackedPage(f *testing.F) {
	f.Add("agt_1", "name", "agt_2", "")
	f.Add("a", "x"+pageSep+"forged"+packSep+"row", "b", "2")
	f.Add("", pageSep, packSep, "\x00")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		got, err := unpackPage(2, joinPage(pair{a, b}, pair{c, d}), scanPair, anyOrder)
		if strings.ContainsAny(a+b+c+d, packSep+pageSep) {
			if !errors.Is(err, errUnpacked) {
				t.Fatalf("%q: got %q, %v; want errUnpacked", []string{a, b, c, d}, got, err)
			}
			return
		}
		if diff := cmp.Diff([]pair{{a, b}, {c, d}}, got); err != nil || diff != "" {
			t.Fatalf("%q: %v (-want +got):\n%s", []string{a, b, c, d}, err, diff)
		}
	})
}
