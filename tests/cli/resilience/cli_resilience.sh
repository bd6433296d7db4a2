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

# start_bg OUT CMD...: CMD in the background, output in OUT; its pid in $bg.
start_bg() {
  local out=$1
  shift
  "$@" >"$out" 2>&1 &
  bg=$!
}

# wait_lines FILE N: until FILE has N lines (60 s at most).
wait_lines() {
  local i
  for i in $(seq 600); do
    [ -f "$1" ] && [ "$(wc -l <"$1")" -ge "$2" ] && return 0
    sleep 0.1
  done
  fail "$1 never reached $2 lines"
}

# rank_pids MPIRUN_PID: the ranks mpirun started (its children).
rank_pids() {
  ps -o pid= --ppid "$1" | tr -d ' '
}

# rank_of PID: the MPI rank of a rank's process (Open MPI's environment).
rank_of() {
  tr '\0' '\n' <"/proc/$1/environ" | sed -n 's/^OMPI_COMM_WORLD_RANK=//p'
}

# wait_rc PID: PID's exit code in $rc (the job is killed after 120 s).
wait_rc() {
  rc=0
  # (the watchdog holds no output open, and ends within a second of the process)
  ( for _ in $(seq 120); do kill -0 "$1" 2>/dev/null || exit 0; sleep 1; done; kill -9 "$1" ) >/dev/null 2>&1 &
  wait "$1" || rc=$?
}

# stop_and_resume NP SIGNAL HOW: the uninterrupted run, then the same run stopped by SIGNAL sent HOW
# (ranks: to every rank, as srun and Slurm do; mpirun: to mpirun; self: to the one process, no
# mpirun) once it has trained 20 steps; it must exit 0 with a checkpoint, and --resume alone must
# continue it bit for bit.
stop_and_resume() {
  local np=$1 sig=$2 how=$3 grid=1,1,1,1 launch=()
  [ "$np" -eq 4 ] && grid=2,1,1,2
  [ "$how" = self ] || launch=("$mpiexec" -n "$np" --oversubscribe)
  local run_flags=("${flags[@]}" --grid "$grid" --steps 300 --quiet)
  run "${launch[@]}" "$axonn" train "${run_flags[@]}" --metrics "$tmp/ref.jsonl"
  start_bg "$tmp/run.out" "${launch[@]}" "$axonn" train "${run_flags[@]}" --metrics "$tmp/m.jsonl" \
    --checkpoint-dir "$tmp/ck"
  wait_lines "$tmp/m.jsonl" 20
  if [ "$how" = ranks ]; then kill -"$sig" $(rank_pids "$bg"); else kill -"$sig" "$bg"; fi
  wait_rc "$bg"
  cp "$tmp/run.out" "$tmp/out"
  [ "$rc" -eq 0 ] || fail "the stopped run exited $rc, not 0"
  # the command to continue names the outputs the run was given (a resumed run writes only where its flags say)
  local launcher=""
  [ "$how" = self ] || launcher="mpirun -np $np "
  expect_output "stopped   by SIG$sig after step [0-9]+ of 300; checkpoint .*step-[0-9]+. Continue with: ${launcher}axonn train --checkpoint-dir $tmp/ck --metrics $tmp/m.jsonl --resume\$"
  local at
  at=$(grep -Eo "after step [0-9]+ of" "$tmp/out" | grep -Eo "[0-9]+" | head -1)
  [ "$at" -lt 300 ] || fail "the run was not stopped early"
  [ -f "$tmp/ck/$(printf 'step-%08d' "$at")/manifest.json" ] || fail "no checkpoint of step $at"
  [ "$(wc -l <"$tmp/m.jsonl")" -eq "$at" ] || fail "the metrics hold $(wc -l <"$tmp/m.jsonl") steps, not $at"
  run "${launch[@]}" "$axonn" train --checkpoint-dir "$tmp/ck" --resume --metrics "$tmp/m.jsonl"
  losses_equal "$tmp/ref.jsonl" "$tmp/m.jsonl"
}

