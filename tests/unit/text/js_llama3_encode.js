// The Llama 3 oracle: llama3-tokenizer-js 1.2.0's own encoder (a JavaScript BPE with a priority queue,
// independent of axonn's), run by node. Usage: node js_llama3_encode.js PACKAGE_DIR TEXTS.json; prints
// one line per string: its ids without BOS/EOS, comma-separated.
const path = require('path');
const fs = require('fs');
const { llama3Tokenizer } = require(path.resolve(process.argv[2], 'bundle/commonjs-llama3-tokenizer-with-baked-data.cjs'));
const texts = JSON.parse(fs.readFileSync(process.argv[3], 'utf-8'));
const out = texts.map(t => llama3Tokenizer.encode(t, { bos: false, eos: false }).join(','));
process.stdout.write(out.join('\n') + '\n');
