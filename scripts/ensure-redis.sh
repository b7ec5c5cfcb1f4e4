#!/usr/bin/env bash
# Makes sure the Redis the tests use (THROTTLE_BACKEND=redis) answers: the
# Debian redis-server package is installed if missing, and a server started
# on 127.0.0.1 if none answers. The tests use a key prefix of their own and
# delete it afterwards; they never skip when Redis is missing.
set -euo pipefail
url=${REDIS_URL:-redis://127.0.0.1:6379/0}

answers() { command -v redis-cli >/dev/null 2>&1 && [ "$(redis-cli -u "$url" ping 2>/dev/null)" = PONG ]; }

if answers; then exit 0; fi
if ! command -v redis-server >/dev/null 2>&1; then
  echo "redis-server is not installed; installing the Debian package" >&2
  sudo=""
  if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then sudo=sudo; fi
  $sudo apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq redis-server
fi
case "$url" in
  redis://127.0.0.1:*|redis://localhost:*)
    port=${url#redis://*:}; port=${port%%/*}
    echo "Redis is down; starting redis-server on 127.0.0.1:$port" >&2
    redis-server --bind 127.0.0.1 --port "$port" --daemonize yes --save '' --appendonly no >/dev/null
    for _ in $(seq 1 30); do answers && exit 0; sleep 0.2; done
    ;;
esac
# Not local, or it still does not answer: the tests will fail with a
# message saying how to start it.
echo "warning: could not confirm Redis at $url; set REDIS_URL or start it" >&2
