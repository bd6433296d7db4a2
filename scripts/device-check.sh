#!/usr/bin/env bash
# The GPU check, run from the GPU kit (scripts/device-kit.sh) on a GPU node where nothing can be installed:
# no build, no package; the node needs the NVIDIA driver and CUDA 13's libraries (a toolkit or PyTorch's
# wheels), and python3 with PyTorch for the peer (its rows say "not run" without it). At most 8 minutes.
#
#   bash scripts/device-check.sh --kit KIT --logs DIR [--budget SECONDS] [--quick]
#
#   --kit KIT      the kit: out/gpu-kit/axonn-gpu-kit.tar.xz (unpacked into a new temporary folder) or an
#                  unpacked kit folder (the one holding env.sh)
#   --logs DIR     where every step's log goes (made if absent; each log is named after its step)
#   --budget S     the seconds the check may take in all (default 480); a step that would not fit is
#                  reported "not run (time)"
#   --quick        the tests and one bf16 benchmark only (no mma, fp32, Llama, PyTorch, flash attention or ops
#                  rows)
#
# In order: what the node has (GPU, driver, glibc, where CUDA's libraries were found) and that every kit
# binary loads; the CUDA kernels against the CPU oracle (fp32, bf16); the MPI-staged and NCCL communicators
# (1 and 2 ranks); gpt2-tiny on the GPU against llm.c's losses, one step against the CPU, the Llama oracle;
# 2 and 4 ranks sharing the GPU through the MPI-staged communicator on every grid gpt2-tiny admits (2D and
# 3D ones with 4), against one rank; `axonn train --kernels cuda` as a user runs it (the loss must fall) and
# `axonn generate --kernels cuda` (its greedy ids must equal --kernels cpu's);
# 2 CPU ranks under the kit's mpirun; then GPT-2 124M at B=16, T=1024 in bf16 and fp32 (ms/step, tokens/s,
# MFU against the dense bf16 GEMM peak measured in the same run; bf16 also with the register-resident flash
# attention, AXONN_FLASH_ATTENTION=mma), Llama 3.2 1B in bf16, the PyTorch peer
# (bench/torch_gpt2_step.py, eager and torch.compile) at GPT-2 124M's shape, the flash attention, and the
# memory-bound ops each against its floor (bench_cuda_ops).
# The table comes last. The tests' data is this checkout's tests/reference and tests/golden.
#
# Exit status: 0 every row passed; 1 a row failed (a test, a loader error, a benchmark); 3 no GPU: every
# GPU row was skipped (each test reports itself skipped), which is what a machine without one must show.
set -uo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
start=$(date +%s)
kit_arg="" logs="" budget=480 quick=0
while [ $# -gt 0 ]; do
  case $1 in
    --kit) kit_arg=$2; shift ;;
    --logs) logs=$2; shift ;;
    --budget) budget=$2; shift ;;
    --quick) quick=1 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed '$d; s/^# \{0,1\}//'; exit 0 ;;
    *) echo "device-check: unknown argument '$1' (use --kit KIT --logs DIR [--budget S] [--quick])" >&2; exit 2 ;;
  esac
  shift
done
[ -n "$kit_arg" ] && [ -n "$logs" ] || { echo "device-check: give --kit KIT and --logs DIR (--help)" >&2; exit 2; }
[ -e "$kit_arg" ] || { echo "device-check: --kit $kit_arg: no such file or folder (make it with scripts/device-kit.sh)" >&2; exit 2; }
mkdir -p "$logs" || { echo "device-check: cannot make --logs $logs" >&2; exit 2; }
logs=$(cd "$logs" && pwd)
say() { echo "device-check: $*"; }
kit_root="" work=""
trap 'rm -rf ${kit_root:+"$kit_root"} ${work:+"$work"}' EXIT  # the unpacked kit and the runs' folder
elapsed() { echo $(( $(date +%s) - start )); }

