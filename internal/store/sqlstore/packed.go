package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
)

// This file: the lists read most, and the session lookup every signed-in
// request makes, read on SQLite as one value.
//
// modernc.org/sqlite opens every connection with SQLITE_OPEN_FULLMUTEX
// (fixed in its code), and its rows.Next reads a column with three calls
// into SQLite (its type, its text, its length), each taking and releasing
// the connection's emulated mutex, and one Go string per column; each row
// is also a step of the statement and a round of database/sql's locks. A
// page of 100 Agents is 101 rows of 9 columns: about 2,700 mutex round
// trips and 1,450 allocations, a large part of the page's CPU.
//
// So a select list marked with packed() is rewritten on SQLite, by
// listOrdered: each row's columns joined by packSep into one text column
// (packQuery), and the query wrapped so that SQLite answers with one row,
// the number of rows and the rows joined by pageSep (packPage). The page
// is then one step and two columns: the store's side of an Agent page
// took about a fifth less time than with one packed value per row, with
// a tenth of the allocations (BenchmarkListPages; docs/performance.md).
// On PostgreSQL the markers are comments and the query runs as written.
//
// The store takes any text, so a value may itself hold packSep or
// pageSep. A row then splits into the wrong number of fields, or the page
// into more pieces than SQLite counted rows: a value holding pageSep
// always adds a piece, so the count catches even a value shaped to look
// like whole rows. group_concat's order is not guaranteed by SQLite's
// documentation (in practice it is the subquery's), so the rows are also
// checked to follow one another in the page's order. On any of these,
// readPage reports errUnpacked and listOrdered reads that page again
// column by column, so such a value costs time, never a wrong answer.

// packSep joins a packed row's columns: U+001F, the ASCII unit separator;
// pageSep joins a packed page's rows: U+001E, the record separator
// (char(30) in packPage).
const (
	packSep = "\x1f"
	pageSep = "\x1e"
)

// packAlias names the packed column in the query packPage wraps.
const packAlias = "packed_row"

// packOpen (or packOpenChain) and packClose mark a packable select list
// in a query.
const (
	packOpen      = "/*packed*/ "
	packOpenChain = "/*packed chain*/ "
	packClose     = " /*end packed*/"
)

// errUnpacked: a packed page did not split into the rows and columns it
// was joined from, or its rows were out of the page's order.
var errUnpacked = errors.New("sqlstore: a packed page does not split into its rows and columns in order")

// packed marks cols, a select list of plain column names separated by
// commas, as one that listOrdered may read packed, joined with concat_ws: it
// sizes the row once, where a chain of || copies it at every step (a
// tenth more CPU for an Agent page, a third more for an audit page,
// computed per row).
func packed(cols string) string { return packOpen + cols + packClose }

// packedIndexed marks cols like packed, for a list whose packed
// expression a covering index also holds (migrations/sqlite/00006): it is
// joined with ||, not concat_ws, because the expression is then part of
// the schema, and concat_ws only exists since SQLite 3.44. With it in an
// index, older SQLite tools could no longer check or change the database
// (Debian 12's sqlite3, 3.40, failed PRAGMA integrity_check with "unknown
// function: concat_ws()"). Read from the index, the slower chain is never
// computed on a read.
func packedIndexed(cols string) string { return packOpenChain + cols + packClose }

// packQuery rewrites the marked select list of query into one text column
// named packAlias: every column as text, NULL as the empty string, joined
// by packSep, with concat_ws or a chain of || as the marker says. ok is
// false when query has no marked list.
func packQuery(query string) (out string, ok bool) {
	open, chain := packOpen, false
	if strings.Contains(query, packOpenChain) {
		open, chain = packOpenChain, true
	}
	before, rest, found := strings.Cut(query, open)
	if !found {
		return query, false
	}
	cols, after, found := strings.Cut(rest, packClose)
	if !found {
		return query, false
	}
	var b strings.Builder
	b.Grow(len(query) + len(cols)*3)
	b.WriteString(before)
	if !chain {
		b.WriteString("concat_ws(char(31), ")
	}
	for i, c := range strings.Split(cols, ",") {
		if i > 0 {
			if chain {
				b.WriteString(" || char(31) || ")
			} else {
				b.WriteString(", ")
			}
		}
		b.WriteString("ifnull(")
		b.WriteString(strings.TrimSpace(c))
		b.WriteString(", '')")
	}
	if !chain {
		b.WriteString(")")
	}
	b.WriteString(" AS " + packAlias)
	b.WriteString(after)
	return b.String(), true
}

