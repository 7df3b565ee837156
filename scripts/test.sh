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
#      $HOME/.cache/occ/k8s-bin; about 8 minutes cold on 2 cores, nothing when already built), start the
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
#   - one compile step builds every test binary (-exec true runs none of
#     them), so the runs below measure tests, not the compiler, and
#     -timeout never counts compile time;
#   - the packages that start real gateways or native OpenClaw processes
#     run in their own go test with the timeout each needs; inside each
#     package at most two gateways run at once (its own slots or shared
#     gateways). A package that may run two runs alone; packages that run
#     at most one at a time run in pairs ("A|B" below: two go tests at once,
#     their output printed when both ended), so two gateways, never more,
#     run at any moment;
#   - the other packages run together, as go test does by default (one per
#     core), under one timeout;
#   - the Kubernetes packages run last, one at a time: their deployments
#     wait on kwok and the scheduler, which starve beside gateway starts.
# Every package gets an explicit -timeout (Go's default is 10 minutes for a
# whole binary). A failing package does not stop the others: each step
# runs, and the script fails at the end naming what failed.
#
# Timeouts: about three times the duration measured on the CI machine kind
# (2 cores, cold npm and gateway caches, nothing else running); see
# docs/testing.md for the measurements.
heavy=(
	"./internal/agentgw 15m"
	"./internal/compute/local 30m"
	"./internal/setuprunner 15m"
	"./internal/agentgw/gwtest 10m"
	"./internal/compute/docker 30m|./internal/compute/ssh 25m"
	"./internal/server 30m|./internal/clie2e 15m"
	"./internal/console 10m|./internal/images 10m"
)
kube=(
	"./internal/testenv/kube 10m"
	"./internal/compute/kube 30m"
	"./internal/routingops 20m"
	"./internal/chart 10m"
)
light_timeout=10m

heavy_pkgs=()
for group in "${heavy[@]}" "${kube[@]}"; do
	IFS='|' read -ra members <<<"$group"
	for e in "${members[@]}"; do heavy_pkgs+=("$(go list "${e%% *}")"); done
done
light_pkgs=$(go list ./... | grep -vxF -f <(printf '%s\n' "${heavy_pkgs[@]}"))

failed=()
# run_go_test NAME ARGS...: one go test invocation as a timed step; a
# failure is recorded, not fatal.
run_go_test() {
	local name=$1
	shift
	step "go test ${race[*]} -count=1 $name"
	if ! go test "${race[@]}" -count=1 "$@"; then
		failed+=("$name")
	fi
	done_step
}

# run_go_test_group "PKG TIMEOUT|PKG TIMEOUT...": the packages' go tests at
# once, each with its output in a file printed (in order) when all ended,
# so the log stays readable; each failure is recorded, not fatal.
run_go_test_group() {
	local -a members pids names
	local dir e i pkg timeout
	IFS='|' read -ra members <<<"$1"
	if [ ${#members[@]} -eq 1 ]; then
		pkg=${members[0]%% *} timeout=${members[0]##* }
		run_go_test "$pkg (-timeout $timeout)" -timeout "$timeout" "$pkg"
		return
	fi
	dir=$(mktemp -d)
	step "go test ${race[*]} -count=1 at once: ${1//|/ + }"
	for i in "${!members[@]}"; do
		e=${members[$i]}
		pkg=${e%% *} timeout=${e##* }
		names[i]="$pkg (-timeout $timeout)"
		(
			start=$SECONDS
			rc=0
			go test "${race[@]}" -count=1 -timeout "$timeout" "$pkg" >"$dir/$i.out" 2>&1 || rc=$?
			echo "    ($pkg: $((SECONDS - start))s)" >>"$dir/$i.out"
			exit "$rc"
		) &
		pids[i]=$!
	done
	for i in "${!members[@]}"; do
		if ! wait "${pids[$i]}"; then
			failed+=("${names[$i]}")
		fi
		cat "$dir/$i.out"
	done
	rm -rf "$dir"
	done_step
}

step "compile every test binary (go test ${race[*]} -exec true ./...)"
if ! out=$(go test "${race[@]}" -count=1 -exec true ./... 2>&1); then
	printf '%s\n' "$out" >&2
	exit 1
fi
done_step

# shellcheck disable=SC2086 # package lists are whitespace-separated import paths
run_go_test "(packages without gateways, -timeout $light_timeout)" -timeout "$light_timeout" $light_pkgs
for group in "${heavy[@]}" "${kube[@]}"; do
	run_go_test_group "$group"
done

if [ ${#failed[@]} -gt 0 ]; then
	echo "test.sh: FAILED after $((SECONDS / 60))m$((SECONDS % 60))s:" >&2
	printf '  %s\n' "${failed[@]}" >&2
	exit 1
fi
echo "all checks passed in $((SECONDS / 60))m$((SECONDS % 60))s"
