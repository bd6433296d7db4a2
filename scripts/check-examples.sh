#!/usr/bin/env bash
# Builds every program in examples/ against the INSTALLED axonn package, as a user would, runs each
# (under mpiexec where it needs ranks) and checks what it prints.
#
#   bash scripts/check-examples.sh [--build-dir DIR | --installed PREFIX] [--each-header] [--work DIR]
#
#   --build-dir DIR    install that build (default: build/) into a new prefix under the work folder
#                      (`cmake --install DIR --prefix ...`), then use it
#   --installed PREFIX use what is already installed there (e.g. /usr, after `dpkg -i` of the package)
#   --each-header      compile every installed header as a translation unit of its own (it includes what
#                      it uses; about a minute on 2 cores), not only all of them together (seconds)
#   --work DIR         where the prefix and the examples' builds go (default: a new temporary folder,
#                      removed at the end)
#
# Each example is its own CMake project (examples/<name>/CMakeLists.txt: `find_package(axonn REQUIRED)`);
# it sees only the installed headers, libraries and CMake package, never the source tree. Exits non-zero,
# naming the example and showing its output, on the first failure.
set -euo pipefail
repo=$(cd "$(dirname "$0")/.." && pwd)
build_dir=$repo/build prefix= work= each_header=0
while [ $# -gt 0 ]; do
  case $1 in
    --build-dir) build_dir=$2; shift ;;
    --installed) prefix=$2; shift ;;
    --each-header) each_header=1 ;;
    --work) work=$2; shift ;;
    *) echo "check-examples: unknown argument '$1' (use --build-dir DIR, --installed PREFIX, --each-header, --work DIR)" >&2
       exit 2 ;;
  esac
  shift
done
if [ -z "$work" ]; then
  work=$(mktemp -d)
  trap 'rm -rf "$work"' EXIT
fi
mkdir -p "$work"
mpiexec=$(command -v mpiexec || true)
[ -n "$mpiexec" ] || { echo "check-examples: mpiexec not found (apt-get install openmpi-bin)" >&2; exit 1; }
mpi_flags=()
# Open MPI (4.1 names itself OpenRTE) needs --oversubscribe above the core count; MPICH does not take it
case $("$mpiexec" --version 2>&1 || true) in
  *"Open MPI"* | *OpenRTE* | *open-mpi*) mpi_flags=(--oversubscribe) ;;
esac

fail() {
  echo "check-examples: FAIL: $*" >&2
  [ ! -s "$work/out" ] || { echo "--- output:" >&2; cat "$work/out" >&2; }
  exit 1
}
# run CMD...: CMD must exit 0; its output (stdout and stderr) is kept in $work/out and shown
run() {
  local rc=0
  timeout 300 "$@" >"$work/out" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || fail "exit code $rc for: $*"
  sed 's/^/  | /' "$work/out"
}
expect() {  # expect REGEX: the last command's output matches
  grep -Eq -- "$1" "$work/out" || fail "the output lacks /$1/"
}

if [ -z "$prefix" ]; then
  prefix=$work/prefix
  echo "check-examples: installing $build_dir into $prefix"
  cmake --install "$build_dir" --prefix "$prefix" >"$work/out" 2>&1 || fail "cmake --install $build_dir"
fi
[ -n "$(find "$prefix" -path '*/cmake/axonn/axonnConfig.cmake' -print -quit 2>/dev/null)" ] ||
  fail "no axonnConfig.cmake under $prefix"

# the installed headers compile with the prefix's include folder alone (nothing of the source tree):
# all of them in one translation unit, and with --each-header every one as a translation unit of its own
headers=$(cd "$prefix/include" && find axonn -name '*.hpp' | sort)
[ -n "$headers" ] || fail "no headers under $prefix/include/axonn"
echo "check-examples: compiling the $(echo "$headers" | wc -l) installed headers"
echo "$headers" | sed 's/.*/#include "&"/' |
  ${CXX:-c++} -std=c++20 -fsyntax-only -x c++ -I "$prefix/include" - >"$work/out" 2>&1 ||
  fail "the installed headers do not compile together"
