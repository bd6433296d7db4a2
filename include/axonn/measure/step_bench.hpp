// measure/step_bench.hpp — timing the training step (bench/gpt2_step, bench/plan_validate): the step
// `axonn train` runs (train::train_step), on tokens that need no data file.
//
//   measure::BenchTokens tokens = measure::bench_tokens(cfg, grid, B_local, T);
//   train::train_step(gpt, opt, tokens.batch(), options);                     // warm-up
//   double s = measure::time_train_steps(world, gpt, opt, tokens.batch(), 5, options);
#pragma once

#include <vector>

#include "axonn/comm/communicator.hpp"
#include "axonn/model/gpt.hpp"
#include "axonn/optim/adamw.hpp"
#include "axonn/parallel/grid.hpp"
#include "axonn/train/step.hpp"

namespace axonn::measure {

// This rank's B_local*T tokens of a deterministic global batch: input i (the global token index) is
// (i*7919) % V, its target (i*104729 + 1) % V, so every grid trains on the same batch.
struct BenchTokens {
  std::vector<int> inputs, targets;
  train::LocalBatch batch() const;  // one micro-batch of all of them
};
BenchTokens bench_tokens(const model::GptConfig& cfg, const parallel::Grid& grid, int B_local, int T);

// Mean seconds per step over `steps` train_steps after a barrier, the slowest rank's; the last loss in
// *loss if given. Collective over world (and the model's grid).
double time_train_steps(comm::Communicator& world, model::Gpt& gpt, optim::AdamW& opt, const train::LocalBatch& b,
                        int steps, const train::StepOptions& options, float* loss = nullptr);

}  // namespace axonn::measure