case $case_name in
  resume_restores_config)
    # the uninterrupted run, then the same run cut back to its step-10 checkpoint and resumed with
    # --checkpoint-dir, --resume and its metrics file: the recorded data, optimizer, batch, schedule and
    # checkpoint cadence come back (outputs never do: the recorded metrics file is named, not taken),
    # and the metrics hold each step once
    run_np 2 train "${flags[@]}" --grid 1,1,2,1 --steps 24 --metrics "$tmp/ref.jsonl"
    run_np 2 train "${flags[@]}" --grid 1,1,2,1 --steps 24 --checkpoint-dir "$tmp/ck" --checkpoint-every 10 \
      --metrics "$tmp/m.jsonl"
    back_to 10 "$tmp/ck"
    run_np 2 train --checkpoint-dir "$tmp/ck" --resume --metrics "$tmp/m.jsonl"
    expect_output "resume    the checkpoint's settings: --data .*tokens.bin --seed 7 --batch-size 8 --seq-len 16 --steps 24 --lr 0.002 --warmup-steps 3 --min-lr-frac 0.1 --weight-decay 0.05 --grad-clip 0.8 --checkpoint-every 10\$"
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
    # a branch (--resume-from) is a new run: without its own --checkpoint-dir it is refused (it once
    # saved into, and pruned, the run it branched from); with one it saves there, keeping as many as
    # the recorded run, and the source stays as it was
    run_np 1 train "${flags[@]}" --steps 4 --checkpoint-dir "$tmp/ck" --checkpoint-every 1 --keep 2 --quiet
    before=$(ls "$tmp/ck" | tr '\n' ' ')
    expect_error "--resume-from '.*step-00000003' starts a new run from that checkpoint: give it its own --checkpoint-dir NEW or --run-dir NEW" \
      "$axonn" train --resume-from "$tmp/ck/step-00000003" --steps 5 --quiet
    run_np 1 train --resume-from "$tmp/ck/step-00000003" --steps 6 --quiet --checkpoint-dir "$tmp/branch"
    [ "$(ls "$tmp/branch" | tr '\n' ' ')" = "latest lock step-00000005 step-00000006 " ] || fail "left $(ls "$tmp/branch")"
    [ "$(ls "$tmp/ck" | tr '\n' ' ')" = "$before" ] || fail "the source changed: $before -> $(ls "$tmp/ck")" ;;
  watchdog_sigstop)
    # a rank stopped mid-run (SIGSTOP): the others' watchdogs report the collective they wait in and
    # the rank that does not answer, and the job ends within 40 s
    start_bg "$tmp/out" "$mpiexec" -n 4 --oversubscribe "$axonn" train "${flags[@]}" --grid 2,1,1,2 --steps 100000 \
      --quiet --metrics "$tmp/m.jsonl" --comm-timeout 20
    wait_lines "$tmp/m.jsonl" 10
    victim=$(rank_pids "$bg" | sort -n | sed -n 3p)
    r=$(rank_of "$victim")
    start=$(date +%s)
    kill -STOP "$victim"
    wait_rc "$bg"
    took=$(( $(date +%s) - start ))
    kill -9 "$victim" 2>/dev/null || true
    [ "$rc" -ne 0 ] || fail "the job exited 0"
    [ "$took" -le 40 ] || fail "the job took $took s to end, more than 40"
    expect_output "watchdog: [a-z_]+ #[0-9]+ of [0-9]+ [a-z0-9]+ on communicator '[a-z0-9]+' has waited 2[0-9] s \(--comm-timeout 20\) at step [0-9]+/100000"
    expect_output "watchdog:   ranks? ([0-9], )*$r(, [0-9])* did not answer within [0-9]+ s: stopped, hung or dead"
    echo "ok: rank $r stopped; the job ended $took s later, naming it" ;;
  kill9_rank)
    start_bg "$tmp/out" "$mpiexec" -n 4 --oversubscribe "$axonn" train "${flags[@]}" --grid 2,1,1,2 --steps 100000 \
      --quiet --metrics "$tmp/m.jsonl"
    wait_lines "$tmp/m.jsonl" 10
    victim=$(rank_pids "$bg" | sort -n | sed -n 2p)
    r=$(rank_of "$victim")
    start=$(date +%s)
    kill -9 "$victim"
    wait_rc "$bg"
    took=$(( $(date +%s) - start ))
    [ "$rc" -ne 0 ] || fail "the job exited 0"
    [ "$took" -le 30 ] || fail "the job took $took s to end, more than 30"
    expect_output "process rank $r .*exited on signal 9"
    echo "ok: rank $r killed; the job ended $took s later, naming it" ;;
  comm_timeout_flag)
    expect_error "--comm-timeout must be a finite number of seconds >= 0 \(0: no deadline\), got -1" \
      "$axonn" train --comm-timeout -1 ;;
  guard_skips_nonfinite)
    run_np 2 train "${flags[@]}" --grid 2,1,1,1 --steps 5 --metrics "$tmp/m.jsonl" --fault-nonfinite-grad 3
    expect_output "guard     step 3 skipped: its loss or gradient norm is not finite .*weights and optimizer untouched"
    expect_output "step +3/5 \| loss [0-9.]+ \| SKIPPED \(non-finite\)"
    expect_output "guard     1 step skipped since the run began"
    python3 - "$tmp/m.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r.get("skipped") for r in rows] == [None, None, "non-finite", None, None], rows
assert [r.get("skipped_steps", 0) for r in rows] == [0, 0, 1, 1, 1], rows
print("ok: step 3 skipped and counted in the metrics")
PY
    ;;
  guard_max_bad_steps)
    expect_error "guard     the last 2 steps \(to step 3\) were all skipped: the run stops. The weights are those of step 1" \
      "$mpiexec" -n 2 --oversubscribe "$axonn" train "${flags[@]}" --grid 1,1,1,2 --steps 8 --fault-nonfinite-grad 2,3 \
      --max-bad-steps 2 --checkpoint-dir "$tmp/ck"
    expect_no_output "step +4/8" ;;
  # --- the defects of the fault probe, each reproduced ---
  outputs_checked_first)
    # unwritable outputs fail before step 1, on every rank, not after training
    expect_error "cannot write --save '/nonexistent/final.bin'.*checked before training" \
      "$axonn" train "${flags[@]}" --steps 300 --save /nonexistent/final.bin
    expect_no_output "step +1/300"
    touch "$tmp/afile"
    expect_once 2 "cannot create checkpoint directory '$tmp/afile/ck'" \
      train "${flags[@]}" --grid 2,1,1,1 --steps 300 --checkpoint-dir "$tmp/afile/ck" --checkpoint-every 0
    expect_no_output "step +1/300"
    # a path whose format cannot be told (not .bin, .gguf or a directory)
    expect_error "--save '$tmp/w.pt': cannot tell the format from '.pt'" "$axonn" train "${flags[@]}" --steps 3 --save "$tmp/w.pt"
    expect_no_output "step +1/3" ;;
  outputs_read_only)
    # a read-only file system (root ignores file modes, not a read-only mount)
    mkdir -p "$tmp/ro"
    mount -t tmpfs -o ro,size=1m tmpfs "$tmp/ro" 2>/dev/null || { echo "skipped: cannot mount a tmpfs here"; exit 77; }
    trap 'umount "$tmp/ro" 2>/dev/null; rm -rf "$tmp" "$ompi_tmp"' EXIT
    expect_error "cannot (create|write).*'$tmp/ro/ck'.*Read-only file system" \
      "$axonn" train "${flags[@]}" --steps 300 --checkpoint-dir "$tmp/ro/ck"
    expect_no_output "step +1/300" ;;
  metrics_write_checked)
    expect_error "cannot write metrics file '/dev/full' after step 1: No space left on device" \
      "$axonn" train "${flags[@]}" --steps 5 --metrics /dev/full
    expect_once 2 "cannot write metrics file '/dev/full' after step 1" \
      train "${flags[@]}" --grid 1,1,1,2 --steps 5 --metrics /dev/full ;;
  nonfinite_weights_never_saved)
    # the fault probe's run: the update of step 1 overflows the weights to Inf
    run_np 1 train "${flags[@]}" --steps 2 --checkpoint-dir "$tmp/ck"
    expect_error "the state after step [0-9]+ holds [0-9]+ non-finite weights .* nothing was saved, the previous checkpoint stays the latest" \
      "$axonn" train --init "$model" --data "$tokens" --steps 3 --lr 3.4e38 --grad-clip 0 --weight-decay 0.5 --decay-all \
      --checkpoint-dir "$tmp/ck" --resume --allow-config-change --save "$tmp/w.bin" --max-bad-steps 0
    absent "$tmp/w.bin" "$tmp/ck/step-00000003"
    [ "$(cat "$tmp/ck/latest")" = step-00000002 ] || fail "latest moved to $(cat "$tmp/ck/latest")"
    run "$axonn" inspect "$tmp/ck"
    expect_error "the weights after step 1 hold [0-9]+ non-finite values .*--save '$tmp/w.bin' was not written" \
      "$axonn" train --init "$model" --data "$tokens" --steps 1 --lr 3.4e38 --grad-clip 0 --weight-decay 0.5 --decay-all \
      --save "$tmp/w.bin"
    absent "$tmp/w.bin" ;;
  checkpoint_dir_locked)
    start_bg "$tmp/a.out" "$axonn" train "${flags[@]}" --steps 100000 --checkpoint-dir "$tmp/ck" --checkpoint-every 50 \
      --metrics "$tmp/m.jsonl" --quiet
    wait_lines "$tmp/m.jsonl" 5
    expect_once 2 "checkpoint directory '$tmp/ck' is in use by another run \(pid $bg on host .*\): two runs writing" \
      train "${flags[@]}" --grid 1,1,1,2 --steps 10 --checkpoint-dir "$tmp/ck" --resume
    kill -TERM "$bg"
    wait_rc "$bg"
    [ "$rc" -eq 0 ] || fail "the first run exited $rc"
    run "$axonn" inspect "$tmp/ck"
    run_np 1 train --checkpoint-dir "$tmp/ck" --resume --exit-after-steps 1 --quiet  # the lock went with its run
    expect_output "stopped   by --exit-after-steps 1" ;;
  manifest_edited)
    run_np 1 train "${flags[@]}" --steps 2 --checkpoint-dir "$tmp/ck" --quiet
    python3 - "$tmp/ck/step-00000002/manifest.json" <<'PY'
