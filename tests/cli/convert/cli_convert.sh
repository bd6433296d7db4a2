#!/usr/bin/env bash
# CLI tests of `axonn convert` and `axonn inspect`: round trips through the binary compared byte for
# byte (cmp), the HF layout checked by an independent Python reader, and bad input (a clear error,
# exit code 1..123, never a crash or a hang).
# Usage: cli_convert.sh CASE AXONN_BIN REFERENCE_DIR MPIEXEC
case_name=$1 axonn=$2 ref=$3 mpiexec=${4:-mpiexec}
here=$(cd "$(dirname "$0")" && pwd)
. "$here/../common.sh"
model=$ref/gpt2-tiny/model.bin
llama=$(cd "$here/../../golden" && pwd)/llama-gqa  # the PyTorch oracle's Llama, a Hugging Face directory

# flip_byte FILE OFFSET_FROM_END
flip_byte() {
  python3 -c "import sys; p, k = sys.argv[1], int(sys.argv[2]); b = bytearray(open(p, 'rb').read()); \
b[-k] ^= 0x40; open(p, 'wb').write(b)" "$1" "$2"
}

case $case_name in
  # Llama (docs/llama.md): HF directory <-> checkpoint <-> HF, sharded and bf16, byte for byte
  llama_roundtrip)
    run "$axonn" convert --from "$llama" --to "$tmp/hf/"
    expect_output "'$llama' \(HF Llama safetensors, llama L=2 NH=6 KV=2 C=48 FFN=136 V=397 \(padded 512\)"
    run "$axonn" convert --from "$llama" --to "$tmp/ck" --format checkpoint
    run "$axonn" convert --from "$tmp/ck" --to "$tmp/hf2/"
    same "$tmp/hf/model.safetensors" "$tmp/hf2/model.safetensors"
    same "$tmp/hf/config.json" "$tmp/hf2/config.json"
    # sharded: 100 kB shards and the index; read back into one file, the same bytes
    run "$axonn" convert --from "$tmp/hf/" --to "$tmp/sharded/" --shard-size 100KB
    [ -f "$tmp/sharded/model.safetensors.index.json" ] && [ -f "$tmp/sharded/model-00004-of-00004.safetensors" ] ||
      { echo "FAIL: no 4 shards"; ls "$tmp/sharded"; exit 1; }
    [ ! -e "$tmp/sharded/model.safetensors" ] || { echo "FAIL: model.safetensors beside the shards"; exit 1; }
    run "$axonn" convert --from "$tmp/sharded/" --to "$tmp/one/"
    same "$tmp/hf/model.safetensors" "$tmp/one/model.safetensors"
    # bf16: rounded once; bf16 -> fp32 -> bf16 is the same file
    run "$axonn" convert --from "$tmp/hf/" --to "$tmp/b16/" --dtype bf16
    grep -q '"torch_dtype": "bfloat16"' "$tmp/b16/config.json" || { echo "FAIL: torch_dtype"; exit 1; }
    # every file says the stored dtype (the metadata's config too), and exact decimals (issue 34)
    grep -q '"torch_dtype\\": \\"bfloat16\\"' "$tmp/b16/model.safetensors" || { echo "FAIL: the metadata's torch_dtype"; exit 1; }
    grep -q '"rms_norm_eps": 1e-05,' "$tmp/b16/config.json" || { echo "FAIL: rms_norm_eps not 1e-05"; exit 1; }
    check "no generation_config.json" python3 -c "import json, sys; json.load(open(sys.argv[1]))" "$tmp/b16/generation_config.json"
    run "$axonn" convert --from "$tmp/b16/" --to "$tmp/b32/"
    run "$axonn" convert --from "$tmp/b32/" --to "$tmp/b16again/" --dtype bf16
    same "$tmp/b16/model.safetensors" "$tmp/b16again/model.safetensors"
    # an llm.c file holds GPT-2 only
    expect_error "llm.c model files hold GPT-2 models" "$axonn" convert --from "$llama" --to "$tmp/x.bin" ;;
  inspect_hf_dir)
    run "$axonn" convert --from "$llama" --to "$tmp/sharded/" --shard-size 100KB
    run "$axonn" inspect "$tmp/sharded/"
    expect_output "Hugging Face model directory '$tmp/sharded/': HF Llama safetensors \(4 shards\)"
    expect_output "model: llama, layers 2, heads 6, channels 48, vocab 397 \(padded 512\), max_seq_len 32"
    expect_output "llama: 2 KV heads, head size 8, MLP 136, rope_theta 10000, rms_norm_eps 1e-05, untied embeddings"
    expect_output "model-00001-of-00004.safetensors: [0-9]+ bytes"
    expect_output "model.layers.0.self_attn.k_proj.weight +F32 +\[16, 48\]" ;;
  llama_bad_config)
    cp -r "$llama" "$tmp/m"
    sed -i 's/"rope_scaling": null/"rope_scaling": {"rope_type": "linear", "factor": 2.0}/' "$tmp/m/config.json"
    expect_error "rope_scaling type 'linear' is not supported; axonn implements Llama 3.1's \"llama3\"" \
      "$axonn" convert --from "$tmp/m" --to "$tmp/x/"
    cp "$llama/config.json" "$tmp/m/config.json"
    sed -i 's/"num_key_value_heads": 2/"num_key_value_heads": 4/' "$tmp/m/config.json"
    expect_error "num_key_value_heads 4 does not divide the 6 attention heads" "$axonn" inspect "$tmp/m"
    cp "$llama/config.json" "$tmp/m/config.json"
    sed -i 's/"intermediate_size": 136/"intermediate_size": 100/' "$tmp/m/config.json"
    expect_error "tensor 'model.layers.0.mlp.gate_proj.weight' has shape \[136, 48\], expected \[100, 48\]" \
      "$axonn" convert --from "$tmp/m" --to "$tmp/x/" ;;
  llmc_hf_llmc)
    run "$axonn" convert --from "$model" --to "$tmp/m.safetensors"
    expect_output "-> '$tmp/m.safetensors' \(safetensors-hf, [0-9]+ bytes\)"
    run "$axonn" convert --from "$tmp/m.safetensors" --to "$tmp/back.bin"
    same "$model" "$tmp/back.bin"
    # and HF -> llm.c -> HF gives the same safetensors file
    run "$axonn" convert --from "$tmp/back.bin" --to "$tmp/m2.safetensors" --format safetensors-hf
    same "$tmp/m.safetensors" "$tmp/m2.safetensors" ;;
  hf_layout)
    # a directory target gets HF's model directory: model.safetensors + config.json
    run "$axonn" convert --from "$model" --to "$tmp/hf/"
    check "the HF layout check failed" python3 "$here/check_hf_layout.py" "$model" "$tmp/hf/model.safetensors" "$tmp/hf/config.json"
    run "$axonn" convert --from "$tmp/hf/model.safetensors" --to "$tmp/back.bin"
    same "$model" "$tmp/back.bin" ;;
  llmc_bf16)
    run "$axonn" convert --from "$model" --to "$tmp/m5.bin" --format llmc-bf16
    run "$axonn" inspect "$tmp/m5.bin"
    expect_output "version 5 \(bf16\)"
    run "$axonn" convert --from "$tmp/m5.bin" --to "$tmp/m5.safetensors"
    run "$axonn" convert --from "$tmp/m5.safetensors" --to "$tmp/again5.bin" --format llmc-bf16
    same "$tmp/m5.bin" "$tmp/again5.bin" ;;
  checkpoint_roundtrip)
    run "$axonn" convert --from "$model" --to "$tmp/ck" --format checkpoint
    [ "$(cat "$tmp/ck/latest")" = "step-00000000" ] || fail "latest is $(cat "$tmp/ck/latest")"
    run "$axonn" inspect "$tmp/ck"
    expect_output "checkpoint root '$tmp/ck': steps 0; latest step-00000000"
    expect_output "tp-x0-y0-z0.safetensors +[0-9]+ bytes +xxh3_64 [0-9a-f]{16} +ok"
    expect_output "params.qkvw +F32 +\[2, 192, 64\]"
    run "$axonn" convert --from "$tmp/ck" --to "$tmp/back.bin"
    same "$model" "$tmp/back.bin"
    run "$axonn" convert --from "$tmp/ck/step-00000000/" --to "$tmp/back2.bin"
    same "$model" "$tmp/back2.bin"
    # a root that already holds checkpoints is not overwritten
    expect_error "already holds checkpoints" "$axonn" convert --from "$model" --to "$tmp/ck" --format checkpoint ;;
  inspect_llmc)
    run "$axonn" inspect "$model"
    expect_output "llm.c model file '.*model.bin': version 3 \(fp32\), 548864 bytes"
    expect_output "layers 2, heads 4, channels 64, vocab 500 \(padded 512\), max_seq_len 64, 136960 parameters"
    expect_output "qkvw +f32 +\[2, 192, 64\]" ;;
  inspect_safetensors)
    run "$axonn" convert --from "$model" --to "$tmp/m.safetensors"
    run "$axonn" inspect "$tmp/m.safetensors"
    expect_output "safetensors file '$tmp/m.safetensors': [0-9]+ bytes, header [0-9]+ bytes"
    expect_output "metadata n_head = 4"
    expect_output "tensors \(28, in data order\)"
    expect_output "h.1.mlp.c_proj.weight +F32 +\[256, 64\] +65536 bytes" ;;
  corrupt_checkpoint)
    run "$axonn" convert --from "$model" --to "$tmp/ck" --format checkpoint
    flip_byte "$tmp/ck/step-00000000/tp-x0-y0-z0.safetensors" 100
    expect_error "tp-x0-y0-z0.safetensors +[0-9]+ bytes .* BAD: fails its checksum" "$axonn" inspect "$tmp/ck"
    expect_output "fails verification: 1 file missing, truncated or corrupt"
    expect_error "file 'tp-x0-y0-z0.safetensors' fails its checksum: xxh3_64 [0-9a-f]+, the manifest says" \
      "$axonn" convert --from "$tmp/ck" --to "$tmp/x.bin"
    absent "$tmp/x.bin" ;;
  truncated_checkpoint)
    run "$axonn" convert --from "$model" --to "$tmp/ck" --format checkpoint
    truncate -s -7 "$tmp/ck/step-00000000/tp-x0-y0-z0.safetensors"
    expect_error "file 'tp-x0-y0-z0.safetensors' is [0-9]+ bytes, the manifest says [0-9]+: the file is truncated" \
      "$axonn" convert --from "$tmp/ck" --to "$tmp/x.bin"
    rm "$tmp/ck/step-00000000/manifest.json"
    expect_error "has no manifest.json: the save did not complete" "$axonn" inspect "$tmp/ck/step-00000000" ;;
  unfinished_save)
    run "$axonn" convert --from "$model" --to "$tmp/ck" --format checkpoint
    mv "$tmp/ck/step-00000000" "$tmp/ck/step-00000001.tmp"
    rm "$tmp/ck/latest"
    expect_error "is an unfinished save \(a .tmp directory" "$axonn" convert --from "$tmp/ck/step-00000001.tmp" --to "$tmp/x.bin"
    expect_error "holds no committed checkpoint" "$axonn" inspect "$tmp/ck" ;;
  missing_input) expect_error "cannot open '/nonexistent.bin': no such file" "$axonn" convert --from /nonexistent.bin --to "$tmp/x.safetensors" ;;
  garbage_input)
    head -c 4096 /dev/urandom >"$tmp/g.bin"
    expect_error "is neither an llm.c model file \(magic 20240326\), a safetensors file, a GGUF file, nor a checkpoint directory" \
      "$axonn" convert --from "$tmp/g.bin" --to "$tmp/x.safetensors"
    expect_error "is neither an llm.c model file" "$axonn" inspect "$tmp/g.bin" ;;
  truncated_safetensors)
    run "$axonn" convert --from "$model" --to "$tmp/m.safetensors"
    head -c 100000 "$tmp/m.safetensors" >"$tmp/t.safetensors"
    expect_error "safetensors file '$tmp/t.safetensors': tensor '.*' has data_offsets .* past the end of the data .*truncated" \
      "$axonn" convert --from "$tmp/t.safetensors" --to "$tmp/x.bin"
    absent "$tmp/x.bin"
    head -c 1000 "$tmp/m.safetensors" >"$tmp/t2.safetensors"
    expect_error "header length [0-9]+ runs past the end of the file \(1000 bytes\): the file is truncated" \
      "$axonn" inspect "$tmp/t2.safetensors" ;;
  bad_header_json)
    python3 -c "import struct, sys; h = b'{\"a\": {\"dtype\": \"F32\", '; \
open(sys.argv[1], 'wb').write(struct.pack('<Q', len(h)) + h)" "$tmp/b.safetensors"
    expect_error "the header is not valid JSON" "$axonn" inspect "$tmp/b.safetensors" ;;
  no_heads)
    # an HF file with transformers' metadata only ({"format": "pt"}) and no config.json beside it
    run "$axonn" convert --from "$model" --to "$tmp/m.safetensors"
    python3 - "$tmp/m.safetensors" "$tmp/plain.safetensors" <<'PY'
