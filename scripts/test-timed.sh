#!/usr/bin/env bash
# Runs `make test` (or the command given) and reports its wall time and the
# peak number of PostgreSQL client connections during it, sampled from
# pg_stat_activity every 200 ms (issue 28: a run must leave room for a
# second one beside it in the default max_connections of 100).
#   scripts/test-timed.sh [command...]      default: make test
set -uo pipefail
url=${NORNWEAVE_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}
[ $# -gt 0 ] || set -- make test
peakfile=$(mktemp)
echo 0 >"$peakfile"
(
  peak=0
  while :; do
    # One query: the count, and where those connections are, by database
    # (a test database's name carries its test's: testdb.databaseName).
    row=$(psql "$url" -F '|' -Atc "SELECT coalesce(sum(n), 0), string_agg(d || ' ' || n, ', ' ORDER BY n DESC, d)
      FROM (SELECT coalesce(datname, '-') AS d, count(*) AS n FROM pg_stat_activity
            WHERE backend_type = 'client backend' AND pid <> pg_backend_pid() GROUP BY 1) s" 2>/dev/null || echo "0|")
    n=${row%%|*}
    if [ "${n:-0}" -gt "$peak" ]; then
      peak=$n; echo "$peak" >"$peakfile"
      echo "${row#*|}" >"$peakfile.where"
    fi
    sleep 0.2
  done
) &
sampler=$!
start=$(date +%s.%N)
"$@"
rc=$?
end=$(date +%s.%N)
kill "$sampler" 2>/dev/null; wait "$sampler" 2>/dev/null
printf 'test-timed: %s: exit %d in %.1f s; peak PostgreSQL client connections %s (all databases, this run and anything beside it)\n' \
  "$*" "$rc" "$(awk "BEGIN{print $end - $start}")" "$(cat "$peakfile")"
[ -s "$peakfile.where" ] && echo "test-timed: at the peak, by database: $(cat "$peakfile.where")"
rm -f "$peakfile" "$peakfile.where"
exit "$rc"
