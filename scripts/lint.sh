#!/usr/bin/env bash
# lint.sh: the static checks, exactly as CI runs them (scripts/test.sh calls this script, and so
# does `make lint`):
#
#   1. gofmt -l must list nothing;
#   2. goimports -local github.com/openclaw/occ -l must list nothing: imports in three groups,
#      standard library, then other modules, then this module;
#   3. go vet ./... (with -race when the tests use it: see below);
#   4. staticcheck ./....
#
# goimports and staticcheck are built from their Go modules at pinned versions into a tools
# directory outside the clone ($OCC_TOOLS_BIN, default $HOME/.cache/occ/tools-bin), once; a later
# run finds them and skips the build. Each step prints its duration.
set -euo pipefail
cd "$(dirname "$0")/.."

STATICCHECK_VERSION=v0.8.2
GOIMPORTS_VERSION=v0.52.0 # golang.org/x/tools
tools="${OCC_TOOLS_BIN:-$HOME/.cache/occ/tools-bin}"

step_start=$SECONDS
step() {
	printf '==> %s\n' "$*"
	step_start=$SECONDS
}
done_step() {
	printf '    (%ds)\n' $((SECONDS - step_start))
}

# tool NAME MODULE@VERSION VERSION: build NAME into $tools unless that version is there.
tool() {
	local name=$1 pkg=$2 version=$3
	if [ "$(cat "$tools/.$name.version" 2>/dev/null)" != "$version" ] || [ ! -x "$tools/$name" ]; then
		mkdir -p "$tools"
		GOBIN="$tools" go install "$pkg"
		echo "$version" >"$tools/.$name.version"
	fi
}

step "gofmt"
unformatted=$(gofmt -l .)
if [ -n "$unformatted" ]; then
	echo "gofmt: these files need formatting (run make fmt):" >&2
	echo "$unformatted" >&2
	exit 1
fi
done_step

step "goimports (import grouping)"
tool goimports "golang.org/x/tools/cmd/goimports@$GOIMPORTS_VERSION" "$GOIMPORTS_VERSION"
misgrouped=$("$tools/goimports" -local github.com/openclaw/occ -l .)
if [ -n "$misgrouped" ]; then
	echo "goimports: these files need their imports grouped (run make fmt):" >&2
	echo "$misgrouped" >&2
	exit 1
fi
done_step

# go vet and staticcheck type-check against the compiler's export data of every dependency, which
# they have built for them. They ask for it with -race when the tests will run with the race
# detector (scripts/test.sh's default, OCC_TEST_RACE=1, and cgo is on): the dependencies are then
# compiled once, in the configuration the tests' compile step reuses, instead of once without
# -race here and again with it there (on a cold build cache that second compile of client-go and
# the rest took about 5 minutes; docs/testing.md). No OCC file has a race build constraint, so
# what is checked is the same either way.
lint_race=()
if [ "${OCC_TEST_RACE:-1}" = 1 ] && [ "$(go env CGO_ENABLED)" = 1 ]; then
	lint_race=(-race)
fi

step "go vet${lint_race[*]:+ ${lint_race[*]}}"
go vet "${lint_race[@]}" ./...
done_step

step "staticcheck"
tool staticcheck "honnef.co/go/tools/cmd/staticcheck@$STATICCHECK_VERSION" "$STATICCHECK_VERSION"
GOFLAGS="${GOFLAGS:+$GOFLAGS }${lint_race[*]}" "$tools/staticcheck" ./...
done_step
