#!/usr/bin/env bash
# GPT-2 124M on this machine: one rank with every core's threads against one rank per core (one thread
# each) on the grids that split over X, Y, Z and data; tokens/s, efficiency against one rank, MFU, and
# each rank's memory with the tensor-parallel weights' share (expected 1/(Gx*Gy*Gz)).
#   bash bench/grid_scaling.sh [build dir] [BxT] [steps]
set -euo pipefail
build=${1:-build} shape=${2:-8x256} steps=${3:-2}
cores=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
run() {  # ranks threads grid
  OMP_NUM_THREADS=$2 mpiexec -n "$1" --oversubscribe --bind-to none "$build/bin/bench_gpt2_step" --grid "$3" \
    --shapes "$shape" --steps "$steps" | tail -1
}
echo "# $(date -u +%FT%TZ), $cores cores, load $(cut -d' ' -f1-3 /proc/loadavg), shape $shape, $steps timed steps"
base=$(run 1 "$cores" 1,1,1,1)
echo "1 rank x $cores threads: $base"
base_tps=$(echo "$base" | awk '{print $6}')
for g in 2,1,1,1 1,2,1,1 1,1,2,1 1,1,1,2; do
  line=$(run "$cores" 1 "$g")
  tps=$(echo "$line" | awk '{print $6}')
  echo "$cores ranks x 1 thread: $line | efficiency $(awk -v a="$tps" -v b="$base_tps" 'BEGIN{printf "%.2f", a/b}')"
done
