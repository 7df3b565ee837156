package sqlstore

import (
	"context"
	"database/sql"
	"embed"
	"errors"
	"fmt"
	"io/fs"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/pressly/goose/v3"
	"github.com/pressly/goose/v3/lock"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/openclaw/occ/internal/dburl"
	"github.com/openclaw/occ/internal/errkind"
	"github.com/openclaw/occ/internal/store"
	"github.com/openclaw/occ/internal/store/auditchain"
)

//go:embed migrations/sqlite/*.sql migrations/postgres/*.sql
var migrations embed.FS

// DefaultSQLiteFile is the database file Open uses inside the data directory
// when no database URL is configured.
const DefaultSQLiteFile = "occ.db"

// Store is store.Store over database/sql. The value returned by Open owns the
// connection pool; InTx hands fn a transaction-bound copy that shares the
// dialect and runs every query on the transaction.
type Store struct {
	d     dialect
	db    *sql.DB
	q     querier // db, or tx for a transaction-bound copy
	tx    *sql.Tx // nil outside a transaction
	stmts *stmtCache
	// w is SQLite's writer: the one connection every write goes through
	// (see writer); nil on PostgreSQL.
	w *writer
	// unprepared, on a transaction-bound copy on SQLite, collects the
	// statements the transaction ran unprepared, for inTx to prepare
	// after the commit (see cached).
	unprepared *[]string
	// erase is shared by the owner and its transaction-bound copies (see
	// erase.go); erased is set on a transaction-bound copy whose
	// transaction cleared staged files.
	erase  *eraseState
	erased *bool
	// writers is shared by the owner and its copies: on SQLite, the gate
	// that this process's write transactions pass one at a time (see
	// writeGate); nil on PostgreSQL.
	writers writeGate
	// appends is shared likewise: on PostgreSQL, the gate this process's
	// audit appends in transactions of their own pass one at a time (see
	// AppendAuditEvent); nil on SQLite, whose writers gate covers them.
	appends writeGate
	// head is shared by the owner and its copies: on PostgreSQL, the
	// audit chain head as this process last committed it (chainHead);
	// nil on SQLite. appended is set on a transaction-bound copy to the
	// last link its transaction appended, which inTx gives head after
	// the commit.
	head     *chainHead
	appended *auditchain.Link
	// queued is shared by the owner and its copies: who to tell when work
	// was queued (OnWorkQueued). enqueued is set on a transaction-bound
	// copy whose transaction queued work, which is told after its commit.
	queued   *workHooks
	enqueued *bool
	// reads is the read cache (readcache.go): nil when turned off and on
	// a transaction-bound copy.
	reads *readCache
	// checkpoints is the SQLite checkpoint goroutine (checkpoint.go),
	// started by Open and stopped by Close; nil on PostgreSQL.
	checkpoints *checkpointer
	// checkpointing is shared by the owner and its copies: this process's
	// checkpoints run one at a time (walCheckpoint).
	checkpointing *sync.Mutex
	// path is the SQLite database file; empty on PostgreSQL.
	path string
	// onThisHost: the database does its work on this machine's cores
	// (SQLite, or a PostgreSQL server reached over loopback or a Unix
	// socket). See OnThisHost.
	onThisHost bool
}

// writeGate makes this process's writers queue in Go, in arrival order,
// instead of on the database's own lock. On SQLite (Store.writers) a
// writer that finds the write lock taken sleeps in the busy handler for
// 1, 2, 5, 10, … ms before it looks again, however soon the lock is free
// (a write transaction holds it for about 0.3 ms), so with a dozen
// concurrent writers most of a write's time was sleeping with the lock
// free; the busy handler still covers other processes that write the same
// file (occ migrate). On PostgreSQL (Store.appends) it orders this
// process's audit appends before the chain head's row lock
// (AppendAuditEvent). Waiters on a channel are woken in order the moment
// it is released. A buffered channel of one; nil is no gate.
type writeGate chan struct{}

// acquire waits for the gate or the end of ctx.
func (g writeGate) acquire(ctx context.Context) error {
	if g == nil {
		return nil
	}
	select {
	case g <- struct{}{}:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	}
}

func (g writeGate) release() {
	if g != nil {
		<-g
	}
}

// stmtCache holds SQLite prepared statements by query text, so that a
// statement is parsed once per connection instead of on every call
// (parsing was the largest CPU cost of a request, and a seventh of a
// workspace file PUT's CPU was parsing its audit appends; pgx already
// caches statements per connection on PostgreSQL). It holds at most
// maxCachedStmts: queries built from filters (the audit log) have a
// bounded number of shapes, and past the bound queries simply run
// unprepared. Migrate empties it, since a schema change can invalidate
// what was prepared.
type stmtCache struct {
	mu sync.Mutex
	m  map[string]*sql.Stmt
}

const maxCachedStmts = 256

// lookup returns the cached statement for query, or nil.
func (c *stmtCache) lookup(query string) *sql.Stmt {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.m[query]
}

