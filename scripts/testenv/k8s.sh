#!/usr/bin/env bash
# k8s.sh: a real Kubernetes control plane with Envoy Gateway for OCC's tests, on loopback only.
#
#   scripts/testenv/k8s.sh start  [DIR]   # build what is missing, start (or reuse) everything, wait until ready
#   scripts/testenv/k8s.sh env    [DIR]   # print `export` lines for the tests: eval "$(scripts/testenv/k8s.sh env)"
#   scripts/testenv/k8s.sh status [DIR]   # exit 0 when every component runs and answers
#   scripts/testenv/k8s.sh stop   [DIR]   # stop every component this script started
#
# What runs (binaries from scripts/testenv/k8s-build.sh, in ${OCC_K8S_BIN:-$HOME/.cache/occ/k8s-bin}):
#   etcd                      127.0.0.1:12379 (client), 127.0.0.1:12380 (peer); no fsync
#   kube-apiserver            https://127.0.0.1:16443, RBAC, client-certificate auth (admin is system:masters)
#   kube-controller-manager   https://127.0.0.1:16457 (health); Deployments, ReplicaSets, EndpointSlices, ...
#                             (not the node lifecycle controller: see start_control_plane)
#   kube-scheduler            https://127.0.0.1:16459 (health)
#   kwok                      127.0.0.1:16480; fakes the kubelet of one node, kwok-node-0, so pods become
#                             Running/Ready with fake IPs from 10.244.0.0/24 (no container ever runs)
#   CRDs (server-side apply)  Gateway API v1.6.3 standard channel, Envoy Gateway v1.9.1, cert-manager v1.21.2
#   envoy-gateway             the real Envoy Gateway v1.9.1 controller, out of cluster. It sets the status of
#                             GatewayClass/Gateway/HTTPRoute/SecurityPolicy and creates the Envoy proxy
#                             Deployments (no Envoy proxy runs: none can be installed here). Its listeners:
#                               127.0.0.1:18080 metrics, 127.0.0.1:18081 health (k8s-build.sh moves both off
#                               controller-runtime's *:8080/*:8081 defaults, which OCC's dev server would clash with),
#                               127.0.0.1:19000 admin, *:18000 xDS and *:18002 Wasm HTTP (fixed in EG's code).
#                             Its xDS server certificate must be in /certs (a constant in EG), so start needs root
#                             or a writable /certs. No webhook (*:9443), no Prometheus listener (*:19001).
# Every port can be moved with the variables below; start fails if one is taken by another process.
#
# State: DIR, default ${OCC_TEST_STATE_DIR:-$HOME/.cache/occ-test}/k8s (outside the clone): pki/ (CA and
# certificates made with openssl on first start, kept), kubeconfig, etcd data, logs/*.log, *.pid.
#
# start is idempotent: when every component runs (checked by pid file, the process's command line and a
# health probe) with the same binaries and settings, the environment is reused as it is, objects and all.
# Otherwise whatever is left of an earlier start is stopped and everything starts afresh on an empty etcd.
# Stale pid files (process gone, or the pid reused by another program) are ignored. A component that
# does not come up fails the start with the tail of its log. Concurrent invocations are serialised.
#
# Environment:
#   OCC_TEST_STATE_DIR           state root, default $HOME/.cache/occ-test
#   OCC_K8S_BIN                  binaries, default $HOME/.cache/occ/k8s-bin (see k8s-build.sh)
#   OCC_TEST_K8S_PORT            kube-apiserver port, default 16443
#   OCC_TEST_K8S_ETCD_PORT       etcd client port, default 12379 (the peer port is the next one)
#   OCC_TEST_K8S_KCM_PORT        kube-controller-manager, default 16457
#   OCC_TEST_K8S_SCHEDULER_PORT  kube-scheduler, default 16459
#   OCC_TEST_K8S_KWOK_PORT       kwok, default 16480
set -euo pipefail

