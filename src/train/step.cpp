// train/step.cpp — the training step and its forward half (include/axonn/train/step.hpp).
#include "axonn/train/step.hpp"

#include <cmath>

#include "axonn/core/error.hpp"

namespace axonn::train {

namespace {

enum class Pass { kTrain, kEvaluate };

// The micro-batches' forwards (and, training, their backwards); returns the mean of their losses.
float forwards(model::Gpt& gpt, const LocalBatch& b, Pass pass) {
  double loss_sum = 0.0;
  for (int k = 0; k < b.micro_batches; k++) {
    const int64_t at = k * b.micro_tokens;
    const float lk = gpt.forward(b.inputs + at, b.targets + at);
    if (pass == Pass::kTrain) {
      AXONN_CHECK(std::isfinite(lk), "the loss is ", lk, "; training diverged: lower --lr or enable --grad-clip");
      gpt.backward({1.0 / b.micro_batches, k == b.micro_batches - 1});
    }
    loss_sum += lk;
  }
  return static_cast<float>(loss_sum / b.micro_batches);
}

}  // namespace

StepResult train_step(model::Gpt& gpt, optim::AdamW& opt, const LocalBatch& batch, const StepOptions& o) {
  TraceScope step_span(o.trace, "step", SpanKind::kGroup);
  {
    ProfileScope zero(o.profiler, "zero_grad");
    gpt.zero_grad();
  }
  StepResult r;
  r.loss = forwards(gpt, batch, Pass::kTrain);
  gpt.sync_gradients();
  ProfileScope update(o.profiler, "optimizer");
  r.grad_norm = gpt.grad_norm();
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
