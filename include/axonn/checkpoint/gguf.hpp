// checkpoint/gguf.hpp — GGUF files (ggml's format, llama.cpp and ollama read them) of GPT-2 and Llama models.
//
// Written from ggml's docs/gguf.md (version 3): the header ("GGUF", version, tensor and key counts), typed
// key-value metadata, the tensor infos (name, dimensions fastest first, ggml type, offset), then the
// tensors' data, each aligned to general.alignment (32). The keys, tensor names and layouts are llama.cpp's
// for its `llama` and `gpt2` architectures (docs/export.md lists them):
//   - metadata: general.architecture, <arch>.context_length, embedding_length, block_count,
//     feed_forward_length, attention.head_count (head_count_kv, key_length, value_length for Llama),
//     attention.layer_norm_rms_epsilon (Llama) or layer_norm_epsilon (GPT-2), rope.freq_base and
//     rope.dimension_count (Llama), vocab_size; Llama 3.1's rope scaling as the tensor rope_freqs.weight
//     (the divisor of each rotary frequency), as llama.cpp's converter writes it;
//   - the tokenizer: tokenizer.ggml.model "gpt2" (byte-level BPE: tokens, token_type, merges, pre) or
//     "llama" (SentencePiece: tokens, scores, token_type), bos/eos ids; a model with more ids than the
//     tokenizer gets "[PAD<id>]" tokens for the rest, a tokenizer with more ids than the model is refused;
//   - tensors: token_embd, position_embd (GPT-2), blk.<i>.attn_norm, attn_q/attn_k/attn_v (Llama) or
//     attn_qkv (GPT-2), attn_output, ffn_norm, ffn_gate (Llama), ffn_up, ffn_down, output_norm, output
//     (an untied Llama's LM head; tied models leave it out and llama.cpp uses token_embd). Matrices are
//     stored [out, in] row-major (ggml's ne = {in, out}); the vocabulary's padding rows are left out.
// Rotary layout: our Llama, like Hugging Face's, rotates the channel pairs (i, i + d/2) of each head;
// llama.cpp's `llama` architecture rotates adjacent pairs (2i, 2i + 1). So each head's rows of the Q and K
// weights are interleaved (row 2i + s of the file is row s*d/2 + i of ours), which leaves q.k unchanged.
//
//   auto tok = text::load_tokenizer("runs/x/tokenizer.model");
//   checkpoint::save_gguf("model.gguf", cfg, params, checkpoint::GgufType::kF16, *tok);
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/core/progress.hpp"
#include "axonn/model/gpt_config.hpp"
#include "axonn/tensor/arena.hpp"
#include "axonn/text/tokenizer.hpp"

namespace axonn::checkpoint {

// The ggml types the matrices are stored in (norms, biases and rope_freqs stay F32, as llama.cpp's
// converter keeps 1-D tensors). Values are ggml's type ids.
enum class GgufType : uint32_t { kF32 = 0, kF16 = 1, kQ8_0 = 8, kBF16 = 30 };
// "f32", "f16", "bf16", "q8_0" (also "fp32", "fp16"); InvalidArgument naming the choices otherwise.
GgufType parse_gguf_type(std::string_view name);
std::string_view gguf_type_name(GgufType type);

// Writes the model's full tensors (model::reserve_params layout for `config`) and `tokenizer` as one GGUF
// file, atomically. `name` is general.name. InvalidArgument if the tokenizer cannot be written (llm.c's
// decode-only file, a pre-tokenizer llama.cpp does not know) or has more ids than the model (naming both
// sizes). Q8_0 stores a matrix in blocks of 32 values of each row (an f16 scale and 32 int8s); a matrix
// whose rows are not a multiple of 32 long stays F16. `progress`, if any, counts the tensors' bytes written.
FileDigest save_gguf(const std::string& path, const model::GptConfig& config, const Arena& params, GgufType type,
                     const text::Tokenizer& tokenizer, const std::string& name = "axonn",
                     Progress* progress = nullptr);

// The half-precision (IEEE binary16) bits of a float, rounded to nearest even; overflow gives infinity.
uint16_t f32_to_f16(float f);

}  // namespace axonn::checkpoint
