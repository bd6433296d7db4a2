// A model's shards on a grid against the same model's full tensors on one rank, element by element at
// their global indices (include "shard_expect.hpp"; the grid-parity tests of the model and the step).
#pragma once

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "axonn/model/gpt.hpp"

namespace axonn::test {

// Calls visit(p, layer, j, mine, single) for element j of layer `layer` of this rank's shard of every tensor p
// in `sharded` (params or grads of `dist`), with the element at its global index in the full tensors of the
// single-rank model.
// skip_key_bias: the key bias has a zero gradient in exact arithmetic (q.b_k shifts every score of a
// query alike; softmax ignores it), so AdamW moves it by lr-sized steps in the direction of fp32
// noise, which differs between grids; it is left out of the comparison of updated weights.
template <class Visit>
inline void for_each_shard_element(const model::Gpt& dist, const Arena& sharded, const Arena& full, bool skip_key_bias,
                            Visit visit) {
  const int C = dist.config().channels;
  const bool gpt2 = dist.config().family == model::Family::kGpt2;
  for (int p = 0; p < static_cast<int>(dist.spec().params.size()); p++) {
    Tensor s = sharded.tensor(p), f = full.tensor(p);
    const int layers = dist.spec().params[static_cast<size_t>(p)].per_layer ? dist.config().num_layers : 1;
    const int64_t per_layer = s.numel() / layers, full_per_layer = dist.full_layer_numel(p);
    for (int l = 0; l < layers; l++)
      for (int64_t j = 0; j < per_layer; j++) {
        const int64_t gi = dist.global_index(p, j);
        if (skip_key_bias && gpt2 && p == model::Param::kQkvb && gi >= C && gi < 2 * C) continue;
        visit(p, l, j, s.f32()[l * per_layer + j], f.f32()[l * full_per_layer + gi]);
      }
  }
}

// Every element of this rank's shards within atol + rtol |single| of the single-rank model's.
inline void expect_shards_match(const model::Gpt& dist, const Arena& sharded, const Arena& full, float atol, float rtol,
                         const std::string& what, bool skip_key_bias = false) {
  std::vector<int> bad(dist.spec().params.size());
  for_each_shard_element(dist, sharded, full, skip_key_bias, [&](int p, int l, int64_t j, float a, float b) {
    if (!(std::fabs(a - b) <= atol + rtol * std::fabs(b)) && bad[static_cast<size_t>(p)]++ < 3)
      ADD_FAILURE() << what << " " << dist.spec().params[static_cast<size_t>(p)].name << " layer " << l << " [" << j
                    << "]: " << a
                    << " vs single-rank " << b << " on " << dist.grid().str();
  });
}

// The largest relative L2 error, over the parameter tensors, of this rank's shards against the single-rank
// model's elements at the same global indices (bf16: elementwise bounds would only measure rounding).
inline double max_relative_error(const model::Gpt& dist, const Arena& sharded, const Arena& full, bool skip_key_bias) {
  std::vector<double> diff(dist.spec().params.size()), norm(diff.size());
  for_each_shard_element(dist, sharded, full, skip_key_bias, [&](int p, int, int64_t, float a, float b) {
    diff[static_cast<size_t>(p)] += (static_cast<double>(a) - b) * (static_cast<double>(a) - b);
    norm[static_cast<size_t>(p)] += static_cast<double>(b) * b;
  });
  double worst = 0;
  for (size_t i = 0; i < diff.size(); i++)
    if (norm[i] > 0) worst = std::max(worst, std::sqrt(diff[i] / norm[i]));
  return worst;
}

}  // namespace axonn::test
