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
  // every model `axonn train --model` knows (model::gpt_preset: one list of names for every command), with
  // AxoNN's launcher minimum Gx·Gy·Gz for the SC24 Perlmutter models (spec §7.2, §3.6; 1 for the others)
  static constexpr std::pair<const char*, long> kMinTp[] = {{"5B", 4},   {"10B", 8},   {"20B", 16},   {"40B", 32},
                                                            {"50B", 32}, {"60B", 64},  {"80B", 64},   {"100B", 64},
                                                            {"160B", 128}, {"175B", 128}};
  static const std::vector<ModelShape> models = [] {
    std::vector<ModelShape> v;
    for (const std::string& name : model::gpt_preset_names()) {
      long min_tp = 1;
      for (const auto& [n, tp] : kMinTp)
        if (name == n) min_tp = tp;
      v.push_back({name, model::gpt_preset(name), min_tp});
    }
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
  // Hugging Face's names of the GPT-2 family are aliases (as for model::gpt_preset).
  static constexpr std::pair<const char*, const char*> kAliases[] = {
      {"gpt2", "gpt2-124m"}, {"gpt2-medium", "gpt2-350m"}, {"gpt2-large", "gpt2-774m"}, {"gpt2-xl", "gpt2-1558m"}};
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