# ---- the kit ---------------------------------------------------------------------------------------------
if [ -f "$kit_arg" ]; then
  if [ -f "$kit_arg.sha256" ]; then  # what device-kit.sh wrote beside it: the transfer changed nothing
    (cd "$(dirname "$kit_arg")" && sha256sum --quiet -c "$(basename "$kit_arg").sha256") ||
      { echo "device-check: $kit_arg does not match its sha256: copy the kit again" >&2; exit 1; }
  fi
  kit_root=$(mktemp -d "${TMPDIR:-/tmp}/axonn-kit.XXXXXX")
  # xz: the node's, else the one device-kit.sh put beside the archive (a minimal image has none), else
  # Python's tarfile
  unxz=$(command -v xz || true)
  [ -z "$unxz" ] && "$(dirname "$kit_arg")/xz" --version >/dev/null 2>&1 && unxz=$(dirname "$kit_arg")/xz
  if [ -n "$unxz" ]; then
    tar -C "$kit_root" --use-compress-program="$unxz" -xf "$kit_arg"
  else
    python3 -c 'import sys, tarfile; tarfile.open(sys.argv[1]).extractall(sys.argv[2])' "$kit_arg" "$kit_root"
  fi || { echo "device-check: cannot unpack $kit_arg (no xz, no python3?)" >&2; exit 1; }
  kit=$kit_root/axonn-gpu-kit
else
  kit=$(cd "$kit_arg" && pwd)
fi
[ -f "$kit/env.sh" ] || { echo "device-check: $kit has no env.sh: not a kit of scripts/device-kit.sh" >&2; exit 1; }
# shellcheck disable=SC1091
source "$kit/env.sh"
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
export AXONN_REFERENCE_DIR=$repo/tests/reference AXONN_GOLDEN_DIR=$repo/tests/golden
export GTEST_COLOR=no  # mpirun gives the ranks a terminal; the logs are parsed
threads=$(nproc)
rows=()   # "name|result|detail"
failed=0
row() { rows+=("$1|$2|$3"); say "$1: $2${3:+ ($3)}"; case $2 in FAIL*) failed=1 ;; esac; }

say "kit $(sed -n 2p "$kit/MANIFEST")"
say "node: $(uname -n), $(nproc) cores, $(ldd --version 2>&1 | head -1)"
gpus=0 gpu_name="none"
if command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1; then
  gpus=$(nvidia-smi -L | grep -c '^GPU')
  gpu_name=$(nvidia-smi --query-gpu=name,driver_version,memory.total,compute_cap --format=csv,noheader | head -1)
fi
say "GPUs: $gpus ($gpu_name)"
say "CUDA libraries:$AXONN_KIT_CUDA_LIBS"
need_glibc=$(sed -nE 's/^needs on the node: GLIBC ([0-9.]+) .*/\1/p' "$kit/MANIFEST")
have_glibc=$(ldd --version 2>&1 | head -1 | grep -oE '[0-9]+\.[0-9]+$')
if [ -n "$need_glibc" ] && [ -n "$have_glibc" ] &&
   [ "$(printf '%s\n%s\n' "$need_glibc" "$have_glibc" | sort -V | head -1)" != "$need_glibc" ]; then
  row "node" "FAIL" "glibc $have_glibc, the kit needs $need_glibc: build the kit on an older system"
fi

# every binary and library of the kit loads (only the driver's libcuda.so.1 may be absent, without a GPU)
axonn_kit_unloadable >"$logs/loader.log"
missing=$(sort -u "$logs/loader.log")
if [ -n "$missing" ]; then
  row "loader" "FAIL" "$(echo "$missing" | awk '{print $2}' | sort -u | paste -sd, -) not found (log loader.log)"
else
  row "loader" "PASS" "$(ls "$kit/bin" | wc -l) binaries, $(find "$kit/lib" "$kit/mpi" -name '*.so*' -type f | wc -l) libraries load"
fi

