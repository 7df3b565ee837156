package cli

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/apitypes"
	"github.com/openclaw/occ/client"
)

// auditServer stands in for GET /audit-events: newest first by
// (occurredAt, id), since inclusive, limit (default 50), and a cursor that
// continues strictly after the previous page's last event, as OCC pages.
// Poll n (a request without a cursor) first appends batches[n-1]; the
// poll after the last batch ends the test by calling stop, and waits.
type auditServer struct {
	mu      sync.Mutex
	events  []apitypes.AuditEvent // oldest first
	batches [][]apitypes.AuditEvent
	polls   int
	stop    func()
}

func (s *auditServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	q := r.URL.Query()
	s.mu.Lock()
	if q.Get("cursor") == "" {
		s.polls++
		if s.polls > len(s.batches) {
			s.mu.Unlock()
			s.stop()
			<-r.Context().Done()
			return
		}
		s.events = append(s.events, s.batches[s.polls-1]...)
	}
	var match []apitypes.AuditEvent
	for _, e := range slices.Backward(s.events) {
		match = append(match, e)
	}
	s.mu.Unlock()
	if v := q.Get("since"); v != "" {
		since, err := time.Parse(time.RFC3339Nano, v)
		if err != nil {
			envelope(w, 400, `{"error":{"code":"INVALID_REQUEST","message":"since"}}`)
			return
		}
		match = slices.DeleteFunc(match, func(e apitypes.AuditEvent) bool { return e.OccurredAt.Before(since) })
	}
	if c := q.Get("cursor"); c != "" {
		i := slices.IndexFunc(match, func(e apitypes.AuditEvent) bool { return e.ID == c })
		match = match[i+1:]
	}
	limit := 50
	if v := q.Get("limit"); v != "" {
		limit, _ = strconv.Atoi(v)
	}
	page := apitypes.AuditPage{Items: match[:min(limit, len(match))]}
	if len(match) > limit {
		page.NextCursor = page.Items[limit-1].ID
	}
	b, _ := json.Marshal(apitypes.Envelope[apitypes.AuditPage]{Data: page})
	envelope(w, 200, string(b))
}

// TestFollowAuditPages: audit list --follow prints every event that
// arrived between two polls, oldest first, however many pages they take:
// each poll follows nextCursor back to the newest event already printed.
// The first poll without --since prints the newest page only. Past
// maxFollowPages pages in one poll, the newest are printed and a warning
// gives the cursor of the rest.
func TestFollowAuditPages(t *testing.T) {
	const limit = 5
	base := time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)
	n := 0
	// batch makes k events, each a second after the one before.
	batch := func(k int) []apitypes.AuditEvent {
		var b []apitypes.AuditEvent
		for range k {
			b = append(b, apitypes.AuditEvent{ID: fmt.Sprintf("aud_%04d", n), OccurredAt: base.Add(time.Duration(n) * time.Second),
				Kind: apitypes.AuditMutation, Action: "a", Outcome: apitypes.OutcomeSuccess})
			n++
		}
		return b
	}
	ids := func(from, to int) []string { // aud_from … aud_(to-1)
		var s []string
		for i := from; i < to; i++ {
			s = append(s, fmt.Sprintf("aud_%04d", i))
		}
		return s
	}
	type result struct {
		Printed []string
		Warning string // the cursor a warning names; "" for none
	}
	tests := []struct {
		name    string
		since   *time.Time
		batches func() [][]apitypes.AuditEvent
		want    result
	}{
		{"a few events per poll", nil, func() [][]apitypes.AuditEvent { return [][]apitypes.AuditEvent{batch(3), batch(2), batch(4)} },
			result{Printed: ids(0, 9)}},
		{"first poll: the newest page only", nil, func() [][]apitypes.AuditEvent { return [][]apitypes.AuditEvent{batch(12), batch(1)} },
			result{Printed: ids(12-limit, 13)}},
		{"three pages between two polls", nil, func() [][]apitypes.AuditEvent {
			return [][]apitypes.AuditEvent{batch(2), batch(3*limit - 1), batch(limit + 1)}
		}, result{Printed: ids(0, 2+3*limit-1+limit+1)}},
		{"nothing at first, then three pages", nil, func() [][]apitypes.AuditEvent {
			return [][]apitypes.AuditEvent{nil, batch(3 * limit)}
		}, result{Printed: ids(0, 3*limit)}},
		{"with --since, every page of the first poll", &base, func() [][]apitypes.AuditEvent {
			return [][]apitypes.AuditEvent{batch(2*limit + 2)}
		}, result{Printed: ids(0, 2*limit+2)}},
		{"past the cap: the newest pages and a warning", nil, func() [][]apitypes.AuditEvent {
			return [][]apitypes.AuditEvent{batch(1), batch(maxFollowPages*limit + 3)}
		}, result{Printed: append(ids(0, 1), ids(4, 1+maxFollowPages*limit+3)...), Warning: "aud_0004"}},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			n = 0
			ctx, stop := context.WithCancel(context.Background())
			defer stop()
			srv := httptest.NewServer(&auditServer{batches: tc.batches(), stop: stop})
			defer srv.Close()
			c, err := client.New(srv.URL, client.WithServiceKey("k"), client.WithTimeout(10*time.Second))
			if err != nil {
				t.Fatal(err)
			}
			var out, stderr strings.Builder
			cn := &conn{d: deps{stderr: &stderr}, c: c, out: printer{w: &out, format: "json"}}
			done := make(chan error, 1)
			go func() { done <- cn.followAudit(ctx, apitypes.AuditQuery{Limit: limit, Since: tc.since}, 0) }()
			select {
			case err = <-done:
			case <-time.After(time.Minute):
				t.Fatal("followAudit did not end after the last poll")
			}
			if err != nil {
				t.Fatalf("followAudit: %v", err)
			}
			var got result
			dec := json.NewDecoder(strings.NewReader(out.String()))
			for {
				var e apitypes.AuditEvent
				if err := dec.Decode(&e); errors.Is(err, io.EOF) {
					break
				} else if err != nil {
					t.Fatalf("output %q: %v", out.String(), err)
				}
				got.Printed = append(got.Printed, e.ID)
			}
			if _, cursor, ok := strings.Cut(stderr.String(), "--cursor "); ok {
				got.Warning = strings.TrimSpace(cursor)
			}
			if diff := cmp.Diff(tc.want, got); diff != "" {
				t.Errorf("audit list --follow (-want +got):\n%s\nstderr: %s", diff, stderr.String())
			}
		})
	}
}
