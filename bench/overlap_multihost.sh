#!/usr/bin/env bash
# Overlap where communication is waiting rather than copying (issue 18; docs/multi-host.md): on
# HOSTS namespace hosts of SLOTS ranks with shaped links, per grid (and rank order), `axonn train`
# with --overlap none and --overlap all (interleaved), the median step time of the traced steps, and
# `axonn trace-summary`'s compute, communication and hidden fraction (mean over ranks).
#
#   bench/overlap_multihost.sh [BUILD_DIR] [GRID[:ORDER] ...]   (default: every admissible grid and order)
#
# Environment: HOSTS (2), SLOTS (2), RATE (1gbit), DELAY (0.5ms; empty: none), STEPS (6: the first
# two warm up, the rest are traced), OUT (a JSON file of the rows). The model is bench_plan_validate's.
set -euo pipefail
build=$(cd "${1:-build}" && pwd)
shift || true
here=$(cd "$(dirname "$0")/.." && pwd)
hosts=${HOSTS:-2} slots=${SLOTS:-2} rate=${RATE:-1gbit} delay=${DELAY-0.5ms} steps=${STEPS:-6}
np=$(( hosts * slots ))
shape=(--hosts "$hosts" --slots "$slots" --rate "$rate")
[ -z "$delay" ] || shape+=(--delay "$delay" --netdelay "$build/tests/multihost/axonn_netdelay")
export OMP_NUM_THREADS=1 OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
model=(--layers 4 --channels 256 --heads 4 --vocab 2048 --max-seq-len 64 --seq-len 64 --batch-size 8)
configs=("$@")
if [ ${#configs[@]} -eq 0 ]; then  # every admissible grid in each order that places it differently
  mapfile -t configs < <("$build/bin/axonn" plan --machine perlmutter --layers 4 --hidden 256 --heads 4 --vocab 2048 \
    --seq-len 64 --batch-size 8 --gpus "$np" --grid-order all --top 0 --format json |
    python3 -c 'import json, sys
for c in json.load(sys.stdin)["configs"]:
    print("%d,%d,%d,%d:%s" % (c["gx"], c["gy"], c["gz"], c["gdata"], c["order"].replace(",", "")))' | sort)
fi
echo "== $(date -u +%FT%TZ) $hosts hosts x $slots ranks, links $rate${delay:+, $delay one way}; ${#configs[@]} configurations; uptime: $(uptime)"
# shellcheck disable=SC2016  # expanded inside the sandbox
"$here/tests/multihost/netns.sh" "${shape[@]}" -- bash -c '
  set -euo pipefail
  build=$1 np=$2 steps=$3 out=$4; shift 4
  model=(); while [ "$1" != -- ]; do model+=("$1"); shift; done; shift
  dir=$AXONN_NETNS_DIR/overlap
  mkdir -p "$dir"
  for config in "$@"; do
    grid=${config%:*} order=${config#*:}
    for overlap in none all; do
      tag=$(echo "$config-$overlap" | tr ",:" "_-")
      "$AXONN_MPIRUN" -n "$np" "$build/bin/axonn" train "${model[@]}" --grid "$grid" --grid-order "$order" \
        --overlap "$overlap" --steps "$steps" --lr-schedule constant --peak-gflops 100 --quiet \
        --metrics "$dir/$tag.jsonl" --trace "$dir/$tag.trace.json" --trace-steps "3:$steps" --overwrite >"$dir/$tag.log" 2>&1 ||
        { echo "failed: $config --overlap $overlap"; tail -5 "$dir/$tag.log"; continue; }
      "$build/bin/axonn" trace-summary "$dir/$tag.trace.json" --json >"$dir/$tag.summary.json"
    done
  done
  python3 - "$dir" "$out" "$@" <<"PY"
import json, statistics, sys
d, out, configs = sys.argv[1], sys.argv[2], sys.argv[3:]
rows = []
print("%-16s %8s %8s %7s | %9s %9s %7s %9s | %s" % ("grid:order", "none_ms", "all_ms", "speedup", "compute", "comm",
      "hidden", "exposed", "compute > comm"))
for c in configs:
    tag = c.replace(",", "_").replace(":", "-")
    r = {"config": c}
    try:
        for ov in ("none", "all"):
            steps = [json.loads(l)["step_ms"] for l in open("%s/%s-%s.jsonl" % (d, tag, ov))][2:]
            r[ov + "_step_ms"] = statistics.median(steps)
            s = json.load(open("%s/%s-%s.summary.json" % (d, tag, ov)))
            for k in ("compute_ms", "comm_ms", "hidden_ms", "exposed_ms", "wall_ms"):
                r[ov + "_" + k] = statistics.mean(x[k] for x in s)
            r[ov + "_hidden_fraction"] = statistics.mean(x["hidden_fraction"] for x in s)
    except (OSError, ValueError) as e:
        print("%-16s failed: %s" % (c, e)); continue
    rows.append(r)
    print("%-16s %8.1f %8.1f %6.2fx | %9.1f %9.1f %6.0f%% %9.1f | %s" % (c, r["none_step_ms"], r["all_step_ms"],
          r["none_step_ms"] / r["all_step_ms"], r["all_compute_ms"], r["all_comm_ms"], 100 * r["all_hidden_fraction"],
          r["all_exposed_ms"], "yes" if r["all_compute_ms"] > r["all_comm_ms"] else "no"))
print("# compute, comm, hidden, exposed: --overlap all, trace-summary over the traced steps, mean over ranks (ms)")
if out:
    json.dump(rows, open(out, "w"), indent=1)
PY
' sandbox "$build" "$np" "$steps" "${OUT:-}" "${model[@]}" -- "${configs[@]}"
echo "== uptime after: $(uptime)"
