package sqlstore

import (
	"context"
	"database/sql/driver"
	"errors"
	"fmt"
	"io"
	"net"
	"syscall"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
	"github.com/jackc/pgx/v5/pgconn"

	"github.com/openclaw/occ/internal/store"
)

// TestParseSQLiteTime checks the by-position reader against time.Parse at
// the edges of every field, and that what it refuses still gets
// time.Parse's answer.
func TestParseSQLiteTime(t *testing.T) {
	for _, tc := range []struct {
		in      string
		want    time.Time
		fast    bool // read by parseFixedTime
		wantErr bool
	}{
		{in: "2026-12-02T09:42:03.123456Z", want: time.Date(2026, 12, 2, 9, 42, 3, 123456000, time.UTC), fast: true},
		{in: "0000-01-01T00:00:00.000000Z", want: time.Date(0, 1, 1, 0, 0, 0, 0, time.UTC), fast: true},
		{in: "9999-12-31T23:59:59.999999Z", want: time.Date(9999, 12, 31, 23, 59, 59, 999999000, time.UTC), fast: true},
		{in: "2024-02-29T00:00:00.000000Z", want: time.Date(2024, 2, 29, 0, 0, 0, 0, time.UTC), fast: true},
		{in: "2023-02-29T00:00:00.000000Z", wantErr: true}, // not a leap year
		{in: "2026-04-31T00:00:00.000000Z", wantErr: true},
		{in: "2026-13-01T00:00:00.000000Z", wantErr: true},
		{in: "2026-00-01T00:00:00.000000Z", wantErr: true},
		{in: "2026-01-00T00:00:00.000000Z", wantErr: true},
		{in: "2026-01-01T24:00:00.000000Z", wantErr: true},
		{in: "2026-01-01T00:60:00.000000Z", wantErr: true},
		{in: "2026-01-01T00:00:60.000000Z", wantErr: true},
		{in: "2026-01-01T00:00:00.00000aZ", wantErr: true},
		{in: "2026-01-01 00:00:00.000000Z", wantErr: true},
		{in: "2026-01-01T00:00:00.000000", wantErr: true},
		{in: "2026-01-01T00:00:00.0000000Z", wantErr: true},
		{in: "", wantErr: true},
	} {
		_, fast := parseFixedTime(tc.in)
		got, err := parseSQLiteTime(tc.in)
		if (err != nil) != tc.wantErr {
			t.Errorf("parseSQLiteTime(%q) error = %v, want error %v", tc.in, err, tc.wantErr)
			continue
		}
		if fast != tc.fast {
			t.Errorf("parseFixedTime(%q) ok = %v, want %v", tc.in, fast, tc.fast)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("parseSQLiteTime(%q) (-want +got):\n%s", tc.in, diff)
		}
	}
}

// FuzzParseFixedTime checks that the by-position reader agrees with
// time.Parse: whatever it reads, time.Parse reads as the same instant, and
// every time written in the stored form is read by it.
func FuzzParseFixedTime(f *testing.F) {
	f.Add("2026-12-02T09:42:03.123456Z", int64(0))
	f.Add("2024-02-29T23:59:59.999999Z", int64(1<<40))
	f.Add("2023-02-29T00:00:00.000000Z", int64(-1<<50))
	f.Add("2026-01-01T00:00:00.00000-Z", int64(42))
	f.Fuzz(func(t *testing.T, s string, ns int64) {
		if got, ok := parseFixedTime(s); ok {
			want, err := time.Parse(sqliteTimeLayout, s)
			if err != nil {
				t.Fatalf("parseFixedTime(%q) = %v, but time.Parse refuses it: %v", s, got, err)
			}
			if !got.Equal(want) || got.Location() != time.UTC {
				t.Fatalf("parseFixedTime(%q) = %v, time.Parse = %v", s, got, want)
			}
		}
		// A stored time (any instant in years 0-9999, microseconds) reads back.
		in := time.Unix(0, 0).Add(time.Duration(ns)).UTC().Truncate(time.Microsecond)
		if y := in.Year(); y < 0 || y > 9999 {
			return
		}
		got, ok := parseFixedTime(in.Format(sqliteTimeLayout))
		if !ok || !got.Equal(in) {
			t.Fatalf("parseFixedTime(%q) = %v, %v; want %v", in.Format(sqliteTimeLayout), got, ok, in)
		}
	})
}

