#!/usr/bin/env bash
# The sanitizer and fuzzing check (docs/resilience.md, "Sanitizers and fuzzing"): a clang build with
# AddressSanitizer, LeakSanitizer and UndefinedBehaviorSanitizer (--preset cpu-asan: build-asan/,
# -fno-sanitize-recover=undefined, every library instrumented for libFuzzer's coverage), then
#   1. unit tests (the parsers', the emulated CUDA kernels') and a few MPI tests (a 2-rank grid of the
#      reference model, sharded checkpoints and resume) under it (--all-tests: every unit test, 4-rank grids);
#   2. every libFuzzer harness of tests/fuzz on its seed corpus, then fuzzing for a bounded time each.
# Any sanitizer report, crash, leak, uncaught exception, timeout or failed test fails the check; a
# fuzzer's finding is left in build-asan/fuzz/artifacts/ (add it to tests/fuzz/corpus/<target>/ with
# the fix). Prints each step's time.
#
#   bash scripts/sanitize-check.sh [--fuzz-seconds N] [--no-fuzz] [--no-tests] [--all-tests]
#
# Needs clang-16 and its runtimes (scripts/install-deps.sh installs them). Uses ccache when installed.
set -euo pipefail
cd "$(dirname "$0")/.."
repo=$(pwd)
fuzz_seconds=20 run_fuzz=1 run_tests=1 all_tests=0
while [ $# -gt 0 ]; do
  case $1 in
    --fuzz-seconds) fuzz_seconds=$2; shift ;;
    --no-fuzz) run_fuzz=0 ;;
    --no-tests) run_tests=0 ;;
    --all-tests) all_tests=1 ;;
    *) echo "sanitize-check: unknown argument '$1' (use --fuzz-seconds N, --no-fuzz, --no-tests, --all-tests)" >&2; exit 2 ;;
  esac
  shift
done
build=$repo/build-asan
jobs=${AXONN_SANITIZE_JOBS:-$(nproc)}
start=$(date +%s)
step_start=$start
step() {  # step NAME: ends the previous step (printing its time) and names the next
  local now
  now=$(date +%s)
  [ -z "${step_name:-}" ] || echo "sanitize-check: step '$step_name' took $(( now - step_start )) s"
  step_name=$1 step_start=$now
  [ -z "$step_name" ] || echo "sanitize-check: === $step_name"
}

# The sanitizers' settings for every process below (mpirun passes them on to the ranks). LSan
# suppresses only Open MPI's own allocations held until exit (tests/sanitize/lsan.supp).
export ASAN_OPTIONS="detect_leaks=1:halt_on_error=1:abort_on_error=0:strict_string_checks=1:check_initialization_order=1:detect_stack_use_after_return=1:allocator_may_return_null=0"
export LSAN_OPTIONS="suppressions=$repo/tests/sanitize/lsan.supp:print_suppressions=0"
export UBSAN_OPTIONS="print_stacktrace=1:halt_on_error=1"
# a finding's stack with files and lines: clang 16's runtime looks for llvm-symbolizer on the PATH, which Debian
# names by version (any version reads the DWARF of these builds)
for symbolizer in llvm-symbolizer-16 llvm-symbolizer llvm-symbolizer-14; do
  if command -v "$symbolizer" >/dev/null; then
    export ASAN_SYMBOLIZER_PATH UBSAN_SYMBOLIZER_PATH
    ASAN_SYMBOLIZER_PATH=$(command -v "$symbolizer") UBSAN_SYMBOLIZER_PATH=$(command -v "$symbolizer")
    break
  fi
done
export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
export OMP_NUM_THREADS=${OMP_NUM_THREADS:-1}

