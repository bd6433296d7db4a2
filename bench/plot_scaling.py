#!/usr/bin/env python3
"""Draws bench/scaling_sweep.sh's table as an SVG (docs/performance.md, "How the cost grows").

    /usr/bin/python3 bench/plot_scaling.py scaling.tsv docs/images/scaling.svg

Three panels over the sequence length T (at the sweep's fixed tokens per step): ms/step and peak memory
per rank on 1 rank, one line per model and precision, and tokens/s of gpt2-124m's grids. A point that did
not run (out of memory, or a batch that a grid cannot split) is drawn as a cross on the panel's floor.
Only the standard library: no plotting package is needed.
"""
import math
import sys


def read_rows(path):
    rows = []
    header = None
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            if not line or line.startswith("#") or line == "SWEEP_DONE":
                continue
            cells = line.split("\t")
            if cells[0] == "model":
                header = cells
                continue
            rows.append(dict(zip(header, cells)))
    return rows


def by_length(sel):
    """The rows of one series: (T, row) of the points that ran, in order of T, and the Ts that did not."""
    good = sorted((int(r["T"]), r) for r in sel if r["status"] == "ok")
    missing = [int(r["T"]) for r in sel if r["status"] != "ok"]
    return good, missing


COLOURS = ["#1f77b4", "#d62728", "#2ca02c", "#9467bd", "#ff7f0e", "#8c564b", "#17becf", "#7f7f7f"]


class Panel:
    def __init__(self, x0, y0, w, h, title, ylabel, xs, ymin, ymax, log_y):
        self.x0, self.y0, self.w, self.h = x0, y0, w, h
        self.title, self.ylabel, self.xs = title, ylabel, xs
        self.log_y = log_y
        if log_y:
            self.ymin = 10 ** math.floor(math.log10(ymin))
            self.ymax = 10 ** math.ceil(math.log10(ymax))
        else:
            self.ymin, self.ymax = 0.0, ymax * 1.1
        self.parts = []

    def px(self, x):
        i = self.xs.index(x)
        return self.x0 + 40 + i * (self.w - 80) / max(1, len(self.xs) - 1)

    def py(self, y):
        if self.log_y:
            f = (math.log10(y) - math.log10(self.ymin)) / (math.log10(self.ymax) - math.log10(self.ymin))
        else:
            f = (y - self.ymin) / (self.ymax - self.ymin)
        return self.y0 + self.h - f * self.h

    def frame(self):
        p = self.parts
        p.append(f'<rect x="{self.x0}" y="{self.y0}" width="{self.w}" height="{self.h}" fill="none" stroke="#444"/>')
        p.append(f'<text x="{self.x0 + self.w / 2}" y="{self.y0 - 10}" text-anchor="middle" font-size="14">{self.title}</text>')
        p.append(f'<text x="{self.x0 - 52}" y="{self.y0 + self.h / 2}" text-anchor="middle" font-size="12" '
                 f'transform="rotate(-90 {self.x0 - 52} {self.y0 + self.h / 2})">{self.ylabel}</text>')
        for x in self.xs:
            p.append(f'<text x="{self.px(x)}" y="{self.y0 + self.h + 16}" text-anchor="middle" font-size="11">{x}</text>')
        p.append(f'<text x="{self.x0 + self.w / 2}" y="{self.y0 + self.h + 32}" text-anchor="middle" font-size="12">'
                 f'sequence length T</text>')
        ticks = []
        if self.log_y:
            v = self.ymin
            while v <= self.ymax * 1.0001:
                ticks.append(v)
                v *= 10
        else:
            step = 10 ** math.floor(math.log10(self.ymax / 4))
            for m in (1, 2, 5, 10):
                if self.ymax / (step * m) <= 6:
                    step *= m
                    break
            v = 0.0
            while v <= self.ymax:
                ticks.append(v)
                v += step
        for v in ticks:
            y = self.py(v)
            p.append(f'<line x1="{self.x0}" y1="{y}" x2="{self.x0 + self.w}" y2="{y}" stroke="#ddd"/>')
            p.append(f'<text x="{self.x0 - 4}" y="{y + 4}" text-anchor="end" font-size="10">{v:g}</text>')

    def series(self, points, missing, colour, dashed, label, legend_row):
        p = self.parts
        dash = ' stroke-dasharray="6 4"' if dashed else ""
        pts = [(self.px(x), self.py(y)) for x, y in points]
        if len(pts) > 1:
            path = " ".join(f"{x:.1f},{y:.1f}" for x, y in pts)
            p.append(f'<polyline points="{path}" fill="none" stroke="{colour}" stroke-width="2"{dash}/>')
        for x, y in pts:
            p.append(f'<circle cx="{x:.1f}" cy="{y:.1f}" r="3" fill="{colour}"/>')
        for x in missing:
            cx, cy = self.px(x), self.y0 + self.h - 6
            p.append(f'<path d="M{cx - 4},{cy - 4} L{cx + 4},{cy + 4} M{cx - 4},{cy + 4} L{cx + 4},{cy - 4}" '
                     f'stroke="{colour}" stroke-width="2"/>')
        ly = self.y0 + 14 + 14 * legend_row
        lx = self.x0 + 8
        p.append(f'<line x1="{lx}" y1="{ly - 4}" x2="{lx + 18}" y2="{ly - 4}" stroke="{colour}" stroke-width="2"{dash}/>')
        p.append(f'<text x="{lx + 22}" y="{ly}" font-size="10">{label}</text>')


