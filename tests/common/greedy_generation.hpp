// tests/common/greedy_generation.hpp — the generation that the backends' generation tests compare (GpuGenerate on a
// GPU, the emulated kernels' on the CPU): two prompts of different lengths, 20 greedy tokens each with their
// log-probabilities, no stop id.
#pragma once

#include <vector>

#include "axonn/infer/generator.hpp"

namespace axonn::test {

inline const std::vector<std::vector<int>> kGreedyPrompts = {{11, 22, 33, 44}, {5, 6}};

inline infer::GenerateOptions greedy_with_logprobs() {
  infer::GenerateOptions o;
  o.max_new_tokens = 20;
  o.sampling.temperature = 0;
  o.stop_ids = {-1};
  o.logprobs = true;
  return o;
}

}  // namespace axonn::test
