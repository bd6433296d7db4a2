#!/usr/bin/env python3
"""Mutation check of the CLI tests: does every CLI test fail when the binary misbehaves?

Each CLI test (every CTest entry whose command runs the built `axonn`, found in `ctest --show-only=json-v1`)
is run once with the real binary and once with each *mutant*: a wrapper put in the binary's place that runs
the real one and then breaks one observable behaviour.

  exit     the exit code inverted: 0 becomes 3, any failure becomes 0 (a refusal that "succeeds", a run that
           "fails")
  garble   every lowercase letter of stdout and stderr shifted by one (a missing or changed message)
  flip     one byte in the middle of every file the command wrote through an output flag (--to, --save,
           --metrics, --out, --checkpoint-dir, --trace, --gemm-tuning-report, --json) flipped after it ran
           (a changed byte)

A mutant is *killed* when the test fails under it. The real binary must pass every test; every test must be
killed by at least one mutant, and by `exit` (every test checks the exit code).

Then, per invocation: a case may run the binary several times (set-up runs, then several checks). The
`exit@k` mutant inverts the exit code of the k-th invocation only (all ranks of the k-th `mpiexec` launch
together), for every k the real run made. Every one of them must be killed: that is what shows that no
command's verdict is ignored (the defect of scripts without `set -e`, where only the last command of a case
decided it).

Prints Markdown tables and the survivors; exit status 1 when a test survives every mutant, when `exit` or an
`exit@k` survives, or when a test fails with the real binary.

  python3 tests/cli/mutation_check.py [--build build] [--filter REGEX] [--mutants exit,garble,flip] [--jobs 2]
                                      [--no-per-invocation] [--garble-per-invocation] [--replace OLD=NEW]
"""
import argparse
import concurrent.futures
import json
import os
import re
import stat
import subprocess
import sys
import tempfile
import time

WRAPPER = r'''#!/usr/bin/env bash
# mutant of axonn ({mutation}): runs the real binary, then breaks one behaviour
real={real}
mutation={mutation}
# which invocation this is (1, 2, ...; all ranks of one mpiexec launch share one: the launcher's pid),
# counted in $AXONN_MUTANT_DIR when it is set
if [ -n "${{AXONN_MUTANT_DIR:-}}" ]; then
  key=$$
  [ -z "${{OMPI_COMM_WORLD_SIZE:-}}" ] || key=mpi-$PPID
  index=$(flock "$AXONN_MUTANT_DIR/lock" bash -c '
    f=$1/invocations; k=$2
    n=$(grep -nxF -- "$k" "$f" 2>/dev/null | head -1 | cut -d: -f1)
    if [ -z "$n" ]; then echo "$k" >>"$f"; n=$(wc -l <"$f"); fi
    echo "$n"' _ "$AXONN_MUTANT_DIR" "$key")
  if [ -n "${{AXONN_MUTANT_AT:-}}" ]; then
    if [ "$index" = "$AXONN_MUTANT_AT" ]; then mutation=${{AXONN_MUTANT_KIND:-exit}}; else mutation=none; fi
  fi
fi
case $mutation in
  none) exec "$real" "$@" ;;
  exit)
    rc=0; "$real" "$@" || rc=$?
    if [ "$rc" -eq 0 ]; then exit 3; else exit 0; fi ;;
  garble)
    "$real" "$@" 2>&1 | tr 'a-z' 'b-za'
    exit "${{PIPESTATUS[0]}}" ;;
  flip)
    rc=0; "$real" "$@" || rc=$?
    outs=()
    while [ $# -gt 0 ]; do
      case $1 in
        --to|--save|--metrics|--out|--checkpoint-dir|--trace|--gemm-tuning-report|--json) [ $# -gt 1 ] && outs+=("$2") ;;
      esac
      shift
    done
    for o in "${{outs[@]}}"; do
      [ -e "$o" ] || continue
      find "$o" -type f -size +0 | while read -r f; do
        python3 -c "import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 0x5a; open(p, 'wb').write(b)" "$f"
      done
    done
    exit "$rc" ;;
esac
'''


def cli_tests(build, real, pattern):
    out = subprocess.run(["ctest", "--test-dir", build, "--show-only=json-v1"], check=True, capture_output=True,
                         text=True).stdout
    tests = []
    for t in json.loads(out)["tests"]:
        cmd = t.get("command") or []
        if not any(real in part for part in cmd):
            continue
        if pattern and not re.search(pattern, t["name"]):
            continue
        props = {p["name"]: p["value"] for p in t.get("properties", [])}
        tests.append({"name": t["name"], "command": cmd, "env": props.get("ENVIRONMENT", []),
                      "cwd": props.get("WORKING_DIRECTORY", build), "timeout": float(props.get("TIMEOUT", 120))})
    return tests


