"""Writes llm.c's gpt2_tokenizer.bin from GPT-2's encoder.json, as llm.c's train_gpt2.py does
(write_tokenizer), written here from the format (spec models-text-goldfish.md §3.2), independently of
axonn's C++: header of 256 int32 (magic 20240328, version 2, n, eot), then per id a uint8 length and
the token's bytes. Usage: write_llmc_tokenizer.py encoder.json out.bin"""
import json
import os
import struct
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "common"))
from gpt2_alphabet import byte_of_character  # noqa: E402


def main():
    encoder = json.load(open(sys.argv[1], encoding="utf-8"))
    byte_of = byte_of_character()
    n = len(encoder)
    tokens = [None] * n
    for text, i in encoder.items():
        tokens[i] = bytes(byte_of[c] for c in text)
    header = [0] * 256
    header[0:4] = [20240328, 2, n, encoder["<|endoftext|>"]]
    with open(sys.argv[2], "wb") as f:
        f.write(struct.pack("<256i", *header))
        for t in tokens:
            f.write(struct.pack("<B", len(t)))
            f.write(t)


main()
