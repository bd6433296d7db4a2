#!/usr/bin/env bash
# CLI tests of `axonn prepare` and `axonn tokenizer`: shards that decode back to the input documents
# (checked by shards.py, an independent reader), the same files for any thread count, shard sizes,
# JSON Lines, text that is not UTF-8, a vocabulary too wide for uint16, bad tokenizers and outputs:
# clear errors and nothing half-written; outputs that --overwrite may not replace (inputs, what prepare
# did not make, links), two runs into one output, a huge document's memory.
# Usage: cli_prepare.sh CASE AXONN_BIN MPIEXEC   (exit 77: skipped, the reason printed)
case_name=$1 axonn=$2 mpiexec=${3:-mpiexec}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common.sh"
shards() { python3 "$here/shards.py" "$@"; }
skip() {
  echo "SKIP: $*"
  exit 77
}

fortunes_dir=/usr/share/games/fortunes
gpt2_dir() {
  local d
  for d in "${AXONN_GPT2_TOKENIZER_DIR:-}" "${XDG_CACHE_HOME:-$HOME/.cache}/axonn/gpt2" /usr/local/share/axonn/gpt2 \
           /usr/share/axonn/gpt2; do
    if [ -n "$d" ] && [ -f "$d/encoder.json" ] && [ -f "$d/vocab.bpe" ]; then
      echo "$d"
      return
    fi
  done
}
need_gpt2() {
  vocab=$(gpt2_dir)/encoder.json
  [ -f "$vocab" ] || skip "GPT-2's tokenizer files are not installed (scripts/fetch-gpt2-tokenizer.sh)"
}
need_fortunes() {
  [ -d "$fortunes_dir" ] || skip "Debian's fortunes package is not installed"
  # the fortune files themselves: not the .dat indexes, not the .u8 symlinks
  mapfile -t fortune_files < <(find "$fortunes_dir" -maxdepth 1 -type f ! -name '*.dat' | sort)
}
# a byte-level tokenizer.json made here (ids 0..255 the bytes, 256 <|endoftext|>): needs no download
tiny=$tmp/tiny.json
shards tiny-tokenizer "$tiny"
# a small corpus of two files, fortune-style
printf 'first doc\nline two\n%%\nsecond doc\n%%\n\n%%\nthird: caf\xc3\xa9\n' >"$tmp/a.txt"
printf 'fourth doc, no newline at the end' >"$tmp/b.txt"

