package sqlstore

import (
	"context"
	"database/sql"
	"maps"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/openclaw/occ/internal/store"
)

// The read cache keeps the results of the reads every API request makes
// (the session and API key lookups, one Agent, the pages of Agents,
// Namespaces and audit events) and serves one again only while the
// database is provably in the state it was read in: before a cached read
// the store asks the database for its current snapshot, and a result is
// reused only when that snapshot is the one it was read under.
//
//   - PostgreSQL: pg_current_snapshot() (xmin, xmax and the transactions
//     in progress), one round trip of a few bytes. It changes whenever any
//     transaction on the server commits or aborts, in this process or any
//     other, and never returns to an earlier value. The postmaster's start
//     time is part of it, so a restarted or different server (a restore,
//     a failover) never matches an entry read from the one before.
//   - SQLite: PRAGMA data_version on a connection of its own that never
//     writes (sqliteWatch), a few microseconds in this process. It changes
//     whenever any other connection commits, this process's pool and any
//     other process (an occ command) alike, and only counts up. A new
//     watching connection (after an error) starts a new generation, part
//     of the snapshot, so its counter cannot match the old one's.
//
// So an unchanged snapshot means nothing has been committed since: the
// cached result is exactly what the query would return now. There is no
// window in which a write made elsewhere (another replica, psql, an occ
// command) is not yet seen, and no invalidation message to lose.
//
// Failure semantics: on PostgreSQL the snapshot query failing fails the
// read, as the read itself failing would; on SQLite the watcher failing
// sends the read to the database uncached. Nothing is served unchecked.
// Errors are not cached. Inside a transaction the cache is bypassed: the
// transaction sees its own writes, which no snapshot shows the others.
//
// It pays off when reads outnumber writes, as on the API: any write
// anywhere (a session's last use recorded once a minute, the worker's
// lease renewals, an audit event) starts a new snapshot and empties it.
// A result read under a newer snapshot replaces the whole cache, so
// entries that can never match again do not linger; the cache holds at
// most maxItems items (Agents, events, grants) and starts over when full.
type readCache struct {
	mu       sync.Mutex
	snap     dbSnapshot
	entries  map[string]any
	items    int
	maxItems int
	// watch is SQLite's snapshot source; nil on PostgreSQL.
	watch *sqliteWatch

	hits, misses atomic.Uint64
	snapshots    atomic.Uint64 // asked of the database, for tests
}

// DefaultReadCacheItems is the read cache's default size, in items (an
// Agent, a Namespace, an audit event, a grant, or itemBytes of an active
// revision's configuration): about 300 bytes each, so about 6 MB when
// full.
const DefaultReadCacheItems = 20000

// itemBytes is about what one item holds.
const itemBytes = 300

// ReadCacheStats are the read cache's lookups since the store opened:
// Hits were served from it, Misses read from the database (the snapshot
// had changed, or the result was not cached yet).
type ReadCacheStats struct {
	Hits, Misses uint64
}

// SetReadCacheItems sizes the read cache: at most n items, 0 to turn it
// off. Call it once at start, before the store is used concurrently.
func (s *Store) SetReadCacheItems(n int) {
	if s.reads != nil && s.reads.watch != nil {
		s.reads.watch.close()
	}
	if n <= 0 {
		s.reads = nil
		return
	}
	s.reads = &readCache{entries: map[string]any{}, maxItems: n}
	if s.d.engine() == EngineSQLite {
		s.reads.watch = &sqliteWatch{path: s.path}
	}
}

// ReadCacheStats returns the read cache's counts, and false when the store
// has no read cache (turned off).
func (s *Store) ReadCacheStats() (ReadCacheStats, bool) {
	if s.reads == nil {
		return ReadCacheStats{}, false
	}
	return ReadCacheStats{Hits: s.reads.hits.Load(), Misses: s.reads.misses.Load()}, true
}

