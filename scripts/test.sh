#!/usr/bin/env bash
# test.sh: everything `make test` (and so CI) does, on a fresh Debian 12 machine or a developer's.
#
#   1. scripts/lint.sh (also `make lint`): gofmt, goimports grouping, go vet and staticcheck (the
#      tools built from their modules into $HOME/.cache/occ/tools-bin) must
#      report nothing;
#   2. start the test PostgreSQL (scripts/testenv/postgres.sh; idempotent: a running server is
#      reused) and export OCC_TEST_POSTGRES_URL, which the store tests use to run against
#      PostgreSQL as well as SQLite;
#   3. install the agent runtime (scripts/install-runtime.sh: Node 24 + OpenClaw 2026.9.6 from npm into
#      $HOME/.cache/occ/runtime; nothing when installed) and export OCC_OPENCLAW_RUNTIME, which the
#      tests that run real OpenClaw gateways use;
#   4. build the container images (scripts/images.sh, also `make images`: bin/images/occ.tar and
#      gateway.tar, from Debian packages, npm and this checkout; nothing when their inputs did not
#      change) with the test Docker engine (scripts/testenv/docker.sh start: Debian's docker.io,
#      installed when missing, without a bridge; idempotent: a running engine is reused) and export
#      OCC_TEST_IMAGES_DIR and DOCKER_HOST, which the image tests (internal/images) use;
#   5. build the Kubernetes test binaries (scripts/testenv/k8s-build.sh: kube-apiserver, etcd, kubectl,
#      kube-controller-manager, kube-scheduler, kwok, envoy-gateway, egctl from Go modules into
#      $HOME/.cache/occ/k8s-bin; 7-17 minutes cold on 2 cores (docs/testing.md, Cost), nothing when already built), start the
#      Kubernetes test environment (scripts/testenv/k8s.sh start; idempotent: a running one is reused)
#      and export what `scripts/testenv/k8s.sh env` prints (OCC_TEST_KUBECONFIG, OCC_TEST_EGCTL, ...),
#      which the Kubernetes tests use (docs/testing.md, "Kubernetes test environment");
#   6. start the test OpenSSH server (scripts/testenv/sshd.sh start: Debian's openssh-server,
#      installed when missing, on 127.0.0.1 with fresh keys and the runtime account occ-agent;
#      idempotent: a running server is reused) and export the SSH_TEST_* variables it prints, which
#      the SSH Compute driver's tests (internal/compute/ssh, internal/server) use;
#   7. compile every test binary, then go test -race -count=1 in steps: the packages without
#      gateways together, then each package that starts real gateways alone, the Kubernetes
#      packages last, every one with an explicit -timeout (see below).
#
# It leaves PostgreSQL, the Docker engine, sshd and the Kubernetes environment running for the next run
# (`scripts/testenv/postgres.sh stop`, `scripts/testenv/docker.sh stop`, `scripts/testenv/sshd.sh stop` and
# `scripts/testenv/k8s.sh stop` stop them).
#
# Environment:
#   OCC_TEST_POSTGRES_URL  use this database server instead of starting one
#   OCC_OPENCLAW_RUNTIME   use this installed runtime instead of running scripts/install-runtime.sh
#   OCC_TEST_CHROMIUM      use this Chromium for the Console's browser tests instead of scripts/testenv/chromium.sh
#   OCC_TEST_AXE           use this axe.min.js instead of scripts/testenv/axe.sh
#   DOCKER_HOST            build and test the images with this Docker engine instead of starting one
#   OCC_TEST_IMAGES        1 (default) builds the images and starts the Docker engine, 0 skips that (the
#                          image tests then skip, or fail under CI=true)
#   SSH_TEST_ADDR          use this sshd (with SSH_TEST_KEY, SSH_TEST_KNOWN_HOSTS, SSH_TEST_RUNTIME_USER, as
#                          scripts/testenv/sshd.sh start prints them) instead of starting one
#   OCC_TEST_KUBECONFIG    use this Kubernetes test environment instead of starting one (then also set
#                          OCC_TEST_EGCTL, OCC_TEST_KUBECTL and OCC_TEST_HELM, as `scripts/testenv/k8s.sh env` does)
#   OCC_TEST_KUBERNETES    1 (default) builds and starts the Kubernetes environment, 0 skips that (the
#                          Kubernetes tests then skip, or fail under CI=true)
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

# gofmt, goimports grouping, go vet and staticcheck: exactly what `make lint` runs.
bash scripts/lint.sh

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