def main():
    if len(sys.argv) != 3:
        sys.exit("usage: plot_scaling.py scaling.tsv out.svg")
    rows = read_rows(sys.argv[1])
    if not rows:
        sys.exit(f"error: {sys.argv[1]} holds no rows of bench/scaling_sweep.sh")
    ts = sorted({int(r["T"]) for r in rows})
    ok = [r for r in rows if r["status"] == "ok"]
    one = [r for r in rows if r["grid"] == "1,1,1,1"]
    models = []
    for r in one:
        if r["model"] not in models:
            models.append(r["model"])

    def val(r, key):
        return float(r[key])

    W, H = 1280, 440
    panels = []
    ms = [val(r, "ms_per_step") for r in ok] or [1.0]
    rss = [val(r, "rss_mib") / 1024 for r in ok] or [1.0]
    p1 = Panel(80, 40, 340, 320, "ms/step, 1 rank", "ms per step (log)", ts, min(ms), max(ms), True)
    p2 = Panel(500, 40, 340, 320, "peak memory, 1 rank", "peak RSS, GiB", ts, 0, max(rss), False)
    p1.frame()
    p2.frame()
    row = 0
    for mi, model in enumerate(models):
        for dtype in ("fp32", "bf16"):
            sel = [r for r in one if r["model"] == model and r["dtype"] == dtype]
            if not sel:
                continue
            good, missing = by_length(sel)
            colour = COLOURS[mi % len(COLOURS)]
            label = f"{model} {dtype}"
            p1.series([(t, val(r, "ms_per_step")) for t, r in good], missing, colour, dtype == "bf16", label, row)
            p2.series([(t, val(r, "rss_mib") / 1024) for t, r in good], missing, colour, dtype == "bf16", label, row)
            row += 1
    panels += [p1, p2]
    grid_rows = [r for r in rows if r["model"] == "gpt2-124m"]
    if grid_rows:
        tps = [val(r, "tokens_per_s") for r in grid_rows if r["status"] == "ok"] or [1.0]
        p3 = Panel(920, 40, 340, 320, "gpt2-124m: grids of 2 ranks x 1 thread", "tokens/s", ts, 0, max(tps), False)
        p3.frame()
        grids = []
        for r in grid_rows:
            if r["grid"] not in grids:
                grids.append(r["grid"])
        row = 0
        for gi, grid in enumerate(grids):
            for dtype in ("fp32", "bf16"):
                sel = [r for r in grid_rows if r["grid"] == grid and r["dtype"] == dtype]
                if not sel:
                    continue
                good, missing = by_length(sel)
                label = f"{'1 rank x 2 threads' if grid == '1,1,1,1' else 'grid ' + grid} {dtype}"
                p3.series([(t, val(r, "tokens_per_s")) for t, r in good], missing, COLOURS[gi % len(COLOURS)],
                          dtype == "bf16", label, row)
                row += 1
        panels.append(p3)
    out = [f'<svg xmlns="http://www.w3.org/2000/svg" width="{W}" height="{H}" viewBox="0 0 {W} {H}" '
           f'font-family="sans-serif"><rect width="{W}" height="{H}" fill="white"/>']
    for p in panels:
        out += p.parts
    out.append(f'<text x="{W / 2}" y="{H - 12}" text-anchor="middle" font-size="11">'
               f'fixed tokens per step (B = tokens / T); dashed: bf16; a cross: did not run (out of memory, or B cannot '
               f'be split over the grid)</text>')
    out.append("</svg>")
    with open(sys.argv[2], "w") as f:
        f.write("\n".join(out) + "\n")


if __name__ == "__main__":
    main()
