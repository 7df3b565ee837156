// Package bench owns `make bench`: the API-at-scale measurements of
// docs/performance.md. It seeds a real store on each engine (SQLite in a
// temporary directory; PostgreSQL in a throw-away database on the server
// of OCC_TEST_POSTGRES_URL, dropped afterwards) with 1,000 Namespaces and
// 10,000 Agents in one of them, serves the real handler stack on a
// loopback listener, and measures GET of one Agent, a page of the Agent
// list, a page of the Namespace list and the audit page at a fixed
// concurrency, printing p50, p99 and throughput as one table. Before
// them it measures, with the same client and concurrency, a bare net/http
// server that only spins for a fixed CPU time per request (baseline.go):
// what a request of that cost gets at that concurrency on the machine,
// whatever the server is, for reading OCC's rows against. After each
// engine's rows it measures the store floor (floor.go): the same store
// calls behind a bare net/http server, what the database reads alone
// cost. It also
// measures the resident memory of a real `occ server` process, idle and
// with the 10,000 Agents.
//
// Every loop is bounded in count and in time; traffic goes only to
// 127.0.0.1. It is a program (internal/bench/cmd), never part of `make
// test`: figures come from it, not from timed assertions.
package bench
