package sqlstore

import (
	"database/sql"
	"errors"
	"fmt"
	"strings"
)

// This file: the lists read most, read on SQLite as one column per row.
//
// modernc.org/sqlite opens every connection with SQLITE_OPEN_FULLMUTEX
// (fixed in its code), and its rows.Next reads a column with three calls
// into SQLite (its type, its text, its length), each taking and releasing
// the connection's emulated mutex, and one Go string per column. A page of
// 100 Agents is 101 rows of 9 columns: about 2,700 mutex round trips and
// 1,450 allocations, a large part of the page's CPU. Read as one text
// column, the row's columns joined by packSep in SQL, the same page is one
// column per row: a third less time and under a quarter of the allocations
// (BenchmarkListPages; docs/performance.md).
//
// A select list marked with packed() is rewritten on SQLite only, by
// listCap; on PostgreSQL the markers are comments and the query runs as
// written. A value that itself holds packSep would shift the columns: the
// row then splits into the wrong number of fields, which packedRow
// reports (errPackedFields), and listCap reads that page again column by
// column, so such a value costs time, never a wrong answer.

// packSep joins a packed row's columns: U+001F, the ASCII unit separator.
const packSep = "\x1f"

// packOpen (or packOpenChain) and packClose mark a packable select list
// in a query.
const (
	packOpen      = "/*packed*/ "
	packOpenChain = "/*packed chain*/ "
	packClose     = " /*end packed*/"
)

// errPackedFields: a packed row split into the wrong number of fields.
var errPackedFields = errors.New("sqlstore: a packed row has the wrong number of columns")

// packed marks cols, a select list of plain column names separated by
// commas, as one that listCap may read packed, joined with concat_ws: it
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

// packQuery rewrites the marked select list of query into one text column:
// every column as text, NULL as the empty string, joined by packSep, with
// concat_ws or a chain of || as the marker says. ok is false when query
// has no marked list.
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
	b.WriteString(after)
	return b.String(), true
}

// packedRow reads a row of a packed query into the destinations of the
// unpacked one. A field reaches a *string as it is and an sql.Scanner as
// a string, or as nil (NULL) when empty: the optional columns read NULL
// and the empty string alike, and no NOT NULL column read through a
// Scanner is ever empty. Other destinations are refused. One packedRow
// serves every row of a query.
type packedRow struct {
	r rowScanner
	v string
}

func (p *packedRow) Scan(dest ...any) error {
	if err := p.r.Scan(&p.v); err != nil {
		return err
	}
	// Counted before any field is converted: a shifted row must be
	// reported as such, not as whichever conversion fails first.
	if strings.Count(p.v, packSep) != len(dest)-1 {
		return errPackedFields
	}
	rest := p.v
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
