#!/usr/bin/env bash
# test.sh: everything `make test` (and so CI) does, on a fresh Debian 12 machine or a developer's.
#
#   1. gofmt and go vet must report nothing;
#   2. start the test PostgreSQL (scripts/testenv/postgres.sh; idempotent: a running server is
#      reused) and export OCC_TEST_POSTGRES_URL, which the store tests use to run against
#      PostgreSQL as well as SQLite;
#   3. go test -race -count=1 ./...
#
# It leaves PostgreSQL running for the next run (`scripts/testenv/postgres.sh stop` stops it).
#
# Environment:
#   OCC_TEST_POSTGRES_URL  use this database server instead of starting one
#   OCC_TEST_RACE          1 (default) runs the tests under the race detector, 0 without
#   CI                     passed through to the tests (CI=true on CI)
#
# Why -race by default: OCC is a concurrent server (HTTP handlers, later a deployment worker and
# WebSocket clients), and data races are the bugs ordinary tests miss. Its cost, measured on this
# machine kind (2 cores): compiling modernc.org/sqlite with -race adds about 30 s to a cold build,
# and SQLite-heavy test code runs about 6x slower (1.0 s -> 6.6 s for a small transaction
# workload). The whole run must stay under 30 minutes on 2 cores; each step below prints its
# duration so the budget is visible in CI logs. If a later suite makes -race too slow, run that
# suite without -race rather than dropping it everywhere.
set -euo pipefail
cd "$(dirname "$0")/.."

export CI="${CI:-}"

step_start=$SECONDS
step() {
	printf '==> %s\n' "$*"
	step_start=$SECONDS
}
done_step() {
	printf '    (%ds)\n' $((SECONDS - step_start))
}

step "go version"
go version
done_step

step "gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "gofmt: these files need formatting (run make fmt):" >&2
	echo "$unformatted" >&2
	exit 1
fi
done_step

step "go vet"
go vet ./...
done_step

step "PostgreSQL for the tests"
if [ -n "${OCC_TEST_POSTGRES_URL:-}" ]; then
	echo "using OCC_TEST_POSTGRES_URL from the environment"
else
	# postgres.sh prints the URL on its last line of standard output (progress goes to stderr).
	# Tolerate a NAME=value form too, so a change there fails loudly below instead of subtly.
	out=$(bash scripts/testenv/postgres.sh start)
	url=$(printf '%s\n' "$out" | tail -n 1 | sed -E 's/^[A-Z_][A-Z0-9_]*=//')
	case "$url" in
	postgres://* | postgresql://*) ;;
	*)
		echo "test.sh: scripts/testenv/postgres.sh start printed no database URL:" >&2
		printf '%s\n' "$out" >&2
		exit 1
		;;
	esac
	export OCC_TEST_POSTGRES_URL=$url
fi
# The test server uses trust authentication: the URL holds no password and can be shown.
echo "OCC_TEST_POSTGRES_URL=$OCC_TEST_POSTGRES_URL"
done_step

race=()
case "${OCC_TEST_RACE:-1}" in
1)
	# The race detector needs cgo (gcc is on this machine kind); fail clearly if it is off.
	if [ "$(go env CGO_ENABLED)" != 1 ]; then
		echo "test.sh: -race needs cgo (CGO_ENABLED=1 and gcc); set OCC_TEST_RACE=0 to test without it" >&2
		exit 1
	fi
	race=(-race)
	;;
0) ;;
*)
	echo "test.sh: OCC_TEST_RACE must be 0 or 1, got '${OCC_TEST_RACE}'" >&2
	exit 1
	;;
esac

step "go test ${race[*]} -count=1 ./..."
go test "${race[@]}" -count=1 ./...
done_step

echo "all checks passed in $((SECONDS / 60))m$((SECONDS % 60))s"
