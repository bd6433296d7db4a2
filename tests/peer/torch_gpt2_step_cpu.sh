#!/usr/bin/env bash
# bench/torch_gpt2_step.py on the CPU at gpt2-tiny's shape (tests/peer/CMakeLists.txt).
set -uo pipefail
script=$1
python=""
for p in python3 /usr/bin/python3; do
  if command -v "$p" >/dev/null 2>&1 && "$p" -c 'import torch' >/dev/null 2>&1; then python=$p; break; fi
done
if [ -z "$python" ]; then
  # CI installs torch and sets AXONN_REQUIRE_TORCH=1: a missing torch there is a failure, not a skip
  [ "${AXONN_REQUIRE_TORCH:-0}" = 1 ] && { echo "FAIL: no python3 imports torch (AXONN_REQUIRE_TORCH=1)"; exit 1; }
  echo "no python3 with torch (Debian's python3-torch): skipped"; exit 77
fi
fail() { echo "FAIL: $*"; exit 1; }
for dtype in fp32 bf16; do
  out=$("$python" "$script" --device cpu --model gpt2-tiny --batch 2 --seq 64 --dtype $dtype --steps 2 --warmup 2 \
        --compile --peak-tflops 1 2>&1) || fail "$dtype: exit $?: $out"
  echo "$out"
  line=$(grep -E "^torch eager gpt2-tiny B=2 T=64 $dtype: [0-9.]+ ms/step \(median of 2\), [0-9]+ tokens/s, [0-9.]+ TFLOP/s, MFU [0-9.]+; loss " <<<"$out") ||
    fail "$dtype: no eager line in the form device-check.sh reads"
  first=$(sed -E 's/.*; loss ([0-9.]+) -> ([0-9.]+);.*/\1/' <<<"$line") last=$(sed -E 's/.*; loss ([0-9.]+) -> ([0-9.]+);.*/\2/' <<<"$line")
  # random tokens: the loss starts near ln(500) = 6.21 and falls on the same batch
  awk -v a="$first" -v b="$last" 'BEGIN { exit !(a > 5.5 && a < 7 && b < a) }' || fail "$dtype: loss $first -> $last"
  # torch.compile where the installed PyTorch has it (2.0 and later), else said so
  grep -qE "^torch compile gpt2-tiny B=2 T=64 $dtype: |^torch compile: not available in torch " <<<"$out" ||
    fail "$dtype: no compile line"
done
out=$("$python" "$script" --device cpu --model gpt2-tiny --seq 100 2>&1) && fail "a sequence longer than the context was taken"
grep -q "longer than gpt2-tiny's context of 64" <<<"$out" || fail "unclear refusal: $out"
echo "PASS"
