package bench

import (
	"context"
	"io"
	"net/http"
	"testing"
	"time"

	"github.com/google/go-cmp/cmp"
)

// TestBaselineRows runs the baseline rows small: every row completes its
// operations with the 16-byte reply, and the bare server refuses a path
// that is not a number of microseconds in range instead of spinning on
// it. (How long the spins take is what make bench reports, not asserted.)
func TestBaselineRows(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	rs, err := BaselineRows(ctx, Limits{Ops: 40, Warmup: 2, Concurrency: 4, MaxTime: 30 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	type row struct {
		Name       string
		Ops, Bytes int
	}
	var got []row
	for _, r := range rs {
		got = append(got, row{r.Name, r.Ops, r.BytesPerReply})
	}
	want := []row{
		{"bare net/http server, no work (the floor)", 40, 16},
		{"bare net/http server, 100 µs of CPU per request", 40, 16},
		{"bare net/http server, 200 µs of CPU per request", 40, 16},
		{"bare net/http server, 300 µs of CPU per request", 40, 16},
	}
	if diff := cmp.Diff(want, got); diff != "" {
		t.Errorf("baseline rows (-want +got):\n%s", diff)
	}

	e, err := openBaselineEnv()
	if err != nil {
		t.Fatal(err)
	}
	defer e.close()
	for _, path := range []string{"/x", "/-1", "/100001", "/"} {
		resp, err := e.client.Get(e.base + path)
		if err != nil {
			t.Fatal(err)
		}
		io.Copy(io.Discard, resp.Body)
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("GET %s: status %d, want 400", path, resp.StatusCode)
		}
	}
	if e.perUS < 1 {
		t.Errorf("calibrated %d spin rounds per µs", e.perUS)
	}
}
