# recast: build, test, package and demo targets. Tests start their own
# throwaway servers: MariaDB 10.11 from the installed package (see .ci/run),
# MariaDB 11.8 and MySQL 9.7 fetched into a cache by scripts/fetch-flavor.sh.
#
#   make build                                      # bin/recast, bin/recastload
#   make test RECAST_TEST_FLAVORS="mariadb-11.8"   # one flavor only
#   make package                                    # bin/recast_<version>_<arch>.deb
#   make demo FLAVOR=mysql-9.7

# Go: from PATH, else the official tarball's place (a root shell's PATH
# often lacks it). Its directory is put on PATH for the tools and tests
# that run "go" themselves.
GO ?= $(shell command -v go 2>/dev/null || echo /usr/local/go/bin/go)
export PATH := $(dir $(GO)):$(PATH)
# staticcheck 2025.1.1 (the module proxy knows it by its module version).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.6.1
# golangci-lint (configuration: .golangci.yml), built from the module proxy.
GOLANGCI_LINT ?= github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0
# make package builds the .deb with nfpm's deb packager (v2.48.0, pinned in
# packaging/mkdeb/go.mod; a module of its own, see packaging/mkdeb/main.go).

# The version stamped into the binary and the package: git describe (a tag
# such as v1.2.0, else the commit; -dirty with uncommitted changes).
GIT_DESCRIBE := $(shell git describe --tags --always --dirty 2>/dev/null || echo unknown)
GIT_COMMIT := $(shell git rev-parse HEAD 2>/dev/null || echo unknown)
LDFLAGS := -X main.version=$(GIT_DESCRIBE) -X main.commit=$(GIT_COMMIT)
# Debian wants a version that starts with a digit and has no "-" outside
# the revision: v1.2.0-3-gabc-dirty -> 1.2.0+3.gabc.dirty, 1e84d96 (no tag) -> 0.0.0+git1e84d96.
DEB_VERSION := $(shell echo '$(GIT_DESCRIBE)' | sed -E '/^v?[0-9]+\.[0-9]/!s/^/0.0.0+git/; s/^v//; s/-/+/; s/-/./g')
DEB_ARCH := $(shell dpkg --print-architecture 2>/dev/null || $(GO) env GOARCH)
BUILD_DIR := build

.PHONY: all build test unit stress lint demo clean package

all: build

build:
	@mkdir -p bin
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/recast ./cmd/recast
	$(GO) build -ldflags "$(LDFLAGS)" -o bin/recastload ./cmd/recastload

RECAST_TEST_FLAVORS ?= mariadb-10.11 mariadb-11.8 mysql-9.7
FLAVOR ?= mariadb-10.11

# Unit packages once, integration packages once per flavor. Everything the
# run writes to the temp directory (go's build directories, the test
# binaries' sandboxes, the fault-injection build of recast that
# internal/migration's kill tests run) goes into one directory of its own,
# removed at the end, pass or fail; a sandbox a killed test binary left
# running is stopped first (RECAST_TEST_KEEP=1 keeps the directory).
test:
	@tmp=$$(mktemp -d /tmp/recast-make-test.XXXXXX) && \
	trap 'rc=$$?; if [ "$${RECAST_TEST_KEEP:-}" = 1 ]; then echo "kept: $$tmp"; exit $$rc; fi; \
		for s in $$(find "$$tmp" -maxdepth 6 -name sandbox.json 2>/dev/null); do \
			[ -x "$$tmp/recast-down" ] || $(GO) build -o "$$tmp/recast-down" ./cmd/recast; \
			"$$tmp/recast-down" sandbox down --dir "$$(dirname "$$s")"; \
		done; rm -rf "$$tmp"; exit $$rc' EXIT && \
	TMPDIR=$$tmp GOTMPDIR=$$tmp GO=$(GO) RECAST_TEST_FLAVORS="$(RECAST_TEST_FLAVORS)" bash scripts/test-flavors.sh

# Unit tests only: no server is started (testutil.Main under -short), the
# tests that need one are skipped. Seconds, not minutes.
unit:
	$(GO) test -short -race -count=1 -timeout 5m ./...

# Long randomized and cut-over stress tests (files with //go:build stress).
stress:
	$(GO) test -race -count=1 -timeout 60m -tags stress ./...

lint:
	@out=$$(gofmt -l .); if [ -n "$$out" ]; then echo "gofmt -l: these files need gofmt:"; echo "$$out"; exit 1; fi
	$(GO) vet ./...
	$(GO) vet -tags stress ./...
	@if $(GO) run $(STATICCHECK) -version >/dev/null 2>&1; then \
		echo "$(GO) run $(STATICCHECK) ./..."; \
		$(GO) run $(STATICCHECK) ./... && $(GO) run $(STATICCHECK) -tags stress ./...; \
	else \
		echo "lint: staticcheck ($(STATICCHECK)) unavailable, skipped"; \
	fi
	$(GO) run $(GOLANGCI_LINT) run ./...

# A .deb with /usr/bin/recast and its man pages (generated from the CLI),
# version from git. Check it with dpkg-deb -I / -c bin/recast_*.deb.
package:
	rm -rf $(BUILD_DIR) && mkdir -p $(BUILD_DIR)/man bin
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags "-s -w $(LDFLAGS)" -o $(BUILD_DIR)/recast ./cmd/recast
	$(BUILD_DIR)/recast man --dir $(BUILD_DIR)/man >/dev/null
	gzip -9n $(BUILD_DIR)/man/*.1
	cd packaging/mkdeb && DEB_VERSION=$(DEB_VERSION) DEB_ARCH=$(DEB_ARCH) BUILD_DIR=$(CURDIR)/$(BUILD_DIR) \
		$(GO) run . -config ../nfpm.yaml -target $(CURDIR)/bin

# Migrate a 200k-row table under write load on a local sandbox, verify every
# row and compare the replica (see scripts/demo.sh).
demo:
	FLAVOR=$(FLAVOR) bash scripts/demo.sh

clean:
	rm -rf bin $(BUILD_DIR)

# Native ALTER vs pt-online-schema-change vs recast on a sysbench table, idle
# and under load; writes bench/RESULTS.md (see bench/README.md). 30-60 min.
.PHONY: bench
bench:
	bash bench/run.sh $(BENCH_ARGS)
