#!/usr/bin/env bash
# CLI tests of `axonn generate` on the reference GPT-2 (tests/reference/gpt2-tiny: V=500, 64 positions):
# ids only on stdout with --print-ids; greedy ids equal to a float64 PyTorch oracle's (gen_oracle.py,
# written from GPT-2's formulas); text in and out through a byte-level tokenizer of the model's 500 ids;
# the same output on grids of 1, 2 and 4 ranks, greedy and sampled; the Llama oracle's Hugging Face
# directory on every grid; a checkpoint directory; seeds; bad input refused with a
# clear message (once, every rank exiting 2); the log lines and the sample in order under mpirun.
# Usage: cli_generate.sh CASE AXONN_BIN REFERENCE_DIR MPIEXEC   (exit 77: skipped, the reason printed)
case_name=$1 axonn=$2 ref=$3 mpiexec=${4:-mpiexec}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common.sh"
model=$ref/gpt2-tiny/model.bin

gen_model=$model

# gen NP OUT ARGS...: `axonn generate ARGS` of $gen_model on NP ranks; stdout to OUT, stderr to $tmp/err
# (also in $tmp/out); must exit 0
gen() {
  local np=$1 out=$2 rc=0
  shift 2
  timeout "$CLI_TIMEOUT" "$mpiexec" -n "$np" --oversubscribe "$axonn" generate --init "$gen_model" "$@" >"$out" \
    2>"$tmp/err" || rc=$?
  cp "$tmp/err" "$tmp/out"
  [ "$rc" -eq 0 ] || fail "exit code $rc (want 0) for: generate $*"
}

# a byte-level BPE tokenizer.json with exactly the model's 500 ids (tests/common/byte_tokenizer_500.py)
tokenizer() {
  python3 "$here/../../common/byte_tokenizer_500.py" "$tmp/tok.json"
}

# the reference model trained for 60 steps on its Markov-chain tokens: its continuations follow the
# chain (the random model's greedy output repeats one token)
train_model() {
  run "$axonn" train --init "$model" --data "$ref/gpt2-tiny/tokens.bin" --batch-size 4 --seq-len 32 --steps 60 \
    --lr 3e-3 --warmup-steps 0 --quiet --save "$tmp/trained.bin"
  gen_model=$tmp/trained.bin
}

