#!/usr/bin/env bash
# The main job on its built-in default: install, build, and train a small GPT-2 on one rank on a
# synthetic corpus the project generates itself, showing the loss fall.
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset cpu-release >/dev/null
cmake --build --preset cpu-release
./build/bin/axonn train --steps 300 --batch-size 8 --seq-len 64 --lr 1e-2 --warmup-steps 20 "$@"
