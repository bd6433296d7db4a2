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

# needs_chromium: the browser cases skip (exit 77, CTest's SKIP_RETURN_CODE) when Debian's chromium is absent
needs_chromium() {
  command -v chromium >/dev/null || { echo "skipped: chromium is not installed (scripts/install-deps.sh installs it)"; exit 77; }
}

# screenshot PAGE PNG LOG: headless Chromium renders the page (scripts/report-screenshot.sh: offline, every host
# name resolves to nothing, so not even the browser's own services reach out); its log (stderr) to LOG.
screenshot() {
  local page=$1 png=$2 log=$3
  local rc=0
  bash "$(dirname "$0")/../../../scripts/report-screenshot.sh" "$page" "$png" "$log" || rc=$?
  [ "$rc" -eq 0 ] && [ -s "$png" ] || { cp "$log" "$tmp/out"; fail "chromium exit code $rc, no screenshot $png"; }
}

# small_run DIR: a run directory with 40 steps of metrics and a 2-rank trace (no training: for the browser's
# negative cases)
small_run() {
  mkdir -p "$1"
  python3 - "$1" <<'PY'
import json, math, sys
d = sys.argv[1]
with open(d + "/metrics.jsonl", "w") as f:
    for s in range(40):
        f.write(json.dumps({"step": s, "loss": 6 - math.log1p(s) / 3, "lr": 1e-3 * min(1, (s + 1) / 10),
                            "grad_norm": 1 + 0.5 * math.sin(s), "step_ms": 50 + s % 7, "tokens_per_s": 2000 + 30 * s,
                            "mfu": 0.1 + 0.001 * s}) + "\n")
ev = [{"ph": "X", "name": "mm", "cat": "compute", "pid": p, "tid": 0, "ts": 0, "dur": 100} for p in (0, 1)]
ev += [{"ph": "X", "name": "ar", "cat": "comm", "pid": p, "tid": 1, "ts": 40 + 40 * p, "dur": 40} for p in (0, 1)]
json.dump({"traceEvents": ev}, open(d + "/trace.json", "w"))
PY
}

case $case_name in
  browser_renders)
    # a real run's report in headless Chromium: every chart drawn, nothing loaded. --overlap none: no
    # communication is hidden, and bars of 0 % must still be seen (they once vanished under the x axis, which
    # a slow machine's run showed even with overlap)
    needs_chromium
    run_dir=$tmp/run
    mkdir -p "$run_dir"
    CLI_TIMEOUT=200 run_np 2 train --grid 2,1,1,1 --init "$model" --data "$tokens" --batch-size 4 --seq-len 32 \
      --steps 8 --lr 3e-3 --peak-gflops 100 --metrics "$run_dir/metrics.jsonl" --trace "$run_dir/trace.json" \
      --trace-steps 2:3 --val-data "$tokens" --val-every 4 --val-batches 1 --overlap none --quiet
    run "$axonn" report "$run_dir" --quiet
    screenshot "$run_dir/report.html" "$tmp/shot.png" "$tmp/chromium.log"
    run python3 "$(dirname "$0")/browser_check.py" "$run_dir/report.html" "$tmp/shot.png" "$tmp/chromium.log"
    cat "$tmp/out"
    expect_output "^ok: 8 charts drawn" ;;
  browser_detects_outside_load)
    # the check itself: a page that tries to load an image and a stylesheet is caught by Chromium's log
    needs_chromium
    small_run "$tmp/run"
    run "$axonn" report "$tmp/run" --quiet
    sed 's|</body>|<img src="http://127.0.0.1:9/x.png"><link rel="stylesheet" href="file:///etc/x.css"></body>|' \
      "$tmp/run/report.html" >"$tmp/bad.html"
    screenshot "$tmp/bad.html" "$tmp/shot.png" "$tmp/chromium.log"
    expect_error "Chromium blocked a load or a request failed: .*http://127.0.0.1:9/x.png" \
      python3 "$(dirname "$0")/browser_check.py" "$tmp/bad.html" "$tmp/shot.png" "$tmp/chromium.log"
    expect_output "Chromium blocked a load or a request failed: .*file:///etc/x.css"
    expect_output "the page has a URL or a reference to load"
    expect_no_output "plot areas"   # the charts themselves are still drawn
    ;;
  browser_detects_undrawn_chart)
    # the check itself: a chart whose lines are removed is found empty in the screenshot
    needs_chromium
    small_run "$tmp/run"
    run "$axonn" report "$tmp/run" --quiet
    python3 - "$tmp/run/report.html" "$tmp/bad.html" <<'PY'
