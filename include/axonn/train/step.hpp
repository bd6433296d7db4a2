// train/step.hpp — the training step: the one place that calls the model's training API.
//
// `axonn train`, its validation, bench/gpt2_step and bench/plan_validate all run this function, so
// what is measured is what trains. One step on this rank's sequences of a global batch:
//
//   gpt.zero_grad();
//   for each micro-batch k of M:  loss_k = gpt.forward(k);  gpt.backward({1/M, last = k == M-1});
//   gpt.sync_gradients();  norm = gpt.grad_norm();
//   opt.step(lr, clip_scale(norm, grad_clip));
//
// Each micro-batch's loss is the mean over its global tokens, so the step's loss and gradient (scaled
// by 1/M) are those of the mean over the whole batch; the gradient sums run once, after the last
// micro-batch. Evaluation (validation) is the same function's forward half: the forwards alone,
// no gradient, no update.
//
//   train::LocalBatch b{inputs + offset, targets + offset, micro_batches, micro_tokens};
//   train::StepResult r = train::train_step(gpt, opt, b, {lr, grad_clip});
//   float val = train::evaluate(gpt, b);
#pragma once

#include <cstdint>

#include "axonn/core/profiler.hpp"
#include "axonn/core/trace.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/optim/adamw.hpp"

namespace axonn::train {

// This rank's tokens of one global batch: `micro_batches` consecutive blocks of `micro_tokens`
// inputs and targets each (the model's B_local * T).
struct LocalBatch {
  const int* inputs = nullptr;
  const int* targets = nullptr;
  int micro_batches = 1;
  int64_t micro_tokens = 0;
};

struct StepOptions {
  float lr = 0.0f;
  float grad_clip = 0.0f;      // 0: no clipping
  Trace* trace = nullptr;      // spans "step" and "adamw_step" while the trace records
  Profiler* profiler = nullptr;  // regions "zero_grad" and "optimizer"
};

struct StepResult {
  float loss = 0.0f;       // mean loss over the global batch, before the update
  double grad_norm = 0.0;  // before clipping
};

// One training step (forwards, backwards, gradient sums, norm, AdamW update). Collective over the
// model's grid. Returns the same values on every rank.
StepResult train_step(model::Gpt& gpt, optim::AdamW& opt, const LocalBatch& batch, const StepOptions& options);

// The forward half of train_step: the mean loss over the global batch with the current weights; no
// gradient and no update. Leaves the model as a step left it (the next train_step gathers its
// weights afresh), so evaluating between steps changes no training result. Collective over the grid.
float evaluate(model::Gpt& gpt, const LocalBatch& batch);

}  // namespace axonn::train
