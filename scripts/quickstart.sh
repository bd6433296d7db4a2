#!/usr/bin/env bash
# The main job on its built-in default: install, build, then text in and text out on one rank —
# Debian's fortunes (15,000 short English texts, each a document) become a 4,096-id SentencePiece
# tokenizer and token shards (train + validation), a small GPT-2 (4 layers, 256 channels, 4.2M
# parameters) trains on them for about 2.5 minutes on two cores with the train and validation losses
# falling, into the run directory runs/quickstart/train (config.toml, run.json, metrics, trace, checkpoints);
# then writes a few samples (also kept in the run directory's samples.txt), and the run's report (axonn report:
# report.html, loss.png).
#
#   bash scripts/quickstart.sh                 # everything under runs/quickstart/
#   bash scripts/quickstart.sh --steps 600     # extra flags go to axonn train
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/install-deps.sh
cmake --preset cpu-release >/dev/null
cmake --build --preset cpu-release --target axonn  # the main job needs the binary only (the tests: scripts/test.sh)
AXONN=./build/bin/axonn
RUN=runs/quickstart
FORTUNES=(--doc-separator % --exclude '*.dat' --exclude '*.u8' /usr/share/games/fortunes)
mkdir -p "$RUN"
"$AXONN" tokenizer train --vocab-size 4096 --output "$RUN/tokenizer.model" "${FORTUNES[@]}"
"$AXONN" prepare --overwrite --tokenizer "$RUN/tokenizer.model" --output "$RUN/data" "${FORTUNES[@]}"
"$AXONN" train --model gpt2-tiny --layers 4 --heads 4 --channels 256 --vocab 4096 --max-seq-len 128 \
    --data "$RUN/data" --val-data "$RUN/data" --val-every 40 --val-batches 8 --shuffle --data-seed 1 \
    --batch-size 16 --seq-len 128 --steps 240 --lr 3e-3 --warmup-steps 20 --min-lr-frac 0.1 --weight-decay 0.1 \
    --run-dir "$RUN/train" --save "$RUN/model.bin" --overwrite "$@"  # a rerun replaces its own run
echo
echo "samples from $RUN/model.bin (axonn generate):"
for prompt in "Q: What" "The computer" "Love is"; do
  echo "--- $prompt"
  "$AXONN" generate --init "$RUN/model.bin" --tokenizer "$RUN/tokenizer.model" --prompt "$prompt" \
      --max-new-tokens 60 --temperature 0.8 --top-k 40 --seed 1 --run-dir "$RUN/train"  # the report shows them
  echo
done
"$AXONN" report "$RUN/train"
echo "the run: $RUN/train/report.html (open it in a browser), its loss curve: $RUN/train/loss.png"
