#!/usr/bin/env bash
# CLI tests of `axonn train --grid auto` (issue 6). Usage: cli_grid_auto.sh CASE AXONN REFERENCE_DIR MPIEXEC HERE
case_name=$1 axonn=$2 ref=$3 mpiexec=${4:-mpiexec} here=$5
. "$here/../common.sh"
model=$ref/gpt2-tiny/model.bin tokens=$ref/gpt2-tiny/tokens.bin
golden=$(cd "$(dirname "$0")/../../golden" && pwd)  # the PyTorch oracle's Llama (tests/golden/gen_llama_golden.py)
flags=(--init "$model" --data "$tokens" --batch-size 4 --seq-len 32 --steps 8 --lr 3e-3 --lr-schedule constant
       --weight-decay 0 --grad-clip 0 --peak-gflops 100)

# train_auto ARGS...: runs --grid auto on 2 ranks; sets $grid to the grid it chose as GX,GY,GZ,GD and
# keeps its output in $tmp/auto.out
train_auto() {
  CLI_TIMEOUT=200 run_np 2 train --grid auto "${flags[@]}" --metrics "$tmp/auto.jsonl" "$@"
  cp "$tmp/out" "$tmp/auto.out"
  grid=$(sed -nE 's/.*grid      auto: Gx=([0-9]+) Gy=([0-9]+) Gz=([0-9]+) Gdata=([0-9]+)( order [xyz,]+)?, predicted [0-9.]+ ms\/step.*/\1,\2,\3,\4/p' "$tmp/out")
  # the rank order too, when the planner chose it (no --grid-order)
  order=$(sed -nE 's/.*grid      auto: [^,]* order ([xyz,]+), predicted.*/\1/p' "$tmp/out")
  [ -n "$grid" ] || fail "no 'grid      auto:' line"
}

# same_losses_as [WANT BOUND]: the auto run trained on $grid, its losses equal those of --grid $grid, and
# they are within BOUND of WANT's (llm.c's, within kLlmcLossBound, by default)
same_losses_as() {
  local want=${1:-$ref/gpt2-tiny/losses.txt} bound=${2:-2e-5}
  expect_output "grid      Gx=${grid%%,*} " "$tmp/auto.out"
  CLI_TIMEOUT=200 run_np 2 train --grid "$grid" ${order:+--grid-order "$order"} "${flags[@]}" \
    --metrics "$tmp/explicit.jsonl"
  python3 - "$tmp/auto.jsonl" "$tmp/explicit.jsonl" "$want" "$grid" "$bound" <<'PY'
import json, sys
auto = [json.loads(l)["loss"] for l in open(sys.argv[1])]
explicit = [json.loads(l)["loss"] for l in open(sys.argv[2])]
want = [float(l.split()[1]) for l in open(sys.argv[3]) if not l.startswith("#")][:len(auto)]
bound = float(sys.argv[5])
assert len(auto) == len(explicit) == len(want) > 0, (len(auto), len(explicit), len(want))
assert auto == explicit, (auto, explicit)
worst = max(abs(a - w) for a, w in zip(auto, want))
assert worst <= bound, (auto, want)
print("ok: --grid auto chose %s; %d losses equal to --grid %s and within %.2g of %s" % (sys.argv[4], len(auto), sys.argv[4],
      worst, sys.argv[3]))
PY
}

