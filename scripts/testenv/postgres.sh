#!/usr/bin/env bash
# postgres.sh: a disposable PostgreSQL server for OCC's tests, on loopback only.
#
#   scripts/testenv/postgres.sh start   # initialise if needed, start if not running, print the URL
#   scripts/testenv/postgres.sh url     # print the URL (does not start anything)
#   scripts/testenv/postgres.sh status  # exit 0 when the server runs
#   scripts/testenv/postgres.sh stop    # stop the server if it runs
#
# Typical use:
#   scripts/testenv/postgres.sh start
#   OCC_TEST_POSTGRES_URL=$(scripts/testenv/postgres.sh url) go test ./internal/store/...
#
# Environment:
#   OCC_TEST_STATE_DIR      state root, default $HOME/.cache/occ-test (kept outside the clone
#                           so `git clean` never deletes a running cluster's files)
#   OCC_TEST_POSTGRES_PORT  TCP port on 127.0.0.1, default 55432
#
# The cluster lives in $OCC_TEST_STATE_DIR/postgres. Authentication is "trust" and durability
# is off (fsync, synchronous_commit, full_page_writes): this server is for tests only and must
# never hold data anyone cares about. It listens only on 127.0.0.1 and on a unix socket inside
# the state directory.
#
# Every command is idempotent: start on a running server only prints the URL, stop on a stopped
# one does nothing. Concurrent invocations are serialised with a lock file.
#
# PostgreSQL refuses to run as root, so when invoked by root the server runs as the OS user
# "postgres" (created by the Debian package); the Debian "postgresql" package is installed with
# apt-get only when no server binaries are found.
set -euo pipefail

STATE_DIR=${OCC_TEST_STATE_DIR:-${HOME:?HOME is not set}/.cache/occ-test}
PORT=${OCC_TEST_POSTGRES_PORT:-55432}
PG_DIR=$STATE_DIR/postgres
DATA=$PG_DIR/data
LOG=$PG_DIR/postgres.log
URL="postgres://postgres@127.0.0.1:${PORT}/postgres?sslmode=disable"

die() {
	echo "postgres.sh: $*" >&2
	exit 1
}

usage() {
	echo "usage: $0 start|stop|url|status" >&2
	exit 2
}

case "$PORT" in
'' | *[!0-9]*) die "OCC_TEST_POSTGRES_PORT must be a port number, got '$PORT'" ;;
esac

is_root() { [ "$(id -u)" = 0 ]; }

# find_bin prints the newest /usr/lib/postgresql/<version>/bin that has pg_ctl, or nothing.
find_bin() {
	local d best=""
	for d in $(ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V); do
		[ -x "$d/pg_ctl" ] && best=$d
	done
	echo "$best"
}

# ensure_bin sets BIN, installing the Debian package only when no server is present.
ensure_bin() {
	BIN=$(find_bin)
	if [ -n "$BIN" ]; then
		return
	fi
	is_root || die "no PostgreSQL server binaries in /usr/lib/postgresql/*/bin; install the Debian 'postgresql' package (needs root)"
	echo "postgres.sh: installing the Debian 'postgresql' package" >&2
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql >/dev/null; then
		# A fresh image may have no package lists yet.
		apt-get update >/dev/null
		DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql >/dev/null
	fi
	BIN=$(find_bin)
	[ -n "$BIN" ] || die "installed 'postgresql' but found no server binaries in /usr/lib/postgresql/*/bin"
}

# as_pg runs a command as the user that owns the cluster.
as_pg() {
	if is_root; then
		runuser -u postgres -- "$@"
	else
		"$@"
	fi
}

# make_traversable gives "others" search (x) permission on every ancestor of $1 that user
# postgres cannot enter: the server must reach its data directory, and a root home directory is
# usually 0700. Search permission does not allow listing a directory. Only used as root.
make_traversable() {
	local dir="" part
	local -a parts
	IFS=/ read -r -a parts <<<"${1#/}"
	# Walk from / downwards so that only directories that really block user postgres change.
	for part in "${parts[@]}"; do
		dir+="/$part"
		if ! runuser -u postgres -- test -x "$dir"; then
			echo "postgres.sh: granting search permission (o+x) on $dir so user postgres can reach $1" >&2
			chmod o+x "$dir"
		fi
	done
}

running() {
	[ -f "$DATA/PG_VERSION" ] && as_pg "$BIN/pg_ctl" -D "$DATA" status >/dev/null 2>&1
}

# running_port prints the port recorded by the running postmaster (line 4 of postmaster.pid).
running_port() {
	sed -n 4p "$DATA/postmaster.pid" 2>/dev/null || true
}

# lock serialises concurrent invocations. Every command that may leave a process behind
# (initdb, pg_ctl start) runs with fd 9 closed, or the server would inherit the lock forever.
lock() {
	mkdir -p "$PG_DIR"
	exec 9>"$PG_DIR/.lock"
	flock -w 120 9 || die "timed out waiting for another postgres.sh to finish"
}

start() {
	ensure_bin
	lock
	if is_root; then
		id postgres >/dev/null 2>&1 || useradd --system --home-dir /var/lib/postgresql --shell /bin/bash postgres
		chown postgres: "$PG_DIR"
		make_traversable "$PG_DIR"
	fi
	chmod 0700 "$PG_DIR"
	touch "$LOG"
	is_root && chown postgres: "$LOG" "$PG_DIR/.lock"

	if running; then
		local port
		port=$(running_port)
		[ "$port" = "$PORT" ] || die "a server already runs from $DATA on port $port, not $PORT; run '$0 stop' first"
		echo "$URL"
		return
	fi

	if ! [ -f "$DATA/PG_VERSION" ]; then
		# A half-initialised directory (initdb killed) would make initdb refuse; start over.
		rm -rf "$DATA"
		as_pg "$BIN/initdb" -D "$DATA" -U postgres --auth=trust --no-sync -E UTF8 --locale=C.UTF-8 \
			>"$PG_DIR/initdb.log" 2>&1 9>&- || die "initdb failed; see $PG_DIR/initdb.log"
	fi

	# Settings are passed on every start (not written to postgresql.conf) so that changing
	# OCC_TEST_POSTGRES_PORT takes effect on the next start.
	local opts="-c listen_addresses=127.0.0.1 -p $PORT -k $PG_DIR"
	opts+=" -c fsync=off -c synchronous_commit=off -c full_page_writes=off"
	opts+=" -c max_connections=200"
	if ! as_pg "$BIN/pg_ctl" -D "$DATA" -l "$LOG" -w -t 60 start -o "$opts" >/dev/null 9>&-; then
		tail -n 20 "$LOG" >&2 || true
		die "PostgreSQL did not start; see $LOG"
	fi
	"$BIN/pg_isready" -q -h 127.0.0.1 -p "$PORT" -t 30 || die "PostgreSQL started but does not accept connections on 127.0.0.1:$PORT; see $LOG"
	echo "$URL"
}

stop() {
	BIN=$(find_bin)
	[ -n "$BIN" ] || return 0
	[ -f "$DATA/PG_VERSION" ] || return 0
	lock
	if running; then
		as_pg "$BIN/pg_ctl" -D "$DATA" -m fast -w -t 60 stop >/dev/null 9>&-
	fi
}

case "${1:-}" in
start) start ;;
stop) stop ;;
url) echo "$URL" ;;
status)
	BIN=$(find_bin)
	[ -n "$BIN" ] && running
	;;
*) usage ;;
esac
