#!/usr/bin/env bash
# CLI tests of sharded checkpoints in `axonn train` and `axonn convert`: bad checkpoints refused once
# on every rank (exit 1..123, the message printed once), kill -9 of a rank in the middle of a save,
# --keep, --resume with nothing to resume, and weights through sharded checkpoints, HF safetensors and
# --init DIR compared byte for byte (lr 0 leaves the weights as they are).
# Usage: cli_checkpoint.sh CASE AXONN_BIN REFERENCE_DIR MPIEXEC
case_name=$1 axonn=$2 ref=$3 mpiexec=${4:-mpiexec}
. "$(dirname "$0")/../common.sh"
model=$ref/gpt2-tiny/model.bin tokens=$ref/gpt2-tiny/tokens.bin
flags=(--init "$model" --data "$tokens" --batch-size 4 --seq-len 32 --lr 3e-3 --warmup-steps 2 --weight-decay 0.1
       --grad-clip 0.5 --peak-gflops 100 --quiet)

# A 2-rank run on grid 2,1,1,1 with checkpoints at steps 2 and 4 in $tmp/ck.
two_rank_checkpoints() { run_np 2 train "${flags[@]}" --grid 2,1,1,1 --steps 4 --checkpoint-dir "$tmp/ck" --checkpoint-every 2; }

case $case_name in
  refuse_corrupt)
    # rank 1 alone reads tp-x1-y0-z0; both ranks refuse, the message once
    two_rank_checkpoints
    python3 -c "import sys; p = sys.argv[1]; b = bytearray(open(p, 'rb').read()); b[len(b) // 2] ^= 1; \
open(p, 'wb').write(b)" "$tmp/ck/step-00000004/tp-x1-y0-z0.safetensors"
    expect_once 2 "file 'tp-x1-y0-z0.safetensors' fails its checksum.*corrupt" \
      train "${flags[@]}" --grid 2,1,1,1 --steps 6 --checkpoint-dir "$tmp/ck" --resume ;;
  refuse_truncated)
    two_rank_checkpoints
    truncate -s -1000 "$tmp/ck/step-00000004/tp-x0-y0-z0.safetensors"
    expect_once 2 "file 'tp-x0-y0-z0.safetensors' is [0-9]+ bytes, the manifest says [0-9]+: the file is truncated" \
      train "${flags[@]}" --grid 1,1,2,1 --steps 6 --resume-from "$tmp/ck" --checkpoint-dir "$tmp/branch" ;;
  refuse_mismatched)
    run_np 2 train --channels 32 --steps 2 --quiet --peak-gflops 100 --checkpoint-dir "$tmp/ck"
    expect_once 2 "checkpoint '.*step-00000002' is for the model L=2 NH=4 C=32 .*, not L=2 NH=4 C=64" \
      train --model gpt2-tiny --steps 4 --quiet --checkpoint-dir "$tmp/ck" --resume ;;
  refuse_incomplete)
    two_rank_checkpoints
    # a save that never committed: no manifest, or still under its .tmp name
    cp -r "$tmp/ck/step-00000004" "$tmp/ck/step-00000006.tmp"
    rm "$tmp/ck/step-00000004/manifest.json"
    expect_once 2 "checkpoint '.*step-00000004' has no manifest.json: the save did not complete" \
      train "${flags[@]}" --grid 2,1,1,1 --steps 6 --resume-from "$tmp/ck/step-00000004" --checkpoint-dir "$tmp/branch"
    expect_once 2 "is an unfinished save" \
      train "${flags[@]}" --grid 2,1,1,1 --steps 6 --resume-from "$tmp/ck/step-00000006.tmp" --checkpoint-dir "$tmp/branch"
    # a file gone
    rm "$tmp/ck/step-00000002/tp-x1-y0-z0.safetensors"
    expect_once 2 "file 'tp-x1-y0-z0.safetensors' is missing" \
      train "${flags[@]}" --grid 2,1,1,1 --steps 6 --resume-from "$tmp/ck/step-00000002" --checkpoint-dir "$tmp/branch" ;;
  kill9_during_save)
    # The uninterrupted run, then the same run saving every step, SIGKILLed (one rank) while a save is
    # in progress; the checkpoint left behind must verify, and resuming from it must give the
    # uninterrupted losses bit for bit.
    steps=60
    run_np 2 train "${flags[@]}" --grid 1,1,2,1 --steps $steps --metrics "$tmp/ref.jsonl"
    for attempt in 1 2 3; do
      rm -rf "$tmp/ck"
      "$mpiexec" -n 2 --oversubscribe "$axonn" train "${flags[@]}" --grid 1,1,2,1 --steps $steps \
        --checkpoint-dir "$tmp/ck" --checkpoint-every 1 --keep 2 >"$tmp/run.out" 2>&1 &
      mpi=$!
      # kill rank 1 the moment a save is under way (a step-N.tmp directory) after three have committed
      # (so that --keep 2 has pruned)
      if python3 - "$tmp/ck" "$mpi" <<'PY'
import os, signal, subprocess, sys, time
root, mpi = sys.argv[1], int(sys.argv[2])
deadline = time.time() + 60
# the ranks' pids first: `ps` takes milliseconds, longer than a save of this model, so it must not
# sit between seeing a save in progress and the kill
ranks = []
while len(ranks) != 2 and time.time() < deadline:
    ranks = subprocess.run(["ps", "-o", "pid=", "--ppid", str(mpi)], capture_output=True, text=True).stdout.split()
    time.sleep(0.01)