here=$(cd "$(dirname "$0")" && pwd -P)
cmd=${1:-}
STATE_DIR=${OCC_TEST_STATE_DIR:-${HOME:?HOME is not set}/.cache/occ-test}
DIR=${2:-$STATE_DIR/k8s}
BIN=${OCC_K8S_BIN:-$HOME/.cache/occ/k8s-bin}
API_PORT=${OCC_TEST_K8S_PORT:-16443}
ETCD_PORT=${OCC_TEST_K8S_ETCD_PORT:-12379}
ETCD_PEER_PORT=$((ETCD_PORT + 1))
KCM_PORT=${OCC_TEST_K8S_KCM_PORT:-16457}
SCHED_PORT=${OCC_TEST_K8S_SCHEDULER_PORT:-16459}
KWOK_PORT=${OCC_TEST_K8S_KWOK_PORT:-16480}
# Envoy Gateway's listeners; these follow from its code and k8s-build.sh's link flags, not from here.
EG_HEALTH=127.0.0.1:18081
EG_FIXED_PORTS="18000 18002 18080 18081 19000"
NODE=kwok-node-0
# Bump when the way components are started changes, so a running environment is not reused.
RECIPE=2

# Stop order; start order is the reverse.
COMPONENTS=(envoy-gateway kwok kube-scheduler kube-controller-manager kube-apiserver etcd)

die() {
	echo "k8s.sh: $*" >&2
	exit 1
}
log() { echo "k8s.sh: $*" >&2; }
# phase MESSAGE: log MESSAGE with the seconds since start began.
phase() { log "$* (+$((SECONDS - T0))s)"; }

usage() {
	echo "usage: $0 start|stop|env|status [DIR]" >&2
	exit 2
}

for p in "$API_PORT" "$ETCD_PORT" "$KCM_PORT" "$SCHED_PORT" "$KWOK_PORT"; do
	case "$p" in '' | *[!0-9]*) die "ports must be numbers, got '$p'" ;; esac
done

mkdir -p "$DIR"
DIR=$(cd "$DIR" && pwd -P)
[ -d "$BIN" ] && BIN=$(cd "$BIN" && pwd -P)
PKI=$DIR/pki
LOGS=$DIR/logs
KUBECONFIG_FILE=$DIR/kubeconfig
# For every child: kubectl, envoy-gateway (server and certgen) and kwok find the cluster through it.
export KUBECONFIG=$KUBECONFIG_FILE
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false GOWORK=off

kubectl() { "$BIN/kubectl" --kubeconfig "$KUBECONFIG_FILE" "$@"; }

# pid_of NAME prints the pid of our running NAME, or fails: the pid file must name a live process whose
# command is our binary (a pid reused by another program after a crash or reboot does not count).
pid_of() {
	local pid exe
	pid=$(cat "$DIR/$1.pid" 2>/dev/null) || return 1
	case "$pid" in '' | *[!0-9]*) return 1 ;; esac
	exe=$({ tr '\0' '\n' <"/proc/$pid/cmdline"; } 2>/dev/null | head -n 1) || return 1
	[ "$exe" = "$BIN/$1" ] || return 1
	echo "$pid"
}

# alive PID: the process exists and is not a zombie. Our components are re-parented to PID 1 once
# start returns, and a zombie lingers until PID 1 reaps it (seconds, on some machines); kill -0 would
# still succeed on it.
alive() {
	local stat
	stat=$({ cat "/proc/$1/stat"; } 2>/dev/null) || return 1
	stat=${stat##*) }
	[ "${stat%% *}" != Z ]
}

# tail_log NAME prints the end of NAME's log to stderr.
tail_log() {
	echo "---- last lines of $LOGS/$1.log ----" >&2
	tail -n "${2:-40}" "$LOGS/$1.log" >&2 2>/dev/null || echo "(no log)" >&2
	echo "----" >&2
}

fail() { # fail NAME MESSAGE
	tail_log "$1"
	die "$2 (log: $LOGS/$1.log)"
}

# port_busy PORT: something accepts connections on 127.0.0.1:PORT.
port_busy() { (exec 3<>"/dev/tcp/127.0.0.1/$1") 2>/dev/null; }

# launch NAME ARGS...: start our NAME in a session of its own (Ctrl-C of the caller does not reach it),
# with no inherited descriptors (a caller reading our stdout must not wait for it), logging to logs/NAME.log.
launch() {
	local name=$1
	shift
	setsid "$BIN/$name" "$@" </dev/null >"$LOGS/$name.log" 2>&1 9>&- &
	echo $! >"$DIR/$name.pid"
}

# launched_alive NAME: the process launch started for NAME is still there. Right after launch it may
# not have exec'd NAME yet (its command line is still the forked shell's or setsid's; on a loaded
# machine for a second or more), so pid_of would call it gone: this checks only that the pid lives.
launched_alive() {
	local pid
	pid=$(cat "$DIR/$1.pid" 2>/dev/null) || return 1
	case "$pid" in '' | *[!0-9]*) return 1 ;; esac
	alive "$pid"
}

