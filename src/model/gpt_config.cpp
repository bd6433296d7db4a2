#include "axonn/model/gpt_config.hpp"

#include "axonn/core/error.hpp"

#include <utility>

namespace axonn::model {

int pad_vocab(int vocab_size, int multiple) { return (vocab_size + multiple - 1) / multiple * multiple; }

void GptConfig::validate() const {
  AXONN_CHECK_ARG(num_layers > 0, "the model needs at least one layer (--layers), got ", num_layers);
  AXONN_CHECK_ARG(num_heads > 0, "the model needs at least one head (--heads), got ", num_heads);
  AXONN_CHECK_ARG(channels > 0, "channels (--channels) must be positive, got ", channels);
  AXONN_CHECK_ARG(vocab_size > 0, "vocabulary size (--vocab) must be positive, got ", vocab_size);
  AXONN_CHECK_ARG(max_seq_len > 0, "max sequence length (--max-seq-len) must be positive, got ", max_seq_len);
  AXONN_CHECK_ARG(channels % num_heads == 0, "channels ", channels, " are not divisible by heads ", num_heads,
                  "; choose --channels a multiple of --heads");
  AXONN_CHECK_ARG(padded_vocab_size >= vocab_size, "padded vocabulary ", padded_vocab_size,
                  " is smaller than the vocabulary ", vocab_size);
}

int64_t GptConfig::num_parameters() const {
  int64_t C = channels, L = num_layers;
  return (int64_t)padded_vocab_size * C + (int64_t)max_seq_len * C  // wte, wpe
         + L * (2 * C + 3 * C * C + 3 * C + C * C + C + 2 * C + 4 * C * C + 4 * C + 4 * C * C + C)  // blocks
         + 2 * C;  // final LayerNorm
}

std::string GptConfig::str() const {
  return "L=" + std::to_string(num_layers) + " NH=" + std::to_string(num_heads) + " C=" + std::to_string(channels) +
         " V=" + std::to_string(vocab_size) + " (padded " + std::to_string(padded_vocab_size) +
         ") maxT=" + std::to_string(max_seq_len);
}

namespace {
struct Preset {
  const char* name;
  int layers, heads, channels, vocab, max_seq_len;
};
constexpr Preset kPresets[] = {
    {"gpt2-124m", 12, 12, 768, 50257, 1024},   {"gpt2-350m", 24, 16, 1024, 50257, 1024},
    {"gpt2-774m", 36, 20, 1280, 50257, 1024},  {"gpt2-1558m", 48, 25, 1600, 50257, 1024},
    {"gpt2-tiny", 2, 4, 64, 500, 64},
};
// Hugging Face's names of the same models (what `axonn plan` calls them): either name works anywhere.
constexpr std::pair<const char*, const char*> kAliases[] = {
    {"gpt2", "gpt2-124m"}, {"gpt2-medium", "gpt2-350m"}, {"gpt2-large", "gpt2-774m"}, {"gpt2-xl", "gpt2-1558m"}};
}  // namespace

GptConfig gpt_preset(std::string_view name) {
  for (const auto& [alias, preset] : kAliases)
    if (name == alias) name = preset;
  for (const Preset& p : kPresets)
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
  std::string known;
  for (const Preset& p : kPresets) known += std::string(known.empty() ? "" : ", ") + p.name;
  for (const auto& [alias, preset] : kAliases) known += std::string(", ") + alias;
  throw InvalidArgument("unknown model '" + std::string(name) + "'; known models: " + known);
}

std::vector<std::string> gpt_preset_names() {
  std::vector<std::string> v;
  for (const Preset& p : kPresets) v.emplace_back(p.name);
  return v;
}

}  // namespace axonn::model
