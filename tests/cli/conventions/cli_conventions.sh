#!/usr/bin/env bash
# The conventions of axonn's command line (docs/cli.md), checked on the built binary's --help texts:
#   help_examples          every subcommand's --help ends with an example ("Example:" or "Examples:")
#   help_defaults          every option that takes a number shows its default (=VALUE), as CLI11 does when the
#                          default is captured
#   flag_style             every long flag is lower-case words joined by dashes (--max-seq-len)
#   model_names            train and plan (the commands that take a model name) take the same names, each
#                          listed in both --help texts and accepted by both
#   exit_codes_documented  docs/cli.md's exit code table lists every code tools/axonn returns
#   help_without_mpi       --help, --version and flag errors are answered before MPI starts: they work where
#                          MPI's start-up fails, and under a launcher only rank 0 prints them
# Usage: cli_conventions.sh CASE AXONN_BIN SOURCE_DIR
case_name=$1 axonn=$2 src=$3
mpiexec=mpiexec
. "$(dirname "$0")/../common.sh"

# subcommands PATH...: the subcommands listed by `axonn PATH... --help` (none: a leaf)
subcommands() {
  "$axonn" "$@" --help | awk '/^Subcommands:/ { on = 1; next } on && /^  [a-z]/ { print $1 } on && /^$/ { on = 0 }'
}

# every subcommand path, one per line ("train", "bench comm", "tokenizer encode", ...): the leaves
all_commands() {
  local c s
  for c in $(subcommands); do
    local subs
    subs=$(subcommands "$c")
    if [ -z "$subs" ]; then
      echo "$c"
    else
      for s in $subs; do echo "$c $s"; done
    fi
  done
}

# each_help: writes $tmp/help/<command>.txt for every command
each_help() {
  mkdir -p "$tmp/help"
  local cmd
  while read -r cmd; do
    # shellcheck disable=SC2086
    "$axonn" $cmd --help >"$tmp/help/${cmd// /_}.txt" 2>&1 ||
      { cp "$tmp/help/${cmd// /_}.txt" "$tmp/out"; fail "axonn $cmd --help failed"; }
  done < <(all_commands)
  [ "$(ls "$tmp/help" | wc -l)" -ge 15 ] || fail "found only $(ls "$tmp/help" | wc -l) subcommands"
}

case $case_name in
  help_examples)
    each_help
    bad=""
    for f in "$tmp/help"/*.txt; do
      grep -Eq "^Examples?:$" "$f" && grep -Eq "^  axonn |^  mpirun .* axonn " "$f" || bad="$bad $(basename "$f" .txt)"
    done
    [ -z "$bad" ] || fail "--help without an example (a footer 'Example:' and a command line):$bad"
    echo "ok: every --help has an example" ;;
  help_defaults)
    each_help
    # "  --steps INT=50" has its default; "  --steps INT" does not (REQUIRED options have none)
    grep -EH "^  (-[a-z], ?)?--[a-z0-9-]+ (INT|UINT|FLOAT)(:[^ =]*)?( |$)" "$tmp/help"/*.txt \
      | grep -v "REQUIRED" >"$tmp/out" || true
    [ ! -s "$tmp/out" ] || fail "options that take a number and do not show their default"
    echo "ok: every numeric option shows its default" ;;
  flag_style)
    each_help
    grep -ohE "^  (-[a-zA-Z], ?)?--[^ =,]+" "$tmp/help"/*.txt | sed -E 's/^  (-[a-zA-Z], ?)?//' | sort -u >"$tmp/flags"
    grep -vE "^--[a-z0-9]+(-[a-z0-9]+)*$" "$tmp/flags" >"$tmp/out" || true
    [ ! -s "$tmp/out" ] || fail "flags not in the style --lower-case-words"
    echo "ok: $(wc -l <"$tmp/flags") flags, one style" ;;
  model_names)
    # the names each --help lists after "--model"
    names() { "$axonn" "$1" --help | tr '\n' ' ' | grep -oE -- "--model TEXT.*" |
              grep -oE "[A-Za-z0-9.-]+(\|[A-Za-z0-9.-]+)+" | head -1 | tr '|' '\n' | sort; }
    names train >"$tmp/train"
    names plan >"$tmp/plan"
    [ "$(wc -l <"$tmp/train")" -ge 10 ] || { cp "$tmp/train" "$tmp/out"; fail "no model list in train --help"; }
    diff "$tmp/train" "$tmp/plan" >"$tmp/out" || fail "train and plan list different model names"
    # and each name is accepted by both (train: --print-config validates the name later, so build its shape;
    # plan: its shape is resolved at once)
    while read -r m; do
      expect_error "." "$axonn" plan --model "$m" --gpus 0 >/dev/null
      expect_no_output "unknown --model"
      run "$axonn" train --model "$m" --print-config
    done <"$tmp/train"
    for alias in gpt2 gpt2-medium gpt2-large gpt2-xl; do
      run "$axonn" plan --model "$alias" --gpus 1 --batch-size 8 --seq-len 64 --machine perlmutter
    done
    echo "ok: $(wc -l <"$tmp/train") model names, the same in train and plan" ;;
  exit_codes_documented)
    doc=$src/docs/cli.md
    [ -f "$doc" ] || fail "no $doc"
    sed -n '/^## Exit codes/,/^## /p' "$doc" >"$tmp/section"
    [ -s "$tmp/section" ] || fail "$doc has no '## Exit codes' section"
    # the codes main.cpp and the subcommands return: fail_once(..., N), Runtime::exit(...) / abort(N), return N
    codes=$(grep -ohE "fail_once\([^;]*, ([0-9]+)\)|abort\(([0-9]+)\)|return ([0-9]+);|128 \+ " "$src"/tools/axonn/*.cpp |
            grep -oE "[0-9]+\)?;?$|128 \+ " | tr -d ');' | sed 's/128 + /128+N/' | sort -u)
    for code in $codes 0; do
      grep -qF "| \`$code\` |" "$tmp/section" || { cp "$tmp/section" "$tmp/out"; fail "exit code $code is not in $doc's table"; }
    done
    echo "ok: exit codes $(echo $codes | tr '\n' ' ')documented" ;;
  help_without_mpi)
    # A PML that does not exist makes every MPI start-up fail (MPI_Init aborts), as a broken launcher
    # environment or a failed singleton start would.
    export OMPI_MCA_pml=no_such_pml
    run "$axonn" --help
    grep -q "^Subcommands:" "$tmp/out" || fail "axonn --help lists no subcommands"
    run "$axonn" --version
    grep -q "^axonn " "$tmp/out" || fail "axonn --version does not print the version"
    run "$axonn" tokenizer decode --help
    grep -q "^Example:" "$tmp/out" || fail "axonn tokenizer decode --help has no example"
    expect_error "not expected: 3 --frobnicate" "$axonn" train --frobnicate 3
    # a command that runs does start MPI, so this environment does break it (the case tests something)
    expect_error "MPI_INIT|MPI_Init" "$axonn" plan --model gpt2 --gpus 1 --batch-size 8 --seq-len 64 \
      --machine perlmutter
    unset OMPI_MCA_pml
    # every rank parses alike; the launcher's rank 0 alone prints the error
    expect_once 2 "not expected: 3 --frobnicate" train --frobnicate 3
    echo "ok: help, version and flag errors without MPI" ;;
  *)
    echo "unknown case $case_name"
    exit 2 ;;
esac
echo "PASS $case_name"
