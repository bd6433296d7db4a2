#!/usr/bin/python3
"""Golden trajectories for Llama models, from an independent implementation: Llama written here in
PyTorch (Debian's python3-torch) in float64, from the formulas of Hugging Face's LlamaForCausalLM
(RMSNorm, rotate-half RoPE with rope_theta and llama3 rope_scaling, grouped-query attention, SwiGLU,
no biases, tied or untied embeddings), not from axonn's code.

For each case it draws the initial weights (fp32), writes them as a Hugging Face model directory
(config.json + model.safetensors, written here with the standard library) and an llm.c token shard,
trains 20 AdamW steps with the settings `axonn train` takes, and writes the per-step losses. Then,
with axonn's own binary, it exports the first case back to Hugging Face's layout (sharded), reads
that export with a few lines of Python and writes the logits the oracle computes from it. CI only
reads the committed outputs; rerun this by hand after changing a case:

    cmake --build --preset cpu-release --target axonn
    apt-get install python3-torch && /usr/bin/python3 tests/golden/gen_llama_golden.py [build/bin/axonn]
"""
import json
import math
import os
import struct
import subprocess
import sys

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))

# name, model (HF config keys), data (tokens, seed), training settings
CASES = [
    ("llama-gqa",
     dict(hidden_size=48, intermediate_size=136, num_hidden_layers=2, num_attention_heads=6, num_key_value_heads=2,
          vocab_size=397, max_position_embeddings=32, rope_theta=1e4, rope_scaling=None, rms_norm_eps=1e-5,
          tie_word_embeddings=False),
     dict(ntok=4000, seed=7),
     dict(B=3, T=13, steps=20, lr=3e-3, schedule="constant", warmup=0, wd=0.0, clip=0.0)),
    ("llama-tied-scaled",
     dict(hidden_size=40, intermediate_size=100, num_hidden_layers=3, num_attention_heads=5, num_key_value_heads=1,
          vocab_size=203, max_position_embeddings=24, rope_theta=5e5,
          rope_scaling=dict(rope_type="llama3", factor=8.0, low_freq_factor=1.0, high_freq_factor=4.0,
                            original_max_position_embeddings=16),
          rms_norm_eps=1e-5, tie_word_embeddings=True),
     dict(ntok=3000, seed=11),
     dict(B=5, T=11, steps=20, lr=2e-3, schedule="cosine", warmup=3, wd=0.1, clip=0.5)),
]
EXPORTED = "llama-gqa"  # the case axonn exports and the oracle reads back


# --- files ------------------------------------------------------------------------------------

def write_safetensors(path, tensors, metadata=None):
    """tensors: list of (name, float32 ndarray), written in this order (little-endian, row-major)."""
    header, offset = {}, 0
    for name, a in tensors:
        n = a.size * 4
        header[name] = {"dtype": "F32", "shape": list(a.shape), "data_offsets": [offset, offset + n]}
        offset += n
    if metadata:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for _, a in tensors:
            f.write(np.ascontiguousarray(a, dtype="<f4").tobytes())


def read_safetensors(path):
    raw = open(path, "rb").read()
    (n,) = struct.unpack("<Q", raw[:8])
    header = json.loads(raw[8:8 + n])
    header.pop("__metadata__", None)
    out = {}
    for name, t in header.items():
        b, e = t["data_offsets"]
        dt = {"F32": "<f4", "BF16": "<u2"}[t["dtype"]]
        a = np.frombuffer(raw[8 + n + b:8 + n + e], dtype=dt)
        if t["dtype"] == "BF16":
            a = (a.astype(np.uint32) << 16).view(np.float32)
        out[name] = a.reshape(t["shape"]).astype(np.float64)
    return out


def read_hf_dir(path):
    """A Hugging Face model directory: config.json and model.safetensors or the shards of its index."""
    config = json.load(open(os.path.join(path, "config.json")))
    index = os.path.join(path, "model.safetensors.index.json")
    files = sorted(set(json.load(open(index))["weight_map"].values())) if os.path.exists(index) else ["model.safetensors"]
    weights = {}
    for f in files:
        weights.update(read_safetensors(os.path.join(path, f)))
    return config, weights


def write_tokens(path, tokens):
    header = [20240520, 1, len(tokens)] + [0] * 253
    with open(path, "wb") as f:
        f.write(struct.pack("256i", *header))
        f.write(np.asarray(tokens, dtype="<u2").tobytes())


# --- the model ----------------------------------------------------------------------------------

