#!/usr/bin/env bash
# CLI tests of axonn train's config file (--config, --print-config) and run directory (--run-dir): the same run
# from a TOML file and from flags gives bit-identical metrics, flags override the file, --print-config reads
# back to itself, a run directory holds what docs/report.md says and its config.toml reproduces the run, and
# bad files or directories are refused on every rank before step 1.
# Usage: cli_config.sh CASE AXONN_BIN REFERENCE_DIR MPIEXEC
case_name=$1 axonn=$2 ref=$3 mpiexec=${4:-mpiexec}
. "$(dirname "$0")/../common.sh"
model=$ref/gpt2-tiny/model.bin tokens=$ref/gpt2-tiny/tokens.bin

# same_metrics A B: the two metrics files have the same steps with bit-identical values, timing aside
# (step_ms, tokens_per_s and mfu are measured, the rest is computed)
same_metrics() {
  python3 - "$1" "$2" <<'PY' || fail "the metrics $1 and $2 differ"
import json, sys
def load(path):
    rows = [json.loads(line) for line in open(path)]
    for r in rows:
        for timing in ("step_ms", "tokens_per_s", "mfu"):
            del r[timing]
    return [json.dumps(r, sort_keys=True) for r in rows]
a, b = load(sys.argv[1]), load(sys.argv[2])
assert a, "no steps in " + sys.argv[1]
assert len(a) == len(b), "%d steps against %d" % (len(a), len(b))
for i, (x, y) in enumerate(zip(a, b)):
    assert x == y, "step %d: %s against %s" % (i, x, y)
print("ok: %d steps, the same values" % len(a))
PY
}

# the run of these cases, as flags and as a hand-written file (not --print-config's: the reader is checked on
# its own; keys in any order, integers for floats, comments)
flags=(--init "$model" --data "$tokens" --batch-size 4 --seq-len 32 --steps 4 --lr 3e-3 --lr-schedule constant
       --grad-clip 0 --weight-decay 0.1 --decay-all --peak-gflops 100 --quiet)
write_config() {
  cat >"$1" <<TOML
# the reference run, as a config file
[model]
init = "$model"

[data]
data = "$tokens"

[training]
steps = 4
seq-len = 32
batch-size = 4

[optimizer]
lr = 3e-3
lr-schedule = "constant"
grad-clip = 0            # an integer where a float is wanted
weight-decay = 0.1
decay-all = true

[compute]
peak-gflops = 100

[logging]
quiet = true
TOML
}

case $case_name in
  file_equals_flags)
    # 2 ranks on X: the run from the file and the run from the flags make bit-identical metrics
    write_config "$tmp/run.toml"
    run_np 2 train "${flags[@]}" --grid 2,1,1,1 --metrics "$tmp/flags.jsonl"
    run_np 2 train --config "$tmp/run.toml" --grid 2,1,1,1 --metrics "$tmp/file.jsonl"
    same_metrics "$tmp/flags.jsonl" "$tmp/file.jsonl"
    # and --print-config sees the same configuration either way
    run "$axonn" train "${flags[@]}" --print-config
    cp "$tmp/out" "$tmp/flags.toml"
    run "$axonn" train --config "$tmp/run.toml" --print-config
    same "$tmp/flags.toml" "$tmp/out" ;;
  flags_override_file)
    write_config "$tmp/run.toml"
    run "$axonn" train --config "$tmp/run.toml" --steps 2 --lr 1e-3 --metrics "$tmp/m.jsonl"
    [ "$(wc -l <"$tmp/m.jsonl")" -eq 2 ] || fail "--steps 2 on the command line did not override the file's steps = 4"
    python3 -c "import json,sys; r = json.loads(open(sys.argv[1]).readline()); assert abs(r['lr'] - 1e-3) < 1e-9, r" \
      "$tmp/m.jsonl" || fail "--lr 1e-3 did not override the file's lr"
    # the effective configuration: the command line's values, the file's for the rest
    run "$axonn" train --config "$tmp/run.toml" --steps 2 --lr 1e-3 --decay-all=false --print-config
    expect_output "^steps = 2$"
    expect_output "^lr = 0.001$"
    expect_output "^decay-all = false$"
    expect_output "^weight-decay = 0.1$"
    expect_output "^lr-schedule = ['\"]constant['\"]$" ;;
  print_config_round_trip)
    # non-default values of every kind: a string with quotes, floats, flags, an unsigned seed above TOML's
    # largest integer; --print-config's output read back prints the same text
    run "$axonn" train --model gpt2-tiny --data "it's a \"quoted\" path.bin" --lr 3e-3 --eps 1e-7 --beta2 0.95 \
      --shuffle --seed 18446744073709551615 --data-seed 7 --grid 1,1,1,1 --comm-timeout 12.5 --synthetic-tokens 123456 \
      --exit-after-minutes 0.25 --metrics "$tmp/never.jsonl" --print-config
    cp "$tmp/out" "$tmp/a.toml"
    expect_output '^seed = "18446744073709551615"$' "$tmp/a.toml"
    expect_output "^eps = 1e-07$" "$tmp/a.toml"
    expect_output "^shuffle = true$" "$tmp/a.toml"
    expect_output "^\[optimizer\]$" "$tmp/a.toml"
    absent "$tmp/never.jsonl"   # printed, not run
    run "$axonn" train --config "$tmp/a.toml" --print-config
    same "$tmp/a.toml" "$tmp/out"
    # every flag of --help has its key in the file, and every key is a flag (but --overwrite: an ask of
    # one command line, never recorded)
    run "$axonn" train --help
    python3 - "$tmp/out" "$tmp/a.toml" <<'PY' || fail "the flags of --help and the keys of --print-config differ"
