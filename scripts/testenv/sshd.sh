#!/usr/bin/env bash
# sshd.sh: a private OpenSSH server on 127.0.0.1 for the SSH Compute driver's tests, with the non-root
# runtime account the driver runs gateways as.
#
#   scripts/testenv/sshd.sh start   # install openssh-server if needed, start sshd if not running, print SSH_TEST_*
#   scripts/testenv/sshd.sh env     # print `export SSH_TEST_...` lines: eval "$(scripts/testenv/sshd.sh env)"
#   scripts/testenv/sshd.sh status  # exit 0 when sshd runs and accepts the client key
#   scripts/testenv/sshd.sh stop    # stop sshd if it runs
#
# Typical use:
#   eval "$(scripts/testenv/sshd.sh env)"
#
# Environment:
#   OCC_TEST_STATE_DIR  state root, default $HOME/.cache/occ-test (outside the clone)
#   OCC_TEST_SSH_PORT   port, default 2222
#
# The server is Debian's openssh-server (installed with apt-get only when /usr/sbin/sshd is missing; its
# postinst does not start the system daemon here). It runs from $OCC_TEST_STATE_DIR/sshd with its own
# sshd_config, a host key and a client key generated once in that directory (nothing under /etc/ssh is
# used), listens on 127.0.0.1 only, accepts only the client key (no passwords) and allows direct-tcpip
# forwarding (the driver's live-file channel). It logs in as the invoking user (root in CI: the driver
# needs root on its hosts to run commands as the runtime account).
#
# The runtime account: user `occ-agent` (uid/gid 1001 when free, else the next free id the system picks),
# no password, no login shell needed by the driver, created with useradd when missing. The driver runs
# every gateway and `occ workspace-setup` as that account.
#
# Printed (the last lines of standard output, progress goes to stderr):
#   SSH_TEST_ADDR=127.0.0.1:<port>
#   SSH_TEST_USER=<login user>
#   SSH_TEST_KEY=<client private key file>
#   SSH_TEST_KNOWN_HOSTS=<known_hosts file pinning the host key for [127.0.0.1]:<port>>
#   SSH_TEST_RUNTIME_USER=occ-agent
#
# Every command is idempotent; concurrent invocations are serialised with a lock file.
set -euo pipefail

STATE_DIR=${OCC_TEST_STATE_DIR:-${HOME:?HOME is not set}/.cache/occ-test}
DIR=$STATE_DIR/sshd
PORT=${OCC_TEST_SSH_PORT:-2222}
RUNTIME_USER=occ-agent
RUNTIME_UID=1001

die() {
	echo "sshd.sh: $*" >&2
	exit 1
}
log() { echo "sshd.sh: $*" >&2; }

usage() {
	echo "usage: $0 start|stop|env|status" >&2
	exit 2
}

is_root() { [ "$(id -u)" = 0 ]; }

ensure_server() {
	[ -x /usr/sbin/sshd ] && command -v ssh-keygen >/dev/null && command -v ssh >/dev/null && return
	is_root || die "openssh-server is missing and this is not root"
	log "installing the Debian 'openssh-server' package"
	DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openssh-server openssh-client >&2 ||
		{ apt-get update >&2 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends openssh-server openssh-client >&2; }
}

ensure_runtime_user() {
	id -u "$RUNTIME_USER" >/dev/null 2>&1 && return
	is_root || die "user $RUNTIME_USER is missing and this is not root"
	local args=(--system --user-group --no-create-home --home-dir /nonexistent --shell /usr/sbin/nologin)
	if ! getent passwd "$RUNTIME_UID" >/dev/null && ! getent group "$RUNTIME_UID" >/dev/null; then
		args+=(--uid "$RUNTIME_UID")
	fi
	useradd "${args[@]}" "$RUNTIME_USER" >&2
	log "created user $RUNTIME_USER (uid $(id -u "$RUNTIME_USER"))"
}

running() {
	[ -f "$DIR/sshd.pid" ] && kill -0 "$(cat "$DIR/sshd.pid")" 2>/dev/null
}

accepts() {
	ssh -o BatchMode=yes -o StrictHostKeyChecking=yes -o UserKnownHostsFile="$DIR/known_hosts" \
		-o LogLevel=ERROR -o ConnectTimeout=2 -i "$DIR/client_ed25519" -p "$PORT" "$(id -un)@127.0.0.1" true 2>/dev/null
}

print_env() {
	local prefix=${1:-}
	echo "${prefix}SSH_TEST_ADDR=127.0.0.1:$PORT"
	echo "${prefix}SSH_TEST_USER=$(id -un)"
	echo "${prefix}SSH_TEST_KEY=$DIR/client_ed25519"
	echo "${prefix}SSH_TEST_KNOWN_HOSTS=$DIR/known_hosts"
	echo "${prefix}SSH_TEST_RUNTIME_USER=$RUNTIME_USER"
}

start() {
	ensure_server
	ensure_runtime_user
	mkdir -p "$DIR"
	chmod 700 "$DIR"
	[ -f "$DIR/host_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C occ-test-host -f "$DIR/host_ed25519"
	[ -f "$DIR/client_ed25519" ] || ssh-keygen -q -t ed25519 -N '' -C occ-test-client -f "$DIR/client_ed25519"
	cp "$DIR/client_ed25519.pub" "$DIR/authorized_keys"
	chmod 600 "$DIR/authorized_keys"
	echo "[127.0.0.1]:$PORT $(cut -d' ' -f1,2 "$DIR/host_ed25519.pub")" >"$DIR/known_hosts"
	if running && accepts; then
		return
	fi
	if running; then kill "$(cat "$DIR/sshd.pid")" 2>/dev/null || true; sleep 0.2; fi
	# The privilege-separation directory sshd needs when it runs as root.
	if is_root; then mkdir -p /run/sshd && chmod 755 /run/sshd; fi
	cat >"$DIR/sshd_config" <<CONF
Port $PORT
ListenAddress 127.0.0.1
HostKey $DIR/host_ed25519
PidFile $DIR/sshd.pid
AuthorizedKeysFile $DIR/authorized_keys
PasswordAuthentication no
KbdInteractiveAuthentication no
PubkeyAuthentication yes
PermitRootLogin prohibit-password
UsePAM no
StrictModes no
AllowTcpForwarding yes
MaxSessions 64
MaxStartups 64:30:128
LogLevel INFO
CONF
	/usr/sbin/sshd -t -f "$DIR/sshd_config"
	# sshd daemonises itself and writes the pid file; -E keeps its log in the state directory.
	/usr/sbin/sshd -f "$DIR/sshd_config" -E "$DIR/sshd.log"
	for _ in $(seq 1 50); do
		accepts && return
		sleep 0.1
	done
	tail -n 20 "$DIR/sshd.log" >&2 || true
	die "sshd did not accept the client key on 127.0.0.1:$PORT"
}

cmd=${1:-}
[ -n "$cmd" ] || usage
mkdir -p "$STATE_DIR"
exec 9>"$STATE_DIR/sshd.lock"
flock 9
case "$cmd" in
start)
	start
	print_env
	;;
env)
	start
	print_env "export "
	;;
status)
	running && accepts
	;;
stop)
	if running; then
		kill "$(cat "$DIR/sshd.pid")" 2>/dev/null || true
		rm -f "$DIR/sshd.pid"
	fi
	;;
*) usage ;;
esac