import sys
p = sys.argv[1]
t = open(p).read()
assert '"num_heads": 4' in t
open(p, "w").write(t.replace('"num_heads": 4', '"num_heads": 2'))
PY
    expect_error "manifest '.*step-00000002/manifest.json' fails its own checksum .*: it was edited or is corrupt" \
      "$axonn" train --checkpoint-dir "$tmp/ck" --resume --steps 4
    expect_error "fails its own checksum" "$axonn" convert --from "$tmp/ck" --to "$tmp/m.bin"
    absent "$tmp/m.bin" ;;
  latest_followed)
    run_np 1 train "${flags[@]}" --steps 4 --checkpoint-dir "$tmp/ck" --checkpoint-every 2 --quiet
    rm "$tmp/ck/step-00000004/manifest.json"
    expect_error "'$tmp/ck/latest' names step-00000004, which is not a complete checkpoint \(its manifest.json is missing\)" \
      "$axonn" train --checkpoint-dir "$tmp/ck" --resume --steps 6
    rm -rf "$tmp/ck/step-00000004"
    expect_error "names step-00000004, which is missing" "$axonn" train --checkpoint-dir "$tmp/ck" --resume --steps 6
    echo "garbage" >"$tmp/ck/latest"
    expect_error "'$tmp/ck/latest' does not name a step" "$axonn" train --checkpoint-dir "$tmp/ck" --resume --steps 6
    rm "$tmp/ck/latest"  # no pointer at all: the newest committed step
    run_np 1 train --checkpoint-dir "$tmp/ck" --resume --steps 6 --quiet
    expect_output "resume    .*step-00000002: step 2" ;;
  bounded_allocations)
    expect_error "--synthetic-tokens 100000000000 needs 372.5 GiB of memory on every rank, more than half the .* free per rank" \
      "$axonn" train --synthetic-tokens 100000000000
    expect_error "--reduce-scatter-slots 2000000000 is more than the 8 weight-gradient blocks a step of this model has" \
      "$axonn" train --reduce-scatter-slots 2000000000
    expect_error "the model L=.* needs at least [0-9.]+ GiB per rank .*: use a smaller model" \
      "$axonn" train --layers 100000 --channels 4096 --heads 32
    # under a memory limit: a clear message, not std::bad_alloc
    expect_error "out of memory allocating [0-9]+ MiB for .*reduce --batch-size or --seq-len, or use more ranks" \
      bash -c "ulimit -v 2500000; exec \"\$@\"" _ "$axonn" train --model gpt2-124m --batch-size 16 --seq-len 128 --steps 1 \
      --peak-gflops 100
    expect_no_output "std::bad_alloc" ;;
  fifo_inputs)
    mkfifo "$tmp/f"
    expect_error "'$tmp/f' is a named pipe \(FIFO\), not a regular file" "$axonn" inspect "$tmp/f"
    expect_error "checkpoint '$tmp/f' is a named pipe" "$axonn" train --init "$tmp/f"
    expect_error "token shard '$tmp/f' is a named pipe" "$axonn" train --data "$tmp/f"
    expect_error "token shard '$tmp/f' is a named pipe" "$axonn" train --val-data "$tmp/f"
    expect_error "is a named pipe" "$axonn" convert --from "$tmp/f" --to "$tmp/x.bin"
    expect_error "machine file '$tmp/f' is a named pipe" "$axonn" plan --machine "$tmp/f" --model gpt2 --batch-size 8 --gpus 4 ;;
  sizes_without_overflow)
    expect_error "--vocab 2147483647 is too large: at most 2147483520" "$axonn" train --vocab 2147483647
    expect_no_output "padded vocabulary -"
    expect_error "--seed: must be a whole number from 0 to 18446744073709551615 \(unsigned 64 bits\), got -1" \
      "$axonn" train --seed -1
    expect_error "--data-seed: must be a whole number .*, got 18446744073709551616" "$axonn" train --data-seed 18446744073709551616
    expect_error "--seed: must be a whole number .*, got -5" "$axonn" generate --init "$tmp/none.bin" --seed -5
    # a 32-bit shard (llm.c's Llama-3 format) with an id of 2^31 or more: refused when opened
    python3 - "$tmp/t32.bin" <<'PY'
import struct, sys
toks = [1, 2, 3000000000, 4]
with open(sys.argv[1], "wb") as f:
    f.write(struct.pack("256i", 20240801, 7, len(toks), *([0] * 253)))
    f.write(struct.pack("%dI" % len(toks), *toks))
