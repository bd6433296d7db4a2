#!/usr/bin/env bash
# bench/memorization/run.sh — the memorisation study of AxoNN's SC'24 paper and of the Goldfish loss
# (Hans et al., arXiv 2406.10209), small enough for 2 cores (docs/memorization.md).
#
# A corpus of Debian's fortunes, with canary fortunes repeated REPEATS times and control fortunes of the
# same kind never trained (make_corpus.py); models of three sizes trained on the same tokens, once with
# the standard loss and once with Goldfish (k=4, h=13); then `axonn memorization` on the canaries and the
# controls: greedy 50-token continuations of each document's prefix, exact match and Rouge-L against its
# suffix. Writes OUT/results.json, OUT/results.md (the table) and OUT/memorization-{rouge,exact}.png.
#
#   bash bench/memorization/run.sh                  # after building (cmake --build --preset cpu-release)
#   SIZES="2x128 4x256" EPOCHS=2 bash bench/memorization/run.sh
#
# A run whose results are in OUT already is kept (delete OUT/runs/SIZE-LOSS to measure it again), so an
# interrupted study continues where it stopped.
#
# Knobs (environment): SIZES (LAYERSxCHANNELS, heads = max(1, channels/64)), EPOCHS, REPEATS, CANARIES,
# CONTROLS, BASE_DOCS, VOCAB, SEQ_LEN, BATCH, LR, GOLDFISH_K, GOLDFISH_H, SUFFIX_LEN, NP (ranks), OUT.
set -euo pipefail
cd "$(dirname "$0")/../.."
AXONN=${AXONN:-build/bin/axonn}
PLOT=${PLOT:-build/bin/bench_memorization_plot}
OUT=${OUT:-bench/results/memorization}
SIZES=${SIZES:-"1x64 2x128 4x256"}
EPOCHS=${EPOCHS:-3}
REPEATS=${REPEATS:-32}
CANARIES=${CANARIES:-16}
CONTROLS=${CONTROLS:-16}
BASE_DOCS=${BASE_DOCS:-1000}
VOCAB=${VOCAB:-4096}
SEQ_LEN=${SEQ_LEN:-128}
BATCH=${BATCH:-16}
LR=${LR:-2e-3}
GOLDFISH_K=${GOLDFISH_K:-4}
GOLDFISH_H=${GOLDFISH_H:-13}
SUFFIX_LEN=${SUFFIX_LEN:-50}
NP=${NP:-1}
for tool in "$AXONN" "$PLOT"; do
  [[ -x $tool ]] || { echo "run.sh: $tool is not built (cmake --build --preset cpu-release)" >&2; exit 2; }
done
launch() { if [[ $NP == 1 ]]; then "$@"; else mpirun -n "$NP" --oversubscribe "$@"; fi; }

mkdir -p "$OUT"
DATA=$OUT/corpus
start=$(date +%s)
if [[ -f $DATA/train/prepare.json && -f $DATA/val/prepare.json ]]; then
  echo "study: the corpus in $DATA was made before: kept"
else
  /usr/bin/python3 bench/memorization/make_corpus.py --out "$DATA" --canaries "$CANARIES" --controls "$CONTROLS" \
      --repeats "$REPEATS" --base-docs "$BASE_DOCS"
  "$AXONN" tokenizer train --vocab-size "$VOCAB" --output "$DATA/tokenizer.model" "$DATA/base.jsonl"
  "$AXONN" prepare --quiet --overwrite --tokenizer "$DATA/tokenizer.model" --output "$DATA/train" --val-fraction 0 "$DATA/train.jsonl"
  "$AXONN" prepare --quiet --overwrite --tokenizer "$DATA/tokenizer.model" --output "$DATA/val" --val-fraction 0 "$DATA/val.jsonl"
fi
train_tokens=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["train_tokens"])' "$DATA/train/prepare.json")
val_tokens=$(/usr/bin/python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["train_tokens"])' "$DATA/val/prepare.json")
steps=$(( EPOCHS * train_tokens / (BATCH * SEQ_LEN) ))
val_batches=$(( val_tokens / (BATCH * (SEQ_LEN + 1)) ))
echo "study: $train_tokens training tokens, $steps steps of $BATCH x $SEQ_LEN per run; $val_batches validation batches"

