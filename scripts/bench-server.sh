#!/usr/bin/env bash
# The server-level ratios of BENCHMARKS.md, each from runs made here and now:
#   throttle  sends/s with the throttle on (never reached) / off, SQLite and PostgreSQL
#   pgbench   sends/s on PostgreSQL / pgbench -N TPS, same server, 32 clients
# Usage: scripts/bench-server.sh [seconds per run, default 20]
# Needs a local PostgreSQL (NORNWEAVE_BENCH_PG, default postgres://postgres@127.0.0.1:5432)
# where it may create and drop the databases nornweave_bench and pgbench_bench.
set -euo pipefail
cd "$(dirname "$0")/.."
secs=${1:-20}
pg=${NORNWEAVE_BENCH_PG:-postgres://postgres@127.0.0.1:5432}
make -s build
CGO_ENABLED=0 go build -o bin/nornweave-load ./cmd/nornweave-load

sends() { # driver per-minute → sends/s
  local extra=()
  if [ "$1" = postgres ]; then
    psql -q "$pg/postgres" -c 'DROP DATABASE IF EXISTS nornweave_bench WITH (FORCE)' -c 'CREATE DATABASE nornweave_bench'
    extra=(-database-url "$pg/nornweave_bench?sslmode=disable")
  fi
  ./bin/nornweave-load -spawn ./bin/nornweave -provider demo -db "$1" "${extra[@]}" \
    -per-minute "$2" -clients 32 -duration "${secs}s" -json | sed -nE 's/.*"sends_per_second": *([0-9.]+).*/\1/p'
}
tps() {
  psql -q "$pg/postgres" -c 'DROP DATABASE IF EXISTS pgbench_bench WITH (FORCE)' -c 'CREATE DATABASE pgbench_bench'
  pgbench -i -q "$pg/pgbench_bench" >/dev/null 2>&1
  pgbench -N -c 32 -j 2 -T "$secs" "$pg/pgbench_bench" 2>/dev/null | sed -nE 's/^tps = ([0-9.]+).*/\1/p'
}

echo "machine: $(nproc) cores, $(free -g | awk '/Mem:/ {print $2}') GiB, $(go version | cut -d' ' -f3), load $(cut -d' ' -f1-3 /proc/loadavg)"
for db in sqlite postgres; do
  on=$(sends "$db" 100000000); off=$(sends "$db" 0)
  on2=$(sends "$db" 100000000); off2=$(sends "$db" 0)
  awk -v d="$db" -v a="$on" -v b="$off" -v c="$on2" -v e="$off2" 'BEGIN {
    printf "%-8s throttle on %s, %s sends/s; off %s, %s sends/s; on/off = %.3f\n", d, a, c, b, e, (a+c)/(b+e) }'
done
s=$(sends postgres 0); t=$(tps)
# The same database work through pgbench's C client, with no HTTP server or
# load tool competing for the CPU: what the database alone allows.
DB_DRIVER=postgres DATABASE_URL="$pg/nornweave_bench?sslmode=disable" ./bin/nornweave migrate 2>/dev/null
psql -q "$pg/nornweave_bench" -c "INSERT INTO inboxes VALUES ('bench', 'bench@bench.test', 'Bench', now(), now()) ON CONFLICT DO NOTHING"
d=$(pgbench -n -M extended -f scripts/pgbench-send.sql -c 32 -j 2 -T "$secs" "$pg/nornweave_bench" 2>/dev/null | sed -nE 's/^tps = ([0-9.]+).*/\1/p')
awk -v s="$s" -v t="$t" -v d="$d" 'BEGIN {
  printf "postgres sends/s %s; pgbench -N TPS %s; ratio = %.3f\n", s, t, s/t
  printf "pgbench running one send'"'"'s SQL: %s sends/s = %.3f of pgbench -N (the database-only ceiling)\n", d, d/t }'
psql -q "$pg/postgres" -c 'DROP DATABASE IF EXISTS nornweave_bench WITH (FORCE)' -c 'DROP DATABASE IF EXISTS pgbench_bench WITH (FORCE)'