PY
    expect_error "token shard '$tmp/t32.bin' holds token id 3000000000 at position 2, outside the model's vocabulary of 500" \
      "$axonn" train --data "$tmp/t32.bin" ;;
  full_disk)
    # checkpoints into a 3 MB tmpfs (one takes 1.6 MiB): the second cannot be written. The run stops with
    # the error, the first stays the latest and loads; with --continue-on-save-error it trains on.
    mkdir -p "$tmp/small"
    mount -t tmpfs -o size=3m tmpfs "$tmp/small" 2>/dev/null || { echo "skipped: cannot mount a tmpfs here"; exit 77; }
    trap 'umount "$tmp/small" 2>/dev/null; rm -rf "$tmp" "$ompi_tmp"' EXIT
    expect_error "writing '$tmp/small/ck/step-00000004.tmp/.*' failed after [0-9]+ bytes: No space left on device" \
      "$axonn" train "${flags[@]}" --steps 8 --checkpoint-every 2 --checkpoint-dir "$tmp/small/ck"
    expect_no_output "step +5/8"
    [ "$(cat "$tmp/small/ck/latest")" = step-00000002 ] || fail "latest moved to $(cat "$tmp/small/ck/latest")"
    run "$axonn" convert --from "$tmp/small/ck" --to "$tmp/from-ck.bin"
    expect_output "checkpoint step 2,"
    rm -rf "$tmp/small/ck"
    # --continue-on-save-error: each failed save is reported, the run reaches its last step; its final
    # save fails too (the disk is still full), so it exits 1, with the latest checkpoint still step 2
    expect_exit 1 "$axonn" train "${flags[@]}" --steps 8 --checkpoint-every 2 --checkpoint-dir "$tmp/small/ck" \
      --continue-on-save-error
    expect_output "checkpoint at step 4 failed, training on \(--continue-on-save-error\); the latest checkpoint is still $tmp/small/ck/step-00000002"
    expect_output "checkpoint at step 6 failed, training on"
    expect_output "step +8/8"
    [ "$(cat "$tmp/small/ck/latest")" = step-00000002 ] || fail "latest moved to $(cat "$tmp/small/ck/latest")" ;;
  stop_sigterm_np1) stop_and_resume 1 TERM self ;;
  stop_sigint_np1) stop_and_resume 1 INT self ;;
  stop_sigterm_np4) stop_and_resume 4 TERM ranks ;;
  stop_sigusr1_mpirun_np4) stop_and_resume 4 USR1 mpirun ;;
  stop_sigterm_mpirun)
    # Open MPI's mpirun does not forward SIGTERM: it sends the ranks SIGCONT, then SIGTERM after
    # odls_base_sigkill_timeout seconds (default 1), SIGKILL as long again after that, and exits 1
    # (docs/resilience.md). With the timeout raised, the ranks' SIGTERM stop has time to checkpoint.
    # Constant lr: the trajectory does not depend on --steps, so a long run is compared with a short one.
    # Not --quiet: mpirun stops reading the ranks' output when signalled, and rank 0 writing its
    # progress lines must not block the stop (train/stop.cpp makes the outputs non-blocking).
    long=(--lr-schedule constant --grid 1,1,2,1 --steps 100000)
    start_bg "$tmp/run.out" env OMPI_MCA_odls_base_sigkill_timeout=5 "$mpiexec" -n 2 --oversubscribe "$axonn" train \
      "${flags[@]}" "${long[@]}" --metrics "$tmp/m.jsonl" --checkpoint-dir "$tmp/ck"
    wait_lines "$tmp/m.jsonl" 20
    kill -TERM "$bg"
    wait_rc "$bg"
    cp "$tmp/run.out" "$tmp/out"
    expect_output "stopped   by SIGTERM after step [0-9]+ of 100000; checkpoint"
    echo "ok: mpirun exited $rc after the ranks' graceful stop"
    at=$(grep -Eo "after step [0-9]+ of" "$tmp/out" | grep -Eo "[0-9]+" | head -1)
    run_np 2 train --checkpoint-dir "$tmp/ck" --resume --exit-after-steps 5 --metrics "$tmp/m.jsonl"
    expect_output "stopped   by --exit-after-steps 5 after step $((at + 5)) of 100000"
    run_np 2 train "${flags[@]}" --lr-schedule constant --grid 1,1,2,1 --steps $((at + 5)) --quiet --metrics "$tmp/ref.jsonl"
    losses_equal "$tmp/ref.jsonl" "$tmp/m.jsonl" ;;
  stop_second_signal)
    # a step of ~0.4 s: the second SIGTERM arrives during the step the first asked to finish
    start_bg "$tmp/out" "$axonn" train --channels 256 --layers 4 --batch-size 16 --seq-len 64 --steps 100 \
      --peak-gflops 100 --checkpoint-dir "$tmp/ck"
    for i in $(seq 300); do grep -q "step     2/100" "$tmp/out" && break; sleep 0.1; done
    kill -TERM "$bg"
    sleep 0.05
    kill -TERM "$bg"
    wait_rc "$bg"
    [ "$rc" -eq 143 ] || fail "exit code $rc, not 143 (killed by the second SIGTERM)"
    absent "$tmp/ck/step-00000100"
    expect_no_output "stopped   by"
    echo "ok: the second SIGTERM ended the run at once (exit 143)" ;;
  stop_without_checkpoint_dir)
    start_bg "$tmp/out" "$axonn" train "${flags[@]}" --steps 100000 --metrics "$tmp/m.jsonl"
    wait_lines "$tmp/m.jsonl" 5
    kill -TERM "$bg"
    wait_rc "$bg"
    [ "$rc" -eq 143 ] || fail "exit code $rc, not 143: nothing was saved"
    expect_output "stopped   by SIGTERM after step [0-9]+ of 100000; no --checkpoint-dir: nothing to resume from" ;;
  exit_after_steps)
    run_np 2 train "${flags[@]}" --grid 1,1,1,2 --steps 30 --quiet --metrics "$tmp/ref.jsonl"
    run_np 2 train "${flags[@]}" --grid 1,1,1,2 --steps 30 --quiet --metrics "$tmp/m.jsonl" --checkpoint-dir "$tmp/ck" \
      --exit-after-steps 12
    expect_output "stopped   by --exit-after-steps 12 after step 12 of 30; checkpoint .*step-00000012"
    run_np 2 train --checkpoint-dir "$tmp/ck" --resume --exit-after-steps 12 --metrics "$tmp/m.jsonl"
    expect_output "stopped   by --exit-after-steps 12 after step 24 of 30"
    run_np 2 train --checkpoint-dir "$tmp/ck" --resume --exit-after-steps 12 --metrics "$tmp/m.jsonl"
    expect_no_output "stopped   by"
    losses_equal "$tmp/ref.jsonl" "$tmp/m.jsonl" ;;
  exit_after_minutes)
    run_np 1 train "${flags[@]}" --steps 100000 --quiet --checkpoint-dir "$tmp/ck" --exit-after-minutes 0.02
    expect_output "stopped   by --exit-after-minutes 0.02 after step [0-9]+ of 100000; checkpoint" ;;
  stop_signal_flag)
    expect_error "--stop-signal 'KILL': use USR1, USR2, HUP or none" "$axonn" train --stop-signal KILL
    expect_error "--exit-after-steps must be >= 0" "$axonn" train --exit-after-steps -1
    start_bg "$tmp/out" "$axonn" train "${flags[@]}" --steps 100000 --metrics "$tmp/m.jsonl" --checkpoint-dir "$tmp/ck" \
      --stop-signal USR2
    wait_lines "$tmp/m.jsonl" 5
    kill -USR2 "$bg"
    wait_rc "$bg"
    [ "$rc" -eq 0 ] || fail "exit code $rc after SIGUSR2"
    expect_output "stop      SIGTERM, SIGINT, SIGUSR2: every rank stops after the current step"
    expect_output "stopped   by SIGUSR2" ;;
  # --- a run writes only to its own outputs (issue 32; docs/resilience.md, "What a command writes")
  own_trace_on_resume)
    # resuming in a run directory keeps the trace it has, and says nothing of a --trace-steps never given
    run_np 1 train "${flags[@]}" --steps 10 --run-dir "$tmp/rr"
    before=$(md5sum <"$tmp/rr/trace.json")
    run_np 1 train "${flags[@]}" --steps 20 --run-dir "$tmp/rr" --resume
    [ "$(md5sum <"$tmp/rr/trace.json")" = "$before" ] || fail "the resumed run changed trace.json"
    expect_no_output "trace-steps"
    run "$axonn" report "$tmp/rr"
    # a window after the resumed step goes to a file beside the first trace
    run_np 1 train --steps 30 --run-dir "$tmp/rr" --resume --trace-steps 22:23
    [ "$(md5sum <"$tmp/rr/trace.json")" = "$before" ] || fail "the second resume changed trace.json"
    check "no trace beside it" test -s "$tmp/rr/trace-from-step-21.json"
    run "$axonn" report "$tmp/rr" ;;
  own_copied_run)
    # a copied or renamed run resumes into its own directory; a branch writes only under its own outputs
    run_np 1 train "${flags[@]}" --steps 10 --run-dir "$tmp/c1" --save "$tmp/final.bin" --quiet
    cp -a "$tmp/c1" "$tmp/c2"
    sums() { (cd "$1" && find . -type f ! -name lock -exec md5sum {} + | sort); }
    before=$(sums "$tmp/c1"; md5sum "$tmp/final.bin")
    run_np 1 train --steps 20 --run-dir "$tmp/c2" --resume --quiet
    expect_output "resume    the checkpoint's run wrote to .*c1/checkpoints.*this run writes only where its own flags"
    check "c2 was not continued" test -d "$tmp/c2/checkpoints/step-00000020"
    [ "$(wc -l <"$tmp/c2/metrics.jsonl")" -eq 20 ] || fail "c2's metrics hold $(wc -l <"$tmp/c2/metrics.jsonl") lines"
    mv "$tmp/c2" "$tmp/renamed"
    run_np 1 train --steps 24 --run-dir "$tmp/renamed" --resume --quiet
    check "the renamed run was not continued" test -d "$tmp/renamed/checkpoints/step-00000024"
    run_np 1 train --resume-from "$tmp/c1/checkpoints/step-00000010" --run-dir "$tmp/b" --steps 14 --lr 5e-2 \
      --allow-config-change --quiet
    check "the branch did not save" test -d "$tmp/b/checkpoints/step-00000014"
    [ "$(sums "$tmp/c1"; md5sum "$tmp/final.bin")" = "$before" ] || fail "c1 or its --save changed" ;;
  own_crafted_manifest)
    # a checkpoint whose manifest names other files as its run's outputs (checksum repaired) writes none of them
    run_np 1 train "${flags[@]}" --steps 2 --checkpoint-dir "$tmp/evil" --quiet
    echo precious1 >"$tmp/victim1"
    echo precious2 >"$tmp/victim2"
    man=$tmp/evil/step-00000002/manifest.json
    python3 - "$man" "$tmp/victim1" "$tmp/victim2" <<'PY'
