// measure/step_bench.cpp — the step benchmarks' tokens and timing (step_bench.hpp).
#include "axonn/measure/step_bench.hpp"

#include "axonn/measure/timing.hpp"
#include "axonn/core/timer.hpp"

namespace axonn::measure {

train::LocalBatch BenchTokens::batch() const {
  return {inputs.data(), targets.data(), 1, static_cast<int64_t>(inputs.size())};
}

BenchTokens bench_tokens(const model::GptConfig& cfg, const parallel::Grid& grid, int B_local, int T) {
  BenchTokens t;
  const size_t n = static_cast<size_t>(B_local) * static_cast<size_t>(T);
  t.inputs.resize(n);
  t.targets.resize(n);
  // this rank's block of the global batch: d*Gz + z
  const size_t offset = (static_cast<size_t>(grid.coords().d) * grid.shape().gz + grid.coords().z) * n;
  const auto V = static_cast<size_t>(cfg.vocab_size);
  for (size_t i = 0; i < n; i++) {
    t.inputs[i] = static_cast<int>(((offset + i) * 7919) % V);
    t.targets[i] = static_cast<int>(((offset + i) * 104729 + 1) % V);
  }
  return t;
}

double time_train_steps(comm::Communicator& world, model::Gpt& gpt, optim::AdamW& opt, const train::LocalBatch& b,
                        int steps, const train::StepOptions& options, float* loss) {
  world.barrier();
  Timer t;
  train::StepResult r;
  for (int i = 0; i < steps; i++) r = train::train_step(gpt, opt, b, options);
  if (loss) *loss = r.loss;
  return max_over(world, t.seconds() / steps);  // the slowest rank
}

}  // namespace axonn::measure
