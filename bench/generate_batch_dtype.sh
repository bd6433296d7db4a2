#!/usr/bin/env bash
# `axonn generate`'s decode speed by precision and batch (issue 36): bf16 against fp32, and 8 sequences at
# once against 1, on the same random model (default llama-124m) saved as a Hugging Face directory. Rounds
# interleave the four cases (fp32 and bf16, 1 and 8 samples) at 1 and 2 threads, idle (the machine is
# shared: only ratios measured in one run mean anything). Prints the median decode tokens/s of each case
# (all sequences' tokens: a step of 8 samples decodes 8), the median peak resident memory, and the ratios
# bf16/fp32 and batch 8/batch 1.
#
#   bash bench/generate_batch_dtype.sh
#   MODEL=llama-tiny NEW=32 ROUNDS=1 bash bench/generate_batch_dtype.sh
set -euo pipefail
cd "$(dirname "$0")/.."
BIN=${BIN:-build/bin}
MODEL=${MODEL:-llama-124m} NEW=${NEW:-128} ROUNDS=${ROUNDS:-2} PROMPT=${PROMPT:-1,2,3,4,5,6,7,8}
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT

# random weights (one step of training at lr 0 saves them) as a Hugging Face directory
"$BIN/axonn" train --model "$MODEL" --steps 1 --lr 0 --batch-size 1 --seq-len 16 --save "$tmp/hf/" --quiet >/dev/null
echo "model $MODEL: $(du -sm "$tmp/hf" | cut -f1) MB fp32; prompt $PROMPT, $NEW new tokens, $ROUNDS rounds; $(nproc) CPUs"

# run THREADS DTYPE SAMPLES: one run, "tok_s rss_mb" appended to $tmp/DTYPE-SAMPLES-THREADS
run() {
  OMP_NUM_THREADS=$1 /usr/bin/time -f "%M" -o "$tmp/time" "$BIN/axonn" generate --init "$tmp/hf" --dtype "$2" \
    --num-samples "$3" --prompt-ids "$PROMPT" --max-new-tokens "$NEW" --temperature 0 --print-ids \
    >"$tmp/ids-$2-$3" 2>"$tmp/log"
  python3 - "$tmp/log" "$tmp/time" >>"$tmp/$2-$3-$1" <<'PY'
import re, sys
m = re.search(r"decode ([0-9.]+) tokens/s", open(sys.argv[1]).read())
print(m.group(1), int(open(sys.argv[2]).read().split()[-1]) / 1024)
PY
}

for ((round = 1; round <= ROUNDS; round++)); do
  for threads in 1 2; do
    for dtype in fp32 bf16; do
      for samples in 1 8; do run "$threads" "$dtype" "$samples"; done
    done
  done
done
# every sample of a greedy batch is the prompt's one continuation: the batch must repeat batch 1's ids
for dtype in fp32 bf16; do
  head -1 "$tmp/ids-$dtype-8" | cmp -s - "$tmp/ids-$dtype-1" && echo "$dtype: batch 8's first sample = batch 1's" ||
    echo "$dtype: batch 8's first sample DIFFERS from batch 1's"
done

python3 - "$tmp" <<'PY'
import statistics, sys, os
tmp = sys.argv[1]
def med(tag, col):
    return statistics.median(float(l.split()[col]) for l in open(os.path.join(tmp, tag)))
print("%-8s %-6s %14s %14s %10s %10s" % ("threads", "dtype", "decode, B=1", "decode, B=8", "B8/B1", "peak MB B=1"))
for t in (1, 2):
    for d in ("fp32", "bf16"):
        b1, b8 = med("%s-1-%d" % (d, t), 0), med("%s-8-%d" % (d, t), 0)
        print("%-8d %-6s %14.1f %14.1f %9.2fx %10.0f" % (t, d, b1, b8, b8 / b1, med("%s-1-%d" % (d, t), 1)))
    for b in (1, 8):
        print("%-8d bf16/fp32 at B=%d: %.2fx" % (t, b, med("bf16-%d-%d" % (b, t), 0) / med("fp32-%d-%d" % (b, t), 0)))
PY
