// checkpoint/hf.hpp — Hugging Face checkpoints (safetensors) of GPT-2 and Llama models.
//
// A Hugging Face model is a directory holding config.json and either model.safetensors or shards
// model-0000N-of-0000M.safetensors listed by model.safetensors.index.json (its weight_map names the
// shard of every tensor); or, for GPT-2, a bare model.safetensors file. Tensors are F32 or BF16
// (widened exactly on reading). The names and layouts come from the model's tensor list
// (model/spec.hpp): GPT-2's GPT2Model names (h.{i}.attn.c_attn.weight, ...; Conv1D weights stored
// [in, out], the transpose of ours), Llama's LlamaForCausalLM names (model.layers.{i}.self_attn.q_proj
// .weight, ...; our fused q|k|v and gate|up linears are HF's separate tensors). HF keeps V vocabulary
// rows, we keep Vp (the padding rows are zero and are not written).
//
// The model's shape: config.json (GPT2LMHeadModel's n_layer, n_head, ...; LlamaForCausalLM's
// hidden_size, intermediate_size, num_hidden_layers, num_attention_heads, num_key_value_heads,
// head_dim, max_position_embeddings, rms_norm_eps, rope_theta, rope_scaling (type llama3), vocab_size,
// tie_word_embeddings, ...). A GPT-2 file alone is described by its tensor shapes and our
// __metadata__ (n_layer, n_head, ...), or n_head from a config.json beside it, or the caller.
//
//   checkpoint::save_hf_dir("hf/", cfg, params, DType::kBF16, /*max_shard_bytes=*/2e9);
//   checkpoint::HfCheckpoint hf("hf/");
//   model::GptConfig cfg = hf.config();
//   Arena full("full");  model::reserve_params(full, model::model_spec(cfg));  full.allocate();
//   hf.load(full);
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "axonn/checkpoint/safetensors.hpp"
#include "axonn/model/gpt_config.hpp"
#include "axonn/tensor/arena.hpp"
#include "axonn/text/tokenizer.hpp"

