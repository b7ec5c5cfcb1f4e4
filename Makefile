# The Makefile is the contract: CI and people run the same targets.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
PKGS     := ./...

.PHONY: run build test lint bench fuzz load clean

## run: start the server on the embedded SQLite database and the demo provider
run:
	$(GO) run ./cmd/nornweave

## build: build the nornweave binary into ./bin
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/nornweave ./cmd/nornweave

## test: the whole suite with the race detector (needs PostgreSQL and Redis; started if local and
## down, Redis installed if missing)
test:
	@./scripts/ensure-postgres.sh
	@./scripts/ensure-redis.sh
	$(GO) test -race -count=1 -timeout 10m $(PKGS)

## lint: formatting and vet
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)

## bench: Go benchmarks with allocations (limiter vs x/time/rate, domain filter, SMTP reuse,
## hosted providers, search over 100k messages), then peak memory of 8 concurrent maximum-size sends
bench:
	@./scripts/ensure-postgres.sh
	@./scripts/ensure-redis.sh
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 -timeout 60m $(PKGS)
	NORNWEAVE_MEMTEST_FULL=1 $(GO) test -run='^TestConcurrentMaxSizeSendsBoundedMemory$$' -count=1 -v ./tests/ | grep -E 'memory_test|^(ok|FAIL|---)'

## fuzz: each fuzz target in turn for FUZZTIME (default 60s), one worker at a time; the corpora
## under testdata/fuzz are replayed by make test as ordinary tests
FUZZTIME ?= 60s
FUZZ_TARGETS := ./api:FuzzDecodeSend ./skuld:FuzzAddressFilter ./providers:FuzzBuildMIME ./skuld:FuzzMarkdown
fuzz:
	@set -e; for t in $(FUZZ_TARGETS); do \
	  pkg=$${t%%:*}; name=$${t##*:}; \
	  echo "== $$name ($$pkg, $(FUZZTIME))"; \
	  $(GO) test -run='^$$' -fuzz="^$$name$$" -fuzztime=$(FUZZTIME) -fuzzminimizetime=5s -parallel 1 $$pkg; \
	done

## load: 500 clients for 130 s against a fresh server (SQLite, 100 sends a minute) sending to
## the tool's own SMTP sink; fails if more than 100 messages arrive in any 60 s
load: build
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/nornweave-load ./cmd/nornweave-load
	./bin/nornweave-load -spawn ./bin/nornweave -db sqlite -provider smtp -sink auto \
	  -per-minute 100 -clients 500 -duration 130s

clean:
	rm -rf bin data
