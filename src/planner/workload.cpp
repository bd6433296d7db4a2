#include "axonn/planner/workload.hpp"

#include <algorithm>
#include <cctype>
#include <utility>

#include "axonn/core/error.hpp"

namespace axonn::planner {

const std::vector<ModelShape>& known_models() {
  // SC24 Perlmutter models and AxoNN's launcher minimum Gx·Gy·Gz (spec §7.2, §3.6); GPT-2 family.
  static const std::vector<ModelShape> models = {
      {"5B", 24, 4096, 32, 50304, 4},         {"10B", 32, 5120, 40, 50304, 8},
      {"20B", 32, 7168, 56, 50304, 16},       {"40B", 38, 9216, 72, 50304, 32},
      {"50B", 48, 9216, 72, 50304, 32},       {"60B", 56, 9216, 72, 50304, 64},
      {"80B", 42, 12288, 96, 50304, 64},      {"100B", 53, 12288, 96, 50304, 64},
      {"160B", 84, 12288, 96, 50304, 128},    {"175B", 96, 12288, 96, 50304, 128},
      {"gpt2", 12, 768, 12, 50304, 1},        {"gpt2-medium", 24, 1024, 16, 50304, 1},
      {"gpt2-large", 36, 1280, 20, 50304, 1}, {"gpt2-xl", 48, 1600, 25, 50304, 1},
  };
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
  AXONN_CHECK_ARG(model.layers > 0, "--layers must be positive, got ", model.layers);
  AXONN_CHECK_ARG(model.hidden > 0, "--hidden must be positive, got ", model.hidden);
  AXONN_CHECK_ARG(model.heads > 0, "--heads must be positive, got ", model.heads);
  AXONN_CHECK_ARG(model.hidden % model.heads == 0, "hidden size ", model.hidden, " is not divisible by heads ",
                  model.heads, "; change --hidden or --heads");
  AXONN_CHECK_ARG(model.vocab > 0, "--vocab must be positive, got ", model.vocab);
  AXONN_CHECK_ARG(seq_len > 0, "--seq-len must be positive, got ", seq_len);
  AXONN_CHECK_ARG(positions == 0 || positions >= seq_len, "the position embedding's ", positions,
                  " rows are fewer than --seq-len ", seq_len);
  AXONN_CHECK_ARG(batch_size > 0, "--batch-size must be positive, got ", batch_size);
  AXONN_CHECK_ARG(grad_accumulation > 0, "gradient accumulation must be positive, got ", grad_accumulation);
  AXONN_CHECK_ARG(batch_size % grad_accumulation == 0, "--batch-size ", batch_size, " is not divisible by the ",
                  grad_accumulation, " micro-batches of gradient accumulation");
}

double Workload::parameters() const {
  const double L = static_cast<double>(model.layers), H = static_cast<double>(model.hidden);
  const double V = static_cast<double>(model.vocab), S = static_cast<double>(position_rows());
  return L * (12 * H * H + 13 * H) + V * H + S * H + 2 * H;
}

std::vector<LinearLayer> block_linear_layers(long hidden) {
  return {
      {"QKV", hidden, 3 * hidden, false},
      {"out-proj", hidden, hidden, true},
      {"FC1", hidden, 4 * hidden, false},
      {"FC2", 4 * hidden, hidden, true},
  };
}

namespace {
struct Dims {
  double B, S, L, H, V;
};
Dims dims(const Workload& w) {
  return {static_cast<double>(w.batch_size), static_cast<double>(w.seq_len), static_cast<double>(w.model.layers),
          static_cast<double>(w.model.hidden), static_cast<double>(w.model.vocab)};
}
}  // namespace

double gpt_hardware_flops(const Workload& w) {
  auto [B, S, L, H, V] = dims(w);
  return 96 * B * S * L * H * H * (1 + S / (6 * H) + V / (16 * L * H));
}

double gpt_model_flops(const Workload& w) {
  auto [B, S, L, H, V] = dims(w);
  return 72 * B * S * L * H * H * (1 + S / (6 * H) + V / (12 * L * H));
}

}  // namespace axonn::planner
