#!/usr/bin/env bash
# scripts/testenv/axe.sh: install the pinned axe-core (the accessibility rules engine the Console's
# browser tests inject into every page) from npm into a cache directory outside the clone, and
# print the path of axe.min.js on the last line.
#
# Idempotent: an installed copy of the pinned version is reused. The package's licence
# (MPL-2.0) is in the same directory as LICENSE; nothing of it is committed to this repository.
set -euo pipefail
version=4.10.3
dir=${OCC_AXE_DIR:-$HOME/.cache/occ/axe-core-$version}
js=$dir/node_modules/axe-core/axe.min.js
if [ ! -f "$js" ]; then
	mkdir -p "$dir"
	npm install --prefix "$dir" --no-audit --no-fund --no-save --ignore-scripts "axe-core@$version" >"$dir/npm.log" 2>&1 ||
		{ tail -n 20 "$dir/npm.log" >&2; exit 1; }
fi
echo "$js"
