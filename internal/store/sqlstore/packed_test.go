package sqlstore

import (
	"errors"
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
			want: `SELECT concat_ws(char(31), ifnull(id, ''), ifnull(name, ''), ifnull(created_at, '')) FROM t WHERE a = ? ORDER BY created_at, id LIMIT ?`,
			ok:   true,
		},
		{in: `SELECT ` + packed(`id`) + ` FROM t`, want: `SELECT concat_ws(char(31), ifnull(id, '')) FROM t`, ok: true},
		{
			in: `SELECT ` + packedIndexed(`id, name,
				created_at`) + ` FROM t WHERE a = ? ORDER BY created_at, id LIMIT ?`,
			want: `SELECT ifnull(id, '') || char(31) || ifnull(name, '') || char(31) || ifnull(created_at, '') FROM t WHERE a = ? ORDER BY created_at, id LIMIT ?`,
			ok:   true,
		},
		{in: `SELECT ` + packedIndexed(`id`) + ` FROM t`, want: `SELECT ifnull(id, '') FROM t`, ok: true},
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

// oneColumn is a rowScanner over one packed value.
type oneColumn string

func (c oneColumn) Scan(dest ...any) error {
	if len(dest) != 1 {
		return errors.New("one column")
	}
	*dest[0].(*string) = string(c)
	return nil
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
		err := (&packedRow{r: oneColumn(v)}).Scan(&r.ID, optStringCol{&r.Opt}, timeCol{&r.At}, optTimeCol{&r.OptAt}, jsonCol{&r.Permitted})
		return r, err
	}
	for _, tc := range []struct {
		name    string
		in      string
		want    row
		wantErr error // errPackedFields
		fails   bool  // another error: a field that does not convert
	}{
		{name: "all set", in: "a\x1fb\x1f" + stamp + "\x1f" + stamp + "\x1f[\"x\"]",
			want: row{ID: "a", Opt: "b", At: at, OptAt: &at, Permitted: []string{"x"}}},
		{name: "optional columns NULL", in: "a\x1f\x1f" + stamp + "\x1f\x1f", want: row{ID: "a", At: at}},
		{name: "a value holding the separator", in: "a\x1fb\x1fc\x1f" + stamp + "\x1f\x1f", wantErr: errPackedFields},
		{name: "too few fields", in: "a\x1f" + stamp, wantErr: errPackedFields},
		{name: "NULL in a NOT NULL time", in: "a\x1fb\x1f\x1f\x1f", fails: true},
		{name: "malformed time", in: "a\x1fb\x1fyesterday\x1f\x1f", fails: true},
	} {
		got, err := read(tc.in)
		switch {
		case tc.wantErr != nil || tc.fails:
			if !errors.Is(err, errPackedFields) != tc.fails || err == nil {
				t.Errorf("%s: error %v, want errPackedFields %v, another error %v", tc.name, err, tc.wantErr != nil, tc.fails)
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
	if err := (&packedRow{r: oneColumn("1")}).Scan(&n); err == nil || !strings.Contains(err.Error(), "*int") {
		t.Errorf("Scan into *int: %v, want a refusal naming the type", err)
	}
}

// FuzzPackedRow checks that a packed row reads back exactly the values it
// was joined from, or, when one of them holds the separator, reports
// errPackedFields (and never a wrong split).
func FuzzPackedRow(f *testing.F) {
	f.Add("agt_1", "name", "")
	f.Add("a\x1fb", "", "c")
	f.Add("", "\x1f", "\x00\x1e")
	f.Fuzz(func(t *testing.T, a, b, c string) {
		var got [3]string
		err := (&packedRow{r: oneColumn(a + packSep + b + packSep + c)}).Scan(&got[0], &got[1], &got[2])
		if strings.Contains(a+b+c, packSep) {
			if !errors.Is(err, errPackedFields) {
				t.Fatalf("%q, %q, %q: got %q, %v; want errPackedFields", a, b, c, got, err)
			}
			return
		}
		if err != nil || got != [3]string{a, b, c} {
			t.Fatalf("%q, %q, %q: got %q, %v", a, b, c, got, err)
		}
	})
}