step "Agent runtime: Node 24 and OpenClaw 2026.9.6 (scripts/install-runtime.sh)"
if [ -z "${OCC_OPENCLAW_RUNTIME:-}" ]; then
	# The script prints the runtime dir on its last line; it installs only what is missing.
	OCC_OPENCLAW_RUNTIME=$(bash scripts/install-runtime.sh | tail -n 1)
	export OCC_OPENCLAW_RUNTIME
fi
echo "OCC_OPENCLAW_RUNTIME=$OCC_OPENCLAW_RUNTIME"
done_step

step "Chromium and axe-core for the Console's browser tests (scripts/testenv/chromium.sh, axe.sh)"
if [ -z "${OCC_TEST_CHROMIUM:-}" ]; then
	# Both print their path on the last line; they install only what is missing.
	OCC_TEST_CHROMIUM=$(bash scripts/testenv/chromium.sh | tail -n 1)
	export OCC_TEST_CHROMIUM
fi
if [ -z "${OCC_TEST_AXE:-}" ]; then
	OCC_TEST_AXE=$(bash scripts/testenv/axe.sh | tail -n 1)
	export OCC_TEST_AXE
fi
echo "OCC_TEST_CHROMIUM=$OCC_TEST_CHROMIUM"
echo "OCC_TEST_AXE=$OCC_TEST_AXE"
done_step

case "${OCC_TEST_IMAGES:-1}" in
1)
	step "Container images (scripts/images.sh) and the Docker engine (scripts/testenv/docker.sh)"
	if [ -z "${DOCKER_HOST:-}" ]; then
		# docker.sh prints DOCKER_HOST on its last line of standard output (progress goes to stderr).
		DOCKER_HOST=$(bash scripts/testenv/docker.sh start | tail -n 1)
		case "$DOCKER_HOST" in
		unix://*) ;;
		*)
			echo "test.sh: scripts/testenv/docker.sh start printed no DOCKER_HOST: '$DOCKER_HOST'" >&2
			exit 1
			;;
		esac
		export DOCKER_HOST
	else
		echo "using DOCKER_HOST from the environment"
	fi
	# images.sh prints the tarball directory on its last line.
	OCC_TEST_IMAGES_DIR=$(bash scripts/images.sh | tail -n 1)
	export OCC_TEST_IMAGES_DIR
	echo "DOCKER_HOST=$DOCKER_HOST"
	echo "OCC_TEST_IMAGES_DIR=$OCC_TEST_IMAGES_DIR"
	done_step
	;;
0) echo "==> Container images: skipped (OCC_TEST_IMAGES=0)" ;;
*)
	echo "test.sh: OCC_TEST_IMAGES must be 0 or 1, got '${OCC_TEST_IMAGES}'" >&2
	exit 1
	;;
esac

case "${OCC_TEST_KUBERNETES:-1}" in
1)
	if [ -n "${OCC_TEST_KUBECONFIG:-}" ]; then
		step "Kubernetes test environment"
		echo "using OCC_TEST_KUBECONFIG from the environment"
		done_step
	else
		# k8s-build.sh prints the bin dir last on standard output; progress goes to stderr.
		step "Kubernetes test binaries (scripts/testenv/k8s-build.sh)"
		bash scripts/testenv/k8s-build.sh >/dev/null
		done_step

		step "Kubernetes test environment (scripts/testenv/k8s.sh start)"
		bash scripts/testenv/k8s.sh start
		k8s_env=$(bash scripts/testenv/k8s.sh env)
		eval "$k8s_env"
		[ -n "${OCC_TEST_KUBECONFIG:-}" ] || {
			echo "test.sh: scripts/testenv/k8s.sh env printed no OCC_TEST_KUBECONFIG:" >&2
			printf '%s\n' "$k8s_env" >&2
			exit 1
		}
		done_step
	fi
	echo "OCC_TEST_KUBECONFIG=$OCC_TEST_KUBECONFIG"
	;;
0) echo "==> Kubernetes test environment: skipped (OCC_TEST_KUBERNETES=0)" ;;
*)
	echo "test.sh: OCC_TEST_KUBERNETES must be 0 or 1, got '${OCC_TEST_KUBERNETES}'" >&2
	exit 1
	;;
esac

