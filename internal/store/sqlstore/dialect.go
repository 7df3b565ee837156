package sqlstore

import (
	"context"
	"database/sql"
	"database/sql/driver"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/netip"
	"net/url"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/pgconn"
	_ "github.com/jackc/pgx/v5/stdlib" // registers database/sql driver "pgx"
	"github.com/pressly/goose/v3"
	"modernc.org/sqlite"
	sqlite3 "modernc.org/sqlite/lib"

	"github.com/openclaw/occ/internal/store"
)

// This file holds every difference between the two engines. The rest of the
// package writes one query per operation with "?" placeholders and passes
// times, JSON and optional values through the helpers below.

// Engine names, as returned by Store.Engine.
const (
	EngineSQLite   = "sqlite"
	EnginePostgres = "postgres"
)

// sqliteTimeLayout is how SQLite stores times: fixed width, UTC, microseconds.
// Fixed width makes text order equal time order, so comparisons and ORDER BY
// on time columns work on the raw TEXT.
const sqliteTimeLayout = "2006-01-02T15:04:05.000000Z"

// sqliteBusyTimeout is how long a SQLite writer waits for the write lock
// before failing with SQLITE_BUSY (reported as errkind.Unavailable). Writes
// are short, so reaching it means something holds a transaction far too long.
const sqliteBusyTimeout = 10 * time.Second

// dialect is one engine's behaviour.
type dialect interface {
	engine() string
	driverName() string
	gooseDialect() goose.Dialect
	// configure sets pool limits after sql.Open.
	configure(db *sql.DB)
	// maxIdle is how many idle connections the pool keeps.
	maxIdle() int
	// rebind turns a query written with "?" placeholders into the engine's.
	rebind(query string) string
	// timeArg encodes a time for a query argument, in UTC truncated to
	// microseconds.
	timeArg(t time.Time) any
	// classify says which kind of failure a driver error is.
	classify(err error) failure
	// forShare, forUpdate and forUpdateSkipLocked are row-lock clauses
	// appended to a SELECT. SQLite has none and needs none: every
	// transaction starts with BEGIN IMMEDIATE and so holds the database's
	// single write lock until it ends.
	forShare() string
	forUpdate() string
	forUpdateSkipLocked() string
	// commitOutcomeUnknown reports whether a failed COMMIT may still have
	// been applied (the reply was lost), so the caller must not assume
	// either outcome.
	commitOutcomeUnknown(err error) bool
}

// failure classifies driver errors for the errkind mapping in sqlstore.go.
type failure int

const (
	failOther      failure = iota // not classified: an internal error
	failUnique                    // unique or primary-key violation
	failForeignKey                // referenced row missing, or row still referenced
	failCheck                     // CHECK, NOT NULL or bad value: the input is invalid
	failRule                      // a trigger refused the change: a lifecycle rule
	failBusy                      // lock timeout, serialization failure, lost connection
)

// ---- SQLite -----------------------------------------------------------------

type sqliteDialect struct{}

func (sqliteDialect) engine() string              { return EngineSQLite }
func (sqliteDialect) driverName() string          { return "sqlite" }
func (sqliteDialect) gooseDialect() goose.Dialect { return goose.DialectSQLite3 }
func (sqliteDialect) rebind(query string) string  { return query }

func (sqliteDialect) timeArg(t time.Time) any {
	return t.UTC().Truncate(time.Microsecond).Format(sqliteTimeLayout)
}

// configure: WAL lets readers run beside the one writer, so the pool may hold
// several connections; writers queue on SQLite's lock (busy_timeout) instead
// of failing, and transactions start with BEGIN IMMEDIATE (sqliteDSN) so a
// transaction never has to upgrade a read lock, which SQLite would refuse
// with SQLITE_BUSY at once, without waiting. Up to 16 idle connections
// stay open: a new SQLite connection runs the pragmas and reads the schema,
// so with fewer a burst of concurrent requests opened and closed
// connections on every request (measured: docs/performance.md).
func (d sqliteDialect) configure(db *sql.DB) {
	db.SetMaxIdleConns(d.maxIdle())
	db.SetConnMaxIdleTime(5 * time.Minute)
}

