#!/usr/bin/env bash
# Renders a page (axonn report's report.html) to a PNG with Debian's headless Chromium, offline: every host
# name resolves to nothing and the browser's own services are off, so nothing is loaded from anywhere. Used by
# tests/cli/report (the browser cases) and for the docs' screenshots (docs/report.md).
#
#   bash scripts/report-screenshot.sh runs/quickstart/train/report.html docs/images/report-quickstart.png
#   bash scripts/report-screenshot.sh PAGE PNG [LOG] [WIDTHxHEIGHT]    # LOG: Chromium's stderr (default: /dev/null)
set -euo pipefail
page=$(realpath "$1") png=$2 log=${3:-/dev/null} size=${4:-1280x4400}
profile=$(mktemp -d)
trap 'rm -rf "$profile"' EXIT
timeout 120 chromium --headless --no-sandbox --disable-gpu --disable-quic --no-first-run \
  --disable-background-networking --disable-component-update --disable-sync --user-data-dir="$profile" \
  --enable-logging=stderr --v=0 --host-resolver-rules="MAP * ~NOTFOUND" --hide-scrollbars \
  --window-size="${size/x/,}" --screenshot="$png" "file://$page" >"$log" 2>&1
[ -s "$png" ]
