# The two commands a newcomer needs: `make run` and `make test`.
GO ?= go

.PHONY: run test check deps build fuzz bench microbench generate drill drill-ha drill-pitr drill-upgrade

## run: start the gateway on the embedded SQLite database in ./kassa-data (creates a demo merchant on first start); ARGS="--addr 127.0.0.1:9090" passes flags to kassa serve
ARGS =
run: build
	exec bin/kassa serve --demo$(if $(strip $(ARGS)), $(strip $(ARGS)))

## test: everything — formatting, vet, and the whole test suite on SQLite and PostgreSQL, then the Go client's (its own module), then each benchmark once
# TEST_P: go test runs as many test binaries (and builds) at once as -p, by default one per core; a
# binary that mostly waits (on the kassa processes it starts, a browser, a load test's clock) then
# holds a slot while its core idles. Twice the cores keep them busy.
TEST_P ?= $(shell n=$$(getconf _NPROCESSORS_ONLN 2>/dev/null || echo 2); echo $$((2 * n)))
# The benchmarks run once each, without the race detector (under it, loading a benchmark's data set
# takes minutes), and only in the packages that have any: go test -bench runs its packages one at a
# time, each test binary's TestMain included, also where there is no benchmark.
BENCH_PKGS = $(sort $(dir $(filter-out ./client/%,$(shell grep -rl --include='*_test.go' '^func Benchmark' .))))
test: deps check
	$(GO) test -race -count=1 -p $(TEST_P) -timeout 20m ./...
	cd client && $(GO) test -race -count=1 -timeout 10m ./...
	$(GO) test -count=1 -run '^$$' -bench . -benchtime 1x $(BENCH_PKGS)

## check: formatting, vet and a tidy go.mod, in the root module and the Go client's, and no comment citing an issue number
check:
	$(GO) run ./scripts/check-comments
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff
	cd client && $(GO) vet ./... && $(GO) mod tidy -diff

## generate: regenerate the Go client's client/kassa.gen.go from api/openapi.yaml (client/ is a module of its own, so `go generate ./client` at the root does not reach it)
generate:
	cd client && $(GO) generate ./...

## deps: install (or explain how to install) what the tests need beyond Go: PostgreSQL binaries, Node.js, Chromium, axe-core, standardwebhooks, stripe-mock, systemd-analyze, pdftotext
deps:
	@scripts/test-deps.sh

## build: the kassa and kassa-acquirer binaries in ./bin, stamped with the version and git revision they are built from (kassa version)
BUILD_FLAGS ?= -buildvcs=auto
# VERSION: the version kassa version prints, git describe's name for the checked-out commit (the newest
# release tag before it, the commits since, the abbreviated commit, -dirty with local changes). Without
# git or its tags it is empty and kassa names the newest release in deploy/releases with "-dev". Only
# make's command line overrides it, never a VERSION in the environment.
VERSION = $(shell git describe --tags --match 'v[0-9]*' --dirty 2>/dev/null)
build:
	$(info building bin/kassa and bin/kassa-acquirer (the first build takes a few minutes))
	$(GO) build $(BUILD_FLAGS) -ldflags=-X=main.buildVersion=$(VERSION) -o bin/kassa ./cmd/kassa
	$(GO) build $(BUILD_FLAGS) -o bin/kassa-acquirer ./cmd/kassa-acquirer

## bench: the hot path's Go benchmarks, the load benchmark (the ledger alone, sales and the HTTP-stack ceiling, and the 250 ms latency-tolerance scenarios from 2,000 clients; each figure printed beside the baseline, cmd/kassa-load/baseline.json, and marked REGRESSED when more than 10 % worse, which fails it only with BENCH_FLAGS=--fail-on-regression), the dashboard benchmark (1,000,000 transactions), the webhooks benchmark, then the scale of data (sales and lists with 10,000,000 transactions loaded), on SQLite and PostgreSQL (see docs/guides/performance.md)
BENCH_FLAGS ?=
DASHBOARD_BENCH_FLAGS ?=
WEBHOOKS_BENCH_FLAGS ?=
SCALE_BENCH_FLAGS ?=
bench: build microbench
	$(GO) build -o bin/kassa-load ./cmd/kassa-load
	@scripts/test-deps.sh
	bin/kassa-load --baseline cmd/kassa-load/baseline.json $(BENCH_FLAGS)
	bin/kassa-load dashboard $(DASHBOARD_BENCH_FLAGS)
	bin/kassa-load webhooks $(WEBHOOKS_BENCH_FLAGS)
	bin/kassa-load scale $(SCALE_BENCH_FLAGS)

## drill: the reliability drill — mixed load from 64 clients for 2 minutes per backend while nodes are killed, then the books (see docs/guides/reliability.md); SOAK=10m soaks instead: the load without faults at half its maximum, the server sampled each minute
DRILL_FLAGS ?=
SOAK ?=
drill: build
	$(GO) build -o bin/kassa-load ./cmd/kassa-load
	@scripts/test-deps.sh
	bin/kassa-load drill $(if $(SOAK),--soak $(SOAK)) $(DRILL_FLAGS)

## drill-upgrade: the rolling-upgrade drill — two nodes of the previous release (the newest in deploy/releases before HEAD, built from git) upgraded to this build one at a time under load on PostgreSQL, then the books (see docs/guides/upgrades.md)
UPGRADE_FLAGS ?=
drill-upgrade: build
	$(GO) build -o bin/kassa-load ./cmd/kassa-load
	@scripts/test-deps.sh
	bin/kassa-load upgrade $(UPGRADE_FLAGS)

## drill-ha: the failover drill — the drill's load from 32 clients for 60 s against a Patroni primary and synchronous standby while the primary's machine dies, hangs, loses etcd or its standby (see docs/guides/patroni.md); DRILL_HA_FLAGS=--fault die runs one mode
DRILL_HA_FLAGS ?=
drill-ha: build
	$(GO) build -o bin/kassa-load ./cmd/kassa-load
	@scripts/test-deps.sh
	bin/kassa-load drill-ha $(DRILL_HA_FLAGS)

## drill-pitr: the point-in-time recovery drill — the drill's load from 16 clients for 40 s on PostgreSQL with its WAL archived by pgBackRest, a new cluster restored to a moment taken during the load, then what it holds checked against the original, the acquirer's journal, the clients' retries and the stored cards (see docs/guides/patroni.md)
DRILL_PITR_FLAGS ?=
drill-pitr: build
	$(GO) build -o bin/kassa-load ./cmd/kassa-load
	@scripts/test-deps.sh
	bin/kassa-load drill-pitr $(DRILL_PITR_FLAGS)

## microbench: go test -bench for the request decoder, money parsing, card validation, the token check, the velocity check and dashboard page views
microbench:
	$(GO) test -run '^$$' -bench . -benchmem ./internal/payment ./internal/money ./internal/card ./internal/auth ./internal/velocity ./internal/dashboard

## fuzz: run every fuzz test for FUZZTIME each (default 20s)
FUZZTIME ?= 20s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run XXX -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done
