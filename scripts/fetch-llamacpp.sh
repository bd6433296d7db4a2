#!/usr/bin/env bash
# Installs llama.cpp's prebuilt CPU build from the npm registry — node-llama-cpp, pinned at 3.21.1 by
# tests/peer/llamacpp/package.json and its package-lock.json — into tests/peer/llamacpp/node_modules, where
# the GGUF peer tests (tests/peer/llamacpp, label peer) load it. `npm ci` installs exactly the lock file's
# packages (about 700 MB: node-llama-cpp's binaries for every Linux backend come as optional packages; the
# tests use linux-x64's CPU build). node-llama-cpp 3.21.1 needs node >= 20 (its engines field): with an
# older node (Debian 12's is 18) nothing is installed and the tests skip, saying so. scripts/test.sh runs it
# (not install-deps.sh: the quickstart needs none of it).
#
#   scripts/fetch-llamacpp.sh
#
# Nothing is changed when node_modules already holds node-llama-cpp 3.21.1.
set -euo pipefail
dir=$(cd "$(dirname "$0")/../tests/peer/llamacpp" && pwd)
want=3.21.1
if ! command -v node >/dev/null || ! command -v npm >/dev/null; then
  echo "fetch-llamacpp: node and npm are not installed: the llama.cpp peer tests will skip" >&2
  exit 0
fi
major=$(node -p 'process.versions.node.split(".")[0]')
if [ "$major" -lt 20 ]; then
  echo "fetch-llamacpp: node $(node --version) is older than node-llama-cpp $want needs (>= 20): not installed, the llama.cpp peer tests will skip"
  exit 0
fi
have=$(node -p "require('$dir/node_modules/node-llama-cpp/package.json').version" 2>/dev/null || true)
if [ "$have" = "$want" ]; then
  echo "fetch-llamacpp: $dir/node_modules already holds node-llama-cpp $want"
  exit 0
fi
# npm 11 does not run install scripts it has not been told to allow; node-llama-cpp's postinstall only
# looks for a prebuilt binary, which the optional package @node-llama-cpp/linux-x64 brings
if ! (cd "$dir" && npm ci --no-audit --no-fund --ignore-scripts >"$dir/npm.log" 2>&1); then
  echo "fetch-llamacpp: \`npm ci\` in $dir failed (is the npm registry reachable?):" >&2
  cat "$dir/npm.log" >&2
  exit 1
fi
rm -f "$dir/npm.log"
echo "fetch-llamacpp: node-llama-cpp $want (llama.cpp's prebuilt CPU build) in $dir/node_modules"