# wait_until SECONDS NAME DESCRIPTION COMMAND...: poll COMMAND every 0.2 s; fail with NAME's log when
# NAME's process exits or the time runs out.
wait_until() {
	local secs=$1 name=$2 what=$3 deadline
	shift 3
	deadline=$((SECONDS + secs))
	until "$@" >/dev/null 2>&1; do
		launched_alive "$name" || fail "$name" "$name exited before $what"
		[ $SECONDS -lt $deadline ] || fail "$name" "$what: not within ${secs}s"
		sleep 0.2
	done
}

https_ok() { # https_ok URL: client-cert authenticated GET returns 2xx
	curl -sf -m 2 --cacert "$PKI/ca.crt" --cert "$PKI/admin.crt" --key "$PKI/admin.key" "$1"
}
health_ok() { curl -skf -m 2 "$1"; } # the component's own serving certificate is self-signed

# fingerprint: what the running environment must match to be reused.
fingerprint() {
	echo "recipe=$RECIPE bin=$BIN ports=$API_PORT,$ETCD_PORT,$KCM_PORT,$SCHED_PORT,$KWOK_PORT"
	cat "$BIN"/.*.version 2>/dev/null
}

healthy() {
	local c
	for c in "${COMPONENTS[@]}"; do pid_of "$c" >/dev/null || return 1; done
	[ "$(cat "$DIR/fingerprint" 2>/dev/null)" = "$(fingerprint)" ] || return 1
	https_ok "https://127.0.0.1:$API_PORT/readyz" >/dev/null 2>&1 || return 1
	health_ok "https://127.0.0.1:$KCM_PORT/healthz" >/dev/null 2>&1 || return 1
	health_ok "https://127.0.0.1:$SCHED_PORT/healthz" >/dev/null 2>&1 || return 1
	curl -sf -m 2 "http://$EG_HEALTH/readyz" >/dev/null 2>&1 || return 1
	[ "$(kubectl get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}' 2>/dev/null)" = True ]
}

stop_all() {
	local c pid i
	for c in "${COMPONENTS[@]}"; do
		if pid=$(pid_of "$c"); then
			kill "$pid" 2>/dev/null || true
			for i in $(seq 1 100); do
				alive "$pid" || break
				sleep 0.1
			done
			if alive "$pid"; then
				log "$c (pid $pid) ignored SIGTERM for 10s; killing it"
				kill -KILL "$pid" 2>/dev/null || true
			fi
		fi
		rm -f "$DIR/$c.pid"
	done
	rm -f "$DIR/fingerprint"
}

lock() {
	exec 9>"$DIR/.lock"
	flock -w 600 9 || die "timed out waiting for another k8s.sh in $DIR"
}