case $case_name in
  gzip_input_said)
    # a .gz input is said to be compressed, not sent to iconv as if it were Latin-1 (issue 35)
    need_gpt2
    for i in $(seq 40); do echo "document $i"; echo %; done >"$tmp/c.txt"
    gzip -k "$tmp/c.txt"
    expect_error "input '$tmp/c.txt.gz' is gzip-compressed, not text: decompress it first" \
      "$axonn" prepare --tokenizer gpt2 --output "$tmp/o" --doc-separator % "$tmp/c.txt.gz"
    expect_no_output "iconv"
    absent "$tmp/o" ;;
  encode_stdin)
    # tokenizer encode reads standard input without TEXT, or with '-' (issue 35)
    need_gpt2
    run "$axonn" tokenizer encode --tokenizer gpt2 "Hello world"
    want=$(cat "$tmp/out")
    printf 'Hello world' | "$axonn" tokenizer encode --tokenizer gpt2 >"$tmp/a"
    printf 'Hello world' | "$axonn" tokenizer encode --tokenizer gpt2 - >"$tmp/b"
    [ "$(cat "$tmp/a")" = "$want" ] && [ "$(cat "$tmp/b")" = "$want" ] || fail "stdin gave $(cat "$tmp/a") / $(cat "$tmp/b"), not $want" ;;
  train_takes_vocab)
    # train --data DIR takes its vocabulary from prepare.json (issue 34): gpt2-tiny's 500 ids would not
    # hold GPT-2's token ids; --vocab still overrides
    need_gpt2
    for i in $(seq 60); do echo "the quick brown fox number $i jumps over the lazy dog"; echo %; done >"$tmp/c.txt"
    run "$axonn" prepare --tokenizer gpt2 --output "$tmp/data" --doc-separator % --val-fraction 0 "$tmp/c.txt"
    run "$axonn" train --data "$tmp/data" --steps 2 --batch-size 2 --seq-len 16 --peak-gflops 100 --quiet
    expect_output "vocabulary of 50257 ids from '$tmp/data/prepare.json'"
    expect_output "V=50257 \(padded 50304\)"
    expect_error "holds token id [0-9]+ .* outside the model's vocabulary of 500" \
      "$axonn" train --data "$tmp/data" --steps 2 --batch-size 2 --seq-len 16 --vocab 500 ;;
  fortunes_decode)
    need_gpt2
    need_fortunes
    run "$axonn" prepare --tokenizer gpt2 --output "$tmp/shards" --doc-separator % --val-fraction 0.05 \
      "${fortune_files[@]}"
    expect_output "documents \([0-9]+ validation\)"
    shards docs "$tmp/docs.json" --separator % "${fortune_files[@]}"
    check "the shards decode to the fortunes" shards check "$tmp/shards" "$tmp/docs.json" 0.05 50256 --vocab "$vocab"
    [ -f "$tmp/shards/train_000000.bin" ] && [ -f "$tmp/shards/val_000000.bin" ] && [ -f "$tmp/shards/prepare.json" ] ||
      fail "missing train_000000.bin, val_000000.bin or prepare.json"
    absent "$tmp/shards.tmp" ;;

  threads_deterministic)
    need_gpt2
    need_fortunes
    for t in 1 2 3; do
      run "$axonn" prepare --tokenizer gpt2 --output "$tmp/t$t" --doc-separator % --shard-size 100000 --threads "$t" \
        --exclude '*.dat' "$fortunes_dir"
    done
    n=$(ls "$tmp/t1"/*.bin | wc -l)
    [ "$n" -ge 7 ] || fail "expected several shards, got $n"
    for f in "$tmp/t1"/* "$tmp/t1"/tokenizer/*; do  # the shards, prepare.json and the tokenizer's copy
      [ -f "$f" ] || continue
      same "$f" "$tmp/t2/${f#"$tmp/t1/"}"
      same "$f" "$tmp/t3/${f#"$tmp/t1/"}"
    done ;;

  shard_size)
    run "$axonn" prepare --tokenizer "$tiny" --output "$tmp/shards" --doc-separator % --shard-size 7 --val-fraction 0.25 \
      "$tmp/a.txt" "$tmp/b.txt"
    # 5 documents ("\n" alone is one): the 4th (floor((i+1)/4) > floor(i/4) at i = 3) is validation
    shards docs "$tmp/docs.json" --separator % "$tmp/a.txt" "$tmp/b.txt"
    check "the shards decode to the documents" shards check "$tmp/shards" "$tmp/docs.json" 0.25 256 --bytes
    for f in "$tmp/shards"/train_*.bin; do
      read -r magic version count < <(shards header "$f")
      [ "$magic $version" = "20240520 1" ] || fail "$f: magic $magic version $version"
      [ "$f" = "$(ls "$tmp/shards"/train_*.bin | tail -1)" ] || [ "$count" -eq 7 ] || fail "$f holds $count tokens, not 7"
    done
    ls "$tmp/shards" | grep -q '^val_000000.bin$' || fail "no val_000000.bin" ;;

  jsonl)
    python3 - "$tmp/docs.jsonl" <<'PY'
import json, sys
with open(sys.argv[1], "w") as f:
    for t in ["first doc\nline two\n", "second doc\n", "\n", "third: café\n", "fourth doc, no newline at the end"]:
        f.write(json.dumps({"text": t, "id": 1}) + "\n")
    f.write("\n")               # blank lines are skipped
    f.write('{"text": ""}\n')   # so are empty documents
PY
    run "$axonn" prepare --tokenizer "$tiny" --output "$tmp/j" --val-fraction 0.25 "$tmp/docs.jsonl"
    shards docs "$tmp/docs.json" --jsonl "$tmp/docs.jsonl"
    check "the JSON Lines shards decode to the documents" shards check "$tmp/j" "$tmp/docs.json" 0.25 256 --bytes
    # the same documents as text files: the same shards
    run "$axonn" prepare --tokenizer "$tiny" --output "$tmp/t" --val-fraction 0.25 --doc-separator % "$tmp/a.txt" "$tmp/b.txt"
    for f in "$tmp/j"/*.bin; do same "$f" "$tmp/t/$(basename "$f")"; done
    printf '{"text": "ok"}\nnot json\n' >"$tmp/bad.jsonl"
    expect_error "bad.jsonl' line 2 is not valid JSON" "$axonn" prepare --tokenizer "$tiny" --output "$tmp/x" "$tmp/bad.jsonl"
    printf '{"body": "no text field"}\n' >"$tmp/bad.jsonl"
    expect_error "line 1 is not a JSON object with a string \"text\"" "$axonn" prepare --tokenizer "$tiny" \
      --output "$tmp/x" "$tmp/bad.jsonl"
    absent "$tmp/x" "$tmp/x.tmp" ;;

  non_utf8)
    printf 'fine text\n%%\ncaf\xe9 in latin-1\n' >"$tmp/latin1.txt"
    expect_error "latin1.txt' is not UTF-8: byte 0xE9 at offset 15 \(line 3\).*--invalid-utf8 replace" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/shards" --doc-separator % "$tmp/latin1.txt"
    absent "$tmp/shards" "$tmp/shards.tmp"
    # replaced: each bad subsequence becomes U+FFFD, as Python's errors="replace" does
    run "$axonn" prepare --tokenizer "$tiny" --output "$tmp/shards" --doc-separator % --val-fraction 0 \
      --invalid-utf8 replace "$tmp/latin1.txt"
    shards docs "$tmp/docs.json" --separator % "$tmp/latin1.txt"
    check "the replaced text decodes as Python replaces it" shards check "$tmp/shards" "$tmp/docs.json" 0 256 --bytes
    expect_error "--invalid-utf8 must be error or replace" "$axonn" prepare --tokenizer "$tiny" --output "$tmp/o2" \
      --invalid-utf8 skip "$tmp/latin1.txt" ;;

  vocab_too_wide)
    shards tiny-tokenizer "$tmp/wide.json" 70000  # ids up to 70000: more than uint16 holds
    expect_error "has 70001 ids, more than uint16 tokens hold \(65,535\); use --token-type uint32" \
      "$axonn" prepare --tokenizer "$tmp/wide.json" --output "$tmp/shards" --token-type uint16 "$tmp/a.txt"
    absent "$tmp/shards" "$tmp/shards.tmp"
    run "$axonn" prepare --tokenizer "$tmp/wide.json" --output "$tmp/shards" --val-fraction 0 "$tmp/a.txt"
    read -r magic version count < <(shards header "$tmp/shards/train_000000.bin")
    [ "$magic $version" = "20240801 7" ] || fail "auto picked magic $magic version $version, not Llama 3's uint32"
    expect_error "--token-type must be auto, uint16 or uint32" "$axonn" prepare --tokenizer "$tiny" --output "$tmp/o" \
      --token-type int8 "$tmp/a.txt" ;;

  bad_tokenizer)
    expect_error "cannot open tokenizer '$tmp/none.json': no such file" \
      "$axonn" prepare --tokenizer "$tmp/none.json" --output "$tmp/shards" "$tmp/a.txt"
    printf '{"model": {"type": "BPE", "vocab": ' >"$tmp/broken.json"
    expect_error "broken.json' is not valid JSON" "$axonn" prepare --tokenizer "$tmp/broken.json" --output "$tmp/shards" "$tmp/a.txt"
    printf 'garbage' >"$tmp/what.model"
    expect_error "cannot load SentencePiece model" "$axonn" prepare --tokenizer "$tmp/what.model" --output "$tmp/shards" "$tmp/a.txt"
    python3 -c "import struct,sys; sys.stdout.buffer.write(struct.pack('<256i', 20240328, 2, 1, 0, *([0] * 252)) + b'\x01a')" >"$tmp/llmc.bin"
    expect_error "can only decode" "$axonn" prepare --tokenizer "$tmp/llmc.bin" --output "$tmp/shards" "$tmp/a.txt"
    absent "$tmp/shards" "$tmp/shards.tmp" ;;

  bad_output_and_input)
    mkdir -p "$tmp/full" && echo keep >"$tmp/full/mine.txt"
    expect_error "exists and is not empty; axonn prepare did not make it" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/full" "$tmp/a.txt"
    [ "$(cat "$tmp/full/mine.txt")" = keep ] || fail "the existing output was touched"
    # made by prepare: replaced under --overwrite only
    run "$axonn" prepare --tokenizer "$tiny" --output "$tmp/made" --val-fraction 0 "$tmp/b.txt"
    expect_error "exists and is not empty; choose a new directory, or pass --overwrite" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/made" "$tmp/a.txt"
    run "$axonn" prepare --tokenizer "$tiny" --output "$tmp/made" --overwrite --val-fraction 0 "$tmp/a.txt"
    absent "$tmp/made.old" "$tmp/made.tmp" "$tmp/made.lock"
    expect_error "cannot open input '$tmp/nothing.txt'" "$axonn" prepare --tokenizer "$tiny" --output "$tmp/o" "$tmp/nothing.txt"
    mkdir -p "$tmp/d" && echo x >"$tmp/d/skip.dat"
    expect_error "input directory '$tmp/d' has no files to read \(after --exclude\)" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/o" --exclude '*.dat' "$tmp/d"
    expect_error "gives no validation document" "$axonn" prepare --tokenizer "$tiny" --output "$tmp/o" --val-fraction 0.1 "$tmp/b.txt"
    # one text file, the default fraction: refused before any encoding (before: after the whole file was encoded)
    expect_error "--val-fraction 0.05 of at most 1 document \(each text file is one\) gives no validation document: cut the text into documents with --doc-separator" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/o" "$tmp/b.txt"
    expect_no_output "^prepare +[0-9]+%"
    expect_error "--val-fraction must be in \[0, 1\)" "$axonn" prepare --tokenizer "$tiny" --output "$tmp/o" --val-fraction 1 "$tmp/b.txt"
    expect_error "--shard-size must be 1 \.\. 2147483647" "$axonn" prepare --tokenizer "$tiny" --output "$tmp/o" --shard-size 0 "$tmp/b.txt"
    absent "$tmp/o" "$tmp/o.tmp"
    expect_once 2 "runs as one process" prepare --tokenizer "$tiny" --output "$tmp/o" "$tmp/b.txt"
    absent "$tmp/o" ;;

  overwrite_owned)
    # --overwrite replaces only what prepare made (its prepare.json), never an input, and no link is followed
    mkdir -p "$tmp/corpus" && cp "$tmp/a.txt" "$tmp/b.txt" "$tmp/corpus/"
    expect_exit 2 "$axonn" prepare --tokenizer "$tiny" --output "$tmp/corpus" --overwrite "$tmp/corpus"
    expect_output "input '$tmp/corpus' is --output '$tmp/corpus' itself"
    expect_error "input '$tmp/corpus/a.txt' is --output '$tmp/corpus/a.txt' itself" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/corpus/a.txt" --overwrite "$tmp/corpus/a.txt"
    expect_error "'$tmp/corpus' holds the input '$tmp/corpus/a.txt', and prepare replaces it" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/corpus" --overwrite "$tmp/corpus/a.txt"
    expect_error "--output '$tmp/corpus/shards' lies inside the input directory '$tmp/corpus'" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/corpus/shards" "$tmp/corpus"
    ln -s corpus "$tmp/link"
    expect_error "input '$tmp/link/a.txt' is --output '$tmp/corpus/a.txt' itself" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/corpus/a.txt" "$tmp/link/a.txt"
    expect_error "--output '$tmp/link' is a symbolic link; name the directory itself" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/link" --overwrite "$tmp/a.txt"
    # an output of prepare's that holds an input (or the tokenizer): not replaced
    run "$axonn" prepare --tokenizer "$tiny" --output "$tmp/made" --val-fraction 0 "$tmp/a.txt"
    cp "$tmp/b.txt" "$tiny" "$tmp/made/"
    expect_error "'$tmp/made' holds the input '$tmp/made/b.txt'" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/made" --overwrite "$tmp/made/b.txt"
    expect_error "'$tmp/made' holds the input '$tmp/made/tiny.json'" \
      "$axonn" prepare --tokenizer "$tmp/made/tiny.json" --output "$tmp/made" --overwrite "$tmp/a.txt"
    # DIR.tmp and DIR.old are removed only when prepare made them (a killed run's) or they are empty
    mkdir "$tmp/made.tmp" && echo keep >"$tmp/made.tmp/mine.txt"
    expect_error "'$tmp/made.tmp' exists and axonn prepare did not make it" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/made" --overwrite "$tmp/a.txt"
    [ "$(cat "$tmp/made.tmp/mine.txt")" = keep ] || fail "the user's made.tmp was touched"
    rm -r "$tmp/made.tmp" && ln -s corpus "$tmp/made.old"
    expect_error "'$tmp/made.old' exists and axonn prepare did not make it" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/made" --overwrite "$tmp/a.txt"
    rm "$tmp/made.old"
    run "$axonn" prepare --tokenizer "$tiny" --output "$tmp/stale" --val-fraction 0 "$tmp/a.txt"
    mv "$tmp/stale" "$tmp/made.tmp"  # what a killed run leaves: prepare's own
    run "$axonn" prepare --tokenizer "$tiny" --output "$tmp/made" --overwrite --val-fraction 0 "$tmp/a.txt"
    absent "$tmp/made.tmp" "$tmp/made.old" "$tmp/made.lock" "$tmp/made/b.txt"
    for f in a.txt b.txt; do same "$tmp/$f" "$tmp/corpus/$f"; done ;;

  output_lock)
    # a second run into the same output stops at once, naming the first run's lock; the first finishes
    head -c 12000000 /dev/urandom | base64 -w 76 >"$tmp/big.txt"
    "$axonn" prepare --tokenizer "$tiny" --output "$tmp/o" --val-fraction 0 --threads 1 --quiet "$tmp/big.txt" \
      >"$tmp/first.log" 2>&1 &
    first=$!
    for _ in $(seq 1000); do
      grep -q pid "$tmp/o.lock" 2>/dev/null && break
      sleep 0.01
    done
    grep -q pid "$tmp/o.lock" 2>/dev/null || fail "the first run took no lock ('$tmp/o.lock')"
    kill -STOP "$first"  # holding the lock, whatever this machine's speed
    expect_error "another axonn prepare \(pid $first\) is writing --output '$tmp/o': it holds the lock '$tmp/o.lock'" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/o" --val-fraction 0 "$tmp/a.txt"
    kill -CONT "$first"
    wait "$first" || fail "the first run failed: $(cat "$tmp/first.log")"
    absent "$tmp/o.lock" "$tmp/o.tmp"
    [ "$(python3 -c "import json; print(json.load(open('$tmp/o/prepare.json'))['text_bytes'])")" = "$(stat -c %s "$tmp/big.txt")" ] ||
      fail "the first run's output is not the whole input"
    # the lock file is never a link followed, nor someone else's file taken over
    echo keep >"$tmp/victim"
    ln -s victim "$tmp/p.lock"
    expect_error "the lock file '$tmp/p.lock' of --output '$tmp/p' is a symbolic link" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/p" "$tmp/a.txt"
    rm "$tmp/p.lock" && cp "$tmp/victim" "$tmp/p.lock"
    expect_error "'$tmp/p.lock' is not a lock file of axonn prepare's" \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/p" "$tmp/a.txt"
    same "$tmp/victim" "$tmp/p.lock"
    absent "$tmp/p" "$tmp/p.tmp" ;;

  huge_document)
    # one 4 MiB line (one document) through SentencePiece, which holds ~100 bytes per byte it encodes
    # at once: encoded in 1 MiB pieces, said so, with the peak memory bounded
    [ -x /usr/bin/time ] || skip "GNU time (/usr/bin/time) is not installed"
    python3 - "$tmp" <<'PY'
import random, sys
r = random.Random(1)
w = "the quick brown fox jumps over a lazy dog while seven wizards quietly hum jazz caf\u00e9 12345".split()
open(sys.argv[1] + "/gen.txt", "w").write("\n".join(" ".join(r.choice(w) for _ in range(12)) for _ in range(3000)))
doc, n = [], 0
while n < 4 << 20:
    doc.append(r.choice(w))
    n += len(doc[-1].encode()) + 1
open(sys.argv[1] + "/huge.txt", "w").write(" ".join(doc))
PY
    run "$axonn" tokenizer train --vocab-size 300 --output "$tmp/sp.model" "$tmp/gen.txt"
    run /usr/bin/time -f "max-rss-kb %M" "$axonn" prepare --tokenizer "$tmp/sp.model" --output "$tmp/p" --val-fraction 0 \
      --threads 1 "$tmp/huge.txt"
    expect_output "^prepare   1 document longer than 1.0 MB encoded in pieces cut at spaces"
    rss=$(sed -n 's/^max-rss-kb //p' "$tmp/out")
    echo "peak memory: $rss kB for a $(stat -c %s "$tmp/huge.txt")-byte document"
    [ "$rss" -lt 300000 ] || fail "prepare took $rss kB for one 4 MiB document (unbounded: ~450 MB; in pieces: ~170 MB)" ;;

  out_of_memory_hint)
    # prepare out of memory gets prepare's hints, not training's (--grid, --batch-size)
    head -c 48000000 /dev/urandom | base64 -w 0 >"$tmp/big.txt"
    expect_exit 1 bash -c "ulimit -v 250000 && OPENBLAS_NUM_THREADS=1 exec \"\$@\"" _ \
      "$axonn" prepare --tokenizer "$tiny" --output "$tmp/o" --threads 1 --val-fraction 0 "$tmp/big.txt"
    expect_output "out of memory \(std::bad_alloc\) .*axonn prepare needs more memory .*use fewer --threads"
    expect_no_output "--grid|--batch-size"
    absent "$tmp/o" "$tmp/o.tmp" "$tmp/o.lock" ;;

  encode_invalid_utf8)
    # refused as prepare refuses a file that is not UTF-8
    expect_exit 2 "$axonn" tokenizer encode --tokenizer "$tiny" $'caf\xe9 au lait'
    expect_output "TEXT is not UTF-8: byte 0xE9 at offset 3 \(line 1\)\. Give UTF-8 text"
    expect_error "byte 0xC3 at offset 7 \(line 2\)" "$axonn" tokenizer encode --tokenizer "$tiny" --ordinary $'caf\xc3\xa9\nx\xc3'
    run "$axonn" tokenizer encode --tokenizer "$tiny" $'caf\xc3\xa9'
    expect_output "^99,97,102,195,169$" ;;

  sentencepiece)
    # a corpus of its own: fortunes where installed, else generated sentences
    if [ -d "$fortunes_dir" ]; then
      corpus=("$fortunes_dir/fortunes" "$fortunes_dir/literature")
    else
      python3 -c "
import random
r = random.Random(1)
w = 'the quick brown fox jumps over a lazy dog while seven wizards quietly hum jazz'.split()
print('\n'.join(' '.join(r.choice(w) for _ in range(12)) for _ in range(3000)))" >"$tmp/gen.txt"
      corpus=("$tmp/gen.txt")
    fi
    run "$axonn" tokenizer train --vocab-size 800 --output "$tmp/sp.model" --doc-separator % "${corpus[@]}"
    expect_output "SentencePiece bpe, 800 ids \(unk 0, bos 1, eos 2\)"
    absent "$tmp/sp.model.tmp"
    text='A text it never saw: 12345, tabs	and  spaces, café.'
    run "$axonn" tokenizer encode --tokenizer "$tmp/sp.model" "$text"
    ids=$(cat "$tmp/out")
    run "$axonn" tokenizer decode --tokenizer "$tmp/sp.model" "$ids"
    [ "$(cat "$tmp/out")" = "$text" ] || fail "decode(encode(x)) != x: $(cat "$tmp/out")"
    run "$axonn" prepare --tokenizer "$tmp/sp.model" --output "$tmp/p" --doc-separator % --val-fraction 0 "$tmp/a.txt" "$tmp/b.txt"
    run "$axonn" tokenizer info --tokenizer "$tmp/sp.model"
    expect_output "separator  1"
    read -r magic version count < <(shards header "$tmp/p/train_000000.bin")
    [ "$magic" = 20240520 ] || fail "an 800-id vocabulary must give uint16 shards"
    python3 -c "
import struct, sys
d = open('$tmp/p/train_000000.bin', 'rb').read()
toks = struct.unpack('<%dH' % ((len(d) - 1024) // 2), d[1024:])
assert toks[0] == 1 and toks.count(1) == 5, 'each of the 5 documents starts with BOS (1)'" || fail "BOS does not start every document"
    expect_error "--vocab-size 100000 is more than this text can fill \(at most [0-9]+ pieces for the bpe model\): give --vocab-size [0-9]+ or less" \
      "$axonn" tokenizer train --vocab-size 100000 --output "$tmp/big.model" "$tmp/b.txt"
    expect_error "--vocab-size 10 is smaller than the [0-9]+ pieces the text needs .*: give --vocab-size [0-9]+ or more" \
      "$axonn" tokenizer train --vocab-size 10 --output "$tmp/big.model" "$tmp/b.txt"
    absent "$tmp/big.model" "$tmp/big.model.tmp" ;;

  progress)
    # not a terminal: a plain line per tenth of the input, and the summary
    run "$axonn" prepare --tokenizer "$tiny" --output "$tmp/p1" --doc-separator % --val-fraction 0 "$tmp/a.txt" "$tmp/b.txt"
    expect_output "^prepare   100%  0.0/0.0 MB"
    expect_output "^prepare   5 documents \(0 validation\)"
    expect_no_output $'\r'
    # a terminal (script(1) gives it one): the bar, redrawn in place
    command -v script >/dev/null || skip "script(1) is not installed (util-linux)"
    run script -qec "$axonn prepare --tokenizer $tiny --output $tmp/p2 --doc-separator % --val-fraction 0 $tmp/a.txt" /dev/null
    expect_output $'\rprepare   \\[#+ *\\] 100%'
    run "$axonn" prepare --quiet --tokenizer "$tiny" --output "$tmp/p3" --val-fraction 0 "$tmp/a.txt"
    expect_no_output "100%" ;;

  gpt2_vectors)
    need_gpt2
    run "$axonn" tokenizer encode --tokenizer gpt2 "Hello world"
    expect_output "^15496,995$"
    run "$axonn" tokenizer encode --tokenizer gpt2 " Hello world"
    expect_output "^18435,995$"
    run "$axonn" tokenizer encode --tokenizer gpt2 "hello world"
    expect_output "^31373,995$"
    run "$axonn" tokenizer decode --tokenizer gpt2 "15496,995"
    expect_output "^Hello world$"
    expect_error "'x' is not a token id" "$axonn" tokenizer decode --tokenizer gpt2 "1,x"
    expect_error "token id 50257 is not in the vocabulary" "$axonn" tokenizer decode --tokenizer gpt2 "50257" ;;

  train_shuffled_grids | train_resume_across_shards)
    # a corpus in many small shards (tiny tokenizer: 257 ids, below gpt2-tiny's 500)
    python3 - "$tmp/corpus.txt" <<'PY'
import random, sys
r = random.Random(3)
words = "the of and a to in is you that it he was for on are as with his they at be this have from".split()
with open(sys.argv[1], "w") as f:
    for d in range(45):
        f.write(" ".join(r.choice(words) for _ in range(r.randint(5, 40))) + ".\n%\n")
PY
    run "$axonn" prepare --tokenizer "$tiny" --output "$tmp/data" --doc-separator % --shard-size 300 --val-fraction 0.1 \
      "$tmp/corpus.txt"
    n=$(ls "$tmp/data"/train_*.bin | wc -l)
    [ "$n" -ge 10 ] || fail "expected many training shards, got $n"
    sequential=(train --data "$tmp/data" --batch-size 4 --seq-len 32 --lr 1e-3 --warmup-steps 0 --grad-clip 0
                --peak-gflops 100 --quiet)
    train=("${sequential[@]}" --shuffle --data-seed 5)
    if [ "$case_name" = train_shuffled_grids ]; then
      # the same shuffled batches on every grid: the losses agree to fp32 rounding
      for grid in 1,1,1,1 2,1,1,1 1,1,1,2 1,1,2,1 2,1,1,2; do
        np=$(( $(echo "$grid" | tr , '*') ))
        run_np "$np" "${train[@]}" --steps 10 --grid "$grid" --metrics "$tmp/g$grid.jsonl"
        expect_output "data      $n shards, .*train_000000.bin .. .*, shuffled"
      done
      run "$axonn" "${sequential[@]}" --steps 10 --metrics "$tmp/seq.jsonl"
      # validation on the directory's val shards: val_loss reported, training unchanged
      run "$axonn" "${train[@]}" --steps 10 --val-data "$tmp/data" --val-every 5 --val-batches 2 --metrics "$tmp/val.jsonl"
      expect_output "validate  .*val_000000.bin, [0-9]+ tokens"
      python3 - "$tmp/g1,1,1,1.jsonl" "$tmp/val.jsonl" <<'PY'
import json, sys
base, val = ([json.loads(l) for l in open(p)] for p in sys.argv[1:])
assert [m["loss"] for m in base] == [m["loss"] for m in val], "validation changed the training losses"
assert [m["step"] for m in val if "val_loss" in m] == [4, 9], [m.get("val_loss") for m in val]
print("ok: val_loss at steps 4 and 9 from the val shards; training losses unchanged")
PY
      python3 - "$tmp" <<'PY'
import glob, json, sys
runs = {p: [json.loads(l)["loss"] for l in open(p)] for p in sorted(glob.glob(sys.argv[1] + "/g*.jsonl"))}
base = runs.pop(sys.argv[1] + "/g1,1,1,1.jsonl")
assert len(base) == 10
for p, losses in runs.items():
    worst = max(abs(a - b) for a, b in zip(base, losses))
    assert worst <= 2e-4, (p, worst)
    print("ok: %s: max |loss - 1 rank| = %.2g" % (p.split("/")[-1], worst))
seq = [json.loads(l)["loss"] for l in open(sys.argv[1] + "/seq.jsonl")]
assert seq != base, "--shuffle changed nothing"
PY
    else
      # resuming at step 20 continues bit for bit, the loader's position restored in the middle of
      # the shards and across the epoch boundary that steps 20..29 cross
      run "$axonn" "${train[@]}" --steps 30 --metrics "$tmp/whole.jsonl"
      run "$axonn" "${train[@]}" --steps 30 --checkpoint-dir "$tmp/ck" --checkpoint-every 10 --metrics "$tmp/first.jsonl"
      rm -rf "$tmp/ck/step-00000030" && printf 'step-00000020\n' >"$tmp/ck/latest"
      run "$axonn" "${train[@]}" --steps 30 --checkpoint-dir "$tmp/ck" --resume --metrics "$tmp/resumed.jsonl"
      expect_output "resume .*step 20"
      python3 - "$tmp/whole.jsonl" "$tmp/resumed.jsonl" "$tmp/data" <<'PY'
import glob, json, struct, sys
whole = [json.loads(l) for l in open(sys.argv[1])]
resumed = [json.loads(l) for l in open(sys.argv[2])]
sequences = 0
for p in glob.glob(sys.argv[3] + "/train_*.bin"):
    n = struct.unpack("<3i", open(p, "rb").read(12))[2]
    sequences += (n - 1) // 32
batches_per_epoch = sequences // 4
assert 20 < batches_per_epoch < 30, ("the resumed steps must cross an epoch", batches_per_epoch)
assert [r["step"] for r in resumed] == list(range(20, 30)), [r["step"] for r in resumed]
for r in resumed:
    assert r["loss"] == whole[r["step"]]["loss"], (r["step"], r["loss"], whole[r["step"]]["loss"])
print("ok: steps 20..29 (epoch boundary after %d) after resuming equal the uninterrupted run's, bit for bit"
      % batches_per_epoch)
PY
    fi ;;

  *) fail "unknown case $case_name" ;;
esac
echo "PASS: $case_name"
