#!/usr/bin/python3
"""The memorisation study's corpus (bench/memorization/run.sh), from Debian's fortunes.

Every fortune is a document. The longer ones (--min-chars..--max-chars, enough tokens for a prefix and a
50-token suffix) are drawn, with a seeded generator, into the canaries (trained --repeats times) and the
controls (never trained); further fortunes are held out for the validation loss; the base corpus is the
rest (or its first --base-docs), seen once. The training documents (base + every canary copy) are written
in a seeded random order, so the copies are spread through the run.

Writes DIR/train.jsonl, base.jsonl, val.jsonl, canaries.jsonl, controls.jsonl and corpus.json (the counts)."""
import argparse
import json
import os
import random


def fortunes(root):
    docs = []
    for dirpath, dirnames, files in os.walk(root):
        dirnames.sort()
        for name in sorted(files):
            if name.endswith(".dat") or name.endswith(".u8") or name.startswith("."):
                continue
            path = os.path.join(dirpath, name)
            if os.path.islink(path):
                continue
            with open(path, encoding="utf-8", errors="strict") as f:
                text = f.read()
            for doc in text.split("\n%\n"):
                doc = doc.strip("%\n")
                if doc.strip():
                    docs.append(doc + "\n")
    seen, unique = set(), []
    for d in docs:  # the fortunes repeat some texts across files
        if d not in seen:
            seen.add(d)
            unique.append(d)
    return unique


def write_jsonl(path, docs):
    with open(path, "w", encoding="utf-8") as f:
        for d in docs:
            f.write(json.dumps({"text": d}) + "\n")


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--fortunes", default="/usr/share/games/fortunes")
    ap.add_argument("--out", required=True)
    ap.add_argument("--canaries", type=int, default=32)
    ap.add_argument("--controls", type=int, default=32)
    ap.add_argument("--repeats", type=int, default=16)
    ap.add_argument("--val-docs", type=int, default=600)
    ap.add_argument("--base-docs", type=int, default=0, help="0: every remaining fortune")
    ap.add_argument("--min-chars", type=int, default=400)
    ap.add_argument("--max-chars", type=int, default=1200)
    ap.add_argument("--seed", type=int, default=1)
    a = ap.parse_args()

    rng = random.Random(a.seed)
    docs = fortunes(a.fortunes)
    rng.shuffle(docs)
    long_docs = [d for d in docs if a.min_chars <= len(d) <= a.max_chars]
    if len(long_docs) < a.canaries + a.controls:
        raise SystemExit(f"only {len(long_docs)} fortunes of {a.min_chars}..{a.max_chars} characters; "
                         f"ask for fewer --canaries/--controls or widen the range")
    canaries = long_docs[:a.canaries]
    controls = long_docs[a.canaries:a.canaries + a.controls]
    taken = set(canaries) | set(controls)
    rest = [d for d in docs if d not in taken]
    val, base = rest[:a.val_docs], rest[a.val_docs:]
    if a.base_docs:
        base = base[:a.base_docs]
    train = base + canaries * a.repeats
    rng.shuffle(train)

    os.makedirs(a.out, exist_ok=True)
    write_jsonl(os.path.join(a.out, "train.jsonl"), train)
    write_jsonl(os.path.join(a.out, "base.jsonl"), base)  # what the tokenizer is trained on
    write_jsonl(os.path.join(a.out, "val.jsonl"), val)
    write_jsonl(os.path.join(a.out, "canaries.jsonl"), canaries)
    write_jsonl(os.path.join(a.out, "controls.jsonl"), controls)
    info = {"fortunes": len(docs), "base_docs": len(base), "canaries": len(canaries), "controls": len(controls),
            "repeats": a.repeats, "val_docs": len(val), "train_docs": len(train),
            "train_chars": sum(map(len, train)), "seed": a.seed}
    with open(os.path.join(a.out, "corpus.json"), "w") as f:
        json.dump(info, f, indent=1)
    print(json.dumps(info))


if __name__ == "__main__":
    main()
