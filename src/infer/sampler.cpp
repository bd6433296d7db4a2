// The sampler (infer/sampler.hpp).
#include "axonn/infer/sampler.hpp"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "axonn/core/error.hpp"
#include "axonn/core/random.hpp"

namespace axonn::infer {

void check_sampling(const Sampling& s) {
  AXONN_CHECK_ARG(s.temperature >= 0.0f && std::isfinite(s.temperature),
                  "--temperature must be >= 0 (0: greedy), got ", s.temperature);
  AXONN_CHECK_ARG(s.top_k >= 0, "--top-k must be >= 0 (0: no top-k cut), got ", s.top_k);
  AXONN_CHECK_ARG(s.top_p > 0.0f && s.top_p <= 1.0f, "--top-p must be in (0, 1] (1: no top-p cut), got ", s.top_p);
}

double uniform_at(uint64_t seed, int64_t sample, int64_t position) {
  const uint64_t r = splitmix64(splitmix64(splitmix64(seed) + static_cast<uint64_t>(sample)) + static_cast<uint64_t>(position));
  return static_cast<double>(r >> 11) * 0x1.0p-53;
}

std::vector<std::pair<int, double>> candidates(std::span<const float> logits, const Sampling& s) {
  const int V = static_cast<int>(logits.size());
  AXONN_CHECK(V > 0, "no logits to sample from");
  // most likely first; equal logits: lower id first
  auto before = [&](int a, int b) { return logits[a] > logits[b] || (logits[a] == logits[b] && a < b); };
  if (s.temperature == 0.0f) {
    int best = 0;
    for (int i = 1; i < V; i++)
      if (before(i, best)) best = i;
    return {{best, 1.0}};
  }
  std::vector<int> ids(static_cast<size_t>(V));
  std::iota(ids.begin(), ids.end(), 0);
  const size_t k = s.top_k > 0 ? std::min<size_t>(static_cast<size_t>(s.top_k), ids.size()) : ids.size();
  std::partial_sort(ids.begin(), ids.begin() + static_cast<std::ptrdiff_t>(k), ids.end(), before);
  ids.resize(k);
  // softmax at the temperature over the top k (in double, from the largest logit)
  std::vector<std::pair<int, double>> out;
  double sum = 0;
  for (int id : ids) {
    const double p = std::exp((static_cast<double>(logits[id]) - logits[ids[0]]) / s.temperature);
    out.emplace_back(id, p);
    sum += p;
  }
  for (auto& c : out) c.second /= sum;
  // top p: the fewest most likely tokens whose mass reaches p
  if (s.top_p < 1.0f) {
    double mass = 0;
    size_t keep = 0;
    while (keep < out.size() && mass < s.top_p) mass += out[keep++].second;
    out.resize(std::max<size_t>(keep, 1));
    double kept = 0;
    for (const auto& c : out) kept += c.second;
    for (auto& c : out) c.second /= kept;
  }
  return out;
}

int sample_token(std::span<const float> logits, const Sampling& s, double u) {
  const std::vector<std::pair<int, double>> c = candidates(logits, s);
  double cumulative = 0;
  for (const auto& [id, p] : c) {
    cumulative += p;
    if (u < cumulative) return id;
  }
  return c.back().first;  // u within rounding of 1
}

double log_softmax_at(std::span<const float> logits, int id) {
  AXONN_CHECK(id >= 0 && static_cast<size_t>(id) < logits.size(), "token id ", id, " outside the logits");
  const double max = *std::max_element(logits.begin(), logits.end());
  double sum = 0;
  for (float x : logits) sum += std::exp(static_cast<double>(x) - max);
  return static_cast<double>(logits[static_cast<size_t>(id)]) - max - std::log(sum);
}

}  // namespace axonn::infer
