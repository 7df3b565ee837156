#!/usr/bin/env bash
# scripts/testenv/chromium.sh: make sure the headless Chromium of the Console's browser tests
# (internal/console) is installed, and print its path on the last line.
#
# Idempotent: when /usr/bin/chromium exists nothing is installed. Otherwise Debian's chromium
# package is installed with apt-get (root only; about 8 s and 124 MB), which is the only browser
# build this machine kind can get: no download site is reachable.
set -euo pipefail
bin=${OCC_TEST_CHROMIUM:-/usr/bin/chromium}
if [ ! -x "$bin" ]; then
	if [ "$(id -u)" != 0 ]; then
		echo "chromium.sh: $bin is missing and installing it needs root" >&2
		exit 1
	fi
	export DEBIAN_FRONTEND=noninteractive
	if ! apt-get install -y --no-install-recommends chromium >/tmp/occ-chromium-apt.log 2>&1; then
		apt-get update >/dev/null
		apt-get install -y --no-install-recommends chromium >/tmp/occ-chromium-apt.log 2>&1 ||
			{ tail -n 20 /tmp/occ-chromium-apt.log >&2; exit 1; }
	fi
	bin=/usr/bin/chromium
fi
echo "$bin"
