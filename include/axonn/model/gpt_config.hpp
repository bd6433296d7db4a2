// model/gpt_config.hpp — the shape of a GPT-style model: GPT-2 or Llama (the family).
//
// GPT-2 (llm.c's): learned position embedding, LayerNorm, GELU MLP of 4C, biases, the LM head tied to
// the token embedding. Llama (Hugging Face's LlamaForCausalLM): RMSNorm, RoPE (rotate-half, rope_theta,
// optional llama3 rope_scaling), grouped-query attention (num_kv_heads), SwiGLU MLP of ffn_hidden, no
// biases, tied or untied embeddings. The parameters each family has are model/spec.hpp's.
//
//   model::GptConfig c = model::gpt_preset("llama-3.2-1b");
//   c.validate();                              // InvalidArgument naming the bad field
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

namespace axonn::model {

enum class Family { kGpt2, kLlama };
std::string_view family_name(Family f);  // "gpt2", "llama"
Family parse_family(std::string_view name);  // InvalidArgument for anything else

// Llama 3.1's `rope_scaling` of type "llama3" (factor 0: none): per RoPE frequency f with wavelength
// 2 pi / f, wavelengths below original/high_freq_factor are kept, above original/low_freq_factor
// divided by factor, and in between blended smoothly.
struct RopeScaling {
  double factor = 0.0;
  double low_freq_factor = 1.0;
  double high_freq_factor = 4.0;
  int original_max_position_embeddings = 8192;
  bool enabled() const { return factor > 0.0; }
  bool operator==(const RopeScaling&) const = default;
};

struct GptConfig {
  Family family = Family::kGpt2;
  int max_seq_len = 1024;        // maxT: positions (GPT-2's embedding rows; Llama's max_position_embeddings)
  int vocab_size = 50257;        // V
  int padded_vocab_size = 50304; // Vp >= V: the embedding/LM-head rows, padded for fast GEMMs
  int num_layers = 12;           // L
  int num_heads = 12;            // NH
  int channels = 768;            // C: the hidden size
  // Llama only (GPT-2 has NH KV heads, C/NH head size, 4C MLP, LayerNorm eps 1e-5, tied embeddings)
  int num_kv_heads = 0;          // KV heads of grouped-query attention (0: num_heads)
  int head_dim = 0;              // head size (0: channels / num_heads)
  int ffn_hidden = 0;            // SwiGLU's intermediate_size (0: 4 * channels)
  double rope_theta = 10000.0;
  RopeScaling rope_scaling;
  float norm_eps = 1e-5f;        // rms_norm_eps
  bool tied_embeddings = true;   // tie_word_embeddings
  // token ids of config.json (kept for a faithful round trip; -1 / empty: none)
  int bos_token_id = -1;
  std::vector<int> eos_token_ids;

  int kv_heads() const { return num_kv_heads > 0 ? num_kv_heads : num_heads; }
  int head_size() const { return head_dim > 0 ? head_dim : channels / num_heads; }
  int attention_width() const { return num_heads * head_size(); }  // q's features (GPT-2: C)
  int kv_width() const { return kv_heads() * head_size(); }        // k's and v's features
  int mlp_hidden() const { return ffn_hidden > 0 ? ffn_hidden : 4 * channels; }

  // Throws InvalidArgument naming the bad field and what to change.
  void validate() const;
  // Parameters (with the padded vocabulary): the sum of model_spec's tensors.
  int64_t num_parameters() const;
  std::string str() const;
  bool operator==(const GptConfig&) const = default;
};

// V rounded up to a multiple of `multiple` (llm.c: 128).
int pad_vocab(int vocab_size, int multiple = 128);

// The shape flags shared by `axonn train` and `axonn plan` (0 / empty: the base model's value):
// --layers --heads --kv-heads --channels --ffn --vocab --max-seq-len --rope-theta --tie-embeddings on|off.
struct ShapeOverrides {
  int layers = 0, heads = 0, kv_heads = 0, channels = 0, ffn = 0, vocab = 0, max_seq_len = 0;
  double rope_theta = 0.0;
  std::string tie_embeddings;  // "on", "off" or "" (the base model's)
  bool any() const;
};
// The base model with the overrides applied, validated. A new --heads or --channels makes the head size
// C/NH again (a preset's explicit head_dim would no longer fit); a vocabulary is padded to a multiple
// of 128. InvalidArgument naming the flag for a value the family cannot take (a GPT-2 has as many KV
// heads as heads, an MLP of 4C and a tied head; RoPE belongs to Llama).
GptConfig apply_shape(GptConfig base, const ShapeOverrides& o);

// Named presets: gpt2-124m, gpt2-350m, gpt2-774m, gpt2-1558m (OpenAI's GPT-2 family), gpt2-tiny (the
// shape of shared/reference/gpt2-tiny), 5B ... 175B (the GPT models of AxoNN's SC24 runs); tinyllama-1.1b, llama-3.2-1b, llama-2-7b, llama-3.1-8b,
// llama-3.1-70b, llama-3.1-405b (the shapes of their published config.json files), llama-124m (a
// GPT-2-124M-sized Llama for benchmarks) and llama-tiny (tests). Hugging Face's names gpt2,
// gpt2-medium, gpt2-large, gpt2-xl are aliases. Throws InvalidArgument for other names.
GptConfig gpt_preset(std::string_view name);
std::vector<std::string> gpt_preset_names();
// The names for a --help text, "gpt2-124m|gpt2-350m|...|llama-tiny (aliases: gpt2, gpt2-medium, ...)": every
// command that takes a model name (train, plan) takes these.
std::string gpt_preset_help();

}  // namespace axonn::model
