# The two commands a newcomer needs: `make run` and `make test`.
GO ?= go

.PHONY: run test check deps build fuzz

## run: start the gateway on the embedded SQLite database in ./kassa-data (creates a demo merchant on first start)
run: build
	exec bin/kassa serve --demo

## test: everything — formatting, vet, and the whole test suite on SQLite and PostgreSQL
test: deps check
	$(GO) test -race -count=1 -timeout 20m ./...

## check: formatting, vet and a tidy go.mod
check:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go' 2>/dev/null || find . -name '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet ./...
	$(GO) mod tidy -diff

## deps: install (or explain how to install) what the tests need beyond Go: PostgreSQL binaries
deps:
	@scripts/test-deps.sh

## build: the kassa binary in ./bin
build:
	$(GO) build -o bin/kassa ./cmd/kassa

## fuzz: run every fuzz test for FUZZTIME each (default 20s)
FUZZTIME ?= 20s
fuzz:
	@for pkg in $$($(GO) list ./...); do \
	  for f in $$($(GO) test -list '^Fuzz' $$pkg | grep '^Fuzz'); do \
	    echo "== $$pkg $$f"; $(GO) test -run XXX -fuzz "^$$f$$" -fuzztime $(FUZZTIME) $$pkg || exit 1; \
	  done; \
	done