func (sqliteDialect) maxIdle() int { return 16 }

// sqliteDSN builds the modernc.org/sqlite DSN for a database file. The path
// is escaped into a file: URI so that '?', '#' or '%' in it cannot be taken
// for parameters. Pragmas run on every new connection:
//   - foreign_keys: off by default in SQLite; the schema depends on it.
//   - journal_mode=WAL: readers never block the writer or each other.
//   - busy_timeout: wait for the write lock instead of failing.
//   - synchronous=NORMAL: durable at checkpoints, safe against corruption
//     with WAL; a power cut may lose the last transactions, not the file.
//   - wal_autocheckpoint(0): no commit checkpoints; the Store does, in the
//     background, about every second (checkpoint.go).
//   - secure_delete: deleted content is overwritten with zeros, so cleared
//     staged workspace files leave no bytes in free pages (see erase.go).
//
// _txlock=immediate makes BeginTx take the write lock up front (see configure).
func sqliteDSN(path string) string {
	q := url.Values{}
	q.Add("_pragma", "foreign_keys(1)")
	q.Add("_pragma", "journal_mode(WAL)")
	q.Add("_pragma", "busy_timeout("+strconv.FormatInt(sqliteBusyTimeout.Milliseconds(), 10)+")")
	q.Add("_pragma", "synchronous(NORMAL)")
	q.Add("_pragma", "secure_delete(1)")
	q.Add("_pragma", "wal_autocheckpoint(0)")
	q.Set("_txlock", "immediate")
	u := url.URL{Scheme: "file", Path: path, RawQuery: q.Encode()}
	// url.URL renders "file:///abs/path?..." for an absolute path, which SQLite
	// accepts as a URI with an empty authority.
	return u.String()
}

func (sqliteDialect) classify(err error) failure {
	var se *sqlite.Error
	if !errors.As(err, &se) {
		return classifyCommon(err)
	}
	switch se.Code() {
	case sqlite3.SQLITE_CONSTRAINT_UNIQUE, sqlite3.SQLITE_CONSTRAINT_PRIMARYKEY:
		return failUnique
	case sqlite3.SQLITE_CONSTRAINT_FOREIGNKEY:
		return failForeignKey
	case sqlite3.SQLITE_CONSTRAINT_CHECK, sqlite3.SQLITE_CONSTRAINT_NOTNULL, sqlite3.SQLITE_CONSTRAINT_DATATYPE:
		return failCheck
	case sqlite3.SQLITE_CONSTRAINT_TRIGGER:
		return failRule
	}
	switch se.Code() & 0xff { // primary result code
	case sqlite3.SQLITE_BUSY, sqlite3.SQLITE_LOCKED:
		return failBusy
	}
	return failOther
}

func (sqliteDialect) forShare() string            { return "" }
func (sqliteDialect) forUpdate() string           { return "" }
func (sqliteDialect) forUpdateSkipLocked() string { return "" }

// commitOutcomeUnknown: a failed SQLite COMMIT (busy, I/O error) leaves the
// transaction unapplied; there is no reply to lose in-process.
func (sqliteDialect) commitOutcomeUnknown(error) bool { return false }

// ---- PostgreSQL -------------------------------------------------------------

type postgresDialect struct{}

func (postgresDialect) engine() string              { return EnginePostgres }
func (postgresDialect) driverName() string          { return "pgx" }
func (postgresDialect) gooseDialect() goose.Dialect { return goose.DialectPostgres }

func (postgresDialect) timeArg(t time.Time) any {
	return t.UTC().Truncate(time.Microsecond)
}

// configure keeps a few idle connections; the open limit is the
// operator's (Store.SetMaxConnections from databaseMaxConnections), since
// every replica's pool counts against the server's max_connections.
func (d postgresDialect) configure(db *sql.DB) {
	db.SetMaxIdleConns(d.maxIdle())
	db.SetConnMaxIdleTime(5 * time.Minute)
}

func (postgresDialect) maxIdle() int { return 8 }

