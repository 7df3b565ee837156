package bench

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/store/sqlstore"
)

// TestFloorRows runs the store floor rows small on SQLite: every row
// completes its operations with the 16-byte reply, so each of its store
// calls succeeded (the session lookup included), and a floor server whose
// session is not in the store answers 500 rather than measuring a failed
// lookup as a fast one.
func TestFloorRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	e, err := openAPIEnv(ctx, sqlstore.EngineSQLite, "", t.TempDir(), Scale{Namespaces: 3, Agents: 400, AuditEvents: 60}, -1)
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	rs, err := e.floorRows(ctx, Limits{Ops: 40, Warmup: 2, Concurrency: 4, MaxTime: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Engine, Name string
		Ops, Bytes   int
	}
	var got []row
	for _, r := range rs {
		got = append(got, row{r.Engine, r.Name, r.Ops, r.BytesPerReply})
	}
	want := []row{
		{"sqlite", "store floor: GET one Agent", 40, 16},
		{"sqlite", "store floor: GET Agent list, first page (100)", 40, 16},
		{"sqlite", "store floor: GET Agent list, middle page (100)", 40, 16},
		{"sqlite", "store floor: GET Namespace list (100)", 40, 16},
		{"sqlite", "store floor: GET audit page (50)", 40, 16},
		{"sqlite", "store floor: two SELECT 1 statements", 40, 16},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("floor rows (-want +got):\n%s", diff)
	}

	f, err := openFloorEnv(e.st, make([]byte, 32), e.bigNS, nil, 1)
	if err != nil {
		t.Fatal(err)
	}
	defer f.close()
	resp, err := f.client.Get(f.base + "/agents/" + e.agents[0])
	if err != nil {
		t.Fatal(err)
	}
	io.Copy(io.Discard, resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusInternalServerError {
		t.Errorf("GET one Agent with an unknown session: status %d, want 500", resp.StatusCode)
	}
}