// stmt returns the cached statement for query, preparing it on first use;
// nil (run unprepared) when the cache is full or preparing fails, in which
// case running the query reports the error.
func (c *stmtCache) stmt(ctx context.Context, db *sql.DB, query string) *sql.Stmt {
	c.mu.Lock()
	st, ok := c.m[query]
	full := len(c.m) >= maxCachedStmts
	c.mu.Unlock()
	if ok || full {
		return st
	}
	st, err := db.PrepareContext(ctx, query)
	if err != nil {
		return nil
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if prev, ok := c.m[query]; ok { // prepared meanwhile by another caller
		st.Close()
		return prev
	}
	c.m[query] = st
	return st
}

func (c *stmtCache) reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, st := range c.m {
		st.Close()
	}
	c.m = map[string]*sql.Stmt{}
}

// writer is SQLite's pool of one connection for writes: every
// transaction and every write outside one runs on it, with its own
// statement cache. The write gate lets one write at a time through
// anyway; on one connection, each write finds the pages the previous
// one read still in its page cache, which SQLite empties in a connection
// that finds the file changed by another since its last transaction (it
// was every write's B-tree pages read again with a system call each,
// since writes took whichever pooled connection was free).
type writer struct {
	db    *sql.DB
	stmts *stmtCache
}

func openWriter(d dialect, dsn string) (*writer, error) {
	db, err := sql.Open(d.driverName(), dsn)
	if err != nil {
		return nil, err
	}
	db.SetMaxOpenConns(1)
	db.SetMaxIdleConns(1)
	return &writer{db: db, stmts: &stmtCache{m: map[string]*sql.Stmt{}}}, nil
}

// writeDB is the pool transactions and writes outside them run on, and
// its statement cache.
func (s *Store) writeDB() (*sql.DB, *stmtCache) {
	if s.w != nil {
		return s.w.db, s.w.stmts
	}
	return s.db, s.stmts
}

var _ store.Store = (*Store)(nil)

// querier is what *sql.DB and *sql.Tx have in common.
type querier interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
	QueryContext(ctx context.Context, query string, args ...any) (*sql.Rows, error)
	QueryRowContext(ctx context.Context, query string, args ...any) *sql.Row
}

// Open connects to the database named by databaseURL:
//
//   - "" : the SQLite file <dataDir>/occ.db; dataDir is created with mode 0700
//     if missing (an existing directory keeps its mode).
//   - postgres://... or postgresql://... : PostgreSQL (any pgx URL option).
//   - sqlite:///absolute/path : SQLite at that path.
//   - file:path, file:///absolute/path : SQLite at that path (relative paths
//     are resolved against the working directory). Query parameters are
//     refused: the store sets its own connection pragmas.
//
// Open pings the database, so an unreachable server fails here rather than
// on the first request. It does not migrate; call Migrate. Error messages
// never contain the URL's password.
func Open(ctx context.Context, databaseURL, dataDir string) (*Store, error) {
	var (
		d        dialect
		dsn      string
		display  string   // what error messages may say about the target
		secrets  []string // strings that must never appear in an error
		lowerURL = strings.ToLower(databaseURL)
		// sqliteFile is the SQLite database file; empty on PostgreSQL.
		sqliteFile string
		onThisHost = true
	)
	switch {
	case databaseURL == "":
		if dataDir == "" {
			return nil, errors.New("sqlstore: no database URL and no data directory")
		}
		if err := os.MkdirAll(dataDir, 0o700); err != nil {
			return nil, fmt.Errorf("sqlstore: create data directory: %w", err)
		}
		path, err := filepath.Abs(filepath.Join(dataDir, DefaultSQLiteFile))
		if err != nil {
			return nil, fmt.Errorf("sqlstore: resolve database path: %w", err)
		}
		if err := createPrivate(path); err != nil {
			return nil, err
		}
		d, dsn, display, sqliteFile = sqliteDialect{}, sqliteDSN(path), path, path
	case strings.HasPrefix(lowerURL, "postgres://"), strings.HasPrefix(lowerURL, "postgresql://"):
		var err error
		display, secrets, err = redactPostgresURL(databaseURL)
		if err != nil {
			return nil, err
		}
		d, dsn = postgresDialect{}, databaseURL
		onThisHost = postgresOnThisHost(databaseURL)
	case strings.HasPrefix(lowerURL, "sqlite:"), strings.HasPrefix(lowerURL, "file:"):
		path, err := sqlitePath(databaseURL)
		if err != nil {
			return nil, err
		}
		if err := createPrivate(path); err != nil {
			return nil, err
		}
		d, dsn, display, sqliteFile = sqliteDialect{}, sqliteDSN(path), path, path
	default:
		return nil, fmt.Errorf("sqlstore: unsupported database URL scheme %q: use postgres://, postgresql://, sqlite:///path or file:path",
			urlScheme(databaseURL))
	}

	db, err := sql.Open(d.driverName(), dsn)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: open %s database %s: %w", d.engine(), display, scrub(err, secrets))
	}
	d.configure(db)
	if err := db.PingContext(ctx); err != nil {
		_ = db.Close()
		return nil, &errkind.Error{
			Kind:    errkind.Unavailable,
			Message: "database unavailable",
			Cause:   fmt.Errorf("sqlstore: connect to %s database %s: %w", d.engine(), display, scrub(err, secrets)),
		}
	}
	st := &Store{d: d, db: db, q: db, stmts: &stmtCache{m: map[string]*sql.Stmt{}}, erase: &eraseState{}, queued: &workHooks{}, checkpointing: &sync.Mutex{},
		path: sqliteFile, onThisHost: onThisHost}
	if d.engine() == EngineSQLite {
		if st.w, err = openWriter(d, dsn); err != nil {
			_ = db.Close()
			return nil, fmt.Errorf("sqlstore: open %s database %s: %w", d.engine(), display, err)
		}
		st.writers = make(writeGate, 1)
		st.startCheckpoints()
	} else {
		st.appends = make(writeGate, 1)
		st.head = &chainHead{}
	}
	st.SetReadCacheItems(DefaultReadCacheItems)
	return st, nil
}