import re, sys
html = open(sys.argv[1]).read()
svg = re.search(r'<svg id="chart-grad-norm".*?</svg>', html, re.S).group(0)
open(sys.argv[2], "w").write(html.replace(svg, re.sub(r'<path class="data"[^>]*/>', "", svg)))
PY
    screenshot "$tmp/bad.html" "$tmp/shot.png" "$tmp/chromium.log"
    expect_error "plot area [0-9]+ at .* has [0-9]+ data pixels: nothing drawn" \
      python3 "$(dirname "$0")/browser_check.py" "$tmp/bad.html" "$tmp/shot.png" "$tmp/chromium.log"
    [ "$(count "nothing drawn")" -eq 1 ] || fail "not exactly the one emptied chart was found empty"
    expect_no_output "Chromium blocked" ;;
  training_run)
    # a traced 2-rank run (X = 2) into a run directory, then the report of that directory
    run_dir=$tmp/run
    mkdir -p "$run_dir"
    CLI_TIMEOUT=200 run_np 2 train --grid 2,1,1,1 --init "$model" --data "$tokens" --batch-size 4 --seq-len 32 \
      --steps 8 --lr 3e-3 --peak-gflops 100 --metrics "$run_dir/metrics.jsonl" --trace "$run_dir/trace.json" \
      --trace-steps 2:3 --val-data "$tokens" --val-every 4 --val-batches 1 --quiet
    run "$axonn" report "$run_dir"
    expect_output "report    $run_dir/report.html"
    expect_output "report: 4 files in "   # the progress summary (not a terminal: plain lines): 2 read, 2 written
    check_html "$run_dir/report.html" chart-loss-step chart-loss-tokens chart-lr chart-grad-norm chart-step-ms \
      chart-tokens-per-s chart-mfu chart-overlap-0
    python3 - "$run_dir/report.html" <<'PY' || fail "the loss chart lacks the validation loss"
import re, sys
svg = re.search(r'<svg id="chart-loss-step".*?</svg>', open(sys.argv[1]).read(), re.S).group(0)
paths = re.findall(r'<path class="data" d="M[^"]*" fill="none" stroke="(#[0-9a-f]+)"', svg)
assert paths == ["#1f77b4", "#ff7f0e"], paths  # train (8 steps) and validation (steps 4 and 8)
assert ">validation</text>" in svg
print("ok: train and validation loss")
PY
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
  explicit_traces)
    # --trace twice, then RUN_DIR: two traces replace the directory's, whose metrics stay
    small_run "$tmp/run"
    cp "$tmp/run/trace.json" "$tmp/t2.json"
    run "$axonn" report --trace "$tmp/run/trace.json" --trace "$tmp/t2.json" "$tmp/run" --out "$tmp/r.html" --quiet
    check_html "$tmp/r.html" chart-loss-step chart-overlap-0 chart-overlap-1
    absent "$tmp/run/report.html" ;;
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
    expect_error "/nonexistent-dir/l.png" "$axonn" report "$tmp/run" --png /nonexistent-dir/l.png
    absent "$tmp/run/report.html" "$tmp/run/report.html.tmp" ;;   # neither file written
  mpi_bad_input_once)
    expect_once 2 "run directory '/nonexistent-run' does not exist" report /nonexistent-run ;;
  *) echo "unknown case $case_name"; exit 2 ;;
esac
