#!/usr/bin/env bash
# CLI tests of validation in `axonn train` (--val-data, --val-every, --val-batches): val_loss in the
# progress line and in the metrics on the steps that validate, bad flags refused.
# Usage: cli_validation.sh CASE AXONN_BIN REFERENCE_DIR MPIEXEC
case_name=$1 axonn=$2 ref=$3 mpiexec=${4:-mpiexec}
. "$(dirname "$0")/../common.sh"
model=$ref/gpt2-tiny/model.bin tokens=$ref/gpt2-tiny/tokens.bin
flags=(--init "$model" --data "$tokens" --batch-size 4 --seq-len 32 --lr 3e-3 --peak-gflops 100)

case $case_name in
  val_loss_reported)
    run_np 2 train "${flags[@]}" --grid 1,1,2,1 --steps 5 --val-data "$tokens" --val-every 2 --val-batches 2 \
      --metrics "$tmp/m.jsonl"
    expect_output "validate  .*tokens.bin, 20000 tokens: the first 2 batches, every 2 steps and at the end"
    expect_output "step +2/5 \| loss [0-9.]+ \| val [0-9.]+ \| lr"
    expect_no_output "step +3/5 \| loss [0-9.]+ \| val"
    python3 - "$tmp/m.jsonl" <<'PY'
import json, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
assert [r["step"] for r in rows] == [0, 1, 2, 3, 4], rows
have = [r["step"] for r in rows if "val_loss" in r]
assert have == [1, 3, 4], have  # every 2 steps (steps 2 and 4, 1-based) and the last
assert all(0 < r["val_loss"] < 7 for r in rows if "val_loss" in r)
print("ok: val_loss on steps", have)
PY
    ;;
  val_every_without_data)
    expect_error "--val-every chooses when --val-data is evaluated; give --val-data FILE too" \
      "$axonn" train --val-every 5 ;;
  val_batches_zero) expect_error "--val-batches must be >= 1, got 0" "$axonn" train --val-data "$tokens" --val-batches 0 ;;
  val_data_missing) expect_once 2 "cannot open token shard '/nonexistent/val.bin'" train --val-data /nonexistent/val.bin ;;
  val_data_too_short)
    head -c 1100 "$tokens" >"$tmp/v.bin"
    python3 -c "import struct,sys; b=bytearray(open(sys.argv[1],'rb').read()); b[8:12]=struct.pack('i',(len(b)-1024)//2); open(sys.argv[1],'wb').write(b)" "$tmp/v.bin"
    expect_error "fewer than one batch needs" "$axonn" train "${flags[@]}" --val-data "$tmp/v.bin" ;;
  *) fail "unknown case $case_name" ;;
esac
