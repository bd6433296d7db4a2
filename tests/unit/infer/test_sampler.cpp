// The sampler: greedy ties, the temperature's softmax, top-k and top-p truncation, the counter-based
// uniform draws, and sampling frequencies against the distribution.
#include <gtest/gtest.h>

#include <cmath>
#include <map>
#include <vector>

#include "axonn/core/error.hpp"
#include "axonn/infer/sampler.hpp"

using axonn::infer::candidates;
using axonn::infer::Sampling;
using axonn::infer::sample_token;
using axonn::infer::uniform_at;

namespace {

Sampling at(float temperature, int top_k = 0, float top_p = 1.0f) { return {temperature, top_k, top_p, 0}; }

std::vector<int> ids_of(const std::vector<std::pair<int, double>>& c) {
  std::vector<int> ids;
  for (const auto& [id, p] : c) ids.push_back(id);
  return ids;
}

}  // namespace

TEST(Sampler, GreedyTakesTheLargestLogitAndTiesGoToTheLowestId) {
  const std::vector<float> logits = {0.5f, 2.0f, -1.0f, 2.0f, 1.9f};
  EXPECT_EQ(sample_token(logits, at(0), 0.99), 1);
  const auto c = candidates(logits, at(0));
  ASSERT_EQ(c.size(), 1u);
  EXPECT_EQ(c[0].first, 1);
  EXPECT_EQ(c[0].second, 1.0);
  EXPECT_EQ(sample_token(std::vector<float>{3, 3, 3}, at(0), 0.5), 0);
}

TEST(Sampler, SoftmaxAtTheTemperatureMostLikelyFirst) {
  const std::vector<float> logits = {1.0f, 3.0f, 2.0f};
  for (float T : {0.5f, 1.0f, 2.0f}) {
    const auto c = candidates(logits, at(T));
    EXPECT_EQ(ids_of(c), (std::vector<int>{1, 2, 0}));
    const double z = std::exp(1.0 / T) + std::exp(3.0 / T) + std::exp(2.0 / T);
    EXPECT_NEAR(c[0].second, std::exp(3.0 / T) / z, 1e-12);
    EXPECT_NEAR(c[1].second, std::exp(2.0 / T) / z, 1e-12);
    EXPECT_NEAR(c[2].second, std::exp(1.0 / T) / z, 1e-12);
  }
}

TEST(Sampler, TopKKeepsTheKMostLikelyRenormalised) {
  const std::vector<float> logits = {0.0f, 4.0f, 1.0f, 3.0f, 2.0f};
  const auto c = candidates(logits, at(1, 2));
  EXPECT_EQ(ids_of(c), (std::vector<int>{1, 3}));
  const double z = std::exp(4.0) + std::exp(3.0);
  EXPECT_NEAR(c[0].second, std::exp(4.0) / z, 1e-12);
  EXPECT_NEAR(c[1].second, std::exp(3.0) / z, 1e-12);
  EXPECT_EQ(candidates(logits, at(1, 100)).size(), logits.size());  // k beyond V: all
  EXPECT_EQ(ids_of(candidates(logits, at(1, 1))), (std::vector<int>{1}));
}

TEST(Sampler, TopPKeepsTheFewestTokensReachingTheMass) {
  // probabilities 0.5, 0.25, 0.125, 0.125 (logits log p)
  const std::vector<float> logits = {std::log(0.125f), std::log(0.5f), std::log(0.125f), std::log(0.25f)};
  EXPECT_EQ(ids_of(candidates(logits, at(1, 0, 0.5f))), (std::vector<int>{1}));
  EXPECT_EQ(ids_of(candidates(logits, at(1, 0, 0.6f))), (std::vector<int>{1, 3}));
  EXPECT_EQ(ids_of(candidates(logits, at(1, 0, 0.75f))), (std::vector<int>{1, 3}));
  EXPECT_EQ(ids_of(candidates(logits, at(1, 0, 0.8f))), (std::vector<int>{1, 3, 0}));  // tie: the lower id
  EXPECT_EQ(ids_of(candidates(logits, at(1, 0, 0.01f))), (std::vector<int>{1}));       // at least one
  const auto c = candidates(logits, at(1, 0, 0.6f));
  EXPECT_NEAR(c[0].second, 2.0 / 3.0, 1e-6);
  EXPECT_NEAR(c[1].second, 1.0 / 3.0, 1e-6);
  // top-k first, then top-p of what is left
  EXPECT_EQ(ids_of(candidates(logits, at(1, 3, 0.7f))), (std::vector<int>{1, 3}));
}

TEST(Sampler, DrawsFallInTheCumulativeIntervals) {
  const std::vector<float> logits = {std::log(0.25f), std::log(0.75f)};  // order: 1 (0.75), 0 (0.25)
  EXPECT_EQ(sample_token(logits, at(1), 0.0), 1);
  EXPECT_EQ(sample_token(logits, at(1), 0.74), 1);
  EXPECT_EQ(sample_token(logits, at(1), 0.76), 0);
  EXPECT_EQ(sample_token(logits, at(1), 1.0 - 1e-17), 0);
}

TEST(Sampler, CounterBasedUniformsAreUniformAndKeyedBySeedSampleAndPosition) {
  EXPECT_EQ(uniform_at(7, 2, 30), uniform_at(7, 2, 30));
  EXPECT_NE(uniform_at(7, 2, 30), uniform_at(8, 2, 30));
  EXPECT_NE(uniform_at(7, 2, 30), uniform_at(7, 3, 30));
  EXPECT_NE(uniform_at(7, 2, 30), uniform_at(7, 2, 31));
  // sampling frequencies of a 3-token distribution over many positions
  const std::vector<float> logits = {std::log(0.2f), std::log(0.5f), std::log(0.3f)};
  std::map<int, int> count;
  constexpr int n = 20000;
  double mean = 0;
  for (int i = 0; i < n; i++) {
    const double u = uniform_at(1, 0, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    mean += u / n;
    count[sample_token(logits, at(1), u)]++;
  }
  EXPECT_NEAR(mean, 0.5, 0.01);
  EXPECT_NEAR(count[0] / double(n), 0.2, 0.015);
  EXPECT_NEAR(count[1] / double(n), 0.5, 0.015);
  EXPECT_NEAR(count[2] / double(n), 0.3, 0.015);
}

TEST(Sampler, BadOptionsAreRefused) {
  using axonn::infer::check_sampling;
  EXPECT_NO_THROW(check_sampling(at(0)));
  EXPECT_THROW(check_sampling(at(-0.1f)), axonn::InvalidArgument);
  EXPECT_THROW(check_sampling(at(1, -1)), axonn::InvalidArgument);
  EXPECT_THROW(check_sampling(at(1, 0, 0.0f)), axonn::InvalidArgument);
  EXPECT_THROW(check_sampling(at(1, 0, 1.5f)), axonn::InvalidArgument);
  EXPECT_NO_THROW(check_sampling(at(1, 0, 1.0f)));
}
