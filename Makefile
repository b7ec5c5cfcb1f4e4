# The Makefile is the contract: CI and people run the same targets.
GO       ?= go
VERSION  ?= $(shell git describe --tags --always --dirty 2>/dev/null || echo dev)
LDFLAGS  := -s -w -X main.version=$(VERSION)
PKGS     := ./...

.PHONY: run build test lint openapi-lint bench fuzz load load-scheduled bench-scheduled bench-layers compose screenshots clean

# No test, benchmark, fuzz or load run asks the cloud's instance-metadata
# service for credentials (the SES provider without keys would): nothing
# leaves the machine. make test also checks that (scripts/netguard.sh).
export AWS_EC2_METADATA_DISABLED := true

## run: start the server on the embedded SQLite database and the demo provider
run:
	$(GO) run ./cmd/nornweave

## build: build the nornweave binary into ./bin
build:
	CGO_ENABLED=0 $(GO) build -trimpath -ldflags '$(LDFLAGS)' -o bin/nornweave ./cmd/nornweave

## test: the whole suite with the race detector (needs PostgreSQL and Redis, started if local and
## down, Redis installed if missing; and Chromium for the /docs browser test, installed if missing),
## each package in a network namespace that has loopback only: a package that tries to reach any
## other address fails (scripts/netguard.sh; without root, unshare, ip and socat it warns loudly and
## runs unguarded, or fails with NETGUARD=required). The longest end-to-end tests run from the start,
## each kind in a `go test` of its own beside the rest: in the main run they waited for a parallel
## slot behind shorter tests and ended last. WAITING spend minutes waiting on real time in server
## processes (River's rescuer, leases, a real minute) with little CPU: four at a time (twelve held
## 58 PostgreSQL connections with the rest, eight 56, five 48 beside the partial-loss test's 24;
## each server process may keep 3, and 4 more for a postgres throttle). RACES race changes against the
## dispatch of half-megabyte messages: one at a time (three heavy tests at once, beside the rest, made load
## 12 on two cores, and their sends timed out). The main run lists ./tests first, its longest
## package, and runs -parallel 4: the rest of the suite is bound by the two cores, and more at
## once only slows the tests that time real deadlines. Then the tests that count allocated bytes
## run once more without -race, under which sync.Pool drops items at random.
## The two SMTP tests that time real deadlines (ALONE) run after the suite, on their own: beside
## the end-to-end package they were starved past their slack (CI of 05fed0e).
## The race detector instruments our code and every Go library but modernc's SQLite and libc: C
## translated to Go, which a C SQLite under cgo would keep out of the detector's sight anyway.
## Instrumented, an idle SQLite server spent half a core (1,009 of 2,000 ticks in 20 s; 218
## without it). GOFLAGS carries the flag to the server binary the end-to-end tests build.
test: export GOFLAGS += -gcflags=modernc.org/...=-race=false
ALONE := ^(TestSMTPAttemptNeverOutlivesItsDeadline|TestSMTPWaitAndTransactionShareTheDeadline)$$
WAITING := ^(TestClusterCrashQueuedIsRescued|TestClusterCrashScheduledIsRescued|TestRestartAloneOnSharedBackendSendsHeld|TestClusterCrashReclaimsAfterLease|TestSIGTERMWaitsForTheLongestLease|TestQueuedSendsAcrossKill|TestQueuedLaneWakesWhenRoomAppears)$$
RACES := ^(TestHeldChangeRacingDispatch|TestQueuedChangeRacingLane)$$
test:
	@./scripts/ensure-postgres.sh
	@./scripts/ensure-redis.sh
	@./scripts/ensure-chromium.sh
	@guard=$$(./scripts/netguard.sh --exec-flag) || exit 1; \
	  echo "$(GO) test -race -count=1 -parallel 4 -timeout 25m -run '$(WAITING)' $$guard ./tests/   # beside the rest"; \
	  $(GO) test -race -count=1 -parallel 4 -timeout 25m -run '$(WAITING)' $$guard ./tests/ & waiting=$$!; \
	  echo "$(GO) test -race -count=1 -parallel 1 -timeout 25m -run '$(RACES)' $$guard ./tests/   # beside the rest"; \
	  $(GO) test -race -count=1 -parallel 1 -timeout 25m -run '$(RACES)' $$guard ./tests/ & races=$$!; \
	  echo "$(GO) test -race -count=1 -parallel 4 -timeout 25m -skip '$(WAITING)|$(RACES)|$(ALONE)' $$guard ./tests/ $(PKGS)"; \
	  $(GO) test -race -count=1 -parallel 4 -timeout 25m -skip '$(WAITING)|$(RACES)|$(ALONE)' $$guard ./tests/ $(PKGS); rest=$$?; \
	  wait $$waiting && wait $$races && [ $$rest -eq 0 ] && \
	  echo "$(GO) test -race -count=1 -run '$(ALONE)' $$guard ./providers/   # real deadlines: alone" && \
	  $(GO) test -race -count=1 -run '$(ALONE)' $$guard ./providers/ && \
	  echo "$(GO) test -count=1 -run MemoryIsLinear $$guard ./skuld/render/   # byte counts: not under -race" && \
	  $(GO) test -count=1 -run MemoryIsLinear $$guard ./skuld/render/