// OnThisHost reports whether the database works on this machine's cores:
// always on SQLite (a library in this process), and on PostgreSQL when
// every host of the URL (with its fallbacks) is a loopback address,
// "localhost" or a Unix socket directory. Callers size their concurrency
// by it: a database server on this host competes with this process for
// the same cores (server.DefaultMaxRequestsInFlight).
func (s *Store) OnThisHost() bool { return s.onThisHost }

// createPrivate creates the SQLite database file with mode 0600 when it
// does not exist yet. SQLite would create it with 0644 (less the umask),
// and it gives the WAL and shared-memory files the database file's mode;
// the file holds password and key hashes and staged workspace files, so
// none of the three may be readable by others, whatever the directory's
// mode. An existing file keeps its mode (docs/reliability.md).
func createPrivate(path string) error {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o600)
	if errors.Is(err, fs.ErrExist) {
		return nil
	}
	if err != nil {
		return fmt.Errorf("sqlstore: create database file: %w", err)
	}
	return f.Close()
}

// ExposedFile is a database file that users other than its owner may
// read or write.
type ExposedFile struct {
	Path string
	Mode fs.FileMode // the permission bits
}

// ExposedFiles returns the SQLite database file and its WAL and
// shared-memory files (those that exist) whose permissions give the
// file's group or other users any access; none on PostgreSQL. Open
// creates a new database 0600 and SQLite gives the other two the
// database's mode, but a database made before that, or copied in with a
// looser mode, keeps it: those files hold password and key hashes and
// the staged persona files, so the caller warns (occ server and occ
// worker log each one). A file that cannot be examined is an error.
func (s *Store) ExposedFiles() ([]ExposedFile, error) {
	if s.path == "" {
		return nil, nil
	}
	var out []ExposedFile
	for _, p := range []string{s.path, s.path + "-wal", s.path + "-shm"} {
		fi, err := os.Stat(p)
		if errors.Is(err, fs.ErrNotExist) {
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("sqlstore: examine database file: %w", err)
		}
		if perm := fi.Mode().Perm(); perm&0o077 != 0 {
			out = append(out, ExposedFile{Path: p, Mode: perm})
		}
	}
	return out, nil
}

// sqlitePath extracts the file path from a sqlite: or file: URL.
func sqlitePath(raw string) (string, error) {
	lower := strings.ToLower(raw)
	var path string
	switch {
	case strings.HasPrefix(lower, "sqlite:"):
		// Only the absolute form: "sqlite://relative" would make "relative" a
		// host name, which is always a mistake.
		if !strings.HasPrefix(lower, "sqlite:///") {
			return "", errors.New("sqlstore: a sqlite URL must be sqlite:///absolute/path")
		}
		u, err := url.Parse(raw)
		if err != nil || u.Host != "" || u.User != nil {
			return "", errors.New("sqlstore: malformed sqlite URL; want sqlite:///absolute/path")
		}
		if u.RawQuery != "" || u.Fragment != "" {
			return "", errors.New("sqlstore: sqlite URL parameters are not supported; the store sets its own pragmas")
		}
		path = u.Path
	default: // file:
		rest := raw[len("file:"):]
		if strings.HasPrefix(rest, "//") {
			u, err := url.Parse(raw)
			if err != nil || (u.Host != "" && u.Host != "localhost") || u.User != nil {
				return "", errors.New("sqlstore: malformed file URL; want file:///absolute/path or file:path")
			}
			if u.RawQuery != "" || u.Fragment != "" {
				return "", errors.New("sqlstore: file URL parameters are not supported; the store sets its own pragmas")
			}
			path = u.Path
		} else {
			if strings.ContainsAny(rest, "?#") {
				return "", errors.New("sqlstore: file URL parameters are not supported; the store sets its own pragmas")
			}
			path = rest
		}
	}
	if path == "" || strings.HasSuffix(path, "/") {
		return "", errors.New("sqlstore: the database URL names no file")
	}
	abs, err := filepath.Abs(path)
	if err != nil {
		return "", fmt.Errorf("sqlstore: resolve database path: %w", err)
	}
	return abs, nil
}