case $case_name in
  same_losses)
    # the calibrated profile in its default place ($XDG_CONFIG_HOME/axonn/profiles/local.json)
    mkdir -p "$tmp/xdg/axonn/profiles" && cp "$here/local.json" "$tmp/xdg/axonn/profiles/local.json"
    XDG_CONFIG_HOME=$tmp/xdg train_auto
    expect_output "fastest of 4 admissible grids"
    same_losses_as ;;
  machine_flag)
    XDG_CONFIG_HOME=$tmp/empty train_auto --machine "$here/local.json"
    expect_output "with machine profile 'local' \($here/local.json\)"
    same_losses_as ;;
  llama_same_losses)
    # the oracle's Llama (6 heads, 2 KV heads, C=48, F=136): batch 3 leaves Gx=2 and Gy=2; the choice trains
    # as that grid given explicitly, within 1e-4 of PyTorch's 20 losses
    flags=(--init "$golden/llama-gqa" --data "$golden/llama-gqa/tokens.bin" --batch-size 3 --seq-len 13 --steps 20
           --lr 3e-3 --lr-schedule constant --grad-clip 0 --peak-gflops 100)
    XDG_CONFIG_HOME=$tmp/empty train_auto --machine "$here/local.json"
    expect_output "fastest of 2 admissible grids"
    same_losses_as "$golden/llama-gqa/losses.txt" 1e-4 ;;
  no_profile)
    XDG_CONFIG_HOME=$tmp/empty expect_once 2 "no calibrated profile 'local' exists .*Run \`mpirun -np 2 axonn calibrate\`" \
      train --grid auto "${flags[@]}" ;;
  no_admissible_grid)
    # 3 ranks: 3 divides neither the channels (64) nor the heads (4) nor the batch (4)
    expect_once 3 "--grid auto: no 4D grid of 3 ranks can run this model and batch .*Change the number of ranks" \
      train --grid auto --machine "$here/local.json" "${flags[@]}" ;;
  fits_no_grid)
    # the fixture with 1 MiB per rank: gpt2-tiny's weights, gradients and AdamW state alone need more
    sed 's/"memory_gib": 4/"memory_gib": 0.001/' "$here/local.json" >"$tmp/small.json"
    expect_once 2 "--grid auto: no grid of 2 ranks fits this model in 0.0009 GiB per rank .*Use more ranks" \
      train --grid auto --machine "$tmp/small.json" "${flags[@]}" ;;
  bad_profile)
    expect_once 2 "missing_field.json': missing field 'gpu.peak_tflops'" \
      train --grid auto --machine "$here/../plan/missing_field.json" "${flags[@]}" ;;
  two_level_order)
    # nodes of 2 ranks with a slow link between them (the fixture's numbers, its table replaced by a
    # two-level network): --grid auto chooses the rank order too, the one `axonn plan --grid-order all`
    # ranks first, and trains to the losses of that grid and order given explicitly
    python3 - "$here/local.json" "$tmp/two.json" <<'PY'
import json, sys
d = json.load(open(sys.argv[1]))
d["gpus_per_node"] = 2
d["network"] = {"latency_us": 5, "intra_node_gbs": 1.5, "inter_node_gbs": 0.01, "intra_node_latency_us": 2,
                "inter_node_latency_us": 500}
d["calibration"] = {"ranks": 4}
json.dump(d, open(sys.argv[2], "w"))
PY
    run "$axonn" plan --machine "$tmp/two.json" --layers 2 --hidden 64 --heads 4 --vocab 512 --seq-len 32 \
      --batch-size 4 --gpus 4 --grid-order all --top 1
    best=$(sed -nE 's/^   1 +([0-9]+) +([0-9]+) +([0-9]+) +([0-9]+) +([xyz,]+) .*/\1,\2,\3,\4 \5/p' "$tmp/out")
    CLI_TIMEOUT=200 run_np 4 train --grid auto --machine "$tmp/two.json" "${flags[@]}" --metrics "$tmp/auto.jsonl"
    cp "$tmp/out" "$tmp/auto.out"
    expect_output "fastest of 10 admissible grids in every rank order"
    grid=$(sed -nE 's/.*grid      auto: Gx=([0-9]+) Gy=([0-9]+) Gz=([0-9]+) Gdata=([0-9]+) order ([xyz,]+), .*/\1,\2,\3,\4 \5/p' "$tmp/out")
    [ "$grid" = "$best" ] || fail "--grid auto chose '$grid', axonn plan ranks '$best' first"
    order=${grid#* } grid=${grid% *}
    expect_output "grid      Gx=${grid%%,*} .*; rank order $order"
    CLI_TIMEOUT=200 run_np 4 train --grid "$grid" --grid-order "$order" "${flags[@]}" --metrics "$tmp/explicit.jsonl"
    python3 -c 'import json, sys; a, b = ([json.loads(l)["loss"] for l in open(f)] for f in sys.argv[1:]); assert a == b and len(a) == 8, (a, b)' \
      "$tmp/auto.jsonl" "$tmp/explicit.jsonl"
    echo "ok: --grid auto chose $grid in order $order, as axonn plan does; losses equal to it given explicitly" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
