package ssh

// The remote side of the driver: POSIX sh scripts run with `sh -c` on the
// host, as root (layout, tokens, the binary) or as the runtime account
// (everything inside an Agent directory, so root never writes where that
// account could have planted a link). Their arguments are paths, ids,
// numbers and hashes only; secrets (the token, rendered configurations)
// and file content (setup payloads) travel on standard input. Their
// standard error names paths and codes only.

// scriptHostInit checks the host and prints "systemd" or "plain" and the
// uploaded binary's sha256 (or "none"). Args: root runtimeUser node mjs.
const scriptHostInit = `
r=$1 ru=$2 node=$3 mjs=$4
[ "$(id -u)" = 0 ] || { echo "the login user is not root" >&2; exit 10; }
id -u "$ru" >/dev/null 2>&1 || { echo "runtime user $ru does not exist" >&2; exit 11; }
[ "$(id -u "$ru")" != 0 ] || { echo "runtime user $ru is root" >&2; exit 11; }
for t in runuser setsid pgrep pkill sha256sum flock find awk timeout; do
	command -v "$t" >/dev/null 2>&1 || { echo "$t is missing" >&2; exit 12; }
done
runuser -u "$ru" -- test -x "$node" -a -r "$mjs" || { echo "runtime user $ru cannot run $node and read $mjs" >&2; exit 13; }
if [ -d /run/systemd/system ] && command -v systemctl >/dev/null 2>&1; then echo systemd; else echo plain; fi
if [ -f "$r/bin/occ" ] && [ ! -L "$r/bin/occ" ]; then sha256sum "$r/bin/occ" | cut -d' ' -f1; else echo none; fi
`

// scriptUpload writes the binary from stdin, checks its sha256 and only
// then renames it into place. Args: root sha256 staleMinutes. Each upload
// writes a file of its own (mktemp), so two at once (two host checks on a
// new connection) cannot write into one file and rename a mix of both; the
// rename is atomic, so bin/occ is always one whole, checked binary. The
// trap removes the file of an upload that fails, but not of one occ gives
// up on: that one is ended with SIGKILL (scriptKillSession), which no trap
// sees. So each upload first removes the files of earlier ones last
// written more than staleMinutes ago (host.uploadStaleMinutes), which no
// upload still running can own; best effort (two uploads may race to
// remove one file), so it never fails the upload.
const scriptUpload = `
set -e
r=$1 want=$2 stale=$3
umask 022
mkdir -p "$r/bin"
chmod 755 "$r" "$r/bin"
find "$r/bin" -maxdepth 1 -type f -name '.occ.new.*' -mmin "+$stale" -delete 2>/dev/null || true
t=$(mktemp "$r/bin/.occ.new.XXXXXX")
trap 'rm -f "$t"' EXIT
cat > "$t"
chmod 755 "$t"
got=$(sha256sum "$t" | cut -d' ' -f1)
if [ "$got" != "$want" ]; then echo "checksum mismatch after upload" >&2; exit 5; fi
mv -f "$t" "$r/bin/occ"
`

// scriptLayout creates the driver's directories and, owned by the runtime
// account with mode 0700, the Agent's. Args: root ns agentHash
// runtimeUser agentJSON.
const scriptLayout = `
set -e
r=$1 ns=$2 ah=$3 ru=$4 info=$5
umask 022
mkdir -p "$r/bin" "$r/namespaces/$ns/agents"
chmod 755 "$r" "$r/bin" "$r/namespaces" "$r/namespaces/$ns" "$r/namespaces/$ns/agents"
mkdir -p "$r/tokens"
chmod 700 "$r/tokens"
d="$r/namespaces/$ns/agents/$ah"
[ ! -L "$d" ] || { echo "$d is a symbolic link" >&2; exit 3; }
if [ ! -d "$d" ]; then mkdir -m 700 "$d"; chown "$ru:" "$d"; fi
runuser -u "$ru" -- env -i PATH=/usr/bin:/bin sh -c '
	set -e
	d=$1 info=$2
	umask 077
	chmod 700 "$d"
	mkdir -p "$d/home" "$d/state/workspace" "$d/revisions" "$d/logs"
	chmod 700 "$d/home" "$d/state" "$d/state/workspace" "$d/revisions" "$d/logs"
	[ -f "$d/agent.json" ] || printf "%s\n" "$info" > "$d/agent.json"
' occ-ssh "$d" "$info"
`

// scriptFind exits 0 when the Agent's directory exists: the placement
// record is the directory itself, which root made in a root-owned parent,
// so the runtime account can neither remove nor rename it (a file inside
// it, such as agent.json, it could delete to make occ lose the Agent and
// leave its gateway running after DeleteAgent). Args: dir.
const scriptFind = `[ -d "$1" ] && [ ! -L "$1" ]`

