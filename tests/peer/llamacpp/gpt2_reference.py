#!/usr/bin/python3
"""GPT-2's log-probability of each token of a sequence after a prompt, in float64 from a Hugging Face
safetensors export (axonn convert --to DIR/), written from GPT-2's formulas with no library. GELU is
GPT-2's tanh form, exactly (as axonn computes it), or as ggml's CPU backend computes it (--gelu ggml: the
input rounded to fp16 and looked up in a table of fp16 values; beyond +-10 x or 0), which is where
llama.cpp's GPT-2 log-probabilities part from the exact ones (~1e-4).
Usage: gpt2_reference.py HF_DIR IDS PROMPT_LENGTH [--gelu exact|ggml]   (prints the log-probabilities of
IDS[PROMPT_LENGTH:], comma-separated)"""
import json
import math
import struct
import sys

hf_dir, ids_text, prompt_len = sys.argv[1], sys.argv[2], int(sys.argv[3])
gelu_kind = sys.argv[5] if len(sys.argv) > 5 and sys.argv[4] == "--gelu" else "exact"
ids = [int(x) for x in ids_text.split(",")]
config = json.load(open(hf_dir + "/config.json"))
data = open(hf_dir + "/model.safetensors", "rb").read()
header_len = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + header_len])


def tensor(name):
    info = header.get(name) or header["transformer." + name]
    assert info["dtype"] == "F32", name + " is not F32"
    begin, end = (8 + header_len + o for o in info["data_offsets"])
    values = struct.unpack("<%df" % ((end - begin) // 4), data[begin:end])
    if len(info["shape"]) == 1:
        return list(values)
    rows, cols = info["shape"]
    return [values[r * cols:(r + 1) * cols] for r in range(rows)]


def f16(x):
    return struct.unpack("<e", struct.pack("<e", x))[0]


def gelu(x):
    exact = lambda v: 0.5 * v * (1 + math.tanh(math.sqrt(2 / math.pi) * v * (1 + 0.044715 * v * v)))
    if gelu_kind == "exact":
        return exact(x)
    if x <= -10:
        return 0.0
    if x >= 10:
        return x
    return f16(exact(f16(x)))


def layer_norm(x, w, b):
    mean = sum(x) / len(x)
    var = sum((a - mean) ** 2 for a in x) / len(x)
    s = 1 / math.sqrt(var + config.get("layer_norm_epsilon", 1e-5))
    return [(a - mean) * s * wi + bi for a, wi, bi in zip(x, w, b)]


def conv1d(w, b, x):  # HF's Conv1D: w is [in, out]
    out = list(b)
    for xi, row in zip(x, w):
        for j, wij in enumerate(row):
            out[j] += xi * wij
    return out


C, heads = config["n_embd"], config["n_head"]
hd = C // heads
wte, wpe = tensor("wte.weight"), tensor("wpe.weight")
xs = [[a + p for a, p in zip(wte[t], wpe[i])] for i, t in enumerate(ids)]
for layer in range(config["n_layer"]):
    p = "h.%d." % layer
    qkv = [conv1d(tensor(p + "attn.c_attn.weight"), tensor(p + "attn.c_attn.bias"),
                  layer_norm(x, tensor(p + "ln_1.weight"), tensor(p + "ln_1.bias"))) for x in xs]
    wo, bo = tensor(p + "attn.c_proj.weight"), tensor(p + "attn.c_proj.bias")
    for t in range(len(ids)):
        att = []
        for h in range(heads):
            q = qkv[t][h * hd:(h + 1) * hd]
            scores = [sum(a * k for a, k in zip(q, qkv[s][C + h * hd:C + (h + 1) * hd])) / math.sqrt(hd)
                      for s in range(t + 1)]
            top = max(scores)
            e = [math.exp(a - top) for a in scores]
            z = sum(e)
            att += [sum(e[s] / z * qkv[s][2 * C + h * hd + k] for s in range(t + 1)) for k in range(hd)]
        xs[t] = [a + o for a, o in zip(xs[t], conv1d(wo, bo, att))]
    w2, b2 = tensor(p + "ln_2.weight"), tensor(p + "ln_2.bias")
    wf, bf = tensor(p + "mlp.c_fc.weight"), tensor(p + "mlp.c_fc.bias")
    wp, bp = tensor(p + "mlp.c_proj.weight"), tensor(p + "mlp.c_proj.bias")
    for t in range(len(ids)):
        hidden = [gelu(a) for a in conv1d(wf, bf, layer_norm(xs[t], w2, b2))]
        xs[t] = [a + o for a, o in zip(xs[t], conv1d(wp, bp, hidden))]
wf, bf = tensor("ln_f.weight"), tensor("ln_f.bias")
out = []
for t in range(prompt_len - 1, len(ids) - 1):
    x = layer_norm(xs[t], wf, bf)
    logits = [sum(a * b for a, b in zip(row, x)) for row in wte]
    top = max(logits)
    lse = top + math.log(sum(math.exp(a - top) for a in logits))
    out.append("%.9g" % (logits[ids[t + 1]] - lse))
print(",".join(out))