# run NAME SECONDS CMD...: CMD's output in $logs/NAME.log; sets $rc (124: killed at SECONDS; 125: no time
# left in the budget, not run)
run() {
  local name=$1 secs=$2
  shift 2
  local left=$(( budget - $(elapsed) ))
  if [ "$left" -lt 15 ]; then rc=125; return; fi
  [ "$secs" -gt "$left" ] && secs=$left
  say "run $name (at most $secs s): $*"
  timeout --kill-after=10 "$secs" "$@" >"$logs/$name.log" 2>&1
  rc=$?
}
# gtest NAME SECONDS CMD...: a GoogleTest run as a row: PASS n / SKIP (no GPU) / FAIL
gtest() {
  local name=$1
  run "$@"
  local log=$logs/$name.log passed skipped failed_n
  passed=$(grep -oE '^\[  PASSED  \] [0-9]+' "$log" | tail -1 | grep -oE '[0-9]+$')
  skipped=$(grep -oE '^\[  SKIPPED \] [0-9]+ test' "$log" | tail -1 | grep -oE '[0-9]+')
  failed_n=$(grep -oE '^\[  FAILED  \] [0-9]+ test' "$log" | tail -1 | grep -oE '[0-9]+')
  if [ "$rc" -eq 125 ]; then row "$name" "not run (time)" ""; return; fi
  if [ "$rc" -eq 124 ] || [ "$rc" -eq 137 ]; then row "$name" "FAIL" "timed out (log $name.log)"; return; fi
  if [ "$rc" -ne 0 ] || [ -n "$failed_n" ]; then
    row "$name" "FAIL" "exit $rc, ${failed_n:-0} failed, ${passed:-0} passed (log $name.log: $(grep -m1 -E 'error while loading|Failure|FAILED|what\(\)|Error' "$log" | cut -c1-100))"
  elif [ -z "$passed" ] && [ -z "$skipped" ]; then
    row "$name" "FAIL" "no test ran (log $name.log)"
  elif [ -n "$skipped" ] && [ "$gpus" -eq 0 ]; then
    # without a GPU every GPU test skips itself; the CPU-only cases (parsers, the tuner's host side) still run
    row "$name" "SKIP" "${skipped} skipped${passed:+, $passed CPU-only passed}: $(grep -m1 -oE 'cudaGetDeviceCount[^)]*\)' "$log" | head -1)"
  elif [ -n "$skipped" ]; then
    row "$name" "FAIL" "${skipped} skipped although a GPU is visible, ${passed:-0} passed (log $name.log)"
  else
    row "$name" "PASS" "${passed} passed${skipped:+, $skipped skipped}$(declare -F "extra_$name" >/dev/null && "extra_$name")"
  fi
}
# figures quoted from the tests' logs
extra_gpt() { grep -hoE 'GPU (fp32|bf16|llama [a-z0-9]+)[^:]*: max \|loss - [^|]*\| [^=]*= [0-9.e-]+' "$logs/gpt.log" |
              sed -E 's/ over [0-9]+ steps//; s/, comm [a-z-]+//' | sort -u | sed 's/^/; /' | paste -sd' ' -; }
extra_grid_np2() { worst_grid grid_np2; }
extra_grid_np4() { worst_grid grid_np4; }
worst_grid() {
  awk '/max \|loss - one rank\|/ {n++; v = $NF + 0; d = ($0 ~ /bf16/) ? "bf16" : "fp32"; if (v > w[d]) w[d] = v}
       END {printf "; %d grids x dtypes, max |loss - one rank| fp32 %.2g, bf16 %.2g", n, w["fp32"], w["bf16"]}' "$logs/$1.log"
}

tests_bin=$kit/bin
# mpirun_n N: the kit's mpirun starting N ranks on this node, the cores shared out among them
mpirun_n() { echo mpirun -n "$1" --oversubscribe --bind-to none -x OMP_NUM_THREADS=$(( threads / $1 > 0 ? threads / $1 : 1 )); }
gtest kernels_fp32 150 "$tests_bin/test_cuda_kernels"
# the register-resident flash attention (AXONN_FLASH_ATTENTION=mma: never run on a GPU yet) in a process of its
# own: a fault there ends the CUDA context, and would fail every bf16 test after it
gtest kernels_bf16 150 "$tests_bin/test_cuda_bf16" --gtest_filter='-CudaBf16AttentionMma.*'
gtest kernels_bf16_mma 60 "$tests_bin/test_cuda_bf16" --gtest_filter='CudaBf16AttentionMma.*'
gtest staged_np1 60 $(mpirun_n 1) "$tests_bin/test_cuda_staged"
gtest staged_np2 60 $(mpirun_n 2) "$tests_bin/test_cuda_staged"
gtest nccl_np1 60 $(mpirun_n 1) "$tests_bin/test_cuda_nccl"
[ "$gpus" -ge 2 ] && gtest nccl_np2 60 $(mpirun_n 2) "$tests_bin/test_cuda_nccl"
gtest gpt 200 "$tests_bin/test_cuda_gpt"
gtest grid_np2 150 $(mpirun_n 2) "$tests_bin/test_cuda_gpt_grid" --gtest_filter='Comm/GpuGrid.*/staged'
gtest grid_np4 180 $(mpirun_n 4) "$tests_bin/test_cuda_gpt_grid" --gtest_filter='Comm/GpuGrid.*/staged'

# 2 CPU ranks under the kit's mpirun: MPI itself, on any machine
work=$(mktemp -d "${TMPDIR:-/tmp}/axonn-check.XXXXXX")
cd "$work" || exit 1  # axonn train writes nothing unless asked; any stray file would land here
run cpu_np2 60 $(mpirun_n 2) "$kit/bin/axonn" train --kernels cpu --grid 2,1,1,1 --steps 3 --batch-size 4 --seq-len 32 \
  --peak-gflops 100