// scriptCount prints how many Agent directories the host holds. Args: root.
const scriptCount = `
[ -d "$1/namespaces" ] || { echo 0; exit 0; }
find "$1/namespaces" -mindepth 3 -maxdepth 3 -type d | wc -l
`

// scriptToken writes the token from stdin unless one exists, and prints
// the token kept. Args: root agentHash.
const scriptToken = `
set -e
t="$1/tokens/$2"
umask 077
mkdir -p "$1/tokens"
if [ -s "$t" ] && [ ! -L "$t" ]; then cat >/dev/null; else cat > "$t.tmp"; mv -f "$t.tmp" "$t"; fi
head -c 4096 "$t"
`

// scriptPort prints the Agent's port, assigning the lowest free one of the
// range (not another Agent's, not listening) under the host's lock. The
// table is root's: root/ports/<agentHash>, in a directory only root
// writes, because root never reads what the runtime account can write (a
// huge, sparse or swapped file there would hang it, or block every other
// Agent's assignment). Ports an earlier occ kept in the Agent directories
// (a "port" file each) are read as the runtime account, a few bytes each
// and within 10 s, and moved into the table. Children never inherit the
// lock (9>&-). Args: root dir low high runtimeUser.
const scriptPort = `
r=$1 d=$2 lo=$3 hi=$4 ru=$5
ah=${d##*/}
umask 022
mkdir -p "$r/ports"
chmod 755 "$r/ports"
exec 9>"$r/.ports.lock"
flock 9
f="$r/ports/$ah"
if [ -f "$f" ]; then
	p=$(head -c 8 "$f" | tr -cd 0-9)
	[ -n "$p" ] && { echo "$p"; exit 0; }
fi
legacy=$(runuser -u "$ru" -- env -i PATH=/usr/bin:/bin timeout 10 sh -c '
	for f in "$1"/namespaces/*/agents/*/port; do
		[ -f "$f" ] && [ ! -L "$f" ] || continue
		printf "%s %s\n" "${f%/port}" "$(head -c 8 "$f" | tr -cd 0-9)"
	done' occ-ssh "$r" 9>&- 2>/dev/null)
p=$(printf "%s\n" "$legacy" | awk -v d="$d" '$1 == d && $2 != "" {print $2; exit}')
if [ -z "$p" ]; then
	used=$( { cat "$r/ports/"* 2>/dev/null
		printf "%s\n" "$legacy" | awk '{print $2}'
		awk 'NR>1 && $4=="0A" {split($2,a,":"); print a[2]}' /proc/net/tcp /proc/net/tcp6 2>/dev/null | while read h; do printf "%d\n" "0x$h"; done; } | tr -cd '0-9\n')
	p=$lo
	while [ "$p" -le "$hi" ]; do
		printf "%s\n" "$used" | grep -qx "$p" || break
		p=$((p+1))
	done
	[ "$p" -le "$hi" ] || { echo "no free port in $lo-$hi" >&2; exit 6; }
fi
printf "%s\n" "$p" > "$f.tmp" && mv -f "$f.tmp" "$f"
echo "$p"
`

// scriptWriteRevision (runtime) writes the rendered configuration from
// stdin, 0600. Args: dir revHash revID number.
const scriptWriteRevision = `
set -e
d=$1 rh=$2
umask 077
mkdir -p "$d/revisions/$rh"
cat > "$d/revisions/$rh/openclaw.json.tmp"
mv -f "$d/revisions/$rh/openclaw.json.tmp" "$d/revisions/$rh/openclaw.json"
printf "%s %s\n" "$3" "$4" > "$d/revisions/$rh/revision"
`

// scriptSetup (runtime) runs occ workspace-setup with the payload on
// stdin; verify mode when $6 is "verify" (payload: the identity file).
// Args: dir occ node mjs mode.
const scriptSetup = `
d=$1 occ=$2 node=$3 mjs=$4 mode=$5
export HOME="$d/home"
if [ "$mode" = verify ]; then
	[ -f "$d/setup-identity.json" ] || { echo "no setup identity" >&2; exit 1; }
	exec "$occ" workspace-setup --verify --payload "$d/setup-identity.json" --workspace "$d/state/workspace" --node "$node" --openclaw "$mjs" --state-dir "$d/state" --log "$d/logs/workspace-setup.log"
fi
exec "$occ" workspace-setup --workspace "$d/state/workspace" --node "$node" --openclaw "$mjs" --state-dir "$d/state" --log "$d/logs/workspace-setup.log"
`

