#!/usr/bin/python3
"""A byte-level BPE tokenizer.json with exactly the reference GPT-2's 500 ids (tests/reference/gpt2-tiny):
the 256 bytes, <|endoftext|> (256), and 243 merges of two lowercase letters. Usage: byte_tokenizer_500.py OUT"""
import json
import os
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from gpt2_alphabet import byte_of_character  # noqa: E402

alphabet = {b: c for c, b in byte_of_character().items()}
vocab = {alphabet[b]: b for b in range(256)}
letters = "abcdefghijklmnopqrstuvwxyz"
pairs = [a + b for a in letters for b in letters][:243]
merges = []
for i, p in enumerate(pairs):
    vocab[p] = 257 + i
    merges.append(p[0] + " " + p[1])
json.dump({"version": "1.0", "added_tokens": [{"id": 256, "content": "<|endoftext|>", "special": True}],
           "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
           "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": vocab, "merges": merges}},
          open(sys.argv[1], "w"))
