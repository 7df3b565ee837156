package sqlstore

import (
	"context"
	"testing"

	"github.com/google/go-cmp/cmp"

	"github.com/openclaw/occ/internal/store"
)

func TestParsePGSnapshot(t *testing.T) {
	tests := []struct {
		text string
		want dbSnapshot
		ok   bool
	}{
		{"750:750:@2026-12-05 07:00:00+00", dbSnapshot{start: "2026-12-05 07:00:00+00", xmin: 750, xmax: 750}, true},
		{"748:752:748,750@s", dbSnapshot{start: "s", xmin: 748, xmax: 752, inProgress: 2}, true},
		{"748:752:748@s", dbSnapshot{start: "s", xmin: 748, xmax: 752, inProgress: 1}, true},
		{"750:750:", dbSnapshot{}, false},                  // no start time
		{"750:750:@", dbSnapshot{}, false},                 // empty start time
		{"750:750@s", dbSnapshot{}, false},                 // two fields
		{"751:750:@s", dbSnapshot{}, false},                // xmin past xmax
		{"x:750:@s", dbSnapshot{}, false},                  // not a number
		{"-1:750:@s", dbSnapshot{}, false},                 // negative
		{"", dbSnapshot{}, false},                          // nothing
		{"1:18446744073709551616:@s", dbSnapshot{}, false}, // past uint64
	}
	for _, tt := range tests {
		got, ok := parsePGSnapshot(tt.text)
		if ok != tt.ok {
			t.Errorf("parsePGSnapshot(%q) ok = %v, want %v", tt.text, ok, tt.ok)
			continue
		}
		if ok {
			tt.want.text = tt.text
		}
		if diff := cmp.Diff(tt.want, got, cmp.AllowUnexported(dbSnapshot{})); diff != "" {
			t.Errorf("parsePGSnapshot(%q) (-want +got):\n%s", tt.text, diff)
		}
	}
}

func TestSnapshotNewerThan(t *testing.T) {
	snap := func(text string) dbSnapshot {
		t.Helper()
		p, ok := parsePGSnapshot(text)
		if !ok {
			t.Fatalf("bad test snapshot %q", text)
		}
		return p
	}
	tests := []struct {
		p, q string
		want bool
	}{
		{"10:12:10,11@a", "10:12:10,11@a", false}, // the same
		{"10:13:10,11@a", "10:12:10,11@a", true},  // a transaction completed
		{"10:12:10,11@a", "10:13:10,11@a", false},
		{"11:12:11@a", "10:12:10,11@a", true}, // the oldest completed
		{"10:12:10@a", "10:12:10,11@a", true}, // one left the in-progress list
		{"10:12:10,11@a", "10:12:10@a", false},
		{"1:1:@b", "10:12:10,11@a", true}, // another server start
	}
	for _, tt := range tests {
		if got := snap(tt.p).newerThan(snap(tt.q)); got != tt.want {
			t.Errorf("%q newerThan %q = %v, want %v", tt.p, tt.q, got, tt.want)
		}
	}
	if !snap("1:1:@a").newerThan(dbSnapshot{}) {
		t.Error("a snapshot is not newer than an empty cache's")
	}
}

// TestReadCachePut: an entry is served only under its own snapshot; a
// newer snapshot's entry empties the cache, an older one's is dropped; the
// cache never holds more than maxItems items.
func TestReadCachePut(t *testing.T) {
	s1, _ := parsePGSnapshot("10:12:10,11@a")
	s2, _ := parsePGSnapshot("10:13:10,11@a")
	page := func(n int) store.Page[store.Agent] { return store.Page[store.Agent]{Items: make([]store.Agent, n)} }
	c := &readCache{entries: map[string]any{}, maxItems: 10}
	c.put(s1, "a", page(4))
	if _, ok := c.get(s1, "a"); !ok {
		t.Fatal("an entry is not served under its own snapshot")
	}
	if _, ok := c.get(s2, "a"); ok {
		t.Fatal("an entry is served under another snapshot")
	}
	c.put(s2, "b", page(2))
	if _, ok := c.get(s2, "a"); ok || len(c.entries) != 1 || c.items != 2 {
		t.Fatalf("a newer snapshot's entry left the older entries: %d entries, %d items", len(c.entries), c.items)
	}
	c.put(s1, "c", page(1))
	if _, ok := c.get(s1, "c"); ok {
		t.Fatal("an entry read under an older snapshot was cached")
	}
	c.put(s2, "b", page(5)) // replaces b: 5 items, not 7
	if c.items != 5 {
		t.Fatalf("replacing an entry counts %d items, want 5", c.items)
	}
	c.put(s2, "d", page(5)) // at the limit: kept
	if c.items != 10 || len(c.entries) != 2 {
		t.Fatalf("at the limit: %d entries, %d items; want 2 and 10", len(c.entries), c.items)
	}
	c.put(s2, "e", page(1)) // past it: the cache starts over
	if c.items != 1 || len(c.entries) != 1 {
		t.Fatalf("past the limit: %d entries, %d items; want 1 and 1", len(c.entries), c.items)
	}
	c.put(s2, "g", page(0)) // an empty page takes one item, replaced or not
	c.put(s2, "g", page(0))
	if c.items != 2 || len(c.entries) != 2 {
		t.Fatalf("an empty page put twice: %d entries, %d items; want 2 and 2", len(c.entries), c.items)
	}
	c.put(s2, "f", page(11)) // bigger than the whole cache: not kept
	if _, ok := c.get(s2, "f"); ok || c.items != 2 {
		t.Fatalf("an entry bigger than the cache was kept (%d items)", c.items)
	}
	if st := (ReadCacheStats{Hits: c.hits.Load(), Misses: c.misses.Load()}); st != (ReadCacheStats{Hits: 1, Misses: 4}) {
		t.Errorf("stats = %+v, want 1 hit and 4 misses", st)
	}
}

