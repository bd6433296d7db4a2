#!/usr/bin/env bash
# The tokenizer travels with the model (tests/cli/tokenizer_travel/CMakeLists.txt). The data: this
# repository's docs, prepared with a SentencePiece tokenizer of 400 ids trained on them (`axonn tokenizer
# train`), or with a byte-level tokenizer.json of 500 ids (tests/common/byte_tokenizer_500.py); the models
# gpt2-tiny and llama-tiny of that vocabulary (prepare.json's), trained a few steps.
# Usage: cli_tokenizer_travel.sh CASE AXONN_BIN REFERENCE_DIR MPIEXEC
case_name=$1 axonn=$2 ref=$3 mpiexec=${4:-mpiexec}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common.sh"
docs=$(cd "$here/../../../docs" && pwd)

# prepare_sp: $tmp/data prepared with $tmp/sp.model (SentencePiece, 400 ids)
prepare_sp() {
  run "$axonn" tokenizer train "$docs"/*.md --vocab-size 400 --output "$tmp/sp.model"
  run "$axonn" prepare "$docs"/*.md --tokenizer "$tmp/sp.model" --output "$tmp/data" --val-fraction 0.1
}
# train_on NP GRID MODEL: MODEL trained 20 steps on $tmp/data, checkpoints in $tmp/ck
train_on() {
  run_np "$1" train --model "$3" --grid "$2" --data "$tmp/data" --batch-size 4 --seq-len 32 --steps 20 --lr 3e-3 \
    --quiet --checkpoint-dir "$tmp/ck"
}

# same_encoding TOKENIZER_A TOKENIZER_B: the two encode docs/text.md alike
same_encoding() {
  run "$axonn" tokenizer encode --tokenizer "$1" <"$docs/text.md"
  cp "$tmp/out" "$tmp/a.enc"
  run "$axonn" tokenizer encode --tokenizer "$2" <"$docs/text.md"
  same "$tmp/a.enc" "$tmp/out"
}

# save_matches MODEL NP GRID FORMAT...: MODEL trained 4 steps on GRID with --save in each FORMAT (bin: an llm.c
# file, gguf: a GGUF file, hf: a Hugging Face directory), each byte for byte what `axonn convert` makes of the
# run's last checkpoint (same file names: GGUF names the model by its file's stem)
save_matches() {
  local model=$1 np=$2 grid=$3 fmt out f
  shift 3
  for fmt in "$@"; do
    local d="$tmp/$model-$grid-$fmt"
    case $fmt in bin) out=model.bin ;; gguf) out=model.gguf ;; hf) out=model/ ;; esac
    mkdir -p "$d/save" "$d/convert"
    run_np "$np" train --model "$model" --grid "$grid" --data "$tmp/data" --batch-size 4 --seq-len 32 --steps 4 \
      --lr 3e-3 --quiet --checkpoint-dir "$d/ck" --save "$d/save/$out"
    run "$axonn" convert --from "$d/ck" --to "$d/convert/$out"
    if [ "$fmt" = hf ]; then
      [ "$(ls -A "$d/save/$out")" = "$(ls -A "$d/convert/$out")" ] ||
        fail "$model on $grid: --save $out holds $(ls -A "$d/save/$out"), convert's $(ls -A "$d/convert/$out")"
      for f in "$d/convert/$out"*; do same "$d/save/$out$(basename "$f")" "$f"; done
      [ -e "$d/save/${out}tokenizer.model" ] || fail "$model on $grid: the HF directory lacks the run's tokenizer"
      # it loads back: the same greedy ids as the checkpoint's
      run "$axonn" generate --init "$d/save/$out" --prompt-ids 1,2,3 --print-ids --temperature 0 --max-new-tokens 8
      grep -E '^[0-9]+(,[0-9]+)+$' "$tmp/out" >"$d/ids-save"
      run "$axonn" generate --init "$d/ck" --prompt-ids 1,2,3 --print-ids --temperature 0 --max-new-tokens 8
      grep -E '^[0-9]+(,[0-9]+)+$' "$tmp/out" >"$d/ids-ck"
      [ -s "$d/ids-save" ] || fail "$model on $grid: generate printed no ids"
      same "$d/ids-save" "$d/ids-ck"
    else
      same "$d/save/$out" "$d/convert/$out"
    fi
  done
  echo "ok: $model on $np rank(s), grid $grid: --save $* equal convert's"
}

case "$case_name" in
  prepare_copies)
    prepare_sp
    check "prepare copies a SentencePiece model as tokenizer.model" cmp "$tmp/sp.model" "$tmp/data/tokenizer/tokenizer.model"
    grep -q '"tokenizer_dir": "tokenizer"' "$tmp/data/prepare.json" || fail "prepare.json does not record tokenizer_dir"
    # a tokenizer.json, whatever its name, as tokenizer.json
    python3 "$here/../../common/byte_tokenizer_500.py" "$tmp/bytes.json"
    run "$axonn" prepare "$docs/cli.md" --tokenizer "$tmp/bytes.json" --output "$tmp/data2" --val-fraction 0
    check "prepare copies a tokenizer.json" cmp "$tmp/bytes.json" "$tmp/data2/tokenizer/tokenizer.json"
    run "$axonn" tokenizer info --tokenizer "$tmp/data2/tokenizer"
    expect_output "500"
    echo "ok: the prepared data holds its tokenizer" ;;

  checkpoint_carries)
    prepare_sp
    train_on 1 1,1,1,1 llama-tiny
    step=$(ls -d "$tmp"/ck/step-*)
    check "the checkpoint carries the tokenizer" cmp "$tmp/sp.model" "$step/tokenizer.model"
    grep -q '"name": "tokenizer.model"' "$step/manifest.json" || fail "the manifest does not list tokenizer.model"
    # listed with its checksum: a changed byte is found by verification
    run "$axonn" inspect "$tmp/ck"
    printf 'x' | dd of="$step/tokenizer.model" bs=1 seek=100 conv=notrunc 2>/dev/null
    expect_error "tokenizer.model" "$axonn" inspect "$tmp/ck"
    ;;

  generate_default)
    # GPT-2 family on SentencePiece data: before, generate took GPT-2's tokenizer (50,257 ids, garbage or a
    # refusal); now the checkpoint's own, with no word of a mismatch
    prepare_sp
    train_on 1 1,1,1,1 gpt2-tiny
    run "$axonn" generate --init "$tmp/ck" --prompt "The model" --max-new-tokens 8 --temperature 0
    expect_output "^The model"
    if grep -q "ids and the model" "$tmp/out"; then fail "a tokenizer mismatch was reported"; fi
    # the same text as with --tokenizer naming it
    grep "^The model" "$tmp/out" >"$tmp/default.txt"
    run "$axonn" generate --init "$tmp/ck" --prompt "The model" --max-new-tokens 8 --temperature 0 --tokenizer "$tmp/sp.model"
    grep "^The model" "$tmp/out" >"$tmp/named.txt"
    same "$tmp/default.txt" "$tmp/named.txt"
    # Llama: before, "no tokenizer is known"
    rm -rf "$tmp/ck"
    train_on 1 1,1,1,1 llama-tiny
    run "$axonn" generate --init "$tmp/ck" --prompt "The model" --max-new-tokens 8 --temperature 0
    expect_output "^The model" ;;

  # --save on any grid (issue 34): the shards gathered to rank 0, written by the path's extension
  save_gpt2)
    prepare_sp
    save_matches gpt2-tiny 1 1,1,1,1 bin gguf hf
    save_matches gpt2-tiny 4 2,2,1,1 bin gguf hf
    save_matches gpt2-tiny 2 1,1,2,1 bin gguf hf ;;
  save_llama)
    prepare_sp
    save_matches llama-tiny 1 1,1,1,1 gguf hf
    save_matches llama-tiny 4 2,2,1,1 gguf hf
    save_matches llama-tiny 2 1,1,2,1 gguf hf
    save_matches llama-tiny 4 1,2,1,2 hf
    # an llm.c file holds GPT-2 only: refused on every rank before training, nothing written
    expect_once 2 "an llm.c file \\(.bin\\) holds GPT-2 models only; for this model give FILE.gguf \\(GGUF\\) or a directory DIR/" \
      train --model llama-tiny --grid 1,1,2,1 --data "$tmp/data" --batch-size 4 --seq-len 32 --steps 2 --save "$tmp/l.bin"
    expect_no_output "step +1/2"
    [ ! -e "$tmp/l.bin" ] || fail "the refused --save was written" ;;
  save_dir_is_input)
    # a Hugging Face directory --init reads is not --save's, with or without the '/'
    prepare_sp
    save_matches llama-tiny 1 1,1,1,1 hf
    hf=$tmp/llama-tiny-1,1,1,1-hf/save/model
    sum=$(md5sum "$hf"/*)
    for p in "$hf/" "$hf"; do
      expect_error "--save '$p' is --init '$hf', which this command reads" "$axonn" train --init "$hf" --data "$tmp/data" \
        --batch-size 4 --seq-len 32 --steps 2 --save "$p"
    done
    [ "$(md5sum "$hf"/*)" = "$sum" ] || fail "the --init directory changed" ;;
  save_gguf_needs_tokenizer)
    # no --data: the run carries no tokenizer, and a GGUF file holds one; every rank gets the error, before step 1
    # (it came after the last step: a run without checkpoints lost its training)
    expect_once 2 "a GGUF file holds the model's tokenizer, and this run carries none" \
      train --model gpt2-tiny --grid 1,1,2,1 --batch-size 4 --seq-len 32 --steps 1000 --save "$tmp/m.gguf"
    expect_no_output "step +1/1000"
    [ ! -e "$tmp/m.gguf" ] || fail "a GGUF file without a tokenizer was written" ;;

  grid_carries)
    prepare_sp
    # and the run directory records it (run.json)
    run_np 4 train --model llama-tiny --grid 2,2,1,1 --data "$tmp/data" --batch-size 4 --seq-len 32 --steps 20 \
      --lr 3e-3 --quiet --run-dir "$tmp/run"
    grep -q "\"tokenizer\": \"$tmp/data/tokenizer\"" "$tmp/run/run.json" || fail "run.json does not record the tokenizer"
    mv "$tmp/run/checkpoints" "$tmp/ck"
    step=$(ls -d "$tmp"/ck/step-*)
    check "the checkpoint of a 2x2 grid carries the tokenizer" cmp "$tmp/sp.model" "$step/tokenizer.model"
    run_np 4 generate --init "$tmp/ck" --grid 2,2,1,1 --prompt "The model" --max-new-tokens 8 --temperature 0
    expect_output "^The model" ;;

  memorization_default)
    prepare_sp
    train_on 1 1,1,1,1 llama-tiny
    run "$axonn" memorization --init "$tmp/ck" --suffix-len 8 --max-documents 2 "$docs/cli.md" "$docs/text.md"
    # before, a Llama's tokenizer was unknown here: "give --tokenizer PATH"
    expect_output "^documents +2 " ;;

  convert_default)
    prepare_sp
    train_on 1 1,1,1,1 llama-tiny
    # GGUF: the carried tokenizer inside, without --tokenizer (before: refused)
    run "$axonn" convert --from "$tmp/ck" --to "$tmp/m.gguf"
    expect_output "tokenizer SentencePiece"
    grep -qa "tokenizer.ggml.model" "$tmp/m.gguf" || fail "no tokenizer in the GGUF file"
    # inspect reads it back (before: "neither an llm.c model file, a safetensors file, nor a checkpoint directory")
    run "$axonn" inspect "$tmp/m.gguf"
    expect_output "^GGUF file '$tmp/m.gguf': version 3, [0-9]+ bytes, [0-9]+ metadata keys, 21 tensors"
    expect_output '^    general.architecture = "llama"$'
    expect_output '^    tokenizer.ggml.model = "llama"$'
    expect_output '^    tokenizer.ggml.tokens = \[400 strings: '
    expect_output '^    blk.1.attn_k.weight +F32 +\[64, 32\] +8192 bytes$'
    # ... and, given as a model, is read with its tokenizer (gguf_import has the rest)
    run "$axonn" generate --init "$tmp/m.gguf" --prompt "The model" --max-new-tokens 4 --temperature 0
    expect_output "^The model"
    # Hugging Face: tokenizer.model beside the weights, and generate reads the directory with it
    run "$axonn" convert --from "$tmp/ck" --to "$tmp/hf/"
    check "the HF directory carries tokenizer.model" cmp "$tmp/sp.model" "$tmp/hf/tokenizer.model"
    run "$axonn" generate --init "$tmp/ck" --prompt "The model" --max-new-tokens 8 --temperature 0
    grep "^The model" "$tmp/out" >"$tmp/ck.txt"
    run "$axonn" generate --init "$tmp/hf" --prompt "The model" --max-new-tokens 8 --temperature 0
    grep "^The model" "$tmp/out" >"$tmp/hf.txt"
    same "$tmp/ck.txt" "$tmp/hf.txt"
    # with transformers' tokenizer_config.json (the class and the special tokens' text)
    grep -q '"tokenizer_class": "LlamaTokenizer"' "$tmp/hf/tokenizer_config.json" || fail "no LlamaTokenizer config"
    grep -q '"eos_token": "</s>"' "$tmp/hf/tokenizer_config.json" || fail "no eos_token </s>"
    grep -q '"model_max_length": 64' "$tmp/hf/tokenizer_config.json" || fail "no model_max_length"
    # a byte-level tokenizer.json: PreTrainedTokenizerFast, read back with the directory
    python3 "$here/../../common/byte_tokenizer_500.py" "$tmp/bytes.json"
    run "$axonn" convert --from "$ref/gpt2-tiny/model.bin" --to "$tmp/hf2/" --tokenizer "$tmp/bytes.json"
    check "tokenizer.json beside the weights" cmp "$tmp/bytes.json" "$tmp/hf2/tokenizer.json"
    grep -q '"tokenizer_class": "PreTrainedTokenizerFast"' "$tmp/hf2/tokenizer_config.json" || fail "no fast config"
    grep -q '"eos_token": "<|endoftext|>"' "$tmp/hf2/tokenizer_config.json" || fail "no eos_token <|endoftext|>"
    run "$axonn" generate --init "$tmp/hf2" --prompt "hello" --max-new-tokens 4 --temperature 0
    expect_output "^hello"
    # a tokenizer that does not fit is refused before anything is written
    expect_error "has 500 ids but the model's vocabulary 400" \
      "$axonn" convert --from "$tmp/ck" --to "$tmp/hf3/" --tokenizer "$tmp/bytes.json"
    [ ! -e "$tmp/hf3/model.safetensors" ] || fail "a refused conversion wrote weights" ;;

  gguf_import)
    # A GGUF file is a model source like an HF directory: its weights and the tokenizer inside it (before:
    # "is a GGUF file: axonn writes GGUF ... give the one the GGUF file was made from"). Llama with
    # SentencePiece, GPT-2 with a byte-level tokenizer.json; generation from the file, with no --tokenizer,
    # gives the checkpoint's ids and log-probabilities (F32: the same digits), on 1 rank and a 2x2 grid
    greedy() {  # greedy MODEL [NP GRID]: ids and log-probabilities of 12 greedy tokens, into $tmp/out
      local init=$1
      if [ -n "${2:-}" ]; then
        run_np "$2" generate --init "$init" --grid "$3" --prompt "The model" --max-new-tokens 12 --temperature 0 \
          --print-ids --print-logprobs
      else
        run "$axonn" generate --init "$init" --prompt "The model" --max-new-tokens 12 --temperature 0 --print-ids \
          --print-logprobs
      fi
    }
    prepare_sp
    train_on 1 1,1,1,1 llama-tiny
    run "$axonn" convert --from "$tmp/ck" --to "$tmp/m.gguf"
    run "$axonn" inspect "$tmp/m.gguf"
    expect_output "^  as a model: llama L=2 NH=4 KV=2 C=64 .*, tokenizer SentencePiece of the GGUF file $tmp/m.gguf, 400 ids$"
    greedy "$tmp/ck"
    grep -E '^[-0-9.,]+$' "$tmp/out" >"$tmp/ck.ids"
    [ "$(wc -l <"$tmp/ck.ids")" = 2 ] || fail "no ids and log-probabilities printed"
    greedy "$tmp/m.gguf"
    expect_output "^generate  weights of the GGUF llama \(F32\) file $tmp/m.gguf"
    grep -E '^[-0-9.,]+$' "$tmp/out" >"$tmp/gguf.ids"
    same "$tmp/ck.ids" "$tmp/gguf.ids"
    greedy "$tmp/ck" 4 2,2,1,1
    grep -E '^[-0-9,]+$' "$tmp/out" | head -1 >"$tmp/ck4.ids"
    greedy "$tmp/m.gguf" 4 2,2,1,1
    grep -E '^[-0-9,]+$' "$tmp/out" | head -1 >"$tmp/gguf4.ids"
    same "$tmp/ck4.ids" "$tmp/gguf4.ids"
    # its tokenizer written out as files: an HF directory from the GGUF file encodes the docs as sp.model does
    run "$axonn" convert --from "$tmp/m.gguf" --to "$tmp/hf/"
    [ -f "$tmp/hf/tokenizer.model" ] || fail "the HF directory from a GGUF file has no tokenizer.model"
    grep -q '"tokenizer_class": "LlamaTokenizer"' "$tmp/hf/tokenizer_config.json" || fail "no LlamaTokenizer config"
    same_encoding "$tmp/sp.model" "$tmp/hf"
    greedy "$tmp/hf"
    grep -E '^[-0-9.,]+$' "$tmp/out" >"$tmp/hf.ids"
    same "$tmp/ck.ids" "$tmp/hf.ids"
    # fine-tuning starts from the file's weights: the first step's loss is the checkpoint's
    for from in ck m.gguf; do
      run "$axonn" train --init "$tmp/$from" --data "$tmp/data" --batch-size 4 --seq-len 32 \
        --steps 1 --lr 3e-3 --quiet --metrics "$tmp/$from.jsonl"
      grep -o '"loss": *[0-9.e+-]*' "$tmp/$from.jsonl" | head -1 >"$tmp/$from.loss"
    done
    [ -s "$tmp/ck.loss" ] || fail "no loss in the metrics"
    same "$tmp/ck.loss" "$tmp/m.gguf.loss"
    # GPT-2 with a byte-level tokenizer.json: F32 gives the checkpoint's ids and log-probabilities; BF16 (its
    # norms and biases stay F32) those of the HF directory converted from it
    python3 "$here/../../common/byte_tokenizer_500.py" "$tmp/bytes.json"
    run "$axonn" prepare "$docs"/*.md --tokenizer "$tmp/bytes.json" --output "$tmp/bdata" --val-fraction 0.1
    run "$axonn" train --model gpt2-tiny --data "$tmp/bdata" --batch-size 4 --seq-len 32 --steps 20 --lr 3e-3 \
      --quiet --checkpoint-dir "$tmp/bck"
    run "$axonn" convert --from "$tmp/bck" --to "$tmp/f.gguf"
    greedy "$tmp/bck"
    grep -E '^[-0-9.,]+$' "$tmp/out" >"$tmp/bck.ids"
    greedy "$tmp/f.gguf"
    grep -E '^[-0-9.,]+$' "$tmp/out" >"$tmp/f.ids"
    same "$tmp/bck.ids" "$tmp/f.ids"
    run "$axonn" convert --from "$tmp/bck" --to "$tmp/b.gguf" --dtype bf16
    run "$axonn" convert --from "$tmp/b.gguf" --to "$tmp/bhf/"
    [ -f "$tmp/bhf/tokenizer.json" ] || fail "the HF directory from a GGUF file has no tokenizer.json"
    same_encoding "$tmp/bytes.json" "$tmp/bhf"
    greedy "$tmp/bhf"
    grep -E '^[-0-9.,]+$' "$tmp/out" >"$tmp/bhf.ids"
    greedy "$tmp/b.gguf"
    expect_output "^generate  weights of the GGUF gpt2 \(BF16\) file"
    grep -E '^[-0-9.,]+$' "$tmp/out" >"$tmp/bgguf.ids"
    same "$tmp/bhf.ids" "$tmp/bgguf.ids"
    # a tokenizer axonn does not read (llama.cpp's pre-tokenizer qwen2) leaves the weights usable: convert to
    # llm.c, train (carrying none, said once), generate with --tokenizer; generate without says what to give
    python3 - "$tmp/f.gguf" "$tmp/q.gguf" <<'PY'
import sys
b = open(sys.argv[1], "rb").read()
open(sys.argv[2], "wb").write(b.replace(b"gpt-2", b"qwen2", 1))
PY
    run "$axonn" convert --from "$tmp/q.gguf" --to "$tmp/q.bin"
    run "$axonn" train --init "$tmp/q.gguf" --data "$tmp/bdata/train_000000.bin" --batch-size 4 --seq-len 32 \
      --steps 1 --checkpoint-dir "$tmp/qck"
    expect_output "the checkpoints carry no tokenizer: the one inside $tmp/q.gguf is not one axonn reads .*qwen2"
    expect_error "pre-tokenizer 'qwen2', which axonn does not have .*give --tokenizer" \
      "$axonn" generate --init "$tmp/q.gguf" --prompt "The model"
    run "$axonn" generate --init "$tmp/q.gguf" --tokenizer "$tmp/bytes.json" --prompt "The model" --max-new-tokens 4 \
      --temperature 0
    expect_output "^The model"
    # a tokenizer inside a GGUF file is not a tokenizer file: the message says how to write it out
    expect_error "is a GGUF model file; the tokenizer inside one is read with its model .* axonn convert --from" \
      "$axonn" prepare "$docs/cli.md" --tokenizer "$tmp/m.gguf" --output "$tmp/x" ;;

  init_carries)
    # a run from a model that carries a tokenizer (an HF directory's files, the one inside a GGUF file) on data
    # that names none (a token shard alone) carries the model's into its checkpoints and --save (before:
    # none, and --save FILE.gguf refused: "this run carries none")
    prepare_sp
    train_on 1 1,1,1,1 llama-tiny
    run "$axonn" convert --from "$tmp/ck" --to "$tmp/hf/"
    run "$axonn" convert --from "$tmp/ck" --to "$tmp/m.gguf"
    for init in hf m.gguf; do
      run "$axonn" train --init "$tmp/$init" --data "$tmp/data/train_000000.bin" --batch-size 4 --seq-len 32 \
        --steps 2 --quiet --checkpoint-dir "$tmp/ck-$init" --save "$tmp/out-$init.gguf"
      step=$tmp/ck-$init/step-00000002
      [ -f "$step/tokenizer.model" ] || fail "the checkpoint of a run from $init carries no tokenizer.model"
      same_encoding "$tmp/sp.model" "$step"
      run "$axonn" inspect "$tmp/out-$init.gguf"
      expect_output '^    tokenizer.ggml.model = "llama"$'
    done
    check "an HF directory's tokenizer is carried as it is" cmp "$tmp/hf/tokenizer.model" "$tmp/ck-hf/step-00000002/tokenizer.model" ;;

  refused)
    # no tokenizer known: GGUF needs one, and says how to give it
    run "$axonn" convert --from "$ref/gpt2-tiny/model.bin" --to "$tmp/a.bin"
    expect_error "a GGUF file holds the model's tokenizer, and .* carries none: give --tokenizer" \
      "$axonn" convert --from "$ref/gpt2-tiny/model.bin" --to "$tmp/x.gguf"
    # a tokenizer larger than the model: refused, naming both sizes and --tokenizer
    prepare_sp
    train_on 1 1,1,1,1 llama-tiny
    python3 "$here/../../common/byte_tokenizer_500.py" "$tmp/bytes.json"
    expect_error "has 500 ids but the model's vocabulary 400: it is not the model's tokenizer; give --tokenizer" \
      "$axonn" convert --from "$tmp/ck" --to "$tmp/hf/" --tokenizer "$tmp/bytes.json"
    expect_error "has 500 ids but the model's vocabulary 400: it is not the model's tokenizer; give --tokenizer" \
      "$axonn" convert --from "$tmp/ck" --to "$tmp/y.gguf" --tokenizer "$tmp/bytes.json"
    [ ! -e "$tmp/y.gguf" ] || fail "a refused conversion wrote $tmp/y.gguf" ;;

  *) echo "unknown case $case_name"; exit 2 ;;
esac
echo PASS
