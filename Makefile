# recast: build, test and demo targets. Tests start their own throwaway
# servers: MariaDB 10.11 from the installed package (see .ci/run), MariaDB
# 11.8 and MySQL 9.7 fetched into a cache by scripts/fetch-flavor.sh.
#
#   make test RECAST_TEST_FLAVORS="mariadb-11.8"   # one flavor only
#   make demo FLAVOR=mysql-9.7

GO ?= go
# staticcheck 2025.1.1 (the module proxy knows it by its module version).
STATICCHECK ?= honnef.co/go/tools/cmd/staticcheck@v0.6.1
# golangci-lint (configuration: .golangci.yml), built from the module proxy.
GOLANGCI_LINT ?= github.com/golangci/golangci-lint/v2/cmd/golangci-lint@v2.15.0

.PHONY: all build test unit stress lint demo clean

all: build

build:
	@mkdir -p bin
	$(GO) build -o bin/recast ./cmd/recast
	$(GO) build -o bin/recastload ./cmd/recastload

RECAST_TEST_FLAVORS ?= mariadb-10.11 mariadb-11.8 mysql-9.7
FLAVOR ?= mariadb-10.11

# Unit packages once, integration packages once per flavor.
test:
	GO=$(GO) RECAST_TEST_FLAVORS="$(RECAST_TEST_FLAVORS)" bash scripts/test-flavors.sh

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

# Migrate a 200k-row table under write load on a local sandbox, verify every
# row and compare the replica (see scripts/demo.sh).
demo:
	FLAVOR=$(FLAVOR) bash scripts/demo.sh

clean:
	rm -rf bin

# Native ALTER vs pt-online-schema-change vs recast on a sysbench table, idle
# and under load; writes bench/RESULTS.md (see bench/README.md). 30-60 min.
.PHONY: bench
bench:
	bash bench/run.sh $(BENCH_ARGS)
