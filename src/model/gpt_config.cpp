#include "axonn/model/gpt_config.hpp"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <utility>

#include "axonn/core/error.hpp"
#include "axonn/core/spelling.hpp"
#include "axonn/model/spec.hpp"

namespace axonn::model {

std::string_view family_name(Family f) { return f == Family::kLlama ? "llama" : "gpt2"; }

Family parse_family(std::string_view name) {
  if (name == "gpt2") return Family::kGpt2;
  if (name == "llama") return Family::kLlama;
  throw InvalidArgument("unknown model family '" + std::string(name) + "'; use gpt2 or llama");
}

int pad_vocab(int vocab_size, int multiple) { return (vocab_size + multiple - 1) / multiple * multiple; }

namespace {
// The largest size of any dimension of a model (layers, channels, vocabulary, sequence, heads' widths)
// and its largest parameter count: far above any real model, and low enough that every width and
// element count derived from a config fits its type.
constexpr int kMaxModelSize = 1 << 24;
constexpr double kMaxModelParameters = 1e15;
}  // namespace

void GptConfig::validate() const {
  // Bounds first, so that what the checks below and model_spec derive (4C, NH x head size, the tensors'
  // element counts) cannot overflow: a config read from a file can hold any int (found by fuzz_llmc_model:
  // C = 982582272 overflowed 4 * C). Far above any real model (Llama 3.1 405B: C 16384, V 128256).
  for (const auto& [value, what] : {std::pair{num_layers, "layers"}, {num_heads, "heads"}, {channels, "channels"},
                                    {vocab_size, "vocabulary size"}, {padded_vocab_size, "padded vocabulary"},
                                    {max_seq_len, "max sequence length"}, {num_kv_heads, "num_key_value_heads"},
                                    {head_dim, "head_dim"}, {ffn_hidden, "intermediate_size"}})
    AXONN_CHECK_ARG(value <= kMaxModelSize, "the model's ", what, " is ", value, ", above the ", kMaxModelSize,
                    " axonn allows");
  AXONN_CHECK_ARG(num_layers > 0, "the model needs at least one layer (--layers), got ", num_layers);
  AXONN_CHECK_ARG(num_heads > 0, "the model needs at least one head (--heads), got ", num_heads);
  AXONN_CHECK_ARG(channels > 0, "channels (--channels) must be positive, got ", channels);
  AXONN_CHECK_ARG(vocab_size > 0, "vocabulary size (--vocab) must be positive, got ", vocab_size);
  AXONN_CHECK_ARG(max_seq_len > 0, "max sequence length (--max-seq-len) must be positive, got ", max_seq_len);
  AXONN_CHECK_ARG(padded_vocab_size >= vocab_size, "padded vocabulary ", padded_vocab_size,
                  " is smaller than the vocabulary ", vocab_size);
  AXONN_CHECK_ARG(head_dim > 0 || channels % num_heads == 0, "channels ", channels, " are not divisible by heads ",
                  num_heads, "; choose --channels a multiple of --heads");
  // the widths and the parameter count, in floating point (an overestimate: every tensor of model_spec)
  const double hs = head_dim > 0 ? head_dim : channels / num_heads, A = num_heads * hs, KV = kv_heads() * hs;
  AXONN_CHECK_ARG(A <= kMaxModelSize && KV <= kMaxModelSize, "the attention is ", A,
                  " features wide (heads x head size), above the ", kMaxModelSize, " axonn allows");
  const double C = channels, F = ffn_hidden > 0 ? ffn_hidden : 4.0 * C;
  const double params = 2.0 * padded_vocab_size * C + double(max_seq_len) * C + 2.0 * C +
                        double(num_layers) * (C * (A + 2 * KV) + A * C + 3 * C * F + A + 2 * KV + 2 * F + 8 * C);
  AXONN_CHECK_ARG(params <= kMaxModelParameters, "the model has about ", params, " parameters, above the ",
                  kMaxModelParameters, " axonn allows: check its sizes");
  if (family == Family::kGpt2) {
    AXONN_CHECK_ARG(kv_heads() == num_heads && head_size() * num_heads == channels && mlp_hidden() == 4 * channels &&
                        tied_embeddings && !rope_scaling.enabled(),
                    "a GPT-2 model has as many KV heads as heads, C/NH channels per head, an MLP of 4C and the "
                    "LM head tied to the token embedding; use the llama family for other shapes");
    return;
  }
  AXONN_CHECK_ARG(num_kv_heads >= 0 && num_heads % kv_heads() == 0, "num_key_value_heads ", kv_heads(),
                  " does not divide the ", num_heads, " attention heads; grouped-query attention shares each KV "
                  "head among an equal number of query heads");
  AXONN_CHECK_ARG(head_size() > 0 && head_size() % 2 == 0, "head size ", head_size(),
                  " is odd; RoPE rotates the two halves of each head: choose an even head_dim");
  AXONN_CHECK_ARG(ffn_hidden >= 0 && mlp_hidden() > 0, "intermediate_size must be positive, got ", ffn_hidden);
  AXONN_CHECK_ARG(rope_theta > 0, "rope_theta must be positive, got ", rope_theta);
  AXONN_CHECK_ARG(norm_eps > 0, "rms_norm_eps must be positive, got ", norm_eps);
  if (rope_scaling.enabled())
    AXONN_CHECK_ARG(rope_scaling.factor >= 1 && rope_scaling.low_freq_factor > 0 &&
                        rope_scaling.high_freq_factor > rope_scaling.low_freq_factor &&
                        rope_scaling.original_max_position_embeddings > 0,
                    "rope_scaling (llama3) needs factor >= 1, 0 < low_freq_factor < high_freq_factor and "
                    "original_max_position_embeddings > 0; got factor ", rope_scaling.factor, ", low ",
                    rope_scaling.low_freq_factor, ", high ", rope_scaling.high_freq_factor, ", original ",
                    rope_scaling.original_max_position_embeddings);
}

int64_t GptConfig::num_parameters() const { return model_spec(*this).num_parameters(); }

std::string GptConfig::str() const {
  std::string s = std::string(family == Family::kLlama ? "llama " : "") + "L=" + std::to_string(num_layers) +
                  " NH=" + std::to_string(num_heads);
  if (family == Family::kLlama) {
    s += " KV=" + std::to_string(kv_heads());
    if (head_dim > 0) s += " HS=" + std::to_string(head_dim);
  }
  s += " C=" + std::to_string(channels);
  if (family == Family::kLlama) s += " FFN=" + std::to_string(mlp_hidden());
  s += " V=" + std::to_string(vocab_size) + " (padded " + std::to_string(padded_vocab_size) +
       ") maxT=" + std::to_string(max_seq_len);
  if (family == Family::kLlama) {
    char theta[32];
    std::snprintf(theta, sizeof theta, "%g", rope_theta);
    s += std::string(" theta=") + theta;
    if (rope_scaling.enabled()) {
      std::snprintf(theta, sizeof theta, "%g", rope_scaling.factor);
      s += std::string(" llama3-scaling=") + theta;
    }
    s += tied_embeddings ? " tied" : " untied";
  }
  return s;
}

namespace {

struct Preset {
  const char* name;
  int layers, heads, channels, vocab, max_seq_len;
};
constexpr Preset kGpt2Presets[] = {
    {"gpt2-124m", 12, 12, 768, 50257, 1024},   {"gpt2-350m", 24, 16, 1024, 50257, 1024},
    {"gpt2-774m", 36, 20, 1280, 50257, 1024},  {"gpt2-1558m", 48, 25, 1600, 50257, 1024},
    {"gpt2-tiny", 2, 4, 64, 500, 64},
    // the GPT models of AxoNN's SC24 Perlmutter runs (spec §7.2): GPT-2 blocks, vocabulary 50304, 2048 positions
    {"5B", 24, 32, 4096, 50304, 2048},     {"10B", 32, 40, 5120, 50304, 2048},    {"20B", 32, 56, 7168, 50304, 2048},
    {"40B", 38, 72, 9216, 50304, 2048},    {"50B", 48, 72, 9216, 50304, 2048},    {"60B", 56, 72, 9216, 50304, 2048},
    {"80B", 42, 96, 12288, 50304, 2048},   {"100B", 53, 96, 12288, 50304, 2048},  {"160B", 84, 96, 12288, 50304, 2048},
    {"175B", 96, 96, 12288, 50304, 2048},
};
// Hugging Face's names of the same models (what `axonn plan` calls them): either name works anywhere.
constexpr std::pair<const char*, const char*> kAliases[] = {
    {"gpt2", "gpt2-124m"}, {"gpt2-medium", "gpt2-350m"}, {"gpt2-large", "gpt2-774m"}, {"gpt2-xl", "gpt2-1558m"}};

// The Llama family, from the models' published config.json (meta-llama/*, TinyLlama/TinyLlama-1.1B-*).
struct LlamaPreset {
  const char* name;
  int layers, heads, kv_heads, head_dim, channels, ffn, vocab, max_seq_len;
  double theta, scaling_factor;  // llama3 rope_scaling factor, 0: none
  bool tied;
  int bos, eos;
};
constexpr LlamaPreset kLlamaPresets[] = {
    {"tinyllama-1.1b", 22, 32, 4, 0, 2048, 5632, 32000, 2048, 1e4, 0, false, 1, 2},
    {"llama-3.2-1b", 16, 32, 8, 64, 2048, 8192, 128256, 131072, 5e5, 32, true, 128000, 128001},
    {"llama-2-7b", 32, 32, 32, 0, 4096, 11008, 32000, 4096, 1e4, 0, false, 1, 2},
    {"llama-3.1-8b", 32, 32, 8, 0, 4096, 14336, 128256, 131072, 5e5, 8, false, 128000, 128001},
    {"llama-3.1-70b", 80, 64, 8, 0, 8192, 28672, 128256, 131072, 5e5, 8, false, 128000, 128001},
    {"llama-3.1-405b", 126, 128, 8, 0, 16384, 53248, 128256, 131072, 5e5, 8, false, 128000, 128001},
    // GPT-2 124M's size as a Llama (12 layers of C=768, 3 query heads per KV head, SwiGLU of 2048,
    // untied 32000-token vocabulary): 124.7M parameters, for bench/gpt2_step
    {"llama-124m", 12, 12, 4, 0, 768, 2048, 32000, 1024, 1e4, 0, false, 1, 2},
    // the tests' small Llama (the size of gpt2-tiny)
    {"llama-tiny", 2, 4, 2, 0, 64, 176, 500, 64, 1e4, 0, false, -1, -1},
};

}  // namespace

bool ShapeOverrides::any() const {
  return layers || heads || kv_heads || channels || ffn || vocab || max_seq_len || rope_theta != 0.0 ||
         !tie_embeddings.empty();
}

GptConfig apply_shape(GptConfig c, const ShapeOverrides& o) {
  for (const auto& [value, flag] : {std::pair{o.layers, "--layers"}, {o.heads, "--heads"}, {o.kv_heads, "--kv-heads"},
                                    {o.channels, "--channels"}, {o.ffn, "--ffn"}, {o.vocab, "--vocab"},
                                    {o.max_seq_len, "--max-seq-len"}})
    AXONN_CHECK_ARG(value >= 0, flag, " must be positive, got ", value);
  AXONN_CHECK_ARG(o.rope_theta >= 0.0 && std::isfinite(o.rope_theta), "--rope-theta must be positive, got ",
                  o.rope_theta);
  AXONN_CHECK_ARG(o.tie_embeddings.empty() || o.tie_embeddings == "on" || o.tie_embeddings == "off",
                  "--tie-embeddings takes on or off, got '", o.tie_embeddings, "'");
  const bool gpt2 = c.family == Family::kGpt2;
  AXONN_CHECK_ARG(!gpt2 || (!o.kv_heads && !o.ffn && o.rope_theta == 0.0 && o.tie_embeddings != "off"),
                  "--kv-heads, --ffn, --rope-theta and --tie-embeddings off shape a Llama; a GPT-2 has as many KV "
                  "heads as heads, an MLP of 4C, learned positions and its LM head tied to the token embedding: "
                  "use a llama model (--model llama-tiny, ...) for other shapes");
  if (o.layers) c.num_layers = o.layers;
  if (o.heads) c.num_heads = o.heads;
  if (o.channels) c.channels = o.channels;
  if (o.heads || o.channels) c.head_dim = 0;  // C/NH again
  if (o.kv_heads) c.num_kv_heads = o.kv_heads;
  if (o.ffn) c.ffn_hidden = o.ffn;
  if (o.max_seq_len) c.max_seq_len = o.max_seq_len;
  if (o.rope_theta != 0.0) c.rope_theta = o.rope_theta;
  if (!o.tie_embeddings.empty()) c.tied_embeddings = o.tie_embeddings == "on";
  if (o.vocab) {
    // padded to a multiple of 128 in an int: beyond this it would overflow
    constexpr int kMaxVocab = INT32_MAX / 128 * 128;
    AXONN_CHECK_ARG(o.vocab <= kMaxVocab, "--vocab ", o.vocab, " is too large: at most ", kMaxVocab);
    c.vocab_size = o.vocab;
    c.padded_vocab_size = pad_vocab(o.vocab);
  }
  c.validate();
  return c;
}

GptConfig gpt_preset(std::string_view name) {
  for (const auto& [alias, preset] : kAliases)
    if (name == alias) name = preset;
  for (const Preset& p : kGpt2Presets)
    if (name == p.name) {
      GptConfig c;
      c.num_layers = p.layers;
      c.num_heads = p.heads;
      c.channels = p.channels;
      c.vocab_size = p.vocab;
      c.padded_vocab_size = pad_vocab(p.vocab);
      c.max_seq_len = p.max_seq_len;
      return c;
    }
  for (const LlamaPreset& p : kLlamaPresets)
    if (name == p.name) {
      GptConfig c;
      c.family = Family::kLlama;
      c.num_layers = p.layers;
      c.num_heads = p.heads;
      c.num_kv_heads = p.kv_heads;
      c.head_dim = p.head_dim;
      c.channels = p.channels;
      c.ffn_hidden = p.ffn;
      c.vocab_size = p.vocab;
      c.padded_vocab_size = pad_vocab(p.vocab);
      c.max_seq_len = p.max_seq_len;
      c.rope_theta = p.theta;
      if (p.scaling_factor > 0) c.rope_scaling = {p.scaling_factor, 1.0, 4.0, 8192};
      c.tied_embeddings = p.tied;
      c.bos_token_id = p.bos;
      if (p.eos >= 0) c.eos_token_ids = {p.eos};
      return c;
    }
  std::vector<std::string> names = gpt_preset_names();
  for (const auto& [alias, preset] : kAliases) names.push_back(alias);
  std::string known;
  for (const std::string& n : names) known += (known.empty() ? "" : ", ") + n;
  const std::optional<std::string> near = nearest_word(std::string(name), names);
  throw InvalidArgument("unknown model '" + std::string(name) + "'; " + (near ? "did you mean " + *near + "? " : "") +
                        "known models: " + known);
}

std::vector<std::string> gpt_preset_names() {
  std::vector<std::string> v;
  for (const Preset& p : kGpt2Presets) v.emplace_back(p.name);
  for (const LlamaPreset& p : kLlamaPresets) v.emplace_back(p.name);
  return v;
}

std::string gpt_preset_help() {
  std::string names, aliases;
  for (const std::string& n : gpt_preset_names()) names += (names.empty() ? "" : "|") + n;
  for (const auto& [alias, preset] : kAliases) aliases += std::string(aliases.empty() ? "" : ", ") + alias;
  return names + " (aliases: " + aliases + ")";
}

}  // namespace axonn::model
