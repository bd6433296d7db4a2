#!/usr/bin/env bash
# The graceful stop under load, many times (docs/resilience.md): cli_resilience.sh's stop_sigterm_mpirun
# case (2 ranks under mpirun, progress lines on, SIGTERM to mpirun; the checkpoint must resume bit for
# bit) run N times with two busy processes beside it. Not a ctest (minutes); run it by hand:
#
#   bash tests/cli/resilience/stop_stress.sh 20 build/bin/axonn tests/reference
#
# Prints one line per try and "N of N stops checkpointed and resumed exactly" last; exit 1 if any failed.
set -uo pipefail
tries=${1:?usage: stop_stress.sh TRIES AXONN_BIN REFERENCE_DIR [MPIEXEC]}
axonn=${2:?} ref=${3:?} mpiexec=${4:-mpiexec}
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMP_NUM_THREADS=1
busy=()
for _ in 1 2; do
  (while :; do :; done) &
  busy+=($!)
done
trap 'kill "${busy[@]}" 2>/dev/null' EXIT
passed=0
for i in $(seq "$tries"); do
  start=$(date +%s)
  if out=$(bash "$(dirname "$0")/cli_resilience.sh" stop_sigterm_mpirun "$axonn" "$ref" "$mpiexec" 2>&1); then
    passed=$((passed + 1))
    echo "try $i: ok in $(($(date +%s) - start)) s: $(grep -Eo 'ok: [0-9]+ steps.*' <<<"$out")"
  else
    echo "try $i: FAILED in $(($(date +%s) - start)) s"
    grep -E "FAIL" -A5 <<<"$out" | head -20
  fi
done
echo "$passed of $tries stops checkpointed and resumed exactly (two busy processes beside each)"
[ "$passed" -eq "$tries" ]