step "OpenSSH test server (scripts/testenv/sshd.sh start)"
if [ -z "${SSH_TEST_ADDR:-}" ]; then
	# sshd.sh prints SSH_TEST_*=... on its last lines of standard output (progress goes to stderr).
	ssh_env=$(bash scripts/testenv/sshd.sh start)
	while IFS= read -r line; do
		case "$line" in SSH_TEST_*=*) export "${line?}" ;; esac
	done <<<"$ssh_env"
	[ -n "${SSH_TEST_ADDR:-}" ] || {
		echo "test.sh: scripts/testenv/sshd.sh start printed no SSH_TEST_ADDR" >&2
		exit 1
	}
else
	echo "using SSH_TEST_ADDR from the environment"
fi
echo "SSH_TEST_ADDR=$SSH_TEST_ADDR"
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

# How the tests run (docs/testing.md, "Timeouts and parallelism"). The
# budget that matters is real gateways: each costs about 1 GB and a core for
# its 10-90 s start, and two at once is what 2 cores carry. So:
#   - one compile step builds every test binary (go test -c), and the steps
#     below run those binaries, each in its package's directory as go test
#     does: the runs measure tests, not the compiler, -timeout never counts
#     compile time, and no package is linked twice;
#   - the packages that start real gateways or native OpenClaw processes
#     run in their own go test with the timeout each needs; inside each
#     package at most two gateways run at once (its own slots or shared
#     gateways). A package that may run two runs alone; packages that run
#     at most one at a time run two at a time ("A|B|C..." below: a pool of
#     two lanes, the longest packages first, each next package starting when
#     a lane frees, their output printed when all ended), so two gateways,
#     never more, run at any moment; internal/setuprunner (native `openclaw setup` runs,
#     no gateway, waiting on node start-up and fsync more than on CPU) runs
#     beside internal/agentgw, whose two shared gateways start once;
#   - the other packages run as go test would run them (one per core), each
#     under the same timeout;
#   - the Kubernetes packages run last, all four at once: their deployments
#     wait on kwok and the scheduler, which starve beside gateway starts,
#     and beside each other they leave the CPU half idle (measured: about
#     170 s together against 350 s one step after another). Each works in
#     namespaces, releases and a GatewayClass of its own; internal/compute/kube
#     starts at most one real gateway at a time.
# Every package gets an explicit -timeout (Go's default is 10 minutes for a
# whole binary). A failing package does not stop the others: each step
# runs, and the script fails at the end naming what failed.
#
# Timeouts: about three times the duration measured on the CI machine kind
# (2 cores, cold npm and gateway caches, nothing else running); see
# docs/testing.md for the measurements.
heavy=(
	"./internal/agentgw 15m|./internal/setuprunner 15m"
	"./internal/compute/local 30m"
	"./internal/compute/ssh 25m|./internal/server 30m|./internal/compute/docker 30m|./internal/clie2e 15m|./internal/console 10m|./internal/images 10m|./internal/agentgw/gwtest 10m"
)
kube=(
	"./internal/compute/kube 30m|./internal/routingops 20m|./internal/chart 10m|./internal/testenv/kube 10m"
)
light_timeout=10m

heavy_pkgs=()
for group in "${heavy[@]}" "${kube[@]}"; do
	IFS='|' read -ra members <<<"$group"
	for e in "${members[@]}"; do heavy_pkgs+=("$(go list "${e%% *}")"); done
done
light_pkgs=$(go list ./... | grep -vxF -f <(printf '%s\n' "${heavy_pkgs[@]}"))

# Test binaries are built once, in the compile step, and then run directly:
# `go test` links a package's test binary again on every call (links are
# not cached; with -race a link takes seconds), so building them once saves
# a second link of every package. Each binary runs in its package's
# directory, as `go test` runs it.
module=$(go list -m)
testbin=$(mktemp -d "${TMPDIR:-/tmp}/occ-testbin.XXXXXX")
trap 'rm -rf "$testbin"' EXIT
# bin_of PKG: the path of PKG's test binary (it exists only for a package with tests).
bin_of() { printf '%s/%s.test' "$testbin" "$(printf '%s' "$1" | tr '/.' '__')"; }
# dir_of PKG: the package's directory.
dir_of() { printf '%s' "${1/#$module/.}"; }

