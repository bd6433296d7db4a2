#!/usr/bin/env bash
# `axonn train` launched by Slurm (a real slurmctld, slurmd and munged from Debian's packages, started
# by tests/multihost/netns.sh in a sandbox): the reference run on a 4D grid of 4 ranks gives, bit for
# bit, the losses of the same run under plain mpirun, and llm.c's within the CLI tests' bound; the run
# logs and records (trace metadata) its launcher, Slurm job and step, hosts and node-local ranks.
# Usage: cli_slurm.sh CASE AXONN_BIN REFERENCE_DIR SOURCE_DIR
#   srun           srun -n 4 (PMIx) on one node
#   salloc_mpirun  salloc -n 4, then mpirun inside the allocation
#   sbatch_2nodes  sbatch of scripts/axonn.sbatch on 2 nodes (namespace hosts), 2 tasks each, srun inside
#   preempt_scancel / timelimit_usr1  that job stopped after 20 steps by `scancel` (SIGTERM to every task,
#                  SIGKILL KillWait = 30 s later: preemption) or `scancel --signal USR1` (what the
#                  script's --signal=USR1@120 sends before the time limit): it checkpoints and stops
#                  cleanly, and `srun ... --resume` continues it bit for bit (docs/resilience.md)
# Skips (77) when the sandbox or Slurm cannot start here.
case_name=$1 axonn=$2 ref=$3 src=$4 mpiexec=mpirun
if [ "${AXONN_IN_SANDBOX:-}" != 1 ]; then
  case $case_name in
    sbatch_2nodes|preempt_scancel|timelimit_usr1) hosts=2 slots=2 ;;
    *) hosts=1 slots=4 ;;
  esac
  AXONN_IN_SANDBOX=1 exec "$src/tests/multihost/netns.sh" --hosts "$hosts" --slots "$slots" --slurm -- \
    bash "$0" "$@"
fi
. "$src/tests/cli/common.sh"
model=$ref/gpt2-tiny/model.bin tokens=$ref/gpt2-tiny/tokens.bin
grid=1,2,2,1
run_args=(--grid "$grid" --init "$model" --data "$tokens" --batch-size 4 --seq-len 32 --lr 3e-3
  --lr-schedule constant --weight-decay 0 --grad-clip 0 --peak-gflops 100)
train_args=(train "${run_args[@]}" --steps 30)
export OMP_NUM_THREADS=1
CLI_TIMEOUT=200

# stop_and_resume SIGNAL: the sbatch job of 20,000 steps stopped by SIGNAL after 20 or more, resumed for 5
# more. A step of this model takes about 3 ms: 300 steps were once over before scancel reached the job.
stop_and_resume() {
  local sig=$1 send=() job at total=20000
  [ "$sig" = TERM ] || send=(--signal "$sig")
  export AXONN=$axonn
  run sbatch -N 2 --ntasks-per-node 2 --output "$tmp/job.out" "$src/scripts/axonn.sbatch" \
    "${run_args[@]}" --steps $total --metrics "$tmp/slurm.jsonl" --checkpoint-dir "$tmp/ck"
  job=$(grep -Eo "Submitted batch job [0-9]+" "$tmp/out" | grep -Eo "[0-9]+")
  for _ in $(seq 400); do
    [ "$(cat "$tmp/slurm.jsonl" 2>/dev/null | wc -l)" -ge 20 ] && break
    squeue -h -j "$job" 2>/dev/null | grep -q . || { cp "$tmp/job.out" "$tmp/out"; fail "job $job ended early"; }
    sleep 0.25
  done
  run scancel "${send[@]}" "$job"
  for _ in $(seq 200); do squeue -h -j "$job" 2>/dev/null | grep -q . || break; sleep 0.25; done
  ! squeue -h -j "$job" 2>/dev/null | grep -q . || fail "job $job still runs 50 s after scancel"
  cp "$tmp/job.out" "$tmp/out"
  expect_output "stopped   by SIG$sig after step [0-9]+ of $total; checkpoint .*step-[0-9]+\. Continue with"
  expect_no_output "Killed|exited on signal"
  at=$(grep -Eo "after step [0-9]+ of" "$tmp/out" | grep -Eo "[0-9]+" | head -1)
  [ "$at" -lt $total ] || fail "the job was not stopped early"
  [ "$(wc -l <"$tmp/slurm.jsonl")" -eq "$at" ] || fail "the metrics hold $(wc -l <"$tmp/slurm.jsonl") steps, not $at"
  # a new job step continues from the checkpoint, on the same 2 nodes, for 5 steps
  run srun -N 2 -n 4 "$axonn" train --checkpoint-dir "$tmp/ck" --resume --exit-after-steps 5 --metrics "$tmp/slurm.jsonl"
  expect_output "stopped   by --exit-after-steps 5 after step $((at + 5)) of $total"
  # what the uninterrupted run gives (constant learning rate: --steps does not change the trajectory)
  run "$mpiexec" -n 4 --oversubscribe "$axonn" train "${run_args[@]}" --steps $((at + 5)) --metrics "$tmp/mpirun.jsonl"
  python3 - "$tmp/mpirun.jsonl" "$tmp/slurm.jsonl" "$sig" <<'PY'
import json, sys
a = [json.loads(l) for l in open(sys.argv[1])]
b = [json.loads(l) for l in open(sys.argv[2])]
assert len(a) == len(b), (len(a), len(b))
for x, y in zip(a, b):
    assert x["step"] == y["step"] and x["loss"] == y["loss"] and x["grad_norm"] == y["grad_norm"], (x, y)
print("ok: stopped by SIG%s, resumed: %d steps equal to the uninterrupted run bit for bit" % (sys.argv[3], len(a)))
PY
}

