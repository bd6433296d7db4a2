#include "axonn/optim/adamw.hpp"

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "axonn/core/error.hpp"

namespace axonn::optim {

AdamW::AdamW(const Arena& params, AdamWConfig config, std::vector<bool> decay, const kernels::Ops& ops)
    : config_(config), decay_(std::move(decay)), ops_(&ops), m_(params.clone_layout("adamw m")),
      v_(params.clone_layout("adamw v")) {
  AXONN_CHECK_ARG(config.beta1 >= 0 && config.beta1 < 1, "--beta1 must be in [0, 1), got ", config.beta1);
  AXONN_CHECK_ARG(config.beta2 >= 0 && config.beta2 < 1, "--beta2 must be in [0, 1), got ", config.beta2);
  AXONN_CHECK_ARG(config.eps > 0, "--eps must be positive, got ", config.eps);
  AXONN_CHECK_ARG(config.weight_decay >= 0, "--weight-decay must be >= 0, got ", config.weight_decay);
  AXONN_CHECK(decay_.empty() || decay_.size() == params.size(), "decay mask has ", decay_.size(),
              " entries for ", params.size(), " tensors");
  m_.allocate();
  v_.allocate();
}

void AdamW::step(Arena& params, const Arena& grads, float lr, float grad_scale, const WeightCopies& copies) {
  AXONN_CHECK_ARG((copies.arena == nullptr) == (copies.ops == nullptr),
                  "AdamW::step: weight copies need both their arena and the table that writes them");
  AXONN_CHECK(!copies.arena || copies.arena->size() == params.size(), "AdamW::step: ", copies.arena->size(),
              " weight copies for ", params.size(), " parameters");
  t_++;
  for (size_t i = 0; i < params.size(); i++) {
    Tensor p = params.tensor(i);
    float wd = (decay_.empty() || decay_[i]) ? config_.weight_decay : 0.0f;
    float* m = m_.tensor(i).f32();
    float* v = v_.tensor(i).f32();
    const float* g = grads.tensor(i).f32();
    if (copies.arena) {
      Tensor c = copies.arena->tensor(i);
      AXONN_CHECK(c.numel() == p.numel(), "AdamW::step: copy ", i, " has ", c.numel(), " elements, not ", p.numel());
      copies.ops->adamw_update(p.f32(), c.bf16(), m, v, g, p.numel(), lr, config_.beta1, config_.beta2, config_.eps,
                               wd, grad_scale, t_);
    } else {
      ops_->adamw_update(p.f32(), nullptr, m, v, g, p.numel(), lr, config_.beta1, config_.beta2, config_.eps, wd,
                         grad_scale, t_);
    }
  }
}

void AdamW::set_steps(int t) {
  AXONN_CHECK_ARG(t >= 0, "AdamW step count must be >= 0, got ", t);
  t_ = t;
}

double grad_norm(const Arena& grads, const kernels::Ops& ops) {
  double s = 0.0;
  for (double x : kernels::sums_of_squares(ops, grads)) s += x;
  return std::sqrt(s);
}

float clip_scale(double norm, float max_norm) {
  if (max_norm <= 0.0f || norm <= max_norm) return 1.0f;
  return static_cast<float>(max_norm / norm);
}

LrSchedule parse_lr_schedule(std::string_view name) {
  if (name == "constant") return LrSchedule::kConstant;
  if (name == "cosine") return LrSchedule::kCosine;
  if (name == "linear") return LrSchedule::kLinear;
  if (name == "wsd") return LrSchedule::kWarmupStableDecay;
  throw InvalidArgument("unknown --lr-schedule '" + std::string(name) + "'; use constant, cosine, linear or wsd");
}

float learning_rate(LrSchedule schedule, float lr, int step, int warmup_steps, int total_steps, float min_lr_frac) {
  if (step < warmup_steps) return lr * static_cast<float>(step + 1) / static_cast<float>(warmup_steps);
  if (schedule == LrSchedule::kConstant) return lr;
  // the decay: from the end of the warmup (wsd: the last kWsdDecayFraction of the steps) to total_steps
  const int decay_start = schedule == LrSchedule::kWarmupStableDecay
                              ? std::max(warmup_steps, total_steps - static_cast<int>(std::ceil(kWsdDecayFraction * total_steps)))
                              : warmup_steps;
  const int decay_steps = total_steps - decay_start;
  if (decay_steps <= 0 || step < decay_start) return lr;
  const double ratio = std::min(1.0, static_cast<double>(step - decay_start) / decay_steps);
  const double coeff = schedule == LrSchedule::kCosine ? 0.5 * (1.0 + std::cos(M_PI * ratio)) : 1.0 - ratio;
  const double min_lr = lr * static_cast<double>(min_lr_frac);
  return static_cast<float>(min_lr + coeff * (lr - min_lr));
}

}  // namespace axonn::optim
