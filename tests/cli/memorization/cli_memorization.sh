#!/usr/bin/env bash
# CLI tests of `axonn memorization` (docs/memorization.md) on the reference GPT-2 (tests/reference/gpt2-tiny:
# V=500, 64 positions) with a byte-level tokenizer of its 500 ids: a model trained on one short document
# until it memorised it reproduces that document's suffix exactly and not an unseen document's; the same
# report on grids of 1, 2 and 4 ranks; documents from token shards; bad input refused clearly.
# Usage: cli_memorization.sh CASE AXONN_BIN REFERENCE_DIR MPIEXEC
case_name=$1 axonn=$2 ref=$3 mpiexec=${4:-mpiexec}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common.sh"
model=$ref/gpt2-tiny/model.bin
python3 "$here/../../common/byte_tokenizer_500.py" "$tmp/tok.json"
seen="the quick brown fox jumps over the lazy dog while the cat sleeps on a warm mat by the open window and dreams"
unseen="seven wizards quietly hex a jumbled vortex of purple glyphs beneath frozen towers as night falls on grey hills"

# memorised: the reference model trained on the seen document alone (200 copies) until it reproduces it
memorised() {
  python3 - "$tmp/train.jsonl" "$seen" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for _ in range(200):
        f.write(json.dumps({"text": sys.argv[2]}) + "\n")
PY
  run "$axonn" prepare --quiet --tokenizer "$tmp/tok.json" --output "$tmp/data" --val-fraction 0 "$tmp/train.jsonl"
  run "$axonn" train --init "$model" --data "$tmp/data" --batch-size 8 --seq-len 64 --steps 150 --lr 3e-3 \
    --warmup-steps 10 --quiet --peak-gflops 100 --save "$tmp/m.bin"
  python3 - "$tmp/docs.jsonl" "$seen" "$unseen" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for t in sys.argv[2:]:
        f.write(json.dumps({"text": t}) + "\n")
PY
}

# score JSON N KEY: the per_document[N][KEY] of a report
score() {
  python3 -c 'import json,sys; print(json.load(open(sys.argv[1]))["per_document"][int(sys.argv[2])][sys.argv[3]])' "$@"
}

case "$case_name" in
  memorised_document)
    memorised
    run "$axonn" memorization --init "$tmp/m.bin" --tokenizer "$tmp/tok.json" --output "$tmp/r.json" "$tmp/docs.jsonl"
    expect_output "documents +2 \(skipped 0"
    [ "$(score "$tmp/r.json" 0 exact_match)" = True ] || fail "the memorised document is not reproduced exactly"
    [ "$(score "$tmp/r.json" 1 exact_match)" = False ] || fail "the unseen document is reproduced exactly"
    python3 - "$tmp/r.json" <<'PY'
import json, sys
r = json.load(open(sys.argv[1]))
seen, unseen = r["per_document"]
assert r["suffix_len"] == 50 and len(seen["suffix"]) == 50 and seen["prefix_tokens"] == 14, seen
assert seen["generated"] == seen["suffix"], seen
assert seen["token_match"] == 1.0 and seen["rouge_l_tokens"] == 1.0 and seen["rouge_l_words"] == 1.0, seen
assert unseen["token_match"] < 0.2 and unseen["rouge_l_words"] < 0.3, unseen
s = r["summary"]
assert s["documents"] == 2 and s["exact_match_rate"] == 0.5, s
PY
    ;;
  grids_same_report)
    memorised
    run "$axonn" memorization --init "$tmp/m.bin" --tokenizer "$tmp/tok.json" --output "$tmp/r1.json" "$tmp/docs.jsonl"
    for grid in 2,1,1,1 1,2,1,1 1,1,2,1 2,2,1,1 1,2,2,1; do
      np=$(( ${grid//,/*} ))
      run_np "$np" memorization --init "$tmp/m.bin" --tokenizer "$tmp/tok.json" --grid "$grid" --batch 1 \
        --output "$tmp/r.json" "$tmp/docs.jsonl"
      python3 - "$tmp/r1.json" "$tmp/r.json" <<'PY' || fail "grid $grid: another report than one rank's"
import json, sys
a, b = (json.load(open(p)) for p in sys.argv[1:])
for x, y in zip(a["per_document"], b["per_document"]):
    assert x["generated"] == y["generated"], (x, y)
assert a["summary"] == b["summary"]
PY
    done ;;
  from_shards)
    memorised
    # the training shard's documents: 200 copies of the seen one, each reproduced
    run "$axonn" memorization --init "$tmp/m.bin" --tokenizer "$tmp/tok.json" --shards "$tmp/data" --max-documents 3
    expect_output "documents +3 "
    expect_output "exact match +1.0000" ;;
  bad_input)
    expect_error "no documents: give text inputs" "$axonn" memorization --init "$model" --tokenizer "$tmp/tok.json"
    echo '{"text": "a b"}' >"$tmp/d.jsonl"
    expect_error "give either text inputs or --shards, not both" \
      "$axonn" memorization --init "$model" --tokenizer "$tmp/tok.json" --shards "$ref/gpt2-tiny/tokens.bin" "$tmp/d.jsonl"
    expect_error "--suffix-len must be in \[1, 64\)" \
      "$axonn" memorization --init "$model" --tokenizer "$tmp/tok.json" --suffix-len 64 "$tmp/d.jsonl"
    expect_error "--batch must be >= 1" "$axonn" memorization --init "$model" --tokenizer "$tmp/tok.json" --batch 0 "$tmp/d.jsonl"
    expect_error "has 50257 ids, more than the model's vocabulary of 500: give --tokenizer the one" \
      "$axonn" memorization --init "$model" --tokenizer gpt2 "$tmp/d.jsonl"
    : >"$tmp/empty.jsonl"
    expect_error "the inputs hold no documents" "$axonn" memorization --init "$model" --tokenizer "$tmp/tok.json" "$tmp/empty.jsonl"
    expect_once 2 "no documents: give text inputs" memorization --init "$model" --tokenizer "$tmp/tok.json" --grid 1,1,1,2 ;;
  *) fail "unknown case $case_name" ;;
esac
