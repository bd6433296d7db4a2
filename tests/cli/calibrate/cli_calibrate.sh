#!/usr/bin/env bash
# CLI tests of `axonn calibrate` (issue 6). Usage: cli_calibrate.sh CASE AXONN MPIEXEC
set -u
case_name=$1 axonn=$2 mpiexec=${3:-mpiexec}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

case $case_name in
  quick_np2)
    # default place: $XDG_CONFIG_HOME/axonn/profiles/local.json
    start=$(date +%s)
    XDG_CONFIG_HOME=$tmp timeout 40 "$mpiexec" -n 2 --oversubscribe "$axonn" calibrate --quick >"$tmp/out" 2>&1 \
      || { echo "FAIL: calibrate"; cat "$tmp/out"; exit 1; }
    echo "calibrate --quick on 2 ranks: $(( $(date +%s) - start )) s"
    cat "$tmp/out"
    profile=$tmp/axonn/profiles/local.json
    [ -f "$profile" ] || { echo "FAIL: no $profile"; exit 1; }
    [ ! -e "$profile.tmp" ] || { echo "FAIL: temporary left behind"; exit 1; }
    python3 - "$profile" <<'PY' || exit 1
import json, sys
p = json.load(open(sys.argv[1]))
assert p["name"] == "local" and p["implementation"] == "axonn-cpp", p
assert p["gpus_per_node"] == 2 and p["calibration"]["ranks"] == 2 and p["calibration"]["quick"] is True
g = p["gpu"]
for k in ("memory_gib", "peak_tflops", "hbm_gbs"):
    assert g[k] > 0, (k, g)
assert g["gemm_efficiency"] == 1 and g["gemm_call_us"] >= 0
rules = p["network"]["bandwidth_gbs"]
# one position for 2 ranks (ip 1, size 2), three collectives, each fitted and sampled
assert sorted(r["op"] for r in rules) == ["all-gather", "all-reduce", "reduce-scatter"], rules
for r in rules:
    assert r["ip"] == 1 and r["size"] == 2 and r["gbs"] > 0 and r["latency_us"] >= 0, r
    assert len(r["samples"]) == 3 and all(b > 0 and t > 0 for b, t in r["samples"]), r
print("ok: profile fields")
PY
    # the planner reads it, by name from the default place and by path
    for machine in local "$profile"; do
      XDG_CONFIG_HOME=$tmp "$axonn" plan --machine "$machine" --layers 2 --hidden 64 --heads 4 --vocab 512 --seq-len 64 \
        --gpus 2 --batch-size 4 --top 0 >"$tmp/plan" 2>&1 || { echo "FAIL: plan --machine $machine"; cat "$tmp/plan"; exit 1; }
      grep -q "model of the axonn-cpp step" "$tmp/plan" || { echo "FAIL: not the axonn-cpp model"; cat "$tmp/plan"; exit 1; }
      grep -q "2 GPUs, Gx\*Gy\*Gz >= 1: 4 factorizations, 4 admissible" "$tmp/plan" || { cat "$tmp/plan"; exit 1; }
    done
    cat "$tmp/plan"
    # --out FILE
    timeout 40 "$mpiexec" -n 2 --oversubscribe "$axonn" calibrate --quick --out "$tmp/sub/dir/p.json" >"$tmp/out" 2>&1 \
      || { echo "FAIL: calibrate --out"; cat "$tmp/out"; exit 1; }
    "$axonn" plan --machine "$tmp/sub/dir/p.json" --model gpt2 --gpus 2 --batch-size 4 --seq-len 64 >/dev/null \
      || { echo "FAIL: plan reads --out"; exit 1; }
    echo "ok: --out" ;;
  unwritable_out)
    timeout 40 "$mpiexec" -n 2 --oversubscribe "$axonn" calibrate --quick --out /proc/axonn/p.json >"$tmp/out" 2>&1
    rc=$?
    if [ "$rc" -eq 0 ] || [ "$rc" -ge 124 ]; then echo "FAIL: exit code $rc"; cat "$tmp/out"; exit 1; fi
    n=$(grep -c "cannot write the profile to '/proc/axonn/p.json'" "$tmp/out")
    [ "$n" -eq 1 ] || { echo "FAIL: message printed $n times"; cat "$tmp/out"; exit 1; }
    ! grep -q "^gemm" "$tmp/out" || { echo "FAIL: measured before checking --out"; exit 1; }
    echo "ok: $(grep -m1 "cannot write" "$tmp/out")" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