# The tests run here: by default the parsers' unit tests (checkpoint, data, text) and the reference model
# on a 2-rank grid and sharded checkpoints with resume on 2 ranks, which fit the phase's time budget;
# with --all-tests every unit test (labels unit, planner) and 4-rank grids and the guard as well.
# the parsers' tests, and the CUDA kernels run by the SIMT emulator: ASan and UBSan check their indexing of host
# memory (a read past a buffer's end or an overflowing index is a fault or garbage on the GPU too)
unit_targets=(test_checkpoint test_data test_text test_cuda_emu)
mpi_targets=(test_mpi_gpt_grid test_mpi_checkpoint)
mpi_tests='^mpi\.(gpt_grid|checkpoint)\.np2$'
if [ "$all_tests" -eq 1 ]; then
  unit_targets+=(test_unit_comm test_eval test_infer test_kernels test_kernels_bf16 test_model test_optim
                 test_planner test_report test_train)
  mpi_targets+=(test_mpi_train_guard)
  mpi_tests='^mpi\.(gpt_grid\.np(2|4)|checkpoint\.np(2|4)|train_guard\.np2)$'
fi

step "configure (clang, address;undefined, libFuzzer coverage)"
launcher=()
if command -v ccache >/dev/null; then
  launcher=(-DCMAKE_C_COMPILER_LAUNCHER=ccache -DCMAKE_CXX_COMPILER_LAUNCHER=ccache)
fi
cmake --preset cpu-asan "${launcher[@]}" >"$build.configure.log" 2>&1 || { cat "$build.configure.log"; exit 1; }
rm -f "$build.configure.log"

step "build (${jobs} jobs)"
targets=(axonn_fuzzers)
[ "$run_tests" -eq 0 ] || targets+=("${unit_targets[@]}" "${mpi_targets[@]}")
# without LeakSanitizer while building: gtest_discover_tests runs each test binary to list its tests, and a
# binary whose main starts MPI (test_model, test_train) then reports Open MPI's allocations, which only the
# preload below lets lsan.supp recognise; the listing failed, and the build with it (--all-tests)
ASAN_OPTIONS="$ASAN_OPTIONS:detect_leaks=0" cmake --build "$build" -j "$jobs" --target "${targets[@]}" \
  >"$build/build.log" 2>&1 ||
  { grep -E "error|Error" "$build/build.log" | head -40; tail -20 "$build/build.log"; exit 1; }

