#!/usr/bin/env bash
# What each layer of the shared throttle keeps (issue 27, BENCHMARKS.md):
# sends/s of postgres and redis against memory, in one run, with the
# layers configured four ways, every configuration in every round and the
# order rotated from round to round, spares on in all:
#   all    the admissions batcher and the commit gatherer (the defaults)
#   none   MaxBatch 1 and SettleDelay < 0
#   batch  the batcher only (SettleDelay < 0)
#   gather the gatherer only (MaxBatch 1)
# inproc: the in-process pipeline (BenchmarkSendPipelineBackend*, one test
#   binary, the layers from NORNWEAVE_BENCH_LAYERS);
# http: the server over HTTP (nornweave-load, 32 clients, as
#   scripts/bench-throttle.sh), one server binary per configuration, built
#   with -ldflags -X internal/app.benchLayers (all: the plain build).
# hot: an interval (e.g. 500ms) runs every configuration near the limits:
#   a second inbox whose limit is reached sends that often and is refused,
#   which keeps the shared throttle hot (spares drained, commits sent at
#   once) for the whole run.
# Usage: scripts/bench-layers.sh inproc|http [seconds per run] [rounds] [hot]
# Prints one line per run and then scripts/bench-layers-sum.py's tables;
# the raw lines are kept in $OUT (default /tmp/bench-layers-MODE.log).
set -euo pipefail
cd "$(dirname "$0")/.."
mode=${1:?inproc or http} secs=${2:-5} rounds=${3:-5} hot=${4:-}
out=${OUT:-/tmp/bench-layers-$mode${hot:+-hot}.log}
pg=${NORNWEAVE_BENCH_PG:-postgres://postgres@127.0.0.1:5432}
redis=${REDIS_URL:-redis://127.0.0.1:6379/0}
prefix="nornweave-bench:$$"
layers=(all none batch gather)
bin=$(mktemp -d)
trap 'rm -rf "$bin"' EXIT
./scripts/ensure-postgres.sh
./scripts/ensure-redis.sh

case $mode in
inproc)
  go test -c -o "$bin/tests.test" ./tests
  run() { # layers backend → sends/s (the benchmark line to stderr)
    local name line
    name=$(tr '[:lower:]' '[:upper:]' <<<"${2:0:1}")${2:1}
    line=$(cd tests && NORNWEAVE_BENCH_LAYERS=$1 NORNWEAVE_BENCH_HOT=$hot "$bin/tests.test" -test.run='^$' \
      -test.bench="^BenchmarkSendPipelineBackend$name\$" -test.benchtime="${secs}s" | grep '^Benchmark')
    echo "  $line" >&2
    sed -nE 's/.* ([0-9.]+) sends\/s.*/\1/p' <<<"$line"
  }
  ;;
http)
  for l in "${layers[@]}"; do
    flags=()
    [ "$l" = all ] || flags=(-ldflags "-X github.com/nornweave/nornweave/internal/app.benchLayers=$l")
    CGO_ENABLED=0 go build -trimpath "${flags[@]}" -o "$bin/nornweave-$l" ./cmd/nornweave
  done
  CGO_ENABLED=0 go build -o "$bin/nornweave-load" ./cmd/nornweave-load
  run() {
    local json
    psql -q "$pg/postgres" -c 'DROP DATABASE IF EXISTS nornweave_bench_layers WITH (FORCE)' \
      -c 'CREATE DATABASE nornweave_bench_layers'
    json=$("$bin/nornweave-load" -spawn "$bin/nornweave-$1" -provider demo -db postgres \
      -database-url "$pg/nornweave_bench_layers?sslmode=disable" \
      -server-env "THROTTLE_BACKEND=$2" -server-env "REDIS_URL=$redis" -server-env "REDIS_KEY_PREFIX=$prefix" \
      -per-minute 100000000 -per-hour 100000000 -clients 32 -duration "${secs}s" ${hot:+-hot-every "$hot"} -json)
    echo "  $(tr -d ' \n' <<<"$json" | grep -oE '"(http_status|hot_status)":\{[^}]*\}' | tr '\n' ' ')" >&2
    sed -nE 's/.*"sends_per_second": *([0-9.]+).*/\1/p' <<<"$json"
  }
  ;;
*) echo "mode must be inproc or http" >&2; exit 2 ;;
esac

{
  echo "# $mode ${secs}s x $rounds rounds${hot:+, hot every $hot}; $(date -u +%FT%TZ); $(git rev-parse --short HEAD)"
  echo "# machine: $(nproc) cores, $(go version | cut -d' ' -f3)"
} | tee "$out"
for r in $(seq 1 "$rounds"); do
  echo "# round $r start $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out"
  s=$(run all memory)
  echo "round $r - memory $s" | tee -a "$out"
  for i in 0 1 2 3; do # the order rotates with the round
    l=${layers[$(((i + r - 1) % 4))]}
    for b in postgres redis; do
      s=$(run "$l" "$b")
      echo "round $r $l $b $s" | tee -a "$out"
    done
  done
  echo "# round $r end $(date -u +%T) load $(cut -d' ' -f1-3 /proc/loadavg)" | tee -a "$out"
done
if [ "$mode" = http ]; then
  psql -q "$pg/postgres" -c 'DROP DATABASE IF EXISTS nornweave_bench_layers WITH (FORCE)'
  redis-cli -u "$redis" --scan --pattern "*$prefix*" | xargs -r redis-cli -u "$redis" del >/dev/null
fi
python3 scripts/bench-layers-sum.py "$out"
