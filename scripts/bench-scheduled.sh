#!/usr/bin/env bash
# bench-scheduled.sh [ROUNDS] [BINARY...]: the same-run pair for held mail,
# no limit, on SQLite and on PostgreSQL: N direct sends (sends/s), then N
# scheduled for one second (dispatch/s and lateness), each on a fresh
# server and database; per round and binary (default ./bin/nornweave), so
# that two builds can be compared in the same hour. Prints one line per run.
# DRIVERS (default "sqlite postgres") picks the databases.
set -euo pipefail
rounds=${1:-2}
shift || true
bins=("${@:-./bin/nornweave}")
n=${REQUESTS:-2000}
pgurl=${NORNWEAVE_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
db=nw_bench_scheduled
base=${pgurl%%\?*}
query=""
[[ $pgurl == *\?* ]] && query="?${pgurl#*\?}"
dburl="${base%/*}/$db$query"
load() { ./bin/nornweave-load -spawn "$1" -provider smtp -sink auto -clients 32 -requests "$n" -duration 5m "${@:2}"; }
for r in $(seq "$rounds"); do
  for bin in "${bins[@]}"; do
    for driver in ${DRIVERS:-sqlite postgres}; do
      args=(-db sqlite)
      if [ "$driver" = postgres ]; then
        psql "$pgurl" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
        args=(-db postgres -database-url "$dburl")
      fi
      direct=$(load "$bin" "${args[@]}" | awk '/^sends\/s/ {print $2}')
      if [ "$driver" = postgres ]; then
        psql "$pgurl" -qc "DROP DATABASE IF EXISTS $db" -c "CREATE DATABASE $db" >/dev/null
      fi
      out=$(load "$bin" "${args[@]}" -schedule-in 12s -drain 5m)
      disp=$(awk '/^dispatch\/s/ {print $2}' <<<"$out")
      late=$(awk '/^lateness ms/ {print $4 " / " $8 " / " $10 " ms"}' <<<"$out")
      dups=$(awk '/^sink dups/ {print $3}' <<<"$out")
      recv=$(awk '/^sink received/ {print $3}' <<<"$out")
      printf 'round %s %-24s %-8s direct %7.1f/s  scheduled %7.1f/s  ratio %.2f  lateness p50/p99/max %s  received %s dups %s\n' \
        "$r" "$bin" "$driver" "$direct" "$disp" "$(echo "$disp / $direct" | bc -l)" "$late" "$recv" "$dups"
    done
  done
done
psql "$pgurl" -qc "DROP DATABASE IF EXISTS $db" >/dev/null
