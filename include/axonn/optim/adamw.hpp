// optim/adamw.hpp — AdamW over a parameter arena, the learning-rate schedule, and gradient-norm
// clipping.
//
//   optim::AdamW opt(gpt.params(), hp, decay_mask, ops);
//   double norm = optim::grad_norm(gpt.grads(), ops);
//   opt.step(gpt.params(), gpt.grads(), lr, optim::clip_scale(norm, hp.grad_clip));
// In mixed precision the step also writes the bf16 copies of the weights in its pass (WeightCopies):
//   opt.step(gpt.params(), gpt.grads(), lr, scale, {gpt.bf16_copies(), gpt.bf16_ops()});
//   gpt.bf16_copies_written();
#pragma once

#include <string_view>
#include <vector>

#include "axonn/kernels/ops.hpp"
#include "axonn/tensor/arena.hpp"

namespace axonn::optim {

struct AdamWConfig {
  float beta1 = 0.9f;
  float beta2 = 0.999f;
  float eps = 1e-8f;
  float weight_decay = 0.0f;
};

// The copies of the parameters that a mixed-precision model's kernels read (model::Gpt::bf16_copies()), and
// the table whose fused update rounds each updated weight into its copy in the same pass. Empty: none (fp32,
// or a model that rounds its copies itself).
struct WeightCopies {
  Arena* arena = nullptr;                 // params' layout, bf16
  const kernels::OpsBf16* ops = nullptr;  // its adamw_update writes them
};

class AdamW {
 public:
  // First and second moments mirror `params`' layout. decay[i] says whether slot i takes weight
  // decay (empty: every slot does, as llm.c's CPU trainer).
  AdamW(const Arena& params, AdamWConfig config, std::vector<bool> decay, const kernels::Ops& ops);

  // One update with step count t = steps() + 1; gradients are multiplied by grad_scale first. With copies,
  // each weight's copy is rounded from its new value in the same pass (copies.ops' adamw_update: the same
  // AdamW, though the cpu table's fp32 and bf16 instantiations may round the masters differently in the last
  // bits, docs/precision.md).
  void step(Arena& params, const Arena& grads, float lr, float grad_scale = 1.0f, const WeightCopies& copies = {});
  int steps() const { return t_; }
  const Arena& m() const { return m_; }
  const Arena& v() const { return v_; }
  // For restoring a checkpoint: the moments to load into, and the step count t to continue from.
  Arena& m() { return m_; }
  Arena& v() { return v_; }
  void set_steps(int t);
  size_t state_bytes() const { return m_.bytes() + v_.bytes(); }

 private:
  AdamWConfig config_;
  std::vector<bool> decay_;
  const kernels::Ops* ops_;
  Arena m_, v_;
  int t_ = 0;
};

// L2 norm of all gradients.
double grad_norm(const Arena& grads, const kernels::Ops& ops);
// The factor that brings the norm down to max_norm when it is above (1 otherwise; max_norm <= 0
// disables clipping).
float clip_scale(double norm, float max_norm);

enum class LrSchedule { kConstant, kCosine, kLinear, kWarmupStableDecay };
LrSchedule parse_lr_schedule(std::string_view name);  // "constant" | "cosine" | "linear" | "wsd"

// wsd's decay: the last fifth of the steps (MiniCPM's warmup-stable-decay, with a linear decay).
inline constexpr double kWsdDecayFraction = 0.2;

// Learning rate at step (0-based): linear warmup over warmup_steps ((step+1)/warmup of the peak),
// then constant; or a decay to min_lr_frac * lr at total_steps: cosine (llm.c's schedule) or linear from
// the end of the warmup; or wsd, constant until the last kWsdDecayFraction of the steps, then linear.
float learning_rate(LrSchedule schedule, float lr, int step, int warmup_steps, int total_steps, float min_lr_frac);

}  // namespace axonn::optim
