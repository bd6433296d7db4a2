// train/step.cpp — the training step and its forward half (include/axonn/train/step.hpp).
#include "axonn/train/step.hpp"

#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

namespace axonn::train {

namespace {

enum class Pass { kTrain, kEvaluate };

// The micro-batches' forwards (and, training, their backwards); returns the mean of their losses.
// `poison`: the first backward on world rank 0 scales its gradient by NaN (--fault-nonfinite-grad).
// `goldfish` (training only): the mean over the kept targets of the whole step, and its parts.
float forwards(model::Gpt& gpt, const LocalBatch& b, Pass pass, bool poison = false,
               const model::GoldfishMask* goldfish = nullptr, std::optional<GoldfishLosses>* report = nullptr) {
  // Goldfish: every target of the step decided first, and the kept ones of each micro-batch counted over
  // the global batch, so that each micro-batch's forward and backward know its share of the step's normaliser
  std::vector<uint8_t> keep;
  std::vector<double> micro_kept;
  double step_kept = 0.0;
  if (goldfish) {
    const int64_t tokens = b.micro_batches * b.micro_tokens;
    keep.resize(static_cast<size_t>(tokens));
    const int T = gpt.seq_len();
    goldfish->apply(b.targets, tokens / T, T, keep.data());
    for (int k = 0; k < b.micro_batches; k++) {
      const auto first = keep.begin() + k * b.micro_tokens;
      micro_kept.push_back(gpt.sum_over_batch(static_cast<double>(std::count(first, first + b.micro_tokens, 1))));
      step_kept += micro_kept.back();
    }
  }
  double loss_sum = 0.0, kept_sum = 0.0, all_sum = 0.0, all = 0.0;
  for (int k = 0; k < b.micro_batches; k++) {
    const int64_t at = k * b.micro_tokens;
    // the step's loss is the mean over its micro-batches' targets: each micro-batch's mean loss counts
    // with its share of them
    double scale = 1.0 / b.micro_batches;
    if (goldfish) scale = step_kept > 0 ? micro_kept[k] / step_kept : 0.0;  // its share of the kept targets
    // a non-finite loss goes on through the backward (the gradient sums must run on every rank); the
    // guard skips the update
    if (poison && k == 0 && gpt.grid().world().rank() == 0) scale = std::numeric_limits<double>::quiet_NaN();
    // training: the forward takes the LM head's gradient too (model::ForwardOptions)
    model::ForwardOptions forward;
    if (pass == Pass::kTrain) forward.loss_scale = scale;
    if (goldfish) forward.kept_targets = micro_kept[static_cast<size_t>(k)];  // counted above: not again
    const float lk = gpt.forward(b.inputs + at, b.targets + at, goldfish ? keep.data() + at : nullptr, forward);
    if (goldfish) {
      const model::LossParts& parts = gpt.last_loss();
      kept_sum += parts.kept_sum;
      all_sum += parts.all_sum;
      all += parts.all;
    }
    if (pass == Pass::kTrain) gpt.backward({scale, k == b.micro_batches - 1});
    loss_sum += lk;
  }
  if (!goldfish) return static_cast<float>(loss_sum / b.micro_batches);
  const double dropped = all - step_kept;
  *report = GoldfishLosses{
      .loss_all_tokens = static_cast<float>(all_sum / all),
      .loss_dropped_tokens = dropped > 0 ? static_cast<float>((all_sum - kept_sum) / dropped)
                                         : std::numeric_limits<float>::quiet_NaN(),
      .dropped_fraction = dropped / all};
  return step_kept > 0 ? static_cast<float>(kept_sum / step_kept) : 0.0f;
}

}  // namespace

StepResult train_step(model::Gpt& gpt, optim::AdamW& opt, const LocalBatch& batch, const StepOptions& o) {
  {
    ProfileScope zero(o.profiler, "zero_grad");
    gpt.zero_grad();
  }
  StepResult r;
  r.loss = forwards(gpt, batch, Pass::kTrain, o.inject_nonfinite_gradient, o.goldfish, &r.goldfish);
  gpt.sync_gradients();
  ProfileScope update(o.profiler, "optimizer");
  r.grad_norm = gpt.grad_norm();
  // Every rank sees the same loss (the global mean) and norm (the whole model's), unless a value went
  // bad after the gradient sums on some rank: the ranks agree on finiteness first, then judge alike.
  int32_t bad = std::isfinite(r.loss) && std::isfinite(r.grad_norm) ? 0 : 1;
  if (o.agreement) o.agreement->all_reduce(&bad, 1, DType::kI32, comm::ReduceOp::kMax);  // over the world
  r.verdict = bad ? Verdict::kNonFinite : o.guard ? o.guard->judge(r.loss, r.grad_norm) : Verdict::kUpdate;
  if (r.verdict != Verdict::kUpdate) return r;
  TraceScope opt_span(o.trace, "adamw_step");
  // in mixed precision the update rounds the bf16 copies of the weights in its pass
  gpt.update([&](Arena& params, Arena& grads, Arena* bf16_copies, const kernels::OpsBf16* bf16_ops) {
    opt.step(params, grads, o.lr, optim::clip_scale(r.grad_norm, o.grad_clip), {bf16_copies, bf16_ops});
  });
  return r;
}

float evaluate(model::Gpt& gpt, const LocalBatch& batch) {
  const float loss = forwards(gpt, batch, Pass::kEvaluate);
  gpt.weights_updated();  // the next step opens afresh, as if nothing had run in between
  return loss;
}

}  // namespace axonn::train