if [ "$each_header" -eq 1 ]; then
  # compile_header HEADER: the header as the whole of a translation unit (xargs runs two at a time)
  compile_header() {
    echo "#include \"$1\"" | ${CXX:-c++} -std=c++20 -fsyntax-only -x c++ -I "$prefix/include" - 2>&1 ||
      { echo "check-examples: FAIL: the installed header $1 does not compile on its own (above)"; return 255; }
  }
  export -f compile_header
  export prefix
  : >"$work/out"
  echo "$headers" | xargs -P 2 -n 1 bash -c 'compile_header "$1"' _ >&2 || fail "an installed header (above)"
fi

# configure and build examples/NAME against the package in $prefix
build_example() {
  local name=$1
  echo "check-examples: === $name"
  cmake -S "$repo/examples/$name" -B "$work/examples/$name" -DCMAKE_BUILD_TYPE=Release \
    -DCMAKE_PREFIX_PATH="$prefix" -DCMAKE_FIND_PACKAGE_NO_PACKAGE_REGISTRY=ON >"$work/out" 2>&1 ||
    fail "configuring examples/$name against $prefix"
  cmake --build "$work/examples/$name" -j 2 >"$work/out" 2>&1 || fail "building examples/$name"
  # it found the installed package, not a build tree
  grep -q "^axonn_DIR:PATH=$prefix" "$work/examples/$name/CMakeCache.txt" ||
    fail "examples/$name found axonn at $(grep '^axonn_DIR' "$work/examples/$name/CMakeCache.txt"), not under $prefix"
}
bin() { echo "$work/examples/$1/$2"; }

build_example plan
run "$(bin plan plan_grids)" gpt2-1558m 64 512 perlmutter
expect '^gpt2-1558m on 64 GPUs of perlmutter, batch 512 sequences of 2048 tokens: [0-9]+ grids tried'
expect '^  1\. \(Gx,Gy,Gz,Gdata\)='
expect '^best: \(Gx,Gy,Gz,Gdata\)=\([0-9]+,[0-9]+,[0-9]+,[0-9]+\), [0-9.]+ s per step'
# the same words give axonn plan's numbers (one default sequence length): its best grid and step time
plan_best=$("$prefix/bin/axonn" plan --model gpt2-1558m --gpus 64 --batch-size 512 --machine perlmutter --top 1 |
  sed -n 's/^   1 *\([0-9]*\) *\([0-9]*\) *\([0-9]*\) *\([0-9]*\) | *\([0-9.]*\) .*/(\1,\2,\3,\4), \5 s/p')
[ -n "$plan_best" ] && grep -qF "best: (Gx,Gy,Gz,Gdata)=$plan_best per step" "$work/out" ||
  fail "plan_grids' best is not axonn plan's ($plan_best) for the same model, GPUs, batch and machine"

# the ranks share this machine's cores: one thread each
export OMP_NUM_THREADS=1
build_example tp_linear
for grid in 1,1,1,1:1 2,2,1,1:4 2,1,2,1:4 1,2,1,2:4; do
  run "$mpiexec" -n "${grid#*:}" "${mpi_flags[@]}" "$(bin tp_linear tp_linear)" "${grid%:*}"
  expect "^grid [0-9x]+: y, dx, dW1, dW2, db1, db2 match one rank's matmuls"
done

build_example train_gpt
# final_loss: the last run's loss after training ("loss A -> B: trained")
final_loss() { sed -nE 's/^loss [0-9.]+ -> ([0-9.]+): trained$/\1/p' "$work/out"; }
run "$mpiexec" -n 1 "${mpi_flags[@]}" "$(bin train_gpt train_gpt)" 1,1,1,1 60
expect '^loss [0-9.]+ -> [0-9.]+: trained$'
one_rank=$(final_loss)
run "$mpiexec" -n 4 "${mpi_flags[@]}" "$(bin train_gpt train_gpt)" 2,1,2,1 60
expect '^grid 2x1x2x1 on 4 ranks: '
expect '^step  60  loss '
expect '^loss [0-9.]+ -> [0-9.]+: trained$'
# the grid trains the same model as one rank: the same loss after 60 steps, up to float rounding
awk -v a="$one_rank" -v b="$(final_loss)" 'BEGIN { d = a - b; exit !(d < 2e-3 && d > -2e-3) }' ||
  fail "the 4-rank loss after 60 steps, $(final_loss), is not one rank's, $one_rank"
echo "check-examples: train_gpt: 60 steps on 2x1x2x1 end at one rank's loss ($one_rank)"

echo "check-examples: every example built against $prefix and passed"