// errAmbiguousPostgresURL refuses a URL whose user information url.Parse
// and pgx would read differently; it never quotes the URL.
var errAmbiguousPostgresURL = errors.New("sqlstore: the PostgreSQL URL postgres://(not shown) cannot be read unambiguously: " +
	"percent-encode each /, ?, # and @ in its user name and password (as %2F, %3F, %23 and %40)")

// redactPostgresURL returns a printable form of a PostgreSQL URL without its
// password, and the secrets to scrub from driver errors. url.Parse's own
// error text quotes the whole URL, so it is never passed on.
//
// A URL that url.Parse reads differently from pgx (which follows libpq) is
// refused before pgx sees it, as redaction cannot be trusted for it:
//
//   - An unencoded /, ? or # in the password ends url.Parse's authority
//     early: "occ:1234/s3cret@db" or "occ:/s3cret@db" parses as host occ
//     with port 1234 (or none) and no user, so Redacted hides nothing, and
//     pgx, which sees no user information before a '/' either, connects to
//     the wrong host and quotes the rest, password included, as the
//     database name in its error. Any '@' after "://" with no user found
//     is taken as this case; an '@' meant elsewhere is written %40.
//   - A second '@' before the path: url.Parse splits at the last one, pgx
//     at the first, so pgx would take the password's tail for the host.
//
// internal/config's showableURL applies the same rule, so "occ server"
// refuses such a URL before it logs anything.
func redactPostgresURL(raw string) (string, []string, error) {
	if _, err := url.Parse(raw); err != nil {
		return "", nil, errors.New("sqlstore: malformed PostgreSQL URL (not shown); percent-encode each /, ?, # and @ in its user name and password")
	}
	u, ok := dburl.Parse(raw)
	if !ok {
		return "", nil, errAmbiguousPostgresURL
	}
	var secrets []string
	if pw, ok := u.User.Password(); ok && pw != "" {
		secrets = append(secrets, pw, url.PathEscape(pw), url.QueryEscape(pw), url.UserPassword("", pw).String()[1:])
	}
	// Every query value whose key names a password (password, and
	// sslpassword, the client key's passphrase) is masked; pgx takes
	// both from the query.
	q := u.Query()
	masked := false
	for k, vs := range q {
		if !strings.Contains(strings.ToLower(k), "password") {
			continue
		}
		for _, v := range vs {
			if v != "" {
				secrets = append(secrets, v, url.QueryEscape(v))
			}
		}
		q[k] = []string{"xxxxx"}
		masked = true
	}
	if masked {
		u.RawQuery = q.Encode()
	}
	return u.Redacted(), secrets, nil
}

// scrub returns err, or a copy of its text with every secret replaced when
// the driver echoed one (pgx documents its redaction as best effort). The
// copy loses the error chain; that is the price of never leaking it.
func scrub(err error, secrets []string) error {
	msg := err.Error()
	leaked := false
	for _, s := range secrets {
		if s != "" && strings.Contains(msg, s) {
			msg = strings.ReplaceAll(msg, s, "xxxxx")
			leaked = true
		}
	}
	if !leaked {
		return err
	}
	return errors.New(msg)
}

// urlScheme returns the scheme of raw for error messages, never more of it.
func urlScheme(raw string) string {
	i := strings.Index(raw, ":")
	if i <= 0 {
		return ""
	}
	scheme := raw[:i]
	for _, c := range scheme {
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '+' || c == '-' || c == '.') {
			return ""
		}
	}
	return scheme
}

// Engine is "sqlite" or "postgres".
func (s *Store) Engine() string { return s.d.engine() }

// DB is the underlying pool, for tests that must reach past the Store (raw
// SQL against the schema's constraints). Application code never uses it.
func (s *Store) DB() *sql.DB { return s.db }

// SetMaxConnections caps the connections the pool holds open (n >= 1),
// and keeps up to n of them open while idle (each is closed after five
// idle minutes). Keeping fewer idle than open made the pool churn under
// load: with more requests in flight than idle slots, every returned
// connection beyond them was closed and the next query opened a new one
// (on PostgreSQL a new backend process, several milliseconds; it was the
// 60-70 ms p99 of every API row in docs/performance.md). A query that finds all n busy waits for one until its context
// ends (then fails with the context's error, mapped to 503 by the caller's
// error kinds) instead of opening another. Open leaves the pool unbounded,
// as database/sql does, for short-lived tools.
func (s *Store) SetMaxConnections(n int) {
	if n < 1 {
		n = 1
	}
	s.db.SetMaxOpenConns(n)
	s.db.SetMaxIdleConns(n)
}