// rebind rewrites "?" to "$1", "$2", ... outside quoted text and comments.
func (postgresDialect) rebind(query string) string {
	if !strings.Contains(query, "?") {
		return query
	}
	var b strings.Builder
	b.Grow(len(query) + 16)
	n := 0
	for i := 0; i < len(query); i++ {
		c := query[i]
		switch c {
		case '\'', '"': // copy a quoted literal or identifier verbatim
			j := strings.IndexByte(query[i+1:], c)
			if j < 0 {
				b.WriteString(query[i:])
				return b.String()
			}
			b.WriteString(query[i : i+j+2])
			i += j + 1
		case '-':
			if i+1 < len(query) && query[i+1] == '-' { // line comment
				j := strings.IndexByte(query[i:], '\n')
				if j < 0 {
					b.WriteString(query[i:])
					return b.String()
				}
				b.WriteString(query[i : i+j+1])
				i += j
			} else {
				b.WriteByte(c)
			}
		case '?':
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
		default:
			b.WriteByte(c)
		}
	}
	return b.String()
}

func (postgresDialect) classify(err error) failure {
	var pe *pgconn.PgError
	if !errors.As(err, &pe) {
		return classifyCommon(err)
	}
	switch pe.Code {
	case "23505": // unique_violation
		return failUnique
	case "23503": // foreign_key_violation
		return failForeignKey
	case "23514": // check_violation: a CHECK names its constraint; our triggers do not
		if pe.ConstraintName == "" {
			return failRule
		}
		return failCheck
	case "23502": // not_null_violation
		return failCheck
	case "40001", "40P01", "55P03", "57014", "53300", "57P01", "57P02", "57P03":
		// serialization failure, deadlock, lock not available, a statement
		// cancelled (the operator's statement_timeout, as SQLite's busy
		// timeout), too many connections, server shutting down or
		// starting: retry later.
		return failBusy
	}
	switch {
	case strings.HasPrefix(pe.Code, "22"): // data exception: bad JSON, NUL in text, ...
		return failCheck
	case strings.HasPrefix(pe.Code, "08"): // connection exception
		return failBusy
	}
	return failOther
}

func (postgresDialect) forShare() string            { return " FOR SHARE" }
func (postgresDialect) forUpdate() string           { return " FOR UPDATE" }
func (postgresDialect) forUpdateSkipLocked() string { return " FOR UPDATE SKIP LOCKED" }

// commitOutcomeUnknown: when the connection fails or the context ends while
// COMMIT is in flight there is no server reply, and the server may have
// committed. A server error reply (serialization failure, deferred
// constraint) means it did not, and so does driver.ErrBadConn, which pgx
// returns only when nothing was sent.
func (postgresDialect) commitOutcomeUnknown(err error) bool {
	var pe *pgconn.PgError
	switch {
	case errors.As(err, &pe), errors.Is(err, driver.ErrBadConn):
		return false
	case errors.Is(err, context.Canceled), errors.Is(err, context.DeadlineExceeded):
		return true
	}
	return classifyCommon(err) == failBusy
}

// classifyCommon handles failures that are not engine errors: a database that
// cannot be reached is busy (503), not an internal error, and so is a query
// whose deadline passed before the database answered or before the pool
// (capped by SetMaxConnections) had a connection free.
func classifyCommon(err error) failure {
	var ce *pgconn.ConnectError
	var ne net.Error
	switch {
	case errors.Is(err, driver.ErrBadConn), errors.As(err, &ce), errors.As(err, &ne), errors.Is(err, context.DeadlineExceeded):
		return failBusy
	case errors.Is(err, io.EOF), errors.Is(err, io.ErrUnexpectedEOF):
		// The server closed the connection without a reply (pgx hands
		// back the bare EOF): a shutdown, a terminated backend, a proxy
		// closing gracefully. During a COMMIT that is an unknown outcome.
		return failBusy
	}
	return failOther
}

// ---- values shared by both engines -------------------------------------------

// nullString stores "" as NULL: optional identifiers are absent, not empty.
func nullString(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// optTimeArg encodes an optional time; nil is NULL.
func (s *Store) optTimeArg(t *time.Time) any {
	if t == nil {
		return nil
	}
	return s.d.timeArg(*t)
}

// jsonArg encodes v as JSON text. Text (not []byte) is what both engines
// accept for json/jsonb and TEXT columns alike.
func jsonArg(v any) (string, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return "", fmt.Errorf("sqlstore: encode JSON column: %w", err)
	}
	return string(b), nil
}

