#!/usr/bin/env bash
# The planner's validation on this machine (issue 6; docs/perf-model.md §11): calibrate a profile for
# 4 ranks x 1 thread, then measure every admissible grid of a small GPT and compare with its prediction.
#
#   bench/validate_planner.sh [BUILD_DIR] [extra bench_plan_validate flags, e.g. --rounds 12 --json out.json]
#
# The profile goes to a temporary file (your ~/.config/axonn/profiles/local.json is left alone).
# Environment: NP (default 4), MPIEXEC (default mpirun).
set -euo pipefail
build=${1:-build}
shift || true
np=${NP:-4}
mpiexec=${MPIEXEC:-mpirun}
extra=()
if "$mpiexec" --version 2>/dev/null | grep -q "Open MPI"; then extra=(--oversubscribe); fi
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export OMP_NUM_THREADS=1
echo "== uptime before: $(uptime)"
"$mpiexec" -n "$np" "${extra[@]}" "$build/bin/axonn" calibrate --out "$tmp/local.json"
echo "== uptime between: $(uptime)"
"$mpiexec" -n "$np" "${extra[@]}" "$build/bin/bench_plan_validate" --machine "$tmp/local.json" \
  --layers 4 --channels 256 --heads 4 --vocab 2048 --seq-len 64 --batch-size 8 --rounds 10 --steps 1 "$@"
echo "== uptime after: $(uptime)"
