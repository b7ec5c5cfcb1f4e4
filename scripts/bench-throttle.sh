#!/usr/bin/env bash
# Server sends/s with each THROTTLE_BACKEND on PostgreSQL, limits never
# reached, runs alternated so every backend sees the same machine noise:
# the postgres and redis ratios ÷ memory of BENCHMARKS.md section 7.
# Usage: scripts/bench-throttle.sh [seconds per run, default 15] [rounds, default 2]
# Needs a local PostgreSQL (NORNWEAVE_BENCH_PG, default postgres://postgres@127.0.0.1:5432)
# where it may create and drop the database nornweave_bench_throttle, and a Redis
# (REDIS_URL, default redis://127.0.0.1:6379/0) where it uses and then deletes a key prefix.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-15} rounds=${2:-2}
pg=${NORNWEAVE_BENCH_PG:-postgres://postgres@127.0.0.1:5432}
redis=${REDIS_URL:-redis://127.0.0.1:6379/0}
prefix="nornweave-bench:$$"
./scripts/ensure-redis.sh
make -s build
CGO_ENABLED=0 go build -o bin/nornweave-load ./cmd/nornweave-load

sends() { # backend → sends/s
  psql -q "$pg/postgres" -c 'DROP DATABASE IF EXISTS nornweave_bench_throttle WITH (FORCE)' \
    -c 'CREATE DATABASE nornweave_bench_throttle'
  ./bin/nornweave-load -spawn ./bin/nornweave -provider demo -db postgres \
    -database-url "$pg/nornweave_bench_throttle?sslmode=disable" \
    -server-env "THROTTLE_BACKEND=$1" -server-env "REDIS_URL=$redis" -server-env "REDIS_KEY_PREFIX=$prefix" \
    -per-minute 100000000 -per-hour 100000000 -clients 32 -duration "${secs}s" -json |
    sed -nE 's/.*"sends_per_second": *([0-9.]+).*/\1/p'
}

echo "machine: $(nproc) cores, $(go version | cut -d' ' -f3), load $(cut -d' ' -f1-3 /proc/loadavg)"
declare -A total=([memory]=0 [postgres]=0 [redis]=0)
for r in $(seq 1 "$rounds"); do
  for b in memory postgres redis; do
    s=$(sends "$b")
    echo "round $r $b $s sends/s"
    total[$b]=$(awk -v a="${total[$b]}" -v b="$s" 'BEGIN {print a+b}')
  done
done
awk -v m="${total[memory]}" -v p="${total[postgres]}" -v r="${total[redis]}" 'BEGIN {
  printf "postgres ÷ memory = %.3f; redis ÷ memory = %.3f (sums over the rounds)\n", p/m, r/m }'
psql -q "$pg/postgres" -c 'DROP DATABASE IF EXISTS nornweave_bench_throttle WITH (FORCE)'
redis-cli -u "$redis" --scan --pattern "*$prefix*" | xargs -r redis-cli -u "$redis" del >/dev/null