// packPage wraps pq, a query packQuery wrote, so that its whole result is
// one row: the number of rows, and the packed rows joined by pageSep in
// the order pq gives them (the empty string for none). The subquery keeps
// its ORDER BY and LIMIT, so SQLite cannot flatten it into the aggregate
// and runs it as written, from the same index. An ORDER BY inside
// group_concat would guarantee the order but made SQLite sort the packed
// rows, which doubled the page's time; readPage checks the order instead.
func packPage(pq string) string {
	return "SELECT count(*), ifnull(group_concat(" + packAlias + ", char(30)), '') FROM (" + pq + ")"
}

// pageQueries memoizes pageQuery: query text → its packed page query, or
// "" for a query with no marked list. The store's queries are a fixed set
// of texts (constants, and a few shapes of the audit filter), so it stays
// small; past maxPageQueries texts, the rest are rewritten on every call
// rather than kept.
var (
	pageQueries   sync.Map
	pageQueryKept atomic.Int32
)

const maxPageQueries = 256

// pageQuery is packPage(packQuery(query)), rewritten once per query text:
// the hot lists and the session lookup run it on every request, and
// rewriting the text each time (a few hundred bytes, split by column) took
// about 2 µs of the session lookup's 17 (BenchmarkCredentialLookup) and
// three allocations of a page, whose time it did not measurably change
// (BenchmarkListPages).
func pageQuery(query string) (string, bool) {
	if v, ok := pageQueries.Load(query); ok {
		pq := v.(string)
		return pq, pq != ""
	}
	pq, ok := packQuery(query)
	if ok {
		pq = packPage(pq)
	} else {
		pq = ""
	}
	if pageQueryKept.Load() < maxPageQueries {
		if _, loaded := pageQueries.LoadOrStore(query, pq); !loaded {
			pageQueryKept.Add(1)
		}
	}
	return pq, ok
}

// readPage runs page (a query pageQuery wrote) and scans each of its rows
// with scan. after reports whether b follows a in the query's order. A
// page whose pieces or fields do not match SQLite's count, or whose rows
// are out of order, is errUnpacked: see the top of this file.
func readPage[T any](ctx context.Context, s *Store, scan func(rowScanner) (T, error), after func(a, b T) bool, page string, args ...any) ([]T, error) {
	var count int
	var all string
	if err := s.queryRow(ctx, page, args...).Scan(&count, &all); err != nil {
		return nil, err
	}
	return unpackPage(count, all, scan, after)
}

// unpackPage splits all, count packed rows joined by pageSep, and scans
// each row with scan, checking the order with after (see readPage).
func unpackPage[T any](count int, all string, scan func(rowScanner) (T, error), after func(a, b T) bool) ([]T, error) {
	out := make([]T, 0, count)
	if count == 0 {
		return out, nil
	}
	if strings.Count(all, pageSep) != count-1 {
		return nil, errUnpacked
	}
	row := &pageRow{}
	for range count {
		row.v, all, _ = strings.Cut(all, pageSep)
		v, err := scan(row)
		if err != nil {
			return nil, err
		}
		if len(out) > 0 && !after(out[len(out)-1], v) {
			return nil, errUnpacked
		}
		out = append(out, v)
	}
	return out, nil
}

// pageRow is one row of a packed page, read like a row of the unpacked
// query: Scan takes that query's destinations.
type pageRow struct{ v string }

func (r *pageRow) Scan(dest ...any) error { return unpack(r.v, dest) }

// unpack reads v, one packed row, into the destinations of the unpacked
// query. A field reaches a *string as it is and an sql.Scanner as a
// string, or as nil (NULL) when empty: the optional columns read NULL and
// the empty string alike, and no NOT NULL column read through a Scanner is
// ever empty. Other destinations are refused. A row with the wrong number
// of fields is errUnpacked.
func unpack(v string, dest []any) error {
	// Counted before any field is converted: a shifted row must be
	// reported as such, not as whichever conversion fails first.
	if strings.Count(v, packSep) != len(dest)-1 {
		return errUnpacked
	}
	rest := v
	for _, d := range dest {
		var f string
		f, rest, _ = strings.Cut(rest, packSep)
		// The column types of the packed lists first: boxing f for
		// Scan(any) is an allocation per field.
		switch d := d.(type) {
		case *string:
			*d = f
		case optStringCol:
			*d.dst = f
		case timeCol:
			if err := d.fromText(f); err != nil {
				return err
			}
		case sql.Scanner:
			var src any
			if f != "" {
				src = f
			}
			if err := d.Scan(src); err != nil {
				return err
			}
		default:
			return fmt.Errorf("sqlstore: a packed row cannot be read into %T", d)
		}
	}
	return nil
}
