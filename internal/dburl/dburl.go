// Package dburl owns one rule about database URLs: whether a PostgreSQL
// URL can be read unambiguously, so that its redacted form hides every
// secret. The configuration (which logs the URL redacted) and the store
// (which hands it to pgx and scrubs pgx's errors) both apply it; it
// imports no OCC package.
package dburl

import (
	"net/url"
	"strings"
)

// Parse parses raw with url.Parse and reports whether its user
// information is what the PostgreSQL driver (pgx, which follows libpq)
// would read too. It is not when:
//
//   - An unencoded /, ? or # in the password ends url.Parse's authority
//     early: "occ:1234/s3cret@db" or "occ:/s3cret@db" parses as host occ
//     with port 1234 (or none) and no user, so Redacted hides nothing, and
//     pgx, which sees no user information before a '/' either, connects to
//     the wrong host and quotes the rest (the password) as the database
//     name in its error. Any '@' after "://" with no user found is taken
//     as this case; an '@' meant elsewhere is written %40.
//   - A second '@' before the path: url.Parse splits at the last one, pgx
//     at the first, so pgx would take the password's tail for the host.
//
// ok is false for such a URL and for one url.Parse refuses; u is nil then.
func Parse(raw string) (u *url.URL, ok bool) {
	u, err := url.Parse(raw)
	if err != nil {
		return nil, false
	}
	_, rest, found := strings.Cut(raw, "://")
	if !found {
		return u, true
	}
	at := strings.IndexByte(rest, '@')
	if at < 0 {
		return u, true
	}
	end := strings.IndexAny(rest, "/?#")
	if end < 0 {
		end = len(rest)
	}
	if u.User == nil || strings.LastIndexByte(rest[:end], '@') != at {
		return nil, false
	}
	return u, true
}