import json, sys
p, v1, v2 = sys.argv[1:]
j = json.load(open(p))
j["extra"]["metrics"], j["extra"]["save"], j["extra"]["checkpoint_dir"] = v1, v2, v1 + ".d"
open(p, "w").write(json.dumps(j, indent=2) + "\n")
PY
    expect_error "fails its own checksum" "$axonn" train --resume-from "$tmp/evil" --checkpoint-dir "$tmp/mine" --steps 4
    actual=$(grep -Eo "xxh3_64 [0-9a-f]{16}" "$tmp/out" | head -1 | cut -d' ' -f2)
    python3 - "$man" "$actual" <<'PY'
import json, sys
p, h = sys.argv[1:]
j = json.load(open(p))
j["manifest_xxh3"] = h
open(p, "w").write(json.dumps(j, indent=2) + "\n")
PY
    run_np 1 train --resume-from "$tmp/evil" --checkpoint-dir "$tmp/mine" --steps 4 --quiet
    check "the run did not save into its own --checkpoint-dir" test -d "$tmp/mine/step-00000004"
    [ "$(cat "$tmp/victim1") $(cat "$tmp/victim2")" = "precious1 precious2" ] || fail "a victim file was written"
    absent "$tmp/victim1.d" ;;
  own_fresh_into_other_checkpoints)
    run_np 1 train "${flags[@]}" --steps 30 --checkpoint-dir "$tmp/ck" --checkpoint-every 10 --quiet
    expect_error "--checkpoint-dir '$tmp/ck' holds 3 checkpoints of a run \(steps 10 to 30\): this run would replace what another run wrote" \
      "$axonn" train "${flags[@]}" --steps 10 --checkpoint-dir "$tmp/ck"
    [ "$(cat "$tmp/ck/latest")" = step-00000030 ] || fail "latest moved to $(cat "$tmp/ck/latest")"
    # nor as a run directory (its checkpoints would go to ck/checkpoints, beside the other run's steps)
    expect_error "--run-dir '$tmp/ck' is a checkpoint directory \(another run's --checkpoint-dir\)" \
      "$axonn" train "${flags[@]}" --steps 10 --run-dir "$tmp/ck"
    [ ! -e "$tmp/ck/checkpoints" ] && [ ! -e "$tmp/ck/config.toml" ] || fail "the refused run wrote into $tmp/ck"
    run_np 1 train "${flags[@]}" --steps 10 --checkpoint-dir "$tmp/ck" --overwrite --quiet
    expect_output "overwrite .*3 checkpoints and 0 trace files removed"
    [ "$(ls "$tmp/ck" | tr '\n' ' ')" = "latest lock step-00000010 " ] || fail "left $(ls "$tmp/ck")"
    # --overwrite never deletes what the run reads
    expect_error "--overwrite would delete the checkpoints of --checkpoint-dir '$tmp/ck', and --resume-from" \
      "$axonn" train --resume-from "$tmp/ck/step-00000010" --checkpoint-dir "$tmp/ck" --overwrite --steps 12
    check "the source went" test -d "$tmp/ck/step-00000010" ;;
  own_config_rerun)
    # the run directory's config.toml rerun under another --run-dir never replaces the first run's --save
    run_np 1 train "${flags[@]}" --steps 3 --run-dir "$tmp/r1" --save "$tmp/final.bin" --quiet
    before=$(md5sum <"$tmp/final.bin")
    expect_error "--save '$tmp/final.bin' exists: this run would replace what another run wrote" \
      "$axonn" train --config "$tmp/r1/config.toml" --run-dir "$tmp/r2"
    [ "$(md5sum <"$tmp/final.bin")" = "$before" ] || fail "final.bin changed"
    run_np 1 train --config "$tmp/r1/config.toml" --run-dir "$tmp/r2" --save "$tmp/final2.bin" --quiet
    check "no final2.bin" test -s "$tmp/final2.bin" ;;
  own_model_apart_from_checkpoints)
    # a Hugging Face model directory written into a checkpoint directory was read by --init in the checkpoints'
    # place: `convert --from ck --to ck/` then `train --resume` to step 5 left `generate --init ck` on step 3's weights
    # (now refused as an output inside its input too; a model from elsewhere into ck/ is this check's)
    run_np 1 train "${flags[@]}" --steps 3 --checkpoint-dir "$tmp/ck" --quiet
    listing=$(ls -R "$tmp/ck")
    expect_error "'$tmp/ck/' is a checkpoint directory: a Hugging Face model written there would be read in the checkpoints' place" \
      "$axonn" convert --from "$model" --to "$tmp/ck/"
    expect_error "'$tmp/ck/step-00000003/' is a checkpoint directory" "$axonn" convert --from "$model" --to "$tmp/ck/step-00000003/"
    expect_error "--save '$tmp/ck/' is a checkpoint directory \(this run's --checkpoint-dir\)" \
      "$axonn" train "${flags[@]}" --steps 5 --checkpoint-dir "$tmp/ck" --save "$tmp/ck/" --resume
    expect_error "--save '$tmp/ck' is a checkpoint directory" "$axonn" train "${flags[@]}" --steps 2 --save "$tmp/ck"
    [ "$(ls -R "$tmp/ck")" = "$listing" ] || fail "the checkpoint directory changed: $(ls -R "$tmp/ck")"
    # the other way round: checkpoints into a model's directory, and --save into a fresh run's --checkpoint-dir
    run "$axonn" convert --from "$tmp/ck" --to "$tmp/hf/"
    expect_error "--checkpoint-dir '$tmp/hf' holds a Hugging Face model \(config.json and its weights\)" \
      "$axonn" train "${flags[@]}" --steps 2 --checkpoint-dir "$tmp/hf" --overwrite
    expect_error "--save '$tmp/new/' is a checkpoint directory \(this run's --checkpoint-dir\)" \
      "$axonn" train "${flags[@]}" --steps 2 --checkpoint-dir "$tmp/new" --save "$tmp/new/"
    [ ! -e "$tmp/new/latest" ] || fail "the refused run wrote a checkpoint"
    # a directory that holds both (made by hand, or by an older axonn) is refused by every reader, naming both
    cp "$tmp/hf/config.json" "$tmp/hf/model.safetensors" "$tmp/ck/"
    for cmd in "generate --init $tmp/ck --prompt-ids 1,2 --max-new-tokens 2" "convert --from $tmp/ck --to $tmp/m.bin" \
               "inspect $tmp/ck" "train ${flags[*]/$model/$tmp/ck} --steps 1"; do
      # shellcheck disable=SC2086  # the command's words
      expect_error "'$tmp/ck' holds both a Hugging Face model \(config.json and its weights\) and the checkpoint of step 3: which one to read is not clear. Name a step directory" \
        "$axonn" $cmd
    done
    run "$axonn" generate --init "$tmp/ck/step-00000003" --prompt-ids 1,2 --max-new-tokens 2 --print-ids ;;
  own_outputs_apart_every_command)
    # report, tokenizer train, memorization and convert wrote over what they read: `report RUN --out
    # RUN/metrics.jsonl` replaced the run's metrics with the page, `tokenizer train --output c.txt c.txt` and
    # `memorization --output doc.txt doc.txt` their input text, each exit 0
    run_np 1 train "${flags[@]}" --steps 2 --run-dir "$tmp/r" --quiet
    for i in $(seq 300); do echo "line $i: alpha beta gamma delta epsilon $i$i"; done >"$tmp/doc.txt"
    mkdir "$tmp/corpus" && cp "$tmp/doc.txt" "$tmp/corpus/"
    cp "$model" "$tmp/m.bin"
    run "$axonn" convert --from "$tmp/m.bin" --to "$tmp/hf/"
    sums() { md5sum "$tmp/r/metrics.jsonl" "$tmp/r/config.toml" "$tmp/doc.txt" "$tmp/m.bin" "$tmp/hf/model.safetensors"; }
    before=$(sums)
    expect_error "--out '$tmp/r/metrics.jsonl' is the metrics '$tmp/r/metrics.jsonl', which this command reads: writing it would destroy the input" \
      "$axonn" report "$tmp/r" --out "$tmp/r/metrics.jsonl"
    expect_error "--png '$tmp/r/config.toml' is the run's configuration" "$axonn" report "$tmp/r" --png "$tmp/r/config.toml"
    expect_error "--png '$tmp/x.html' and --out '$tmp/x.html' are the same file" \
      "$axonn" report "$tmp/r" --out "$tmp/x.html" --png "$tmp/x.html"
    expect_error "--output '$tmp/doc.txt' is the input '$tmp/doc.txt', which this command reads" \
      "$axonn" tokenizer train --vocab-size 300 --output "$tmp/doc.txt" "$tmp/doc.txt"
    expect_error "--output '$tmp/corpus/tok.model' lies inside the input '$tmp/corpus', which this command reads" \
      "$axonn" tokenizer train --vocab-size 300 --output "$tmp/corpus/tok.model" "$tmp/corpus"
    expect_error "--output '$tmp/doc.txt' is the input '$tmp/doc.txt', which this command reads" \
      "$axonn" memorization --init "$tmp/m.bin" --output "$tmp/doc.txt" "$tmp/doc.txt"
    expect_error "--output '$tmp/m.bin' is --init '$tmp/m.bin', which this command reads" \
      "$axonn" memorization --init "$tmp/m.bin" --output "$tmp/m.bin" "$tmp/doc.txt"
    expect_error "--to '$tmp/m.bin' is --from '$tmp/m.bin', which this command reads" \
      "$axonn" convert --from "$tmp/m.bin" --to "$tmp/m.bin"
    expect_error "--to '$tmp/hf/' is --from '$tmp/hf/'" "$axonn" convert --from "$tmp/hf/" --to "$tmp/hf/" --dtype bf16
    expect_error "--to '$tmp/r/checkpoints/m.bin' lies inside --from '$tmp/r/checkpoints'" \
      "$axonn" convert --from "$tmp/r/checkpoints" --to "$tmp/r/checkpoints/m.bin"
    # a file output that names a directory: refused before any work (it failed at the end, "cannot rename")
    expect_error "--out '$tmp/r' is a directory: give the path of a file to write" "$axonn" report "$tmp/r" --out "$tmp/r"
    expect_error "--output '$tmp/corpus/' is a directory" "$axonn" memorization --init "$tmp/m.bin" --output "$tmp/corpus/" \
      "$tmp/doc.txt"
    expect_error "--out '$tmp/corpus' is a directory" "$axonn" calibrate --quick --out "$tmp/corpus"
    [ "$(sums)" = "$before" ] || fail "an input changed: $(diff <(echo "$before") <(sums))"
    [ ! -e "$tmp/corpus/tok.model" ] && [ ! -e "$tmp/x.html" ] || fail "a refused command wrote its output"
    # the defaults still write where they did
    run "$axonn" report "$tmp/r"
    check "no report.html" test -s "$tmp/r/report.html"
    run "$axonn" tokenizer train --vocab-size 300 --output "$tmp/tok.model" "$tmp/corpus"
    # an output that is a device or a named pipe: a new file renamed over it would replace it (`calibrate --out
    # /dev/null`, as root, replaced the system's /dev/null); shown on a pipe of the test's own, which must stay one
    mkfifo "$tmp/pipe"
    expect_error "--out '$tmp/pipe' is a named pipe \(FIFO\), not a regular file: an output is written as a new file" \
      "$axonn" report "$tmp/r" --out "$tmp/pipe"
    expect_error "'$tmp/pipe' is a named pipe \(FIFO\), not a regular file" \
      "$axonn" convert --from "$tmp/m.bin" --to "$tmp/pipe" --format llmc
    [ -p "$tmp/pipe" ] || fail "the named pipe was replaced by a file"
    [ ! -e "$tmp/pipe.tmp" ] || fail "a temporary file was made beside the pipe" ;;
  own_output_is_input)
    cp "$tokens" "$tmp/tok.bin"
    cp "$model" "$tmp/m.bin"
    expect_error "--metrics 'tok.bin' is --data '.*tok.bin', which this command reads: writing it would destroy the input" \
      bash -c "cd '$tmp' && '$axonn' train --data '$tmp/tok.bin' --metrics tok.bin --steps 2"
    expect_error "--metrics '$tmp/m.bin' is --init '$tmp/m.bin', which this command reads" \
      "$axonn" train --init "$tmp/m.bin" --metrics "$tmp/m.bin" --steps 2
    expect_error "--save '$tmp/m.bin' is --init '$tmp/m.bin', which" "$axonn" train --init "$tmp/m.bin" --save "$tmp/m.bin" --steps 2
    expect_error "--trace '$tmp/x' and --metrics '$tmp/x' are the same file" \
      "$axonn" train --metrics "$tmp/x" --trace "$tmp/x" --steps 2
    cmp -s "$tokens" "$tmp/tok.bin" || fail "the shard changed"
    cmp -s "$model" "$tmp/m.bin" || fail "the model changed"
    # a data directory is an input too: no checkpoints, run directory or file go into it (prepare --overwrite
    # would take them with the data), and the refused run makes no directory there
    mkdir "$tmp/data" && cp "$tokens" "$tmp/data/train_000000.bin"
    data_flags=(--init "$model" --data "$tmp/data" --batch-size 2 --seq-len 16 --steps 1)
    expect_error "--checkpoint-dir '$tmp/data' is --data '$tmp/data', which this command reads" \
      "$axonn" train "${data_flags[@]}" --checkpoint-dir "$tmp/data"
    expect_error "--run-dir '$tmp/data/run' lies inside --data '$tmp/data', which this command reads: an output never goes into an input" \
      "$axonn" train "${data_flags[@]}" --run-dir "$tmp/data/run"
    expect_error "--metrics '$tmp/data/m.jsonl' lies inside --data '$tmp/data'" \
      "$axonn" train "${data_flags[@]}" --metrics "$tmp/data/m.jsonl"
    [ "$(ls "$tmp/data")" = train_000000.bin ] || fail "the data directory holds $(ls "$tmp/data")" ;;
  own_run_dir_locked)
    # two runs in one run directory, each with its own checkpoints: the second is refused at once
    start_bg "$tmp/a.out" "$axonn" train "${flags[@]}" --steps 100000 --run-dir "$tmp/rr" --checkpoint-dir "$tmp/ck1" \
      --quiet
    wait_lines "$tmp/rr/metrics.jsonl" 5
    expect_once 2 "run directory '$tmp/rr' is in use by another run \(pid $bg on host .*\): two runs writing" \
      train "${flags[@]}" --steps 10 --run-dir "$tmp/rr" --checkpoint-dir "$tmp/ck2" --resume
    kill -TERM "$bg"
    wait_rc "$bg"
    [ "$rc" -eq 0 ] || fail "the first run exited $rc"
    python3 -c "import json, sys; [json.loads(l) for l in open(sys.argv[1])]" "$tmp/rr/metrics.jsonl" ||
      fail "the metrics are not whole lines" ;;
  own_links_not_followed)
    mkdir -p "$tmp/ck" "$tmp/rr"
    echo precious >"$tmp/victim"
    ln -s "$tmp/victim" "$tmp/ck/lock"
    expect_error "the lock '$tmp/ck/lock' of checkpoint directory '$tmp/ck' is a symbolic link" \
      "$axonn" train "${flags[@]}" --steps 2 --checkpoint-dir "$tmp/ck"
    rm "$tmp/ck/lock"
    ln -s "$tmp/victim" "$tmp/ck/latest.tmp"
    run_np 1 train "${flags[@]}" --steps 2 --checkpoint-dir "$tmp/ck" --quiet
    ln -s "$tmp/victim" "$tmp/rr/metrics.jsonl"
    expect_error "--metrics '$tmp/rr/metrics.jsonl' is a symbolic link: axonn never writes through a link" \
      "$axonn" train "${flags[@]}" --steps 2 --run-dir "$tmp/rr"
    [ "$(cat "$tmp/victim")" = precious ] || fail "the link's target was written" ;;
  stop_during_validation)
    # a stop during a long validation pass ends it at the next batch, and the run checkpoints
    start_bg "$tmp/out" "$axonn" train "${flags[@]}" --steps 100 --val-data "$tokens" --val-every 2 --val-batches 100000 \
      --checkpoint-dir "$tmp/ck"
    for i in $(seq 300); do grep -q "step     1/100" "$tmp/out" && break; sleep 0.1; done
    sleep 1  # inside the pass after step 2 (100,000 batches: minutes)
    start=$(date +%s%N)
    kill -TERM "$bg"
    wait_rc "$bg"
    took_ms=$((($(date +%s%N) - start) / 1000000))
    [ "$rc" -eq 0 ] || fail "exit code $rc"
    expect_output "validate  stopped after [0-9]+ of 100000 batches by SIGTERM"
    expect_output "stopped   by SIGTERM after step [0-9] of 100; checkpoint"
    [ "$took_ms" -lt 10000 ] || fail "the stop took $took_ms ms"
    echo "ok: stopped in $took_ms ms" ;;
  data_flag_empty)
    expect_error "--data is empty \(an unset variable\?\)" "$axonn" train --data '' --steps 2
    expect_error "--beta1 must be in \[0, 1\)" "$axonn" train --beta1 1.5 --print-config
    expect_error "--eps must be a finite value > 0" "$axonn" train --eps -1 --print-config ;;
  data_changed_refused)
    # a checkpoint knows its data: re-prepared, edited, shrunk or removed shards are refused on resume
    mkdir -p "$tmp/data"
    cp "$tokens" "$tmp/data/train_000000.bin"
    cp "$tokens" "$tmp/data/train_000001.bin"
    run_np 1 train "${flags[@]/#$tokens/$tmp/data}" --steps 4 --checkpoint-dir "$tmp/ck" --quiet
    python3 -c "import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[5000] ^= 1; open(p, 'wb').write(b)" \
      "$tmp/data/train_000001.bin"
    expect_error "the data changed since checkpoint '.*step-00000004' was written: shard 'train_000001.bin' holds other tokens \(same size\)" \
      "$axonn" train --checkpoint-dir "$tmp/ck" --resume --steps 8
    rm "$tmp/data/train_000001.bin"
    expect_error "the data changed .*: 1 shard, was 2" "$axonn" train --checkpoint-dir "$tmp/ck" --resume --steps 8
    absent "$tmp/ck/step-00000008"
    run_np 1 train --checkpoint-dir "$tmp/ck" --resume --steps 8 --allow-data-change --quiet
    expect_output "the data changed since the checkpoint \(1 shard, was 2\): --allow-data-change, so the run continues"
    check "no step 8" test -d "$tmp/ck/step-00000008" ;;
  shard_truncated_while_training)
    # a shard cut short under a running job: a clear error (not SIGBUS), and the last checkpoint stays
    cp "$tokens" "$tmp/t.bin"
    start_bg "$tmp/out" "$axonn" train "${flags[@]/#$tokens/$tmp/t.bin}" --steps 100000 --checkpoint-dir "$tmp/ck" \
      --checkpoint-every 20 --metrics "$tmp/m.jsonl" --quiet
    wait_lines "$tmp/m.jsonl" 30
    truncate -s 2048 "$tmp/t.bin"
    wait_rc "$bg"
    [ "$rc" -ge 1 ] && [ "$rc" -le 2 ] || fail "exit code $rc (want a clear error, 1)"
    expect_output "token shard '$tmp/t.bin' changed while the run read it \(41024 bytes when the run opened it, 2048 now\)"
    expect_no_output "Bus error|SIGBUS|backtrace"
    run "$axonn" inspect "$tmp/ck" ;;
  resume_more_steps_replans)
    # more --steps on resume re-plan a decaying schedule: said with the learning rates (issue 35)
    run_np 1 train "${flags[@]}" --steps 10 --checkpoint-dir "$tmp/ck" --quiet
    run_np 1 train --checkpoint-dir "$tmp/ck" --resume --steps 20 --quiet
    expect_output "warning: resume    --steps 20 \(the checkpoint's run had 10\) re-plans the cosine schedule over 20 steps: the learning rate of step 11 is [0-9.e-]+, where the recorded run would have had [0-9.e-]+; to keep the recorded schedule, add --lr-decay-steps 10"
    # the other choice: the recorded run's horizon kept, the steps beyond it at the decay's end (--min-lr-frac 0.1
    # of --lr 2e-3); recorded in the checkpoint, so that a later resume keeps it without the flag
    run_np 1 train "${flags[@]}" --steps 10 --checkpoint-dir "$tmp/ck3" --quiet
    run_np 1 train --checkpoint-dir "$tmp/ck3" --resume --steps 20 --lr-decay-steps 10 --metrics "$tmp/keep.jsonl" --quiet
    expect_no_output "re-plans"
    python3 - "$tmp/keep.jsonl" <<'PY' || fail "the kept schedule's learning rates differ"
import json, sys
lrs = [json.loads(l)["lr"] for l in open(sys.argv[1])]
assert len(lrs) == 10 and all(abs(x - 2e-4) < 1e-9 for x in lrs), lrs
PY
    run_np 1 train --checkpoint-dir "$tmp/ck3" --resume --steps 30 --quiet
    expect_no_output "re-plans"
    run_np 1 train "${flags[@]}" --lr-schedule constant --steps 10 --checkpoint-dir "$tmp/ck2" --quiet
    run_np 1 train --checkpoint-dir "$tmp/ck2" --resume --steps 20 --quiet
    expect_no_output "re-plans" ;;
  *) fail "unknown case $case_name" ;;
esac