import json, struct, sys
raw = open(sys.argv[1], "rb").read()
(n,) = struct.unpack("<Q", raw[:8])
h = json.loads(raw[8:8 + n])
h["__metadata__"] = {"format": "pt"}
t = json.dumps(h).encode()
t += b" " * ((8 - (8 + len(t)) % 8) % 8)
open(sys.argv[2], "wb").write(struct.pack("<Q", len(t)) + t + raw[8 + n:])
PY
    expect_error "does not say how many attention heads .* give it with --heads" \
      "$axonn" convert --from "$tmp/plain.safetensors" --to "$tmp/x.bin"
    run "$axonn" convert --from "$tmp/plain.safetensors" --to "$tmp/x.bin" --heads 4
    same "$model" "$tmp/x.bin" ;;
  unknown_extension)
    expect_error "cannot tell the output format from --to '.*x.txt'.* give --format" \
      "$axonn" convert --from "$model" --to "$tmp/x.txt" ;;
  bad_format) expect_error "--format: onnx not in" "$axonn" convert --from "$model" --to "$tmp/x" --format onnx ;;
  heads_with_llmc)
    expect_error "--heads applies to safetensors input only" "$axonn" convert --from "$model" --to "$tmp/x.safetensors" --heads 4 ;;
  missing_to) expect_error "--to is required" "$axonn" convert --from "$model" ;;
  inspect_missing) expect_error "cannot open '/nonexistent': no such file" "$axonn" inspect /nonexistent ;;
  mpi_refused)
    expect_error "runs in one process" "$mpiexec" -n 2 "$axonn" convert --from "$model" --to "$tmp/x.safetensors"
    n=$(count "runs in one process")
    [ "$n" -eq 1 ] || fail "error printed $n times" ;;
  # a truncated model file: an input that failed, exit 1 (docs/cli.md)
  corrupt_model_exit_1)
    head -c 5000 "$model" >"$tmp/m.bin"
    expect_exit 1 "$axonn" convert --from "$tmp/m.bin" --to "$tmp/out.safetensors"
    expect_output "checkpoint '$tmp/m.bin' is 5000 bytes.*truncated"
    absent "$tmp/out.safetensors"
    echo "ok: exit 1" ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
