#include "axonn/planner/workload.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

#include "axonn/core/error.hpp"

namespace axonn::planner {

ModelShape gpt_shape(std::string name, long layers, long hidden, long heads, long vocab, long min_tp) {
  ModelShape m;
  m.name = std::move(name);
  m.config.num_layers = static_cast<int>(layers);
  m.config.channels = static_cast<int>(hidden);
  m.config.num_heads = static_cast<int>(heads);
  m.config.vocab_size = static_cast<int>(vocab);
  m.config.padded_vocab_size = static_cast<int>(vocab);
  m.min_tp = min_tp;
  return m;
}

const std::vector<ModelShape>& known_models() {
  // SC24 Perlmutter models and AxoNN's launcher minimum Gx·Gy·Gz (spec §7.2, §3.6); the GPT-2 family;
  // the Llama family (model::gpt_preset, the shapes of the published config.json files).
  static const std::vector<ModelShape> models = [] {
    std::vector<ModelShape> v = {
        gpt_shape("5B", 24, 4096, 32, 50304, 4),         gpt_shape("10B", 32, 5120, 40, 50304, 8),
        gpt_shape("20B", 32, 7168, 56, 50304, 16),       gpt_shape("40B", 38, 9216, 72, 50304, 32),
        gpt_shape("50B", 48, 9216, 72, 50304, 32),       gpt_shape("60B", 56, 9216, 72, 50304, 64),
        gpt_shape("80B", 42, 12288, 96, 50304, 64),      gpt_shape("100B", 53, 12288, 96, 50304, 64),
        gpt_shape("160B", 84, 12288, 96, 50304, 128),    gpt_shape("175B", 96, 12288, 96, 50304, 128),
        gpt_shape("gpt2", 12, 768, 12, 50304),           gpt_shape("gpt2-medium", 24, 1024, 16, 50304),
        gpt_shape("gpt2-large", 36, 1280, 20, 50304),    gpt_shape("gpt2-xl", 48, 1600, 25, 50304),
    };
    for (const char* name : {"tinyllama-1.1b", "llama-3.2-1b", "llama-2-7b", "llama-3.1-8b", "llama-3.1-70b",
                             "llama-3.1-405b"})
      v.push_back({name, model::gpt_preset(name), 1});
    return v;
  }();
  return models;
}

std::optional<ModelShape> find_model(std::string_view name) {
  auto lower = [](std::string_view s) {
    std::string out(s);
    std::transform(out.begin(), out.end(), out.begin(),
                   [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    return out;
  };
  std::string want = lower(name);
  // The names `axonn train --model` uses for the GPT-2 family are aliases here.
  static constexpr std::pair<const char*, const char*> kAliases[] = {
      {"gpt2-124m", "gpt2"}, {"gpt2-350m", "gpt2-medium"}, {"gpt2-774m", "gpt2-large"}, {"gpt2-1558m", "gpt2-xl"}};
  for (const auto& [alias, name_here] : kAliases)
    if (want == alias) want = name_here;
  for (const ModelShape& m : known_models())
    if (lower(m.name) == want) return m;
  return std::nullopt;
}

void Workload::validate() const {
  AXONN_CHECK_ARG(model.layers() > 0, "--layers must be positive, got ", model.layers());
  AXONN_CHECK_ARG(model.hidden() > 0, "--hidden must be positive, got ", model.hidden());
  AXONN_CHECK_ARG(model.heads() > 0, "--heads must be positive, got ", model.heads());
  AXONN_CHECK_ARG(model.hidden() % model.heads() == 0 || model.config.head_dim > 0, "hidden size ", model.hidden(),
                  " is not divisible by heads ", model.heads(), "; change --hidden or --heads");
  AXONN_CHECK_ARG(model.vocab() > 0, "--vocab must be positive, got ", model.vocab());
  AXONN_CHECK_ARG(seq_len > 0, "--seq-len must be positive, got ", seq_len);
  AXONN_CHECK_ARG(positions == 0 || positions >= seq_len, "the position embedding's ", positions,
                  " rows are fewer than --seq-len ", seq_len);
  AXONN_CHECK_ARG(batch_size > 0, "--batch-size must be positive, got ", batch_size);
  AXONN_CHECK_ARG(grad_accumulation > 0, "gradient accumulation must be positive, got ", grad_accumulation);
  AXONN_CHECK_ARG(batch_size % grad_accumulation == 0, "--batch-size ", batch_size, " is not divisible by the ",
                  grad_accumulation, " micro-batches of gradient accumulation");
  (void)spec();  // the rest of the model's shape (model::GptConfig::validate)
}

model::ModelSpec Workload::spec() const {
  model::GptConfig c = model.config;
  if (c.family == model::Family::kGpt2) c.max_seq_len = static_cast<int>(position_rows());
  return model::model_spec(c);
}

double Workload::parameters() const { return static_cast<double>(spec().num_parameters()); }

std::vector<LinearLayer> block_linear_layers(const model::ModelSpec& spec) {
  std::vector<LinearLayer> v;
  for (const model::LinearSpec& l : spec.linears) v.push_back({l.name, l.in, l.out, l.transposed});
  return v;
}

namespace {
// Per token of the step: the block's linear weights (all layers), the attention's width summed over
// the layers times S, and the LM head's V·H.
struct FlopTerms {
  double tokens, linear_weights, attention, head;
};
FlopTerms flop_terms(const Workload& w) {
  const model::ModelSpec s = w.spec();
  const double L = static_cast<double>(w.model.layers()), S = static_cast<double>(w.seq_len);
  double linear = 0;
  for (const model::LinearSpec& l : s.linears) linear += static_cast<double>(l.in) * l.out;
  return {w.tokens(), linear * L, L * S * s.config.attention_width(),
          static_cast<double>(w.model.vocab()) * static_cast<double>(w.model.hidden())};
}
}  // namespace

double gpt_hardware_flops(const Workload& w) {
  const FlopTerms f = flop_terms(w);
  return f.tokens * (8 * f.linear_weights + 16 * f.attention + 6 * f.head);
}

double gpt_model_flops(const Workload& w) {
  const FlopTerms f = flop_terms(w);
  return f.tokens * (6 * f.linear_weights + 12 * f.attention + 6 * f.head);
}

}  // namespace axonn::planner