def rope_frequencies(cfg):
    hd = cfg["hidden_size"] // cfg["num_attention_heads"]
    f = [1.0 / cfg["rope_theta"] ** (2 * i / hd) for i in range(hd // 2)]
    s = cfg["rope_scaling"]
    if s:  # llama3: long wavelengths divided by the factor, short kept, the ones between blended
        old, low, high = s["original_max_position_embeddings"], s["low_freq_factor"], s["high_freq_factor"]
        out = []
        for x in f:
            wavelen = 2 * math.pi / x
            if wavelen < old / high:
                out.append(x)
            elif wavelen > old / low:
                out.append(x / s["factor"])
            else:
                smooth = (old / wavelen - low) / (high - low)
                out.append((1 - smooth) * x / s["factor"] + smooth * x)
        f = out
    return torch.tensor(f, dtype=torch.float64)


def rms_norm(x, w, eps):
    return x * torch.rsqrt((x * x).mean(-1, keepdim=True) + eps) * w


def rotate(x, cos, sin):  # x [B, heads, T, hd]: rotate-half, pairs (i, i + hd/2)
    h = x.shape[-1] // 2
    x1, x2 = x[..., :h], x[..., h:]
    return torch.cat([x1 * cos - x2 * sin, x2 * cos + x1 * sin], dim=-1)


def logits_of(cfg, p, idx):
    L, C = cfg["num_hidden_layers"], cfg["hidden_size"]
    nh, nkv = cfg["num_attention_heads"], cfg["num_key_value_heads"]
    hd, eps = C // nh, cfg["rms_norm_eps"]
    B, T = idx.shape
    angle = torch.arange(T, dtype=torch.float64)[:, None] * rope_frequencies(cfg)[None, :]
    cos, sin = torch.cos(angle), torch.sin(angle)
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    x = p["model.embed_tokens.weight"][idx]
    for l in range(L):
        w = lambda n: p[f"model.layers.{l}.{n}.weight"]
        h = rms_norm(x, w("input_layernorm"), eps)
        q = (h @ w("self_attn.q_proj").T).view(B, T, nh, hd).transpose(1, 2)
        k = (h @ w("self_attn.k_proj").T).view(B, T, nkv, hd).transpose(1, 2)
        v = (h @ w("self_attn.v_proj").T).view(B, T, nkv, hd).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k, v = k.repeat_interleave(nh // nkv, dim=1), v.repeat_interleave(nh // nkv, dim=1)  # kv head j serves q heads jG..
        att = (q @ k.transpose(-1, -2)) / math.sqrt(hd)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, nh * hd)
        x = x + y @ w("self_attn.o_proj").T
        h = rms_norm(x, w("post_attention_layernorm"), eps)
        gate, up = h @ w("mlp.gate_proj").T, h @ w("mlp.up_proj").T
        x = x + (torch.nn.functional.silu(gate) * up) @ w("mlp.down_proj").T
    head = p["model.embed_tokens.weight"] if cfg["tie_word_embeddings"] else p["lm_head.weight"]
    return rms_norm(x, p["model.norm.weight"], eps) @ head.T


def init_weights(cfg, seed):
    """fp32 weights in HF's names and file order: normal(0, 0.02) matrices, norm weights around 1."""
    rng = np.random.default_rng(seed)
    C, F, V = cfg["hidden_size"], cfg["intermediate_size"], cfg["vocab_size"]
    hd = C // cfg["num_attention_heads"]
    A, KV = cfg["num_attention_heads"] * hd, cfg["num_key_value_heads"] * hd
    mat = lambda r, c: (0.02 * rng.standard_normal((r, c))).astype(np.float32)
    norm = lambda: (1.0 + 0.1 * rng.standard_normal(C)).astype(np.float32)
    t = [("model.embed_tokens.weight", mat(V, C))]
    for l in range(cfg["num_hidden_layers"]):
        n = f"model.layers.{l}."
        t += [(n + "input_layernorm.weight", norm()), (n + "self_attn.q_proj.weight", mat(A, C)),
              (n + "self_attn.k_proj.weight", mat(KV, C)), (n + "self_attn.v_proj.weight", mat(KV, C)),
              (n + "self_attn.o_proj.weight", mat(C, A)), (n + "post_attention_layernorm.weight", norm()),
              (n + "mlp.gate_proj.weight", mat(F, C)), (n + "mlp.up_proj.weight", mat(F, C)),
              (n + "mlp.down_proj.weight", mat(C, F))]
    t.append(("model.norm.weight", norm()))
    if not cfg["tie_word_embeddings"]:
        t.append(("lm_head.weight", mat(V, C)))
    return t


def make_tokens(V, ntok, seed):
    """A first-order Markov chain over V tokens (something to learn)."""
    rng = np.random.default_rng(seed)
    nxt = rng.integers(0, V, size=(V, 4))
    toks, t = [], int(rng.integers(V))
    for _ in range(ntok):
        toks.append(t)
        t = int(nxt[t, rng.integers(4)]) if rng.random() < 0.9 else int(rng.integers(V))
    return toks


def lr_at(s, step):
    if step < s["warmup"]:
        return s["lr"] * (step + 1) / s["warmup"]
    if s["schedule"] == "constant":
        return s["lr"]
    ratio = (step - s["warmup"]) / (s["steps"] - s["warmup"])
    return 0.5 * (1 + math.cos(math.pi * ratio)) * s["lr"]


def train(cfg, params, tokens, s):
    """AdamW (betas 0.9, 0.999, eps 1e-8), decay on the matrices only, global-norm clipping."""
    B, T, V = s["B"], s["T"], cfg["vocab_size"]
    names = list(params)
    m = {n: torch.zeros_like(params[n]) for n in names}
    v = {n: torch.zeros_like(params[n]) for n in names}
    losses, pos = [], 0
    for step in range(s["steps"]):
        if pos + B * T + 1 > len(tokens):
            pos = 0
        buf = torch.tensor(tokens[pos:pos + B * T + 1])
        pos += B * T
        logits = logits_of(cfg, params, buf[:-1].view(B, T))
        loss = torch.nn.functional.cross_entropy(logits.reshape(-1, V), buf[1:].reshape(-1))
        losses.append(loss.item())
        for n in names:
            params[n].grad = None
        loss.backward()
        with torch.no_grad():
            norm = math.sqrt(sum(float((params[n].grad ** 2).sum()) for n in names))
            scale = s["clip"] / norm if s["clip"] > 0 and norm > s["clip"] else 1.0
            lr, t = lr_at(s, step), step + 1
            for n in names:
                g = params[n].grad * scale
                m[n].mul_(0.9).add_(0.1 * g)
                v[n].mul_(0.999).add_(0.001 * g * g)
                mh, vh = m[n] / (1 - 0.9 ** t), v[n] / (1 - 0.999 ** t)
                wd = s["wd"] if params[n].dim() == 2 else 0.0  # matrices: embeddings and projections
                params[n] -= lr * (mh / (vh.sqrt() + 1e-8) + wd * params[n])
    return losses


def hf_config(cfg):
    c = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_act="silu", attention_bias=False,
             mlp_bias=False, torch_dtype="float32")
    c.update(cfg)
    return c


def main():
    axonn = sys.argv[1] if len(sys.argv) > 1 else os.path.join(HERE, "..", "..", "build", "bin", "axonn")
    for name, cfg, data, s in CASES:
        out = os.path.join(HERE, name)
        os.makedirs(out, exist_ok=True)
        weights = init_weights(cfg, data["seed"])
        with open(os.path.join(out, "config.json"), "w") as f:
            json.dump(hf_config(cfg), f, indent=2)
            f.write("\n")
        write_safetensors(os.path.join(out, "model.safetensors"), weights, {"format": "pt"})
        tokens = make_tokens(cfg["vocab_size"], data["ntok"], data["seed"])
        write_tokens(os.path.join(out, "tokens.bin"), tokens)
        params = {n: torch.tensor(a, dtype=torch.float64, requires_grad=True) for n, a in weights}
        losses = train(cfg, params, tokens, s)
        with open(os.path.join(out, "losses.txt"), "w") as f:
            f.write("# " + " ".join(f"{k}={v}" for k, v in s.items()) + "\n")
            for i, l in enumerate(losses):
                f.write(f"{i} {l:.9f}\n")
        print(name, losses[0], losses[-1])

    # axonn's Hugging Face export of the first case (sharded, fp32), read back here: the logits of
    # its first B*T tokens, float64, for the oracle-reads-our-export test
    name, cfg, _, s = CASES[0]
    export = os.path.join(HERE, "llama-export")
    subprocess.run([axonn, "convert", "--from", os.path.join(HERE, name), "--to", export + "/", "--shard-size",
                    "100KB"], check=True)
    config, weights = read_hf_dir(export)
    p = {n: torch.tensor(a) for n, a in weights.items()}
    cfg_back = {k: config[k] for k in cfg}
    cfg_back["rope_scaling"] = config.get("rope_scaling")
    tokens = np.frombuffer(open(os.path.join(HERE, name, "tokens.bin"), "rb").read()[1024:], dtype="<u2")
    idx = torch.tensor(tokens[:s["B"] * s["T"]].astype(np.int64)).view(s["B"], s["T"])
    with torch.no_grad():
        logits = logits_of(cfg_back, p, idx)
    with open(os.path.join(export, "logits.txt"), "w") as f:
        f.write(f"# the oracle's logits of tokens[0:{s['B'] * s['T']}] of {name}/tokens.bin as B={s['B']} T={s['T']}, "
                f"from this directory's weights: one row of {cfg['vocab_size']} per token\n")
        for row in logits.reshape(-1, cfg["vocab_size"]):
            f.write(" ".join(f"{x:.9g}" for x in row.tolist()) + "\n")
    print("exported", export, tuple(logits.shape))


if __name__ == "__main__":
    main()
