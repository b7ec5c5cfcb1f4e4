#!/usr/bin/env bash
# Reproduces api/admin/htmx/ from the npm registry: the htmx that the
# dashboard's overview uses to refresh its throttle windows, embedded in the
# binary (go:embed) and served from /admin/htmx.min.js, so neither the Go
# build nor the page needs npm or a CDN. The version and the tarball's
# integrity are pinned: a different tarball fails here. To upgrade, change
# both (npm view htmx.org@<v> dist.integrity), run this, and run the
# browser test (go test -run TestAdminInABrowser ./tests/).
set -euo pipefail
VERSION=2.0.11
INTEGRITY=sha512-Thx/WtpeOQqSrqBCw/A1cwGJGg4UrVa3+sW0GmrM3p4gJgO89ecH4qtbnyzDDWFvBTqjnIMCgELTNt636dtamA==
FILES="dist/htmx.min.js LICENSE"

cd "$(dirname "$0")/.."
dest=api/admin/htmx
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

got=$(cd "$tmp" && npm pack --silent --json "htmx.org@$VERSION" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["integrity"])')
if [ "$got" != "$INTEGRITY" ]; then
  echo "htmx.org@$VERSION: integrity $got, want $INTEGRITY" >&2
  exit 1
fi
tar -xzf "$tmp/htmx.org-$VERSION.tgz" -C "$tmp"
rm -rf "$dest"
mkdir -p "$dest"
for f in $FILES; do cp "$tmp/package/$f" "$dest/$(basename "$f")"; done
echo "$VERSION" > "$dest/VERSION"
echo "api/admin/htmx: htmx.org $VERSION"