// Close releases the pool. Only the owner of the Store returned by Open
// calls it; a transaction-bound copy refuses.
func (s *Store) Close() error {
	if s.tx != nil {
		return errors.New("sqlstore: Close called on a transaction-bound store")
	}
	s.stopCheckpoints()
	s.stmts.reset()
	if s.reads != nil && s.reads.watch != nil {
		s.reads.watch.close()
	}
	if s.w != nil {
		s.w.stmts.reset()
		_ = s.w.db.Close()
	}
	return s.db.Close()
}

// Migrate applies every pending migration of the engine. On PostgreSQL a
// session advisory lock serialises concurrent migrators (several replicas
// starting at once); SQLite's write lock does the same for one file. Each
// migration runs in its own transaction, so a failure leaves the schema at
// the last complete version.
func (s *Store) Migrate(ctx context.Context) error {
	p, err := s.migrationProvider()
	if err != nil {
		return err
	}
	if _, err := p.Up(ctx); err != nil {
		return fmt.Errorf("sqlstore: migrate %s: %w", s.d.engine(), err)
	}
	return nil
}

func (s *Store) migrationProvider() (*goose.Provider, error) {
	if s.tx != nil {
		return nil, errors.New("sqlstore: migrations cannot run inside a transaction")
	}
	s.stmts.reset()
	if s.w != nil {
		s.w.stmts.reset()
	}
	fsys, err := fs.Sub(migrations, "migrations/"+s.d.engine())
	if err != nil {
		return nil, fmt.Errorf("sqlstore: migrations: %w", err)
	}
	opts := []goose.ProviderOption{
		goose.WithDisableGlobalRegistry(true), // only this package's SQL files
		goose.WithLogger(goose.NopLogger()),
	}
	if s.d.engine() == EnginePostgres {
		locker, err := lock.NewPostgresSessionLocker()
		if err != nil {
			return nil, fmt.Errorf("sqlstore: migration lock: %w", err)
		}
		opts = append(opts, goose.WithSessionLocker(locker))
	}
	p, err := goose.NewProvider(s.d.gooseDialect(), s.db, fsys, opts...)
	if err != nil {
		return nil, fmt.Errorf("sqlstore: migrations: %w", err)
	}
	return p, nil
}

// InTx runs fn in one transaction with a transaction-bound copy of the
// store. A nested call (on the copy) joins the outer transaction: it neither
// commits nor rolls back, and its error reaches the outer fn, which decides.
// If fn returns an error or panics, the transaction is rolled back. On
// PostgreSQL a failed statement aborts the whole transaction, so fn should
// return the first database error rather than carry on.
func (s *Store) InTx(ctx context.Context, fn func(tx store.Store) error) error {
	return s.inTx(ctx, func(tx *Store) error { return fn(tx) })
}

func (s *Store) inTx(ctx context.Context, fn func(tx *Store) error) error {
	if s.tx != nil {
		return fn(s)
	}
	// Every SQLite transaction is a write transaction (_txlock=immediate),
	// so each passes the write gate; it is held until commit or rollback.
	if err := s.writers.acquire(ctx); err != nil {
		return s.dbErr("begin transaction", err)
	}
	held := true
	defer func() {
		if held {
			s.writers.release()
		}
	}()
	_, span := s.span(ctx, "BEGIN")
	db, stmts := s.writeDB()
	tx, err := db.BeginTx(ctx, nil)
	endSpan(span, err)
	if err != nil {
		return s.dbErr("begin transaction", err)
	}
	done := false
	defer func() {
		if !done { // fn failed or panicked
			_ = tx.Rollback()
		}
	}()
	erased, enqueued := false, false
	var unprepared []string
	var appended auditchain.Link
	if err := fn(&Store{d: s.d, db: s.db, w: s.w, q: tx, tx: tx, stmts: stmts, unprepared: &unprepared, erase: s.erase, erased: &erased, checkpointing: s.checkpointing,
		head: s.head, appended: &appended,
		writers: s.writers, appends: s.appends, queued: s.queued, enqueued: &enqueued}); err != nil {
		return err
	}
	done = true
	_, span = s.span(ctx, "COMMIT")
	err = tx.Commit()
	endSpan(span, err)
	held = false
	s.writers.release()
	endReadScope(ctx) // also when the outcome is unknown
	if err != nil {
		// The server may have applied a commit whose reply was lost.
		if s.d.commitOutcomeUnknown(err) {
			return &errkind.Error{Kind: errkind.OutcomeUnknown, Message: "the transaction may or may not have been committed", Cause: err}
		}
		return s.dbErr("commit transaction", err)
	}
	s.afterCommit(ctx, erased)
	if appended.Seq != 0 {
		s.head.advance(appended)
	}
	if enqueued {
		s.queued.tell()
	}
	// Prepared now, holding no connection, for the next transaction; a
	// failure only leaves the statement unprepared.
	for _, q := range unprepared {
		stmts.stmt(ctx, db, q)
	}
	return nil
}

