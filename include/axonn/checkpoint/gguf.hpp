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
// Reading (GgufFile): any GGUF file of version 2 or 3, llama.cpp's and ollama's included, whatever its tensor
// types: the header, every metadata value, the tensor infos, validated against the file's size before any use
// (a crafted file is refused with what is wrong in it); the values of F32, F16, BF16 and Q8_0 tensors as floats.
// `axonn inspect` prints one. A `llama` or `gpt2` model in one (GgufModel) is a model source like an HF
// directory: its configuration, weights and tokenizer (`--init model.gguf`, `axonn convert --from`).
//
//   auto tok = text::load_tokenizer("runs/x/tokenizer.model");
//   checkpoint::save_gguf("model.gguf", cfg, params, checkpoint::GgufType::kF16, *tok);
//   checkpoint::GgufFile f("model.gguf");
//   std::vector<float> w = f.read_floats(*f.find_tensor("blk.0.ffn_up.weight"));
//   checkpoint::GgufModel m("model.gguf");   // m.config(), m.load(params), m.tokenizer()
#pragma once

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "axonn/checkpoint/atomic_file.hpp"
#include "axonn/checkpoint/hf.hpp"
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
// The float a half-precision number is (exact).
float f16_to_f32(uint16_t h);

// ggml's tensor types as GGUF files store them: the name ("Q4_K", "type 99" for one not known here), the
// values per block and the bytes per block (0, 0 for an id not known here). Checked against llama.cpp's
// ggml_blck_size and ggml_type_size (node-llama-cpp 3.21.1).
std::string ggml_type_name(uint32_t type);
struct GgmlTypeSize {
  uint64_t block = 0, bytes = 0;
};
GgmlTypeSize ggml_type_size(uint32_t type);

// One metadata value. Scalars in `scalar` (the integer types as int64_t, or uint64_t for u64; f32 and f64 as
// double); an array's items in `strings` (strings), `numbers` (numbers and bools) or neither (arrays of arrays,
// whose items are only counted).
struct GgufValue {
  uint32_t type = 0;        // GGUF's value type: 0 u8 ... 4 u32, 5 i32, 6 f32, 7 bool, 8 string, 9 array, 10-12 64-bit
  uint32_t item_type = 0;   // an array's item type
  uint64_t items = 0;       // an array's item count
  std::variant<std::monostate, int64_t, uint64_t, double, bool, std::string> scalar;
  std::vector<std::string> strings;
  std::vector<double> numbers;

  // The value as one line: 42, 1e-05, "llama", true; an array as [50257 strings: "!", "\"", "#", ...].
  std::string str(size_t max_items = 3) const;
  // The value as an integer or a number, if it is one (nullopt for strings, arrays, bools).
  std::optional<int64_t> integer() const;
  std::optional<double> number() const;
};

struct GgufTensorInfo {
  std::string name;
  std::vector<uint64_t> ne;   // dimensions, fastest first (ggml's ne)
  uint32_t type = 0;          // ggml type id
  uint64_t offset = 0;        // from the start of the file
  uint64_t bytes = 0;
  uint64_t elements() const;
  std::string shape_str() const;  // "[768, 50257]" in ggml's order
};

class GgufFile {
 public:
  // Reads and validates the header, metadata and tensor infos: magic, version 2 or 3, every count, string and
  // array within the file, keys and tensor names unique, general.alignment a power of two, each tensor's
  // dimensions (1 to 4, at least 1, rows whole blocks of its type, a type whose size is known), offsets aligned
  // and every tensor's bytes inside the file. IoError "GGUF file 'PATH': PROBLEM" otherwise.
  explicit GgufFile(std::string path);

  const std::string& path() const { return path_; }
  uint32_t version() const { return version_; }
  uint64_t alignment() const { return alignment_; }
  uint64_t data_offset() const { return data_offset_; }  // where the tensors' data starts
  uint64_t file_bytes() const { return file_bytes_; }
  // Metadata in file order.
  const std::vector<std::pair<std::string, GgufValue>>& metadata() const { return metadata_; }
  const GgufValue* find(std::string_view key) const;
  // Tensors in file order.
  const std::vector<GgufTensorInfo>& tensors() const { return tensors_; }
  const GgufTensorInfo* find_tensor(std::string_view name) const;
  // A tensor's values in file order (ggml's: ne[0] fastest): F32 as stored, F16 and BF16 widened exactly,
  // Q8_0 as its scale times each int8. InvalidArgument naming the type for any other.
  std::vector<float> read_floats(const GgufTensorInfo& t) const;
  // Values [first, first + count) of it, whole blocks of its type (Q8_0: multiples of 32).
  std::vector<float> read_floats(const GgufTensorInfo& t, uint64_t first, uint64_t count) const;

 private:
  std::string path_;
  uint32_t version_ = 0;
  uint64_t alignment_ = 32, data_offset_ = 0, file_bytes_ = 0;
  std::vector<std::pair<std::string, GgufValue>> metadata_;
  std::vector<GgufTensorInfo> tensors_;
};

// Whether the file starts with GGUF's magic.
bool looks_like_gguf(const std::string& path);

// A GGUF file of a `llama` or `gpt2` model as a model source (`--init`, `axonn convert --from`), whether
// axonn or llama.cpp's converter wrote it: the model's configuration from the architecture's keys, its weights
// in our layout (each head's Q and K rows back in HF's rotary order), its tokenizer. What axonn's model cannot
// be is refused with IoError naming the key or tensor: another architecture, rotary over part of a head, rope
// scaling other than Llama 3.1's, tensor types other than F32, F16, BF16 and Q8_0 (a quantised file such as
// Q4_K_M is checked here, before any weight is read), a tensor missing, of another shape, or left over.
// What a GGUF file does not record comes back as our defaults: extra end-of-sequence ids (it holds one),
// and the tokenizer's text normalisation (llama.cpp applies none to a SentencePiece vocabulary).
class GgufModel {
 public:
  explicit GgufModel(const std::string& path);

  const model::GptConfig& config() const { return config_; }
  const GgufFile& file() const { return file_; }
  // "GGUF llama (F16)": the architecture and the type of the token embedding (the matrices' type).
  std::string kind() const;
  // Every weight, as HfCheckpoint::load_ranges delivers them (the padded vocabulary rows as zeros), read by
  // blocks of about a million values (whole heads of Q and K), so that a rank keeping its shards holds no
  // whole tensor beside them; and into `params` (model::reserve_params layout for config()).
  void load_ranges(const TensorRangeSink& sink, Progress* progress = nullptr) const;
  void load(Arena& params, Progress* progress = nullptr) const;
  // The tokenizer the file holds (tokenizer.ggml.*: llama.cpp's "gpt2" byte-level BPE with the pre-tokenizers
  // "gpt-2" and "llama-bpe", or its "llama" SentencePiece vocabulary), the placeholder tokens a writer
  // padded the vocabulary with left out; nullopt if it holds none. IoError for one axonn cannot run.
  std::optional<text::TokenizerListing> tokenizer_listing() const;
  std::unique_ptr<text::Tokenizer> tokenizer() const;  // nullptr if it holds none

 private:
  GgufFile file_;
  model::GptConfig config_;
};

}  // namespace axonn::checkpoint
