// The JavaScript side of bench/prepare_bench.py: GPT-2's encoder from the npm package gpt-3-encoder
// 1.1.4 (run by node) over the documents of a JSON array, timed around the encoding alone (the
// module's vocabulary loading is left out). Prints one JSON object: bytes, tokens, seconds.
// Usage: node js_encode_bench.js PACKAGE_DIR TEXTS.json
const path = require('path');
const fs = require('fs');
const { encode } = require(path.resolve(process.argv[2], 'Encoder.js'));
const texts = JSON.parse(fs.readFileSync(process.argv[3], 'utf-8'));
let bytes = 0, tokens = 0;
const t0 = process.hrtime.bigint();
for (const t of texts) {
  tokens += encode(t).length + 1;  // + the separator prepare writes before each document
  bytes += Buffer.byteLength(t, 'utf-8');
}
const seconds = Number(process.hrtime.bigint() - t0) / 1e9;
process.stdout.write(JSON.stringify({ bytes, tokens, seconds }) + '\n');
