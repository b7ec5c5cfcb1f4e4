#!/usr/bin/env bash
# Makes sure the PostgreSQL the tests use answers. The tests create (and
# drop) their own databases on it; they never skip when it is missing.
set -euo pipefail
url=${NORNWEAVE_TEST_DATABASE_URL:-postgres://postgres@127.0.0.1:5432/postgres?sslmode=disable}

# ready exits 0, after checking that pg_trgm (migration 0004) can be created:
# it comes with PostgreSQL's contrib modules.
ready() {
  if command -v psql >/dev/null 2>&1 &&
    [ "$(psql "$url" -Atc "SELECT count(*) FROM pg_available_extensions WHERE name = 'pg_trgm'" 2>/dev/null)" = 0 ]; then
    echo "error: PostgreSQL lacks the pg_trgm extension; install the contrib modules" \
      "(Debian/Ubuntu: postgresql-contrib or postgresql-NN; Alpine: postgresql-contrib)" >&2
    exit 1
  fi
  exit 0
}

if command -v pg_isready >/dev/null 2>&1; then
  if pg_isready -q -d "$url"; then ready; fi
  if command -v pg_ctlcluster >/dev/null 2>&1 && [ -d /etc/postgresql ]; then
    echo "PostgreSQL is down; starting the local cluster" >&2
    pg_ctlcluster --skip-systemctl-redirect "$(ls /etc/postgresql | head -n1)" main start
    for _ in $(seq 1 30); do pg_isready -q -d "$url" && ready; sleep 1; done
  fi
fi
# No pg_isready, or it still does not answer: the tests will fail with a
# message saying how to start it.
echo "warning: could not confirm PostgreSQL at ${url%%\?*}; set NORNWEAVE_TEST_DATABASE_URL or start it" >&2