import re, sys
flags = set(re.findall(r"^  (--[a-z0-9-]+)", open(sys.argv[1]).read(), re.M)) - {"--help", "--config", "--print-config", "--overwrite"}
keys = {"--" + k for k in re.findall(r"^([a-z0-9-]+) = ", open(sys.argv[2]).read(), re.M)}
assert flags == keys, "flags without a key: %s; keys without a flag: %s" % (sorted(flags - keys), sorted(keys - flags))
print("ok: %d flags, each one key" % len(flags))
PY
    ;;
  print_config_refuses_bad)
    # an effective configuration that is not valid is refused, not printed
    expect_error "^error: --steps must be positive, got 0" "$axonn" train --steps 0 --print-config
    expect_no_output "^\[model\]" ;;
  run_dir_contents)
    # a 2-rank run into a run directory: everything docs/report.md lists, and axonn report needs nothing else
    d=$tmp/runs/tiny
    run_np 2 train "${flags[@]}" --grid 2,1,1,1 --run-dir "$d"
    for f in config.toml run.json metrics.jsonl trace.json checkpoints/latest; do
      [ -s "$d/$f" ] || fail "the run directory lacks $f"
    done
    [ "$(wc -l <"$d/metrics.jsonl")" -eq 4 ] || fail "metrics.jsonl has not the 4 steps"
    expect_output "^run-dir = ['\"]$d['\"]$" "$d/config.toml"
    expect_output "^metrics = ''$|^metrics = \"\"$" "$d/config.toml"   # the configuration as given, not derived
    python3 - "$d/run.json" <<'PY' || fail "run.json is not what it should be"
import json, re, sys
r = json.load(open(sys.argv[1]))
assert re.fullmatch(r"[0-9a-f]{40}(-dirty)?|unknown", r["git_commit"]), r["git_commit"]
assert r["world_size"] == 2 and r["grid"] == "2,1,1,1", r
for k in ("axonn", "started", "host", "cpu", "mpi", "onednn", "openblas", "tomlplusplus", "compiler"):
    assert isinstance(r[k], str) and r[k], k
