#!/usr/bin/env bash
# Usage: scripts/bench-ratio.sh PKG BENCH_A BENCH_B [ROUNDS]
# Runs two Go benchmarks alternately ROUNDS times (default 6) so that both
# see the same machine noise, and prints each one's median ns/op and the
# ratio A/B. On a shared machine a ratio measured this way is the number to
# trust, not either absolute time.
set -euo pipefail
pkg=$1 a=$2 b=$3 rounds=${4:-6}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
go test -c -o "$tmp/bench.test" "$pkg"
dir=$(go list -f '{{.Dir}}' "$pkg")
for i in $(seq 1 "$rounds"); do
  for name in "$a" "$b"; do
    (cd "$dir" && "$tmp/bench.test" -test.run='^$' -test.bench="^${name}\$" -test.benchmem -test.count=1) |
      awk -v n="$name" '$1 ~ "^"n"(-[0-9]+)?$" {print $3}' >>"$tmp/${name//\//_}"
  done
done
median() { sort -g "$1" | awk '{v[NR]=$1} END {print (NR%2) ? v[(NR+1)/2] : (v[NR/2]+v[NR/2+1])/2}'; }
fa=$tmp/${a//\//_} fb=$tmp/${b//\//_}
ma=$(median "$fa") mb=$(median "$fb")
printf '%-40s median %10.1f ns/op  (runs: %s)\n' "$a" "$ma" "$(tr '\n' ' ' <"$fa")"
printf '%-40s median %10.1f ns/op  (runs: %s)\n' "$b" "$mb" "$(tr '\n' ' ' <"$fb")"
awk -v a="$ma" -v b="$mb" -v na="$a" -v nb="$b" 'BEGIN {printf "ratio %s / %s = %.3f\n", na, nb, a/b}'