// dbSnapshot is the database's state as the read cache compares it. On
// PostgreSQL, text is pg_current_snapshot() with the server's start time,
// "xmin:xmax:xip,...@start" (parsePGSnapshot); on SQLite it is
// "sqlite:generation:data_version", start the watching connection's
// generation and xmin = xmax the data_version (sqliteWatch.snapshot).
type dbSnapshot struct {
	text       string
	start      string
	xmin, xmax uint64
	inProgress int
}

// parsePGSnapshot parses snapshotQuery's result; ok is false for anything
// else, and such a snapshot is never cached under.
func parsePGSnapshot(text string) (dbSnapshot, bool) {
	snap, start, ok := strings.Cut(text, "@")
	if !ok || start == "" {
		return dbSnapshot{}, false
	}
	parts := strings.SplitN(snap, ":", 3)
	if len(parts) != 3 {
		return dbSnapshot{}, false
	}
	xmin, err1 := strconv.ParseUint(parts[0], 10, 64)
	xmax, err2 := strconv.ParseUint(parts[1], 10, 64)
	if err1 != nil || err2 != nil || xmin > xmax {
		return dbSnapshot{}, false
	}
	n := 0
	if parts[2] != "" {
		n = strings.Count(parts[2], ",") + 1
	}
	return dbSnapshot{text: text, start: start, xmin: xmin, xmax: xmax, inProgress: n}, true
}

// newerThan reports whether p was taken after q on the same server: xmax
// (one past the newest completed transaction) and xmin never go back, and
// while both stay the same, transactions only leave the in-progress list.
// A snapshot of another server start is newer: the old one's entries can
// never match again.
func (p dbSnapshot) newerThan(q dbSnapshot) bool {
	switch {
	case q.text == "":
		return true
	case p.start != q.start:
		return true
	case p.xmax != q.xmax:
		return p.xmax > q.xmax
	case p.xmin != q.xmin:
		return p.xmin > q.xmin
	}
	return p.inProgress < q.inProgress
}

// snapshotQuery reads the current snapshot; see readCache.
const snapshotQuery = `SELECT pg_current_snapshot()::text || '@' || pg_postmaster_start_time()::text`

func (c *readCache) get(snap dbSnapshot, key string) (any, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if snap.text == c.snap.text {
		if v, ok := c.entries[key]; ok {
			c.hits.Add(1)
			return v, true
		}
	}
	c.misses.Add(1)
	return nil, false
}

