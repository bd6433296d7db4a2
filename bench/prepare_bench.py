#!/usr/bin/env python3
"""`axonn prepare` against GPT-2's JavaScript encoder (npm gpt-3-encoder 1.1.4 on node) on the same text:
MB/s, and MB/s per core. The machine is shared and noisy: the runs are interleaved round-robin and the
median of the rounds is reported (and the best, since interference only adds time).

  python3 bench/prepare_bench.py [--axonn build/bin/axonn] [--rounds 5] [--threads 1,2]
                                 [--corpus /usr/share/games/fortunes] [--separator %] [--json out.json]

axonn's time is the one prepare reports: reading the files, checking UTF-8, encoding, writing the shards
(the tokenizer's loading left out). node's is the encoding alone (its vocabulary loading left out), over the
same documents, which shards.py splits as prepare does. Both count the same bytes of text.
"""
import argparse
import json
import os
import re
import statistics
import subprocess
import sys
import tempfile

here = os.path.dirname(os.path.abspath(__file__))
root = os.path.dirname(here)


def gpt2_dir():
    for d in [os.environ.get("AXONN_GPT2_TOKENIZER_DIR", ""),
              os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.expanduser("~/.cache")), "axonn/gpt2"),
              "/usr/local/share/axonn/gpt2", "/usr/share/axonn/gpt2"]:
        if d and os.path.isfile(os.path.join(d, "Encoder.js")):
            return d
    sys.exit("GPT-2's files (with Encoder.js) are not installed: run scripts/fetch-gpt2-tokenizer.sh")


def corpus_files(corpus):
    if os.path.isfile(corpus):
        return [corpus]
    return sorted(os.path.join(corpus, f) for f in os.listdir(corpus)
                  if os.path.isfile(os.path.join(corpus, f)) and not os.path.islink(os.path.join(corpus, f))
                  and not f.endswith(".dat") and not f.startswith("."))


def run_prepare(axonn, files, separator, threads, out):
    cmd = [axonn, "prepare", "--tokenizer", "gpt2", "--output", out, "--overwrite", "--quiet", "--val-fraction", "0",
           "--threads", str(threads)] + (["--doc-separator", separator] if separator else []) + files
    text = subprocess.run(cmd, check=True, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True).stdout
    m = re.search(r"([0-9.]+) MB of text in ([0-9.]+) s", text)
    assert m, text
    return float(m.group(1)), float(m.group(2))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--axonn", default=os.path.join(root, "build/bin/axonn"))
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--corpus", default="/usr/share/games/fortunes")
    ap.add_argument("--separator", default="%")
    ap.add_argument("--json", default="")
    a = ap.parse_args()
    files = corpus_files(a.corpus)
    threads = [int(t) for t in a.threads.split(",")]
    pkg = gpt2_dir()
    with tempfile.TemporaryDirectory() as tmp:
        docs = os.path.join(tmp, "docs.json")
        shards_py = os.path.join(root, "tests/cli/prepare/shards.py")
        subprocess.run([sys.executable, shards_py, "docs", docs] + (["--separator", a.separator] if a.separator else [])
                       + files, check=True, capture_output=True)
        rates = {f"axonn prepare, {t} thread{'s' if t > 1 else ''}": [] for t in threads}
        rates["gpt-3-encoder (node, 1 thread)"] = []
        mb = None
        for _ in range(a.rounds):
            for t in threads:  # interleaved: each round runs every setting once
                mb, s = run_prepare(a.axonn, files, a.separator, t, os.path.join(tmp, "out"))
                rates[f"axonn prepare, {t} thread{'s' if t > 1 else ''}"].append((mb / s, t))
            js = json.loads(subprocess.run(["node", os.path.join(here, "js_encode_bench.js"), pkg, docs], check=True,
                                           capture_output=True, text=True).stdout)
            rates["gpt-3-encoder (node, 1 thread)"].append((js["bytes"] / 1e6 / js["seconds"], 1))
    node_median = statistics.median(r for r, _ in rates["gpt-3-encoder (node, 1 thread)"])
    print(f"corpus: {a.corpus} ({len(files)} files, {mb:.2f} MB of text), {a.rounds} interleaved rounds, "
          f"{os.cpu_count()} cores\n")
    print("| encoder | MB/s (median) | MB/s (best) | MB/s per core (median) | per core vs node |")
    print("|---|---|---|---|---|")
    summary = {}
    for name, rs in rates.items():
        cores = rs[0][1]
        med, best = statistics.median(r for r, _ in rs), max(r for r, _ in rs)
        summary[name] = {"median_mb_s": med, "best_mb_s": best, "cores": cores, "rounds": [r for r, _ in rs]}
        print(f"| {name} | {med:.2f} | {best:.2f} | {med / cores:.2f} | {med / cores / node_median:.1f}x |")
    if a.json:
        json.dump({"corpus": a.corpus, "mb": mb, "results": summary}, open(a.json, "w"), indent=2)


main()
