#!/usr/bin/env bash
# docker.sh: a private Docker engine for OCC's image builds and image tests, without a bridge network.
#
#   scripts/testenv/docker.sh start   # install docker.io if needed, start the engine if not running, print DOCKER_HOST
#   scripts/testenv/docker.sh env     # print an `export DOCKER_HOST=...` line: eval "$(scripts/testenv/docker.sh env)"
#   scripts/testenv/docker.sh status  # exit 0 when the engine runs and answers
#   scripts/testenv/docker.sh stop    # stop the engine if it runs
#
# Typical use:
#   export DOCKER_HOST=$(scripts/testenv/docker.sh start | tail -n 1)
#   docker load -i bin/images/occ.tar
#
# Environment:
#   OCC_TEST_STATE_DIR  state root, default $HOME/.cache/occ-test (outside the clone, so `git clean`
#                       never deletes a running engine's files)
#
# The engine is Debian's docker.io (dockerd, containerd, runc), installed with apt-get only when no
# dockerd is found; it needs root. Its state is $OCC_TEST_STATE_DIR/docker: data/ (images, containers),
# exec/, docker.sock, dockerd.pid, dockerd.log. It listens only on that unix socket.
#
# Networking: no bridge and no iptables rules (--bridge=none --iptables=false ...). Containers run with
# --network host (their ports bind on this machine's loopback directly) or --network none; the default
# bridge does not exist, so a container that asks for it fails to start instead of getting a private
# 172.17.0.0/16 address. No image is ever pulled: no registry is configured or reachable, and the images
# OCC uses are built locally (scripts/images.sh).
#
# Every command is idempotent: start on a running engine only prints DOCKER_HOST, stop on a stopped one
# does nothing. Concurrent invocations are serialised with a lock file. The engine keeps running for the
# next run until `stop`.
set -euo pipefail

STATE_DIR=${OCC_TEST_STATE_DIR:-${HOME:?HOME is not set}/.cache/occ-test}
DIR=$STATE_DIR/docker
SOCK=$DIR/docker.sock
HOST=unix://$SOCK
PIDFILE=$DIR/dockerd.pid
LOG=$DIR/dockerd.log

die() {
	echo "docker.sh: $*" >&2
	exit 1
}
log() { echo "docker.sh: $*" >&2; }

usage() {
	echo "usage: $0 start|stop|env|status" >&2
	exit 2
}

is_root() { [ "$(id -u)" = 0 ]; }

find_dockerd() { command -v dockerd 2>/dev/null || { [ -x /usr/sbin/dockerd ] && echo /usr/sbin/dockerd; } || true; }

# ensure_engine installs the Debian docker.io package when no dockerd is present. Its postinst would
# start the system-wide daemon (with the default bridge) where init scripts may run; a policy-rc.d that
# denies service starts is put in place for the install when the machine has none.
ensure_engine() {
	[ -n "$(find_dockerd)" ] && command -v docker >/dev/null && return
	is_root || die "no dockerd found; install the Debian 'docker.io' package (needs root)"
	log "installing the Debian 'docker.io' package"
	local policy=/usr/sbin/policy-rc.d added=""
	if ! [ -e "$policy" ]; then
		printf '#!/bin/sh\n# docker.sh: no service starts during its package install\nexit 101\n' >"$policy"
		chmod 0755 "$policy"
		added=1
	fi
	local rc=0
	if ! DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io >/dev/null; then
		# A fresh image may have no package lists yet.
		apt-get update >/dev/null && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends docker.io >/dev/null || rc=$?
	fi
	[ -n "$added" ] && rm -f "$policy"
	[ "$rc" = 0 ] || die "apt-get install docker.io failed"
	[ -n "$(find_dockerd)" ] || die "installed 'docker.io' but found no dockerd"
}

# pid_of_engine prints the pid of our running dockerd, or fails: the pid file must name a live
# process whose command is dockerd with our socket (a pid reused by another program does not count).
pid_of_engine() {
	local pid cmdline
	pid=$(cat "$PIDFILE" 2>/dev/null) || return 1
	case "$pid" in '' | *[!0-9]*) return 1 ;; esac
	cmdline=$({ tr '\0' ' ' <"/proc/$pid/cmdline"; } 2>/dev/null) || return 1
	case "$cmdline" in *dockerd*"unix://$SOCK"*) echo "$pid" ;; *) return 1 ;; esac
}

answers() { DOCKER_HOST=$HOST docker version --format '{{.Server.Version}}' >/dev/null 2>&1; }

lock() {
	mkdir -p "$DIR"
	exec 9>"$DIR/.lock"
	flock -w 120 9 || die "timed out waiting for another docker.sh to finish"
}

start() {
	ensure_engine
	lock
	if pid_of_engine >/dev/null && answers; then
		echo "$HOST"
		return
	fi
	# Anything half-running (a dockerd that does not answer) is stopped first.
	stop_engine
	rm -f "$SOCK" "$PIDFILE"
	log "starting dockerd (state in $DIR)"
	# A session of its own (Ctrl-C of the caller does not reach it) and no inherited descriptors (a
	# caller reading our standard output must not wait for the daemon, nor hold the lock).
	setsid "$(find_dockerd)" \
		--data-root "$DIR/data" --exec-root "$DIR/exec" --pidfile "$PIDFILE" -H "$HOST" \
		--bridge=none --iptables=false --ip6tables=false --ip-forward=false --ip-masq=false \
		</dev/null >"$LOG" 2>&1 9>&- &
	local i
	for i in $(seq 1 300); do
		answers && break
		sleep 0.1
	done
	if ! answers; then
		tail -n 30 "$LOG" >&2 || true
		die "dockerd did not answer on $SOCK within 30 s; see $LOG"
	fi
	echo "$HOST"
}

# stop_engine stops our dockerd (SIGTERM, then SIGKILL after 30 s); dockerd stops its containerd.
stop_engine() {
	local pid i
	pid=$(pid_of_engine) || return 0
	kill "$pid" 2>/dev/null || return 0
	for i in $(seq 1 300); do
		kill -0 "$pid" 2>/dev/null || return 0
		sleep 0.1
	done
	log "dockerd $pid did not stop within 30 s; killing it"
	kill -9 "$pid" 2>/dev/null || true
}

case "${1:-}" in
start) start ;;
stop)
	lock
	stop_engine
	;;
env) echo "export DOCKER_HOST=$HOST" ;;
status) pid_of_engine >/dev/null && answers ;;
*) usage ;;
esac
