#!/usr/bin/python3
"""A byte-level BPE tokenizer.json of exactly N ids, for a benchmark model of any vocabulary (llama.cpp loads a
GGUF only with a tokenizer of the model's size; the benchmark gives token ids, so which text they stand for does
not matter): the 256 bytes, <|endoftext|> (256), then merges of lowercase letters, pairs first, then longer
strings, each one letter longer than a piece before it. Usage: byte_tokenizer.py N OUT"""
import json
import os
import string
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "tests", "common"))
from gpt2_alphabet import byte_of_character  # noqa: E402

n, out = int(sys.argv[1]), sys.argv[2]
assert n >= 257, "a byte-level tokenizer has at least 257 ids"
alphabet = {b: c for c, b in byte_of_character().items()}
vocab = {alphabet[b]: b for b in range(256)}
merges = []
shorter = list(string.ascii_lowercase)  # the pieces of the previous length
while len(vocab) + 1 < n:
    longer = []
    for left in shorter:
        for letter in string.ascii_lowercase:
            if len(vocab) + 1 >= n:
                break
            piece = left + letter
            vocab[piece] = len(vocab) + 1  # after <|endoftext|> (256)
            merges.append(left + " " + letter)
            longer.append(piece)
    shorter = longer
json.dump({"version": "1.0", "added_tokens": [{"id": 256, "content": "<|endoftext|>", "special": True}],
           "normalizer": None, "pre_tokenizer": {"type": "ByteLevel", "add_prefix_space": False, "use_regex": True},
           "decoder": {"type": "ByteLevel"}, "model": {"type": "BPE", "vocab": vocab, "merges": merges}},
          open(out, "w"))
