#!/usr/bin/env bash
# Makes sure the headless Chromium the /docs browser test drives
# (api/docs_browser_test.go, through chromedp) is installed: the Debian
# chromium package, when /usr/bin/chromium (or $CHROMIUM) is missing. The
# test fails, never skips, when Chromium is still missing after this.
set -euo pipefail
bin=${CHROMIUM:-/usr/bin/chromium}

if [ -x "$bin" ]; then exit 0; fi
echo "chromium is not installed; installing the Debian package" >&2
sudo=""
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null 2>&1; then sudo=sudo; fi
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends chromium
[ -x "$bin" ] || { echo "error: $bin still missing after installing chromium" >&2; exit 1; }