// scriptKillSession (root) ends a command occ gave up on: SIGKILL to
// every process of the session whose leader is pid, if pid is still the
// process that started at start (field 22 of /proc/<pid>/stat), so a pid
// reused since is left alone. The leader is the command's login shell
// (host.go, sessionPreamble); gateways leave the session with setsid and
// are not touched. Args: pid start.
const scriptKillSession = `
pid=$1 start=$2
read -r s 2>/dev/null </proc/"$pid"/stat || exit 0
s=${s##*") "}
set -- $s
[ -n "$start" ] && [ "${20}" = "$start" ] || exit 0
pkill -KILL -s "$pid"
# A second pass catches a child forked while the first one ran.
sleep 0.1
pkill -KILL -s "$pid"
exit 0
`

// scriptWriteIdentity (runtime) writes the completed setup identity (the
// verifier's input, no file content) from stdin. Args: dir.
const scriptWriteIdentity = `
set -e
umask 077
cat > "$1/setup-identity.json.tmp"
mv -f "$1/setup-identity.json.tmp" "$1/setup-identity.json"
`

// scriptStatus (runtime) prints key=value lines: the supervisor's pid and
// revision hash, whether it is alive, whether a process of its session
// owns the listener on 127.0.0.1:port, the supervisor's give-up status,
// the serving revision, and the number of each revision present. On
// systemd the revision is the one whose configuration the unit file names
// (OPENCLAW_CONFIG_PATH=<dir>/revisions/<revHash>/openclaw.json), which
// only root writes, the pid is the unit's main process, and the unit's
// state follows as unit.<property>= lines (ActiveState, Result,
// ExecMainCode, ExecMainStatus), from which parseStatus derives what
// run.sh writes to status and whether systemd still supervises the
// gateway (unitVerdict). Args: dir port mode unit unitFile.
const scriptStatus = `
d=$1 port=$2 mode=$3 unit=$4 unitfile=$5
pid= rh= unitstate=
if [ "$mode" = systemd ]; then
	show=$(systemctl show -p MainPID -p ActiveState -p Result -p ExecMainCode -p ExecMainStatus "$unit" 2>/dev/null)
	pid=$(printf "%s\n" "$show" | sed -n 's/^MainPID=//p' | head -n 1)
	[ "$pid" = 0 ] && pid=
	unitstate=$(printf "%s\n" "$show" | awk -F= '$1 == "ActiveState" || $1 == "Result" || $1 == "ExecMainCode" || $1 == "ExecMainStatus" {
		v = $2; gsub(/[^A-Za-z0-9-]/, "", v); print "unit." $1 "=" v }')
	[ -f "$unitfile" ] && rh=$(sed -n 's|^Environment=OPENCLAW_CONFIG_PATH=.*/revisions/\([0-9a-f]*\)/openclaw\.json$|\1|p' "$unitfile" | head -c 64)
elif [ -f "$d/supervisor.pid" ]; then
	read pid rh < "$d/supervisor.pid"
	tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF "run.sh $d " || pid=
fi
case "$pid" in *[!0-9]*) pid= ;; esac
alive=0 owned=0
if [ -n "$pid" ] && kill -0 "$pid" 2>/dev/null; then alive=1; fi
if [ $alive = 1 ]; then
	a=$(printf "0100007F:%04X" "$port")
	for i in $(awk -v a="$a" '$2==a && $4=="0A" {print $10}' /proc/net/tcp); do
		for p in $(pgrep -s "$pid"); do
			ls -l "/proc/$p/fd" 2>/dev/null | grep -qF "socket:[$i]" && owned=1
		done
	done
fi
echo "pid=$pid"
echo "rev=$(printf "%s" "$rh" | tr -cd 0-9a-f)"
echo "alive=$alive"
echo "owned=$owned"
echo "status=$(head -c 64 "$d/status" 2>/dev/null | tr -cd a-z-)"
[ -z "$unitstate" ] || printf "%s\n" "$unitstate"
echo "serving=$(head -c 256 "$d/serving" 2>/dev/null | tr -cd 'A-Za-z0-9_ -')"
for f in "$d"/revisions/*/revision; do
	[ -f "$f" ] && echo "revision=$(head -c 256 "$f" | tr -cd 'A-Za-z0-9_ -')"
done
true
`

