#!/usr/bin/env bash
# Reproduces api/docs/swagger-ui/ from the npm registry: the files of
# swagger-ui-dist that /docs serves, embedded in the binary (go:embed), so
# neither the Go build nor the page needs npm or a CDN. The version and the
# tarball's integrity are pinned: a different tarball fails here. To
# upgrade, change both (npm view swagger-ui-dist@<v> dist.integrity), run
# this, and run the browser test (go test -run TestDocsInABrowser ./tests/).
set -euo pipefail
VERSION=5.35.0
INTEGRITY=sha512-U06rpMtW9V3XPGOBeamTUSr0Z09jMX4IJuANpE/EZbAhw0G8CgwrzU4YmXkn/h0wCDNsXdGarTNNHC3sU8yVUQ==
FILES="swagger-ui-bundle.js swagger-ui.css favicon-32x32.png LICENSE NOTICE swagger-ui-bundle.js.LICENSE.txt"

cd "$(dirname "$0")/.."
dest=api/docs/swagger-ui
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

got=$(cd "$tmp" && npm pack --silent --json "swagger-ui-dist@$VERSION" |
  python3 -c 'import json,sys; print(json.load(sys.stdin)[0]["integrity"])')
if [ "$got" != "$INTEGRITY" ]; then
  echo "swagger-ui-dist@$VERSION: integrity $got, want $INTEGRITY" >&2
  exit 1
fi
tar -xzf "$tmp/swagger-ui-dist-$VERSION.tgz" -C "$tmp"
rm -rf "$dest"
mkdir -p "$dest"
for f in $FILES; do cp "$tmp/package/$f" "$dest/$f"; done
echo "$VERSION" > "$dest/VERSION"
echo "api/docs/swagger-ui: swagger-ui-dist $VERSION"
