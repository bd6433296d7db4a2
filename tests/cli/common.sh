# tests/cli/common.sh — what every CLI test script shares. A script sets $axonn (the binary) and
# $mpiexec, then sources this file (`. "$(dirname "$0")/../common.sh"`).
#
# Every check below that fails prints `FAIL: ...` with the output it saw and ends the case with exit 1,
# and the shell runs in strict mode (errexit, nounset, pipefail): a command that fails outside a check
# ends the case too. So no check can pass by being ignored, whatever comes after it.
#
# A command that outlives $CLI_TIMEOUT gets SIGTERM, and SIGKILL 10 s later (an mpirun whose ranks hang
# may not end on SIGTERM), so the case fails with the output it saw, never by the test's own timeout.
# Exit codes the checks treat as "a clear error": 1..123. 124 and above are timeouts (timeout(1)) and
# signals (128+N), never a clean refusal.
set -euo pipefail

tmp=$(mktemp -d)
# Open MPI's session directory, this case's own: every singleton (a command run without mpirun) is job [0,1] and
# makes and removes /tmp/ompi.HOST.UID/jf.0/1, so two cases running at once (ctest -j) could remove it under each
# other ("A call to mkdir was unable to create the desired directory ... jf.0/1": a case failed so on CI)
ompi_tmp=$(mktemp -d)
export OMPI_MCA_orte_tmpdir_base=$ompi_tmp
trap 'rm -rf "$tmp" "$ompi_tmp"' EXIT
: >"$tmp/out"
CLI_TIMEOUT=${CLI_TIMEOUT:-100}

# fail MESSAGE: the case fails, showing the last command's output.
fail() {
  echo "FAIL: $*"
  if [ -s "$tmp/out" ]; then
    echo "--- output of the last command:"
    cat "$tmp/out"
  fi
  exit 1
}

# check MESSAGE CMD...: CMD must succeed, else the case fails with MESSAGE.
check() {
  local message=$1
  shift
  "$@" || fail "$message"
}

# run CMD...: CMD must exit 0 within $CLI_TIMEOUT seconds; its output is kept in $tmp/out.
run() {
  local rc=0
  timeout -k 10 "$CLI_TIMEOUT" "$@" >"$tmp/out" 2>&1 || rc=$?
  [ "$rc" -eq 0 ] || fail "exit code $rc (want 0) for: $*"
}

# run_np NP ARGS...: `axonn ARGS` under mpiexec -n NP, must exit 0; output in $tmp/out.
run_np() {
  local np=$1
  shift
  run "$mpiexec" -n "$np" --oversubscribe "$axonn" "$@"
}

# expect_error REGEX CMD...: CMD must exit 1..123 (not 0, not a signal or a timeout) and print REGEX
# (extended regular expression) on stdout or stderr; output in $tmp/out.
expect_error() {
  local regex=$1
  shift
  local rc=0
  timeout -k 10 "$CLI_TIMEOUT" "$@" >"$tmp/out" 2>&1 || rc=$?
  if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then
    fail "exit code $rc (want 1..123) for: $*"
  fi
  grep -Eq -- "$regex" "$tmp/out" || fail "output lacks /$regex/ for: $*"
  echo "ok: exit $rc, $(grep -Em1 -- "$regex" "$tmp/out")"
}

# expect_exit CODE CMD...: CMD must exit exactly CODE; output in $tmp/out.
expect_exit() {
  local want=$1
  shift
  local rc=0
  timeout -k 10 "$CLI_TIMEOUT" "$@" >"$tmp/out" 2>&1 || rc=$?
  [ "$rc" -eq "$want" ] || fail "exit code $rc (want $want) for: $*"
}

# count REGEX [FILE]: how many lines of FILE (default $tmp/out) match REGEX (0 is not an error).
count() {
  grep -Ec -- "$1" "${2:-$tmp/out}" || true
}

# expect_once NP REGEX ARGS...: under mpiexec -n NP every rank exits non-zero (1..123) and the message
# is printed exactly once.
expect_once() {
  local np=$1 regex=$2
  shift 2
  expect_error "$regex" "$mpiexec" -n "$np" --oversubscribe "$axonn" "$@"
  local n
  n=$(count "$regex")
  [ "$n" -eq 1 ] || fail "the error /$regex/ was printed $n times, not once"
}

# expect_output REGEX [FILE]: FILE (default: the last command's output) matches REGEX.
expect_output() {
  grep -Eq -- "$1" "${2:-$tmp/out}" || fail "output ${2:-} lacks /$1/"
}

# expect_no_output REGEX [FILE]: FILE (default: the last command's output) does not match REGEX.
expect_no_output() {
  ! grep -Eq -- "$1" "${2:-$tmp/out}" || fail "output ${2:-} has /$1/, which it must not"
}

# same A B: the two files are byte-identical.
same() {
  cmp -- "$1" "$2" || fail "$1 and $2 differ"
  echo "ok: $1 == $2"
}

# absent PATH...: none of the paths exists (nothing half-written was left behind).
absent() {
  local p
  for p in "$@"; do
    [ ! -e "$p" ] || fail "$p exists, but must not"
  done
}