for size in $SIZES; do
  layers=${size%x*}; channels=${size#*x}
  for loss in standard goldfish; do
    run=$OUT/runs/$size-$loss
    if [[ -f $run/controls.json && -f $run/train_seconds ]]; then
      echo "study: $size $loss was measured before ($run): kept"
      continue
    fi
    mkdir -p "$run"
    flags=()
    [[ $loss == goldfish ]] && flags=(--goldfish-k "$GOLDFISH_K" --goldfish-h "$GOLDFISH_H")
    t0=$(date +%s)
    launch "$AXONN" train --model gpt2-tiny --layers "$layers" --channels "$channels" --heads $(( channels >= 128 ? channels / 64 : 1 )) \
        --vocab "$VOCAB" --max-seq-len "$SEQ_LEN" --seq-len "$SEQ_LEN" --batch-size "$BATCH" \
        --data "$DATA/train" --val-data "$DATA/val/train_000000.bin" --val-batches "$val_batches" --shuffle --data-seed 1 \
        --steps "$steps" --lr "$LR" --warmup-steps $(( steps / 10 )) --min-lr-frac 0.1 --weight-decay 0.1 \
        --quiet --metrics "$run/metrics.jsonl" --save "$run/model.bin" --overwrite "${flags[@]}" 2>&1 | tee "$run/train.log" | grep -E '^model|^step .*val'
    t1=$(date +%s)
    for set in canaries controls; do
      launch "$AXONN" memorization --init "$run/model.bin" --tokenizer "$DATA/tokenizer.model" \
          --suffix-len "$SUFFIX_LEN" --output "$run/$set.json" "$DATA/$set.jsonl" | tee "$run/$set.txt"
    done
    echo "$(( t1 - t0 ))" > "$run/train_seconds"
  done
done

/usr/bin/python3 - "$OUT" "$SIZES" "$start" <<'PY'
import json, os, sys, time
out, sizes, start = sys.argv[1], sys.argv[2].split(), int(sys.argv[3])
corpus = json.load(open(os.path.join(out, "corpus", "corpus.json")))
runs = []
for size in sizes:
    for loss in ("standard", "goldfish"):
        d = os.path.join(out, "runs", f"{size}-{loss}")
        params = None
        for line in open(os.path.join(d, "train.log")):
            if line.startswith("model") and "parameters" in line:
                params = float(line.split("parameters")[0].split(",")[-1].strip().rstrip("M")) * 1e6
        metrics = [json.loads(l) for l in open(os.path.join(d, "metrics.jsonl"))]
        val = [m["val_loss"] for m in metrics if "val_loss" in m]
        summary = lambda name: json.load(open(os.path.join(d, name + ".json")))["summary"]
        runs.append({"size": size, "size_label": f"{params / 1e6:.1f}M", "params": params, "loss": loss,
                     "train_loss": metrics[-1]["loss"], "val_loss": val[-1] if val else None,
                     "train_seconds": int(open(os.path.join(d, "train_seconds")).read()),
                     "canary": summary("canaries"), "control": summary("controls")})
res = {"corpus": corpus, "runs": runs, "seconds": int(time.time()) - start}
json.dump(res, open(os.path.join(out, "results.json"), "w"), indent=1)
rows = ["| model | loss | val loss | canary exact | canary Rouge-L (tokens / words) | control exact | control Rouge-L (tokens / words) | train s |",
        "|---|---|---|---|---|---|---|---|"]
for r in runs:
    c, k = r["canary"], r["control"]
    rows.append(f"| {r['size']} ({r['size_label']}) | {r['loss']} | {r['val_loss']:.4f} | {c['exact_match_rate']:.3f} | "
                f"{c['rouge_l_tokens']:.3f} / {c['rouge_l_words']:.3f} | {k['exact_match_rate']:.3f} | "
                f"{k['rouge_l_tokens']:.3f} / {k['rouge_l_words']:.3f} | {r['train_seconds']} |")
table = "\n".join(rows)
open(os.path.join(out, "results.md"), "w").write(table + "\n\n" + f"corpus: {json.dumps(corpus)}; total {res['seconds']} s\n")
print(table)
print(f"total {res['seconds']} s")
PY
"$PLOT" "$OUT/results.json" "$OUT/memorization"