if [ "$rc" -eq 0 ] && grep -q 'on 2 ranks' "$logs/cpu_np2.log" && grep -q 'step *3/3' "$logs/cpu_np2.log"; then
  row "cpu_np2" "PASS" "axonn train on 2 CPU ranks (grid 2,1,1,1) under the kit's mpirun"
else
  row "cpu_np2" "FAIL" "exit $rc (log cpu_np2.log)"
fi

# the user's path: axonn train on the GPU, the built-in data, fp32 and bf16; the loss must fall
loss_of() { sed -nE "s#.*step +$2/[0-9]+ [|] loss ([0-9.]+) .*#\\1#p" "$1" | tail -1; }
for dtype in fp32 bf16; do
  if [ "$gpus" -eq 0 ]; then row "train_$dtype" "SKIP" "no GPU"; continue; fi
  run "train_$dtype" 90 "$kit/bin/axonn" train --kernels cuda --dtype $dtype --steps 60 --batch-size 8 --seq-len 64 \
    --lr 1e-2 --warmup-steps 5
  first=$(loss_of "$logs/train_$dtype.log" 1) last=$(loss_of "$logs/train_$dtype.log" 60)
  if [ "$rc" -eq 125 ]; then row "train_$dtype" "not run (time)" ""
  elif [ "$rc" -eq 0 ] && [ -n "$first" ] && [ -n "$last" ] && awk -v a="$first" -v b="$last" 'BEGIN { exit !(b < a - 0.5) }'; then
    row "train_$dtype" "PASS" "axonn train --kernels cuda --dtype $dtype: loss $first -> $last in 60 steps, $(grep -oE 'step +60/60 .*' "$logs/train_$dtype.log" | awk -F'|' '{print $5}' | xargs)"
  else
    row "train_$dtype" "FAIL" "exit $rc, loss ${first:-?} -> ${last:-?} (log train_$dtype.log)"
  fi
done

# the user's path: axonn generate --kernels cuda (one rank) from gpt2-tiny's file: fp32 with 2 samples drawn at
# temperature 1 (the draws are a function of (seed, sample, position), so equal probabilities give equal ids),
# bf16 greedy; the ids must equal --kernels cpu's and the log-probabilities be within the GPU test's bounds
# (GpuGenerate). A log holds a sample's ids, then its log-probabilities, comma-separated lines on standard output,
# among standard error's lines, which start with a word.
ids_of() { grep -E '^-?[0-9]' "$logs/$1.log" | awk 'NR % 2 == 1'; }
logprobs_of() { grep -E '^-?[0-9]' "$logs/$1.log" | awk 'NR % 2 == 0' | tr ',' '\n'; }
for dtype in fp32 bf16; do
  if [ "$gpus" -eq 0 ]; then row "generate_$dtype" "SKIP" "no GPU"; continue; fi
  gen=("$kit/bin/axonn" generate --init "$repo/tests/reference/gpt2-tiny/model.bin" --prompt-ids 11,290,262,110
       --max-new-tokens 48 --print-ids --print-logprobs --dtype "$dtype")
  if [ "$dtype" = fp32 ]; then gen+=(--num-samples 2 --temperature 1 --seed 1); else gen+=(--temperature 0); fi
  run "generate_cpu_$dtype" 60 "${gen[@]}" --kernels cpu
  rc_cpu=$rc
  run "generate_$dtype" 60 "${gen[@]}" --kernels cuda
  bound=$([ "$dtype" = bf16 ] && echo 0.05 || echo 0.001)
  if [ "$rc" -eq 125 ] || [ "$rc_cpu" -eq 125 ]; then row "generate_$dtype" "not run (time)" ""
  elif [ "$rc" -ne 0 ] || [ "$rc_cpu" -ne 0 ]; then
    row "generate_$dtype" "FAIL" "exit $rc (cpu: $rc_cpu) (logs generate_$dtype.log, generate_cpu_$dtype.log)"
  elif [ -z "$(ids_of "generate_$dtype")" ] || ! cmp -s <(ids_of "generate_cpu_$dtype") <(ids_of "generate_$dtype"); then
    row "generate_$dtype" "FAIL" "ids differ from --kernels cpu's (logs generate_$dtype.log, generate_cpu_$dtype.log)"
  else
    worst=$(paste -d' ' <(logprobs_of "generate_cpu_$dtype") <(logprobs_of "generate_$dtype") |
            awk '{d = $1 - $2; if (d < 0) d = -d; if (d > w) w = d} END {printf "%.3g", w}')
    what=$([ "$dtype" = fp32 ] && echo "2 samples of 48 ids drawn at temperature 1" || echo "48 greedy ids")
    if awk -v w="$worst" -v b="$bound" 'BEGIN { exit !(w < b) }'; then
      row "generate_$dtype" "PASS" "axonn generate --kernels cuda --dtype $dtype: $what equal --kernels cpu's, max |logprob - cpu's| = $worst"
    else
      row "generate_$dtype" "FAIL" "max |logprob - cpu's| = $worst, over $bound (logs generate_$dtype.log, generate_cpu_$dtype.log)"
    fi
  fi
