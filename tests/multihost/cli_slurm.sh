#!/usr/bin/env bash
# `axonn train` launched by Slurm (a real slurmctld, slurmd and munged from Debian's packages, started
# by tests/multihost/netns.sh in a sandbox): the reference run on a 4D grid of 4 ranks gives, bit for
# bit, the losses of the same run under plain mpirun, and llm.c's within the CLI tests' bound.
# Usage: cli_slurm.sh CASE AXONN_BIN REFERENCE_DIR SOURCE_DIR
#   srun           srun -n 4 (PMIx) on one node
#   salloc_mpirun  salloc -n 4, then mpirun inside the allocation
#   sbatch_2nodes  sbatch of scripts/axonn.sbatch on 2 nodes (namespace hosts), 2 tasks each, srun inside
# Skips (77) when the sandbox or Slurm cannot start here.
case_name=$1 axonn=$2 ref=$3 src=$4 mpiexec=mpirun
if [ "${AXONN_IN_SANDBOX:-}" != 1 ]; then
  case $case_name in
    sbatch_2nodes) hosts=2 slots=2 ;;
    *) hosts=1 slots=4 ;;
  esac
  AXONN_IN_SANDBOX=1 exec "$src/tests/multihost/netns.sh" --hosts "$hosts" --slots "$slots" --slurm -- \
    bash "$0" "$@"
fi
. "$src/tests/cli/common.sh"
model=$ref/gpt2-tiny/model.bin tokens=$ref/gpt2-tiny/tokens.bin
grid=1,2,2,1
train_args=(train --grid "$grid" --init "$model" --data "$tokens" --batch-size 4 --seq-len 32 --steps 30 --lr 3e-3
  --lr-schedule constant --weight-decay 0 --grad-clip 0 --peak-gflops 100)
export OMP_NUM_THREADS=1
CLI_TIMEOUT=200

# the same run under plain mpirun, on this host: what every launch must reproduce
run "$mpiexec" -n 4 --oversubscribe "$axonn" "${train_args[@]}" --metrics "$tmp/mpirun.jsonl"

case $case_name in
  srun)
    run srun -n 4 --mpi=pmix "$axonn" "${train_args[@]}" --metrics "$tmp/slurm.jsonl" ;;
  salloc_mpirun)
    run salloc -n 4 mpirun "$axonn" "${train_args[@]}" --metrics "$tmp/slurm.jsonl"
    expect_output "salloc: Granted job allocation" ;;
  sbatch_2nodes)
    # the README shows the script's every line but its comments: the two say the same
    while IFS= read -r line; do
      case $line in ''|'#!'*|'#SBATCH'*) ;; '#'*) continue ;; esac
      grep -Fxq -- "$line" "$src/README.md" || fail "README.md lacks the line of scripts/axonn.sbatch: $line"
    done <"$src/scripts/axonn.sbatch"
    # the script as it is, on 2 nodes of 2 tasks
    export AXONN=$axonn
    run sbatch --wait -N 2 --ntasks-per-node 2 --output "$tmp/job.out" "$src/scripts/axonn.sbatch" \
      "${train_args[@]:1}" --metrics "$tmp/slurm.jsonl"
    cp "$tmp/job.out" "$tmp/out"
    expect_output "axonn.sbatch: job [0-9]+ on 2 nodes \(host\[0-1\]\), 4 tasks"
    expect_output "grid      Gx=1 Gy=2 Gz=2 Gdata=1 on 4 ranks" ;;
  *) fail "unknown case $case_name" ;;
esac

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
