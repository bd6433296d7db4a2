"""Independent checks of `axonn prepare`'s output, written from the formats (spec/formats.md and
docs/text.md), sharing no code with axonn.

  shards.py docs OUT.json [--separator LINE] [--jsonl] FILE...   the documents, as prepare defines them
  shards.py check DIR DOCS.json VAL_FRACTION SEPARATOR_ID (--vocab encoder.json | --bytes)
      every shard's header and size are right, and the shards decode to the documents, each after
      the separator id, in order, validation documents where floor((i+1)F) > floor(iF)
  shards.py header FILE                                         magic version count
  shards.py tiny-tokenizer OUT.json [EXTRA_ID]                  a byte-level tokenizer.json
"""
import glob
import json
import math
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
from gpt2_alphabet import byte_of_character  # noqa: E402


def read_shard(path):
    with open(path, "rb") as f:
        data = f.read()
    magic, version, n = struct.unpack("<3i", data[:12])
    width = {(20240520, 1): 2, (20240801, 7): 4}.get((magic, version))
    assert width, f"{path}: magic {magic} version {version}"
    assert len(data) == 1024 + n * width, f"{path}: {len(data)} bytes for {n} tokens"
    assert not any(struct.unpack("<253i", data[12:1024])), f"{path}: header words 3..255 must be zero"
    fmt = "<%d%s" % (n, "H" if width == 2 else "I")
    return list(struct.unpack(fmt, data[1024:])), magic, version


def docs_of_files(files, separator, jsonl):
    docs = []
    for path in files:
        with open(path, "rb") as f:
            data = f.read()
        if jsonl:
            for line in data.split(b"\n"):
                if line.strip(b" \t\r"):
                    t = json.loads(line.decode("utf-8"))["text"]
                    if t:
                        docs.append(t.encode("utf-8"))
            continue
        if separator is None:
            if data:
                docs.append(data)
            continue
        doc = b""
        lines = data.split(b"\n")
        ends_with_newline = data.endswith(b"\n")
        if ends_with_newline:
            lines = lines[:-1]
        for k, line in enumerate(lines):
            if line.rstrip(b"\r") == separator.encode():
                if doc:
                    docs.append(doc)
                doc = b""
                continue
            last = k == len(lines) - 1
            doc += line + (b"" if last and not ends_with_newline else b"\n")
        if doc:
            docs.append(doc)
    return docs


def main():
    cmd = sys.argv[1]
    if cmd == "docs":
        out, args = sys.argv[2], sys.argv[3:]
        separator, jsonl = None, False
        if args[0] == "--separator":
            separator, args = args[1], args[2:]
        if args[0] == "--jsonl":
            jsonl, args = True, args[1:]
        docs = docs_of_files(args, separator, jsonl)
        json.dump([d.decode("utf-8", errors="replace") for d in docs], open(out, "w"))
        print(f"{len(docs)} documents")
    elif cmd == "check":
        d, docs_file, frac, sep = sys.argv[2], sys.argv[3], float(sys.argv[4]), int(sys.argv[5])
        if sys.argv[6] == "--vocab":
            alphabet = byte_of_character()
            vocab = {i: bytes(alphabet[c] for c in t) for t, i in json.load(open(sys.argv[7], encoding="utf-8")).items()}
        else:
            vocab = {i: bytes([i]) for i in range(256)}
        docs = [t.encode("utf-8") for t in json.load(open(docs_file))]
        want = {"train": [], "val": []}
        for i, doc in enumerate(docs):
            want["val" if math.floor((i + 1) * frac) > math.floor(i * frac) else "train"].append(doc)
        for split in ("train", "val"):
            tokens = []
            for p in sorted(glob.glob(os.path.join(d, f"{split}_*.bin"))):
                tokens += read_shard(p)[0]
            got, cur = [], None
            for t in tokens:
                if t == sep:
                    if cur is not None:
                        got.append(cur)
                    cur = b""
                else:
                    assert cur is not None, f"{split}: tokens before the first separator"
                    cur += vocab[t]
            if cur is not None:
                got.append(cur)
            assert len(got) == len(want[split]), f"{split}: {len(got)} documents, want {len(want[split])}"
            for k, (g, w) in enumerate(zip(got, want[split])):
                assert g == w, f"{split} document {k} differs:\n{g[:200]!r}\n{w[:200]!r}"
            print(f"ok: {split}: {len(got)} documents, {len(tokens)} tokens decode to the input")
    elif cmd == "header":
        tokens, magic, version = read_shard(sys.argv[2])
        print(magic, version, len(tokens))
    elif cmd == "tiny-tokenizer":
        alphabet = {b: c for c, b in byte_of_character().items()}
        vocab = {alphabet[b]: b for b in range(256)}
        added = [{"id": 256, "content": "<|endoftext|>", "special": True}]
        if len(sys.argv) > 3:
            added.append({"id": int(sys.argv[3]), "content": "<|wide|>", "special": True})
        json.dump({"version": "1.0", "added_tokens": added, "normalizer": None,
                   "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
                   "decoder": {"type": "ByteLevel"},
                   "model": {"type": "BPE", "vocab": vocab, "merges": []}}, open(sys.argv[2], "w"))
    else:
        sys.exit(f"unknown command {cmd}")


main()
