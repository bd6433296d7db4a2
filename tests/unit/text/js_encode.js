// The independent oracle: GPT-2's encoder from the npm package gpt-3-encoder 1.1.4, run by node.
// Usage: node js_encode.js PACKAGE_DIR TEXTS.json, where TEXTS.json is a JSON array of strings;
// prints one line per string: its token ids, comma-separated.
const path = require('path');
const fs = require('fs');
const { encode } = require(path.resolve(process.argv[2], 'Encoder.js'));
const texts = JSON.parse(fs.readFileSync(process.argv[3], 'utf-8'));
const out = texts.map(t => encode(t).join(','));
process.stdout.write(out.join('\n') + '\n');
