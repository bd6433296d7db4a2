#!/usr/bin/env bash
# Optional: Llama 3's tokenizer, for the Llama 3 parity test (docs/text.md). Fetches the npm package
# llama3-tokenizer-js 1.2.0 (MIT code; its baked-in data is Meta's Llama 3 vocabulary and merges, under
# the Llama 3 licence) with `npm pack`, checks the tarball's sha256, and writes DEST/tokenizer.json (a
# Hugging Face tokenizer.json built from the package's data: Llama 3's Split regex and ByteLevel,
# ignore_merges, the 256 special tokens, BOS <|begin_of_text|>) beside the package itself, whose own
# JavaScript encoder is the test's oracle. Not run by install-deps.sh.
#
#   scripts/fetch-llama3-tokenizer.sh [DEST]
#
# DEST defaults to /usr/local/share/axonn/llama3 as root, else ${XDG_CACHE_HOME:-$HOME/.cache}/axonn/llama3.
set -euo pipefail
dest=${1:-$(bash "$(dirname "$0")/share-dir.sh" llama3)}
if [ -f "$dest/tokenizer.json" ] && [ -d "$dest/package" ]; then
  echo "fetch-llama3-tokenizer: $dest already holds it"
  exit 0
fi
command -v npm >/dev/null && command -v node >/dev/null ||
  { echo "fetch-llama3-tokenizer: needs npm and node" >&2; exit 1; }
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
if ! (cd "$work" && npm pack llama3-tokenizer-js@1.2.0 >"$work/npm.log" 2>&1); then
  echo "fetch-llama3-tokenizer: \`npm pack llama3-tokenizer-js@1.2.0\` failed:" >&2
  cat "$work/npm.log" >&2
  exit 1
fi
echo "51084690c7239708a3eb6adead1173bfd61b1f4d31cb0b8487e12ba466346ff0  $work/llama3-tokenizer-js-1.2.0.tgz" |
  sha256sum --check --status || { echo "fetch-llama3-tokenizer: the tarball's sha256 is not the expected one" >&2; exit 1; }
mkdir -p "$work/out"
tar -xzf "$work/llama3-tokenizer-js-1.2.0.tgz" -C "$work/out"
node - "$work/out" <<'JS'
const fs = require('fs');
const dir = process.argv[2];
const { llama3Tokenizer: t } = require(dir + '/package/bundle/commonjs-llama3-tokenizer-with-baked-data.cjs');
const vocab = {};
for (let i = 0; i < 128000; i++) vocab[t.vocabById[i]] = i;
const merges = Array.from(t.merges.entries()).sort((a, b) => a[1] - b[1]).map(e => e[0]);
const added = [];
for (let i = 128000; i < t.vocabById.length; i++) added.push({ id: i, content: t.vocabById[i], special: true });
// Llama 3's pre-tokenizer regex (Meta's tokenizer.py pat_str; the one the package starts from)
const pattern = "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|\\s+(?!\\S)|\\s+";
fs.writeFileSync(dir + '/tokenizer.json', JSON.stringify({
  version: '1.0', added_tokens: added, normalizer: null,
  pre_tokenizer: { type: 'Sequence', pretokenizers: [
    { type: 'Split', pattern: { Regex: pattern }, behavior: 'Isolated', invert: false },
    { type: 'ByteLevel', add_prefix_space: false, trim_offsets: true, use_regex: false }] },
  post_processor: { type: 'TemplateProcessing', single: [
    { SpecialToken: { id: '<|begin_of_text|>', type_id: 0 } }, { Sequence: { id: 'A', type_id: 0 } }] },
  decoder: { type: 'ByteLevel' },
  model: { type: 'BPE', ignore_merges: true, vocab, merges } }));
JS
mkdir -p "$(dirname "$dest")"
rm -rf "$dest.tmp"
mv "$work/out" "$dest.tmp"
rm -rf "$dest"
mv "$dest.tmp" "$dest"
echo "fetch-llama3-tokenizer: Llama 3's tokenizer.json (from llama3-tokenizer-js 1.2.0, sha256 checked) in $dest"
