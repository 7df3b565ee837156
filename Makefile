# OCC's entry points. `make run` and `make test` are the two a newcomer
# needs; the rest are what those are built from.

SHELL := /bin/bash
.SHELLFLAGS := -euo pipefail -c
.DEFAULT_GOAL := build

GO ?= go
PKG := github.com/openclaw/occ
# A clone has git; a source tarball does not, and then the build says "dev".
VERSION ?= $(shell git describe --always --dirty 2>/dev/null || echo dev)
COMMIT ?= $(shell git rev-parse HEAD 2>/dev/null || echo dev)
LDFLAGS := -X $(PKG)/internal/buildinfo.Version=$(VERSION) -X $(PKG)/internal/buildinfo.Commit=$(COMMIT)
# Seconds per fuzz target for `make fuzz`; raise it for a longer hunt.
FUZZTIME ?= 10s

.PHONY: build images runtime run test test-kubernetes lint vet fmt fuzz bench clean

## build: compile bin/occ with the version stamped in
build:
	$(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/occ ./cmd/occ

## images: build the occ and gateway container images as docker-load-able tarballs in bin/images
## (scripts/images.sh; no registry is used; skipped when their inputs did not change; docs/images.md)
images:
	VERSION='$(VERSION)' COMMIT='$(COMMIT)' bash scripts/images.sh

## runtime: install Node 24 and OpenClaw 2026.9.6 outside the clone (idempotent; skipped when present)
runtime:
	bash scripts/install-runtime.sh >/dev/null

## run: build, install the agent runtime if missing, then start `occ server` on the embedded default
## (SQLite in ./.occ, the local Compute driver: one OpenClaw gateway process per deployed Agent)
run: build runtime
	OCC_OPENCLAW_RUNTIME="$${OCC_OPENCLAW_RUNTIME:-$$(bash scripts/install-runtime.sh 2>/dev/null | tail -n 1)}" ./bin/occ server

## test: prepare what the tests need (PostgreSQL, the Kubernetes environment), check formatting and vet, run every test
test:
	bash scripts/test.sh

# The Kubernetes test packages; a pattern whose directory does not exist (yet) is left out, because
# `go test` fails on a pattern that matches nothing.
KUBE_TEST_PKGS := ./internal/testenv/kube/... ./internal/compute/kube/... ./internal/routingops/... ./internal/chart/...

## test-kubernetes: build and start the Kubernetes test environment (scripts/testenv/k8s.sh), run only its tests
test-kubernetes:
	bash scripts/testenv/k8s-build.sh >/dev/null
	bash scripts/testenv/k8s.sh start
	eval "$$(bash scripts/testenv/k8s.sh env)"; \
	if [ -z "$${OCC_TEST_POSTGRES_URL:-}" ]; then \
		OCC_TEST_POSTGRES_URL=$$(bash scripts/testenv/postgres.sh start | tail -n 1); export OCC_TEST_POSTGRES_URL; \
	fi; \
	pkgs=(); for p in $(KUBE_TEST_PKGS); do if [ -d "$${p%/...}" ]; then pkgs+=("$$p"); fi; done; \
	echo "go test -count=1 -p 1 -timeout 30m $${pkgs[*]}"; \
	$(GO) test -count=1 -p 1 -timeout 30m "$${pkgs[@]}"

## lint: exactly the static checks CI runs (scripts/lint.sh): gofmt, goimports grouping, go vet, staticcheck
lint:
	bash scripts/lint.sh

## vet: go vet ./...
vet:
	$(GO) vet ./...

## fmt: rewrite files with gofmt and group imports with goimports (built by scripts/lint.sh)
fmt:
	gofmt -w .
	"$${OCC_TOOLS_BIN:-$$HOME/.cache/occ/tools-bin}/goimports" -local github.com/openclaw/occ -w .

## fuzz: run every Fuzz target for FUZZTIME each (go test -fuzz takes one target at a time)
fuzz:
	@$(GO) test -list '^Fuzz' ./... \
	| awk '/^Fuzz/ { names = names " " $$1; next } /^ok/ { if (names != "") print $$2 names; names = "" }' \
	| while read -r pkg targets; do \
		for t in $$targets; do \
			echo "==> $$pkg $$t"; \
			$(GO) test -run '^$$' -fuzz "^$$t\$$" -fuzztime $(FUZZTIME) "$$pkg"; \
		done; \
	done

# Operations per measured row of `make bench`, and per side of the workspace files rows.
BENCH_OPS ?= 2000
BENCH_FILES_OPS ?= 500
BENCH_WORKER_OPS ?= 200

## bench: print the performance table of docs/performance.md (internal/bench/cmd): a bare net/http
## baseline, the API at 10,000 Agents and 1,000 Namespaces on SQLite and PostgreSQL, occ server RSS, and workspace files
## through OCC against the native gateway (one real gateway). Never part of `make test`.
bench: build runtime
	OCC_TEST_POSTGRES_URL="$${OCC_TEST_POSTGRES_URL:-$$(bash scripts/testenv/postgres.sh start | tail -n 1)}" \
	OCC_OPENCLAW_RUNTIME="$${OCC_OPENCLAW_RUNTIME:-$$(bash scripts/install-runtime.sh 2>/dev/null | tail -n 1)}" \
	$(GO) run ./internal/bench/cmd -ops $(BENCH_OPS) -occ bin/occ -files $(BENCH_FILES_OPS) -worker $(BENCH_WORKER_OPS)

## clean: remove build and coverage output (not ./.occ: that is your data)
clean:
	rm -rf bin coverage.out coverage.html *.coverprofile
