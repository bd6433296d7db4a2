#!/usr/bin/env bash
# GPU check, for a machine with an NVIDIA GPU (GPU time is scarce: one prepared script, < 5 minutes).
# Configures a Release build with -DAXONN_CUDA=ON for the visible GPU's architecture, builds the GPU
# tests, runs every test labelled "gpu" (CUDA kernels vs kernels::ref; NCCL and MPI-staged
# communicators under mpiexec; GPT-2 on gpt2-tiny in fp32 and bf16 against llm.c's losses, one step
# against the CPU, 4D grids of 2 ranks against one rank; the Llama kernels (RMSNorm, RoPE, SwiGLU, KV
# repetition) against ref, a Llama's step against the CPU, the PyTorch oracle's Llama trajectory in fp32
# and bf16), then the GPT-2 124M benchmark at B=16, T=1024 in bf16 (next to a Llama of the same size,
# llama-124m) and fp32 (tokens/s, MFU against the dense bf16 GEMM peak measured in the same run)
# and the flash attention benchmark, prints a summary, and exits non-zero if
# anything failed, or if a test that this machine can run was skipped (e.g. a driver older than the
# toolkit). The llm.c reference is tests/reference (or $AXONN_REFERENCE_DIR).
#
#   bash scripts/gpu-check.sh [build-dir]        (default build-gpu)
set -uo pipefail
cd "$(dirname "$0")/.."
start=$(date +%s)
build=${1:-build-gpu}
log() { echo "gpu-check: $*"; }
elapsed() { echo $(( $(date +%s) - start )); }
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1

nvcc_bin=$(command -v nvcc || true)
[ -z "$nvcc_bin" ] && [ -x /usr/local/cuda/bin/nvcc ] && nvcc_bin=/usr/local/cuda/bin/nvcc
if [ -z "$nvcc_bin" ]; then log "FAIL: no nvcc (CUDA toolkit) on this machine"; exit 2; fi
export CUDACXX="$nvcc_bin"
log "toolkit: $("$nvcc_bin" --version | tail -1)"

gpus=0
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L | grep -c '^GPU')
  nvidia-smi --query-gpu=index,name,driver_version,memory.total,compute_cap --format=csv,noheader |
    sed 's/^/gpu-check: device /'
fi
if [ "$gpus" -gt 0 ]; then arch=native; else arch="80;90"; log "WARNING: no GPU visible; tests will skip"; fi

# The CPU dependencies (MPI, BLAS, oneDNN, GoogleTest, ...) must be there; install them if not.
if ! command -v mpiexec >/dev/null 2>&1 || ! command -v cmake >/dev/null 2>&1; then
  log "installing the build dependencies (scripts/install-deps.sh)"
  bash scripts/install-deps.sh || { log "FAIL: could not install the dependencies"; exit 2; }
fi

jobs=$(nproc)
log "configure $build (Release, CUDA architectures $arch)"
mkdir -p "$build"
logs="$build/gpu-check"
ref_flag=()
[ -n "${AXONN_REFERENCE_DIR:-}" ] && ref_flag=(-DAXONN_REFERENCE_DIR="$AXONN_REFERENCE_DIR")
if ! cmake -S . -B "$build" -DCMAKE_BUILD_TYPE=Release -DAXONN_CUDA=ON -DCMAKE_CUDA_ARCHITECTURES="$arch" -DAXONN_BUILD_TOOLS=ON \
     -DAXONN_BUILD_BENCH=ON "${ref_flag[@]}" \
     >"$logs.configure.log" 2>&1; then
  tail -30 "$logs.configure.log"; log "FAIL: configure (log: $logs.configure.log)"; exit 1
fi
log "build the GPU tests and bench_gpt2_step (and what they link; not the tool or CPU tests) with $jobs jobs"
targets="test_cuda_kernels test_cuda_staged test_cuda_gpt test_cuda_gpt_grid bench_gpt2_step"
grep -q "AXONN_NCCL:BOOL=ON" "$build/CMakeCache.txt" && targets="$targets test_cuda_nccl"
targets="$targets test_cuda_bf16 bench_flash_attention"  # bf16 kernels and the flash attention benchmark
if ! timeout 260 cmake --build "$build" -j "$jobs" --target $targets >"$logs.build.log" 2>&1; then
  grep -E "error|Error" "$logs.build.log" | head -30; log "FAIL: build (log: $logs.build.log)"; exit 1
fi
log "built in $(elapsed) s; running the gpu tests"

