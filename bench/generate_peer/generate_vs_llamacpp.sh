#!/usr/bin/env bash
# `axonn generate` beside llama.cpp on the same weights (issue 36): a random model of a preset (default
# llama-124m, fp32) saved as a Hugging Face directory for axonn and converted to GGUF F32 for llama.cpp (npm
# node-llama-cpp 3.21.1, the version tests/peer/llamacpp/package-lock.json pins; scripts/fetch-llamacpp.sh
# installs it, with node >= 20), greedy from the same prompt ids. Rounds interleave the two, at 1 and 2
# threads, idle and with two busy processes beside them (the machine is shared: only ratios measured in one
# run mean anything). Prints, per case, the medians: start (axonn: from the command's start to a model ready
# to prefill; llama.cpp: its model load and context, without node's and the npm package's own start-up), peak
# resident memory (llama.cpp's with node's), decode tokens/s, and axonn's ratio to llama.cpp's; and whether the
# greedy ids agree.
#
# AXONN_FROM=gguf has axonn read the GGUF file llama.cpp reads (its start then includes widening the tensors).
#
#   bash bench/generate_peer/generate_vs_llamacpp.sh
#   MODEL=llama-tiny NEW=32 ROUNDS=1 bash bench/generate_peer/generate_vs_llamacpp.sh
#   AXONN_FROM=gguf bash bench/generate_peer/generate_vs_llamacpp.sh
set -euo pipefail
cd "$(dirname "$0")/../.."
BIN=${BIN:-build/bin}
MODEL=${MODEL:-llama-124m} NEW=${NEW:-128} ROUNDS=${ROUNDS:-2} PROMPT=${PROMPT:-1,2,3,4,5,6,7,8}
AXONN_FROM=${AXONN_FROM:-hf}
case $AXONN_FROM in hf | gguf) ;; *) echo "AXONN_FROM is hf or gguf, not '$AXONN_FROM'" >&2; exit 2 ;; esac
MODULES=${MODULES:-tests/peer/llamacpp/node_modules}
[ -f "$MODULES/node-llama-cpp/package.json" ] || {
  echo "no node-llama-cpp in $MODULES: run scripts/fetch-llamacpp.sh (needs node >= 20)" >&2
  exit 2
}
tmp=$(mktemp -d)
busy=()
stop_busy() { for p in "${busy[@]}"; do kill "$p" 2>/dev/null || true; done; busy=(); }
trap 'stop_busy; rm -rf "$tmp"' EXIT

# the model: random weights (one step of training at lr 0 saves them), its HF directory and GGUF F32 file, with
# a byte-level tokenizer of its vocabulary (llama.cpp needs one of the model's size)
"$BIN/axonn" train --model "$MODEL" --steps 1 --lr 0 --batch-size 1 --seq-len 16 --save "$tmp/hf/" --quiet >/dev/null
vocab=$(python3 -c "import json,sys; print(json.load(open(sys.argv[1]))['vocab_size'])" "$tmp/hf/config.json")
python3 bench/generate_peer/byte_tokenizer.py "$vocab" "$tmp/tok.json"
"$BIN/axonn" convert --from "$tmp/hf" --to "$tmp/model.gguf" --tokenizer "$tmp/tok.json" >/dev/null 2>&1
echo "model $MODEL: $(du -m "$tmp/model.gguf" | cut -f1) MB GGUF F32, vocabulary $vocab; prompt $PROMPT, $NEW new tokens, $ROUNDS rounds; $(nproc) CPUs; axonn reads the $AXONN_FROM"

# run_axonn THREADS TAG / run_llama THREADS TAG: one run, its figures appended to $tmp/TAG as "start rss_mb tok_s"
run_axonn() {
  local init=$tmp/hf
  [ "$AXONN_FROM" = gguf ] && init=$tmp/model.gguf
  OMP_NUM_THREADS=$1 /usr/bin/time -f "%M" -o "$tmp/time" "$BIN/axonn" generate --init "$init" \
    --prompt-ids "$PROMPT" --max-new-tokens "$NEW" --temperature 0 --print-ids >"$tmp/ids.axonn" 2>"$tmp/log"
  python3 - "$tmp/log" "$tmp/time" >>"$tmp/$2" <<'PY'
import re, sys
log = open(sys.argv[1]).read()
m = re.search(r"after a start of ([0-9.]+) s: .* decode ([0-9.]+) tokens/s", log)
print(m.group(1), int(open(sys.argv[2]).read().split()[-1]) / 1024, m.group(2))
PY
}
run_llama() {
  /usr/bin/time -f "%M" -o "$tmp/time" node bench/generate_peer/llamacpp_generate.mjs "$MODULES" "$tmp/model.gguf" \
    "$PROMPT" "$NEW" "$1" >"$tmp/llama.json"
  python3 - "$tmp/llama.json" "$tmp/time" "$tmp/ids.llama" >>"$tmp/$2" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
open(sys.argv[3], "w").write(",".join(map(str, r["ids"])) + "\n")
print(r["load_s"], int(open(sys.argv[2]).read().split()[-1]) / 1024, r["decode_tokens_per_s"])
PY
}

for ((round = 1; round <= ROUNDS; round++)); do
  for load in idle busy; do
    if [ "$load" = busy ]; then
      for _ in 1 2; do (while :; do :; done) & busy+=($!); done
    fi
    for threads in 1 2; do
      run_axonn "$threads" "axonn-$load-$threads"
      run_llama "$threads" "llama-$load-$threads"
      cmp -s "$tmp/ids.axonn" "$tmp/ids.llama" && echo same >>"$tmp/agree" || echo differ >>"$tmp/agree"
    done
    stop_busy
  done
done

python3 - "$tmp" <<'PY'
import statistics, sys, os
tmp = sys.argv[1]
def med(tag, col):
    rows = [list(map(float, l.split())) for l in open(os.path.join(tmp, tag))]
    return statistics.median(r[col] for r in rows)
print("%-22s %10s %10s %8s" % ("", "axonn", "llama.cpp", "ratio"))
for load in ("idle", "busy"):
    for threads in (1, 2):
        a, l = "axonn-%s-%d" % (load, threads), "llama-%s-%d" % (load, threads)
        for name, col, unit in (("start", 0, "s"), ("peak memory", 1, "MB"), ("decode", 2, "tokens/s")):
            x, y = med(a, col), med(l, col)
            print("%-22s %10.2f %10.2f %7.2fx  (%s)" % ("%s, %d thr: %s" % (load, threads, name), x, y, x / y, unit))
agree = open(os.path.join(tmp, "agree")).read().split()
print("greedy ids: %d of %d runs the same as llama.cpp's" % (agree.count("same"), len(agree)))
PY
