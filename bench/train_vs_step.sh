#!/usr/bin/env bash
# The user's command against the project's own benchmark of the same step (issue 36): `axonn train` alone,
# under `mpirun -np 1` as launched by default, and under `mpirun -np 1 --bind-to none`, against
# `bench_gpt2_step` on the same shape, interleaved round by round (the machine is shared). Reports each one's
# median step time and its ratio to the benchmark's (target: <= 1.05). Where PyTorch is installed (Debian's
# python3-torch), the same step in PyTorch on the CPU (bench/torch_gpt2_step.py, eager, the same threads) runs in
# each round too, and the benchmark's and the user's command's speed-ups over it are printed (target: >= 1.9).
#
#   bash bench/train_vs_step.sh                                   # gpt2-124m, 8x256, fp32, 2 threads
#   MODEL=gpt2-tiny SHAPE=4x64 STEPS=6 ROUNDS=2 bash bench/train_vs_step.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin}
MODEL=${MODEL:-gpt2-124m} SHAPE=${SHAPE:-8x256} DTYPE=${DTYPE:-fp32} STEPS=${STEPS:-4} ROUNDS=${ROUNDS:-2}
THREADS=${THREADS:-$(nproc)} PYTHON=${PYTHON:-python3}  # PYTHON: the one with PyTorch, for the libtorch row
export OMP_NUM_THREADS=$THREADS OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1
B=${SHAPE%x*} T=${SHAPE#*x}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
train=(train --model "$MODEL" --batch-size "$B" --seq-len "$T" --dtype "$DTYPE" --steps "$STEPS" --overwrite --metrics)

# median of the step times after the first (warm-up) of a metrics file, in ms
median_ms() {
  python3 -c "
import json, statistics, sys
ms = [json.loads(l)['step_ms'] for l in open(sys.argv[1])][1:]
print('%.1f' % statistics.median(ms))" "$1"
}

declare -A times
torch=no
if "$PYTHON" -c "import torch" 2>/dev/null && grep -q "\"$MODEL\":" bench/torch_gpt2_step.py; then torch=yes; fi
for round in $(seq "$ROUNDS"); do
  "$BIN/bench_gpt2_step" --model "$MODEL" --shapes "$SHAPE" --dtype "$DTYPE" --steps "$STEPS" --rounds 1 \
    >"$tmp/bench.out" 2>&1
  ms=$(awk -v m="$MODEL" '$1 == m {print $5}' "$tmp/bench.out" | tail -1)
  times[bench]+="$ms "
  "$BIN/axonn" "${train[@]}" "$tmp/alone.jsonl" --quiet >/dev/null 2>&1
  times[alone]+="$(median_ms "$tmp/alone.jsonl") "
  mpirun -np 1 "$BIN/axonn" "${train[@]}" "$tmp/mpirun.jsonl" --quiet >"$tmp/mpirun.out" 2>&1
  times[mpirun]+="$(median_ms "$tmp/mpirun.jsonl") "
  mpirun -np 1 --bind-to none "$BIN/axonn" "${train[@]}" "$tmp/unbound.jsonl" --quiet >/dev/null 2>&1
  times[unbound]+="$(median_ms "$tmp/unbound.jsonl") "
  torch_ms=
  if [ "$torch" = yes ]; then
    "$PYTHON" bench/torch_gpt2_step.py --device cpu --model "$MODEL" --batch "$B" --seq "$T" --dtype "$DTYPE" \
      --steps $((STEPS - 1)) --warmup 1 >"$tmp/torch.out" 2>&1
    torch_ms=$(sed -n 's/.*: \([0-9.]*\) ms\/step.*/\1/p' "$tmp/torch.out")
    times[torch]+="$torch_ms "
  fi
  echo "round $round: bench ${ms} ms, alone $(median_ms "$tmp/alone.jsonl"), mpirun $(median_ms "$tmp/mpirun.jsonl"), mpirun --bind-to none $(median_ms "$tmp/unbound.jsonl")${torch_ms:+, libtorch $torch_ms}"
done
echo "# $MODEL $SHAPE $DTYPE, $THREADS threads, $ROUNDS rounds interleaved; median ms/step over the rounds"
grep -m1 "^warning: threads" "$tmp/mpirun.out" || echo "(mpirun -np 1 gave no thread warning: this launch leaves the rank its cores)"
[ "$torch" = yes ] && grep -m1 "^torch" "$tmp/torch.out" | sed 's/^/libtorch: /' ||
  echo "(no libtorch row: PyTorch is not installed, or has no $MODEL in bench/torch_gpt2_step.py)"
python3 - "${times[bench]}" "${times[alone]}" "${times[mpirun]}" "${times[unbound]}" "${times[torch]:-}" <<'PY'
import statistics, sys
med = [statistics.median(float(x) for x in a.split()) for a in sys.argv[1:5]]
names = ["bench_gpt2_step", "axonn train alone", "mpirun -np 1 axonn train", "mpirun -np 1 --bind-to none axonn train"]
for n, m in zip(names, med):
    print("%-42s %10.1f ms  ratio %.3f%s" % (n, m, m / med[0], "" if n == names[0] else ("  ok" if m / med[0] <= 1.05 else "  > 1.05")))
if sys.argv[5].split():
    torch = statistics.median(float(x) for x in sys.argv[5].split())
    print("%-42s %10.1f ms  ratio %.3f" % ("libtorch (eager, the same threads)", torch, torch / med[0]))
    for n, m in zip(names, med):
        if n != names[2]:
            print("%-42s %.2fx libtorch's speed%s" % (n, torch / m, "  ok" if torch / m >= 1.9 else "  < 1.9"))
PY