// timeCol scans a time column of either engine (timestamptz arrives as
// time.Time, SQLite TEXT as a string) into *dst, in UTC.
type timeCol struct{ dst *time.Time }

func (c timeCol) Scan(src any) error {
	t, null, err := scanTime(src)
	if err != nil {
		return err
	}
	if null {
		return errNullTime
	}
	*c.dst = t
	return nil
}

// fromText is Scan for SQLite's stored text form, with "" as NULL: a
// packed row's field (unpack), read without boxing it for Scan(any).
func (c timeCol) fromText(s string) error {
	if s == "" {
		return errNullTime
	}
	t, err := parseSQLiteTime(s)
	if err != nil {
		return err
	}
	*c.dst = t.UTC()
	return nil
}

var errNullTime = errors.New("sqlstore: NULL in a NOT NULL time column")

// optTimeCol scans a nullable time column; NULL leaves *dst nil.
type optTimeCol struct{ dst **time.Time }

func (c optTimeCol) Scan(src any) error {
	t, null, err := scanTime(src)
	if err != nil {
		return err
	}
	if null {
		*c.dst = nil
		return nil
	}
	*c.dst = &t
	return nil
}

// scanTime converts what either engine returns for a time column to a UTC
// time; null reports SQL NULL.
func scanTime(src any) (t time.Time, null bool, err error) {
	switch v := src.(type) {
	case nil:
		return time.Time{}, true, nil
	case time.Time:
		t = v
	case string:
		t, err = parseSQLiteTime(v)
	case []byte:
		t, err = parseSQLiteTime(string(v))
	default:
		err = fmt.Errorf("sqlstore: cannot scan %T into a time", src)
	}
	if err != nil {
		return time.Time{}, false, err
	}
	return t.UTC(), false, nil
}

// parseSQLiteTime parses SQLite's stored form (sqliteTimeLayout). Every
// time OCC writes has exactly that fixed-width form, so it is read by
// position (parseFixedTime: a list page reads two per row, and
// time.Parse's general layout interpreter was a tenth of the page's CPU);
// anything else goes through time.Parse, which accepts or refuses it
// exactly as before and names the problem.
func parseSQLiteTime(s string) (time.Time, error) {
	if t, ok := parseFixedTime(s); ok {
		return t, nil
	}
	t, err := time.Parse(sqliteTimeLayout, s)
	if err != nil {
		return time.Time{}, fmt.Errorf("sqlstore: malformed stored time %q: %w", s, err)
	}
	return t, nil
}

// parseFixedTime reads "YYYY-MM-DDTHH:MM:SS.ffffffZ" by position. It
// reports false for anything time.Parse(sqliteTimeLayout) would not read
// the same way (wrong length or separators, a non-digit, a field out of
// range), so that the caller falls back to time.Parse; FuzzParseFixedTime
// checks that the two agree.
func parseFixedTime(s string) (time.Time, bool) {
	if len(s) != len(sqliteTimeLayout) || s[4] != '-' || s[7] != '-' || s[10] != 'T' ||
		s[13] != ':' || s[16] != ':' || s[19] != '.' || s[26] != 'Z' {
		return time.Time{}, false
	}
	ok := true
	num := func(from, to int) int {
		n := 0
		for i := from; i < to; i++ {
			c := s[i]
			if c < '0' || c > '9' {
				ok = false
				return 0
			}
			n = n*10 + int(c-'0')
		}
		return n
	}
	year, month, day := num(0, 4), num(5, 7), num(8, 10)
	hour, minute, sec, micro := num(11, 13), num(14, 16), num(17, 19), num(20, 26)
	if !ok || month < 1 || month > 12 || day < 1 || hour > 23 || minute > 59 || sec > 59 {
		return time.Time{}, false
	}
	// The last day of month: day 0 of the next month normalizes to it.
	if day > time.Date(year, time.Month(month)+1, 0, 0, 0, 0, 0, time.UTC).Day() {
		return time.Time{}, false
	}
	return time.Date(year, time.Month(month), day, hour, minute, sec, micro*1000, time.UTC), true
}