namespace axonn::checkpoint {

constexpr std::string_view kHfConfigName = "config.json";
constexpr std::string_view kHfWeightsName = "model.safetensors";
constexpr std::string_view kHfIndexName = "model.safetensors.index.json";
constexpr std::string_view kHfGenerationConfigName = "generation_config.json";

// Writes the model's full tensors (model::reserve_params layout for `config`) as one HF safetensors
// file, atomically, in `dtype` (F32, or BF16 rounded to nearest even). __metadata__: "format": "pt"
// (transformers requires it), padded_vocab_size (so that our files round-trip exactly), producer, and
// the model's shape (GPT-2: n_layer, n_head, n_embd, vocab_size, n_positions; Llama: "config", the
// config.json text). Padding rows of the vocabulary tensors are not written (a warning if non-zero).
// `progress` (here and in save_hf_dir), if any, counts the tensors' bytes written.
FileDigest save_hf_safetensors(const std::string& path, const model::GptConfig& config, const Arena& params,
                               DType dtype = DType::kF32, Progress* progress = nullptr);

// Writes an HF model directory (created if needed): config.json, generation_config.json and
// model.safetensors, or, when
// max_shard_bytes > 0 and the weights are larger, shards of at most that size (cut between tensors;
// a larger tensor gets a shard of its own) with model.safetensors.index.json. Each file atomically.
// A checkpoint directory is refused (check_hf_dir_output).
void save_hf_dir(const std::string& dir, const model::GptConfig& config, const Arena& params,
                 DType dtype = DType::kF32, uint64_t max_shard_bytes = 0, Progress* progress = nullptr);

// Refuses (InvalidArgument) `dir` as a Hugging Face model directory to write when it is a checkpoint directory
// (holds_checkpoints): the model would be read in the checkpoints' place (model_source.hpp). Writers call it
// before they read their input.
void check_hf_dir_output(const std::string& dir);

// config.json for transformers (GPT2LMHeadModel or LlamaForCausalLM), and back. Parsing checks the
// keys the model needs and refuses what axonn cannot run (another architecture, biases, another
// activation or rope_scaling type): IoError naming `where` and the key.
std::string hf_config_json(const model::GptConfig& config, DType dtype = DType::kF32);
model::GptConfig parse_hf_config_json(std::string_view text, const std::string& where);
// generation_config.json for transformers: the model's special ids (bos, eos) and the library's defaults
// for the rest ("_from_model_config": true), as transformers writes one for a model without its own.
std::string hf_generation_config_json(const model::GptConfig& config);

// A tokenizer with more ids than the model is another model's: InvalidArgument naming both sizes and
// --tokenizer. (Fewer is fine: a vocabulary padded for the model, or ids the tokenizer never makes.)
void check_tokenizer_fits(const text::Tokenizer& tok, const model::GptConfig& config);

// Writes the tokenizer `name_or_path` (as text::load_tokenizer takes it) into an HF model directory, each
// file atomically, under Hugging Face's names: tokenizer.json (with its tokenizer_config.json), GPT-2's
// vocab.json + merges.txt (encoder.json and vocab.bpe renamed; the same formats), or tokenizer.model; and,
// where the tokenizer has none, a tokenizer_config.json of transformers' conventions: tokenizer_class
// (PreTrainedTokenizerFast, GPT2Tokenizer or LlamaTokenizer), the special tokens' text (bos_token, eos_token,
// unk_token), model_max_length (the model's context). check_tokenizer_fits first.
void save_hf_tokenizer(const std::string& dir, const model::GptConfig& config, const std::string& name_or_path);
// The same for a tokenizer that has no files of its own (one read from a GGUF file): its listing written as
// tokenizer.json or tokenizer.model (text::tokenizer_file_from_listing), and a tokenizer_config.json.
void save_hf_tokenizer(const std::string& dir, const model::GptConfig& config, const text::Tokenizer& tok);
// The same for the files `tok` is made of, given as {name, contents} (names as text::tokenizer_files gives them).
void save_hf_tokenizer_files(const std::string& dir, const model::GptConfig& config, const text::Tokenizer& tok,
                             const std::vector<std::pair<std::string, std::string>>& files);
std::string hf_tokenizer_config_json(const model::GptConfig& config, const text::Tokenizer& tok,
                                     const std::string& tokenizer_class);

// True for a directory holding config.json and model.safetensors or model.safetensors.index.json.
bool is_hf_model_dir(const std::string& path);

// Receives a model's weights by ranges as a reader delivers them (HfCheckpoint::load_ranges, GgufModel's):
// elements [first, first + count) of the full slice of tensor t (model_spec(config).params[t]) of that layer
// (layer 0 for a tensor that is not per-layer); `values` is valid during the call.
using TensorRangeSink = std::function<void(int t, int layer, int64_t first, int64_t count, const float* values)>;

// An opened HF checkpoint: a directory (is_hf_model_dir) or a safetensors file (memory-mapped,
// validated, and its model's shape read) — nothing else is read until load().
class HfCheckpoint {
 public:
  // num_heads: for GPT-2 files that say nothing about their heads (0: from the file or config.json).
  // Throws IoError naming the file and what is missing or inconsistent.
  explicit HfCheckpoint(const std::string& path, int num_heads = 0);
  ~HfCheckpoint();
  HfCheckpoint(const HfCheckpoint&) = delete;
  HfCheckpoint& operator=(const HfCheckpoint&) = delete;

  const model::GptConfig& config() const { return config_; }
  const std::string& path() const { return path_; }
  // "HF GPT-2 safetensors", "HF Llama safetensors (3 shards)".
  std::string kind() const;
  // The safetensors files, in shard order.
  const std::vector<std::unique_ptr<SafetensorsFile>>& files() const { return files_; }

  // Reads every tensor into `params` (model::reserve_params layout for config()), joining HF's
  // separate parts, transposing Conv1D weights, zeroing the padding rows. Skips what HF files hold
  // besides the weights (GPT-2's attn.bias buffers, Llama's rotary_emb.inv_freq) and a tied LM head
  // equal to the token embedding; any other tensor, a missing one, a wrong shape or dtype is an IoError.
  // `progress`, if any, counts the arena's bytes filled.
  void load(Arena& params, Progress* progress = nullptr) const;
  // The same checks and conversions, delivered by ranges: sink(t, layer, first, count, values) receives the
  // values of elements [first, first + count) of the full slice of tensor t (model_spec(config()).params[t])
  // of that layer (layer 0 for a tensor that is not per-layer); `values` is valid during the call. Every
  // element of every slice is delivered once (the padded vocabulary rows as zeros). At most one piece (an
  // HF tensor, a million elements for most) is held at a time, and the mapped file's pages are released
  // once read: a model that keeps only its shards (each rank of a grid) loads without a full copy.
  using RangeSink = TensorRangeSink;
  void load_ranges(const RangeSink& sink, Progress* progress = nullptr) const;

 private:
  // The tensor called `name` (GPT-2 files may prefix "transformer."), or null.
  const TensorInfo* find(const std::string& name, const SafetensorsFile** file) const;

  std::string path_;
  model::GptConfig config_;
  std::vector<std::unique_ptr<SafetensorsFile>> files_;
};

}  // namespace axonn::checkpoint
