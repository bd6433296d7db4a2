// train/step.hpp — the training step: the one place that calls the model's training API.
//
// `axonn train`, its validation, bench/gpt2_step and bench/plan_validate all run this function, so
// what is measured is what trains. One step on this rank's sequences of a global batch:
//
//   gpt.zero_grad();
//   for each micro-batch k of M:  loss_k = gpt.forward(k);  gpt.backward({1/M, last = k == M-1});
//   gpt.sync_gradients();  norm = gpt.grad_norm();
//   if the loss and the norm are finite (and, with a StepGuard, no outliers): opt.step(lr, clip_scale(norm, grad_clip))
//
// Each micro-batch's loss is the mean over its global tokens, so the step's loss and gradient (scaled
// by 1/M) are those of the mean over the whole batch; the gradient sums run once, after the last
// micro-batch. Evaluation (validation) is the same function's forward half: the forwards alone,
// no gradient, no update.
//
// The Goldfish loss (StepOptions::goldfish, model/goldfish.hpp, docs/goldfish.md): the mask depends only
// on the targets, so the step first decides every target of its micro-batches and sums the kept count
// over the ranks that hold other tokens (Z, data); the loss is the sum of the kept targets' losses over
// that global count, and each micro-batch's backward is weighted by its share of the kept targets
// (its mean over its kept targets times kept_k / kept). Validation stays the mean over every token.
//
//   train::LocalBatch b{inputs + offset, targets + offset, micro_batches, micro_tokens};
//   train::StepResult r = train::train_step(gpt, opt, b, {lr, grad_clip});
//   float val = train::evaluate(gpt, b);
#pragma once

#include <cstdint>
#include <optional>

#include "axonn/comm/communicator.hpp"
#include "axonn/core/profiler.hpp"
#include "axonn/core/trace.hpp"
#include "axonn/train/guard.hpp"
#include "axonn/model/goldfish.hpp"
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
  float grad_clip = 0.0f;        // 0: no clipping
  Trace* trace = nullptr;        // span "adamw_step" while the trace records
  Profiler* profiler = nullptr;  // regions "zero_grad" and "optimizer"
  // Whether the update is applied (guard.hpp); null: every step with a finite loss and norm is.
  StepGuard* guard = nullptr;
  // Where the ranks agree that the loss and norm are finite (an all-reduce of one int): a communicator
  // over every rank of the grid that takes host buffers (the MPI world). Null: each rank looks at its
  // own (alike when every NaN arises before the gradient sums).
  comm::Communicator* agreement = nullptr;
  // Testing only (--fault-nonfinite-grad): world rank 0's first backward scales its gradient by NaN, as
  // a diverging or broken rank would produce; the gradient sums carry it to every rank.
  bool inject_nonfinite_gradient = false;
  // The Goldfish loss: only the targets this mask keeps count (null: the standard loss, every target).
  const model::GoldfishMask* goldfish = nullptr;
};

// What a Goldfish step reports besides its loss (the mean over the kept targets).
struct GoldfishLosses {
  float loss_all_tokens = 0.0f;      // the mean over every target (the same forward, the mask off)
  float loss_dropped_tokens = 0.0f;  // the mean over the dropped targets (NaN when none is dropped)
  double dropped_fraction = 0.0;     // dropped targets / targets, over the global batch
};

struct StepResult {
  float loss = 0.0f;       // mean loss over the global batch (Goldfish: over its kept targets), before the update
  double grad_norm = 0.0;  // before clipping
  Verdict verdict = Verdict::kUpdate;  // anything else: the update was skipped, the optimizer untouched
  std::optional<GoldfishLosses> goldfish;  // with StepOptions::goldfish
};

// One training step (forwards, backwards, gradient sums, norm, AdamW update unless the guard skips it).
// Collective over the model's grid. Returns the same values (and verdict) on every rank.
StepResult train_step(model::Gpt& gpt, optim::AdamW& opt, const LocalBatch& batch, const StepOptions& options);

// The forward half of train_step: the mean loss over the global batch with the current weights; no
// gradient and no update. Leaves the model as a step left it (the next train_step gathers its
// weights afresh), so evaluating between steps changes no training result. Collective over the grid.
float evaluate(model::Gpt& gpt, const LocalBatch& batch);

}  // namespace axonn::train