assert "MPI" in r["mpi"] and r["onednn"].startswith("oneDNN") and "OpenBLAS" in r["openblas"], r
assert re.fullmatch(r"\d+\.\d+\.\d+", r["tomlplusplus"]), r["tomlplusplus"]
assert r["model"].startswith("L=2 NH=4 C=64") and r["parameters"] > 0 and r["precision"] == "fp32", r
assert r["grid_degrees"] == "TP 2 (over X)" and re.fullmatch(r"[0-9.]+ GFLOP/s per rank \(.+\)", r["mfu_peak"]), r
print("ok: run.json", r["git_commit"], r["grid"], r["model"])
PY
    run "$axonn" report "$d"
    [ -s "$d/report.html" ] && [ -s "$d/loss.png" ] || fail "axonn report DIR wrote no report.html and loss.png"
    expect_output "git_commit" "$d/report.html"
    expect_output "run-dir = " "$d/report.html"
    # the summary names what ran (issue 35)
    expect_output "<td>model</td><td class=\"num\">L=2 NH=4 C=64 .*M parameters</td>" "$d/report.html"
    expect_output "<td>grid</td><td class=\"num\">2,1,1,1 \(Gx,Gy,Gz,Gdata\) on 2 ranks: TP 2 \(over X\)</td>" "$d/report.html"
    expect_output "<td>MFU peak</td><td class=\"num\">[0-9.]+ GFLOP/s per rank \(" "$d/report.html" ;;
  run_dir_explicit_flags_win)
    d=$tmp/run
    run "$axonn" train "${flags[@]}" --run-dir "$d" --metrics "$tmp/elsewhere.jsonl" --trace "$tmp/t.json" \
      --checkpoint-dir "$tmp/ckpt"
    [ -s "$tmp/elsewhere.jsonl" ] && [ -s "$tmp/t.json" ] && [ -s "$tmp/ckpt/latest" ] || fail "explicit outputs not written"
    absent "$d/metrics.jsonl" "$d/trace.json" "$d/checkpoints"
    [ -s "$d/config.toml" ] && [ -s "$d/run.json" ] || fail "the run directory lacks its record" ;;
  run_dir_reproduces)
    # the run directory's config.toml, with another run directory, is the same run
    run_np 2 train "${flags[@]}" --grid 1,1,1,2 --run-dir "$tmp/first"
    run_np 2 train --config "$tmp/first/config.toml" --run-dir "$tmp/again"
    same_metrics "$tmp/first/metrics.jsonl" "$tmp/again/metrics.jsonl"
    diff "$tmp/first/config.toml" "$tmp/again/config.toml" >"$tmp/out" || true
    [ "$(grep -c '^[<>]' "$tmp/out")" -eq 2 ] && expect_output "run-dir = " \
      || fail "the configurations differ in more than run-dir" ;;
  run_dir_bad)
    # a run directory that cannot be made: refused on every rank, once, before anything is trained
    : >"$tmp/file"
    expect_once 2 "error: --run-dir '$tmp/file' is a file, not a directory" train "${flags[@]}" --run-dir "$tmp/file"
    expect_once 2 "error: cannot make --run-dir '$tmp/file/sub'" train "${flags[@]}" --run-dir "$tmp/file/sub"
    expect_no_output "step +1/"
    # an invalid configuration makes no directory
    expect_once 2 "error: --val-batches must be >= 1" train "${flags[@]}" --val-batches 0 --run-dir "$tmp/never"
    absent "$tmp/never" ;;
  bad_config_every_rank)
    # each kind of bad file: one clear message naming the file, the place and what to change; every rank exits 2
    b=$tmp/bad.toml
    printf '[optimizer]\nlr = "fast"\n' >"$b"
    expect_once 2 "error: $b:2: \[optimizer\] lr: must be a number \(the value of --lr\), got a string" train --config "$b"
    printf '[optimiser]\nlr = 1\n' >"$b"
    expect_once 2 "error: $b:1: \[optimiser\]: unknown section; the sections are \[model\], \[data\]" train --config "$b"
    printf '[data]\nlr = 1\n' >"$b"
    expect_once 2 "error: $b:2: \[data\] lr: this setting belongs in \[optimizer\]; move it there" train --config "$b"
    printf '[training]\nbatch_size = 8\n' >"$b"
    expect_once 2 "error: $b:2: \[training\] batch_size: unknown key; did you mean batch-size" train --config "$b"
    printf '[training]\nsteps = 1.5\n' >"$b"
    expect_once 2 "error: $b:2: \[training\] steps: must be an integer \(the value of --steps\), got a floating-point" \
      train --config "$b"
    printf 'steps = 3\n' >"$b"
    expect_once 2 "error: $b:1: steps: a setting must be in its section: put it under \[training\]" train --config "$b"
    printf '[training]\nsteps = 0\n' >"$b"
    expect_once 2 "error: --steps must be positive, got 0 \($b sets it: \[training\] steps; change it there" train --config "$b"
    printf '[training\nsteps = 1\n' >"$b"
    expect_once 2 "error: $b:1:[0-9]+: not a valid TOML file: " train --config "$b"
    expect_once 2 "error: cannot read config file '$tmp/none.toml': No such file" train --config "$tmp/none.toml" ;;
  progress_eta)
    run "$axonn" train --model gpt2-tiny --steps 3 --batch-size 2 --seq-len 16 --peak-gflops 100
    expect_output "step +1/3 \| loss .* \| MFU +[0-9.]+% \| [0-9]+:[0-9]{2} ETA [0-9]+:[0-9]{2}$"
    expect_output "step +3/3 \| .* \| [0-9]+:[0-9]{2} ETA 0:00$" ;;
  *)
    echo "unknown case $case_name"
    exit 2 ;;
esac
echo "PASS $case_name"
