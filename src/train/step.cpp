// train/step.cpp — the training step and its forward half (include/axonn/train/step.hpp).
#include "axonn/train/step.hpp"

#include <cmath>
#include <limits>


namespace axonn::train {

namespace {

enum class Pass { kTrain, kEvaluate };

// The micro-batches' forwards (and, training, their backwards); returns the mean of their losses.
// `poison`: the first backward on world rank 0 scales its gradient by NaN (--fault-nonfinite-grad).
float forwards(model::Gpt& gpt, const LocalBatch& b, Pass pass, bool poison = false) {
  double loss_sum = 0.0;
  for (int k = 0; k < b.micro_batches; k++) {
    const int64_t at = k * b.micro_tokens;
    const float lk = gpt.forward(b.inputs + at, b.targets + at);
    // a non-finite loss goes on through the backward (the gradient sums must run on every rank); the
    // guard skips the update
    if (pass == Pass::kTrain) {
      double scale = 1.0 / b.micro_batches;
      if (poison && k == 0 && gpt.grid().world().rank() == 0) scale = std::numeric_limits<double>::quiet_NaN();
      gpt.backward({scale, k == b.micro_batches - 1});
    }
    loss_sum += lk;
  }
  return static_cast<float>(loss_sum / b.micro_batches);
}

}  // namespace

StepResult train_step(model::Gpt& gpt, optim::AdamW& opt, const LocalBatch& batch, const StepOptions& o) {
  {
    ProfileScope zero(o.profiler, "zero_grad");
    gpt.zero_grad();
  }
  StepResult r;
  r.loss = forwards(gpt, batch, Pass::kTrain, o.inject_nonfinite_gradient);
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
  opt.step(gpt.params(), gpt.grads(), o.lr, optim::clip_scale(r.grad_norm, o.grad_clip));
  gpt.memory().synchronize();  // the GPU's queued update belongs to this step's time
  return r;
}

float evaluate(model::Gpt& gpt, const LocalBatch& batch) {
  const float loss = forwards(gpt, batch, Pass::kEvaluate);
  gpt.weights_updated();  // the next step opens afresh, as if nothing had run in between
  return loss;
}

}  // namespace axonn::train
