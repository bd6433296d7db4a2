#!/usr/bin/env bash
# Install, build, and run every test (unit, multi-rank MPI, CLI).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
# llama.cpp's prebuilt CPU build (npm node-llama-cpp 3.21.1, ~700 MB), the GGUF peer of tests/peer/llamacpp:
# installed where node is 20 or newer (its requirement), else skipped with a line saying so (the tests then skip)
bash scripts/fetch-llamacpp.sh
cmake --preset cpu-release >/dev/null
cmake --build --preset cpu-release
ctest --preset cpu-release
