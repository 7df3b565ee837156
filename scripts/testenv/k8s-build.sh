#!/usr/bin/env bash
# k8s-build.sh: build the binaries of OCC's Kubernetes test environment from Go modules.
#
#   scripts/testenv/k8s-build.sh            # build what is missing, print the bin dir last
#   scripts/testenv/k8s-build.sh versions   # print the pinned versions as NAME=value lines
#
# Binaries (all into one directory, which doubles as KUBEBUILDER_ASSETS for envtest):
#   kube-apiserver, kubectl, kube-controller-manager, kube-scheduler  k8s.io/kubernetes v1.37.2
#   etcd                                                               go.etcd.io/etcd/server/v3, as pinned by it
#   kwok (fake kubelet)                                                sigs.k8s.io/kwok v0.8.0
#   envoy-gateway, egctl                                               github.com/envoyproxy/gateway v1.9.1
#   helm                                                               helm.sh/helm/v3 v3.22.0
#
# No package repository ships kube-apiserver for Debian 12, and the usual download sites are not
# reachable from CI, so everything comes from the Go module proxy. They are built together in ONE
# generated wrapper module: it requires k8s.io/kubernetes and replaces each k8s.io/* staging module
# (kubernetes' own go.mod points them at ./staging/...) by its published v0.37.2, so the shared
# packages (client-go, apimachinery, grpc, protobuf, otel, ...) compile once for all eight. kwok and
# Envoy Gateway are thereby built against k8s.io v0.37.2 and controller-runtime v0.25.2, the same
# versions OCC's own go.mod pins: the test packages then reuse the packages compiled here (same
# GOCACHE; that is also why -trimpath is NOT used).
#
# Where: ${OCC_K8S_BIN:-$HOME/.cache/occ/k8s-bin}; the wrapper module lives in its .work/
# subdirectory. Both must be outside the clone (the script refuses otherwise): a `git clean` must not
# delete them, and the clone's go.mod must not see the wrapper.
#
# Caching: each binary has a version stamp (.NAME.version next to it). A binary whose stamp matches
# the pinned versions is not rebuilt, so a warm run takes no measurable time. Binaries are moved into
# place only after a successful build, so an interrupted build never leaves a stamped half-binary.
# Concurrent runs are serialised with a lock file.
#
# Cost, measured on the CI machine kind (2 cores, Debian 12): cold (empty build cache) about 7.5
# minutes on an idle machine, 14.5 minutes on one shared with other heavy jobs (about 13 minutes of
# CPU either way), 2.9 GB of RAM at peak; relinking only (link flags changed) ~3 minutes; warm 0.2 s.
# Disk: 910 MB of binaries, ~1.6 GB of modules, ~5 GB of build cache. See docs/testing.md.
#
# Environment:
#   OCC_K8S_BIN     the bin dir (default $HOME/.cache/occ/k8s-bin)
#   OCC_K8S_FORCE   1 rebuilds everything even when the stamps match
set -euo pipefail

# The pinned versions. k8s.sh and the CRD set it applies read them through `k8s-build.sh versions`;
# keep OCC's go.mod in step (k8s.io/* at v0.<minor>.<patch> of K8S_VERSION, gateway-api, EG).
K8S_VERSION=v1.37.2
KWOK_VERSION=v0.8.0
EG_VERSION=v1.9.1
GWAPI_VERSION=v1.6.3
CR_VERSION=v0.25.2
CM_VERSION=v1.21.2
HELM_VERSION=v3.22.0
# Bump RECIPE when the build itself changes (flags, wrapper), to invalidate every stamp.
RECIPE=1

COMPONENTS=(kube-apiserver etcd kubectl kube-controller-manager kube-scheduler kwok envoy-gateway egctl helm)

if [ "${1:-}" = versions ]; then
	printf '%s\n' "K8S_VERSION=$K8S_VERSION" "KWOK_VERSION=$KWOK_VERSION" "EG_VERSION=$EG_VERSION" \
		"GWAPI_VERSION=$GWAPI_VERSION" "CR_VERSION=$CR_VERSION" "CM_VERSION=$CM_VERSION" "HELM_VERSION=$HELM_VERSION"
	exit 0
fi
[ $# = 0 ] || {
	echo "usage: $0 [versions]" >&2
	exit 2
}

die() {
	echo "k8s-build.sh: $*" >&2
	exit 1
}
log() { echo "k8s-build.sh: $*" >&2; }

BIN=${OCC_K8S_BIN:-${HOME:?HOME is not set}/.cache/occ/k8s-bin}
mkdir -p "$BIN"
BIN=$(cd "$BIN" && pwd -P)
WORK=$BIN/.work

