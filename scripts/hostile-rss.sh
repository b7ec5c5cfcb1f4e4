#!/usr/bin/env bash
# Issue 25's "Must show" for Markdown: what one hostile send costs a real
# server process, against a plain send of the same size measured in the
# same run. For each body, a fresh ./bin/nornweave (SQLite, demo provider)
# takes one warm-up send, then N sends of the body, one after another; the
# script reads the process's VmHWM (peak RSS) and utime+stime
# (/proc/PID/stat) before and after the N sends and prints
#   peak RSS growth, and growth ÷ request bytes
#   CPU ms per send, and CPU ns per request byte
# Usage: scripts/hostile-rss.sh [N, default 10] [KIND:SIZE ...]
#   KIND is plain, references or table (the table is always 1,500 × 4,500);
#   default: plain and references at 150 KB and 450 KB, plain and table at
#   33 KB. BIN=path measures another build (default: make build, ./bin/nornweave).
set -euo pipefail
cd "$(dirname "$0")/.."
n=${1:-10}
shift || true
specs=("$@")
[ ${#specs[@]} -gt 0 ] || specs=(plain:153600 references:153600 plain:460800 references:460800 plain:33000 table:33000)
bin=${BIN:-./bin/nornweave}
[ -n "${BIN:-}" ] || make -s build
work=$(mktemp -d)
trap 'kill "$pid" 2>/dev/null || true; rm -rf "$work"' EXIT
pid=
tck=$(getconf CLK_TCK)

# body KIND SIZE → a JSON request in $work/KIND-SIZE.json
body() {
  python3 - "$1" "$2" "$work/$1-$2.json" <<'PY'
import json, sys
kind, size, out = sys.argv[1], int(sys.argv[2]), sys.argv[3]
if kind == "plain":
    unit = "hello world, this is plain text. "
    md = unit * (size // len(unit))
elif kind == "references":  # skuld's hostileReferences
    d = "[a]: http://x/" + "A" * (size // 2) + "\n\n"
    md = d + "See [a].\n\n" * max(1, (size - len(d)) // 10)
elif kind == "table":  # skuld's hostileTable(1500, 4500)
    md = "|" + "a|" * 1500 + "\n|" + "-|" * 1500 + "\n" + "hello\n" * 4500
json.dump({"inbox_id": "INBOX", "to": ["a@b.test"], "subject": "s", "body": md}, open(out, "w"))
PY
}

field() { awk -v f="$1:" '$1 == f {print $2 * 1024}' "/proc/$pid/status"; }
cpu() { awk -v t="$tck" '{printf "%d", ($14 + $15) * 1000 / t}' "/proc/$pid/stat"; }  # ms

measure() { # KIND SIZE
  local file=$work/$1-$2.json port=$((20000 + RANDOM % 20000))
  rm -f "$work/db.sqlite"*
  DB_DRIVER=sqlite DATABASE_URL="$work/db.sqlite" EMAIL_PROVIDER=demo EMAIL_DOMAIN=acme.test \
    HOST=127.0.0.1 PORT=$port LOG_LEVEL=error "$bin" >"$work/log" 2>&1 &
  pid=$!
  for _ in $(seq 100); do curl -sf "http://127.0.0.1:$port/health" >/dev/null && break; sleep 0.1; done
  local inbox
  inbox=$(curl -sf -H 'Content-Type: application/json' -d '{"name":"B","email_username":"b"}' \
    "http://127.0.0.1:$port/v1/inboxes" | python3 -c 'import json,sys; print(json.load(sys.stdin)["id"])')
  sed -i "s/\"INBOX\"/\"$inbox\"/" "$file"
  send() { curl -sf -o /dev/null -w '%{http_code}' -H 'Content-Type: application/json' --data-binary "@$1" \
    "http://127.0.0.1:$port/v1/messages"; }
  body plain 1024 && sed -i "s/\"INBOX\"/\"$inbox\"/" "$work/plain-1024.json"
  [ "$(send "$work/plain-1024.json")" = 201 ] || { echo "warm-up send failed"; cat "$work/log"; exit 1; }
  local hwm0 cpu0 hwm1 cpu1 bytes
  hwm0=$(field VmHWM); cpu0=$(cpu)
  for _ in $(seq "$n"); do
    code=$(send "$file"); [ "$code" = 201 ] || { echo "$1 $2: status $code"; cat "$work/log"; exit 1; }
  done
  hwm1=$(field VmHWM); cpu1=$(cpu)
  bytes=$(stat -c %s "$file")
  kill "$pid"; wait "$pid" 2>/dev/null || true
  awk -v k="$1" -v b="$bytes" -v h0="$hwm0" -v h1="$hwm1" -v c0="$cpu0" -v c1="$cpu1" -v n="$n" 'BEGIN {
    printf "%-10s request %7d B: peak RSS %6.1f MB -> %6.1f MB, growth %6.1f MB = %5.1f x request; CPU %7.1f ms/send = %6.1f ns/B\n",
      k, b, h0/1e6, h1/1e6, (h1-h0)/1e6, (h1-h0)/b, (c1-c0)/n, (c1-c0)/n*1e6/b }'
}

echo "machine: $(nproc) cores, $(go version | cut -d' ' -f3), load $(cut -d' ' -f1-3 /proc/loadavg), $n sends a body, $bin $("$bin" version 2>/dev/null || git rev-parse --short HEAD)"
for spec in "${specs[@]}"; do
  body "${spec%%:*}" "${spec##*:}"
  measure "${spec%%:*}" "${spec##*:}"
done