done
cd "$repo" || exit 1

# ---- benchmarks (GPU only) -------------------------------------------------------------------------------
peak=""
bench_row() {  # bench_row NAME MODEL B T DTYPE STEPS SECONDS [VAR=VALUE]: bench_gpt2_step as a row
  local name=$1 model=$2 B=$3 T=$4 dtype=$5 steps=$6 secs=$7 line
  local setting=(${8:-})  # an environment setting for this run only
  if [ "$gpus" -eq 0 ]; then row "$name" "SKIP" "no GPU"; return; fi
  run "$name" "$secs" env "${setting[@]}" "$kit/bin/bench_gpt2_step" --kernels cuda --comm mpi --dtype "$dtype" --model "$model" \
    --shapes "${B}x${T}" --steps "$steps"
  if [ "$rc" -eq 125 ]; then row "$name" "not run (time)" ""; return; fi
  [ -z "$peak" ] && peak=$(sed -nE 's/^# peak: .* = ([0-9.]+) TFLOP\/s.*/\1/p' "$logs/$name.log" | head -1)
  # columns: model grid B T ms/step tokens/s GFLOP/s MFU ...
  line=$(awk -v m="$model" '$1 == m {printf "%.1f ms/step, %.0f tokens/s, %.1f TFLOP/s, MFU %.1f%%", $5, $6, $7 / 1000, 100 * $8}' \
         "$logs/$name.log" | tail -1)
  if [ "$rc" -ne 0 ] || [ -z "$line" ]; then
    row "$name" "FAIL" "exit $rc (log $name.log: $(grep -m1 -iE 'error|what\(\)' "$logs/$name.log" | cut -c1-120))"
  else
    row "$name" "PASS" "$model B=$B T=$T $dtype${8:+ ($8)}: $line"
  fi
}
bench_row bench_124m_bf16 gpt2-124m 16 1024 bf16 10 100
if [ "$quick" -eq 0 ]; then
  # the same step with the register-resident tensor-core flash attention (not the default until measured)
  bench_row bench_124m_bf16_mma gpt2-124m 16 1024 bf16 10 100 AXONN_FLASH_ATTENTION=mma
  # the peer on the same GPU: PyTorch, eager and torch.compile, at the same shape (its own Python and
  # libraries: not the kit's)
  torch_ok=0
  if [ "$gpus" -gt 0 ] && PATH=$AXONN_KIT_ORIG_PATH python3 -c 'import torch' >/dev/null 2>&1; then torch_ok=1; fi
  if [ "$torch_ok" -eq 1 ]; then
    run torch_124m_bf16 200 env PATH="$AXONN_KIT_ORIG_PATH" LD_LIBRARY_PATH="$AXONN_KIT_ORIG_LD_LIBRARY_PATH" \
      python3 "$repo/bench/torch_gpt2_step.py" --device cuda --model gpt2-124m --batch 16 --seq 1024 --dtype bf16 \
      --steps 10 --compile ${peak:+--peak-tflops $peak}
    for mode in eager compile; do
      line=$(grep -E "^torch $mode " "$logs/torch_124m_bf16.log" | sed -E 's/^torch [a-z]+ //; s/; torch .*//')
      if [ "$rc" -eq 125 ]; then row "torch_$mode" "not run (time)" ""
      elif [ -n "$line" ]; then row "torch_$mode" "PASS" "$line"
      else row "torch_$mode" "FAIL" "exit $rc (log torch_124m_bf16.log: $(grep -m1 -iE 'error' "$logs/torch_124m_bf16.log" | cut -c1-100))"
      fi
    done
  else
    row "torch_eager" "SKIP" "$([ "$gpus" -eq 0 ] && echo "no GPU" || echo "no python3 with PyTorch on this node")"
  fi
  bench_row bench_124m_fp32 gpt2-124m 16 1024 fp32 5 100
  bench_row bench_llama1b_bf16 llama-3.2-1b 8 2048 bf16 5 150
  if [ "$gpus" -gt 0 ]; then
    run flash 60 "$kit/bin/bench_flash_attention" 16 1024 12 64 20
    if [ "$rc" -eq 0 ]; then
      row "flash" "PASS" "$(grep 'fwd+bwd' "$logs/flash.log" | sed -E 's/^ +//; s/ +/ /g' | paste -sd';' - | sed 's/;/; /g')"
    elif [ "$rc" -eq 125 ]; then row "flash" "not run (time)" ""
    else row "flash" "FAIL" "exit $rc (log flash.log)"
    fi
    # where the time goes: the bf16 step with each region timed on the device (--profile 1 waits for the GPU at
    # both ends of every region, so this step is slower than bench_124m_bf16's): the table in profile.log, its
    # six largest ops here (the regions that sum others left out: forward, backward, block ..., a layer's, optimizer)
    run profile 90 "$kit/bin/bench_gpt2_step" --kernels cuda --comm mpi --dtype bf16 --model gpt2-124m \
      --shapes 16x1024 --steps 3 --profile 1
    if [ "$rc" -eq 0 ]; then
      row "profile" "PASS" "$(sed -nE 's/^  (.*[^ ]) +([0-9.]+) ms +([0-9.]+)% +[0-9]+ calls$/\1|\2|\3/p' "$logs/profile.log" |
        grep -vE '^(forward|backward|block forward|block backward|optimizer|[a-z]+_ (forward|backward))\|' | head -6 |
        awk -F'|' '{printf "%s%s %s ms (%s%%)", (NR > 1 ? "; " : ""), $1, $2, $3}')"
    elif [ "$rc" -eq 125 ]; then row "profile" "not run (time)" ""
    else row "profile" "FAIL" "exit $rc (log profile.log)"
    fi
    # the memory-bound ops, each against its floor at the copy bandwidth: the table in ops.log, its summary here
    run ops 60 "$kit/bin/bench_cuda_ops" --dtype bf16
    if [ "$rc" -eq 0 ]; then row "ops" "PASS" "$(sed -n 's/^summary: //p' "$logs/ops.log")"
    elif [ "$rc" -eq 125 ]; then row "ops" "not run (time)" ""
    else row "ops" "FAIL" "exit $rc (log ops.log)"
    fi
  fi