def run_test(test, real, binary, at=None, kind="exit"):
    """Runs the test with `binary` in place of the real one; returns (passed, seconds, output tail, number of
    invocations of the binary). With `at`, only the at-th invocation is mutated, by mutant `kind`."""
    cmd = [part.replace(real, binary) for part in test["command"]]
    env = dict(os.environ)
    for kv in test["env"]:
        k, _, v = kv.partition("=")
        env[k] = v
    counter = tempfile.mkdtemp(prefix="axonn-invocations-")
    open(os.path.join(counter, "lock"), "w").close()
    env["AXONN_MUTANT_DIR"] = counter
    if at is not None:
        env["AXONN_MUTANT_AT"] = str(at)
        env["AXONN_MUTANT_KIND"] = kind
    start = time.time()
    try:
        p = subprocess.run(cmd, cwd=test["cwd"], env=env, capture_output=True, text=True, errors="replace",
                           timeout=test["timeout"])
        ok = p.returncode == 0
        tail = (p.stdout + p.stderr)[-400:]
    except subprocess.TimeoutExpired:
        ok, tail = False, "timeout"
    try:
        n = len(open(os.path.join(counter, "invocations")).read().split())
    except OSError:
        n = 0
    subprocess.run(["rm", "-rf", counter])
    return ok, time.time() - start, tail, n


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--build", default="build")
    ap.add_argument("--filter", default="")
    ap.add_argument("--mutants", default="exit,garble,flip")
    ap.add_argument("--jobs", type=int, default=2)
    ap.add_argument("--no-per-invocation", action="store_true", help="skip the exit@k mutants")
    ap.add_argument("--garble-per-invocation", action="store_true",
                    help="also garble each invocation's output alone (garble@k; reported, not required: a set-up "
                         "run's output need not be checked)")
    ap.add_argument("--replace", action="append", default=[], metavar="OLD=NEW",
                    help="replace OLD by NEW in every test command (e.g. to run other copies of the scripts)")
    a = ap.parse_args()
    build = os.path.abspath(a.build)
    real = os.path.join(build, "bin", "axonn")
    mutants = ["none"] + [m for m in a.mutants.split(",") if m]
    tests = cli_tests(build, real, a.filter)
    for r in a.replace:
        old, _, new = r.partition("=")
        for t in tests:
            t["command"] = [part.replace(old, new) for part in t["command"]]
    if not tests:
        sys.exit("no CLI test runs %s (build it, or check --filter)" % real)
    tmp = tempfile.mkdtemp(prefix="axonn-mutants-")
    binaries = {}
    for m in mutants:
        path = os.path.join(tmp, m, "axonn")
        os.makedirs(os.path.dirname(path))
        with open(path, "w") as f:
            f.write(WRAPPER.format(real=real, mutation=m))
        os.chmod(path, os.stat(path).st_mode | stat.S_IXUSR | stat.S_IXGRP | stat.S_IXOTH)
        binaries[m] = path
    results = {}
    with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
        futures = {pool.submit(run_test, t, real, binaries[m]): (t["name"], m) for t in tests for m in mutants}
        for fut in concurrent.futures.as_completed(futures):
            results[futures[fut]] = fut.result()
    print("| test | real binary | " + " | ".join(mutants[1:]) + " |")
    print("|---|---|" + "---|" * (len(mutants) - 1))
    bad = []
    for t in sorted(tests, key=lambda t: t["name"]):
        n = t["name"]
        ok, secs, tail, _ = results[(n, "none")]
        row = ["pass" if ok else "**FAIL**"]
        if not ok:
            bad.append("%s fails with the real binary: %s" % (n, tail.strip().splitlines()[-1:] or ""))
        killed = []
        for m in mutants[1:]:
            survived = results[(n, m)][0]
            row.append("survived" if survived else "killed")
            if not survived:
                killed.append(m)
        if not killed:
            bad.append("%s: no mutant kills it" % n)
        elif "exit" in mutants and "exit" not in killed:
            bad.append("%s: the exit-code mutant survives" % n)
        print("| %s | %s |" % (n, " | ".join(row)))
    total = len(tests) * (len(mutants) - 1)
    killed = sum(1 for (n, m), r in results.items() if m != "none" and not r[0])
    print("\n%d tests x %d mutants: %d of %d mutants killed" % (len(tests), len(mutants) - 1, killed, total))

    if not a.no_per_invocation:
        # exit@k: every invocation's exit code matters
        jobs = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
            for t in tests:
                n_inv = results[(t["name"], "none")][3]
                for k in range(1, n_inv + 1):
                    jobs[pool.submit(run_test, t, real, binaries["none"], k)] = (t["name"], k)
            at_results = {key: fut.result() for fut, key in ((f, jobs[f]) for f in
                                                             concurrent.futures.as_completed(jobs))}
        print("\n| test | invocations | exit@k killed |")
        print("|---|---|---|")
        all_k = 0
        all_killed = 0
        for t in sorted(tests, key=lambda t: t["name"]):
            n = t["name"]
            n_inv = results[(n, "none")][3]
            survivors = [k for k in range(1, n_inv + 1) if at_results[(n, k)][0]]
            all_k += n_inv
            all_killed += n_inv - len(survivors)
            print("| %s | %d | %d of %d%s |" % (n, n_inv, n_inv - len(survivors), n_inv,
                                               "" if not survivors else " (survived: %s)" % survivors))
            for k in survivors:
                bad.append("%s: inverting the exit code of invocation %d of %d goes unnoticed" % (n, k, n_inv))
        print("\nexit@k: %d of %d invocations' exit codes checked" % (all_killed, all_k))

    if a.garble_per_invocation:
        jobs = {}
        with concurrent.futures.ThreadPoolExecutor(max_workers=a.jobs) as pool:
            for t in tests:
                for k in range(1, results[(t["name"], "none")][3] + 1):
                    jobs[pool.submit(run_test, t, real, binaries["none"], k, "garble")] = (t["name"], k)
            garbled = {jobs[f]: f.result() for f in concurrent.futures.as_completed(jobs)}
        print("\n| test | invocations | garble@k killed |")
        print("|---|---|---|")
        for t in sorted(tests, key=lambda t: t["name"]):
            n = t["name"]
            n_inv = results[(n, "none")][3]
            survivors = [k for k in range(1, n_inv + 1) if garbled[(n, k)][0]]
            print("| %s | %d | %d of %d%s |" % (n, n_inv, n_inv - len(survivors), n_inv,
                                               "" if not survivors else " (survived: %s)" % survivors))
    for line in bad:
        print("PROBLEM:", line)
    subprocess.run(["rm", "-rf", tmp])
    sys.exit(1 if bad else 0)


if __name__ == "__main__":
    main()