// exec, query and queryRow rebind the "?" placeholders for the engine.
// exec, query and queryRow are the only ways SQL reaches the database, so
// each is one client span when the context carries a recording span (else
// a context lookup, nothing more). The span carries the engine and the
// statement's text, which is constant SQL with placeholders: argument
// values, which can be secrets' hashes or workspace content, are never
// recorded.
// On SQLite, exec, query and queryRow run a cached prepared statement
// (stmtCache), and in a transaction exec and queryRow do (see cached).
// Only exec and inTx pass the SQLite write gate: a write that reads its
// result back (UPDATE ... RETURNING) goes through query or queryRow, so it
// runs inside inTx (TestWriteGateCoversEveryWrite).
func (s *Store) exec(ctx context.Context, query string, args ...any) (sql.Result, error) {
	ctx, span := s.span(ctx, query)
	if s.tx == nil {
		// A write in its own transaction passes the write gate too.
		if err := s.writers.acquire(ctx); err != nil {
			endSpan(span, err)
			return nil, err
		}
		defer s.writers.release()
	}
	q, db, stmts := s.q, s.db, s.stmts
	if _, pooled := q.(*sql.DB); pooled {
		db, stmts = s.writeDB() // a write outside a transaction runs on the writer too
		q = db
	}
	var res sql.Result
	var err error
	if st := s.cachedOn(ctx, q, db, stmts, query, true); st != nil {
		res, err = st.ExecContext(ctx, args...)
	} else {
		res, err = q.ExecContext(ctx, s.d.rebind(query), args...)
	}
	endSpan(span, err)
	if s.tx == nil {
		endReadScope(ctx) // a write of its own: see WithReadScope
	}
	return res, err
}

func (s *Store) query(ctx context.Context, query string, args ...any) (*sql.Rows, error) {
	ctx, span := s.span(ctx, query)
	var rows *sql.Rows
	var err error
	if st := s.cached(ctx, query, false); st != nil {
		rows, err = st.QueryContext(ctx, args...)
	} else {
		rows, err = s.q.QueryContext(ctx, s.d.rebind(query), args...)
	}
	endSpan(span, err)
	s.endReadScopeAfter(ctx, query)
	return rows, err
}

// endReadScopeAfter ends ctx's read scope (see WithReadScope) after a
// statement outside a transaction that may have written: one that does
// not start with SELECT or WITH, or names INSERT, UPDATE or DELETE (the
// store writes SQL keywords in capitals). The store's RETURNING writes
// run in transactions, whose commit ends it; this is the backstop for
// one that does not.
func (s *Store) endReadScopeAfter(ctx context.Context, query string) {
	if s.tx == nil && s.reads != nil && mayWrite(query) {
		endReadScope(ctx)
	}
}

func mayWrite(query string) bool {
	q := strings.TrimLeft(query, " \t\n")
	if !strings.HasPrefix(q, "SELECT") && !strings.HasPrefix(q, "WITH") {
		return true
	}
	return strings.Contains(q, "INSERT ") || strings.Contains(q, "UPDATE ") || strings.Contains(q, "DELETE ")
}

func (s *Store) queryRow(ctx context.Context, query string, args ...any) *sql.Row {
	ctx, span := s.span(ctx, query)
	var row *sql.Row
	if st := s.cached(ctx, query, true); st != nil {
		row = st.QueryRowContext(ctx, args...)
	} else {
		row = s.q.QueryRowContext(ctx, s.d.rebind(query), args...)
	}
	endSpan(span, row.Err())
	s.endReadScopeAfter(ctx, query)
	return row
}

// tracer holds the trace.Tracer of SetTracerProvider; unset, the store
// makes no spans. It is process-wide like the OpenTelemetry global
// provider, which this package cannot use: the otel package depends on
// net/http, and the store must not (docs/architecture.md).
var tracer atomic.Pointer[trace.Tracer]

// SetTracerProvider makes the store start its spans with tp: call it once
// at start, after the tracing set-up, with the provider the rest of the
// process uses. A later call replaces it, whatever its type.
func SetTracerProvider(tp trace.TracerProvider) {
	tr := tp.Tracer("github.com/openclaw/occ/internal/store/sqlstore")
	tracer.Store(&tr)
}

func (s *Store) span(ctx context.Context, query string) (context.Context, trace.Span) {
	if !trace.SpanFromContext(ctx).IsRecording() {
		return ctx, nil // no trace to join: skip the attribute work
	}
	p := tracer.Load()
	if p == nil {
		return ctx, nil
	}
	tr := *p
	op, _, _ := strings.Cut(strings.TrimSpace(query), " ")
	return tr.Start(ctx, "db."+strings.ToLower(op), trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(attribute.String("db.system.name", s.d.engine()), attribute.String("db.operation.name", strings.ToUpper(op)),
			attribute.String("db.query.text", query)))
}

func endSpan(span trace.Span, err error) {
	if span == nil {
		return
	}
	if err != nil && !errors.Is(err, sql.ErrNoRows) {
		span.SetStatus(codes.Error, "database error") // the driver's text may quote values
	}
	span.End()
}