// scriptStart (runtime) installs run.sh from stdin and starts it in a new
// session, waiting for its pid file. Args: dir revHash port node mjs occ
// maxLogBytes.
const scriptStart = `
d=$1 rh=$2
rm -f "$d/status" "$d/supervisor.pid"
umask 077
cat > "$d/run.sh.tmp" && chmod 700 "$d/run.sh.tmp" && mv -f "$d/run.sh.tmp" "$d/run.sh" || exit 1
cd "$d" || exit 1
setsid -f sh "$d/run.sh" "$@" </dev/null >/dev/null 2>&1
i=0
while [ $i -lt 50 ]; do
	if [ -f "$d/supervisor.pid" ]; then read pid r < "$d/supervisor.pid"; [ "$r" = "$rh" ] && exit 0; fi
	sleep 0.1
	i=$((i+1))
done
echo "the supervisor did not start" >&2
exit 1
`

// supervisorScript is run.sh, occ's supervisor for hosts without systemd:
// before every start it runs the setup verifier (when the Agent has a
// setup), then the gateway with an environment built from scratch; it
// restarts a gateway that exits (1 s doubling to 30 s), and gives up,
// writing status, after a verifier failure, a refused configuration
// (exit 78 twice in a row) or five consecutive quick exits. Args: dir revHash port node
// mjs occ maxLogBytes.
const supervisorScript = `#!/bin/sh
# Written by occ's SSH Compute driver: supervises this Agent's gateway.
d=$1 rh=$2 port=$3 node=$4 mjs=$5 occ=$6 maxlog=$7
cd "$d" || exit 1
umask 077
echo "$$ $rh" > "$d/supervisor.pid.tmp" && mv -f "$d/supervisor.pid.tmp" "$d/supervisor.pid"
fails=0 backoff=1
while :; do
	if [ -f "$d/gateway.log" ] && [ "$(stat -c %s "$d/gateway.log")" -gt "$maxlog" ]; then mv -f "$d/gateway.log" "$d/gateway.log.1"; fi
	if [ -f "$d/setup-identity.json" ]; then
		if ! env -i PATH=/usr/bin:/bin HOME="$d/home" "$occ" workspace-setup --verify --payload "$d/setup-identity.json" \
			--workspace "$d/state/workspace" --node "$node" --openclaw "$mjs" --state-dir "$d/state" >/dev/null 2>>"$d/gateway.log"; then
			echo verify-failed > "$d/status"
			exit 1
		fi
	fi
	t0=$(date +%s)
	echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) occ-ssh: starting the gateway of revision $rh on port $port" >> "$d/gateway.log"
	env -i HOME="$d/home" OPENCLAW_STATE_DIR="$d/state" OPENCLAW_CONFIG_PATH="$d/revisions/$rh/openclaw.json" \
		OPENCLAW_SKIP_CHANNELS=1 OPENCLAW_DISABLE_BONJOUR=1 OPENCLAW_NO_AUTO_UPDATE=1 OPENCLAW_OFFLINE=1 OPENCLAW_NO_RESPAWN=1 \
		PATH="$(dirname "$node"):/usr/local/bin:/usr/bin:/bin" \
		"$node" "$mjs" gateway run --port "$port" >> "$d/gateway.log" 2>&1 < /dev/null
	code=$?
	echo "$(date -u +%Y-%m-%dT%H:%M:%SZ) occ-ssh: the gateway exited with status $code" >> "$d/gateway.log"
	# 78 is the gateway's "configuration refused"; twice in a row, so one
	# caused by a transient condition does not end the revision.
	if [ "$code" = 78 ]; then
		refused=$((${refused:-0}+1))
		if [ "$refused" -ge 2 ]; then echo config-refused > "$d/status"; exit 1; fi
	else
		refused=0
	fi
	if [ $(( $(date +%s) - t0 )) -ge 60 ]; then fails=0 backoff=1; fi
	fails=$((fails+1))
	if [ "$fails" -ge 5 ]; then echo runtime-failed > "$d/status"; exit 1; fi
	sleep "$backoff"
	backoff=$((backoff*2))
	[ "$backoff" -le 30 ] || backoff=30
done
`