make_pki() {
	[ -s "$PKI/admin.crt" ] && [ -s "$PKI/sa.pub" ] && return
	command -v openssl >/dev/null || die "openssl is needed to make the test certificates"
	rm -rf "$PKI"
	mkdir -p "$PKI"
	(
		cd "$PKI"
		set -e
		exec 2>openssl.log
		openssl req -x509 -newkey rsa:2048 -nodes -days 3650 -subj "/CN=occ-test-ca" -keyout ca.key -out ca.crt
		openssl req -newkey rsa:2048 -nodes -subj "/CN=kube-apiserver" -keyout apiserver.key -out apiserver.csr
		printf '%s\n' "subjectAltName=IP:127.0.0.1,DNS:localhost,DNS:kubernetes,DNS:kubernetes.default,DNS:kubernetes.default.svc" \
			"extendedKeyUsage=serverAuth" >apiserver.ext
		openssl x509 -req -in apiserver.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile apiserver.ext -out apiserver.crt
		openssl req -newkey rsa:2048 -nodes -subj "/O=system:masters/CN=occ-test-admin" -keyout admin.key -out admin.csr
		printf 'extendedKeyUsage=clientAuth\n' >admin.ext
		openssl x509 -req -in admin.csr -CA ca.crt -CAkey ca.key -CAcreateserial -days 3650 -extfile admin.ext -out admin.crt
		openssl genrsa -out sa.key 2048
		openssl rsa -in sa.key -pubout -out sa.pub
	) || {
		cat "$PKI/openssl.log" >&2
		die "making the test certificates failed"
	}
	chmod 600 "$PKI"/*.key
}

write_kubeconfig() {
	cat >"$KUBECONFIG_FILE.tmp" <<EOF
# Written by OCC's scripts/testenv/k8s.sh: the test cluster, administrator (system:masters) credentials.
apiVersion: v1
kind: Config
clusters:
- name: occ-test
  cluster:
    server: https://127.0.0.1:$API_PORT
    certificate-authority: $PKI/ca.crt
users:
- name: occ-test-admin
  user:
    client-certificate: $PKI/admin.crt
    client-key: $PKI/admin.key
contexts:
- name: occ-test
  context: {cluster: occ-test, user: occ-test-admin}
current-context: occ-test
EOF
	mv "$KUBECONFIG_FILE.tmp" "$KUBECONFIG_FILE"
}

# mod_dir MODULE@VERSION prints the module's directory in the module cache (downloading it if needed).
mod_dir() {
	local d
	d=$(cd "$DIR" && go mod download -json "$1" | sed -n 's/^[[:space:]]*"Dir": "\(.*\)",*$/\1/p')
	[ -d "$d" ] || die "go mod download $1 gave no directory"
	echo "$d"
}

start_control_plane() {
	launch etcd --name occ-test --data-dir "$DIR/etcd" \
		--listen-client-urls "http://127.0.0.1:$ETCD_PORT" --advertise-client-urls "http://127.0.0.1:$ETCD_PORT" \
		--listen-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" --initial-advertise-peer-urls "http://127.0.0.1:$ETCD_PEER_PORT" \
		--initial-cluster "occ-test=http://127.0.0.1:$ETCD_PEER_PORT" \
		--unsafe-no-fsync --log-level warn
	wait_until 30 etcd "etcd health" curl -sf -m 2 "http://127.0.0.1:$ETCD_PORT/health"
	phase "etcd ready on 127.0.0.1:$ETCD_PORT"

	launch kube-apiserver \
		--etcd-servers "http://127.0.0.1:$ETCD_PORT" \
		--bind-address 127.0.0.1 --advertise-address 127.0.0.1 --secure-port "$API_PORT" \
		--tls-cert-file "$PKI/apiserver.crt" --tls-private-key-file "$PKI/apiserver.key" \
		--client-ca-file "$PKI/ca.crt" \
		--requestheader-client-ca-file "$PKI/ca.crt" --requestheader-allowed-names front-proxy-client \
		--requestheader-username-headers X-Remote-User --requestheader-group-headers X-Remote-Group \
		--requestheader-extra-headers-prefix X-Remote-Extra- \
		--service-account-key-file "$PKI/sa.pub" --service-account-signing-key-file "$PKI/sa.key" \
		--service-account-issuer https://kubernetes.default.svc \
		--service-cluster-ip-range 10.96.0.0/16 \
		--authorization-mode RBAC --allow-privileged=true \
		--endpoint-reconciler-type none \
		--cert-dir "$DIR/apiserver-certs"
	wait_until 90 kube-apiserver "kube-apiserver /readyz" https_ok "https://127.0.0.1:$API_PORT/readyz"
	phase "kube-apiserver ready on https://127.0.0.1:$API_PORT"

	local kc=$KUBECONFIG_FILE
	# Without the node lifecycle controller. It judges the node by its lease, which kwok renews every
	# 10 s: when a loaded machine starves kwok for the 50 s grace period, the controller marks the
	# node NotReady and sets Ready=False on every Pod on it. A kubelet would report them ready again;
	# kwok never does (its pod-ready stage only moves Pending Pods), so every Deployment of the
	# running tests stays unavailable for good and those tests fail together. The node is fake, so
	# there is nothing real for the controller to detect.
	launch kube-controller-manager --kubeconfig "$kc" --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
		--service-account-private-key-file "$PKI/sa.key" --root-ca-file "$PKI/ca.crt" \
		--cluster-signing-cert-file "$PKI/ca.crt" --cluster-signing-key-file "$PKI/ca.key" \
		--use-service-account-credentials=false --leader-elect=false \
		--controllers '*,-node-lifecycle-controller' \
		--bind-address 127.0.0.1 --secure-port "$KCM_PORT"
	launch kube-scheduler --kubeconfig "$kc" --authentication-kubeconfig "$kc" --authorization-kubeconfig "$kc" \
		--leader-elect=false --bind-address 127.0.0.1 --secure-port "$SCHED_PORT"
}

start_kwok() {
	# kwok has no built-in behaviour: its stages (node initialise + heartbeat, pod lifecycle) come from
	# its module, the same ones `kwokctl` uses.
	local stages
	stages=$(mod_dir "sigs.k8s.io/kwok@$KWOK_VERSION")/kustomize/stage
	local f
	for f in "$stages/node/fast/node-initialize.yaml" "$stages/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml" \
		"$stages"/pod/general/pod-*.yaml; do
		[ -f "$f" ] || die "kwok stage file $f is missing"
		echo '---'
		cat "$f"
	done >"$DIR/kwok-stages.yaml"
	launch kwok --kubeconfig "$KUBECONFIG_FILE" -c "$DIR/kwok-stages.yaml" \
		--manage-all-nodes=false --manage-nodes-with-annotation-selector kwok.x-k8s.io/node=fake \
		--cidr 10.244.0.0/24 --node-ip 127.0.0.1 --server-address "127.0.0.1:$KWOK_PORT"
	kubectl apply -f - >/dev/null <<EOF
apiVersion: v1
kind: Node
metadata:
  name: $NODE
  annotations: {kwok.x-k8s.io/node: fake, node.alpha.kubernetes.io/ttl: "0"}
  labels: {kubernetes.io/hostname: $NODE, kubernetes.io/os: linux, kubernetes.io/arch: amd64, type: kwok}
status:
  allocatable: {cpu: "32", memory: 256Gi, pods: "110"}
  capacity: {cpu: "32", memory: 256Gi, pods: "110"}
EOF
}

node_ready() {
	[ "$(kubectl get node "$NODE" -o 'jsonpath={.status.conditions[?(@.type=="Ready")].status}')" = True ]
}

# untaint removes the node.kubernetes.io/not-ready taint. The TaintNodesByCondition admission plugin
# puts it on every new Node, and only the node lifecycle controller (not run, see above) takes it off
# once the node is Ready: without this, every Pod stays Pending (Unschedulable). Idempotent.
untaint() {
	if kubectl get node "$NODE" -o 'jsonpath={.spec.taints[*].key}' | grep -qw node.kubernetes.io/not-ready; then
		kubectl taint node "$NODE" node.kubernetes.io/not-ready:NoSchedule- >/dev/null
	fi
}

apply_crds() {
	local gw eg cm d
	gw=$(mod_dir "sigs.k8s.io/gateway-api@$GWAPI_VERSION")/config/crd/standard
	eg=$(mod_dir "github.com/envoyproxy/gateway@$EG_VERSION")/charts/gateway-helm/charts/crds/crds/generated
	cm=$(mod_dir "github.com/cert-manager/cert-manager@$CM_VERSION")/deploy/crds
	for d in "$gw" "$eg" "$cm"; do
		[ -d "$d" ] || die "CRD directory $d is missing"
	done
	# Server-side: Envoy Gateway's CRDs are too big for the last-applied annotation of a client-side apply.
	kubectl apply --server-side --force-conflicts --field-manager occ-test -f "$gw" -f "$eg" -f "$cm" >"$LOGS/crds.log" 2>&1 || {
		cat "$LOGS/crds.log" >&2
		die "applying the CRDs from $gw, $eg and $cm failed"
	}
	kubectl wait --for condition=Established crd --all --timeout 120s >"$LOGS/crds.log" 2>&1 || {
		cat "$LOGS/crds.log" >&2
		kubectl get crd >&2 || true
		die "CRDs not Established within 120s"
	}
	phase "$(kubectl get crd -o name | wc -l) CRDs established"
}

start_envoy_gateway() {
	local ns=envoy-gateway-system eg=$DIR/envoy-gateway
	mkdir -p "$eg"
	kubectl create namespace "$ns" >/dev/null
	# The control-plane certificates as Secrets (what the proxy Deployments mount); without the flag
	# certgen also wants the topology-injector MutatingWebhookConfiguration, which is not installed.
	"$BIN/envoy-gateway" certgen --disable-topology-injector >"$LOGS/certgen.log" 2>&1 9>&- ||
		fail certgen "envoy-gateway certgen failed"
	# The xDS server reads the same certificate from files in /certs (a constant in EG's code).
	if ! { mkdir -p /certs && [ -w /certs ]; } 2>/dev/null; then
		die "Envoy Gateway reads its xDS server certificate from /certs, which is not writable: run as root or create /certs writable for $(id -un)"
	fi
	local k
	for k in tls.crt tls.key ca.crt; do
		kubectl -n "$ns" get secret envoy-gateway -o "jsonpath={.data.${k//./\\.}}" | base64 -d >"/certs/$k.tmp"
		[ -s "/certs/$k.tmp" ] || die "secret $ns/envoy-gateway has no $k"
		mv "/certs/$k.tmp" "/certs/$k"
	done
	chmod 600 /certs/tls.key
	cat >"$eg/config.yaml" <<EOF
# Written by OCC's scripts/testenv/k8s.sh.
apiVersion: gateway.envoyproxy.io/v1alpha1
kind: EnvoyGateway
gateway:
  controllerName: gateway.envoyproxy.io/gatewayclass-controller
provider:
  type: Kubernetes
  kubernetes:
    leaderElection: {disable: true}
    proxyTopologyInjector: {disabled: true}
admin:
  address: {host: 127.0.0.1, port: 19000}
telemetry:
  metrics:
    prometheus: {disable: true}
logging:
  level: {default: info}
EOF
	launch envoy-gateway server --config-path "$eg/config.yaml"
	wait_until 90 envoy-gateway "Envoy Gateway /readyz on $EG_HEALTH" curl -sf -m 2 "http://$EG_HEALTH/readyz"
	phase "Envoy Gateway ready"
}

start() {
	[ -x "$BIN/helm" ] && [ -x "$BIN/kube-apiserver" ] || log "binaries missing in $BIN; building them (cold: about 8 minutes)"
	# Builds only what is missing or outdated; otherwise instant.
	OCC_K8S_BIN=$BIN "$here/k8s-build.sh" >/dev/null 9>&-
	BIN=$(cd "$BIN" && pwd -P)
	export ENVOY_GATEWAY_NAMESPACE=envoy-gateway-system
	command -v curl >/dev/null || die "curl is needed"

	lock
	if healthy; then
		untaint
		log "reusing the running environment in $DIR"
		return
	fi
	T0=$SECONDS
	stop_all
	# Whatever fails from here on: leave nothing half-started behind (the logs stay).
	trap 'rc=$?; if [ $rc != 0 ]; then log "start failed; stopping what was started"; stop_all; fi' EXIT
	local p
	for p in "$ETCD_PORT" "$ETCD_PEER_PORT" "$API_PORT" "$KCM_PORT" "$SCHED_PORT" "$KWOK_PORT" $EG_FIXED_PORTS; do
		if port_busy "$p"; then
			(ss -ltnp 2>/dev/null || true) | grep -E ":$p\b" >&2 || true
			die "port $p on 127.0.0.1 is taken by another process; stop it, or move our port (see the header of $0)"
		fi
	done
	mkdir -p "$LOGS"
	rm -rf "$DIR/etcd" "$DIR/apiserver-certs" # a fresh, empty cluster on every real start
	make_pki
	write_kubeconfig
	phase "certificates in $PKI"

	start_control_plane
	start_kwok
	apply_crds
	wait_until 60 kube-controller-manager "kube-controller-manager /healthz" health_ok "https://127.0.0.1:$KCM_PORT/healthz"
	wait_until 60 kube-scheduler "kube-scheduler /healthz" health_ok "https://127.0.0.1:$SCHED_PORT/healthz"
	wait_until 60 kwok "node $NODE Ready" node_ready
	untaint
	phase "kube-controller-manager and kube-scheduler healthy, node $NODE Ready"
	start_envoy_gateway
	fingerprint >"$DIR/fingerprint"
	trap - EXIT
	log "started in $((SECONDS - T0))s; KUBECONFIG=$KUBECONFIG_FILE"
}

print_env() {
	local b
	b=$(cd "$BIN" 2>/dev/null && pwd -P) || b=$BIN
	printf 'export KUBECONFIG=%q\n' "$KUBECONFIG_FILE"
	printf 'export OCC_TEST_KUBECONFIG=%q\n' "$KUBECONFIG_FILE"
	printf 'export KUBEBUILDER_ASSETS=%q\n' "$b"
	printf 'export OCC_TEST_K8S_BIN=%q\n' "$b"
	printf 'export OCC_TEST_EGCTL=%q\n' "$b/egctl"
	printf 'export OCC_TEST_KUBECTL=%q\n' "$b/kubectl"
	printf 'export OCC_TEST_HELM=%q\n' "$b/helm"
	case ":$PATH:" in
	*":$b:"*) ;;
	*) printf 'export PATH=%q:"$PATH"\n' "$b" ;;
	esac
}

# The versions of kwok (stages) and of the CRD sets are those k8s-build.sh pins.
eval "$("$here/k8s-build.sh" versions)"

case "$cmd" in
start) start ;;
stop)
	lock
	stop_all
	;;
env) print_env ;;
status) healthy ;;
*) usage ;;
esac