fi

# ---- the table -------------------------------------------------------------------------------------------
tok() { sed -nE 's/.* ([0-9]+) tokens\/s.*/\1/p' <<<"$1"; }
detail_of() { local r; for r in "${rows[@]}"; do [ "${r%%|*}" = "$1" ] && { r=${r#*|}; echo "${r#*|}"; return; }; done; }
axonn_tok=$(tok "$(detail_of bench_124m_bf16)") mma_tok=$(tok "$(detail_of bench_124m_bf16_mma)")
ratio() { awk -v a="$1" -v b="$2" 'BEGIN {printf "%.2f", a / b}'; }
ratios=""
for mode in eager compile; do
  t=$(tok "$(detail_of torch_$mode)")
  [ -n "$axonn_tok" ] && [ -n "$t" ] && ratios="$ratios axonn/torch-$mode $(ratio "$axonn_tok" "$t")x;"
  [ -n "$mma_tok" ] && [ -n "$t" ] && ratios="$ratios axonn(mma attention)/torch-$mode $(ratio "$mma_tok" "$t")x;"
done
echo
echo "==================== device-check ($(elapsed) s; logs in $logs) ===================="
echo "GPU: ${gpu_name}; peak (dense bf16 GEMM 8192^3, measured in this run): ${peak:-n/a} TFLOP/s"
[ -n "$ratios" ] && echo "GPT-2 124M bf16 B=16 T=1024 tokens/s:$ratios"
printf '%-20s %-15s %s\n' "check" "result" "detail"
for r in "${rows[@]}"; do
  name=${r%%|*} rest=${r#*|}
  printf '%-20s %-15s %s\n' "$name" "${rest%%|*}" "${rest#*|}"
done
if [ "$failed" -ne 0 ]; then echo "RESULT: FAIL"; exit 1; fi
if [ "$gpus" -eq 0 ]; then echo "RESULT: NO GPU (every GPU check skipped, nothing failed)"; exit 3; fi
echo "RESULT: PASS"
