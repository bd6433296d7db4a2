#!/usr/bin/env python3
"""An independent reading (Python standard library only) of an HF GPT-2 safetensors file written by
`axonn convert`, checked element by element against the llm.c .bin it came from: the safetensors
framing, Hugging Face's names, the Conv1D transposes and the unpadded vocabulary.

Usage: check_hf_layout.py MODEL.bin MODEL.safetensors [config.json]
"""
import json
import struct
import sys
from array import array


def read_llmc(path):
    with open(path, "rb") as f:
        header = struct.unpack("256i", f.read(1024))
        assert header[0] == 20240326 and header[1] == 3, header[:2]
        maxT, V, L, NH, C, Vp = header[2:8]
        data = array("f")
        data.frombytes(f.read())
    shapes = [("wte", [Vp, C]), ("wpe", [maxT, C]), ("ln1w", [L, C]), ("ln1b", [L, C]),
              ("qkvw", [L, 3 * C, C]), ("qkvb", [L, 3 * C]), ("attprojw", [L, C, C]), ("attprojb", [L, C]),
              ("ln2w", [L, C]), ("ln2b", [L, C]), ("fcw", [L, 4 * C, C]), ("fcb", [L, 4 * C]),
              ("fcprojw", [L, C, 4 * C]), ("fcprojb", [L, C]), ("lnfw", [C]), ("lnfb", [C])]
    tensors, at = {}, 0
    for name, shape in shapes:
        n = 1
        for d in shape:
            n *= d
        tensors[name] = data[at:at + n]
        at += n
    assert at == len(data), (at, len(data))
    return dict(maxT=maxT, V=V, L=L, NH=NH, C=C, Vp=Vp), tensors


def read_safetensors(path):
    with open(path, "rb") as f:
        raw = f.read()
    (n,) = struct.unpack("<Q", raw[:8])
    assert (8 + n) % 8 == 0, "data section not 8-byte aligned"
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    meta = header.pop("__metadata__", {})
    spans = sorted((v["data_offsets"][0], v["data_offsets"][1], k) for k, v in header.items())
    at = 0
    for b, e, k in spans:
        assert b == at, f"gap or overlap at {k}"
        at = e
    assert at == len(data), "data section not covered exactly"
    out = {}
    for k, v in header.items():
        assert v["dtype"] == "F32", (k, v["dtype"])
        b, e = v["data_offsets"]
        a = array("f")
        a.frombytes(data[b:e])
        n = 1
        for d in v["shape"]:
            n *= d
        assert len(a) == n, (k, v["shape"], len(a))
        out[k] = (v["shape"], a)
    return meta, out


def main():
    cfg, llmc = read_llmc(sys.argv[1])
    meta, hf = read_safetensors(sys.argv[2])
    L, C, V, maxT = cfg["L"], cfg["C"], cfg["V"], cfg["maxT"]
    assert meta["format"] == "pt"
    for key, want in (("n_layer", L), ("n_head", cfg["NH"]), ("n_embd", C), ("vocab_size", V),
                      ("n_positions", maxT)):
        assert int(meta[key]) == want, (key, meta[key], want)
    assert len(hf) == 2 + 12 * L + 2, len(hf)

    def same(name, shape, values):
        got_shape, got = hf[name]
        assert got_shape == shape, (name, got_shape, shape)
        assert got.tobytes() == array("f", values).tobytes(), name

    same("wte.weight", [V, C], llmc["wte"][:V * C])  # padding rows dropped
    same("wpe.weight", [maxT, C], llmc["wpe"])
    same("ln_f.weight", [C], llmc["lnfw"])
    same("ln_f.bias", [C], llmc["lnfb"])

    def layer(t, l, n):
        return t[l * n:(l + 1) * n]

    def transposed(w, rows, cols):  # w is [rows, cols]; returns [cols, rows]
        return [w[r * cols + c] for c in range(cols) for r in range(rows)]

    for l in range(L):
        h = f"h.{l}."
        same(h + "ln_1.weight", [C], layer(llmc["ln1w"], l, C))
        same(h + "ln_1.bias", [C], layer(llmc["ln1b"], l, C))
        same(h + "attn.c_attn.weight", [C, 3 * C], transposed(layer(llmc["qkvw"], l, 3 * C * C), 3 * C, C))
        same(h + "attn.c_attn.bias", [3 * C], layer(llmc["qkvb"], l, 3 * C))
        same(h + "attn.c_proj.weight", [C, C], transposed(layer(llmc["attprojw"], l, C * C), C, C))
        same(h + "attn.c_proj.bias", [C], layer(llmc["attprojb"], l, C))
        same(h + "ln_2.weight", [C], layer(llmc["ln2w"], l, C))
        same(h + "ln_2.bias", [C], layer(llmc["ln2b"], l, C))
        same(h + "mlp.c_fc.weight", [C, 4 * C], transposed(layer(llmc["fcw"], l, 4 * C * C), 4 * C, C))
        same(h + "mlp.c_fc.bias", [4 * C], layer(llmc["fcb"], l, 4 * C))
        same(h + "mlp.c_proj.weight", [4 * C, C], transposed(layer(llmc["fcprojw"], l, 4 * C * C), C, 4 * C))
        same(h + "mlp.c_proj.bias", [C], layer(llmc["fcprojb"], l, C))

    if len(sys.argv) > 3:
        c = json.load(open(sys.argv[3]))
        assert c["model_type"] == "gpt2" and c["architectures"] == ["GPT2LMHeadModel"], c
        assert (c["n_layer"], c["n_head"], c["n_embd"], c["vocab_size"], c["n_positions"]) == \
            (L, cfg["NH"], C, V, maxT), c
    print(f"ok: {len(hf)} tensors in HF layout match the llm.c file element for element")


if __name__ == "__main__":
    main()
