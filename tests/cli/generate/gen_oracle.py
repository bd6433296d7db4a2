#!/usr/bin/python3
"""Greedy decoding of an llm.c GPT-2 model file in float64 PyTorch, recomputing the whole prefix at every
step with tests/golden/gen_golden.py's GPT-2 (written from GPT-2's formulas, independent of our code): the
oracle `axonn generate --temperature 0` is compared with.

Usage: gen_oracle.py MODEL.bin IDS(1,2,3) NEW_TOKENS  -> prints the new ids, comma-separated
"""
import os
import sys

import torch

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "golden"))
from gen_golden import gpt2_logits, read_model  # noqa: E402


def main():
    cfg, params = read_model(sys.argv[1])
    max_t = cfg[0]
    ids = [int(t) for t in sys.argv[2].split(",")]
    out = []
    with torch.no_grad():
        for _ in range(int(sys.argv[3])):
            if len(ids) >= max_t:
                break
            logits = gpt2_logits(cfg, params, torch.tensor([ids]))[0, -1]
            top2 = torch.topk(logits, 2).values
            assert top2[0] - top2[1] > 1e-6, "a near-tie: fp32 may pick either"
            nxt = int(torch.argmax(logits))  # the first of equal maxima: the lowest id
            ids.append(nxt)
            out.append(nxt)
    print(",".join(map(str, out)))


main()