failed=0
if [ "$run_tests" -eq 1 ]; then
  step "unit tests and MPI tests under the sanitizers"
  # The processes that initialise MPI (the MPI tests, and the unit tests whose main does: test_model,
  # test_train through tests/common/test_main_mpi.cpp) run with LeakSanitizer too, with two changes: a
  # dlclose that unloads nothing (tests/sanitize/keep_loaded.c, preloaded; mpiexec's ranks inherit it),
  # so that Open MPI's components are still mapped when LSan looks at exit and their allocations are
  # attributed to Open MPI's libraries, which lsan.supp names; and the full unwinder for allocation
  # stacks (8 frames), since Open MPI's libraries have no frame pointers and the fast unwinder stops in
  # them. Open MPI's own allocations are then suppressed and ours are not (a leak of 400 bytes in an
  # MPI program is reported, each rank, and nothing else).
  keep_loaded=$build/libkeep_loaded.so
  clang-16 -shared -fPIC -O2 -o "$keep_loaded" tests/sanitize/keep_loaded.c
  mpi_env=(env LD_PRELOAD="$keep_loaded" ASAN_OPTIONS="$ASAN_OPTIONS:fast_unwind_on_malloc=0:malloc_context_size=8")
  # The check of that check: an MPI program that loses 400 bytes on each rank (tests/sanitize/mpi_leak.cpp)
  # must be reported, that leak on both ranks and no other.
  leak_log=$build/mpi_leak.log
  # shellcheck disable=SC2046  # the MPI wrapper's flags are words
  clang++-16 -fsanitize=address -g -O1 $(mpicxx --showme:compile) tests/sanitize/mpi_leak.cpp -o "$build/mpi_leak" \
    $(mpicxx --showme:link)
  if "${mpi_env[@]}" mpiexec -n 2 "$build/mpi_leak" >"$leak_log" 2>&1; then
    echo "sanitize-check: FAIL: a leak in an MPI program went unreported (log $leak_log)"
    failed=1
  elif [ "$(grep -c 'Direct leak of 400 byte' "$leak_log")" -ne 2 ] ||
       [ "$(grep -c -E '(Direct|Indirect) leak' "$leak_log")" -ne 2 ]; then
    echo "sanitize-check: FAIL: LSan in MPI processes reported other than the planted leak (log $leak_log):"
    grep -E '(Direct|Indirect) leak' "$leak_log"
    failed=1
  else
    echo "sanitize-check: LSan in MPI processes: the planted leak reported on both ranks, nothing of Open MPI's"
  fi
  mpi_main_suites=NONE
  [ "$all_tests" -eq 0 ] ||
  mpi_main_suites=$(for exe in "$build/tests/unit/model/test_model" "$build/tests/unit/train/test_train"; do
                      { ASAN_OPTIONS=detect_leaks=0 "$exe" --gtest_list_tests 2>/dev/null || true; } |
                        sed -nE 's/^([A-Za-z0-9_/]+)\..*/\1/p'; done | sort -u | paste -sd'|')
  # only the executables built (ctest reports the others' entries as not found)
  built=$(for t in "${unit_targets[@]}"; do printf '%s\n' "$build"/tests/unit/*/"$t"; done)
  # the suites of the executables built (a parametrized one is Instance/Suite); ctest names them so, after the
  # prefix of the executables that have one (planner., cuda_emu.)
  unit_regex=$(for exe in $built; do
                 { ASAN_OPTIONS=detect_leaks=0 "$exe" --gtest_list_tests 2>/dev/null || true; } |
                   sed -nE 's/^([A-Za-z0-9_/]+)\..*/\1/p'; done | sort -u | paste -sd'|')
  ctest --test-dir "$build" -j "$jobs" --output-on-failure --timeout 600 -L '^(unit|planner)$' -LE '^cli$' \
    -R "^(planner\.|cuda_emu\.)?($unit_regex)\." -E "^($mpi_main_suites)\." || failed=1
  if [ "$all_tests" -eq 1 ]; then
    "${mpi_env[@]}" ctest --test-dir "$build" -j "$jobs" --output-on-failure --timeout 600 \
      -R "^($mpi_main_suites)\." || failed=1
  fi
  "${mpi_env[@]}" ctest --test-dir "$build" --output-on-failure --timeout 600 -R "$mpi_tests" || failed=1
fi

if [ "$run_fuzz" -eq 1 ]; then
  step "fuzzers: seed corpora, then ${fuzz_seconds} s each"
  ctest --test-dir "$build" -j "$jobs" --output-on-failure -L '^fuzz$' || failed=1
  read -r -a names <"$build/tests/fuzz/fuzz_targets.txt"
  names=(${names[0]//;/ })
  mkdir -p "$build/fuzz/artifacts"
  fuzz_one() {  # fuzz_one NAME: the fuzzer on a scratch copy of its corpus (the seeds stay as committed)
    local name=$1 work=$build/fuzz/work/$1 log=$build/fuzz/$1.log
    rm -rf "$work"; mkdir -p "$work"
    if "$build/tests/fuzz/fuzz_$name" -max_total_time="$fuzz_seconds" -timeout=10 -rss_limit_mb=2048 \
         -malloc_limit_mb=2048 -print_final_stats=1 -artifact_prefix="$build/fuzz/artifacts/$name-" \
         "$work" "$repo/tests/fuzz/corpus/$name" >"$log" 2>&1; then
      echo "sanitize-check: fuzz_$name: $(grep -m1 -oE 'stat::number_of_executed_units: *[0-9]+' "$log" | grep -oE '[0-9]+$') runs, no finding"
    else
      echo "sanitize-check: fuzz_$name FOUND A PROBLEM ($log):"
      grep -E "ERROR|SUMMARY|runtime error|Test unit written|deadly|uncaught|terminate" "$log" | head -20
      return 1
    fi
  }
  # two at a time (each fuzzer is one process)
  pids=()
  for name in "${names[@]}"; do
    fuzz_one "$name" &
    pids+=($!)
    if [ "${#pids[@]}" -ge "$jobs" ]; then
      wait "${pids[0]}" || failed=1
      pids=("${pids[@]:1}")
    fi
  done
  for p in "${pids[@]}"; do wait "$p" || failed=1; done
fi
step ""
echo "sanitize-check: $([ "$failed" -eq 0 ] && echo passed || echo FAILED) in $(( $(date +%s) - start )) s"
exit "$failed"