case "$case_name" in
  print_ids)
    gen 1 "$tmp/ids" --prompt-ids 1,2,3 --max-new-tokens 20 --temperature 0 --print-ids
    [ "$(wc -l <"$tmp/ids")" -eq 1 ] || fail "want one line of ids on stdout, got: $(cat "$tmp/ids")"
    expect_output '^[0-9]+(,[0-9]+){19}$' "$tmp/ids"
    expect_output 'generate  20 new tokens in .* tokens/s'  # on stderr
    # several samples: one line each
    gen 1 "$tmp/ids3" --prompt-ids 1,2,3 --max-new-tokens 8 --temperature 1 --seed 3 --num-samples 3 --print-ids
    [ "$(wc -l <"$tmp/ids3")" -eq 3 ] || fail "want 3 lines, got: $(cat "$tmp/ids3")"
    [ "$(grep -Ec '^[0-9]+(,[0-9]+){7}$' "$tmp/ids3")" -eq 3 ] || fail "want 8 ids per line: $(cat "$tmp/ids3")"
    # up to the context's end: 64 positions - 60 prompt tokens = 4 new tokens
    gen 1 "$tmp/ctx" --prompt-ids "$(seq -s, 1 60)" --max-new-tokens 50 --temperature 0 --print-ids
    expect_output '^[0-9]+(,[0-9]+){3}$' "$tmp/ctx" ;;

  greedy_oracle)
    /usr/bin/python3 -c "import torch" 2>/dev/null || skip_reason="PyTorch is not installed at /usr/bin/python3"
    if [ -n "${skip_reason:-}" ]; then echo "SKIP: $skip_reason"; exit 77; fi
    train_model
    gen 1 "$tmp/ids" --prompt-ids 7,1,99,3,250 --max-new-tokens 40 --temperature 0 --print-ids
    /usr/bin/python3 "$here/gen_oracle.py" "$gen_model" 7,1,99,3,250 40 >"$tmp/oracle"
    same "$tmp/ids" "$tmp/oracle"
    # and the untrained model's
    gen_model=$model
    gen 1 "$tmp/ids" --prompt-ids 7,1,99,3,250 --max-new-tokens 40 --temperature 0 --print-ids
    /usr/bin/python3 "$here/gen_oracle.py" "$gen_model" 7,1,99,3,250 40 >"$tmp/oracle"
    same "$tmp/ids" "$tmp/oracle" ;;

  text_prompt)
    tokenizer
    gen 1 "$tmp/text" --prompt "hello there" --tokenizer "$tmp/tok.json" --max-new-tokens 30 --temperature 0
    expect_output '^hello there' "$tmp/text"
    # the same generation as ids: the text is the prompt and the ids decoded (without a stop id)
    run "$axonn" tokenizer encode --tokenizer "$tmp/tok.json" "hello there"
    prompt_ids=$(cat "$tmp/out")
    gen 1 "$tmp/ids" --prompt-ids "$prompt_ids" --tokenizer "$tmp/tok.json" --max-new-tokens 30 --temperature 0 --print-ids
    ids=$(sed 's/,256$//' "$tmp/ids")
    run "$axonn" tokenizer decode --tokenizer "$tmp/tok.json" "$prompt_ids,$ids"
    same "$tmp/out" "$tmp/text"
    # several samples: each printed whole after a header
    gen 1 "$tmp/three" --prompt "hello" --tokenizer "$tmp/tok.json" --max-new-tokens 10 --num-samples 3 --seed 1
    [ "$(grep -c '^--- sample [123]$' "$tmp/three")" -eq 3 ] || fail "want 3 sample headers: $(cat "$tmp/three")"
    [ "$(grep -c '^hello' "$tmp/three")" -eq 3 ] || fail "want each sample to start with the prompt" ;;

  decode_threads)
    # with 2 threads the decode times 2 and 1 thread in its first steps and runs on the faster: the ids and
    # log-probabilities are those of 1 thread, bit for bit, whichever it chose (prompts of at most 8 rows,
    # so that the prefill's products are the few-row ones too)
    for samples in 1 8; do
      args=(--prompt-ids 7,1,99 --max-new-tokens 40 --temperature 0 --num-samples "$samples" --print-ids
            --print-logprobs)
      OMP_NUM_THREADS=1 gen 1 "$tmp/one" "${args[@]}"
      expect_no_output "the faster, measured"  # one thread: nothing to choose
      OMP_NUM_THREADS=2 gen 1 "$tmp/two" "${args[@]}"
      expect_output "decode [0-9.]+ tokens/s on [12] of 2 threads \(the faster, measured\)$"
      same "$tmp/two" "$tmp/one"
      # or as asked: no measuring
      OMP_NUM_THREADS=2 gen 1 "$tmp/fixed" "${args[@]}" --decode-threads 2
      expect_no_output "the faster, measured"
      same "$tmp/fixed" "$tmp/one"
    done ;;

  outputs_in_order)
    # under mpirun, which forwards a rank's standard output and error separately, both into one file as a
    # terminal shows them: the log lines before the sample, the sample whole on its line, the rate line
    # last (before the fix the rate line or the header landed inside the sample in 6 runs of 20)
    tokenizer
    gen 1 "$tmp/alone" --prompt "hello there" --tokenizer "$tmp/tok.json" --max-new-tokens 40 --temperature 0
    for np in 1 2 1 2 1 2 1 2 1 2; do
      timeout -k 10 "$CLI_TIMEOUT" "$mpiexec" -n "$np" --oversubscribe "$axonn" generate --init "$gen_model" \
        --prompt "hello there" --tokenizer "$tmp/tok.json" --max-new-tokens 40 --temperature 0 --grid "$np,1,1,1" \
        >"$tmp/both" 2>&1 || fail "exit code $? for generate on $np ranks"
      cp "$tmp/both" "$tmp/out"
      sample_line=$(grep -n "^hello there" "$tmp/both" | cut -d: -f1)
      [ -n "$sample_line" ] || fail "no line starts with the sample on $np ranks"
      [ "$(sed -n "${sample_line}p" "$tmp/both")" = "$(cat "$tmp/alone")" ] ||
        fail "the sample is not whole on its line on $np ranks"
      [ "$(grep -Ec '^(\[rank 0/2\] )?generate  ' "$tmp/both")" -ge 3 ] ||
        fail "want the log lines on their own lines ($np ranks)"
      sed -n "1,$((sample_line - 1))p" "$tmp/both" | grep -q 'generate  weights of' ||
        fail "the model's line comes after the sample on $np ranks"
      tail -1 "$tmp/both" | grep -Eq '^(\[rank 0/2\] )?generate  40 new tokens in .* tokens/s$' ||
        fail "the rate line is not the last line on $np ranks"
    done ;;

  grids_same_output)
    tokenizer
    train_model
    sampled=(--prompt-ids 5,6,7 --max-new-tokens 24 --temperature 1 --top-k 50 --top-p 0.9 --seed 11 --num-samples 2
             --print-ids)
    greedy=(--prompt-ids 5,6,7 --max-new-tokens 24 --temperature 0 --print-ids)
    text=(--prompt "abc" --tokenizer "$tmp/tok.json" --max-new-tokens 24 --temperature 0.8 --seed 2)
    gen 1 "$tmp/s1" "${sampled[@]}"
    gen 1 "$tmp/g1" "${greedy[@]}"
    gen 1 "$tmp/t1" "${text[@]}"
    for grid in 2,1,1,1 1,2,1,1 1,1,2,1 1,1,1,2 2,2,1,1 1,2,1,2 2,1,2,1 1,1,2,2; do
      np=$(( $(echo "$grid" | tr , '*') ))
      gen "$np" "$tmp/s" "${sampled[@]}" --grid "$grid"
      same "$tmp/s" "$tmp/s1"
      gen "$np" "$tmp/g" "${greedy[@]}" --grid "$grid"
      same "$tmp/g" "$tmp/g1"
      gen "$np" "$tmp/t" "${text[@]}" --grid "$grid"
      same "$tmp/t" "$tmp/t1"
    done ;;

  seeds)
    args=(--prompt-ids 5,6,7 --max-new-tokens 24 --temperature 1 --print-ids)
    gen 1 "$tmp/a" "${args[@]}" --seed 1
    gen 1 "$tmp/b" "${args[@]}" --seed 1
    same "$tmp/a" "$tmp/b"
    gen 1 "$tmp/c" "${args[@]}" --seed 2
    ! cmp -s "$tmp/a" "$tmp/c" || fail "seeds 1 and 2 gave the same samples: $(cat "$tmp/a")"
    # greedy ignores the seed
    gen 1 "$tmp/g1" --prompt-ids 5,6,7 --max-new-tokens 24 --temperature 0 --print-ids --seed 1
    gen 1 "$tmp/g2" --prompt-ids 5,6,7 --max-new-tokens 24 --temperature 0 --print-ids --seed 2
    same "$tmp/g1" "$tmp/g2" ;;

  llama_hf_dir)
    # the Llama oracle's Hugging Face directory (GQA: 2 KV heads): the same ids on every grid it admits
    gen_model=$here/../../golden/llama-gqa
    sampled=(--prompt-ids 5,6,7 --max-new-tokens 20 --temperature 1 --top-k 20 --seed 4 --num-samples 2 --print-ids)
    greedy=(--prompt-ids 5,6,7 --max-new-tokens 20 --temperature 0 --print-ids)
    gen 1 "$tmp/s1" "${sampled[@]}"
    gen 1 "$tmp/g1" "${greedy[@]}"
    [ "$(wc -l <"$tmp/s1")" -eq 2 ] || fail "want 2 samples: $(cat "$tmp/s1")"
    for grid in 2,1,1,1 1,2,1,1 1,1,2,1 1,1,1,2; do
      gen 2 "$tmp/s" "${sampled[@]}" --grid "$grid"
      same "$tmp/s" "$tmp/s1"
      gen 2 "$tmp/g" "${greedy[@]}" --grid "$grid"
      same "$tmp/g" "$tmp/g1"
    done
    # text needs a tokenizer, and this directory has none
    expect_exit 2 "$axonn" generate --init "$gen_model" --prompt "hi"
    expect_output "no tokenizer is known for .*: give --tokenizer PATH" ;;

  checkpoint_dir)
    # a run's checkpoint directory (written on 2 ranks, X split) and the llm.c file converted from it
    # generate the same
    run_np 2 train --init "$model" --data "$ref/gpt2-tiny/tokens.bin" --batch-size 4 --seq-len 32 --steps 20 \
      --lr 3e-3 --grid 2,1,1,1 --checkpoint-dir "$tmp/ck" --quiet
    run "$axonn" convert --from "$tmp/ck" --to "$tmp/t.bin"
    args=(--prompt-ids 9,8,7 --max-new-tokens 30 --temperature 0.7 --seed 5 --print-ids)
    gen_model=$tmp/t.bin
    gen 1 "$tmp/a" "${args[@]}"
    gen_model=$tmp/ck
    gen 1 "$tmp/b" "${args[@]}"
    expect_output "generate  weights of .*ck/step-0*20 \(step 20, grid 2x1x1x1\)"
    same "$tmp/a" "$tmp/b" ;;

  bf16)
    # generate --dtype bf16 (bf16 weights, activations and KV cache, fp32 sums): on the trained model, the
    # greedy ids of fp32 and log-probabilities within 0.05 of fp32's, with less memory for the weights; from an
    # llm.c file, and from a checkpoint directory written on 2 ranks, generated on 1 rank and on a 2-rank grid
    train_model
    args=(--prompt-ids 7,1,99,3,250 --max-new-tokens 30 --temperature 0 --print-ids --print-logprobs)
    compare() {  # compare FP32_OUT BF16_OUT: the same ids, log-probabilities within 0.05
      python3 - "$1" "$2" <<'PY' || fail "bf16 against fp32: see above"
import sys
(a_ids, a_lp), (b_ids, b_lp) = (open(f).read().split("\n")[:2] for f in sys.argv[1:3])
if a_ids != b_ids: sys.exit("ids differ:\n fp32 %s\n bf16 %s" % (a_ids, b_ids))
d = max(abs(float(x) - float(y)) for x, y in zip(a_lp.split(","), b_lp.split(",")))
print("largest |log p(bf16) - log p(fp32)| over %d tokens: %.4f" % (len(a_lp.split(",")), d))
if d > 0.05: sys.exit("bf16's log-probabilities are %.4f from fp32's (bound 0.05)" % d)
PY
    }
    weights() { sed -n "s/.*memory per rank ($1): weights \([0-9.]*\) MiB.*/\1/p" "$tmp/err"; }
    gen 1 "$tmp/f32" "${args[@]}"
    w32=$(weights fp32)
    gen 1 "$tmp/b16" "${args[@]}" --dtype bf16
    w16=$(weights bf16)
    compare "$tmp/f32" "$tmp/b16"
    # (the log's 0.1 MiB hides the exact half on this tiny model; tests/mpi/infer checks it to the byte)
    python3 -c "import sys; a, b = map(float, sys.argv[1:]); sys.exit(0 if 0 < b < a else 1)" "$w32" "$w16" ||
      fail "bf16 weights take $w16 MiB, fp32 $w32 MiB: want less"
    run_np 2 train --init "$gen_model" --data "$ref/gpt2-tiny/tokens.bin" --batch-size 4 --seq-len 32 --steps 2 \
      --lr 0 --grid 2,1,1,1 --checkpoint-dir "$tmp/ck" --quiet
    gen_model=$tmp/ck
    gen 1 "$tmp/ck32" "${args[@]}"
    gen 1 "$tmp/ck16" "${args[@]}" --dtype bf16
    compare "$tmp/ck32" "$tmp/ck16"
    gen 2 "$tmp/ck16x2" "${args[@]}" --dtype bf16 --grid 2,1,1,1
    compare "$tmp/ck32" "$tmp/ck16x2" ;;

  run_dir_samples)
    # generate --run-dir RUN: the prompt and samples appended to RUN/samples.txt, which axonn report shows
    # (escaped); refused before any work when RUN is no directory or its samples.txt is a link; a run that
    # --overwrite replaces loses its samples with its checkpoints and traces
    tokenizer
    run "$axonn" train --init "$model" --data "$ref/gpt2-tiny/tokens.bin" --batch-size 4 --seq-len 32 --steps 2 \
      --run-dir "$tmp/run" --save "$tmp/run.bin" --quiet
    gen_model=$tmp/run.bin
    gen 1 "$tmp/a" --prompt "<b>&" --tokenizer "$tmp/tok.json" --max-new-tokens 10 --seed 3 --run-dir "$tmp/run"
    gen 1 "$tmp/b" --prompt-ids 5,6 --max-new-tokens 4 --temperature 0 --print-ids --num-samples 2 --run-dir "$tmp/run"
    s=$tmp/run/samples.txt
    [ "$(count '^--- .*: axonn generate --init ' "$s")" -eq 2 ] || fail "samples.txt should hold two generations: $(cat "$s")"
    expect_output '--prompt "<b>&" --max-new-tokens 10 --temperature 1 --top-k 0 --top-p 1 --seed 3 --dtype fp32$' "$s"
    expect_output '^<b>&' "$s"  # the sample: the prompt, then its continuation
    expect_output '^-- sample 2$' "$s"
    run "$axonn" report "$tmp/run" --quiet
    expect_output '<section id="samples">' "$tmp/run/report.html"
    expect_output '&lt;b&gt;&amp;' "$tmp/run/report.html"
    expect_output '<td>samples.txt</td><td>[^<]*samples.txt</td>' "$tmp/run/report.html"
    expect_exit 2 "$axonn" generate --init "$gen_model" --prompt-ids 5 --max-new-tokens 2 --run-dir "$tmp/run.bin"
    expect_output "--run-dir '.*run.bin' is not a directory"
    mkdir "$tmp/linked" && ln -s "$tmp/victim" "$tmp/linked/samples.txt"
    expect_exit 2 "$axonn" generate --init "$gen_model" --prompt-ids 5 --max-new-tokens 2 --run-dir "$tmp/linked"
    expect_output "samples.txt' is not a plain file"
    [ ! -e "$tmp/victim" ] || fail "generate wrote through a link"
    run "$axonn" train --init "$model" --data "$ref/gpt2-tiny/tokens.bin" --batch-size 4 --seq-len 32 --steps 2 \
      --run-dir "$tmp/run" --overwrite
    expect_output "and its samples\)"
    [ ! -e "$s" ] || fail "train --overwrite kept the replaced run's samples.txt" ;;

  bad_input)
    g=("$axonn" generate --init "$model")
    expect_exit 2 "${g[@]}" --max-new-tokens 5
    expect_output "no prompt: give --prompt TEXT or --prompt-ids"
    expect_exit 2 "${g[@]}" --prompt hi --prompt-ids 1,2
    expect_output "either --prompt TEXT or --prompt-ids 1,2,3, not both"
    expect_exit 2 "${g[@]}" --prompt-ids "$(seq -s, 1 64)"
    expect_output "the prompt has 64 tokens: the model's context of 64 positions leaves no room"
    expect_exit 2 "${g[@]}" --prompt-ids 1,500
    expect_output "prompt token id 500 is outside the model's vocabulary \[0, 500\)"
    expect_exit 2 "${g[@]}" --prompt-ids 1,x
    expect_output "'x' is not a token id"
    expect_exit 2 "${g[@]}" --prompt-ids 1 --temperature -1
    expect_output "--temperature must be >= 0"
    expect_exit 2 "${g[@]}" --prompt-ids 1 --top-p 0
    expect_output "--top-p must be in \(0, 1\]"
    expect_exit 2 "${g[@]}" --prompt-ids 1 --top-p 1.5
    expect_output "--top-p must be in \(0, 1\]"
    expect_exit 2 "${g[@]}" --prompt-ids 1 --top-k -1
    expect_output "--top-k must be >= 0"
    expect_exit 2 "${g[@]}" --prompt-ids 1 --max-new-tokens 0
    expect_output "--max-new-tokens must be >= 1"
    expect_exit 2 "${g[@]}" --prompt-ids 1 --num-samples 0
    expect_output "--num-samples must be >= 1"
    expect_exit 2 "${g[@]}" --prompt-ids 1 --decode-threads 0
    expect_output "--decode-threads must be auto or a thread count >= 1, got '0'"
    expect_exit 2 "${g[@]}" --prompt-ids 1 --decode-threads two
    expect_output "--decode-threads must be auto or a thread count >= 1, got 'two'"
    # more than the command's threads: said, then decoded on the command's (before: silently)
    OMP_NUM_THREADS=2 run "${g[@]}" --prompt-ids 1 --max-new-tokens 2 --decode-threads 9
    expect_output "^warning: --decode-threads 9 is more than the command's 2 threads .*: the decode runs on 2$"
    expect_exit 2 "${g[@]}" --prompt-ids 1 --seed -1
    expect_output "--seed: must be a whole number from 0 to 18446744073709551615"
    # a GPU generates where there is one; here (a CPU build, or a CUDA build without a device) the reason is named
    expect_exit 2 "${g[@]}" --prompt-ids 1 --kernels cuda
    expect_output "--kernels cuda: (this build has no CUDA backend|no CUDA device is visible)"
    expect_no_output "^[0-9 ]+$|terminate|Aborted"
    expect_exit 2 "${g[@]}" --prompt-ids 1 --grid 2,1,1,1
    expect_output "grid"
    expect_exit 2 "$axonn" generate --prompt-ids 1
    expect_output "--init is required"
    expect_error "cannot open|No such file|does not exist" "$axonn" generate --init "$tmp/none.bin" --prompt-ids 1
    absent "$tmp/none.bin" ;;

  bad_input_every_rank)
    # every rank refuses alike: the message once, exit 2 everywhere, no hang
    expect_once 2 "--temperature must be >= 0" generate --init "$model" --prompt-ids 1 --temperature -1
    expect_once 2 "prompt token id 500 is outside" generate --init "$model" --prompt-ids 500 --grid 2,1,1,1
    expect_once 2 "no prompt" generate --init "$model" --grid 1,1,1,2 ;;

  # what generate allocates (KV cache, activations, logits: per sample) is checked before allocating, and
  # the refusal names generate's own flags (issue 32, item 17)
  memory_refused)
    start=$(date +%s%N)
    expect_exit 2 "$axonn" generate --init "$model" --prompt-ids 1,2 --print-ids --num-samples 1000000
    ms=$(( ($(date +%s%N) - start) / 1000000 ))
    expect_output "needs .* per rank \\(.*activations and KV cache [0-9.]+ GiB.*--num-samples or --max-new-tokens"
    expect_no_output "--batch-size|--recompute"
    [ "$ms" -lt 5000 ] || fail "refused after $ms ms, not at once"
    echo "ok: refused in $ms ms" ;;
  # a model with more ids than its tokenizer is refused before generating, not mid-sample (item 18)
  vocab_mismatch)
    run "$axonn" train --model gpt2-tiny --vocab 60000 --steps 1 --synthetic-tokens 10000 --save "$tmp/big.bin"
    expect_exit 2 "$axonn" generate --init "$tmp/big.bin" --prompt hi --max-new-tokens 3 --tokenizer gpt2
    expect_output "vocabulary of 60000 tokens but the tokenizer .* only 50257.*--tokenizer"
    echo "ok: $(grep -Eo 'vocabulary of 60000 .* only 50257' "$tmp/out")" ;;
  # another model's tokenizer: a warning when it has more ids than the model, and a prompt id it cannot
  # hold names --tokenizer (issue 34: the quickstart's model with GPT-2's tokenizer printed garbage)
  wrong_tokenizer)
    expect_exit 2 "$axonn" generate --init "$model" --prompt "Hello world" --max-new-tokens 3 --tokenizer gpt2
    expect_output "warning: the tokenizer .* has 50257 ids and the model .* 500: unless it is the tokenizer the model was trained with"
    expect_output "prompt token id [0-9]+ is outside the model's vocabulary \[0, 500\); the tokenizer .* is not the model's: give --tokenizer" ;;
  # a truncated model file: an input that failed, exit 1 on every rank (docs/cli.md)
  corrupt_model_exit_1)
    head -c 5000 "$model" >"$tmp/m.bin"
    expect_exit 1 "$mpiexec" -n 2 --oversubscribe "$axonn" generate --init "$tmp/m.bin" --prompt-ids 1,2
    expect_output "checkpoint '$tmp/m.bin' is 5000 bytes.*truncated"
    echo "ok: exit 1" ;;
  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
