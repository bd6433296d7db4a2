#!/usr/bin/env bash
# CLI tests of a run that survives what clusters do to it (docs/resilience.md): --resume restores the
# recorded configuration and continues bit for bit, refuses changes that would make another run,
# continues the metrics without duplicate steps.
# Usage: cli_resilience.sh CASE AXONN_BIN REFERENCE_DIR MPIEXEC
case_name=$1 axonn=$2 ref=$3 mpiexec=${4:-mpiexec}
. "$(dirname "$0")/../common.sh"
model=$ref/gpt2-tiny/model.bin tokens=$ref/gpt2-tiny/tokens.bin
# a run with its own data, optimizer, batch and schedule: nothing of it is a default
flags=(--init "$model" --data "$tokens" --batch-size 8 --seq-len 16 --lr 2e-3 --warmup-steps 3 --min-lr-frac 0.1
       --weight-decay 0.05 --grad-clip 0.8 --seed 7 --peak-gflops 100)

# losses_equal REF GOT: every step of GOT is in REF with the same loss and grad norm, bit for bit, and GOT
# holds each step of REF once, in order.
losses_equal() {
  python3 - "$1" "$2" <<'PY'
import json, sys
ref = [json.loads(l) for l in open(sys.argv[1])]
got = [json.loads(l) for l in open(sys.argv[2])]
assert [g["step"] for g in got] == [r["step"] for r in ref], ([g["step"] for g in got], len(ref))
for g, r in zip(got, ref):
    assert g["loss"] == r["loss"] and g["grad_norm"] == r["grad_norm"] and g["lr"] == r["lr"], (g, r)
print("ok: %d steps, each once, bit-identical to the uninterrupted run" % len(got))
PY
}

# back_to STEP DIR: the checkpoint root as if the run had died after the save of STEP.
back_to() {
  local step=$1 dir=$2 d
  for d in "$dir"/step-*; do
    [ "$(basename "$d")" \> "$(printf 'step-%08d' "$step")" ] && rm -rf "$d"
  done
  printf 'step-%08d\n' "$step" >"$dir/latest"
}

case $case_name in
  resume_restores_config)
    # the uninterrupted run, then the same run cut back to its step-10 checkpoint and resumed with
    # --checkpoint-dir and --resume alone: the recorded data, optimizer, batch, schedule, checkpoint
    # cadence and metrics file come back, and the metrics hold each step once
    run_np 2 train "${flags[@]}" --grid 1,1,2,1 --steps 24 --metrics "$tmp/ref.jsonl"
    run_np 2 train "${flags[@]}" --grid 1,1,2,1 --steps 24 --checkpoint-dir "$tmp/ck" --checkpoint-every 10 \
      --metrics "$tmp/m.jsonl"
    back_to 10 "$tmp/ck"
    run_np 2 train --checkpoint-dir "$tmp/ck" --resume
    expect_output "resume    the checkpoint's settings: --data .*tokens.bin --seed 7 --batch-size 8 --seq-len 16 --steps 24 --lr 0.002 --warmup-steps 3 --min-lr-frac 0.1 --weight-decay 0.05 --grad-clip 0.8 --checkpoint-every 10 --metrics .*m.jsonl"
    expect_output "metrics   .*m.jsonl continues after step 10: 10 lines kept, 14 dropped"
    expect_output "checkpoint .*step-00000020"
    losses_equal "$tmp/ref.jsonl" "$tmp/m.jsonl" ;;
  resume_refuses_changed_lr)
    run_np 1 train "${flags[@]}" --steps 4 --checkpoint-dir "$tmp/ck"
    expect_error "resuming '.*step-00000004' with --lr 0.001 \(the checkpoint's run had 0.002\) would silently make another run" \
      "$axonn" train --checkpoint-dir "$tmp/ck" --resume --steps 8 --lr 1e-3
    expect_output "add --allow-config-change"
    absent "$tmp/ck/step-00000008" ;;
  resume_refuses_changed_data)
    cp "$tokens" "$tmp/other.bin"
    run_np 2 train "${flags[@]}" --grid 2,1,1,1 --steps 4 --checkpoint-dir "$tmp/ck"
    expect_once 2 "with --data .*other.bin \(the checkpoint's run had .*tokens.bin\), --batch-size 4 \(the checkpoint's run had 8\) would silently" \
      train --checkpoint-dir "$tmp/ck" --resume --steps 8 --data "$tmp/other.bin" --batch-size 4 ;;
  resume_allow_config_change)
    run_np 1 train "${flags[@]}" --steps 4 --checkpoint-dir "$tmp/ck"
    run_np 1 train --checkpoint-dir "$tmp/ck" --resume --steps 6 --lr 1e-3 --allow-config-change
    expect_output "--lr 0.001 \(the checkpoint's run had 0.002\): --allow-config-change, so the run continues with it"
    expect_output "checkpoint .*step-00000006" ;;
  resume_safe_changes_reported)
    # more steps and another grid (resharded) are safe: used and said
    run_np 2 train "${flags[@]}" --grid 2,1,1,1 --steps 4 --checkpoint-dir "$tmp/ck" --quiet
    run_np 2 train --checkpoint-dir "$tmp/ck" --resume --steps 6 --grid 1,1,1,2 --quiet
    expect_output "resume    changed: --steps 6 \(the checkpoint's run had 4\), --grid 1,1,1,2 \(the checkpoint's was 2,1,1,1: resharded\)"
    expect_output "grid      Gx=1 Gy=1 Gz=1 Gdata=2" ;;
  resume_grid_needs_ranks)
    run_np 2 train "${flags[@]}" --grid 2,1,1,1 --steps 2 --checkpoint-dir "$tmp/ck" --quiet
    expect_error "was written on grid 2,1,1,1 \(2 ranks\); this job has 1: run it on as many ranks, or give --grid for 1 ranks" \
      "$axonn" train --checkpoint-dir "$tmp/ck" --resume --steps 4 ;;
  resume_with_init_explained)
    run_np 1 train "${flags[@]}" --steps 2 --checkpoint-dir "$tmp/ck" --quiet
    run_np 1 train --checkpoint-dir "$tmp/ck" --resume --steps 3 --init "$model" --quiet
    expect_output "--init .*model.bin is not used: the run continues from the checkpoint's weights" ;;
  resume_from_keeps_checkpointing)
    # --resume-from without --checkpoint-dir saves where the recorded run saved, keeping as many
    run_np 1 train "${flags[@]}" --steps 4 --checkpoint-dir "$tmp/ck" --checkpoint-every 1 --keep 2 --quiet
    back_to 3 "$tmp/ck"
    run_np 1 train --resume-from "$tmp/ck/step-00000003" --steps 5 --quiet
    [ "$(ls "$tmp/ck" | tr '\n' ' ')" = "latest step-00000004 step-00000005 " ] || fail "left $(ls "$tmp/ck")" ;;
  *) fail "unknown case $case_name" ;;
esac
