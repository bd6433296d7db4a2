// llama.cpp (node-llama-cpp's prebuilt CPU build) generates greedily from a GGUF file and reports, as one JSON
// line, what bench/generate_peer/generate_vs_llamacpp.sh sets beside `axonn generate`: the start (from the
// process's start to a context ready to prefill: node, the library, the model file and the context), the load
// (the model file and the context only: llama.cpp's own start, without node's), the prefill's seconds, the decode's tokens per second, and the ids. llama.cpp's own defaults otherwise (an F16 KV
// cache, its flash attention choice), as a user runs it.
// Usage: node llamacpp_generate.mjs NODE_MODULES MODEL.gguf PROMPT_IDS NEW_TOKENS THREADS
import path from "node:path";
import { performance } from "node:perf_hooks";
import { pathToFileURL } from "node:url";

const [modules, modelPath, promptText, newText, threadsText] = process.argv.slice(2);
if (!modules || !modelPath || !promptText || !newText || !threadsText) {
  console.error("usage: node llamacpp_generate.mjs NODE_MODULES MODEL.gguf PROMPT_IDS NEW_TOKENS THREADS");
  process.exit(2);
}
const { getLlama, LlamaLogLevel } = await import(
  pathToFileURL(path.resolve(modules, "node-llama-cpp", "dist", "index.js")).href);
const prompt = promptText.split(",").map(Number);
const newTokens = Number(newText);

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const loading = performance.now();
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const context = await model.createContext({
  contextSize: prompt.length + newTokens + 1,
  batchSize: prompt.length,
  threads: Number(threadsText),
});
const sequence = context.getSequence();
const ready = performance.now();  // ms since the process's start

const ids = [];
let first = 0;
for await (const token of sequence.evaluate(prompt, { temperature: 0 })) {
  if (ids.length === 0) first = performance.now();  // the prefill and the first token's sampling
  ids.push(token);
  if (ids.length >= newTokens) break;
}
const end = performance.now();
console.log(JSON.stringify({
  start_s: ready / 1000,
  load_s: (ready - loading) / 1000,
  prefill_s: (first - ready) / 1000,
  decode_tokens_per_s: ids.length > 1 ? (ids.length - 1) / ((end - first) / 1000) : 0,
  ids,
}));
await context.dispose();
await model.dispose();
await llama.dispose();