// put caches v, read under snap (or a later snapshot: see cachedRead).
func (c *readCache) put(snap dbSnapshot, key string, v any) {
	items := itemCount(v)
	if items > c.maxItems {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	switch {
	case snap.text == c.snap.text:
	case snap.newerThan(c.snap):
		c.snap = snap
		clear(c.entries)
		c.items = 0
	default:
		return // read under an older snapshot than the cache's
	}
	if old, ok := c.entries[key]; ok {
		c.items -= itemCount(old)
	}
	if c.items+items > c.maxItems {
		clear(c.entries)
		c.items = 0
	}
	c.entries[key] = v
	c.items += items
}

// cachedRead returns read's result, from the read cache when the
// database's snapshot is the one it was cached under. The result read on
// a miss is cached under the snapshot taken before the read: if the read
// saw a later state, some transaction completed in between, so that
// snapshot never comes again and the entry is never served. clone copies
// a result so that no caller shares (and can change) the cached one.
func cachedRead[T any](ctx context.Context, s *Store, op, key string, clone func(T) T, read func() (T, error)) (T, error) {
	c := s.reads
	if c == nil || s.tx != nil {
		return read()
	}
	snap, ok, err := s.readSnapshot(ctx)
	if err != nil {
		var zero T
		return zero, s.dbErr(op, err)
	}
	if !ok {
		return read()
	}
	if v, ok := c.get(snap, key); ok {
		return clone(v.(T)), nil
	}
	v, err := read()
	if err != nil {
		return v, err
	}
	c.put(snap, key, clone(v))
	return v, nil
}

// readSnapshot returns the database's current snapshot, or, within a read
// scope that already has one, that one; ok is false for a snapshot that
// does not parse (never cached under).
func (s *Store) readSnapshot(ctx context.Context) (dbSnapshot, bool, error) {
	sc, _ := ctx.Value(readScopeKey{}).(*readScope)
	if sc != nil {
		sc.mu.Lock()
		snap := sc.snap
		sc.mu.Unlock()
		if snap.text != "" {
			return snap, true, nil
		}
	}
	var snap dbSnapshot
	var ok bool
	s.reads.snapshots.Add(1)
	if w := s.reads.watch; w != nil {
		snap, ok = w.snapshot(ctx)
	} else {
		var text string
		if err := s.queryRow(ctx, snapshotQuery).Scan(&text); err != nil {
			return dbSnapshot{}, false, err
		}
		snap, ok = parsePGSnapshot(text)
	}
	if ok && sc != nil {
		sc.mu.Lock()
		sc.snap = snap
		sc.mu.Unlock()
	}
	return snap, ok, nil
}

// sqliteWatch reads SQLite's data_version on a connection of its own,
// opened on first use, that never writes: every commit is then another
// connection's, which is what data_version counts. It is a sql.Conn, one
// fixed connection, because the counter belongs to the connection:
// database/sql must not swap in a fresh one behind it. Any error closes
// it; the next call opens a new one under a new generation.
type sqliteWatch struct {
	path   string
	mu     sync.Mutex
	db     *sql.DB
	conn   *sql.Conn
	stmt   *sql.Stmt
	gen    uint64
	closed bool
}

func (w *sqliteWatch) snapshot(ctx context.Context) (dbSnapshot, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if w.closed {
		return dbSnapshot{}, false
	}
	if w.conn == nil && !w.open(ctx) {
		return dbSnapshot{}, false
	}
	var v uint64
	if err := w.stmt.QueryRowContext(ctx).Scan(&v); err != nil {
		// A caller that gave up says nothing about the connection: keep
		// it and its generation, or any client that hangs up would empty
		// the cache for everyone (and make the next read reopen it).
		if ctx.Err() == nil {
			w.reset()
		}
		return dbSnapshot{}, false
	}
	gen := strconv.FormatUint(w.gen, 10)
	return dbSnapshot{text: "sqlite:" + gen + ":" + strconv.FormatUint(v, 10), start: gen, xmin: v, xmax: v}, true
}

func (w *sqliteWatch) open(ctx context.Context) bool {
	db, err := sql.Open(sqliteDialect{}.driverName(), sqliteDSN(w.path))
	if err != nil {
		return false
	}
	db.SetMaxOpenConns(1)
	conn, err := db.Conn(ctx)
	if err != nil {
		_ = db.Close()
		return false
	}
	stmt, err := conn.PrepareContext(ctx, "PRAGMA data_version")
	if err != nil {
		_ = conn.Close()
		_ = db.Close()
		return false
	}
	w.db, w.conn, w.stmt = db, conn, stmt
	w.gen++
	return true
}

// reset closes the connection; mu is held.
func (w *sqliteWatch) reset() {
	if w.conn == nil {
		return
	}
	_ = w.stmt.Close()
	_ = w.conn.Close()
	_ = w.db.Close()
	w.db, w.conn, w.stmt = nil, nil, nil
}

// close closes the connection for good (Store.Close).
func (w *sqliteWatch) close() {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.reset()
	w.closed = true
}

// readScope holds the snapshot a scope's cached reads check against.
type readScope struct {
	mu   sync.Mutex
	snap dbSnapshot
}

type readScopeKey struct{}

// WithReadScope returns ctx with a read scope: the cached reads made with
// it (or a context derived from it) ask the database for its snapshot
// once, and check against that one, until this store writes with it. The
// server gives each API request one, so that the session lookup and the
// read it authorizes cost one snapshot round trip, not two.
//
// Why it is still never stale: the snapshot is taken during the request,
// after it began, so every write that completed before the request began
// is in it; the request's reads are as of one moment within its own
// duration, as reads of one transaction would be. A write the request
// itself makes (through this store, with the scope's context) ends the
// scope's snapshot when it completes, so the request reads its own
// writes. A scope must not outlive its request: it would keep serving the
// snapshot it took.
func WithReadScope(ctx context.Context) context.Context {
	return context.WithValue(ctx, readScopeKey{}, &readScope{})
}

// endReadScope forgets the scope's snapshot after a write made with ctx.
func endReadScope(ctx context.Context) {
	if sc, _ := ctx.Value(readScopeKey{}).(*readScope); sc != nil {
		sc.mu.Lock()
		sc.snap = dbSnapshot{}
		sc.mu.Unlock()
	}
}

// itemCount is an entry's size in items, for maxItems: at least 1 (an
// empty page still takes an entry).
func itemCount(v any) int {
	n := 1
	switch v := v.(type) {
	case store.Page[store.Agent]:
		n = len(v.Items)
	case store.Page[store.Namespace]:
		n = len(v.Items)
	case []store.AuditEvent:
		n = len(v)
	case sessionAccess:
		n = 1 + len(v.access.Grants) + len(v.access.Restrictions)
	case apiKeyAccess:
		n = 1 + len(v.access.Grants) + len(v.access.Restrictions)
	case store.AgentScope:
		// A configuration document can reach 48 KiB: it counts as the
		// items its size would be.
		if v.ActiveRevision != nil {
			n = 1 + len(v.ActiveRevision.Configuration)/itemBytes
		}
	}
	return max(n, 1)
}

// sessionAccess is GetSessionAccess's result, as cached.
type sessionAccess struct {
	session store.Session
	access  store.Access
}

// apiKeyAccess is GetAPIKeyAccess's result, as cached.
type apiKeyAccess struct {
	key       store.APIKey
	principal store.ServicePrincipal
	access    store.Access
}

func cloneTime(t *time.Time) *time.Time {
	if t == nil {
		return nil
	}
	c := *t
	return &c
}

func cloneAccess(a store.Access) store.Access {
	out := store.Access{Grants: slices.Clone(a.Grants), Restrictions: slices.Clone(a.Restrictions)}
	for i := range out.Grants {
		out.Grants[i].Permissions = slices.Clone(out.Grants[i].Permissions)
	}
	return out
}

func clonePage[T any](p store.Page[T]) store.Page[T] {
	out := store.Page[T]{Items: slices.Clone(p.Items)}
	if p.Next != nil {
		next := *p.Next
		out.Next = &next
	}
	return out
}

func cloneAuditEvents(events []store.AuditEvent) []store.AuditEvent {
	out := slices.Clone(events)
	for i := range out {
		out[i].Details = maps.Clone(out[i].Details)
	}
	return out
}

// cacheKey joins a read's name and arguments into its cache key, each
// part prefixed with its length, so that no two different argument lists
// (whatever bytes they hold) make the same key.
func cacheKey(parts ...string) string {
	var b strings.Builder
	for _, p := range parts {
		b.WriteString(strconv.Itoa(len(p)))
		b.WriteByte(':')
		b.WriteString(p)
	}
	return b.String()
}

func pageKey(p store.PageRequest) []string {
	if p.After == nil {
		return []string{strconv.Itoa(p.Limit)}
	}
	return []string{strconv.Itoa(p.Limit), timeKey(p.After.CreatedAt), p.After.ID}
}

// timeKey is t to the nanosecond; the zero time (no bound) is "".
func timeKey(t time.Time) string {
	if t.IsZero() {
		return ""
	}
	return strconv.FormatInt(t.UnixNano(), 10)
}
