#!/usr/bin/env bash
# CLI tests of `axonn report`: a real (short) training run into a run directory, its report checked;
# and bad input (missing directory, malformed metrics line, empty metrics file) getting a clear error.
# Usage: cli_report.sh CASE AXONN_BIN REFERENCE_DIR MPIEXEC [BENCH_PLAN_VALIDATE]
case_name=$1 axonn=$2 ref=$3 mpiexec=${4:-mpiexec} bench=${5:-}
. "$(dirname "$0")/../common.sh"
model=$ref/gpt2-tiny/model.bin tokens=$ref/gpt2-tiny/tokens.bin

# check_html FILE ID...: the page is self-contained and each chart ID is an <svg> with a drawn path
check_html() {
  python3 - "$@" <<'PY' || fail "the report $1 is not what it should be"
import re, sys
path, ids = sys.argv[1], sys.argv[2:]
html = open(path, encoding="utf-8").read()
assert html.startswith("<!DOCTYPE html>"), html[:80]
assert "<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'; img-src data:\">" in html
for bad in ("http://", "https://", "src=", "<script", "<link", "url(", "@import"):
    assert bad not in html, "the page has %r" % bad
assert not re.search(r"[a-z][a-z0-9+.-]*://", html), re.search(r"[a-z][a-z0-9+.-]*://", html).group(0)
svgs = dict(re.findall(r'<svg id="([^"]+)" class="chart".*?>(.*?)</svg>', html, re.S))
for i in ids:
    assert i in svgs, "no chart %s; charts: %s" % (i, sorted(svgs))
    paths = re.findall(r'<path class="data" d="M([^"]+)"', svgs[i])
    assert paths and max(p.count("L") + p.count("h") for p in paths) >= 1, "chart %s has no drawn path" % i
print("ok: %d charts, each with a drawn path: %s" % (len(svgs), ", ".join(sorted(svgs))))
PY
}

case $case_name in
  training_run)
    # a traced 2-rank run (X = 2) into a run directory, then the report of that directory
    run_dir=$tmp/run
    mkdir -p "$run_dir"
    CLI_TIMEOUT=200 run_np 2 train --grid 2,1,1,1 --init "$model" --data "$tokens" --batch-size 4 --seq-len 32 \
      --steps 8 --lr 3e-3 --peak-gflops 100 --metrics "$run_dir/metrics.jsonl" --trace "$run_dir/trace.json" \
      --trace-steps 2:3 --quiet
    run "$axonn" report "$run_dir"
    expect_output "report    $run_dir/report.html"
    expect_output "report: 4 files in "   # the progress summary (not a terminal: plain lines): 2 read, 2 written
    check_html "$run_dir/report.html" chart-loss-step chart-loss-tokens chart-lr chart-grad-norm chart-step-ms \
      chart-tokens-per-s chart-mfu chart-overlap-0
    expect_output '<svg id="chart-overlap-0"' "$run_dir/report.html"
    expect_output '<td>1</td><td class="num">' "$run_dir/report.html"   # rank 1's row of the trace table
    expect_output 'config.toml</td><td class="missing">missing' "$run_dir/report.html"
    expect_output "loss PNG  $run_dir/loss.png"
    python3 - "$run_dir/loss.png" "$(dirname "$0")" <<'PY' || fail "loss.png is not the loss curve"
import sys
sys.path.insert(0, sys.argv[2])
from png_read import read_png
w, h, c, rows = read_png(sys.argv[1])
assert (w, h) == (1280, 720), (w, h)
# the train series' colour (#1f77b4, anti-aliased) in most columns of the plot area
blue = lambda p: abs(p[0] - 31) < 40 and abs(p[1] - 119) < 40 and abs(p[2] - 180) < 40
cols = {x for y in range(80, 640) for x in range(130, 1240) if blue(rows[y][c * x:c * x + 3])}
assert len(cols) > 900, "the curve covers %d of 1110 columns" % len(cols)
print("ok: loss.png %dx%d, the curve in %d columns" % (w, h, len(cols)))
PY
    # the same from explicit files, quietly, to another place
    run "$axonn" report --metrics "$run_dir/metrics.jsonl" --trace "$run_dir/trace.json" --out "$tmp/r.html" --quiet
    expect_no_output "report: "
    expect_no_output "loss PNG"   # no PNG unless asked for, without a run directory
    check_html "$tmp/r.html" chart-loss-step chart-overlap-0
    ;;
  planner_run)
    # a planner validation of the grids of 2 ranks (a tiny GPT, one round) into a run directory with metrics
    [ -n "$bench" ] || { echo "skipped: built without bench_plan_validate (AXONN_BUILD_BENCH=OFF)"; exit 0; }
    run_dir=$tmp/run
    mkdir -p "$run_dir"
    printf '{"step":0,"loss":6.2,"lr":0.001}\n{"step":1,"loss":6.0,"lr":0.001}\n' >"$run_dir/metrics.jsonl"
    run "$mpiexec" -n 2 --oversubscribe "$bench" --layers 2 --channels 64 --heads 2 --vocab 256 --seq-len 16 \
      --batch-size 4 --steps 1 --rounds 1 --machine perlmutter --json "$run_dir/plan_validate.json"
    run "$axonn" report "$run_dir" --quiet
    check_html "$run_dir/report.html" chart-loss-step chart-plan
    python3 - "$run_dir/report.html" "$run_dir/plan_validate.json" <<'PY' || fail "the planner section is wrong"
