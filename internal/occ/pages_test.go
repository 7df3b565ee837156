package occ

import (
	"encoding/base64"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
)

// FuzzDecodeCursor checks, for any cursor a client can send, that
// decodeCursor either refuses it with the one fixed error (INVALID_FORMAT at
// /query/cursor, a message that never echoes it) or accepts a cursor with
// an id and a time that encodes again to a cursor decoding to the same
// position: what the store is given always names a real page boundary.
func FuzzDecodeCursor(f *testing.F) {
	at := time.Date(2026, 12, 5, 17, 0, 0, 123456000, time.UTC)
	for _, s := range []string{
		encodeCursor(cursorJSON{T: at, ID: "agt_0b6f0a3c-2f1e-4c55-9a7d-1d2c3b4a5f60"}),
		encodeCursor(cursorJSON{T: at.In(time.FixedZone("", 5*3600+1800)), ID: "x"}),
		"", "e30", "not base64!",
		base64.RawURLEncoding.EncodeToString([]byte(`{"t":"0001-01-01T00:00:00Z","id":"a"}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2026-12-05T17:00:00Z","id":""}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2026-12-05T17:00:00Z","id":"a","id":"b"}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"t":"2026-12-05T17:00:00Z","id":"\ud800"}`)),
		base64.StdEncoding.EncodeToString([]byte(`{"t":"2026-12-05T17:00:00Z","id":"a"}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"t":"9999-12-31T23:00:00-23:00","id":"a"}`)),
		base64.RawURLEncoding.EncodeToString([]byte(`{"t":"0001-01-01T01:00:00+02:00","id":"a"}`)),
	} {
		f.Add(s)
	}
	refused := errkind.InvalidDetails("The cursor is malformed.", errkind.Detail{Path: "/query/cursor", Code: errkind.DetailInvalidFormat})
	f.Fuzz(func(t *testing.T, cursor string) {
		c, err := decodeCursor(cursor)
		if err != nil {
			if diff := cmp.Diff(refused, errkind.As(err)); diff != "" {
				t.Fatalf("decodeCursor(%q) error (-want +got):\n%s", cursor, diff)
			}
			if c != (cursorJSON{}) {
				t.Fatalf("decodeCursor(%q) = %+v with its error", cursor, c)
			}
			return
		}
		if c.ID == "" || c.T.IsZero() {
			t.Fatalf("decodeCursor(%q) = %+v: accepted without an id or a time", cursor, c)
		}
		if y := c.T.UTC().Year(); y < 1 || y > 9999 {
			t.Fatalf("decodeCursor(%q) = %+v: accepted a time in the UTC year %d", cursor, c, y)
		}
		again, err := decodeCursor(encodeCursor(c))
		if err != nil || again.ID != c.ID || !again.T.Equal(c.T) {
			t.Fatalf("decodeCursor(%q) = %+v, which encodes to a cursor decoding to %+v, %v", cursor, c, again, err)
		}
	})
}

// TestCursorYears: a cursor's time is accepted through the UTC year 9999
// and refused one instant past it, however its offset writes it, and
// likewise before the year 1.
func TestCursorYears(t *testing.T) {
	cur := func(ts string) string {
		return base64.RawURLEncoding.EncodeToString([]byte(`{"t":"` + ts + `","id":"a"}`))
	}
	tests := []struct {
		t  string
		ok bool
	}{
		{"9999-12-31T23:59:59.999999999Z", true},
		{"9999-12-31T22:59:59-01:00", true},
		{"9999-12-31T23:00:00-23:00", false}, // 10000-01-01T22:00:00Z
		{"0001-01-01T00:00:01Z", true},
		{"0001-01-01T01:00:00+02:00", false}, // the year 0 in UTC
	}
	for _, tc := range tests {
		_, err := decodeCursor(cur(tc.t))
		if got := err == nil; got != tc.ok {
			t.Errorf("decodeCursor(time %s): accepted %v, want %v (%v)", tc.t, got, tc.ok, err)
		}
	}
}

// TestPageSizesAgree: the API's page size limit is the store's.
func TestPageSizesAgree(t *testing.T) {
	if apitypes.MaxPageSize != store.MaxPageSize {
		t.Errorf("apitypes.MaxPageSize %d, store.MaxPageSize %d; want one number", apitypes.MaxPageSize, store.MaxPageSize)
	}
}