# Never build inside the clone this script belongs to.
clone=$(cd "$(dirname "$0")/../.." && pwd -P)
case "$BIN/" in
"$clone"/*) die "OCC_K8S_BIN=$BIN is inside the clone $clone; pick a directory outside it" ;;
esac

# The build must not be steered by the caller's Go settings (a go.work above the cache, -mod=vendor,
# a toolchain download).
export GOTOOLCHAIN=local GOFLAGS=-buildvcs=false GOWORK=off GO111MODULE=on

pkg_of() {
	case "$1" in
	kube-apiserver | kubectl | kube-controller-manager | kube-scheduler) echo "k8s.io/kubernetes/cmd/$1" ;;
	etcd) echo "go.etcd.io/etcd/server/v3" ;; # its main package is the etcd server binary
	kwok) echo "sigs.k8s.io/kwok/cmd/kwok" ;;
	envoy-gateway | egctl) echo "github.com/envoyproxy/gateway/cmd/$1" ;;
	helm) echo "helm.sh/helm/v3/cmd/helm" ;;
	*) die "unknown component $1" ;;
	esac
}

# Link flags. Version strings as the upstream release builds set them, for every binary (-X only takes
# effect in a binary that contains the package).
minor=$(echo "$K8S_VERSION" | cut -d. -f2)
LDFLAGS="-s -w"
LDFLAGS+=" -X k8s.io/component-base/version.gitVersion=$K8S_VERSION"
LDFLAGS+=" -X k8s.io/component-base/version.gitMajor=1 -X k8s.io/component-base/version.gitMinor=$minor"
LDFLAGS+=" -X k8s.io/component-base/version.gitTreeState=clean"
LDFLAGS+=" -X k8s.io/client-go/pkg/version.gitVersion=$K8S_VERSION"
LDFLAGS+=" -X sigs.k8s.io/kwok/pkg/consts.Version=${KWOK_VERSION#v}"
LDFLAGS+=" -X github.com/envoyproxy/gateway/internal/cmd/version.envoyGatewayVersion=$EG_VERSION"
LDFLAGS+=" -X helm.sh/helm/v3/internal/version.version=$HELM_VERSION"
# envoy-gateway only: controller-runtime's metrics and health listeners default to *:8080 and *:8081,
# which no configuration file can move; OCC's dev server defaults to 127.0.0.1:8080. Both are string
# variables, so the linker moves them to loopback ports of the test environment (see k8s.sh).
EG_LDFLAGS="$LDFLAGS -X sigs.k8s.io/controller-runtime/pkg/metrics/server.DefaultBindAddress=127.0.0.1:18080"
EG_LDFLAGS+=" -X github.com/envoyproxy/gateway/internal/provider/kubernetes.healthProbeBindAddress=127.0.0.1:18081"

ldflags_of() {
	case "$1" in
	envoy-gateway) echo "$EG_LDFLAGS" ;;
	*) echo "$LDFLAGS" ;;
	esac
}

# stamp prints what .NAME.version must contain for NAME to count as built: the versions it is built
# from and a digest of its link flags.
stamp() {
	local v
	case "$1" in
	kube-* | kubectl | etcd) v="k8s.io/kubernetes@$K8S_VERSION" ;;
	kwok) v="sigs.k8s.io/kwok@$KWOK_VERSION k8s.io/kubernetes@$K8S_VERSION" ;;
	envoy-gateway | egctl) v="github.com/envoyproxy/gateway@$EG_VERSION sigs.k8s.io/gateway-api@$GWAPI_VERSION k8s.io/kubernetes@$K8S_VERSION" ;;
	helm) v="helm.sh/helm/v3@$HELM_VERSION k8s.io/kubernetes@$K8S_VERSION" ;;
	esac
	echo "$1 $v controller-runtime@$CR_VERSION recipe=$RECIPE ldflags=$(ldflags_of "$1" | cksum | cut -d' ' -f1)"
}

todo_list() {
	local c
	for c in "${COMPONENTS[@]}"; do
		if [ "${OCC_K8S_FORCE:-0}" = 1 ] || ! [ -x "$BIN/$c" ] ||
			[ "$(cat "$BIN/.$c.version" 2>/dev/null)" != "$(stamp "$c")" ]; then
			echo "$c"
		fi
	done
}

# Serialise concurrent runs (a second `make test` waits for the first one's build).
exec 9>"$BIN/.lock"
if ! flock -n 9; then
	log "another k8s-build.sh is building into $BIN; waiting for it"
	flock -w 3600 9 || die "timed out waiting for the other build"
fi

mapfile -t todo < <(todo_list)
if [ ${#todo[@]} = 0 ]; then
	log "all ${#COMPONENTS[@]} binaries up to date"
	echo "$BIN"
	exit 0
fi

command -v go >/dev/null || die "go is not on PATH"
t0=$SECONDS
log "building ${todo[*]} into $BIN (cold: about 8 minutes on 2 cores)"

# The wrapper module. Regenerated only when its inputs change, so a partial rebuild skips resolution.
staging="v0.${K8S_VERSION#v1.}"
inputs="recipe=$RECIPE k8s=$K8S_VERSION kwok=$KWOK_VERSION eg=$EG_VERSION gwapi=$GWAPI_VERSION cr=$CR_VERSION helm=$HELM_VERSION $(go env GOVERSION)"
mkdir -p "$WORK"
cd "$WORK"
if [ "$(cat .inputs 2>/dev/null)" != "$inputs" ] || ! [ -s go.sum ]; then
	rm -f .inputs go.mod go.sum tools.go
	gomod=$(go mod download -json "k8s.io/kubernetes@$K8S_VERSION" | sed -n 's/^[[:space:]]*"GoMod": "\(.*\)",*$/\1/p')
	[ -f "$gomod" ] || die "go mod download k8s.io/kubernetes@$K8S_VERSION gave no go.mod"
	replaces=$(sed -n '/^replace (/,/^)/p' "$gomod" | awk -v v="$staging" '$2 == "=>" { print "\t" $1 " => " $1 " " v }')
	[ "$(printf '%s\n' "$replaces" | grep -c '^.k8s\.io/')" -ge 20 ] ||
		die "did not find the k8s.io/* staging replace block in $gomod"
	{
		echo "// Generated by OCC's scripts/testenv/k8s-build.sh; rewritten when the pinned versions change."
		echo "module example.invalid/occ-k8s-bin"
		echo
		echo "go ${K8S_GO:-1.26.0}"
		echo
		echo "replace ("
		printf '%s\n' "$replaces"
		echo ")"
	} >go.mod
	{
		echo "//go:build tools"
		echo
		echo "// Package tools only pins the main packages that k8s-build.sh builds."
		echo "package tools"
		echo
		echo "import ("
		for c in "${COMPONENTS[@]}"; do echo "	_ \"$(pkg_of "$c")\""; done
		echo ")"
	} >tools.go
	t1=$SECONDS
	go get "k8s.io/kubernetes@$K8S_VERSION" "sigs.k8s.io/kwok@$KWOK_VERSION" \
		"github.com/envoyproxy/gateway@$EG_VERSION" "sigs.k8s.io/gateway-api@$GWAPI_VERSION" \
		"sigs.k8s.io/controller-runtime@$CR_VERSION" "helm.sh/helm/v3@$HELM_VERSION" 2>go-get.log ||
		{
			tail -n 30 go-get.log >&2
			die "go get failed (log: $WORK/go-get.log)"
		}
	go mod tidy 2>go-tidy.log || {
		tail -n 30 go-tidy.log >&2
		die "go mod tidy failed (log: $WORK/go-tidy.log)"
	}
	echo "$inputs" >.inputs
	log "modules resolved in $((SECONDS - t1))s"
fi

# One `go build` for all missing binaries: the go command then schedules every package of all of
# them together (compiling the next while one links), faster than one build after the other.
# A -ldflags with a package pattern overrides the plain one for that package.
pkgs=()
for c in "${todo[@]}"; do pkgs+=("$(pkg_of "$c")"); done
out=$WORK/out
rm -rf "$out"
mkdir -p "$out"
t1=$SECONDS
go build -ldflags "$LDFLAGS" -ldflags "$(pkg_of envoy-gateway)=$EG_LDFLAGS" -o "$out/" "${pkgs[@]}" 2>go-build.log || {
	tail -n 40 go-build.log >&2
	die "go build failed (log: $WORK/go-build.log)"
}
log "compiled in $((SECONDS - t1))s"

for c in "${todo[@]}"; do
	built=$out/$c
	[ "$c" = etcd ] && built=$out/server # go names the binary of .../server/v3 "server"
	[ -x "$built" ] || die "go build produced no $built"
	rm -f "$BIN/.$c.version"
	mv -f "$built" "$BIN/$c"
	stamp "$c" >"$BIN/.$c.version"
	log "$c: $(du -m "$BIN/$c" | cut -f1) MiB"
done
rm -rf "$out"
log "built ${#todo[@]} binaries in $((SECONDS - t0))s"
echo "$BIN"