import json, re, sys
html, plan = open(sys.argv[1]).read(), json.load(open(sys.argv[2]))
svg = re.search(r'<svg id="chart-plan".*?</svg>', html, re.S).group(0)
bars = re.findall(r'<path class="data" d="M', svg)
assert len(bars) == 2 * len(plan["grids"]) == 8, (len(bars), len(plan["grids"]))  # predicted and measured per grid
for g in plan["grids"]:
    assert ">%s</text>" % g["grid"] in svg, g["grid"]
    assert "<td>%s</td><td class=\"num\">%.2f</td>" % (g["grid"], 1e3 * g["measured_s"]) in html, g
print("ok: %d grids, predicted and measured" % len(plan["grids"]))
PY
    ;;
  missing_dir)
    expect_error "run directory '/nonexistent-run' does not exist" "$axonn" report /nonexistent-run ;;
  not_a_dir)
    echo x >"$tmp/file"
    expect_error "'$tmp/file' is not a directory" "$axonn" report "$tmp/file" ;;
  nothing_given) expect_error "--out FILE.html is needed without a run directory" "$axonn" report ;;
  no_inputs) expect_error "nothing to report: give a run directory" "$axonn" report --out "$tmp/r.html" ;;
  malformed_line)
    mkdir "$tmp/run"
    printf '{"step":0,"loss":6.2}\n{"step":1,"loss":6.1}\n{"step":2,"loss":\n' >"$tmp/run/metrics.jsonl"
    expect_error "metrics file '$tmp/run/metrics.jsonl', line 3: not valid JSON" "$axonn" report "$tmp/run"
    absent "$tmp/run/report.html" "$tmp/run/report.html.tmp" ;;
  empty_metrics)
    mkdir "$tmp/run"
    : >"$tmp/run/metrics.jsonl"
    expect_error "metrics file '$tmp/run/metrics.jsonl' is empty: no step was recorded" "$axonn" report "$tmp/run"
    absent "$tmp/run/report.html" ;;
  bad_trace)
    echo '{not json' >"$tmp/t.json"
    expect_error "trace file '$tmp/t.json': the trace is not valid JSON" "$axonn" report --trace "$tmp/t.json" \
      --out "$tmp/r.html"
    absent "$tmp/r.html" ;;
  missing_metrics_file)
    expect_error "cannot read metrics file '/nonexistent.jsonl'" "$axonn" report --metrics /nonexistent.jsonl \
      --out "$tmp/r.html" ;;
  unwritable_out)
    mkdir "$tmp/run"
    printf '{"step":0,"loss":6.2}\n' >"$tmp/run/metrics.jsonl"
    expect_error "/nonexistent-dir/r.html" "$axonn" report "$tmp/run" --out /nonexistent-dir/r.html ;;
  png_without_metrics)
    echo '{"traceEvents":[]}' >"$tmp/t.json"
    expect_error "--png draws the loss curve, but there are no metrics" "$axonn" report --trace "$tmp/t.json" \
      --out "$tmp/r.html" --png "$tmp/l.png"
    absent "$tmp/r.html" "$tmp/l.png" ;;
  png_unwritable)
    mkdir "$tmp/run"
    printf '{"step":0,"loss":6.2}\n{"step":1,"loss":6.0}\n' >"$tmp/run/metrics.jsonl"
    expect_error "/nonexistent-dir/l.png" "$axonn" report "$tmp/run" --png /nonexistent-dir/l.png ;;
  mpi_bad_input_once)
    expect_once 2 "run directory '/nonexistent-run' does not exist" report /nonexistent-run ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
