#!/usr/bin/python3
"""Golden loss trajectories for GPT-2 shapes other than shared/reference/gpt2-tiny, from an
independent implementation: GPT-2 written here in PyTorch (Debian's python3-torch), in float64.

For each case it makes an llm.c checkpoint and token shard with tests/reference/make_reference.c,
trains on them with the same settings `axonn train` takes, and writes the per-step losses. CI only
reads the committed outputs; rerun this by hand after changing a case:

    apt-get install python3-torch && /usr/bin/python3 tests/golden/gen_golden.py
"""
import math
import os
import struct
import subprocess
import tempfile

import numpy as np
import torch

HERE = os.path.dirname(os.path.abspath(__file__))
MAKE_REFERENCE = os.path.join(HERE, "..", "reference", "make_reference.c")

# name, (maxT, V, L, NH, C, ntok, seed), training settings
CASES = [
    ("odd-shapes", (32, 397, 2, 3, 48, 4000, 7),
     dict(B=3, T=13, steps=20, lr=3e-3, schedule="constant", warmup=0, wd=0.0, clip=0.0)),
    ("decay-clip-cosine", (24, 203, 3, 5, 40, 3000, 11),
     dict(B=5, T=11, steps=15, lr=2e-3, schedule="cosine", warmup=3, wd=0.1, clip=0.5)),
]


def read_model(path):
    with open(path, "rb") as f:
        h = struct.unpack("256i", f.read(1024))
        assert h[0] == 20240326 and h[1] == 3
        maxT, V, L, NH, C, Vp = h[2], h[3], h[4], h[5], h[6], h[7]
        shapes = [(Vp, C), (maxT, C), (L, C), (L, C), (L, 3 * C, C), (L, 3 * C), (L, C, C), (L, C),
                  (L, C), (L, C), (L, 4 * C, C), (L, 4 * C), (L, C, 4 * C), (L, C), (C,), (C,)]
        data = np.frombuffer(f.read(), dtype=np.float32)
    params, off = [], 0
    for s in shapes:
        n = int(np.prod(s))
        params.append(torch.tensor(data[off:off + n].reshape(s), dtype=torch.float64, requires_grad=True))
        off += n
    assert off == data.size
    return (maxT, V, L, NH, C, Vp), params


def read_tokens(path):
    with open(path, "rb") as f:
        h = struct.unpack("256i", f.read(1024))
        assert h[0] == 20240520 and h[1] == 1
        return np.frombuffer(f.read(), dtype=np.uint16).astype(np.int64)


def layernorm(x, w, b):
    m = x.mean(-1, keepdim=True)
    v = ((x - m) ** 2).mean(-1, keepdim=True)
    return (x - m) / torch.sqrt(v + 1e-5) * w + b


def gelu(x):
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * x ** 3)))


def gpt2_logits(cfg, p, idx):
    """The logits [B, T, V] of the tokens idx [B, T] (also the generation oracle's,
    tests/cli/generate/gen_oracle.py)."""
    maxT, V, L, NH, C, Vp = cfg
    wte, wpe, ln1w, ln1b, qkvw, qkvb, apw, apb, ln2w, ln2b, fcw, fcb, fpw, fpb, lnfw, lnfb = p
    B, T = idx.shape
    x = wte[idx] + wpe[:T]
    mask = torch.tril(torch.ones(T, T, dtype=torch.bool))
    for l in range(L):
        h = layernorm(x, ln1w[l], ln1b[l]) @ qkvw[l].T + qkvb[l]
        q, k, v = h.split(C, dim=-1)
        q, k, v = (t.view(B, T, NH, C // NH).transpose(1, 2) for t in (q, k, v))
        att = (q @ k.transpose(-1, -2)) / math.sqrt(C // NH)
        att = att.masked_fill(~mask, float("-inf")).softmax(-1)
        y = (att @ v).transpose(1, 2).reshape(B, T, C)
        x = x + y @ apw[l].T + apb[l]
        x = x + gelu(layernorm(x, ln2w[l], ln2b[l]) @ fcw[l].T + fcb[l]) @ fpw[l].T + fpb[l]
    return (layernorm(x, lnfw, lnfb) @ wte.T)[..., :V]  # tied head; the first V only


def gpt2_loss(cfg, p, idx, tgt):
    V = cfg[1]
    return torch.nn.functional.cross_entropy(gpt2_logits(cfg, p, idx).reshape(-1, V), tgt.reshape(-1))


def lr_at(s, step):
    if step < s["warmup"]:
        return s["lr"] * (step + 1) / s["warmup"]
    if s["schedule"] == "constant":
        return s["lr"]
    ratio = (step - s["warmup"]) / (s["steps"] - s["warmup"])
    return 0.5 * (1 + math.cos(math.pi * ratio)) * s["lr"]


def train(cfg, params, tokens, s):
    B, T = s["B"], s["T"]
    matrices = {0, 1, 4, 6, 10, 12}  # wte wpe qkvw attprojw fcw fcprojw: the only tensors decayed
    m = [torch.zeros_like(x) for x in params]
    v = [torch.zeros_like(x) for x in params]
    losses, pos = [], 0
    for step in range(s["steps"]):
        if pos + B * T + 1 > len(tokens):
            pos = 0
        buf = torch.tensor(tokens[pos:pos + B * T + 1])
        pos += B * T
        loss = gpt2_loss(cfg, params, buf[:-1].view(B, T), buf[1:].view(B, T))
        losses.append(loss.item())
        for x in params:
            x.grad = None
        loss.backward()
        with torch.no_grad():
            norm = math.sqrt(sum(float((x.grad ** 2).sum()) for x in params))
            scale = s["clip"] / norm if s["clip"] > 0 and norm > s["clip"] else 1.0
            lr, t = lr_at(s, step), step + 1
            for i, x in enumerate(params):
                g = x.grad * scale
                m[i].mul_(0.9).add_(0.1 * g)
                v[i].mul_(0.999).add_(0.001 * g * g)
                mh, vh = m[i] / (1 - 0.9 ** t), v[i] / (1 - 0.999 ** t)
                wd = s["wd"] if i in matrices else 0.0
                x -= lr * (mh / (vh.sqrt() + 1e-8) + wd * x)
    return losses


def main():
    with tempfile.TemporaryDirectory() as tmp:
        exe = os.path.join(tmp, "make_reference")
        subprocess.run(["cc", "-O2", MAKE_REFERENCE, "-o", exe, "-lm"], check=True)
        for name, shape, s in CASES:
            out = os.path.join(HERE, name)
            os.makedirs(out, exist_ok=True)
            model, tokens = os.path.join(out, "model.bin"), os.path.join(out, "tokens.bin")
            subprocess.run([exe] + [str(x) for x in shape] + [model, tokens], check=True)
            cfg, params = read_model(model)
            losses = train(cfg, params, read_tokens(tokens), s)
            with open(os.path.join(out, "losses.txt"), "w") as f:
                f.write("# " + " ".join(f"{k}={v}" for k, v in s.items()) + "\n")
                for i, l in enumerate(losses):
                    f.write(f"{i} {l:.9f}\n")
            print(name, losses[0], losses[-1])


if __name__ == "__main__":
    main()