// scriptStop (runtime) stops the Agent's gateway: SIGTERM to the
// supervisor's session (run.sh and the gateway), then, after the grace,
// SIGKILL to every process of the account whose working directory is the
// Agent's directory or under it: OpenClaw starts helpers (its spawn
// broker) in sessions of their own, and one left behind holds the state
// database and makes the next gateway refuse to start. Args: dir
// graceSeconds.
const scriptStop = `
d=$1 grace=$2
under() {
	for p in /proc/[0-9]*; do
		c=$(readlink "$p/cwd" 2>/dev/null) || continue
		case "$c" in "$d" | "$d"/*) echo "${p#/proc/}" ;; esac
	done
}
if [ -f "$d/supervisor.pid" ]; then
	read pid rh < "$d/supervisor.pid"
	case "$pid" in *[!0-9]*) pid= ;; esac
	if [ -n "$pid" ] && tr '\0' ' ' < "/proc/$pid/cmdline" 2>/dev/null | grep -qF "run.sh $d "; then
		kill -TERM -- "-$pid" 2>/dev/null
	fi
fi
i=0
while [ -n "$(under)" ] && [ $i -lt $((grace*5)) ]; do sleep 0.2; i=$((i+1)); done
i=0
while [ -n "$(under)" ] && [ $i -lt 50 ]; do
	kill -KILL $(under) 2>/dev/null
	sleep 0.2
	i=$((i+1))
done
if [ -n "$(under)" ]; then echo "the gateway did not stop" >&2; exit 1; fi
rm -f "$d/supervisor.pid"
`

// scriptSystemdStart (root) installs the unit from stdin and restarts it.
// The unit names its revision (the configuration path in its
// environment), so root writes nothing inside the Agent's directory,
// which the runtime account owns and could have planted a link in: the
// previous give-up status is removed as the runtime account. reset-failed
// clears what systemd kept of the unit's earlier starts (its failed
// state and Result, which scriptStatus reports as a give-up, and the
// start limit's count, which would refuse this start after a unit that
// hit it): this start is judged on its own. Args: dir unitName
// runtimeUser unitDir.
const scriptSystemdStart = `
set -e
d=$1 u=$2 ru=$3 ud=$4
umask 022
cat > "$ud/$u.tmp"
mv -f "$ud/$u.tmp" "$ud/$u"
runuser -u "$ru" -- env -i PATH=/usr/bin:/bin rm -f -- "$d/status"
systemctl daemon-reload
systemctl reset-failed "$u" 2>/dev/null || true
systemctl restart "$u"
`

// scriptSystemdFixUnits (root) rewrites the units an earlier occ wrote
// with StandardOutput=append:<agent dir>/gateway.log, which systemd opens
// as root at each (re)start in a directory the runtime account owns, to
// send the output to the journal, and reloads systemd if it changed one.
// A running gateway keeps its open log until it restarts. Args: unitDir.
const scriptSystemdFixUnits = `
set -e
fixed=
for u in "$1"/occ-gateway-*.service; do
	[ -f "$u" ] && [ ! -L "$u" ] && grep -q '^StandardOutput=append:' "$u" || continue
	sed -i 's|^StandardOutput=append:.*|StandardOutput=journal|' "$u"
	fixed=1
done
[ -z "$fixed" ] || systemctl daemon-reload
`

// scriptSystemdStop (root) stops the unit, keeping it installed; with
// "remove" it is disabled and removed. Args: unitName [remove].
const scriptSystemdStop = `
u=$1
systemctl stop "$u" 2>/dev/null || true
if [ "$2" = remove ]; then
	rm -f "/etc/systemd/system/$u"
	systemctl daemon-reload
fi
true
`

// scriptServe (runtime) records or clears the serving revision. Args: dir
// set|clear revID number.
const scriptServe = `
d=$1
if [ "$2" = set ]; then
	umask 077
	printf "%s %s\n" "$3" "$4" > "$d/serving.tmp" && mv -f "$d/serving.tmp" "$d/serving"
else
	[ -f "$d/serving" ] || exit 0
	read s n < "$d/serving"
	[ "$s" != "$3" ] || rm -f "$d/serving"
fi
`

// scriptRetire (runtime) removes one revision's directory. Args: dir
// revHash.
const scriptRetire = `rm -rf "$1/revisions/$2"`

// scriptDelete (root) removes the Agent's directory and token. Args: root
// ns agentHash.
const scriptDelete = `
r=$1 ns=$2 ah=$3
rm -rf "$r/namespaces/$ns/agents/$ah" "$r/tokens/$ah" "$r/tokens/$ah.tmp" "$r/ports/$ah" "$r/ports/$ah.tmp"
`

// scriptDeleteNamespace (root) removes the Namespace's empty directories.
// Args: root ns.
const scriptDeleteNamespace = `
rmdir "$1/namespaces/$2/agents" 2>/dev/null
rmdir "$1/namespaces/$2" 2>/dev/null
true
`

// scriptList (runtime) prints "<ns> <agentHash>" for every Agent directory
// that records a serving revision, for Recover. Args: root.
const scriptList = `
for f in "$1"/namespaces/*/agents/*/serving; do
	[ -f "$f" ] || continue
	a=${f%/serving}; ah=${a##*/}; n=${a%/agents/*}; ns=${n##*/}
	echo "$ns $ah"
done
true
`