// FuzzCacheKey: two different argument lists never make the same key.
func FuzzCacheKey(f *testing.F) {
	f.Add("a", "b", "ab", "")
	f.Add("1:a", "", "1", ":a")
	f.Add("agent", "ns\x00id", "agent\x00ns", "id")
	f.Fuzz(func(t *testing.T, a, b, c, d string) {
		if cacheKey(a, b) == cacheKey(c, d) && (a != c || b != d) {
			t.Fatalf("cacheKey(%q, %q) == cacheKey(%q, %q)", a, b, c, d)
		}
	})
}

func TestMayWrite(t *testing.T) {
	tests := []struct {
		q    string
		want bool
	}{
		{"SELECT id FROM agents WHERE namespace_id = ?", false},
		{"\n\t\tSELECT updated_at FROM agents", false},
		{"WITH s AS (SELECT id FROM sessions) SELECT * FROM s", false},
		{snapshotQuery, false},
		{"UPDATE agents SET name = ? RETURNING id", true},
		{"INSERT INTO agents (id) VALUES (?) RETURNING id", true},
		{"DELETE FROM sessions WHERE token_hash = ? RETURNING id", true},
		{"WITH d AS (DELETE FROM sessions RETURNING id) SELECT count(*) FROM d", true},
		{"SELECT id FROM controller_work FOR UPDATE SKIP LOCKED", true},
	}
	for _, tt := range tests {
		if got := mayWrite(tt.q); got != tt.want {
			t.Errorf("mayWrite(%q) = %v, want %v", tt.q, got, tt.want)
		}
	}
}

// TestSQLiteWatchGenerations: a new watching connection (after an error)
// gives snapshots of a new generation, newer than the old one's, so the
// new connection's data_version, counted from its own start, never
// matches an entry read under the old; a closed watch gives none.
func TestSQLiteWatchGenerations(t *testing.T) {
	ctx := t.Context()
	s, err := Open(ctx, "", t.TempDir())
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	w := s.reads.watch
	first, ok := w.snapshot(ctx)
	if !ok {
		t.Fatal("no snapshot")
	}
	if again, _ := w.snapshot(ctx); again.text != first.text {
		t.Fatalf("snapshot changed with no commit: %q then %q", first.text, again.text)
	}
	// A caller that gave up gets no snapshot and changes nothing.
	gone, cancel := context.WithCancel(ctx)
	cancel()
	if _, ok := w.snapshot(gone); ok {
		t.Fatal("a cancelled caller got a snapshot")
	}
	if again, _ := w.snapshot(ctx); again.text != first.text {
		t.Fatalf("after a cancelled caller the snapshot is %q, was %q: want the same generation", again.text, first.text)
	}
	w.mu.Lock()
	w.reset() // as after an error
	w.mu.Unlock()
	second, ok := w.snapshot(ctx)
	if !ok {
		t.Fatal("no snapshot after a new connection")
	}
	if second.start == first.start || !second.newerThan(first) {
		t.Errorf("after a new connection the snapshot is %q, after %q: want a new, newer generation", second.text, first.text)
	}
	w.close()
	if _, ok := w.snapshot(ctx); ok {
		t.Error("a closed watch gave a snapshot")
	}
}

// TestItemCountAgentScope: an Agent's scope counts the items its active
// revision's configuration would be, so that 20,000 scopes of 48 KiB
// documents cannot hold a gigabyte.
func TestItemCountAgentScope(t *testing.T) {
	withConfig := func(n int) store.AgentScope {
		return store.AgentScope{ActiveRevision: &store.Revision{Configuration: make([]byte, n)}}
	}
	tests := []struct {
		name  string
		scope store.AgentScope
		want  int
	}{
		{"no active revision", store.AgentScope{}, 1},
		{"an empty configuration", withConfig(0), 1},
		{"one byte short of an item", withConfig(itemBytes - 1), 1},
		{"one item's bytes", withConfig(itemBytes), 2},
		{"48 KiB", withConfig(48 << 10), 1 + (48<<10)/itemBytes},
	}
	for _, tt := range tests {
		if got := itemCount(tt.scope); got != tt.want {
			t.Errorf("%s: itemCount = %d, want %d", tt.name, got, tt.want)
		}
	}
}