// QueueDepth counts the work items in the non-final states (queued,
// running), for the queue-depth metric. It is not part of store.Store:
// only the metrics collector calls it, as the process, with no subject.
func (s *Store) QueueDepth(ctx context.Context) (map[string]int64, error) {
	rows, err := s.query(ctx, `SELECT state, count(*) FROM controller_work WHERE state IN (?, ?) GROUP BY state`,
		string(store.WorkQueued), string(store.WorkRunning))
	if err != nil {
		return nil, s.dbErr("count work", err)
	}
	defer rows.Close()
	out := map[string]int64{}
	for rows.Next() {
		var state string
		var n int64
		if err := rows.Scan(&state, &n); err != nil {
			return nil, s.dbErr("count work", err)
		}
		out[state] = n
	}
	if err := rows.Err(); err != nil {
		return nil, s.dbErr("count work", err)
	}
	return out, nil

}

// cached returns the prepared statement to run query with on SQLite, or
// nil to run it unprepared (on PostgreSQL, where pgx caches statements
// itself, and under a test's recording querier, which sees every query).
//
// Outside a transaction it is the store's statement, which database/sql
// prepares on each pooled connection at its first use there. Inside one it
// is that statement bound to the transaction (Tx.StmtContext reuses what
// is already prepared on the transaction's connection). Only exec and
// queryRow use it in a transaction (inTx is true): exec steps the
// statement to its end within the call, and every queryRow's row is
// scanned (which resets the statement) before the store runs anything
// else, so neither can reset a result set of the same statement still
// being read on that connection, as a query's open rows could. A
// statement not prepared yet is not prepared inside the
// transaction, since preparing takes a second pooled connection, which
// with every connection busy (one, on a pool of one) would wait on the one
// the transaction holds; it runs unprepared and inTx prepares it after the
// commit, for the next transaction.
func (s *Store) cached(ctx context.Context, query string, inTx bool) *sql.Stmt {
	return s.cachedOn(ctx, s.q, s.db, s.stmts, query, inTx)
}

// cachedOn is cached for a statement run on q, which is db (whose
// statements stmts holds) or a transaction on it.
func (s *Store) cachedOn(ctx context.Context, q querier, db *sql.DB, stmts *stmtCache, query string, inTx bool) *sql.Stmt {
	if stmts == nil || s.d.engine() != EngineSQLite {
		return nil
	}
	switch q := q.(type) {
	case *sql.DB:
		return stmts.stmt(ctx, db, query)
	case *sql.Tx:
		if !inTx {
			return nil
		}
		st := stmts.lookup(query)
		if st == nil {
			if s.unprepared != nil && len(*s.unprepared) < maxCachedStmts {
				*s.unprepared = append(*s.unprepared, query)
			}
			return nil
		}
		return q.StmtContext(ctx, st)
	}
	return nil
}

// t encodes a time argument for the engine.
func (s *Store) t(v time.Time) any { return s.d.timeArg(v) }

// execOne runs a statement that must touch exactly one row; none is NotFound.
func (s *Store) execOne(ctx context.Context, op, what string, query string, args ...any) error {
	res, err := s.exec(ctx, query, args...)
	if err != nil {
		return s.dbErr(op, err)
	}
	n, err := res.RowsAffected()
	if err != nil {
		return s.dbErr(op, err)
	}
	if n == 0 {
		return notFound(what)
	}
	return nil
}

// exists runs a query that selects at most one row and reports whether it did.
func (s *Store) exists(ctx context.Context, op string, query string, args ...any) (bool, error) {
	var one int
	err := s.queryRow(ctx, query, args...).Scan(&one)
	if errors.Is(err, sql.ErrNoRows) {
		return false, nil
	}
	if err != nil {
		return false, s.dbErr(op, err)
	}
	return true, nil
}

// notFound is the NotFound error for one kind of record.
func notFound(what string) error {
	return errkind.Newf(errkind.NotFound, "%s not found", what)
}

// conflict is a Conflict with a public message, keeping the driver error.
func conflict(code, msg string, cause error) error {
	return &errkind.Error{Kind: errkind.Conflict, Code: code, Message: msg, Cause: cause}
}

// dbErr classifies a database error from operation op ("create agent"). The
// public message names the operation and the rule class only: driver text
// can quote values and stays in Cause, for logs.
func (s *Store) dbErr(op string, err error) error {
	if err == nil || errkind.As(err) != nil {
		return err
	}
	switch s.d.classify(err) {
	case failUnique:
		return conflict("", op+": a record with the same identity already exists", err)
	case failForeignKey:
		return conflict("", op+": a referenced record does not exist, or the record is still referenced", err)
	case failRule:
		return conflict("", op+": refused by a lifecycle rule of the database", err)
	case failCheck:
		return errkind.Wrap(errkind.Invalid, op+": a value is not allowed by the database schema", err)
	case failBusy:
		return errkind.Wrap(errkind.Unavailable, op+": database busy or unavailable", err)
	}
	return fmt.Errorf("sqlstore: %s: %w", op, err)
}

// rowScanner is *sql.Row or *sql.Rows.
type rowScanner interface{ Scan(dest ...any) error }

