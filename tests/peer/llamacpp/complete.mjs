// llama.cpp (node-llama-cpp's prebuilt CPU build) continues a text prompt greedily from a GGUF file alone,
// through the tokenizer inside it, and prints the prompt and its continuation, as `axonn generate --prompt
// TEXT --temperature 0` prints them (it stops at the end-of-text or end-of-sequence token, not printed).
// Usage: node complete.mjs MODEL.gguf PROMPT MAX_NEW_TOKENS
import { getLlama, LlamaLogLevel } from "node-llama-cpp";

const [modelPath, prompt, maxText] = process.argv.slice(2);
if (!modelPath || prompt === undefined || !maxText) {
  console.error("usage: node complete.mjs MODEL.gguf PROMPT MAX_NEW_TOKENS");
  process.exit(2);
}
const llama = await getLlama({ gpu: false, build: "never", logLevel: LlamaLogLevel.error });
const model = await llama.loadModel({ modelPath, gpuLayers: 0 });
const context = await model.createContext({
  contextSize: model.trainContextSize, batchSize: model.trainContextSize, threads: 1, flashAttention: false,
  experimentalKvCacheKeyType: "F32", experimentalKvCacheValueType: "F32",
});
const sequence = context.getSequence();
const tokens = model.tokenize(prompt);
const out = [];
for await (const token of sequence.evaluate(tokens, { temperature: 0 })) {
  out.push(token);
  if (out.length >= Number(maxText) || tokens.length + out.length >= model.trainContextSize) break;
}
console.log(model.detokenize([...tokens, ...out]));
await context.dispose();
await model.dispose();
await llama.dispose();