## lint: formatting, vet, and tidy modules (go.mod and go.sum as `go mod tidy` leaves them)
lint:
	@unformatted=$$(gofmt -l $$(git ls-files '*.go')); \
	  if [ -n "$$unformatted" ]; then echo "gofmt needed:"; echo "$$unformatted"; exit 1; fi
	$(GO) vet $(PKGS)
	@$(GO) mod tidy -diff || { echo "go.mod or go.sum is not tidy: run go mod tidy"; exit 1; }

## openapi-lint: Redocly's recommended rules over api/openapi.json: 0 errors, and one warning
## (info-license) justified in the document. Needs npm and its registry, so CI does not run it.
REDOCLY_VERSION ?= 2.77.0
openapi-lint:
	npx -y @redocly/cli@$(REDOCLY_VERSION) lint api/openapi.json

## bench: Go benchmarks with allocations (limiter vs x/time/rate, domain filter, SMTP reuse,
## hosted providers, search over 100k messages, cost per byte of hostile requests and Markdown,
## MCP's hostile cases against a real process), then peak memory of 8 concurrent maximum-size
## sends, then a real server's peak RSS and CPU per byte for Markdown that expands (issue 25)
bench:
	@./scripts/ensure-postgres.sh
	@./scripts/ensure-redis.sh
	$(GO) test -run='^$$' -bench=. -benchmem -count=1 -timeout 60m $(PKGS)
	NORNWEAVE_MEMTEST_FULL=1 $(GO) test -run='^TestConcurrentMaxSizeSendsBoundedMemory$$' -count=1 -v ./tests/ | grep -E 'memory_test|^(ok|FAIL|---)'
	./scripts/hostile-rss.sh 10

## fuzz: each fuzz target in turn for FUZZTIME (default 60s), one worker at a time; the corpora
## under testdata/fuzz are replayed by make test as ordinary tests
FUZZTIME ?= 60s
FUZZ_TARGETS := ./api:FuzzDecodeSend ./api:FuzzStrictJSON ./skuld:FuzzAddressFilter ./providers:FuzzBuildMIME ./skuld/render:FuzzMarkdown \
  ./providers/webhook:FuzzParseResend ./providers/webhook:FuzzParseSendGrid ./providers/webhook:FuzzParseMailgun \
  ./providers/webhook:FuzzParseSES ./providers/bounce:FuzzParseDSN
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

## load-scheduled: 10,000 messages scheduled for the same second against a fresh server (SQLite,
## 600 sends a minute): fails if more than 600 arrive in any 60 s, if any is lost or any arrives
## twice. About 20 minutes: the last leaves 16 minutes after the first.
load-scheduled: build
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/nornweave-load ./cmd/nornweave-load
	./bin/nornweave-load -spawn ./bin/nornweave -db sqlite -provider smtp -sink auto \
	  -per-minute 600 -clients 32 -requests 10000 -duration 5m -schedule-in 90s -drain 25m

## bench-scheduled: the same-run pair for held mail, no limit, on SQLite and on PostgreSQL: 2,000
## direct sends (sends/s), then 2,000 scheduled for one second (dispatch/s, lateness p99); each on a
## fresh server and database; BENCH_ROUNDS rounds (default 3); then the lateness of 60 scheduled
## sends due one at a time (p50/p99/max). To compare builds in the same hour:
## scripts/bench-scheduled.sh 3 /path/to/old/nornweave ./bin/nornweave
BENCH_ROUNDS ?= 3
bench-scheduled: build
	CGO_ENABLED=0 $(GO) build -trimpath -o bin/nornweave-load ./cmd/nornweave-load
	./scripts/bench-scheduled.sh $(BENCH_ROUNDS) ./bin/nornweave
	$(GO) test -run '^$$' -bench ScheduledSendLateness -benchtime 1x ./tests/

## bench-layers: what each layer of the shared throttle keeps (issue 27, BENCHMARKS.md): every
## configuration of the batcher and the gatherer (all, none, batch, gather) on postgres and redis
## against memory, rounds alternated, in-process and over HTTP, far from the limits and hot (about
## 40 minutes at 5 rounds).
bench-layers:
	./scripts/bench-layers.sh inproc 5 5
	./scripts/bench-layers.sh inproc 5 5 500ms
	./scripts/bench-layers.sh http 10 5
	./scripts/bench-layers.sh http 10 5 500ms

## screenshots: the dashboard's pages as the browser test visits them (SQLite), saved under
## docs/screenshots/ for docs/operations.md and the README (needs Chromium)
screenshots:
	@./scripts/ensure-chromium.sh
	NORNWEAVE_SCREENSHOTS=$(CURDIR)/docs/screenshots $(GO) test -count=1 -run '^TestAdminInABrowser$$/^sqlite$$' ./tests/

## compose: validate docker-compose.yml (docker compose config, or docker-compose from the Debian
## package, installed if missing; skipped with a warning if it cannot be installed in 120 s)
compose:
	@./scripts/check-compose.sh

clean:
	rm -rf bin data