# -V: the tests print their measured differences (kept in the log, quoted in the summary)
ctest --test-dir "$build" -L gpu -V --timeout 300 >"$logs.ctest.log" 2>&1
rc=$?
grep -E "tests passed|Passed|\*\*\*Failed|\*\*\*Skipped|Timeout|Exception" "$logs.ctest.log" | sed -E 's/  # GetParam\(\) = [^.(]*/ /' | tail -40
skipped=$(grep -E '^\s+[0-9]+ - .*\(Skipped\)' "$logs.ctest.log" | sed -E 's/  # GetParam\(\) = [^.(]*/ /' || true)
bad_skips=""
if [ "$gpus" -gt 0 ] && [ -n "$skipped" ]; then
  # With a GPU only the 2-rank NCCL tests may skip (one GPU: NCCL needs a device per rank).
  bad_skips=$(echo "$skipped" | grep -v -E 'gpu.nccl.np2|gpu.gpt_grid.nccl.np2' || true)
  [ "$gpus" -ge 2 ] && bad_skips="$skipped"
fi

# The GPT-2 124M benchmark on one GPU: B=16, T=1024, a warm-up and 3 timed steps; bf16 mixed precision
# first (the MFU target, >= 40% on an H100/H200), then fp32 while time is left.
bench_lines=""
bench_failed=0
peak_line=""
for dtype in bf16 fp32; do
  if [ "$gpus" -eq 0 ]; then break; fi
  if [ $(( $(date +%s) - start )) -ge 240 ]; then
    bench_lines="$bench_lines
                  $dtype: not run (no time left under 5 minutes)"
    continue
  fi
  models=gpt2-124m
  [ "$dtype" = bf16 ] && models=gpt2-124m,llama-124m  # the Llama of GPT-2 124M's size, in the same run
  log "benchmark: $models, B=16, T=1024, --kernels cuda --dtype $dtype"
  timeout 150 "$build/bin/bench_gpt2_step" --kernels cuda --comm mpi --dtype $dtype --model $models --shapes 16x1024 \
    --steps 3 >"$logs.bench-$dtype.log" 2>&1
  bench_rc=$?
  cat "$logs.bench-$dtype.log"
  # columns: model grid B T ms/step tokens/s GFLOP/s MFU ...
  line=$(awk '$1 ~ /^(gpt2|llama)-124m$/ {printf "%s%s %s ms/step, %s tokens/s, %.1f TFLOP/s, MFU %.1f%%", sep, $1, $5, $6, $7 / 1000, 100 * $8; sep = "; "}' \
         "$logs.bench-$dtype.log")
  [ -z "$peak_line" ] && peak_line=$(grep '^# peak' "$logs.bench-$dtype.log" | sed 's/^# //')
  if [ $bench_rc -ne 0 ]; then line="FAILED (exit $bench_rc; log $logs.bench-$dtype.log)"; bench_failed=1; fi
  bench_lines="$bench_lines
                  $dtype: $line"
done

# ---- bf16 flash attention benchmark, tensor cores and CUDA cores (GPT-2 124M shape: B=16 T=1024 NH=12 HS=64; about 15 s) ----
flash_summary="not run (no GPU)"
if [ "$gpus" -gt 0 ]; then
  log "benchmark: bf16 flash attention forward + backward"
  if timeout 120 "$build/bin/bench_flash_attention" 16 1024 12 64 20 >"$logs.flash.log" 2>&1; then
    # one "fwd+bwd" line per implementation (tensor cores, CUDA cores), the default marked "(default)"
    flash_summary=$(grep "fwd+bwd" "$logs.flash.log" | sed -E 's/^ +//; s/ +/ /g' | paste -sd ';' - | sed 's/;/; /g')
  else
    flash_summary="FAILED (log: $logs.flash.log)"
    rc=1
  fi
  cat "$logs.flash.log"
fi
# ---- end of the flash attention block ----

echo "==================== gpu-check summary ===================="
echo "devices visible : $gpus"
grep -E "tests passed|tests failed" "$logs.ctest.log" | tail -1
[ -n "$skipped" ] && { echo "skipped:"; echo "$skipped"; }
echo "flash attention : $flash_summary"
grep -E "max \|loss - (llm.c|one rank|pytorch)[^|]*\|" "$logs.ctest.log" | sed 's/^[0-9]*: //' | sort -u | sed 's/^/                  /'
[ -n "$bench_lines" ] && { echo "bench 124M      : B=16 T=1024 (target: bf16 MFU >= 40%)$bench_lines"; echo "                  ${peak_line:-}"; }
echo "time            : $(elapsed) s (logs: $logs.{configure,build,ctest}.log)"
if [ $rc -ne 0 ]; then echo "RESULT: FAIL (ctest exit $rc)"; exit 1; fi
if [ -n "$bad_skips" ]; then echo "RESULT: FAIL (tests skipped although a GPU is visible)"; exit 1; fi
if [ $bench_failed -ne 0 ]; then echo "RESULT: FAIL (benchmark)"; exit 1; fi
if [ "$gpus" -eq 0 ]; then echo "RESULT: NOT RUN (no GPU visible; everything skipped)"; exit 3; fi
echo "RESULT: PASS"