// TestPermissionsCol checks the decoded-permissions cache: a scan returns
// what the text says, a caller that changes its copy changes nothing the
// next scan sees, a different text is decoded afresh, and malformed text
// and NULL are handled as by any JSON column.
func TestPermissionsCol(t *testing.T) {
	read := store.Permission{Action: store.ActionRead, ResourceKind: store.KindAgent}
	operate := store.Permission{Action: store.ActionOperate, ResourceKind: store.KindAgent}
	text := `[{"action":"read","resourceKind":"agent"}]`
	for i, tc := range []struct {
		src     any
		want    []store.Permission
		wantErr bool
	}{
		{src: text, want: []store.Permission{read}},
		{src: text, want: []store.Permission{read}}, // from the cache, after the caller changed its copy
		{src: []byte(text), want: []store.Permission{read}},
		{src: `[{"action":"read","resourceKind":"agent"},{"action":"operate","resourceKind":"agent"}]`, want: []store.Permission{read, operate}},
		{src: `[]`, want: []store.Permission{}},
		{src: nil, want: nil},
		{src: `[{"action":`, wantErr: true},
		{src: 42, wantErr: true},
	} {
		var got []store.Permission
		err := permissionsCol{&got}.Scan(tc.src)
		if (err != nil) != tc.wantErr {
			t.Fatalf("scan %d: error = %v, want error %v", i, err, tc.wantErr)
		}
		if diff := cmp.Diff(tc.want, got); diff != "" {
			t.Errorf("scan %d (-want +got):\n%s", i, diff)
		}
		if len(got) > 0 {
			got[0].Action = "changed-by-caller"
		}
	}
}

// TestPostgresOnThisHost: a PostgreSQL server is on this host only when
// every host the URL may connect to is loopback, "localhost" or a Unix
// socket; one remote fallback, or a URL pgx cannot parse, is not.
func TestPostgresOnThisHost(t *testing.T) {
	for _, tc := range []struct {
		url  string
		want bool
	}{
		{"postgres://occ@127.0.0.1:5432/occ", true},
		{"postgres://occ@127.8.9.10/occ", true},
		{"postgres://occ@[::1]:5432/occ", true},
		{"postgres://occ@localhost/occ", true},
		{"postgresql://occ@LOCALHOST/occ?sslmode=disable", true},
		{"postgres://occ@/occ?host=/var/run/postgresql", true},
		{"postgres://occ@127.0.0.1,localhost/occ", true},
		{"postgres://occ@db.example.com/occ", false},
		{"postgres://occ@10.0.0.5:5432/occ", false},
		{"postgres://occ@[2001:db8::1]/occ", false},
		{"postgres://occ@127.0.0.1,db.example.com/occ", false},
		{"postgres://occ@localhost:notaport/occ", false},
	} {
		if got := postgresOnThisHost(tc.url); got != tc.want {
			t.Errorf("postgresOnThisHost(%q) = %v, want %v", tc.url, got, tc.want)
		}
	}
}

// TestPostgresCommitOutcome: which failures of a COMMIT on PostgreSQL may
// have committed (answered 503 UNKNOWN_OUTCOME) and which mean it did not.
// A connection the server closed without a reply comes back from pgx as a
// bare (or wrapped) EOF: unknown, like a reset or an ended context; a
// server error reply and driver.ErrBadConn (nothing sent) are not. A real
// server cannot be made to close the connection between committing and
// answering on purpose, hence the errors by hand; the restart tests cover
// the reset and the shutdown's FATAL reply.
func TestPostgresCommitOutcome(t *testing.T) {
	tests := []struct {
		name string
		err  error
		want bool
	}{
		{"connection closed, bare", io.ErrUnexpectedEOF, true},
		{"connection closed, wrapped", fmt.Errorf("receive message: %w", io.ErrUnexpectedEOF), true},
		{"connection closed at a frame boundary", io.EOF, true},
		{"connection reset", &net.OpError{Op: "read", Net: "tcp", Err: syscall.ECONNRESET}, true},
		{"context ended", context.Canceled, true},
		{"deadline", context.DeadlineExceeded, true},
		{"serialization failure, answered", &pgconn.PgError{Code: "40001"}, false},
		{"nothing sent", driver.ErrBadConn, false},
		{"another error", errors.New("something else"), false},
	}
	for _, tc := range tests {
		if got := (postgresDialect{}).commitOutcomeUnknown(tc.err); got != tc.want {
			t.Errorf("%s: commitOutcomeUnknown(%v) = %v, want %v", tc.name, tc.err, got, tc.want)
		}
	}
	if got := classifyCommon(io.ErrUnexpectedEOF); got != failBusy {
		t.Errorf("classifyCommon(unexpected EOF) = %v, want busy (503, not 500)", got)
	}
}
