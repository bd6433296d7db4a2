// llama.cpp (node-llama-cpp's prebuilt CPU build) continues a prompt greedily from a GGUF file and prints,
// like `axonn generate --print-ids --print-logprobs`, a line of the new ids and a line of their
// log-probabilities. The KV cache is F32 (llama.cpp's F16 default moves the log-probabilities by ~1e-3), and
// flash attention is off (llama.cpp's CPU flash attention, on by default, moves them by ~1e-4).
// Usage: node greedy.mjs MODEL.gguf PROMPT_IDS MAX_NEW_TOKENS   (PROMPT_IDS: 1,2,3)
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [modelPath, promptText, maxText] = process.argv.slice(2);
if (!modelPath || !promptText || !maxText) {
  console.error("usage: node greedy.mjs MODEL.gguf PROMPT_IDS MAX_NEW_TOKENS");
  process.exit(2);
}
const prompt = promptText.split(",").map(Number);
const maxNew = Number(maxText);

const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const context = await model.createContext({
  contextSize: model.trainContextSize,
  batchSize: model.trainContextSize,
  threads: 1,  // one thread: the sums in one order
  flashAttention: false,
  experimentalKvCacheKeyType: "F32",
  experimentalKvCacheValueType: "F32",
});
const sequence = context.getSequence();
const ids = [];
const logprobs = [];
const eog = new Set([model.tokens.eos, model.tokens.eot].filter((t) => t != null));
for await (const out of sequence.evaluateWithMetadata(prompt, { confidence: true },
                                                       { temperature: 0, yieldEogToken: true })) {
  ids.push(out.token);
  logprobs.push(Math.log(out.confidence));
  if (ids.length >= maxNew || eog.has(out.token) || prompt.length + ids.length >= model.trainContextSize) break;
}
console.log(ids.join(","));
console.log(logprobs.map((x) => x.toPrecision(9)).join(","));
await context.dispose();
await model.dispose();
await llama.dispose();
