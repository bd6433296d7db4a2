#!/usr/bin/env bash
# CLI tests of `axonn calibrate` (issue 6). Usage: cli_calibrate.sh CASE AXONN MPIEXEC
case_name=$1 axonn=$2 mpiexec=${3:-mpiexec}
. "$(dirname "$0")/../common.sh"

case $case_name in
  quick_np2)
    # default place: $XDG_CONFIG_HOME/axonn/profiles/local.json
    start=$(date +%s)
    XDG_CONFIG_HOME=$tmp CLI_TIMEOUT=40 run_np 2 calibrate --quick
    echo "calibrate --quick on 2 ranks: $(( $(date +%s) - start )) s"
    cat "$tmp/out"
    profile=$tmp/axonn/profiles/local.json
    [ -f "$profile" ] || fail "no $profile"
    absent "$profile.tmp"
    python3 - "$profile" <<'PY'
import json, sys
p = json.load(open(sys.argv[1]))
assert p["name"] == "local" and p["implementation"] == "axonn-cpp", p
assert p["gpus_per_node"] == 2 and p["calibration"]["ranks"] == 2 and p["calibration"]["quick"] is True
g = p["gpu"]
for k in ("memory_gib", "peak_tflops", "hbm_gbs"):
    assert g[k] > 0, (k, g)
assert g["gemm_efficiency"] == 1 and g["gemm_call_us"] >= 0
rules = p["network"]["bandwidth_gbs"]
# one position for 2 ranks (ip 1, size 2), three collectives, each fitted and sampled, blocking and
# non-blocking + wait ("async")
assert sorted((r["op"], r.get("async", False)) for r in rules) == [
    (op, a) for op in ("all-gather", "all-reduce", "reduce-scatter") for a in (False, True)], rules
for r in rules:
    assert r["ip"] == 1 and r["size"] == 2 and r["gbs"] > 0 and r["latency_us"] >= 0, r
    assert len(r["samples"]) == 3 and all(b > 0 and t > 0 for b, t in r["samples"]), r
print("ok: profile fields")
PY
    # the planner reads it, by name from the default place and by path
    for machine in local "$profile"; do
      XDG_CONFIG_HOME=$tmp run "$axonn" plan --machine "$machine" --layers 2 --hidden 64 --heads 4 --vocab 512 --seq-len 64 \
        --gpus 2 --batch-size 4 --top 0
      expect_output "model of the axonn-cpp step"
      expect_output "2 GPUs, Gx\*Gy\*Gz >= 1: 4 factorizations, 4 admissible"
    done
    cat "$tmp/out"
    # --out FILE
    CLI_TIMEOUT=40 run_np 2 calibrate --quick --out "$tmp/sub/dir/p.json"
    run "$axonn" plan --machine "$tmp/sub/dir/p.json" --model gpt2 --gpus 2 --batch-size 4 --seq-len 64
    echo "ok: --out" ;;
  unwritable_out)
    CLI_TIMEOUT=40 expect_once 2 "cannot write the profile to '/proc/axonn/p.json'" calibrate --quick --out /proc/axonn/p.json
    expect_no_output "^gemm" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