while time.time() < deadline:
    try:
        names = os.listdir(root)
    except FileNotFoundError:
        names = []
    try:
        latest = int(open(os.path.join(root, "latest")).read().strip()[len("step-"):])
    except (OSError, ValueError):
        latest = 0
    if latest >= 3 and any(n.endswith(".tmp") and n.startswith("step-") for n in names):
        if len(ranks) == 2:
            os.kill(int(sorted(ranks, key=int)[1]), signal.SIGKILL)
            print("killed rank pid", sorted(ranks, key=int)[1], "during", [n for n in names if n.endswith(".tmp")])
            sys.exit(0)
    time.sleep(0.0002)
sys.exit("never saw a save in progress")
PY
      then :; else kill "$mpi" 2>/dev/null || true; fail "no kill during a save (see above)"; fi
      rc=0
      wait $mpi || rc=$?
      [ "$rc" -ne 0 ] || { cat "$tmp/run.out"; fail "the killed job exited 0"; }
      if ls -d "$tmp"/ck/step-*.tmp >/dev/null 2>&1; then break; fi
      echo "the kill landed after the commit; again"
    done
    ls "$tmp/ck"
    ls -d "$tmp"/ck/step-*.tmp >/dev/null 2>&1 || fail "never killed during a save"
    # what is left verifies (checksums of every file of the latest committed step)
    run "$axonn" inspect "$tmp/ck"
    expect_output "checkpoint root"
    # and resumes, bit for bit
    run_np 2 train "${flags[@]}" --grid 1,1,2,1 --steps $steps --checkpoint-dir "$tmp/ck" --resume \
      --metrics "$tmp/resumed.jsonl"
    expect_output "resume    .*step-"
    python3 - "$tmp/ref.jsonl" "$tmp/resumed.jsonl" <<'PY'
import json, sys
ref = [json.loads(l) for l in open(sys.argv[1])]
got = [json.loads(l) for l in open(sys.argv[2])]
assert got and got[-1]["step"] == len(ref) - 1, (len(got), got[-1:])
for g in got:
    assert g["loss"] == ref[g["step"]]["loss"], (g["step"], g["loss"], ref[g["step"]]["loss"])
print("ok: resumed at step %d, %d steps bit-identical to the uninterrupted run" % (got[0]["step"], len(got)))
PY
    ;;
  convert_sharded)
    # lr 0: the weights stay the model's, on a grid that shards every tensor; convert puts them back
    # together; --init takes them from a checkpoint directory and from HF safetensors on other grids
    run_np 4 train --init "$model" --data "$tokens" --lr 0 --steps 1 --quiet --grid 2,1,2,1 --checkpoint-dir "$tmp/a"
    run_np 1 convert --from "$tmp/a" --to "$tmp/a.bin"
    expect_output "checkpoint step 1, grid 2x1x2x1"
    same "$model" "$tmp/a.bin"
    run_np 2 train --init "$tmp/a" --data "$tokens" --lr 0 --steps 1 --quiet --grid 1,2,1,1 --checkpoint-dir "$tmp/b"
    run_np 1 convert --from "$tmp/b/step-00000001" --to "$tmp/b.safetensors"
    run_np 1 train --init "$tmp/b.safetensors" --data "$tokens" --lr 0 --steps 1 --quiet --save "$tmp/c.bin"
    same "$model" "$tmp/c.bin" ;;
  keep)
    run_np 1 train "${flags[@]}" --steps 5 --checkpoint-dir "$tmp/ck" --checkpoint-every 1 --keep 2
    [ "$(ls "$tmp/ck" | tr '\n' ' ')" = "latest lock step-00000004 step-00000005 " ] || fail "--keep 2 left $(ls "$tmp/ck" | tr '\n' ' ')"
    [ "$(cat "$tmp/ck/latest")" = "step-00000005" ] || fail "latest is $(cat "$tmp/ck/latest"), not step-00000005"
    echo "ok: --keep 2 left $(ls "$tmp/ck" | tr '\n' ' ')" ;;
  resume_nothing_yet)
    run_np 1 train "${flags[@]}" --steps 3 --checkpoint-dir "$tmp/ck" --resume
    expect_output "no checkpoint in '$tmp/ck' yet: starting from step 0"
    [ -f "$tmp/ck/step-00000003/manifest.json" ] || fail "no final checkpoint: $(ls -R "$tmp/ck")"
    echo "ok: started at step 0 and saved step 3" ;;
  bad_flags)
    expect_error "need --checkpoint-dir DIR" "$axonn" train --resume
    expect_error "need --checkpoint-dir DIR" "$axonn" train --checkpoint-every 5
    expect_error "not both" "$axonn" train --checkpoint-dir "$tmp/ck" --resume --resume-from "$tmp/ck"
    expect_error "--keep must be >= 0" "$axonn" train --checkpoint-dir "$tmp/ck" --keep -1
    expect_error "checkpoint '$tmp/none' does not exist" "$axonn" train --resume-from "$tmp/none" --checkpoint-dir "$tmp/branch" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