failed=()
# run_pkg PKG TIMEOUT OUT: run PKG's test binary with the timeout, output to
# OUT, ending with go test's own summary line; returns its exit status.
run_pkg() {
	local pkg=$1 timeout=$2 out=$3 bin start rc=0
	case "$pkg" in ./*) pkg=$module/${pkg#./} ;; esac
	bin=$(bin_of "$pkg")
	start=$SECONDS
	if [ ! -x "$bin" ]; then
		echo "?   	$pkg	[no test files]" >"$out"
		return 0
	fi
	(cd "$(dir_of "$pkg")" && "$bin" -test.count=1 -test.timeout="$timeout" -test.paniconexit0) >"$out" 2>&1 || rc=$?
	if [ "$rc" -eq 0 ]; then
		# Passing output is only "PASS" unless a test logged: keep it short, as go test does.
		grep -v '^PASS$' "$out" >"$out.tmp" || true
		mv "$out.tmp" "$out"
		printf 'ok  \t%s\t%ds\n' "$pkg" $((SECONDS - start)) >>"$out"
	else
		printf 'FAIL\t%s\t%ds\n' "$pkg" $((SECONDS - start)) >>"$out"
	fi
	return "$rc"
}

# run_pkgs_at_once N "PKG TIMEOUT" ...: the packages' tests, at most N at
# once, each with its output in a file printed (in order) when all ended, so
# the log stays readable; each failure is recorded, not fatal.
run_pkgs_at_once() {
	local n=$1 dir i running=0 pkg timeout
	shift
	local -a entries=("$@") pids=()
	dir=$(mktemp -d)
	for i in "${!entries[@]}"; do
		if [ "$running" -ge "$n" ]; then
			wait -n || true
			running=$((running - 1))
		fi
		pkg=${entries[$i]%% *} timeout=${entries[$i]##* }
		run_pkg "$pkg" "$timeout" "$dir/$i.out" &
		pids[i]=$!
		running=$((running + 1))
	done
	for i in "${!entries[@]}"; do
		if ! wait "${pids[$i]}"; then
			failed+=("${entries[$i]%% *} (-timeout ${entries[$i]##* })")
		fi
		cat "$dir/$i.out"
	done
	rm -rf "$dir"
}

# run_go_test_group N "PKG TIMEOUT|PKG TIMEOUT...": one timed step, the
# group's packages N at a time.
run_go_test_group() {
	local n=$1
	local -a members
	IFS='|' read -ra members <<<"$2"
	step "go test ${race[*]} -count=1: ${2//|/ + } ($n at a time)"
	run_pkgs_at_once "$n" "${members[@]}"
	done_step
}

step "compile every test binary (go test ${race[*]} -ldflags=-w -c, $(nproc) at once)"
# compile_pkg PKG OUT: build PKG's test binary (the build cache makes the
# compile itself cheap when nothing changed; the link is what remains).
# -ldflags=-w leaves out the DWARF debugging information, which no step
# reads (stack traces and the race detector's reports use the symbol table,
# which stays): measured on this machine kind with a warm cache, the 46
# binaries took 55-59 s without it against 76-80 s with it, and 1.6 GB
# instead of 1.9 GB of disk. A debugger needs a binary built without it.
compile_pkg() {
	go test "${race[@]}" -ldflags=-w -c -o "$(bin_of "$1")" "$1" >"$2" 2>&1
}
compile_failed=()
compile_dir=$(mktemp -d)
mapfile -t test_pkgs < <(go list -f '{{if or .TestGoFiles .XTestGoFiles}}{{.ImportPath}}{{end}}' ./...)
running=0
declare -A compile_pids=()
for i in "${!test_pkgs[@]}"; do
	if [ "$running" -ge "$(nproc)" ]; then
		wait -n || true
		running=$((running - 1))
	fi
	compile_pkg "${test_pkgs[$i]}" "$compile_dir/$i.out" &
	compile_pids[$i]=$!
	running=$((running + 1))
done
for i in "${!test_pkgs[@]}"; do
	if ! wait "${compile_pids[$i]}"; then
		compile_failed+=("${test_pkgs[$i]}")
		cat "$compile_dir/$i.out" >&2
	fi
done
rm -rf "$compile_dir"
if [ ${#compile_failed[@]} -gt 0 ]; then
	echo "test.sh: these test binaries did not build: ${compile_failed[*]}" >&2
	exit 1
fi
done_step

# The packages without gateways, as many at once as there are cores (go test's default -p).
light=()
for pkg in $light_pkgs; do light+=("$pkg $light_timeout"); done
step "go test ${race[*]} -count=1: packages without gateways ($(nproc) at once, -timeout $light_timeout each)"
run_pkgs_at_once "$(nproc)" "${light[@]}"
done_step
for group in "${heavy[@]}"; do
	run_go_test_group 2 "$group"
done
for group in "${kube[@]}"; do
	run_go_test_group 4 "$group"
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "test.sh: FAILED after $((SECONDS / 60))m$((SECONDS % 60))s:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "all checks passed in $((SECONDS / 60))m$((SECONDS % 60))s"