// optStringCol scans a nullable text column; NULL becomes "".
type optStringCol struct{ dst *string }

func (c optStringCol) Scan(src any) error {
	switch v := src.(type) {
	case nil:
		*c.dst = ""
	case string:
		*c.dst = v
	case []byte:
		*c.dst = string(v)
	default:
		return fmt.Errorf("sqlstore: cannot scan %T into a string", src)
	}
	return nil
}

// jsonCol scans a JSON column (jsonb/json arrive as []byte, SQLite TEXT as a
// string) by unmarshalling into dst; NULL leaves dst untouched.
// permissionsCol scans a role's permissions (a JSON array). Every request
// reads its subject's grants, each with its role's permissions, and
// decoding that JSON was half the CPU of reading them; a role's stored
// text rarely changes, so the decoded form is kept by its exact text
// (content-addressed: a changed role has different text and is decoded
// afresh, so nothing is ever stale) and each scan gets its own copy.
type permissionsCol struct{ dst *[]store.Permission }

// permissionsCache maps stored permission text to its decoded form. It
// holds at most maxCachedPermissions texts (roles are few; past the bound
// texts are simply decoded each time).
var permissionsCache struct {
	mu sync.Mutex
	m  map[string][]store.Permission
}

const maxCachedPermissions = 1024

func (c permissionsCol) Scan(src any) error {
	var text string
	switch v := src.(type) {
	case nil:
		*c.dst = nil
		return nil
	case string:
		text = v
	case []byte:
		text = string(v)
	default:
		return fmt.Errorf("sqlstore: cannot scan %T as JSON", src)
	}
	permissionsCache.mu.Lock()
	cached, ok := permissionsCache.m[text]
	permissionsCache.mu.Unlock()
	if ok {
		*c.dst = slices.Clone(cached)
		return nil
	}
	var ps []store.Permission
	if err := json.Unmarshal([]byte(text), &ps); err != nil {
		return fmt.Errorf("sqlstore: malformed stored JSON: %w", err)
	}
	permissionsCache.mu.Lock()
	if permissionsCache.m == nil {
		permissionsCache.m = map[string][]store.Permission{}
	}
	if len(permissionsCache.m) < maxCachedPermissions {
		permissionsCache.m[text] = slices.Clone(ps)
	}
	permissionsCache.mu.Unlock()
	*c.dst = ps
	return nil
}

type jsonCol struct{ dst any }

func (c jsonCol) Scan(src any) error {
	var b []byte
	switch v := src.(type) {
	case nil:
		return nil
	case string:
		b = []byte(v)
	case []byte:
		b = v
	default:
		return fmt.Errorf("sqlstore: cannot scan %T as JSON", src)
	}
	if raw, ok := c.dst.(*json.RawMessage); ok {
		// Documents are returned byte for byte; copy, the driver may reuse b.
		*raw = append(json.RawMessage(nil), b...)
		return nil
	}
	if err := json.Unmarshal(b, c.dst); err != nil {
		return fmt.Errorf("sqlstore: malformed stored JSON: %w", err)
	}
	return nil
}

// postgresOnThisHost reports whether every host that the PostgreSQL URL
// may connect to (its host and fallbacks, after pgx's parsing, which also
// reads the PG* environment variables) is on this machine: a Unix socket
// directory, "localhost", or a loopback address. A URL pgx cannot parse is
// not (Open's ping reports it).
func postgresOnThisHost(databaseURL string) bool {
	cfg, err := pgconn.ParseConfig(databaseURL)
	if err != nil {
		return false
	}
	hosts := []string{cfg.Host}
	for _, f := range cfg.Fallbacks {
		hosts = append(hosts, f.Host)
	}
	for _, h := range hosts {
		if strings.HasPrefix(h, "/") || strings.EqualFold(h, "localhost") {
			continue
		}
		if ip, err := netip.ParseAddr(h); err == nil && ip.Unmap().IsLoopback() {
			continue
		}
		return false
	}
	return true
}
