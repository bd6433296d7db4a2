#!/usr/bin/env bash
# Install, build, and run every test (unit, multi-rank MPI, CLI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset cpu-release >/dev/null
cmake --build --preset cpu-release
ctest --preset cpu-release
