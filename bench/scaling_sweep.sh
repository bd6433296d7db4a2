#!/usr/bin/env bash
# How the cost of a training step grows (docs/performance.md): ms/step, tokens/s, MFU and the measured
# peak memory of the largest rank, for every model × sequence length × grid × precision, at a fixed
# number of tokens per step. Each point runs in its own process (bench_gpt2_step, one warm-up step and
# --steps timed ones), so its peak resident set is its own, under a memory limit (ulimit -v) that turns
# "does not fit" into a clean failure instead of the OOM killer. The two precisions of a point run one
# after the other, so that a noisy machine disturbs both alike. A T beyond the model's position table
# (GPT-2's 1024) runs the same shape with a table of T rows (bench_gpt2_step --stretch-positions 1).
#
#   bash bench/scaling_sweep.sh [build dir] [output.tsv]
# Environment (defaults in brackets):
#   MODELS [gpt2-124m gpt2-350m gpt2-774m]   TS [256 1024 2048]   TOKENS [2048] (B = TOKENS / T)
#   GRIDS ["1,1,1,1 2,1,1,1 1,2,1,1 1,1,2,1 1,1,1,2"]: 1,1,1,1 runs 1 rank × every core's threads, the others
#   one rank per factor with the cores shared out; DTYPES [fp32 bf16]; STEPS [1]; MEM_FRACTION [0.85]
#   of MemAvailable shared by the ranks of a point; EXTRA [none]: more bench_gpt2_step flags for every point
#   (e.g. "--lm-head-chunk 256"), recorded in the header line.
# Rows: model T B grid ranks threads dtype ms_per_step tokens_per_s mfu peak_gflops_per_rank rss_mib status
set -euo pipefail
build=${1:-build}
out=${2:-/dev/stdout}
bench="$build/bin/bench_gpt2_step"
[[ -x "$bench" ]] || { echo "error: $bench not found: build it first (cmake --build $build --target bench_gpt2_step)" >&2; exit 2; }
MODELS=${MODELS:-"gpt2-124m gpt2-350m gpt2-774m"}
TS=${TS:-"256 1024 2048"}
TOKENS=${TOKENS:-2048}
GRIDS=${GRIDS:-"1,1,1,1 2,1,1,1 1,2,1,1 1,1,2,1 1,1,1,2"}
DTYPES=${DTYPES:-"fp32 bf16"}
STEPS=${STEPS:-1}
MEM_FRACTION=${MEM_FRACTION:-0.85}
read -r -a extra <<<"${EXTRA:-}"
cores=$(nproc)
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
log=$(mktemp)
trap 'rm -f "$log"' EXIT

{
  echo "# $(date -u +%FT%TZ) $(lscpu | sed -n 's/^Model name: *//p' | head -1), $cores cores, load $(cut -d' ' -f1-3 /proc/loadavg)," \
       "$TOKENS tokens per step, $STEPS timed step(s) after one warm-up${EXTRA:+, extra flags: $EXTRA}"
  printf "model\tT\tB\tgrid\tranks\tthreads\tdtype\tms_per_step\ttokens_per_s\tmfu\tpeak_gflops_per_rank\trss_mib\tstatus\n"
} >>"$out"

for model in $MODELS; do
  for T in $TS; do
    B=$((TOKENS / T))
    for grid in $GRIDS; do
      IFS=, read -r gx gy gz gd <<<"$grid"
      ranks=$((gx * gy * gz * gd))
      threads=$((cores / ranks > 0 ? cores / ranks : 1))
      for dtype in $DTYPES; do
        row="$model\t$T\t$B\t$grid\t$ranks\t$threads\t$dtype"
        if (( B < 1 || B % (gz * gd) != 0 )); then
          printf "$row\t\t\t\t\t\tskipped: B=%d cannot be split over Gz*Gdata=%d\n" "$B" $((gz * gd)) >>"$out"
          continue
        fi
        avail_kib=$(sed -n 's/^MemAvailable: *\([0-9]*\) kB/\1/p' /proc/meminfo)
        limit_kib=$(awk -v a="$avail_kib" -v f="$MEM_FRACTION" -v r="$ranks" 'BEGIN{printf "%d", a * f / r}')
        set +e
        (
          ulimit -v "$limit_kib"
          if (( ranks == 1 )); then
            OMP_NUM_THREADS=$threads "$bench" --model "$model" --dtype "$dtype" --shapes "${B}x$T" --steps "$STEPS" \
              --stretch-positions 1 "${extra[@]}"
          else
            mpiexec -n "$ranks" --oversubscribe --bind-to none -x OMP_NUM_THREADS="$threads" "$bench" --grid "$grid" \
              --model "$model" --dtype "$dtype" --shapes "${B}x$T" --steps "$STEPS" --stretch-positions 1 "${extra[@]}"
          fi
        ) >"$log" 2>&1
        rc=$?
        set -e
        line=$(grep -E "^$model +" "$log" | tail -1 || true)
        if (( rc == 0 )) && [[ -n "$line" ]]; then
          peak=$(sed -n 's/.* = \([0-9.]*\) GFLOP\/s.*/\1/p' "$log" | head -1)
          # the bench's row: model grid B T ms/step tokens/s GFLOP/s MFU loss rankMiB TPw share (1/n) RSS
          echo "$line" | awk -v row="$row" -v peak="$peak" -v ranks="$ranks" \
            '{printf "%s\t%s\t%s\t%s\t%.1f\t%s\tok\n", row, $5, $6, $8, peak / ranks, $14}' | sed 's/\\t/\t/g' >>"$out"
        else
          why="error (exit $rc): $(grep -m1 -iE "error|what\(\)" "$log" | cut -c1-160)"
          grep -qiE "bad_alloc|out of memory|cannot allocate" "$log" && why="out of memory under a limit of $((limit_kib / 1024)) MiB per rank"
          printf "$row\t\t\t\t\t\t%s\n" "$why" >>"$out"
        fi
      done
    done
  done
done