// getErr maps sql.ErrNoRows to NotFound for what, and classifies the rest.
func (s *Store) getErr(op, what string, err error) error {
	if errors.Is(err, sql.ErrNoRows) {
		return notFound(what)
	}
	return s.dbErr(op, err)
}

// list runs a query and scans every row with scan. It returns an empty,
// non-nil slice when there are no rows, so JSON encodes [] rather than null.
func list[T any](ctx context.Context, s *Store, op string, scan func(rowScanner) (T, error), query string, args ...any) ([]T, error) {
	return listCap(ctx, s, op, scan, 0, query, args...)
}

// listCap is list with room for n rows from the start: a page knows how
// many it reads at most, and growing the slice row by row was 7 % of
// reading a page of 100 Agents.
func listCap[T any](ctx context.Context, s *Store, op string, scan func(rowScanner) (T, error), n int, query string, args ...any) ([]T, error) {
	out, err := readRows(ctx, s, scan, n, query, args...)
	return out, s.dbErr(op, err)
}

// listOrdered is listCap for a query whose rows come in the order after
// gives (after(a, b): b follows a). On SQLite a select list marked
// packed() is read as one value for the whole result (packed.go), and
// column by column when a value holds a separator.
func listOrdered[T any](ctx context.Context, s *Store, op string, scan func(rowScanner) (T, error), after func(a, b T) bool,
	n int, query string, args ...any) ([]T, error) {
	if s.d.engine() == EngineSQLite {
		if page, ok := pageQuery(query); ok {
			out, err := readPage(ctx, s, scan, after, page, args...)
			if !errors.Is(err, errUnpacked) {
				return out, s.dbErr(op, err)
			}
		}
	}
	return listCap(ctx, s, op, scan, n, query, args...)
}

// readRows runs a query and scans every row with scan.
func readRows[T any](ctx context.Context, s *Store, scan func(rowScanner) (T, error), n int, query string, args ...any) ([]T, error) {
	rows, err := s.query(ctx, query, args...)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	out := make([]T, 0, n)
	for rows.Next() {
		v, err := scan(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, v)
	}
	if err := rows.Err(); err != nil {
		return nil, err
	}
	return out, nil
}

// rowDest gives the Scan destinations that read one row into *t.
type rowDest[T any] func(t *T) []any

// into is the scan function of the lists read most (a page of Agents,
// Namespaces, audit events), for one query: every row is read into one T
// whose destinations are bound once, and copied out of it. A scan
// function that declares its own T per row has that T, its []any of
// destinations and every converted field escape to the heap on every row
// (Scan is an interface call): 4 of an Agent row's 14 allocations.
func into[T any](dest rowDest[T]) func(rowScanner) (T, error) {
	var zero T
	cur := new(T)
	d := dest(cur)
	return func(r rowScanner) (T, error) {
		*cur = zero // a NULL leaves some destinations as they were
		err := r.Scan(d...)
		return *cur, err
	}
}

// listPage reads one page of a list ordered by (created_at, id): base is
// the SELECT with its WHERE clause (or none: where is then "WHERE"), key
// gives an item's position. It reads one row more than the page to know
// whether a next page exists. The cursor condition is the row value
// (created_at, id) > (?, ?), which both engines turn into a seek in the
// (…, created_at, id) index to the cursor itself (TestHotQueryPlans):
// spelled as (a > ? OR (a = ? AND id > ?)), SQLite walks the index from
// the start of the Namespace and filters, so a late page costs as much as
// all the pages before it; led by created_at >= ?, it seeks to the
// cursor's time and filters the rest of the page by the OR. A limit
// outside 1..store.MaxPageSize is Invalid.
func listPage[T any](ctx context.Context, s *Store, op string, scan func(rowScanner) (T, error), key func(T) store.PageCursor,
	base, where string, p store.PageRequest, args ...any) (store.Page[T], error) {
	if p.Limit < 1 || p.Limit > store.MaxPageSize {
		return store.Page[T]{}, errkind.Newf(errkind.Invalid, "the page size must be between 1 and %d", store.MaxPageSize)
	}
	q := base
	if p.After != nil {
		q += " " + where + " (created_at, id) > (?, ?)"
		args = append(args, s.t(p.After.CreatedAt), p.After.ID)
	}
	q += " ORDER BY created_at, id LIMIT ?"
	args = append(args, p.Limit+1)
	after := func(a, b T) bool {
		ka, kb := key(a), key(b)
		c := ka.CreatedAt.Compare(kb.CreatedAt)
		return c < 0 || c == 0 && ka.ID < kb.ID
	}
	items, err := listOrdered(ctx, s, op, scan, after, p.Limit+1, q, args...)
	if err != nil {
		return store.Page[T]{}, err
	}
	out := store.Page[T]{Items: items}
	if len(items) > p.Limit {
		out.Items = items[:p.Limit]
		next := key(items[p.Limit-1])
		out.Next = &next
	}
	return out, nil
}