case $case_name in
  preempt_scancel) stop_and_resume TERM; exit 0 ;;
  timelimit_usr1) stop_and_resume USR1; exit 0 ;;
esac

# the same run under plain mpirun, on this host: what every launch must reproduce
run "$mpiexec" -n 4 --oversubscribe "$axonn" "${train_args[@]}" --metrics "$tmp/mpirun.jsonl"

trace=(--trace "$tmp/trace.json" --trace-steps 2:3)
case $case_name in
  srun)
    run srun -n 4 --mpi=pmix "$axonn" "${train_args[@]}" --metrics "$tmp/slurm.jsonl" "${trace[@]}"
    expect_output "launch    srun \(Slurm job [0-9]+, step 0\): 4 ranks on 1 node \(host0\), up to 4 per node"
    want_launch="srun 1 host0:0 host0:1 host0:2 host0:3" ;;
  salloc_mpirun)
    run salloc -n 4 mpirun "$axonn" "${train_args[@]}" --metrics "$tmp/slurm.jsonl" "${trace[@]}"
    expect_output "salloc: Granted job allocation"
    # mpirun's ranks carry the job, not a step of their own
    expect_output "launch    mpirun \(Slurm job [0-9]+\): 4 ranks on 1 node"
    want_launch="mpirun 1 host0:0 host0:1 host0:2 host0:3" ;;
  sbatch_2nodes)
    # the README shows the script's every line but its comments: the two say the same
    while IFS= read -r line; do
      case $line in ''|'#!'*|'#SBATCH'*) ;; '#'*) continue ;; esac
      grep -Fxq -- "$line" "$src/README.md" || fail "README.md lacks the line of scripts/axonn.sbatch: $line"
    done <"$src/scripts/axonn.sbatch"
    # the script as it is, on 2 nodes of 2 tasks
    export AXONN=$axonn
    run sbatch --wait -N 2 --ntasks-per-node 2 --output "$tmp/job.out" "$src/scripts/axonn.sbatch" \
      "${train_args[@]:1}" --metrics "$tmp/slurm.jsonl" "${trace[@]}"
    cp "$tmp/job.out" "$tmp/out"
    expect_output "axonn.sbatch: job [0-9]+ on 2 nodes \(host\[0-1\]\), 4 tasks"
    expect_output "grid      Gx=1 Gy=2 Gz=2 Gdata=1 on 4 ranks"
    expect_output "launch    srun \(Slurm job [0-9]+, step 0\): 4 ranks on 2 nodes \(host0 host1\), up to 2 per node"
    expect_output "placement Y inside nodes, Z across 2 nodes"
    want_launch="srun 2 host0:0 host0:1 host1:0 host1:1" ;;
  *) fail "unknown case $case_name" ;;
esac

# the trace's metadata: launcher, Slurm's job (the one the launch line names), step, every rank's host
# and node-local rank
job=$(grep -Eo "Slurm job [0-9]+" "$tmp/out" | head -1 | cut -d' ' -f3)
python3 - "$tmp/trace.json" "$job" "$want_launch" <<'PY'
import json, sys
launch = json.load(open(sys.argv[1]))["otherData"]["launch"]
launcher, nodes, *ranks = sys.argv[3].split()
assert launch["launcher"] == launcher and launch["nodes"] == int(nodes), launch
assert launch["slurm_job_id"] == sys.argv[2], (launch, sys.argv[2])
assert launch["slurm_step_id"] == ("0" if launcher == "srun" else ""), launch
got = ["%s:%d" % (r["host"], r["local_rank"]) for r in launch["ranks"]]
assert got == ranks, (got, ranks)
print("ok: trace records", launch["launcher"], "job", launch["slurm_job_id"], "step", launch["slurm_step_id"], got)
PY
python3 - "$tmp/mpirun.jsonl" "$tmp/slurm.jsonl" "$ref/gpt2-tiny/losses.txt" "$case_name" <<'PY'
import json, sys
base = [json.loads(l) for l in open(sys.argv[1])]
got = [json.loads(l) for l in open(sys.argv[2])]
want = [float(l.split()[1]) for l in open(sys.argv[3])]
assert len(base) == len(got) == len(want) == 30, (len(base), len(got), len(want))
for i, (b, g, w) in enumerate(zip(base, got, want)):
    assert g["step"] == b["step"] == i, (g, b)
    # the same ranks, grid and threads: the same bits, whoever launched them
    assert g["loss"] == b["loss"] and g["grad_norm"] == b["grad_norm"], (i, g, b)
    assert abs(g["loss"] - w) <= 2e-5, (i, g["loss"], w)
print("ok: %s: 30 steps on grid 1,2,2,1 equal to mpirun's bit for bit, max |loss - llm.c| = %.3g"
      % (sys.argv[4], max(abs(g["loss"] - w) for g, w in zip(got, want))))
PY
