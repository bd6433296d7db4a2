#!/usr/bin/env python3
"""Step time of `axonn train` with each overlap setting, and the hidden-communication fraction.

For every grid, runs the same training (GPT-2 124M shapes by default, synthetic data) with --overlap none,
each overlap that applies to the grid (oar: Gx or Gy > 1; ors, oag: Gz > 1; dp: Gz*Gdata > 1) and all.
Settings run round-robin (none, oar, ..., all, none, oar, ...) for --rounds rounds, so that a load change
on the machine hits every setting alike. Step 1 warms up and the last step is traced: neither is timed. A
setting's step time is reported as the minimum and the median over all its timed steps of all rounds; on a
machine shared with other jobs the minimum is the better estimate of the uncontended time (interference
only ever adds time). From
the trace of each setting's last round, `axonn trace-summary --json` gives the hidden fraction (mean over
ranks) and the exposed communication.

  bench/overlap_bench.py --axonn build/bin/axonn --np 2 --grids 2,1,1,1 1,2,1,1 1,1,2,1 1,1,1,2
  bench/overlap_bench.py --np 4 --grids 2,2,1,1 1,2,2,1 --batch 8 --seq 128 --steps 5 --rounds 2

Prints a Markdown table (the one in docs/overlap.md) and writes raw numbers as JSON (--out).
"""
import argparse
import json
import os
import resource
import statistics
import subprocess
import sys
import tempfile


def settings_for(grid):
    gx, gy, gz, gd = grid
    s = ["none"]
    if gx * gy > 1:
        s.append("oar")
    if gz > 1:
        s += ["ors", "oag"]
    if gz * gd > 1:
        s.append("dp")
    return s + ["all"]


def run(args, grid, overlap, tmp):
    metrics = os.path.join(tmp, "m.jsonl")
    trace = os.path.join(tmp, f"trace-{'x'.join(map(str, grid))}-{overlap.replace(',', '-')}.json")
    np_ = grid[0] * grid[1] * grid[2] * grid[3]
    cmd = [args.mpiexec, "-n", str(np_), "--oversubscribe", args.axonn, "train", "--model", args.model,
           "--grid", ",".join(map(str, grid)), "--batch-size", str(args.batch), "--seq-len", str(args.seq),
           "--steps", str(args.steps), "--overlap", overlap, "--peak-gflops", "100", "--quiet",
           "--metrics", metrics, "--trace", trace, "--trace-steps", str(args.steps),
           "--overwrite"] + args.train_flags.split()  # each run replaces the last one's metrics (its own)
    env = dict(os.environ, OMP_NUM_THREADS="1", OPENBLAS_NUM_THREADS="1", OMPI_ALLOW_RUN_AS_ROOT="1",
               OMPI_ALLOW_RUN_AS_ROOT_CONFIRM="1")
    before = resource.getrusage(resource.RUSAGE_CHILDREN)
    out = subprocess.run(cmd, env=env, capture_output=True, text=True)
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    cpu_s = (after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime)  # every rank, whole run
    if out.returncode != 0:
        sys.exit(f"failed: {' '.join(cmd)}\n{out.stdout}\n{out.stderr}")
    steps = [json.loads(l) for l in open(metrics)]
    timed = [s["step_ms"] for s in steps[1:-1]]  # not the warm-up, not the traced step
    losses = [s["loss"] for s in steps]
    summary = subprocess.run([args.axonn, "trace-summary", "--json", trace], env=env, capture_output=True, text=True)
    if summary.returncode != 0:
        sys.exit(f"trace-summary failed: {summary.stderr}")
    ranks = json.loads(summary.stdout)
    return {"step_ms": statistics.median(timed), "steps_ms": timed, "losses": losses, "cpu_s": cpu_s,
            "hidden_fraction": statistics.mean(r["hidden_fraction"] for r in ranks),
            "comm_ms": statistics.mean(r["comm_ms"] for r in ranks),
            "exposed_ms": statistics.mean(r["exposed_ms"] for r in ranks),
            "compute_ms": statistics.mean(r["compute_ms"] for r in ranks),
            "wall_ms": statistics.mean(r["wall_ms"] for r in ranks)}


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--axonn", default="build/bin/axonn")
    p.add_argument("--mpiexec", default="mpiexec")
    p.add_argument("--grids", nargs="+", required=True, help="GX,GY,GZ,GD ...")
    p.add_argument("--model", default="gpt2-124m")
    p.add_argument("--batch", type=int, default=8)
    p.add_argument("--seq", type=int, default=128)
    p.add_argument("--steps", type=int, default=5, help="1 warm-up + timed steps + 1 traced step")
    p.add_argument("--rounds", type=int, default=2)
    p.add_argument("--out", default="")
    p.add_argument("--train-flags", default="", help="more `axonn train` flags, e.g. '--micro-batch-size 2'")
    args = p.parse_args()
    results = {}
    with tempfile.TemporaryDirectory() as tmp:
        for g in args.grids:
            grid = tuple(int(x) for x in g.split(","))
            per = {s: [] for s in settings_for(grid)}
            for r in range(args.rounds):
                for s in per:
                    res = run(args, grid, s, tmp)
                    per[s].append(res)
                    print(f"# {g} {s} round {r}: steps {' '.join(f'{t:.0f}' for t in res['steps_ms'])} ms, "
                          f"hidden {res['hidden_fraction']:.2f}",
                          file=sys.stderr, flush=True)
            results[g] = {s: {"step_ms": min(t for x in v for t in x["steps_ms"]),
                              "median_ms": statistics.median(t for x in v for t in x["steps_ms"]),
                              "all_ms": [t for x in v for t in x["steps_ms"]],
                              "cpu_s": statistics.median(x["cpu_s"] for x in v), **{k: v[-1][k] for k in
                              ("hidden_fraction", "comm_ms", "exposed_ms", "compute_ms", "wall_ms", "losses")}}
                          for s, v in per.items()}
            base = results[g]["none"]["losses"]
            for s, v in results[g].items():
                if v["losses"] != base:
                    print(f"# WARNING {g} {s}: losses differ from none", file=sys.stderr)
    print("| grid (Gx,Gy,Gz,Gd) | overlap | ms/step (min) | vs none | ms/step (median) | vs none | "
          "CPU s per run | comm in flight ms | hidden | exposed ms |")
    print("|---|---|---|---|---|---|---|---|---|---|")
    for g, per in results.items():
        none, none_med = per["none"]["step_ms"], per["none"]["median_ms"]
        for s, v in per.items():
            print(f"| {g} | {s} | {v['step_ms']:.0f} | {100 * (v['step_ms'] / none - 1):+.1f}% | "
                  f"{v['median_ms']:.0f} | {100 * (v['median_ms'] / none_med - 1):+.1f}% | {v['cpu_s']:.1f} | "
                  f"{v['comm_ms']:.0f} | {100 * v['hidden_fraction']:.0f}% | {v['exposed_ms']:.0f} |")
    if args.out:
        json.dump(results, open(args.out, "w"), indent=1)


if __name__ == "__main__":
    main()
