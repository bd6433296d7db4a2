#!/usr/bin/python3
"""A Llama with tied embeddings from an untied one's Hugging Face export (axonn convert --to DIR/): the same
tensors without lm_head.weight (F32 safetensors, rewritten here from the format's specification) and
"tie_word_embeddings": true in config.json. Usage: tie_llama.py IN_DIR OUT_DIR"""
import json
import os
import struct
import sys

src, dst = sys.argv[1], sys.argv[2]
os.makedirs(dst, exist_ok=True)
data = open(os.path.join(src, "model.safetensors"), "rb").read()
n = struct.unpack("<Q", data[:8])[0]
header = json.loads(data[8:8 + n])
meta = header.pop("__metadata__", {"format": "pt"})
meta.pop("config", None)  # our own copy of config.json: the new one is the directory's
out_header, blobs, offset = {"__metadata__": meta}, [], 0
for name, info in header.items():
    if name == "lm_head.weight":
        continue
    begin, end = (8 + n + o for o in info["data_offsets"])
    blobs.append(data[begin:end])
    out_header[name] = {"dtype": info["dtype"], "shape": info["shape"], "data_offsets": [offset, offset + end - begin]}
    offset += end - begin
text = json.dumps(out_header).encode()
text += b" " * (-len(text) % 8)
with open(os.path.join(dst, "model.safetensors"), "wb") as f:
    f.write(struct.pack("<Q", len(text)) + text + b"".join(blobs))
config = json.load(open(os.path.join(src, "config.json")))
config["tie_word_embeddings"] = True
json.dump(config, open(os.path.join(dst, "config.json"), "w"), indent=2)
