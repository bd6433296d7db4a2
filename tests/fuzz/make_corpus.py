#!/usr/bin/env python3
"""Writes the fuzzers' seed corpora, tests/fuzz/corpus/<target>/ (committed; rerun only to change them).

Each target gets a few small valid inputs, made here from the formats (spec/formats.md) and from
tests/reference and profiles/, and a few corrupt ones (truncated, wrong magic, bad sizes), so that
the fuzzers start on both sides of every check. The SentencePiece seed is a tiny model trained with
spm_train (Debian's sentencepiece) when it is installed. Inputs a fuzzer found are added by hand,
named after what they found (finding-*.bin).
"""
import json, os, shutil, struct, subprocess, sys, tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(os.path.dirname(here))
out = os.path.join(here, "corpus")


def put(target, name, data):
    d = os.path.join(out, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def header(*ints):
    return struct.pack("<256i", *(list(ints) + [0] * (256 - len(ints))))


# --- llm.c model: GPT-2 maxT=4 V=8 L=1 NH=1 C=4 Vp=8 -------------------------------------------
maxT, V, L, NH, C, Vp = 4, 8, 1, 1, 4, 8
n_params = Vp * C + maxT * C + L * (C + C + 3 * C * C + 3 * C + C * C + C + C + C + 4 * C * C + 4 * C + 4 * C * C + C) + 2 * C
weights = struct.pack("<%df" % n_params, *[((i * 37) % 17 - 8) / 16 for i in range(n_params)])
bf16 = b"".join(struct.pack("<f", ((i * 37) % 17 - 8) / 16)[2:] for i in range(n_params))
put("llmc_model", "fp32.bin", header(20240326, 3, maxT, V, L, NH, C, Vp) + weights)
put("llmc_model", "bf16.bin", header(20240326, 5, maxT, V, L, NH, C, Vp) + bf16)
put("llmc_model", "truncated.bin", header(20240326, 3, maxT, V, L, NH, C, Vp) + weights[:100])
put("llmc_model", "bad-magic.bin", header(20240327, 3, maxT, V, L, NH, C, Vp) + weights)
put("llmc_model", "huge-sizes.bin", header(20240326, 3, 1 << 30, 1 << 30, 1 << 30, 3, 1 << 30, 1 << 30))

# --- token shards -----------------------------------------------------------------------------
toks = [50256, 15496, 995, 11, 50256, 40, 716, 13]
put("token_shard", "gpt2.bin", header(20240520, 1, len(toks)) + struct.pack("<%dH" % len(toks), *toks))
put("token_shard", "llama3.bin", header(20240801, 7, len(toks)) + struct.pack("<%dI" % len(toks), *[t + 70000 for t in toks]))
put("token_shard", "count-too-big.bin", header(20240520, 1, 1000) + struct.pack("<%dH" % len(toks), *toks))
put("token_shard", "negative-count.bin", header(20240520, 1, -5))
put("token_shard", "id-2^31.bin", header(20240801, 7, 2) + struct.pack("<2I", 1, 0x80000000))
with open(os.path.join(root, "tests/reference/gpt2-tiny/tokens.bin"), "rb") as f:
    ref = f.read()
put("token_shard", "reference-head.bin", ref[:1024] + ref[1024:1024 + 64])  # size mismatch: a corrupt shard


# --- safetensors ------------------------------------------------------------------------------
def safetensors(entries, metadata=None, pad=True):
    h, data = {}, b""
    for name, dtype, shape, raw in entries:
        h[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
        data += raw
    if metadata is not None:
        h["__metadata__"] = metadata
    text = json.dumps(h).encode()
    if pad:
        text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + data


st = [("a", "F32", [2, 3], struct.pack("<6f", *range(6))), ("b", "BF16", [2], b"\x80\x3f\x00\x40"),
      ("c", "I64", [], struct.pack("<q", 7)), ("d", "U16", [0, 4], b""), ("e", "I32", [1], struct.pack("<i", -1))]
put("safetensors", "valid.safetensors", safetensors(st, {"step": "3", "format": "axonn"}))
put("safetensors", "no-metadata.safetensors", safetensors(st[:1]))
put("safetensors", "overlap.safetensors", safetensors(st[:2])[:-4] + b"")  # last tensor cut short
put("safetensors", "huge-header.safetensors", struct.pack("<Q", 1 << 62) + b"{}")
put("safetensors", "bad-dtype.safetensors", safetensors([("a", "F64", [1], b"\0" * 8)]))

# --- GGUF: a tiny llama-like file (metadata of every value type, F32, F16, BF16 and Q8_0 tensors) --
def gguf(keys, tensors, version=3, align=32):
    def gstr(v):
        v = v.encode() if isinstance(v, str) else v
        return struct.pack("<Q", len(v)) + v
    kv = b""
    for k, t, raw in keys:
        kv += gstr(k) + struct.pack("<I", t) + raw
    infos, data = b"", b""
    for name, ne, t, raw in tensors:
        data += b"\0" * (-len(data) % align)
        infos += gstr(name) + struct.pack("<I", len(ne)) + struct.pack("<%dQ" % len(ne), *ne)
        infos += struct.pack("<IQ", t, len(data))
        data += raw
    head = b"GGUF" + struct.pack("<IQQ", version, len(tensors), len(keys)) + kv + infos
    return head + b"\0" * (-len(head) % align) + data


def gstr(v):
    return struct.pack("<Q", len(v)) + v.encode()


gguf_keys = [("general.architecture", 8, gstr("llama")), ("llama.block_count", 4, struct.pack("<I", 1)),
             ("llama.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-5)),
             ("general.alignment", 4, struct.pack("<I", 32)), ("x.u8", 0, b"\7"), ("x.i64", 11, struct.pack("<q", -3)),
             ("x.f64", 12, struct.pack("<d", 0.25)), ("x.bool", 7, b"\1"),
             ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + gstr("a") + gstr("b") + gstr("<s>")),
             ("tokenizer.ggml.scores", 9, struct.pack("<IQ3f", 6, 3, 0.0, -1.0, -2.0)),
             ("x.nested", 9, struct.pack("<IQ", 9, 1) + struct.pack("<IQ", 4, 2) + struct.pack("<2I", 1, 2))]
gguf_tensors = [("token_embd.weight", [4, 3], 0, struct.pack("<12f", *range(12))),
                ("blk.0.attn_q.weight", [4, 4], 1, struct.pack("<16H", *([0x3C00] * 16))),
                ("blk.0.ffn_up.weight", [4, 2], 30, struct.pack("<8H", *([0x3F80] * 8))),
                ("output.weight", [32, 1], 8, struct.pack("<H", 0x3C00) + bytes(range(32))),
                ("blk.0.ffn_down.weight", [256], 12, b"\0" * 144)]
put("gguf", "valid.gguf", gguf(gguf_keys, gguf_tensors))
put("gguf", "version2.gguf", gguf(gguf_keys[:3], gguf_tensors[:1], version=2))
put("gguf", "truncated.gguf", gguf(gguf_keys, gguf_tensors)[:-40])
put("gguf", "bad-type.gguf", gguf(gguf_keys[:2], [("t", [4], 77, b"\0" * 16)]))
put("gguf", "huge-counts.gguf", b"GGUF" + struct.pack("<IQQ", 3, 1 << 62, 1 << 62))
# a whole llama model of 4 channels, one layer and a SentencePiece vocabulary of 3, as GgufModel reads one
def u32(v):
    return struct.pack("<I", v)


def f32s(n, scale=0.125):
    return struct.pack("<%df" % n, *[scale * (i % 7 - 3) for i in range(n)])


model_keys = [("general.architecture", 8, gstr("llama")), ("llama.context_length", 4, u32(8)),
              ("llama.embedding_length", 4, u32(4)), ("llama.block_count", 4, u32(1)),
              ("llama.feed_forward_length", 4, u32(8)), ("llama.attention.head_count", 4, u32(1)),
              ("llama.attention.head_count_kv", 4, u32(1)),
              ("llama.attention.layer_norm_rms_epsilon", 6, struct.pack("<f", 1e-5)),
              ("llama.rope.freq_base", 6, struct.pack("<f", 10000.0)), ("tokenizer.ggml.model", 8, gstr("llama")),
              ("tokenizer.ggml.tokens", 9, struct.pack("<IQ", 8, 3) + gstr("<unk>") + gstr("<s>") + gstr("</s>")),
              ("tokenizer.ggml.scores", 9, struct.pack("<IQ3f", 6, 3, 0.0, 0.0, 0.0)),
              ("tokenizer.ggml.token_type", 9, struct.pack("<IQ3i", 5, 3, 2, 3, 3)),
              ("tokenizer.ggml.bos_token_id", 4, u32(1)), ("tokenizer.ggml.eos_token_id", 4, u32(2))]
model_tensors = [("token_embd.weight", [4, 3], 0, f32s(12)), ("blk.0.attn_norm.weight", [4], 0, f32s(4, 1.0)),
                 ("blk.0.attn_q.weight", [4, 4], 0, f32s(16)), ("blk.0.attn_k.weight", [4, 4], 0, f32s(16)),
                 ("blk.0.attn_v.weight", [4, 4], 0, f32s(16)), ("blk.0.attn_output.weight", [4, 4], 0, f32s(16)),
                 ("blk.0.ffn_norm.weight", [4], 0, f32s(4, 1.0)), ("blk.0.ffn_gate.weight", [4, 8], 0, f32s(32)),
                 ("blk.0.ffn_up.weight", [4, 8], 0, f32s(32)), ("blk.0.ffn_down.weight", [8, 4], 0, f32s(32)),
                 ("output_norm.weight", [4], 0, f32s(4, 1.0))]
put("gguf", "llama-model.gguf", gguf(model_keys, model_tensors))

# --- checkpoint manifest (format_version 1: no checksum of its own; 2: one, here left wrong) -----
manifest = {
    "format": "axonn-checkpoint", "format_version": 1, "library_version": "axonn 0.1.0", "step": 10,
    "tokens_seen": 640,
    "model": {"num_layers": 2, "num_heads": 2, "channels": 16, "vocab_size": 50, "padded_vocab_size": 64,
              "max_seq_len": 32},
    "grid": {"gx": 1, "gy": 2, "gz": 1, "gdata": 2}, "loader": {"shard": 0, "position": 128},
    "rng": {"seed": 1337, "counter": 12, "engine": "philox4x32"},
    "extra": {"adam_steps": "10", "lr": "0.001"}, "hash": "xxh3_64",
    "files": [{"name": "model-tp0-0-0.safetensors", "bytes": 4096, "xxh3_64": "0123456789abcdef"}],
}
put("manifest", "v1-gpt2.json", json.dumps(manifest, indent=2))
llama = dict(manifest)
llama["model"] = dict(manifest["model"], family="llama", num_kv_heads=1, head_dim=8, ffn_hidden=40,
                      rope_theta=500000.0, norm_eps=1e-5, tied_embeddings=False, bos_token_id=1,
                      eos_token_ids=[2, 3],
                      rope_scaling={"factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
                                    "original_max_position_embeddings": 16})
put("manifest", "v1-llama.json", json.dumps(llama))
put("manifest", "v2-wrong-checksum.json", json.dumps(dict(manifest, format_version=2, manifest_xxh3_64="0" * 16)))
put("manifest", "path-outside.json", json.dumps(dict(manifest, files=[{"name": "../x", "bytes": 1, "xxh3_64": "0" * 16}])))
put("manifest", "truncated.json", json.dumps(manifest)[:90])

# --- Hugging Face config.json -----------------------------------------------------------------
put("hf_config", "gpt2.json", json.dumps({"model_type": "gpt2", "n_layer": 2, "n_head": 2, "n_embd": 16,
                                          "vocab_size": 50, "n_positions": 32}))
put("hf_config", "llama.json", json.dumps({
    "model_type": "llama", "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 2,
    "hidden_size": 32, "intermediate_size": 64, "vocab_size": 100, "max_position_embeddings": 64,
    "rope_theta": 10000.0, "rms_norm_eps": 1e-6, "tie_word_embeddings": True, "bos_token_id": 1,
    "eos_token_id": [2, 3], "rope_scaling": {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0,
                                              "high_freq_factor": 4.0, "original_max_position_embeddings": 16}}))
put("hf_config", "bad-type.json", json.dumps({"model_type": "gpt2", "n_layer": "two"}))

# --- machine profiles: the built-in ones, and broken ones -----------------------------------------
for name in ("perlmutter", "frontier"):
    put("machine_profile", name + ".json", open(os.path.join(root, "profiles", name + ".json"), "rb").read())
perl = json.load(open(os.path.join(root, "profiles", "perlmutter.json")))
put("machine_profile", "truncated.json", json.dumps(perl)[:300])
put("machine_profile", "not-object.json", "[1, 2, 3]")


# --- GPT-2 byte-level BPE: 256 byte tokens, a few merges, <|endoftext|> ----------------------------
sys.path.insert(0, os.path.join(root, "tests", "common"))
from gpt2_alphabet import byte_of_character  # noqa: E402

b2u = {b: c for c, b in byte_of_character().items()}
vocab = {b2u[b]: b for b in range(256)}
merges = [("H", "e"), ("l", "l"), ("He", "ll"), ("Ġ", "w"), ("o", "r")]
for a, b in merges:
    vocab[a + b] = len(vocab)
vocab["<|endoftext|>"] = len(vocab)
merges_txt = "#version: 0.2\n" + "".join(f"{a} {b}\n" for a, b in merges)
put("gpt2_bpe", "valid.txt", json.dumps(vocab, ensure_ascii=False) + "\n#---\n" + merges_txt)
put("gpt2_bpe", "missing-byte.txt", json.dumps({k: v for k, v in vocab.items() if v != 65}, ensure_ascii=False)
    + "\n#---\n" + merges_txt)
put("gpt2_bpe", "bad-merge.txt", json.dumps(vocab, ensure_ascii=False) + "\n#---\n#version: 0.2\nzz qq\n")

tok = {"version": "1.0", "added_tokens": [{"id": vocab["<|endoftext|>"], "content": "<|endoftext|>", "special": True}],
       "normalizer": None,
       "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": True},
       "post_processor": None,
       "model": {"type": "BPE", "dropout": None, "continuing_subword_prefix": "", "end_of_word_suffix": "",
                 "vocab": vocab, "merges": [f"{a} {b}" for a, b in merges]}}
put("hf_tokenizer_json", "gpt2-like.json", json.dumps(tok, ensure_ascii=False))
split = dict(tok, pre_tokenizer={"type": "Sequence", "pretokenizers": [
    {"type": "Split", "pattern": {"Regex": "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+"},
     "behavior": "Isolated", "invert": False},
    {"type": "ByteLevel", "add_prefix_space": False, "trim_offsets": True, "use_regex": False}]})
split["model"] = dict(tok["model"], merges=[[a, b] for a, b in merges], ignore_merges=True)
put("hf_tokenizer_json", "llama3-like.json", json.dumps(split, ensure_ascii=False))
put("hf_tokenizer_json", "unigram.json", json.dumps(dict(tok, model={"type": "Unigram", "vocab": []})))

# --- llm.c's tokenizer.bin: version 2, 260 tokens (256 bytes, 3 words, end of text) ----------------
words = [bytes([b]) for b in range(256)] + [b"He", b"ll", b"Hello", b"<|endoftext|>"]
body = b"".join(struct.pack("B", len(w)) + w for w in words)
put("llmc_tokenizer", "v2.bin", header(20240328, 2, len(words), len(words) - 1) + body)
put("llmc_tokenizer", "v1-wrong-count.bin", header(20240328, 1, len(words)) + body)
put("llmc_tokenizer", "truncated.bin", header(20240328, 2, len(words), len(words) - 1) + body[:300])
put("llmc_tokenizer", "eot-outside.bin", header(20240328, 2, len(words), 100000) + body)

# --- SentencePiece: a tiny BPE model (spm_train), and corrupt bytes ---------------------------------
spm = shutil.which("spm_train")
if spm:
    with tempfile.TemporaryDirectory() as d:
        with open(os.path.join(d, "in.txt"), "w") as f:
            f.write("the quick brown fox jumps over the lazy dog\nhello world of tiny tokenizers\nabc abd abe\n")
        subprocess.run([spm, "--input=" + os.path.join(d, "in.txt"), "--model_prefix=" + os.path.join(d, "tiny"),
                        "--vocab_size=40", "--model_type=bpe", "--character_coverage=1.0",
                        "--normalization_rule_name=identity", "--minloglevel=2"], check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        model = open(os.path.join(d, "tiny.model"), "rb").read()
    put("sentencepiece", "tiny-bpe.model", model)
    put("sentencepiece", "truncated.model", model[:200])
put("sentencepiece", "not-a-proto.model", b"\x0a\xff\xff\xff\xff\x0f" + b"x" * 10)

# --- documents: JSON Lines and %-separated text -----------------------------------------------------
put("documents", "lines.jsonl", '{"text": "first document"}\n{"text": "second\\nwith a newline"}\n\n{"text": ""}\n')
put("documents", "fortunes.txt", "A fortune.\n%\nAnother one,\non two lines.\n%\n%\n")
put("documents", "bad-utf8.txt", b"valid \xc3\xa9 then \xc3\x28 and \xff\n")
put("documents", "bad-jsonl.jsonl", '{"text": 3}\n')

# --- metrics.jsonl ------------------------------------------------------------------------------
put("metrics", "train.jsonl", '{"step": 1, "loss": 5.1, "lr": 0.001, "grad_norm": 1.5, "step_ms": 12.5, '
    '"tokens_per_s": 1000, "mfu": null, "tokens": 512, "memory_bytes": [1024, 2048]}\n'
    '{"step": 2, "loss": 4.9, "val_loss": 5.0}\n\n{"step": 3, "loss": NaN}\n')
put("metrics", "bad-step.jsonl", '{"step": "one", "loss": 5.1}\n')
put("metrics", "empty.jsonl", "\n\n")

# --- Chrome trace ---------------------------------------------------------------------------------
trace = {"traceEvents": [
    {"ph": "M", "pid": 0, "name": "process_name", "args": {"name": "rank 0"}},
    {"ph": "X", "pid": 0, "tid": 1, "name": "forward", "cat": "compute", "ts": 10.0, "dur": 5.5},
    {"ph": "X", "pid": 0, "tid": 2, "name": "all_reduce", "cat": "comm", "ts": 12.0, "dur": 2.0,
     "args": {"group": "data", "bytes": 4096}},
    {"ph": "X", "pid": 1, "tid": 1, "name": "backward", "cat": "compute", "ts": 20.0, "dur": 7.0}]}
put("trace_summary", "two-ranks.json", json.dumps(trace))
put("trace_summary", "array.json", json.dumps(trace["traceEvents"]))
put("trace_summary", "pid-string.json", json.dumps([{"ph": "X", "pid": "zero", "ts": 1, "dur": 1}]))

# --- Goldfish's hash table --------------------------------------------------------------------------
put("goldfish_table", "valid.bin", struct.pack("<5f", 0.0, 0.25, 0.5, 0.75, 0.999))
put("goldfish_table", "out-of-range.bin", struct.pack("<2f", 0.5, 1.0))
put("goldfish_table", "ragged.bin", struct.pack("<2f", 0.5, 0.1)[:7])
